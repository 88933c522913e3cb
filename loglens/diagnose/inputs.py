"""What diagnose reads from the store: Decode intervals with their context, and the server's limits.

One row per Decode line (from `loglens.intervals.decode_intervals`), plus what the findings
need beside it: the KV numbers and queue of that line, the Prefill lines that fell inside its
interval (log order, not timestamps: timestamps have 1-s resolution while an interval can be
shorter), and whether the batch size moved much since the previous line of the same stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime

import polars as pl

from loglens.intervals import decode_intervals
from loglens.store import Store

DEFAULT_DECODE_LOG_INTERVAL = 40
#: relative change of #running-req between two lines of a stream beyond which the interval's
#: mean batch is too uncertain for the step-time fit.  loglens.intervals takes the mean batch
#: halfway between the two lines, a good estimate while requests finish spread over the window
#: (simulator sweeps: 0.15 → 0.5 left the fit as accurate and gave it more intervals); a halving
#: or worse can hide a step change.
BATCH_CHANGE_LIMIT = 0.5


class NoDecodeData(Exception):
    """The store (or the chosen window) has no Decode lines: nothing to diagnose."""


@dataclass
class ServerLog:
    intervals: pl.DataFrame  # one row per Decode line in the window (see `load_server_log`)
    prefill: pl.DataFrame  # Prefill lines in the window
    retractions: pl.DataFrame  # retraction events in the window
    config: dict  # first server_args row (typed columns + `args`), {} when the log has none
    limits: dict  # max_total_num_tokens, max_running_requests, ... from the start-up lines
    decode_log_interval: int
    window: dict = field(default_factory=dict)  # {start, end} actually covered

    def restrict(self, start: datetime | None = None, end: datetime | None = None) -> "ServerLog":
        """The same log seen through [start, end] (Decode lines by their timestamp); the
        intervals were reconstructed on the whole log, so the window's first line keeps its
        predecessor."""
        def inside(df: pl.DataFrame) -> pl.DataFrame:
            if start is not None:
                df = df.filter(pl.col("ts") >= start)
            if end is not None:
                df = df.filter(pl.col("ts") <= end)
            return df

        iv = inside(self.intervals)
        if iv.height == 0:
            raise NoDecodeData(f"no Decode lines between {start or 'the start'} and {end or 'the end'}")
        return replace(self, intervals=iv, prefill=inside(self.prefill), retractions=inside(self.retractions),
                       window=_covered(iv))


def _count_between(intervals: pl.DataFrame, lines: pl.DataFrame, value: str, prefix: str) -> pl.DataFrame:
    """Per Decode line: how many of `lines` (and the sum of their `value`) fall between it and
    the previous Decode line of the same stream.  Log order, not timestamps: timestamps have
    1-s resolution while an interval can be shorter."""
    n_col, sum_col = f"{prefix}_lines", f"{prefix}_{value}"
    if lines.height == 0:
        return intervals.with_columns(pl.lit(0, pl.Int64).alias(n_col), pl.lit(0, pl.Int64).alias(sum_col))
    keys = ["file_id", "rank_key"]
    dec = intervals.select("file_id", "rank_key", pl.col("line_no").alias("decode_line")).sort("decode_line")
    other = lines.select("file_id", "rank_key", "line_no", pl.col(value).cast(pl.Int64)).sort("line_no")
    hit = other.join_asof(dec, left_on="line_no", right_on="decode_line", by=keys, strategy="forward",
                          check_sortedness=False)  # both sides are sorted by line number above
    per = (hit.filter(pl.col("decode_line").is_not_null())
           .group_by("file_id", "rank_key", "decode_line")
           .agg(pl.len().cast(pl.Int64).alias(n_col), pl.col(value).fill_null(0).sum().alias(sum_col)))
    out = intervals.join(per, left_on=["file_id", "rank_key", "line_no"], right_on=["file_id", "rank_key", "decode_line"], how="left")
    return out.with_columns(pl.col(n_col, sum_col).fill_null(0))


def _stream_of_line() -> pl.Expr:
    """The DP stream a Prefill or event line belongs to, named as loglens.intervals names Decode streams."""
    return (pl.when(pl.col("dp_rank").is_not_null()).then(pl.format("DP{}", pl.col("dp_rank")))
            .when(pl.col("gpu").is_not_null()).then(pl.format("GPU{}", pl.col("gpu")))
            .otherwise(pl.lit("main")))


def _first(df: pl.DataFrame, col: str):
    if col not in df.columns:
        return None
    s = df.get_column(col).drop_nulls()
    return s[0] if len(s) else None


def load_server_log(store: Store) -> ServerLog:
    """Everything diagnose needs, from the whole store."""
    decode = store.read("decode")
    if decode.height == 0:
        raise NoDecodeData("the store has no Decode lines")
    config_df = store.read("config").sort("file_id", "line_no")
    config = config_df.row(0, named=True) if config_df.height else {}
    if config.get("args"):
        try:
            config["args"] = json.loads(config["args"])
        except (TypeError, ValueError):
            pass
    n = int(config.get("decode_log_interval") or DEFAULT_DECODE_LOG_INTERVAL)
    events = store.read("events")
    mtn = events.filter(pl.col("kind") == "max_total_num_tokens")
    limits = {
        "max_total_num_tokens": _first(mtn, "max_total_num_tokens") or _first(events.filter(pl.col("kind") == "kv_cache"), "kv_tokens"),
        "max_running_requests": _first(mtn, "max_running_requests") or config.get("max_running_requests"),
        "chunked_prefill_size": _first(mtn, "chunked_prefill_size") or config.get("chunked_prefill_size"),
        "context_len": _first(mtn, "context_len"),
    }

    iv = decode_intervals(decode, decode_log_interval=n, events=events)
    # hybrid pools print `#full token` / `#gpu token` instead of `#token`: the full-KV pool
    # is the one `max_total_num_tokens` sizes
    context = decode.select("file_id", "line_no", "retracted_req",
                            token=pl.coalesce("token", "full_token", "gpu_token"),
                            usage=pl.coalesce("token_usage", "full_token_usage", "gpu_token_usage"))
    iv = iv.join(context, on=["file_id", "line_no"], how="left").with_columns(rank_key=pl.col("stream"))
    iv = iv.sort("file_id", "stream", "line_no").with_columns(
        prev_running=pl.col("running_req").shift(1).over("file_id", "stream"),
        prev_graph=pl.col("cuda_graph").shift(1).over("file_id", "stream"))
    prefill = store.read("prefill").with_columns(rank_key=_stream_of_line())
    retractions = events.filter(pl.col("kind") == "retraction").with_columns(rank_key=_stream_of_line())
    iv = _count_between(iv, prefill, "new_token", "prefill")
    iv = _count_between(iv, retractions, "retracted_reqs", "retraction")
    iv = _with_fit_columns(iv, n)

    iv = iv.drop("token_usage").rename({"usage": "token_usage"}).sort("ts", "file_id", "line_no")
    return ServerLog(intervals=iv, prefill=prefill, retractions=retractions, config=config,
                     limits=limits, decode_log_interval=n, window=_covered(iv))


def _covered(iv: pl.DataFrame) -> dict:
    return {"start": iv.get_column("ts").min(), "end": iv.get_column("ts").max()}


def _with_fit_columns(iv: pl.DataFrame, n: int) -> pl.DataFrame:
    """batch and step_ms per interval, and why an interval cannot serve the step-time fit.

    Each interval holds N decode steps.  With sub-second timestamps loglens.intervals measures
    its seconds, and tokens ÷ N is its exact mean batch.  With 1-s timestamps its seconds are the
    model estimate (N × mean batch × accept len ÷ logged rate) nudged to fit the timestamp
    brackets, and a nudge (up to a second, spread over neighbouring lines) is noise at the scale
    of one sub-second interval; there the fit takes the model estimate itself, which only errs
    as far as the mean batch does.
    """
    accept = pl.col("accept_len").fill_null(1.0)
    precise = (pl.col("ts").dt.microsecond() != 0).any().over("file_id", "stream")
    seconds = pl.when(precise).then(pl.col("interval_s")).otherwise(pl.col("model_interval_s"))
    tokens = seconds * pl.col("gen_throughput")
    prev, cur = pl.col("prev_running"), pl.col("running_req")
    change = (cur - prev).abs() / pl.max_horizontal(cur, prev)
    reason = (pl.when(~pl.col("is_sample")).then(pl.col("not_sample_reason").fill_null("not_sample"))
              .when(seconds.is_null() | (seconds <= 0)).then(pl.lit("no_interval"))
              .when(cur <= 0).then(pl.lit("idle"))
              .when(pl.col("prefill_lines") > 0).then(pl.lit("prefill_inside"))
              .when(change > BATCH_CHANGE_LIMIT).then(pl.lit("batch_changed"))
              # the flag is the last step's: a window where it flipped mixes both kinds of step
              .when(pl.col("prev_graph") != pl.col("cuda_graph")).then(pl.lit("graph_changed")))
    return iv.with_columns(batch=tokens / (n * accept), step_ms=1000.0 * seconds / n, fit_excluded=reason)
