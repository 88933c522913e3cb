"""The naive baseline: a per-line Python loop with `re`, writing the store's tables with pyarrow.

    python benchmarks/naive_ingest.py LOG OUTDIR

This is the honest straightforward implementation of the same job as `loglens ingest`, not a
strawman: one compiled regex per family, `for line in f:`, a row dict per record, the store's
column names and types (loglens/schema.py), Parquet written in batches so memory stays bounded.
It parses every Decode/Prefill shape of sglang-variants.txt by splitting the body on `, ` into
`key: value` pairs (the strategy the format notes recommend), uvicorn access lines, and groups
traceback continuation lines (no `[time]` prefix) into the event above them.

It prints one JSON object with the row count per table (and the line counts) on stdout.
Deliberately self-contained (no polars, no loglens import) so its cost is plain Python + pyarrow.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime, time

import pyarrow as pa
import pyarrow.parquet as pq

BATCH_ROWS = 250_000  # rows per table held in memory before a row group is written

# ---------------------------------------------------------------------------------------
# column types (names and types as in loglens/schema.py; tests check they agree)

TS = pa.timestamp("us")
I64, I32, F64, BOOL, STR = pa.int64(), pa.int32(), pa.float64(), pa.bool_(), pa.string()
RANK_COLUMNS = ["dp_rank", "pp_rank", "attn_cp_rank", "moe_dp_rank", "tp_rank", "ep_rank"]
_PREFIX_COLS = [("ts", TS), ("clock", pa.time64("us"))] + [(c, I32) for c in RANK_COLUMNS] + [("gpu", I32)]
_ROW_ID = [("source", STR), ("line_no", I64)]

_DECODE_FIELDS = {
    "iter": I64, "running_req": I64, "token": I64, "token_usage": F64, "full_token": I64,
    "full_token_usage": F64, "swa_token": I64, "swa_token_usage": F64, "mamba_num": I64,
    "mamba_usage": F64, "gpu_token": I64, "gpu_token_usage": F64, "cpu_token": I64,
    "cpu_token_usage": F64, "accept_len": F64, "accept_rate": F64, "cap_len": F64,
    "block_accept_len": F64, "pre_allocated_usage": F64, "prealloc_req": I64, "transfer_req": I64,
    "host_receive_req": I64, "retracted_req": I64, "waiting_image_req": I64, "largest_len": I64,
    "cuda_graph": BOOL, "graph_device": STR, "gen_throughput": F64, "queue_req": I64,
    "est_decode_tflops_s": F64, "est_read_bw": F64, "est_write_bw": F64, "fwd_occupancy": F64,
    "timestamp": TS, "extra": STR,
}
_PREFILL_FIELDS = {
    "iter": I64, "mixed": BOOL, "new_seq": I64, "new_token": I64, "cached_token": I64,
    "cache_hit_rate": F64, "token": I64, "token_usage": F64, "full_token_usage": F64,
    "swa_token_usage": F64, "mamba_usage": F64, "gpu_token_usage": F64, "cpu_token_usage": F64,
    "running_req": I64, "queue_req": I64, "pending_token": I64, "replay_token": I64,
    "unbootstrapped_req": I64, "transferring_req": I64, "bootstrap_req": I64, "prealloc_req": I64,
    "inflight_req": I64, "optimistic_req": I64, "waiting_image_req": I64, "cuda_graph": BOOL,
    "graph_device": STR, "input_throughput": F64, "est_prefill_tflops_s": F64,
    "fwd_occupancy": F64, "time": F64, "timestamp": TS, "extra": STR,
}
SCHEMAS = {
    "decode": pa.schema(_PREFIX_COLS + _ROW_ID + list(_DECODE_FIELDS.items())),
    "prefill": pa.schema(_PREFIX_COLS + _ROW_ID + list(_PREFILL_FIELDS.items())),
    "http": pa.schema([("ts", TS), ("clock", pa.time64("us"))] + _ROW_ID + [
        ("level", STR), ("client_addr", STR), ("client_port", I32), ("method", STR), ("path", STR),
        ("http_version", STR), ("status", I32), ("status_text", STR)]),
    "events": pa.schema(_PREFIX_COLS + _ROW_ID + [
        ("line_end", I64), ("kind", STR), ("message", STR), ("retracted_reqs", I64),
        ("new_tokens_gained", I64), ("new_token_ratio_before", F64), ("new_token_ratio_after", F64)]),
    "rejects": pa.schema(_ROW_ID + [("ts", TS), ("family", STR), ("raw", STR), ("reason", STR)]),
    "files": pa.schema([("source", STR), ("size_bytes", I64), ("lines", I64), ("blank_lines", I64)]),
}

# how to convert a value, by column type
_INT_COLS = {n for t in ("decode", "prefill") for n, ty in zip(SCHEMAS[t].names, SCHEMAS[t].types) if ty == I64}
_FLOAT_COLS = {n for t in ("decode", "prefill") for n, ty in zip(SCHEMAS[t].names, SCHEMAS[t].types) if ty == F64}

# ---------------------------------------------------------------------------------------
# one regex per family

# `[2026-02-19 00:27:12 TP0] `, `[2026-02-19 00:27:12.318 DP1 TP1] `, `[14:03:27 TP0] `
PREFIX_RE = re.compile(r"\[(?:(\d{4}-\d\d-\d\d) )?(\d\d:\d\d:\d\d(?:\.\d{1,6})?)((?: [A-Z_]+\d+)*)\] ")
# `Decode batch. `, `Decode batch, `, `Decode batch [2841], `, legacy `[gpu=0] Decode batch. `
DECODE_RE = re.compile(r"(?:\[gpu(?:_id)?=(\d+)\] )?Decode batch(?: \[(\d+)\])?[.,] (.*)")
# also the v0.1.17 `Prefil batch` typo and `Prefill batch(mixed #running-req: R). `
PREFILL_RE = re.compile(r"(?:\[gpu(?:_id)?=(\d+)\] )?Prefill? batch(?:\(mixed #running-req: (\d+)\))?(?: \[(\d+)\])?[.,] (.*)")
# v0.1.x: `new fill batch. #seq: 1. #cached_token: 0. ...` (". " separators)
OLD_PREFILL_RE = re.compile(r"new fill batch\. (.*)")
# uvicorn access line: `INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK`
HTTP_RE = re.compile(r'(INFO|WARNING|ERROR|DEBUG):\s+(\S+):(\d+) - "(\S+) (\S+) (HTTP/[\d.]+)" (\d{3})(?: (.*))?')
RETRACT_RE = re.compile(r"#retracted_reqs: (\d+), (?:#new_tokens_gained: (\d+), )?#new_token_ratio: ([\d.]+) -> ([\d.]+)")

_RANK_NAMES = {"DP": "dp_rank", "PP": "pp_rank", "ATTN_CP": "attn_cp_rank", "MOE_DP": "moe_dp_rank",
               "TP": "tp_rank", "EP": "ep_rank"}
# keys whose column name the generic rule would not give (v0.1.x prefill lines)
_KEY_ALIASES = {"#seq": "new_seq", "#remaining_req": "queue_req", "tree_cache_hit_rate": "cache_hit_rate"}
_col_cache: dict[str, str] = {}


def column_name(key: str) -> str:
    """DESIGN.md's rule: drop `#` and a parenthesised unit, lower-case, other runs of
    non-alphanumerics become `_` (`gen throughput (token/s)` -> `gen_throughput`)."""
    col = _col_cache.get(key)
    if col is None:
        col = _KEY_ALIASES.get(key)
        if col is None:
            col = re.sub(r"\([^)]*\)", "", key).replace("#", "").lower()
            col = re.sub(r"[^a-z0-9]+", "_", col).strip("_")
        _col_cache[key] = col
    return col


def parse_fields(body: str, sep: str, row: dict) -> None:
    """Split `key: value` pairs into row (typed); unknown keys go to `extra` as JSON.
    Raises ValueError on a value that does not convert (the line becomes a reject)."""
    extra = None
    prev = None
    for part in body.split(sep):
        key, colon, val = part.partition(": ")
        if not colon:
            part = part.strip(" .")
            if not part:
                continue  # the trailing `, ` of some releases
            if part.startswith("swa=") and prev:  # v0.4.9 SWA: `#token: full=N, swa=M`
                row["swa_" + prev] = int(part[4:]) if prev == "token" else float(part[4:])
                continue
            raise ValueError(f"no 'key: value' in {part!r}")
        val = val.rstrip(" .%")
        if key.endswith(" graph"):  # cuda graph / cpu graph / npu graph / musa graph
            row["cuda_graph"] = val == "True"
            row["graph_device"] = key[:-6]
            continue
        col = column_name(key)
        if val.startswith("full="):  # v0.4.9 SWA pair
            val = val[5:]
            prev = col
            col = "full_" + col
        if col in _INT_COLS:
            row[col] = int(val)
        elif col in _FLOAT_COLS:
            row[col] = float(val)
        elif col == "timestamp":
            row[col] = datetime.fromisoformat(val)
        else:
            if extra is None:
                extra = {}
            extra[key] = val
    if extra:
        row["extra"] = json.dumps(extra)


class TableWriter:
    """Collects row dicts of one table and writes them as Parquet row groups of BATCH_ROWS."""

    def __init__(self, outdir: str, table: str):
        self.path = os.path.join(outdir, table, "part-0.parquet")
        self.schema = SCHEMAS[table]
        self.rows: list[dict] = []
        self.count = 0
        self.writer: pq.ParquetWriter | None = None

    def add(self, row: dict) -> None:
        self.rows.append(row)
        if len(self.rows) >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        if self.writer is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        # column by column, only for keys some row has: pa.Table.from_pylist probes every
        # schema column in every row dict and was 3x slower here (most columns are sparse)
        rows = self.rows
        present = set().union(*map(dict.keys, rows))
        arrays = [pa.array([r.get(name) for r in rows], type=typ) if name in present else pa.nulls(len(rows), typ)
                  for name, typ in zip(self.schema.names, self.schema.types)]
        self.writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self.count += len(rows)
        self.rows = []

    def close(self) -> None:
        self.flush()
        if self.writer is not None:
            self.writer.close()


def _prefix_row(m: re.Match, source: str, line_no: int) -> dict:
    date, clock, ranks = m.group(1), m.group(2), m.group(3)
    row = {"source": source, "line_no": line_no}
    if date:
        row["ts"] = datetime.fromisoformat(f"{date} {clock}")
    else:
        row["clock"] = time.fromisoformat(clock)
    if ranks:
        for tok in ranks.split():
            name = tok.rstrip("0123456789")
            row[_RANK_NAMES.get(name, name.lower() + "_rank")] = int(tok[len(name):])
    return row


def _event_kind(message: str) -> str:
    if "Traceback" in message or "Exception in ASGI" in message:
        return "traceback"
    if "#retracted_reqs" in message:
        return "retract"
    if message.startswith("server_args="):
        return "server_args"
    if message.startswith(("INFO:", "WARNING:", "ERROR:")):
        return "uvicorn"
    return "log"


def ingest(path: str, outdir: str) -> dict:
    source = os.path.abspath(path)
    tables = {t: TableWriter(outdir, t) for t in ("decode", "prefill", "http", "events", "rejects")}
    decode, prefill, http, events, rejects = (tables[t] for t in ("decode", "prefill", "http", "events", "rejects"))
    lines = blank = 0
    event: dict | None = None  # the open event, which continuation lines extend
    event_lines: list[str] = []

    def close_event():
        nonlocal event
        if event is not None:
            event["message"] = "\n".join(event_lines)
            if event["kind"] == "log" and len(event_lines) > 1 and "Traceback" in event["message"]:
                event["kind"] = "traceback"
            events.add(event)
            event = None

    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line_no, line in enumerate(f, 1):
            lines += 1
            line = line.rstrip("\r\n")
            if not line.strip():
                blank += 1
                continue
            m = PREFIX_RE.match(line)
            if m:
                row = _prefix_row(m, source, line_no)
                body = line[m.end():]
            else:
                row = {"source": source, "line_no": line_no}
                body = line
            try:
                d = DECODE_RE.match(body)
                if d is None and not m and body.startswith("#running-req: "):  # v0.1.x, no label
                    d = DECODE_RE.match("Decode batch. " + body)
                if d is not None:
                    close_event()
                    if d.group(1):
                        row["gpu"] = int(d.group(1))
                    if d.group(2):
                        row["iter"] = int(d.group(2))
                    parse_fields(d.group(3), ", ", row)
                    decode.add(row)
                    continue
                p = PREFILL_RE.match(body)
                if p is not None:
                    close_event()
                    if p.group(1):
                        row["gpu"] = int(p.group(1))
                    if p.group(2):
                        row["mixed"] = True
                        row["running_req"] = int(p.group(2))
                    if p.group(3):
                        row["iter"] = int(p.group(3))
                    parse_fields(p.group(4), ", ", row)
                    prefill.add(row)
                    continue
                if not m:
                    p = OLD_PREFILL_RE.match(body)
                    if p is not None:
                        close_event()
                        parse_fields(p.group(1), ". ", row)
                        prefill.add(row)
                        continue
            except ValueError as e:
                close_event()
                rejects.add({"source": source, "line_no": line_no, "ts": row.get("ts"),
                             "family": "decode" if "Decode" in body else "prefill", "raw": line, "reason": str(e)})
                continue
            h = HTTP_RE.match(body)
            if h is not None:
                close_event()
                row["level"] = h.group(1)
                row["client_addr"] = h.group(2)
                row["client_port"] = int(h.group(3))
                row["method"] = h.group(4)
                row["path"] = h.group(5)
                row["http_version"] = h.group(6)
                row["status"] = int(h.group(7))
                row["status_text"] = h.group(8)
                http.add(row)
                continue
            if m is None and event is not None:
                # a traceback continuation line: no `[time]` prefix, belongs to the event above
                event_lines.append(line)
                event["line_end"] = line_no
                continue
            close_event()
            row["line_end"] = line_no
            row["kind"] = _event_kind(body) if m else "unprefixed"
            if row["kind"] == "retract":
                r = RETRACT_RE.search(body)
                if r:
                    row["retracted_reqs"] = int(r.group(1))
                    row["new_tokens_gained"] = int(r.group(2)) if r.group(2) else None
                    row["new_token_ratio_before"] = float(r.group(3))
                    row["new_token_ratio_after"] = float(r.group(4))
            event = row
            event_lines = [body]
    close_event()
    for t in tables.values():
        t.close()
    counts = {t: w.count for t, w in tables.items()}
    files = TableWriter(outdir, "files")
    files.add({"source": source, "size_bytes": os.path.getsize(path), "lines": lines, "blank_lines": blank})
    files.close()
    return {"rows": counts, "lines": lines, "blank_lines": blank}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python benchmarks/naive_ingest.py LOG OUTDIR", file=sys.stderr)
        return 2
    print(json.dumps(ingest(argv[0], argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
