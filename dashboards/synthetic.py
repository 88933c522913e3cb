"""A large synthetic store, built in polars, to measure and test the dashboard at the size of
a 1 GiB log without writing or parsing one.

Shape: `dp` DP ranks logging a Decode line every ~0.3 s with millisecond stamps; load rises
and falls in hour-long waves with a 5-minute idle gap each hour; step time follows
fixed + per_req × batch size, graphs turn off above batch 160; prefill, HTTP access lines,
retractions and a few errors alongside.  Noise comes from hashing the row number, so the same
arguments give the same store.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl

from loglens.schema import conform
from loglens.store import Store

T0 = datetime(2026, 2, 19, 0, 0, 0)
STEP_FIXED_MS = 12.0
STEP_PER_REQ_MS = 0.25
#: a message that must stay text: the dashboard tests look for it, escaped
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(1)>"


def _noise(n: int | pl.Expr, seed: int) -> pl.Expr:
    """Uniform-ish in [0, 1) from the row number."""
    index = pl.int_range(n) if isinstance(n, int) else n
    return (index.hash(seed) % 10_000).cast(pl.Float64) / 10_000


def decode_frame(rows: int, dp: int = 8, interval_ms: int = 300) -> pl.DataFrame:
    per_rank = rows // dp
    i = pl.int_range(rows)
    k = i // dp  # line number within its rank
    t_ms = k * interval_ms + (i % dp) * 7
    hour_ms = 3_600_000
    in_hour = t_ms % hour_ms
    # 5 idle minutes at the top of each hour: shift lines there past the gap
    t_ms = t_ms + pl.when(in_hour < 300_000).then(300_000).otherwise(0)
    wave = ((in_hour.cast(pl.Float64) / hour_ms) * 3.1416).sin()
    bs = (8 + wave * 220 * (0.8 + 0.4 * _noise(rows, 1))).round().cast(pl.Int64)
    step_ms = STEP_FIXED_MS + STEP_PER_REQ_MS * bs.cast(pl.Float64)
    gen = 1000.0 * bs.cast(pl.Float64) / step_ms * (0.97 + 0.06 * _noise(rows, 2))
    frame = pl.select(
        ts=pl.lit(T0) + pl.duration(milliseconds=t_ms),
        dp_rank=(i % dp).cast(pl.Int32),
        source=pl.lit("/var/log/sglang/<b>server</b>.log"),
        file_id=pl.lit("synthetic"),
        line_no=i + 1,
        variant=pl.lit("D13"),
        running_req=bs,
        token=bs * 900,
        token_usage=(bs.cast(pl.Float64) * 900 / 210_000).clip(0, 1).round(2),
        cuda_graph=bs <= 160,
        gen_throughput=gen.round(2),
        queue_req=pl.when(bs > 200).then(bs - 200).otherwise(0),
    )
    return frame.head(per_rank * dp)


def prefill_frame(rows: int, span_ms: int) -> pl.DataFrame:
    i = pl.int_range(rows)
    return pl.select(
        ts=pl.lit(T0) + pl.duration(milliseconds=i * (span_ms // max(rows, 1))),
        dp_rank=(i % 8).cast(pl.Int32),
        source=pl.lit("/var/log/sglang/server.log"),
        line_no=i + 1,
        new_seq=pl.lit(2, pl.Int64),
        new_token=(1000 + 3000 * _noise(rows, 3)).cast(pl.Int64),
        cached_token=(2000 * _noise(rows, 4)).cast(pl.Int64),
        token_usage=pl.lit(0.4),
        running_req=pl.lit(100, pl.Int64),
        queue_req=pl.lit(0, pl.Int64),
        input_throughput=(20_000 * (0.5 + _noise(rows, 5))).round(2),
    )


def http_frame(rows: int, span_ms: int) -> pl.DataFrame:
    i = pl.int_range(rows)
    roll = _noise(rows, 6)
    return pl.select(
        ts=pl.lit(T0) + pl.duration(milliseconds=i * (span_ms // max(rows, 1))),
        source=pl.lit("/var/log/sglang/server.log"),
        line_no=i + 1,
        client_addr=pl.lit("127.0.0.1"),
        method=pl.lit("POST"),
        path=pl.lit("/generate"),
        status=pl.when(roll < 0.97).then(200).when(roll < 0.99).then(429).otherwise(500).cast(pl.Int32),
    )


def events_frame(rows: int, span_ms: int) -> pl.DataFrame:
    i = pl.int_range(rows)
    error = (i % 50) == 0
    return pl.select(
        ts=pl.lit(T0) + pl.duration(milliseconds=i * (span_ms // max(rows, 1))),
        dp_rank=(i % 8).cast(pl.Int32),
        source=pl.lit("/var/log/sglang/server.log"),
        line_no=i + 1,
        line_end=i + 1,
        kind=pl.when(error).then(pl.lit("error")).otherwise(pl.lit("retraction")),
        message=pl.when(error).then(pl.lit("Scheduler hit an exception: " + HOSTILE)).otherwise(
            pl.lit("KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_token_ratio: 0.7000 -> 0.8500")),
        retracted_reqs=pl.when(error).then(None).otherwise(3).cast(pl.Int64),
    )


def write_synthetic_store(path: str | Path, decode_rows: int, dp: int = 8) -> Store:
    """Write a store with `decode_rows` Decode rows (and proportionate other tables)."""
    store = Store(path)
    decode = decode_frame(decode_rows, dp=dp)
    span_ms = int((decode["ts"].max() - T0).total_seconds() * 1000)
    tables = {
        "decode": decode,
        "prefill": prefill_frame(max(decode_rows // 10, 10), span_ms),
        "http": http_frame(max(decode_rows // 5, 10), span_ms),
        "events": events_frame(max(decode_rows // 4000, 10), span_ms),
        "files": pl.DataFrame({"source": ["/var/log/sglang/" + HOSTILE + ".log"], "file_id": ["synthetic"], "seq": [1]}),
    }
    for table, frame in tables.items():
        store.write(table, conform(frame, table))
    return store
