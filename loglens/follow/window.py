"""The recent rows of the followed log, kept in memory and refreshed from the store's new files.

Re-scanning the whole store every second would make the live view cost grow with the store;
instead only Parquet files not seen before are read (a file is known by name and inode: ingest
rewrites a held-back `-tail` file under the same name, compaction writes merged files that
repeat rows).  Rows are de-duplicated on (file_id, line_no), keeping the newest copy, and
trimmed to the last `horizon_s` of log time.
"""

from __future__ import annotations

import os
from datetime import timedelta

import polars as pl

from loglens.schema import LINE_TABLES, empty
from loglens.store import Store

HORIZON_S = 360  # a little more than the status history (5 min)
MAX_ROWS = 200_000  # per table, whatever the time span


class RecentRows:
    def __init__(self, store: Store, sources: set[str], horizon_s: int = HORIZON_S, max_rows: int = MAX_ROWS):
        self.store = store
        self.sources = sources  # shared with the follower: lineages it meets add their source
        self.horizon_s = horizon_s
        self.max_rows = max_rows
        self.frames: dict[str, pl.DataFrame] = {t: empty(t) for t in LINE_TABLES}
        self.seen: dict[str, set[tuple[str, int]]] = {t: set() for t in LINE_TABLES}
        self.loaded = False

    def _listing(self, table: str) -> list[tuple[str, int, int]]:
        """(name, inode, mtime_ns) of the table's visible files."""
        d = self.store.path / table
        try:
            entries = list(os.scandir(d))
        except OSError:
            return []
        out = []
        for e in entries:
            if e.name.endswith(".parquet") and e.is_file():
                try:
                    st = e.stat()
                except OSError:
                    continue  # removed while listing (a superseded tail, a merged file's inputs)
                out.append((e.name, st.st_ino, st.st_mtime_ns))
        return out

    def refresh(self) -> bool:
        """Read what is new; True if any rows arrived."""
        grew = False
        for table in LINE_TABLES:
            listing = self._listing(table)
            new = [(n, ino, mt) for n, ino, mt in listing if (n, ino) not in self.seen[table]]
            self.seen[table] = {(n, ino) for n, ino, _ in listing}
            if not new:
                continue
            # newest first, so a first load of a big store stops once it has enough rows
            new.sort(key=lambda x: x[2], reverse=True)
            parts, rows = [], 0
            for name, _, _ in new:
                df = self._read(table, name)
                if df is not None and df.height:
                    parts.append(df)
                    rows += df.height
                if not self.loaded and rows >= self.max_rows:
                    break
            if parts:
                grew = True
                self.frames[table] = self._trim(pl.concat([self.frames[table], *reversed(parts)], how="vertical"))
        self.loaded = True
        return grew

    def _read(self, table: str, name: str) -> pl.DataFrame | None:
        try:
            df = pl.read_parquet(self.store.path / table / name)
        except (OSError, pl.exceptions.ComputeError):
            return None  # gone between listing and reading: its rows are in the file that replaced it
        return df.filter(pl.col("source").is_in(list(self.sources)))

    def _trim(self, df: pl.DataFrame) -> pl.DataFrame:
        df = df.unique(subset=["file_id", "line_no"], keep="last", maintain_order=True)
        newest = df["ts"].max()
        if newest is not None:
            df = df.filter(pl.col("ts").is_null() | (pl.col("ts") >= newest - timedelta(seconds=self.horizon_s)))
        return df.tail(self.max_rows)
