"""Every line that is not a batch line or an access line: what kind it is, and its numbers.

Kinds are decided by content (SGLang's format has no level field, so a warning looks like an
info line).  Multi-line records (tracebacks) are grouped
here too (`records`), and `event_rows` turns event lines into one row per record.
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


def records(ev: pl.DataFrame) -> pl.DataFrame:
    """Event lines with `_rec` (computed over all lines) → records.

    Continuation lines join the record above when its head is an error (or a blank line, after
    which traceback text groups on its own).  Continuation lines right after a batch or access
    line are orphans: they group by themselves, a new group at each `Traceback (most recent
    call last):`, so a traceback printed after a Decode line is still one record.

    `_rec` groups are runs of consecutive rows, so "first of the group" is a forward fill from
    the group's first row (much cheaper than window expressions over thousands of groups)."""
    ev = ev.with_columns(_cand=pl.col("_cont"), kind=kind_expr(pl.col("msg")))
    rec_start = (pl.col("_rec") != pl.col("_rec").shift(1)).fill_null(True)
    head_kind = pl.when(rec_start).then(pl.col("kind")).forward_fill()
    cand_first = pl.when(rec_start).then(pl.col("_cand")).forward_fill()
    attached = pl.col("_head_ev") & (head_kind.is_in(["error", "traceback"]) | cand_first)
    orphan = pl.col("_cand") & ~pl.col("_head_ev")
    prev_orphan = pl.when(rec_start).then(pl.lit(False)).otherwise(orphan.shift(1)).fill_null(False)
    first_orphan = orphan & ~prev_orphan
    tb_start = pl.col("line").str.starts_with("Traceback (most recent call last)")
    start = (~pl.col("_cand")) | (~orphan & ~attached) | first_orphan | (orphan & tb_start)
    # every group's first row starts a record, so one running count numbers them all
    return ev.with_columns(_rec=(start | rec_start).cast(pl.Int64).cum_sum())


def event_rows(ev: pl.DataFrame) -> pl.DataFrame:
    """Event and blank lines (with `_rec`, `_cont`, `_head_ev` computed over all lines) → event rows."""
    if ev.height == 0:
        return pl.DataFrame()
    ev = records(ev.with_columns(family=pl.col("family")))
    ev = ev.filter(pl.col("family") == "event")
    rec = pl.col("_rec")
    ev = ev.with_columns(_multi=((rec == rec.shift(1)) | (rec == rec.shift(-1))).fill_null(False))
    single = ev.filter(~pl.col("_multi")).with_columns(line_end=pl.col("line_no"), message=pl.col("msg"))
    parts = [single]
    multi = ev.filter(pl.col("_multi")).sort("line_no")
    if multi.height:
        first = (pl.col("_rec") != pl.col("_rec").shift(1)).fill_null(True)
        text = pl.when(first).then(pl.col("msg")).otherwise(pl.col("line"))
        agg = multi.with_columns(_text=text).group_by("_rec").agg(
            pl.all().exclude("_text").first(),
            line_end=pl.col("line_no").max(),
            message=pl.col("_text").str.join("\n"),
        )
        parts.append(agg)
    out = pl.concat(parts, how="diagonal_relaxed").sort("line_no")
    # a record that starts with a bare continuation line (after a blank, say) is traceback text
    out = out.with_columns(kind=pl.when((pl.col("kind") == "other") & pl.col("_cand")).then(pl.lit("traceback")).otherwise(pl.col("kind")))
    out = event_numbers(out)
    return out.drop([c for c in out.columns if c.startswith("_")] + ["line", "msg", "family", "byte_off"], strict=False)
