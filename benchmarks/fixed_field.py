"""The reference pass: polars with one fixed field order and no version tolerance.

    python benchmarks/fixed_field.py LOG OUTDIR

What a polars parser costs when it knows one release's exact layout (the `current` mix of
gen_log.py: today's `[YYYY-MM-DD HH:MM:SS TP0] ` prefix, its one Decode and one Prefill key
order, uvicorn access lines) and checks nothing: no key is compared, every other non-empty line
is an `events` row of its own (no traceback folding, no event kinds; blank lines make no row,
as in loglens), a value that does not parse is
a null (no rejects, no `extra`, no `files` table).  It shares everything else with `loglens
ingest`, so that the two differ only in the tolerance: the reader (loglens.reader), the
prefix's fast path and the access lines' fast path (loglens.parsers), the worker threads and
chunk size, and the store's writer (schema, Parquet settings).

The issue behind benchmarks/ingest.py cites such a pass ("a fixed-field-order polars pass
reached about 270 MB/s here"); the harness runs this one beside loglens and rg, so that the
cost of tolerance, and how far a polars pass is from `rg -c`, are measured in the same run.
It prints one JSON object with the row count per table on stdout.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from loglens.ingest import PARSE_THREADS
from loglens.parsers.access import _split_fields as access_fields
from loglens.parsers.prefix import PREFIX_COLUMNS, split_prefix
from loglens.reader import CHUNK_BYTES, Chunk, iter_chunks, lines_frame
from loglens.store import Store

#: the one Decode and Prefill key order of the current mix, and each key's column and type
DECODE_KEYS = [("#running-req", "running_req", pl.Int64), ("#token", "token", pl.Int64),
               ("token usage", "token_usage", pl.Float64), ("cuda graph", "cuda_graph", pl.Boolean),
               ("gen throughput (token/s)", "gen_throughput", pl.Float64), ("#queue-req", "queue_req", pl.Int64)]
PREFILL_KEYS = [("#new-seq", "new_seq", pl.Int64), ("#new-token", "new_token", pl.Int64),
                ("#cached-token", "cached_token", pl.Int64), ("token usage", "token_usage", pl.Float64),
                ("#running-req", "running_req", pl.Int64), ("#queue-req", "queue_req", pl.Int64),
                ("input throughput (token/s)", "input_throughput", pl.Float64), ("cuda graph", "cuda_graph", pl.Boolean)]
BATCH_TABLES = ("decode", "prefill")
ROW = ["line_no", *PREFIX_COLUMNS, "proc"]


def batch_rows(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Decode or Prefill lines of the one key order: cut on `, `, the key cut off each piece."""
    keys = DECODE_KEYS if table == "decode" else PREFILL_KEYS
    names = [f"_f{i}" for i in range(len(keys) + 1)]
    df = df.with_columns(_f=pl.col("msg").str.split_exact(", ", len(keys)).struct.rename_fields(names)).unnest("_f")
    values = []
    for i, (key, col, dtype) in enumerate(keys):
        v = pl.col(f"_f{i + 1}").str.slice(len(key) + 2)
        values.append((v == "True" if dtype == pl.Boolean else v.cast(dtype, strict=False)).alias(col))
    return df.select(*ROW, *values)


def parse(chunk: Chunk, first_no: int, store: Store, source: str) -> dict[str, int]:
    """One chunk → its rows, written.  The prefix is loglens's own (today's layout is read by
    position there, the fastest way found), the access lines take loglens's fast path without
    its fallback; the batch lines are cut by the one key order, and nothing is checked."""
    df = split_prefix(lines_frame(chunk.data, first_no, chunk.start, chunk.newlines))
    msg = pl.col("msg")
    head = msg.str.slice(0, 12)  # (12 characters: kept inline, compared as one word)
    fam = (pl.when(head == "Decode batch").then(pl.lit("decode"))
           .when(head == "Prefill batc").then(pl.lit("prefill"))
           .when(msg.str.starts_with("INFO:") & msg.str.contains(' - "', literal=True)).then(pl.lit("http"))
           .when(pl.col("line").str.len_bytes() > 0).then(pl.lit("events")))
    df = df.with_columns(_fam=fam).drop("line", "byte_off", "_first", "_pfx")
    tables = {t: batch_rows(df.filter(pl.col("_fam") == t), t) for t in BATCH_TABLES}
    http = df.filter(pl.col("_fam") == "http")
    tables["http"] = http.select(ROW).hstack(access_fields(http)[0])  # (the fields; not which rows parsed)
    tables["events"] = df.filter(pl.col("_fam") == "events").select(*ROW, pl.col("line_no").alias("line_end"), pl.col("msg").alias("message"))
    name = f"fixed-{first_no:012d}"
    for table, rows in tables.items():
        store.write(table, rows, name=name, constants={"source": source, "file_id": "fixed"})
    return {t: rows.height for t, rows in tables.items()}


def ingest(log: str, out: str) -> dict[str, int]:
    store = Store(Path(out))
    counts: dict[str, int] = {}
    pending = []

    def collect(future):
        for t, n in future.result().items():
            counts[t] = counts.get(t, 0) + n

    line_no = 1
    with ThreadPoolExecutor(PARSE_THREADS) as pool:
        for chunk in iter_chunks(Path(log), 0, CHUNK_BYTES):
            pending.append(pool.submit(parse, chunk, line_no, store, log))
            line_no += chunk.lines
            while len(pending) >= PARSE_THREADS:  # (as loglens: no more chunks in memory than workers)
                collect(pending.pop(0))
        for future in pending:
            collect(future)
    counts["lines"] = line_no - 1
    return counts


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    print(json.dumps(ingest(sys.argv[1], sys.argv[2])))
