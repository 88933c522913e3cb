"""Throughput vs batch size, with the decode step-time model drawn through it.

Decode step time grows with the batch: step_ms ≈ fixed_ms + per_req_ms × batch size (kernel
launches, weight reads and communication are the fixed part, per-request attention and
sampling the rest).  One step emits one token per running request, so a Decode line's implied
step time is batch size ÷ gen throughput, and tokens/s = 1000 · bs ÷ (fixed + per_req · bs):
it rises with the batch and flattens towards 1000 / per_req_ms.

The curve is the caller's `fixed_ms`/`per_req_ms` when given (e.g. from `loglens diagnose`),
else fitted here with the project's fit (loglens.diagnose.step_model: least squares trimmed
of windows far above the line, such as windows holding a long prefill) on the throughput
samples.  With speculative decoding a step emits accept-len tokens per request, so the implied
step time runs short by that factor; points and curve stay comparable with each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import polars as pl

from loglens.dashboards.aggregate import MAX_POINTS, STREAM, chart_data, round_floats
from loglens.dashboards.samples import decode_samples
from loglens.dashboards.timeaxis import no_data
from loglens.diagnose.step_model import fit_step_model as fit_step_line

Frame = pl.DataFrame | pl.LazyFrame

#: at most this many batch-size bins when the samples are too many to plot one by one
MAX_BINS = 400


@dataclass(frozen=True)
class StepCurve:
    """The step-time model the panel draws."""

    fixed_ms: float | None
    per_req_ms: float | None
    windows: int  # Decode windows behind the numbers
    source: str  # "fitted from the log" or "given"
    usable: bool  # both costs known and non-negative: the curve means something
    note: str = ""  # why not usable, or a caveat


def batch_samples(decode: Frame, events: Frame | None = None) -> pl.DataFrame:
    """Throughput samples with their batch size and implied step time (ms)."""
    return (
        decode_samples(decode, events)
        .filter(pl.col("is_sample") & (pl.col("running_req") > 0))
        .select(STREAM, "ts", "running_req", "gen_throughput", "cuda_graph")
        .with_columns(step_ms=1000.0 * pl.col("running_req") / pl.col("gen_throughput"))
    )


def fit_step_curve(samples: pl.DataFrame) -> StepCurve:
    """Fit step_ms = fixed_ms + per_req_ms × batch size on `batch_samples` rows."""
    model = fit_step_line(samples["running_req"].to_numpy(), samples["step_ms"].to_numpy())
    return StepCurve(model.fixed_ms, model.per_req_ms, model.points, "fitted from the log",
                     usable=model.identifiable, note=model.note)


def _scatter_points(samples: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """Raw samples when few; else per batch-size bin (and graph state) the median throughput
    and its 10-90 % range."""
    graph = pl.col("cuda_graph").cast(pl.String).fill_null("unknown").alias("cuda_graph")
    if samples.height <= MAX_POINTS:
        return samples.with_columns(graph, n=pl.lit(1)), False
    width = max(1, samples["running_req"].max() // MAX_BINS + 1)
    binned = (
        samples.with_columns(graph, (pl.col("running_req") // width * width).alias("running_req"))
        .group_by("running_req", "cuda_graph")
        .agg(gen_throughput=pl.col("gen_throughput").median(), lo=pl.col("gen_throughput").quantile(0.1),
             hi=pl.col("gen_throughput").quantile(0.9), step_ms=pl.col("step_ms").median(), n=pl.len())
        .sort("running_req", "cuda_graph")
    )
    return binned, True


def _curve_layer(curve: StepCurve, top_batch: int) -> alt.Chart:
    top = max(2, int(top_batch * 1.1))
    points = pl.DataFrame({"running_req": [1 + i * (top - 1) / 99 for i in range(100)]}).with_columns(
        tok_s=1000.0 * pl.col("running_req") / (curve.fixed_ms + curve.per_req_ms * pl.col("running_req"))
    ).filter(pl.col("tok_s") > 0)
    return alt.Chart(chart_data(round_floats(points, 2))).mark_line(color="#222", strokeDash=[5, 3]).encode(
        x="running_req:Q", y="tok_s:Q",
        tooltip=[alt.Tooltip("running_req:Q", title="batch size", format=".1f"),
                 alt.Tooltip("tok_s:Q", title="model tok/s = 1000 · bs ÷ (fixed_ms + per_req_ms · bs)", format=".1f")],
    )


def throughput_vs_batch_chart(decode: Frame, fixed_ms: float | None = None, per_req_ms: float | None = None,
                              events: Frame | None = None, width: int = 420, height: int = 260) -> alt.LayerChart | alt.Chart:
    """Running requests vs gen throughput (one point per throughput sample, or binned), with the
    step-time curve.  `decode` may also be the table already run through `decode_samples`."""
    title = "Throughput vs batch size"
    samples = batch_samples(decode, events)
    if samples.height == 0:
        return no_data(title, "no Decode throughput samples to plot", width=width, height=height)
    if fixed_ms is not None and per_req_ms is not None:
        curve = StepCurve(fixed_ms, per_req_ms, samples.height, "given", usable=fixed_ms >= 0 and per_req_ms >= 0)
    else:
        curve = fit_step_curve(samples)
    points, binned = _scatter_points(samples)
    tooltip = [
        alt.Tooltip("running_req:Q", title="#running-req: batch size of the logged decode step" + (" (bin start)" if binned else "")),
        alt.Tooltip("gen_throughput:Q", title="gen throughput (tok/s): tokens from the last 40 decode steps ÷ seconds since the previous Decode line"
                    + (" (median of the bin)" if binned else "")),
        alt.Tooltip("step_ms:Q", title="implied step time (ms) = 1000 × batch size ÷ gen throughput"),
        alt.Tooltip("cuda_graph:N", title="cuda graph on the logged step"),
        alt.Tooltip("n:Q", title="Decode lines in this point"),
    ]
    color = alt.Color("cuda_graph:N", title="cuda graph",
                      scale=alt.Scale(domain=["true", "false", "unknown"], range=["#4c78a8", "#e45756", "#999"]))
    data = chart_data(round_floats(points, 2))
    layers: list[alt.Chart] = []
    if binned:
        layers.append(alt.Chart(data).mark_rule(opacity=0.35).encode(x="running_req:Q", y="lo:Q", y2="hi:Q", color=color))
    layers.append(alt.Chart(data).mark_circle(size=28 if binned else 18, opacity=0.6).encode(
        x=alt.X("running_req:Q", title="running requests (batch size)"),
        y=alt.Y("gen_throughput:Q", title="gen throughput (tok/s)"),
        color=color, tooltip=tooltip,
    ))
    if curve.usable:
        layers.append(_curve_layer(curve, samples["running_req"].max()))
        subtitle = [f"Dashed: step time = {curve.fixed_ms:.2f} ms + {curve.per_req_ms:.3f} ms × batch size "
                    f"({curve.source}, {curve.windows:,} windows)." + (f" Note: {curve.note}." if curve.note else "")]
    else:
        subtitle = [f"No step-time curve: {curve.note or 'the costs came out negative'}."]
    subtitle.append("Points: Decode lines that are throughput samples (not the first of a stream, no idle time in the window).")
    return alt.layer(*layers).properties(
        title=alt.TitleParams(title, subtitle=subtitle, anchor="start"), width=width, height=height
    )
