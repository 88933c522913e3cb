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


DECODE_COLUMNS = ["file_id", "source", "line_no", "ts", "timestamp", "dp_rank", "gpu", "pp_rank", "attn_cp_rank",
                  "moe_dp_rank", "tp_rank", "ep_rank", "running_req", "queue_req", "gen_throughput", "accept_len",
                  "cuda_graph", "retracted_req", "token", "full_token", "gpu_token", "token_usage",
                  "full_token_usage", "gpu_token_usage"]
PREFILL_COLUMNS = ["file_id", "line_no", "ts", "dp_rank", "gpu", "new_token", "token_usage", "running_req", "queue_req"]
#: start-ups and cache flushes cut intervals (loglens.intervals); the rest carry numbers we use
EVENT_KINDS = ["server_args", "cache_flush", "retraction", "max_total_num_tokens", "kv_cache"]
EVENT_COLUMNS = ["file_id", "source", "line_no", "ts", "dp_rank", "gpu", "kind", "message", "retracted_reqs",
                 "max_total_num_tokens", "max_running_requests", "chunked_prefill_size", "context_len", "kv_tokens"]


class NoDecodeData(Exception):
    """The store (or the chosen window) has no Decode lines: nothing to diagnose."""


@dataclass
class ServerLog:
    intervals: pl.DataFrame  # one row per Decode line in the window (see `load_server_log`)
    prefill: pl.DataFrame  # Prefill lines in the window
    retractions: pl.DataFrame  # retraction events in the window
    configs: pl.DataFrame  # every server_args row (one per server start-up)
    startup: pl.DataFrame  # every `max_total_num_tokens=` and `KV Cache is allocated` event
    decode_log_interval: int
    window: dict = field(default_factory=dict)  # {start, end} actually covered
    config: dict = field(default_factory=dict)  # the start-up in effect for the window (see _settings)
    limits: dict = field(default_factory=dict)  # max_total_num_tokens, max_running_requests, ...
    startups_in_window: int = 0  # server start-ups whose Decode lines the window holds

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
                       window=_covered(iv)).with_settings()

    def with_settings(self) -> "ServerLog":
        """Pick the server start-up whose settings govern most of the window's Decode lines (a
        log may hold restarts with other flags) and read its config and limits."""
        config, n_cfg = _in_effect(self.intervals, self.configs)
        mtn, n_mtn = _in_effect(self.intervals, self.startup.filter(pl.col("kind") == "max_total_num_tokens"))
        kv, _ = _in_effect(self.intervals, self.startup.filter(pl.col("kind") == "kv_cache"))
        if isinstance(config.get("args"), str):
            try:
                config["args"] = json.loads(config["args"])
            except ValueError:
                pass
        self.config = config
        self.limits = {
            "max_total_num_tokens": mtn.get("max_total_num_tokens") or kv.get("kv_tokens") or config.get("max_total_tokens"),
            "max_running_requests": mtn.get("max_running_requests") or config.get("max_running_requests"),
            "chunked_prefill_size": mtn.get("chunked_prefill_size") or config.get("chunked_prefill_size"),
            "context_len": mtn.get("context_len"),
        }
        self.limits["max_total_num_tokens_estimated"] = (
            None if self.limits["max_total_num_tokens"] else _pool_from_usage(self.intervals))
        self.startups_in_window = max(n_cfg, n_mtn)
        return self


def _pool_from_usage(iv: pl.DataFrame) -> int | None:
    """Without the start-up line, the pool size is #token ÷ token usage (usage is printed with
    two decimals, so only lines with usage ≥ 0.10 give it to within 5 %)."""
    ok = iv.filter((pl.col("token_usage") >= 0.10) & (pl.col("token") > 0))
    if ok.height == 0:
        return None
    return int((ok.get_column("token") / ok.get_column("token_usage")).median())


def _in_effect(iv: pl.DataFrame, rows: pl.DataFrame) -> tuple[dict, int]:
    """The row of `rows` (start-up lines) in effect for most Decode lines of `iv` — the latest
    one at or before each line — and how many distinct rows are in effect; ({}, 0) if none."""
    if rows.height == 0:
        return {}, 0
    rows = rows.with_row_index("_row").sort("ts", nulls_last=True)
    lines = iv.select("ts").drop_nulls().sort("ts")
    hit = lines.join_asof(rows.drop_nulls("ts").select("ts", "_row"), on="ts", strategy="backward",
                          check_sortedness=False).get_column("_row").drop_nulls()
    if len(hit) == 0:  # no timestamps to go by, or every line precedes every start-up
        return rows.row(0, named=True), 1
    counts = hit.value_counts(sort=True)
    best = counts.row(0)[0]
    return rows.filter(pl.col("_row") == best).row(0, named=True), counts.height


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
    # only the columns used (a large store's tables are wide), read once by decode_intervals,
    # which drops duplicate TP/PP copies as it reads; hybrid pools print `#full token` /
    # `#gpu token` instead of `#token`: the full-KV pool is the one `max_total_num_tokens` sizes
    decode = store.scan("decode").select(DECODE_COLUMNS).with_columns(
        token=pl.coalesce("token", "full_token", "gpu_token"),
        usage=pl.coalesce("token_usage", "full_token_usage", "gpu_token_usage"))
    if decode.select(pl.len()).collect().item() == 0:
        raise NoDecodeData("the store has no Decode lines")
    configs = store.read("config").sort("ts", "file_id", "line_no")
    # one interval length for the whole log (the flag rarely changes between restarts)
    n = int(_first(configs, "decode_log_interval") or DEFAULT_DECODE_LOG_INTERVAL)
    events = store.scan("events").filter(pl.col("kind").is_in(EVENT_KINDS)).select(EVENT_COLUMNS).collect()
    startup = events.filter(pl.col("kind").is_in(["max_total_num_tokens", "kv_cache"]))

    iv = decode_intervals(decode, decode_log_interval=n, events=events, carry=("retracted_req", "token", "usage"))
    iv = iv.with_columns(rank_key=pl.col("stream"))
    iv = iv.sort("file_id", "stream", "line_no").with_columns(
        prev_running=pl.col("running_req").shift(1).over("file_id", "stream"),
        prev_graph=pl.col("cuda_graph").shift(1).over("file_id", "stream"))
    prefill = store.scan("prefill").select(PREFILL_COLUMNS).collect().with_columns(rank_key=_stream_of_line())
    retractions = events.filter(pl.col("kind") == "retraction").with_columns(rank_key=_stream_of_line())
    iv = _count_between(iv, prefill, "new_token", "prefill")
    iv = _count_between(iv, retractions, "retracted_reqs", "retraction")
    iv = _with_fit_columns(iv, n)

    # intervals.py leaves busy_s negative where a line's reconstructed interval is (lines too
    # dense for their logged rate): such a line speaks for no time at all
    iv = iv.with_columns(pl.col("busy_s").clip(lower_bound=0.0).fill_null(0.0))
    iv = iv.drop("token_usage").rename({"usage": "token_usage"}).sort("ts", "file_id", "line_no")
    return ServerLog(intervals=iv, prefill=prefill, retractions=retractions, configs=configs, startup=startup,
                     decode_log_interval=n, window=_covered(iv)).with_settings()


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
