"""The Parquet store: one folder per table, atomic file writes, lazy scans.

Layout: `STORE/<table>/<file_id>-<first_line>-<n>.parquet`.  A file is written under a
temporary name (`*.parquet.tmp`, which the `**/*.parquet` glob does not match) and renamed
into place, so a reader never sees half a file.  Every file of a table has the table's fixed
schema (loglens.schema), so all of them scan as one table.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from loglens.schema import TABLES, conform, empty

DEFAULT_STORE = ".loglens"

# pyarrow's jemalloc pool (where the wheel has it, and unless the user chose one): like polars'
# allocator it keeps freed memory for reuse, which saves page faults chunk after chunk (with
# the polars setting in loglens/__init__.py, a third fewer in a 1 GiB ingest)
if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except (NotImplementedError, pa.ArrowException):
        pass

#: Parquet settings (pyarrow's writer, which takes per-column choices).  LZ4 and dictionaries
#: only for the few-valued text columns: writing is ~40 % cheaper than zstd with dictionaries
#: everywhere (ingest writes every row once), files ~2x larger (~13 % of the log), and LZ4
#: reads back faster.  Min/max statistics on the columns queries filter by, for pushdown.
_DICTIONARY = ["source", "file_id", "variant", "graph_device", "level", "method", "path", "status_text",
               "http_version", "kind", "client_addr"]
_STATISTICS = ["ts", "line_no", "file_id", "source", "kind"]
#: rows the writer encodes per step (its default, 1024, spends ~6 % of writing on the steps)
_BATCH_ROWS = 65536
#: integer columns (line numbers, request and token counts) are delta-encoded: neighbouring
#: rows differ little, so this is both cheaper to write than LZ4 over plain values (~6 % of the
#: writing) and ~2.5x smaller (a 1 GiB log's store ~40 % smaller); timestamps stay plain (LZ4
#: already packs their repeats better)
_DELTA = {t: {c: "DELTA_BINARY_PACKED" for c, d in cols.items() if d in (pl.Int64, pl.Int32)} for t, cols in TABLES.items()}

#: data files are named `<file_id>-<first row's line:012d><rest>.parquet`; the resume and
#: compaction rules depend on it, so it is parsed in this one place
_DATA_NAME = re.compile(r"^(?P<fid>[0-9a-f]{16}(?:-\d+)?)-(?P<first>\d{12})(?P<rest>.*)\.parquet$")


def parse_data_name(name: str) -> tuple[str, int, str] | None:
    """`<file_id>-<first_line:012d><rest>.parquet` → (file_id, first_line, rest), else None."""
    m = _DATA_NAME.match(name)
    return (m["fid"], int(m["first"]), m["rest"]) if m else None


def resolve_store_path(store: str | os.PathLike | None) -> Path:
    """`--store DIR`, else `$LOGLENS_STORE`, else `.loglens` in the working directory."""
    if store:
        return Path(store)
    env = os.environ.get("LOGLENS_STORE")
    return Path(env) if env else Path(DEFAULT_STORE)


class Store:
    def __init__(self, path: str | os.PathLike | None = None):
        self.path = resolve_store_path(path)

    # ---- reading -------------------------------------------------------------------
    def table_dir(self, table: str) -> Path:
        if table not in TABLES:
            raise KeyError(f"unknown table {table!r}")
        return self.path / table

    def files_of(self, table: str, name_prefix: str = "") -> list[Path]:
        """The table's data files (only those whose name starts with `name_prefix`), sorted."""
        d = self.table_dir(table)
        if not d.is_dir():
            return []
        return sorted(d.rglob(f"{name_prefix}*.parquet"))

    def exists(self) -> bool:
        return self.path.is_dir() and (self.path / "files").is_dir()

    def scan(self, table: str) -> pl.LazyFrame:
        """The whole table as a LazyFrame (an empty frame with the schema if nothing is there)."""
        files = self.files_of(table)
        if not files:
            return empty(table).lazy()
        return pl.scan_parquet([str(f) for f in files], schema=TABLES[table])

    def read(self, table: str) -> pl.DataFrame:
        return self.scan(table).collect()

    # ---- writing -------------------------------------------------------------------
    def write(self, table: str, df: pl.DataFrame, name: str | None = None, constants: dict[str, str] | None = None) -> Path | None:
        """Write `df` as one new Parquet file of `table`, atomically. Empty frames write nothing.

        `constants` are text columns with one value on every row (`source`, `file_id`): they
        are handed to the writer as dictionary arrays, so it does not hash the same value on
        every row."""
        if df.height == 0:
            return None
        d = self.table_dir(table)
        d.mkdir(parents=True, exist_ok=True)
        name = name or uuid.uuid4().hex
        final = d / f"{name}.parquet"
        tmp = d / f".{name}.{uuid.uuid4().hex[:8]}.parquet.tmp"
        # Arrow's newest layout keeps polars' string views as they are (no conversion to
        # offsets); without the Arrow schema in the file, readers see plain Parquet strings
        arrow = conform(df.drop(list(constants or ()), strict=False), table).to_arrow(compat_level=pl.CompatLevel.newest())
        for col, value in (constants or {}).items():
            i = arrow.schema.get_field_index(col)
            codes = pa.array(np.zeros(df.height, dtype=np.int32))
            arrow = arrow.set_column(i, col, pa.DictionaryArray.from_arrays(codes, pa.array([value], pa.string())))
        pq.write_table(arrow, tmp, compression="lz4", use_dictionary=_DICTIONARY, write_statistics=_STATISTICS,
                       column_encoding=_DELTA[table], store_schema=False, write_batch_size=_BATCH_ROWS)
        os.replace(tmp, final)
        return final

    def replace_files(self, table: str, old: list[Path], df: pl.DataFrame, name: str) -> None:
        """Swap `old` files for one file holding `df` (compaction). The new file lands first,
        then the old ones go, so a reader may briefly see rows twice but never loses any."""
        self.write(table, df, name=name)
        for f in old:
            if f.name != f"{name}.parquet":
                f.unlink(missing_ok=True)

    def clean_tmp(self) -> None:
        """Remove temporary files left by an interrupted writer."""
        if self.path.is_dir():
            for f in self.path.rglob("*.parquet.tmp"):
                f.unlink(missing_ok=True)
