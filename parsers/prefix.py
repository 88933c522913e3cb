"""The part of a line before the message: `[2026-02-19 00:27:16.318 DP1 TP3] `.

SGLang's formatter writes `[<asctime>[.<ms>]<rank prefix>] <message>` (no level, no logger
name); before v0.2.14 there is no bracket at all, v0.2.14–v0.3.3 print time of day only, and
the v0.1.17–v0.2.13 releases put `[gpu_id=N] ` / `[gpu=N] ` at the start of the message.  Ray
adds `(SchedulerActor pid=…, ip=…) ` in front.  Rank tokens are a set: their order changed
three times, so each is looked up on its own.

Why it is fast: a log has one distinct bracket content per second and rank stream, so a 32 MB
batch of ~250k lines holds a few thousand distinct prefixes.  They are validated and parsed
once each (regex, strptime) in a small table that is joined back onto the lines.
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
PREFIX_COLUMNS = ["ts", "clock", *RANK_TOKENS, "gpu"]


def _parse_contents(contents: pl.Series) -> pl.DataFrame:
    """Distinct bracket contents → validity and typed prefix columns (one row each)."""
    df = pl.DataFrame({"_content": contents})
    pfx = pl.col("_content")
    df = df.with_columns(_valid=pfx.str.contains(_TS_LIKE) | pfx.str.contains(_GPU_LIKE))
    has_date = pfx.str.slice(4, 1) == "-"
    time_start = pl.when(has_date).then(11).otherwise(0)
    frac = pfx.str.slice(time_start + 8).str.extract(r"^[.,](\d{1,6})")
    micros = (frac + pl.lit("000000")).str.slice(0, 6).cast(pl.Int64, strict=False).fill_null(0)
    clock = pfx.str.slice(time_start, 8).str.to_time("%H:%M:%S", strict=False)
    day = pl.when(has_date).then(pfx.str.slice(0, 10)).str.to_date("%Y-%m-%d", strict=False)
    us_of_day = clock.cast(pl.Int64) // 1000 + micros
    ranks = pfx.str.slice(time_start + 8)
    df = df.with_columns(
        ts=(day.cast(DT) + pl.duration(microseconds=us_of_day)).cast(DT),
        clock=(us_of_day * 1000).cast(pl.Time),
        gpu=pfx.str.extract(r"^gpu(?:_id)?=(\d+)$").cast(pl.Int32),
    )
    # rank tokens absent from every content (most logs print one or two) cost no regex
    present = df.select(**{col: pfx.str.contains(tok, literal=True).any() for col, tok in RANK_TOKENS.items()}).row(0, named=True)
    df = df.with_columns(
        **{col: ranks.str.extract(rf"(?:^|\s){tok}(\d+)(?:\s|$)").cast(pl.Int32) if present[col] else pl.lit(None, pl.Int32)
           for col, tok in RANK_TOKENS.items()}
    )
    # an invalid content (`[http_server] ...`) is no prefix: its columns stay null
    return df.with_columns(**{c: pl.when(pl.col("_valid")).then(pl.col(c)) for c in PREFIX_COLUMNS})


def split_prefix(df: pl.DataFrame) -> pl.DataFrame:
    """Add `proc`, `_pfx` (has a valid `[…]` prefix), `msg` and the typed prefix columns
    (`ts`, `clock`, rank columns, `gpu`) to a frame with `line`."""
    line = pl.col("line")
    # Ray's stdout forwarding: `(SchedulerActor pid=1234, ip=10.0.0.5) [..] ...`
    has_proc = line.str.contains(r"^\([^)]*\) \[")
    if df.select(has_proc.any()).item():
        df = df.with_columns(
            proc=pl.when(has_proc).then(line.str.extract(r"^\(([^)]*)\) ")),
            _body=pl.when(has_proc).then(line.str.replace(r"^\([^)]*\) ", "")).otherwise(line),
        )
    else:
        df = df.with_columns(proc=pl.lit(None, pl.String), _body=line)
    body = pl.col("_body")
    close = body.str.find("]", literal=True)
    df = df.with_columns(_close=close).with_columns(
        _content=pl.when((body.str.slice(0, 1) == "[") & (pl.col("_close") < 96)).then(body.str.slice(1, pl.col("_close") - 1))
    )
    table = _parse_contents(df.get_column("_content").drop_nulls().unique())
    # columns null for every content (absent rank tokens) are not carried through the join
    nulls = [c for c in PREFIX_COLUMNS if table.get_column(c).null_count() == table.height]
    df = df.join(table.drop(nulls), on="_content", how="left", maintain_order="left")
    df = df.with_columns(pl.lit(None, table.schema[c]).alias(c) for c in nulls)
    valid = pl.col("_valid").fill_null(False)
    # the message starts after `] ` (or `]`); computed as an offset so only one slice is made
    space = (body.str.find("] ", literal=True) == pl.col("_close")).fill_null(False).cast(pl.Int64)  # cheaper than a 1-char slice
    offset = pl.when(valid).then(pl.col("_close") + 1 + space).otherwise(0)
    df = df.with_columns(_pfx=valid, msg=body.str.slice(offset))
    return df.drop("_body", "_close", "_content", "_valid")


def strip_ansi(df: pl.DataFrame) -> pl.DataFrame:
    """Colour codes (uvicorn on a TTY) are removed before anything else looks at the line."""
    has = pl.col("line").str.contains("\x1b", literal=True)
    if df.select(has.any()).item():
        df = df.with_columns(line=pl.when(has).then(pl.col("line").str.replace_all(ANSI, "")).otherwise(pl.col("line")))
    return df
