"""Decode throughput samples, and the throughput of each stream per time bucket.

Which Decode lines measure decode speed, and over which window, is loglens.intervals' job (the
same reconstruction reconcile and diagnose use): it names each DP stream, drops duplicate
TP/PP copies, reconstructs each line's window (`window_start`..`window_end`, `interval_s`,
`tokens`) and says why a line is no sample (`not_sample_reason`).  This module only buckets
that for charts.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from loglens.dashboards.aggregate import BUCKET, STREAM, bucket, lazy, stream_grid
from loglens.intervals import decode_intervals

#: the Decode columns loglens.intervals needs for the reconstruction, plus cuda_graph for the
#: batch panel (reading only these keeps a 1 GiB log's table small)
_INTERVAL_INPUT = ["file_id", "source", "dp_rank", "gpu", "pp_rank", "attn_cp_rank", "moe_dp_rank", "tp_rank",
                   "ep_rank", "line_no", "timestamp", "ts", "running_req", "gen_throughput", "accept_len", "cuda_graph"]
#: what the panels use of its output
SAMPLE_COLUMNS = ["stream", "ts", "running_req", "gen_throughput", "cuda_graph", "interval_s", "tokens",
                  "window_start", "window_end", "is_sample", "not_sample_reason"]
#: events that reset a stream's window (a start-up, a cache flush)
_BOUNDARY_KINDS = ["server_args", "cache_flush"]

#: not_sample_reason in words, for tooltips
NOT_SAMPLE_WHY = {
    "first_line": "first Decode line of its stream: its window reaches back to scheduler start-up",
    "after_startup": "first line after a server start-up: its window spans the restart",
    "after_flush": "first line after /flush_cache: the counters were reset, the clock was not",
    "idle_gap": "its window spans an idle gap (at least 3x its neighbours' intervals)",
    "implausible": "gen throughput or batch size missing or not positive",
}


def decode_samples(decode: pl.DataFrame | pl.LazyFrame, events: pl.DataFrame | pl.LazyFrame | None = None,
                   decode_log_interval: int = 40) -> pl.DataFrame:
    """loglens.intervals.decode_intervals of a decode table: one row per Decode line of each DP
    stream with its window and `is_sample`.  A frame that is already that (the page computes it
    once for two panels) is returned as it is.  `decode_log_interval`: decode steps between two
    Decode lines (`--decode-log-interval`, 40 unless the server was started otherwise)."""
    if isinstance(decode, pl.DataFrame) and set(SAMPLE_COLUMNS) <= set(decode.columns):
        return decode
    present = lazy(decode).collect_schema().names()
    # source only fills a missing file_id: leave it out when file_id is there (a string per row)
    wanted = [c for c in _INTERVAL_INPUT if c in present and not (c == "source" and "file_id" in present)]
    boundaries = None
    if events is not None:
        boundaries = (
            lazy(events).filter(pl.col("kind").is_in(_BOUNDARY_KINDS))
            .select("file_id", "source", "line_no", "kind", "message").collect()
        )
    return decode_intervals(lazy(decode).select(wanted), decode_log_interval, events=boundaries).select(SAMPLE_COLUMNS)


def throughput_by_bucket(samples: pl.DataFrame, every: timedelta) -> pl.DataFrame:
    """Per stream and bucket: `gen_tok_s`, the decode throughput in force during the bucket;
    `gen_max`, the highest logged value; `lines`, the samples whose window ends in the bucket.

    `gen_tok_s` integrates rather than averages: the tokens of the sample windows that end in
    the bucket ÷ the seconds those windows cover.  A bucket where no window ends is covered by
    the next line's window if that line is a sample and its window starts before the bucket
    ends; buckets nobody covers (idle) stay null."""
    lines = samples.lazy().filter(pl.col("window_end").is_not_null())
    sample = pl.col("is_sample")
    per_bucket = lines.group_by(STREAM, bucket(every, "window_end")).agg(
        tokens=pl.col("tokens").filter(sample).sum(),
        seconds=pl.col("interval_s").filter(sample).sum(),
        gen_max=pl.col("gen_throughput").filter(sample).max(),
        lines=sample.sum(),
        # the bucket's first line is, for the empty buckets before it, the next line
        next_end=pl.col("window_end").min(),
        next_start=pl.col("window_start").sort_by("window_end").first(),
        next_is_sample=sample.sort_by("window_end").first(),
        next_gen=pl.col("gen_throughput").sort_by("window_end").first(),
    ).collect()
    logged = per_bucket.filter(pl.col("lines") > 0)
    grid = stream_grid(logged.lazy(), every).collect()
    covering = per_bucket.select(STREAM, "next_end", "next_start", "next_is_sample", "next_gen").sort("next_end")
    filled = (
        grid.join(logged.select(STREAM, BUCKET, "tokens", "seconds", "gen_max", "lines"), on=[STREAM, BUCKET], how="left")
        .sort(BUCKET)
        .join_asof(covering, left_on=BUCKET, right_on="next_end", by=STREAM, strategy="forward",
                   check_sortedness=False)
        .with_columns(
            gen_tok_s=pl.coalesce(
                pl.when(pl.col("seconds") > 0).then(pl.col("tokens") / pl.col("seconds")),
                pl.when(pl.col("next_is_sample") & (pl.col("next_start") < pl.col(BUCKET) + every)).then("next_gen"),
            ),
            lines=pl.col("lines").fill_null(0),
        )
    )
    return filled.select(STREAM, BUCKET, "gen_tok_s", "gen_max", "lines").sort(STREAM, BUCKET)


def not_samples_by_bucket(samples: pl.DataFrame, every: timedelta) -> pl.DataFrame:
    """The lines left out of the throughput series, at most one per stream and bucket, with
    the reason in words (`why`)."""
    return (
        samples.lazy()
        .filter(~pl.col("is_sample") & pl.col("gen_throughput").is_not_null() & pl.col("window_end").is_not_null())
        .group_by(STREAM, bucket(every, "window_end"))
        .agg(pl.col("gen_throughput").first(), pl.col("not_sample_reason").first(), pl.col("interval_s").first())
        .with_columns(why=pl.col("not_sample_reason").replace_strict(NOT_SAMPLE_WHY, default=pl.col("not_sample_reason")))
        .sort(BUCKET, STREAM)
        .collect()
    )
