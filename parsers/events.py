"""Every line that is not a batch line or an access line: what kind it is, and its numbers.

Kinds are decided by content (SGLang's format has no level field, so a warning looks like an
info line).  Multi-line records (tracebacks) are grouped in parsers.records; this module
only labels a record by its first line.
"""

from __future__ import annotations

import polars as pl

#: (kind, regex on the message) — first match wins; order matters
KINDS: list[tuple[str, str]] = [
    ("server_args", r"^server_args="),
    ("max_total_num_tokens", r"^max_total_num_tokens="),
    ("kv_cache", r"^KV Cache is allocated"),
    ("memory_pool", r"^Memory pool end"),
    ("load_weight", r"^Load weight (begin|end)"),
    ("graph_capture_begin", r"^Capture (draft )?\w+ graph begin"),
    ("graph_capture_end", r"^Capture (draft )?\w+ graph end"),
    ("graph_capture", r"^Capture (draft )?\w+ graph bs|^Capturing batches"),
    ("ready", r"The server is fired up and ready to roll"),
    ("retraction", r"Retract requests|Decode out of memory happened|^Testing retraction"),
    ("cache_flush", r"^Cache (flushed successfully|not flushed)"),
    ("deprecation", r"is deprecated"),
    ("error", r"Traceback \(most recent call last\)|hit an exception|Received sigquit|^\S*(Error|Exception)\b[:(]|^ERROR\b|\[http_server\] Error|watchdog timeout"),
    ("warning", r"^WARNING\b|Warning:|^\[?W\d{4}"),
    ("request_log", r"^(Receive|Finish): obj="),
    ("uvicorn", r"^INFO:\s+(Started server process|Waiting for application|Application startup|Uvicorn running|Shutting down|Finished server process)"),
    ("progress", r"\d+%\|"),
    ("distributed", r"^Init torch distributed"),
]


def kind_expr(msg: pl.Expr) -> pl.Expr:
    expr = pl.lit("other")
    for kind, rx in reversed(KINDS):
        expr = pl.when(msg.str.contains(rx)).then(pl.lit(kind)).otherwise(expr)
    return expr


def _num(msg: pl.Expr, rx: str, dtype) -> pl.Expr:
    return msg.str.extract(rx).cast(dtype, strict=False)


def event_numbers(df: pl.DataFrame) -> pl.DataFrame:
    """Typed numbers for the kinds that carry them (null elsewhere)."""
    m = pl.col("message")
    k = pl.col("kind")
    retr = k == "retraction"
    mtn = k == "max_total_num_tokens"
    return df.with_columns(
        retracted_reqs=pl.when(retr).then(_num(m, r"#retracted_reqs: (\d+)", pl.Int64)),
        new_tokens_gained=pl.when(retr).then(_num(m, r"#new_tokens_gained: (\d+)", pl.Int64)),
        new_token_ratio_before=pl.when(retr).then(_num(m, r"#new_token_ratio: ([\d.]+)", pl.Float64)),
        new_token_ratio_after=pl.when(retr).then(_num(m, r"#new_token_ratio: [\d.]+ -> ([\d.]+)", pl.Float64)),
        max_total_num_tokens=pl.when(mtn).then(_num(m, r"^max_total_num_tokens=(\d+)", pl.Int64)),
        max_running_requests=pl.when(mtn).then(_num(m, r"max_running_requests=(\d+)", pl.Int64)),
        chunked_prefill_size=pl.when(mtn).then(_num(m, r"chunked_prefill_size=(-?\d+)", pl.Int64)),
        max_prefill_tokens=pl.when(mtn).then(_num(m, r"max_prefill_tokens=(\d+)", pl.Int64)),
        context_len=pl.when(mtn).then(_num(m, r"context_len=(\d+)", pl.Int64)),
        kv_tokens=pl.when(k == "kv_cache").then(_num(m, r"#tokens: (\d+)", pl.Int64)),
        elapsed_s=_num(m, r"(?:elapsed[=:] ?|Time elapsed: )([\d.]+) ?s", pl.Float64),
        avail_mem_gb=_num(m, r"avail(?:able_gpu)?[_ ]mem=([\d.]+) ?GB", pl.Float64),
    )
