"""The part of a line before the message: `[2026-02-19 00:27:16.318 DP1 TP3] `.

SGLang's formatter writes `[<asctime>[.<ms>]<rank prefix>] <message>` (no level, no logger
name); before v0.2.14 there is no bracket at all, v0.2.14–v0.3.3 print time of day only, and
the v0.1.17–v0.2.13 releases put `[gpu_id=N] ` / `[gpu=N] ` at the start of the message.  Ray
adds `(SchedulerActor pid=…, ip=…) ` in front.  Rank tokens are a set: their order changed
three times, so each is looked up on its own.

All functions here are polars expressions over a `line` column; nothing loops per line.
"""

from __future__ import annotations

import polars as pl

from loglens.schema import DT

ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"
_TS_LIKE = r"^(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?(?: [A-Z_]+\d+)*$"
_GPU_LIKE = r"^gpu(?:_id)?=\d+$"
RANK_TOKENS = {
    "dp_rank": "DP",
    "pp_rank": "PP",
    "attn_cp_rank": "ATTN_CP",
    "moe_dp_rank": "MOE_DP",
    "tp_rank": "TP",
    "ep_rank": "EP",
}


def split_prefix(df: pl.DataFrame) -> pl.DataFrame:
    """Add `proc`, `pfx` (bracket content or null), `msg` (the message) to a frame with `line`."""
    line = pl.col("line")
    # Ray's stdout forwarding: `(SchedulerActor pid=1234, ip=10.0.0.5) [..] ...`
    has_proc = line.str.starts_with("(") & line.str.contains(r"^\([^)]*\) \[")
    if df.select(has_proc.any()).item():
        df = df.with_columns(
            proc=pl.when(has_proc).then(line.str.extract(r"^\(([^)]*)\) ")),
            _body=pl.when(has_proc).then(line.str.replace(r"^\([^)]*\) ", "")).otherwise(line),
        )
    else:
        df = df.with_columns(proc=pl.lit(None, pl.String), _body=line)
    body = pl.col("_body")
    close = body.str.find("]", literal=True)
    content = body.str.slice(1, close - 1)
    df = df.with_columns(_close=close, _content=content)
    valid = (
        body.str.starts_with("[")
        & pl.col("_close").is_not_null()
        & (pl.col("_content").str.contains(_TS_LIKE) | pl.col("_content").str.contains(_GPU_LIKE))
    )
    after = body.str.slice(pl.col("_close") + 1)
    msg = pl.when(after.str.starts_with(" ")).then(body.str.slice(pl.col("_close") + 2)).otherwise(after)
    return df.with_columns(
        pfx=pl.when(valid).then(pl.col("_content")),
        msg=pl.when(valid).then(msg).otherwise(body),
    ).drop("_body", "_close", "_content")


def prefix_columns(df: pl.DataFrame) -> pl.DataFrame:
    """From `pfx`: `ts` (datetime, null without a date), `clock` (time of day), rank columns, `gpu`."""
    pfx = pl.col("pfx")
    has_date = pfx.str.slice(4, 1) == "-"
    date_part = pl.when(has_date).then(pfx.str.slice(0, 10))
    time_start = pl.when(has_date).then(11).otherwise(0)
    time_part = pfx.str.slice(time_start, 8)
    frac = pfx.str.slice(time_start + 8).str.extract(r"^[.,](\d{1,6})")
    micros = (frac + pl.lit("000000")).str.slice(0, 6).cast(pl.Int64, strict=False).fill_null(0)
    clock = time_part.str.to_time("%H:%M:%S", strict=False)
    day = date_part.str.to_date("%Y-%m-%d", strict=False)
    us_of_day = clock.cast(pl.Int64) // 1000 + micros
    ts = (day.cast(DT) + pl.duration(microseconds=us_of_day)).cast(DT)
    rank_part = pfx.str.slice(time_start + 8)
    df = df.with_columns(
        ts=ts,
        clock=(us_of_day * 1000).cast(pl.Time),
        _ranks=rank_part,
        gpu=pfx.str.extract(r"^gpu(?:_id)?=(\d+)$").cast(pl.Int32),
    )
    has_ranks = df.select(pl.col("_ranks").str.contains(r"[A-Z]").any()).item()
    if has_ranks:
        ranks = pl.col("_ranks")
        df = df.with_columns(
            [
                ranks.str.extract(rf"(?:^|\s){tok}(\d+)(?:\s|$)").cast(pl.Int32).alias(col)
                for col, tok in RANK_TOKENS.items()
            ]
        )
    else:
        df = df.with_columns([pl.lit(None, pl.Int32).alias(col) for col in RANK_TOKENS])
    return df.drop("_ranks")


def strip_ansi(df: pl.DataFrame) -> pl.DataFrame:
    """Colour codes (uvicorn on a TTY) are removed before anything else looks at the line."""
    has = pl.col("line").str.contains("\x1b", literal=True)
    if df.select(has.any()).item():
        df = df.with_columns(line=pl.when(has).then(pl.col("line").str.replace_all(ANSI, "")).otherwise(pl.col("line")))
    return df
