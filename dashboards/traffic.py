"""Time panels for what arrives at the server: prefill tokens (new vs cached), input
throughput (from the `prefill` table) and HTTP requests/s by status class (from `http`)."""

from __future__ import annotations

import altair as alt
import polars as pl

from loglens.dashboards.aggregate import (
    BUCKET, STREAM, bucket, chart_data, lazy, per_stream_bucket, round_floats, time_text, with_bucket_end,
)
from loglens.dashboards.timeaxis import TimeAxis, no_data, runs_frame, time_panel

Frame = pl.DataFrame | pl.LazyFrame

STATUS_COLORS = {"2xx": "#54a24b", "3xx": "#9ecae9", "4xx": "#f58518", "5xx": "#d62728", "other": "#bab0ac"}


def _axis(axis: TimeAxis | None, *frames: Frame) -> TimeAxis:
    return axis if axis is not None else TimeAxis.covering(*frames)


def prefill_tokens_chart(prefill: Frame, axis: TimeAxis | None = None, runs=None, events: Frame | None = None) -> alt.LayerChart:
    """Prompt tokens per second entering the server, split into computed and cache-hit tokens,
    summed over DP ranks."""
    axis = _axis(axis, prefill)
    title = alt.TitleParams("Prefill tokens: new vs cached", anchor="start", subtitle=[
        "#new-token: prompt tokens computed (page-rounded, per chunk); #cached-token: prefix-cache hits of new requests. Per second, summed over DP ranks."])
    seconds = axis.every.total_seconds()
    tokens = (
        per_stream_bucket(prefill, axis.every, new=pl.col("new_token").sum(), cached=pl.col("cached_token").sum(),
                          batches=pl.len())
        .group_by(BUCKET)
        .agg(pl.col("new", "cached", "batches").sum())
    )
    if tokens.height == 0:
        return no_data(title, "no Prefill lines with a time in the store")
    long = (
        tokens.unpivot(index=[BUCKET, "batches"], on=["new", "cached"], variable_name="kind", value_name="tokens")
        .with_columns(
            tok_s=pl.col("tokens") / seconds,
            kind=pl.col("kind").replace_strict({"new": "new (computed)", "cached": "cached (prefix hit)"}),
        )
        .sort(BUCKET, "kind")
    )
    long = round_floats(with_bucket_end(long, axis.every), 1)
    chart = alt.Chart(chart_data(long)).mark_bar(clip=True).encode(
        x=axis.x(), x2="ts_end:T",
        y=alt.Y("tok_s:Q", title="prompt tokens/s", stack="zero"),
        color=alt.Color("kind:N", title="prefill tokens", scale=alt.Scale(
            domain=["new (computed)", "cached (prefix hit)"], range=["#4c78a8", "#9ecae9"])),
        tooltip=[alt.Tooltip("kind:N", title="tokens"), axis.bucket_tooltip(),
                 alt.Tooltip("tokens:Q", title="tokens in the bucket (sum over Prefill lines)"),
                 alt.Tooltip("tok_s:Q", title="tokens per second of the bucket"),
                 alt.Tooltip("batches:Q", title="Prefill lines (batches or chunks) in the bucket")],
    )
    return time_panel([chart], axis, title, height=110, runs=runs_frame(runs), events=events)


def input_throughput_chart(prefill: Frame, axis: TimeAxis | None = None, runs=None, events: Frame | None = None) -> alt.LayerChart:
    """The server's logged input throughput per DP rank (bucket mean and max)."""
    axis = _axis(axis, prefill)
    title = alt.TitleParams("Input throughput (logged)", anchor="start", subtitle=[
        "input throughput (tok/s) = #new-token ÷ seconds since the previous Prefill line (before v0.5.11: the previous batch's tokens, lagged by one). Includes idle and decode time."])
    logged = pl.col("input_throughput").filter(pl.col("input_throughput").is_not_null())
    rates = per_stream_bucket(
        prefill, axis.every, mean=logged.mean(), max=logged.max(), lines=logged.len(),
    ).filter(pl.col("lines") > 0)
    if rates.height == 0:
        return no_data(title, "no Prefill line logs an input throughput (printed from v0.5.9; v0.4.7.post1 for PD prefill)", height=50)
    rates = round_floats(rates.with_columns(time_text(axis.every)), 1)
    chart = alt.Chart(chart_data(rates)).mark_circle(size=14, clip=True).encode(
        x=axis.x(), y=alt.Y("mean:Q", title="input tok/s"),
        color=alt.Color(f"{STREAM}:N", title="stream"),
        tooltip=[alt.Tooltip(f"{STREAM}:N", title="stream"), axis.bucket_tooltip(),
                 alt.Tooltip("mean:Q", title="mean logged input throughput in the bucket (tok/s)"),
                 alt.Tooltip("max:Q", title="highest logged input throughput in the bucket (tok/s)"),
                 alt.Tooltip("lines:Q", title="Prefill lines in the bucket")],
    )
    return time_panel([chart], axis, title, height=100, runs=runs_frame(runs), events=events)


def http_status_chart(http: Frame, axis: TimeAxis | None = None, runs=None, events: Frame | None = None) -> alt.LayerChart:
    """HTTP requests per second by status class, from the access log."""
    axis = _axis(axis, http)
    title = alt.TitleParams("HTTP requests/s by status", anchor="start", subtitle=[
        "uvicorn access lines per second. Streaming requests are logged on arrival, non-streaming ones on completion."])
    seconds = axis.every.total_seconds()
    status_class = (
        pl.when(pl.col("status").is_between(200, 599))
        .then((pl.col("status") // 100).cast(pl.String) + pl.lit("xx"))
        .otherwise(pl.lit("other"))
    )
    counts = (
        lazy(http)
        .filter(pl.col("ts").is_not_null())
        .group_by(bucket(axis.every), status_class.alias("status_class"))
        # (of paths equally frequent, the first in sort order: `mode` picks any)
        .agg(requests=pl.len(), top_path=pl.col("path").mode().sort().first().str.slice(0, 120))
        .with_columns(req_s=pl.col("requests") / seconds)
        .sort(BUCKET, "status_class")
        .collect()
    )
    if counts.height == 0:
        return no_data(title, "no HTTP access lines with a time in the store", height=50)
    counts = round_floats(with_bucket_end(counts, axis.every), 2)
    chart = alt.Chart(chart_data(counts)).mark_bar(clip=True).encode(
        x=axis.x(), x2="ts_end:T",
        y=alt.Y("req_s:Q", title="requests/s", stack="zero"),
        color=alt.Color("status_class:N", title="HTTP status",
                        scale=alt.Scale(domain=list(STATUS_COLORS), range=list(STATUS_COLORS.values()))),
        tooltip=[alt.Tooltip("status_class:N", title="status class"), axis.bucket_tooltip(),
                 alt.Tooltip("requests:Q", title="access lines in the bucket"),
                 alt.Tooltip("req_s:Q", title="requests per second"),
                 alt.Tooltip("top_path:N", title="most frequent path (log text)")],
    )
    return time_panel([chart], axis, title, height=100, runs=runs_frame(runs), events=events)
