"""Time panels from the `decode` table: generation throughput, running vs queued requests,
KV token usage, CUDA graph use.

Each function takes the table as read from the store (a DataFrame, or a LazyFrame so that
only the needed columns are read) and returns an `alt.LayerChart`; pass the page's `TimeAxis`
to share buckets, extent and brush with the other panels."""

from __future__ import annotations

import altair as alt
import polars as pl

from loglens.dashboards.aggregate import (
    BUCKET, STREAM, chart_data, gauge_by_bucket, per_stream_bucket, round_floats, time_text, with_bucket_end,
)
from loglens.dashboards.samples import decode_samples, not_samples_by_bucket, throughput_by_bucket
from loglens.dashboards.timeaxis import TimeAxis, no_data, runs_frame, time_panel

Frame = pl.DataFrame | pl.LazyFrame

GEN_MEANS = "gen throughput (tok/s): tokens from the last 40 decode steps ÷ seconds since the previous Decode line"
SUM_LABEL = "sum over DP ranks"


def _axis(axis: TimeAxis | None, *frames: Frame) -> TimeAxis:
    return axis if axis is not None else TimeAxis.covering(*frames)


def gen_throughput_chart(decode: Frame, axis: TimeAxis | None = None, runs=None, events: Frame | None = None) -> alt.LayerChart:
    """Gen throughput per DP stream and summed over DP ranks, with runs shaded.  This is the
    main panel: when the axis carries a brush, it is drawn here.  `decode` may also be the
    table already run through `decode_samples`."""
    axis = _axis(axis, decode)
    title = alt.TitleParams(
        "Generation throughput (server's decode tokens/s)",
        subtitle=[GEN_MEANS + " of the same DP rank; time-weighted per bucket.",
                  "Hollow grey: Decode lines that are no throughput sample (first line of a stream, a window spanning idle time)."
                  + (" Drag to zoom all time panels." if axis.brush is not None and not axis.zoomed else "")],
        anchor="start",
    )
    samples = decode_samples(decode, events)
    per_stream = throughput_by_bucket(samples, axis.every)
    if per_stream.height == 0:
        return no_data(title, "no Decode line with a gen throughput sample in the store")
    series = per_stream
    if per_stream[STREAM].n_unique() > 1:  # duplicate TP/PP streams are gone: these are DP ranks
        total = (
            per_stream.group_by(BUCKET)
            .agg(gen_tok_s=pl.col("gen_tok_s").sum(), gen_max=pl.col("gen_max").sum(), lines=pl.col("lines").sum())
            .with_columns(pl.lit(SUM_LABEL).alias(STREAM))
            .select(per_stream.columns)
            .sort(BUCKET)  # (a group-by's order varies from run to run: the page would too)
        )
        series = pl.concat([per_stream, total])
    series = round_floats(series.with_columns(time_text(axis.every)), 1)

    tooltip = [
        alt.Tooltip(f"{STREAM}:N", title="stream (DP rank, or the sum over DP ranks)"),
        axis.bucket_tooltip(),
        alt.Tooltip("gen_tok_s:Q", title="decode tok/s in this bucket: tokens of the Decode windows ending in it ÷ the seconds they cover"),
        alt.Tooltip("gen_max:Q", title="highest gen throughput logged in this bucket (tok/s)"),
        alt.Tooltip("lines:Q", title="Decode lines (throughput samples) whose window ends in this bucket"),
    ]
    streams = sorted(series[STREAM].unique().to_list(), key=lambda s: (s == SUM_LABEL, s))
    lines = alt.Chart(chart_data(series)).mark_line(
        interpolate="step-before", invalid="break-paths-show-domains", point=alt.OverlayMarkDef(size=10), clip=True
    ).encode(
        x=axis.x(),
        y=alt.Y("gen_tok_s:Q", title="gen throughput (tok/s)"),
        color=alt.Color(f"{STREAM}:N", title="stream", sort=streams,
                        scale=alt.Scale(domain=streams, range=_stream_colors(streams))),
        strokeWidth=alt.condition(alt.datum.stream == SUM_LABEL, alt.value(2.5), alt.value(1.2)),
        tooltip=tooltip,
    )
    if axis.brush is not None and not axis.zoomed:
        lines = lines.add_params(axis.brush)
    layers = [lines]
    bogus = not_samples_by_bucket(samples, axis.every)
    if bogus.height:
        bogus = round_floats(bogus.with_columns(time_text(axis.every)), 2)
        layers.append(alt.Chart(chart_data(bogus)).mark_point(shape="circle", filled=False, color="#888", size=40, clip=True).encode(
            x=axis.x(), y="gen_throughput:Q",
            tooltip=[alt.Tooltip(f"{STREAM}:N", title="stream"), axis.bucket_tooltip(),
                     alt.Tooltip("gen_throughput:Q", title="logged gen throughput (tok/s): not a throughput sample"),
                     alt.Tooltip("interval_s:Q", title="seconds since the previous Decode line of the stream (reconstructed)"),
                     alt.Tooltip("why:N", title="why it is left out")],
        ))
    return time_panel(layers, axis, title, height=220, runs=runs_frame(runs), events=events, label_runs=True)


def _stream_colors(streams: list[str]) -> list[str]:
    palette = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d", "#72b7b2", "#eeca3b", "#ff9da6", "#bab0ac"]
    return [("#222" if s == SUM_LABEL else palette[i % len(palette)]) for i, s in enumerate(streams)]


def requests_chart(decode: Frame, axis: TimeAxis | None = None, runs=None, events: Frame | None = None) -> alt.LayerChart:
    """Running (decode batch size) vs queued requests, summed over DP ranks."""
    axis = _axis(axis, decode)
    title = alt.TitleParams("Running vs queued requests", anchor="start", subtitle=[
        "#running-req: requests in the decode batch; #queue-req: requests waiting to be admitted. Bucket means, summed over DP ranks."])
    gauges = gauge_by_bucket(decode, ["running_req", "queue_req"], axis.every)
    if gauges.height == 0:
        return no_data(title, "no Decode lines with a time in the store")
    long = pl.concat([
        gauges.group_by(BUCKET).agg(
            requests=pl.col(f"{col}_mean").sum(), peak=pl.col(f"{col}_max").sum(),
            _seen=pl.col(f"{col}_mean").is_not_null().any(),
        ).with_columns(pl.lit(name).alias("series"))
        for col, name in (("running_req", "running (decoding)"), ("queue_req", "queued (waiting)"))
    ])
    # a bucket where no DP rank was logging is idle, not "0 requests": leave it out of the line
    long = long.with_columns(
        pl.when("_seen").then(pl.col("requests")), pl.when("_seen").then(pl.col("peak"))
    ).drop("_seen").sort("series", BUCKET)
    long = round_floats(long.with_columns(time_text(axis.every)), 1)
    chart = alt.Chart(chart_data(long)).mark_line(interpolate="step-after", invalid="break-paths-show-domains", clip=True).encode(
        x=axis.x(), y=alt.Y("requests:Q", title="requests"),
        color=alt.Color("series:N", title="requests", scale=alt.Scale(range=["#54a24b", "#e45756"])),
        tooltip=[alt.Tooltip("series:N", title="what"), axis.bucket_tooltip(),
                 alt.Tooltip("requests:Q", title="mean over the bucket, summed over DP ranks"),
                 alt.Tooltip("peak:Q", title="highest value logged in the bucket, summed over DP ranks")],
    )
    return time_panel([chart], axis, title, height=130, runs=runs_frame(runs), events=events)


def token_usage_chart(decode: Frame, axis: TimeAxis | None = None, runs=None, events: Frame | None = None) -> alt.LayerChart:
    """KV-cache token usage per DP rank (0..1)."""
    axis = _axis(axis, decode)
    title = alt.TitleParams("KV cache token usage", anchor="start", subtitle=[
        "token usage = #token ÷ max_total_num_tokens: KV slots held by running requests (unlocked prefix cache not counted). Near 1 → retractions."])
    usage = gauge_by_bucket(decode, ["token_usage"], axis.every)
    if usage.height == 0 or usage["token_usage_mean"].null_count() == usage.height:
        return no_data(title, "no Decode line with a token usage in the store")
    usage = round_floats(usage.with_columns(time_text(axis.every)), 3)
    chart = alt.Chart(chart_data(usage)).mark_line(interpolate="step-after", invalid="break-paths-show-domains", clip=True).encode(
        x=axis.x(), y=alt.Y("token_usage_mean:Q", title="token usage", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color(f"{STREAM}:N", title="stream"),
        tooltip=[alt.Tooltip(f"{STREAM}:N", title="stream"), axis.bucket_tooltip(),
                 alt.Tooltip("token_usage_mean:Q", title="mean token usage in the bucket (share of the KV pool in use)"),
                 alt.Tooltip("token_usage_max:Q", title="highest token usage logged in the bucket")],
    )
    return time_panel([chart], axis, title, height=110, runs=runs_frame(runs), events=events)


def cuda_graph_chart(decode: Frame, axis: TimeAxis | None = None, runs=None, events: Frame | None = None) -> alt.LayerChart:
    """Share of Decode lines whose last batch ran as a CUDA graph, per bucket."""
    axis = _axis(axis, decode)
    title = alt.TitleParams("CUDA graph on/off", anchor="start", subtitle=[
        "Share of Decode lines whose last decode batch ran as a CUDA graph. Off when the batch is larger than --cuda-graph-max-bs, or graphs are disabled."])
    graph_on = pl.col("cuda_graph").filter(pl.col("cuda_graph").is_not_null())
    per_stream = per_stream_bucket(
        decode, axis.every,
        on_lines=graph_on.sum(), lines=graph_on.len(),
        off_max_bs=pl.col("running_req").filter(pl.col("cuda_graph").not_()).max(),
    )
    graph = (
        per_stream.filter(pl.col("lines") > 0)
        .group_by(BUCKET)
        .agg(on_share=pl.col("on_lines").sum() / pl.col("lines").sum(), lines=pl.col("lines").sum(),
             off_lines=(pl.col("lines") - pl.col("on_lines")).sum(), off_max_bs=pl.col("off_max_bs").max())
        .sort(BUCKET)
    )
    if graph.height == 0:
        return no_data(title, "no Decode line says whether it ran a CUDA graph (the field appeared in v0.4.6.post4)")
    graph = round_floats(with_bucket_end(graph, axis.every), 3)
    chart = alt.Chart(chart_data(graph)).mark_bar(color="#72b7b2", clip=True).encode(
        x=axis.x(), x2="ts_end:T",
        y=alt.Y("on_share:Q", title="graph on (share)", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        tooltip=[axis.bucket_tooltip(),
                 alt.Tooltip("on_share:Q", title="share of Decode lines with cuda graph: True", format=".0%"),
                 alt.Tooltip("lines:Q", title="Decode lines in the bucket"),
                 alt.Tooltip("off_lines:Q", title="lines with cuda graph: False"),
                 alt.Tooltip("off_max_bs:Q", title="largest #running-req among graph-off lines")],
    )
    return time_panel([chart], axis, title, height=80, runs=runs_frame(runs), events=events)
