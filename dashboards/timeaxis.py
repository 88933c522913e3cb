"""What every time panel shares: the time axis and its brush, benchmark runs shaded behind the
data, retractions and errors as rules, and a plain "no data" panel."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import altair as alt
import polars as pl

from loglens.dashboards.aggregate import (
    BUCKET, bucket, bucket_width, chart_data, has_subsecond_times, lazy, time_span, time_text,
)

WIDTH = 860
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"

#: event kinds drawn as rules on the time panels, and their colours
EVENT_COLORS = {"retraction": "#e8890c", "error": "#d62728"}
#: longest event message shown in a tooltip (a traceback can be megabytes)
MESSAGE_CHARS = 300


@dataclass(frozen=True)
class TimeAxis:
    """The shared x axis of the time panels.

    `brush` is the interval selection drawn on the main panel; a panel with `zoomed=True`
    takes its x domain from that brush, so dragging on the main panel zooms all the others.
    `start`/`end` pin every panel to the same extent while nothing is brushed."""

    every: timedelta
    start: datetime | None = None
    end: datetime | None = None
    brush: alt.Parameter | None = None
    zoomed: bool = False

    @classmethod
    def covering(cls, *frames: pl.DataFrame | pl.LazyFrame, brush: alt.Parameter | None = None,
                 max_points: int | None = None) -> "TimeAxis":
        span = time_span(*frames)
        finest = timedelta(milliseconds=100) if has_subsecond_times(*frames) else timedelta(seconds=1)
        kwargs = {"max_points": max_points} if max_points else {}
        every = bucket_width(span, finest=finest, **kwargs)
        start, end = span if span else (None, None)
        return cls(every=every, start=start, end=end, brush=brush)

    def detail(self) -> "TimeAxis":
        return replace(self, zoomed=True) if self.brush is not None else self

    def text(self, moment: datetime) -> str:
        return pl.select(pl.lit(moment, dtype=pl.Datetime("us")).alias(BUCKET)).select(time_text(self.every)).item()

    def scale(self) -> alt.Scale | Any:
        if self.zoomed and self.brush is not None:
            return alt.Scale(domain=self.brush)
        if self.start is not None and self.end is not None:
            return alt.Scale(domain=[self.text(self.start), self.text(self.end + self.every)])
        return alt.Undefined

    def x(self, field: str = BUCKET) -> alt.X:
        return alt.X(f"{field}:T", title=None, scale=self.scale(), axis=alt.Axis(format=self.label_format(), labelOverlap=True))

    def label_format(self) -> str:
        """Time of day for a run of hours; the date too once the store spans days."""
        if self.start is not None and self.end - self.start > timedelta(hours=20):
            return "%m-%d %H:%M"
        return "%H:%M:%S"

    def extent_layer(self) -> alt.Chart | None:
        """Invisible marks at both ends of the store's time span.  A zoomed panel with an
        empty brush falls back to its own data extent; these keep all panels aligned."""
        if not self.zoomed or self.start is None:
            return None
        ends = pl.DataFrame({BUCKET: [self.text(self.start), self.text(self.end + self.every)]})
        return alt.Chart(chart_data(ends)).mark_point(opacity=0).encode(x=self.x())

    @property
    def bucket_text(self) -> str:
        return _duration(self.every)

    def bucket_tooltip(self) -> alt.Tooltip:
        return alt.Tooltip(f"{BUCKET}:T", title=f"bucket start (buckets of {self.bucket_text})", format=TIME_FORMAT)


def _duration(every: timedelta) -> str:
    seconds = every.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:g} s"
    if seconds < 3600:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"


def runs_frame(runs: pl.DataFrame | Iterable[Mapping[str, Any]] | None) -> pl.DataFrame:
    """Benchmark runs as a frame of `start`, `end` and `label`; accepts a frame or a list of
    {start, end, label} holding datetimes or ISO text (the reconcile JSON's window times)."""
    rows = [] if runs is None else runs.to_dicts() if isinstance(runs, pl.DataFrame) else list(runs)
    parsed = [
        {"start": _as_datetime(r.get("start")), "end": _as_datetime(r.get("end")), "label": str(r.get("label") or "run")}
        for r in rows
    ]
    schema = {"start": pl.Datetime("us"), "end": pl.Datetime("us"), "label": pl.String}
    return pl.DataFrame(parsed, schema=schema).drop_nulls(["start", "end"])


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)  # log times are local wall-clock times without a zone
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).replace(tzinfo=None)
        except ValueError:
            return None
    return None


def runs_layer(runs: pl.DataFrame, axis: TimeAxis, label: bool = False) -> list[alt.Chart]:
    """Shaded spans behind the data, one per benchmark run (labelled on the main panel)."""
    if runs.height == 0:
        return []
    spans = runs.with_columns(time_text(axis.every, "start"), time_text(axis.every, "end"))
    base = alt.Chart(chart_data(spans))
    tooltip = [alt.Tooltip("label:N", title="benchmark run"),
               alt.Tooltip("start:T", title="run start (log time)", format=TIME_FORMAT),
               alt.Tooltip("end:T", title="run end (log time)", format=TIME_FORMAT)]
    layers = [base.mark_rect(opacity=0.12, color="#4c78a8", clip=True).encode(x=axis.x("start"), x2="end:T", tooltip=tooltip)]
    if label:
        layers.append(base.mark_text(align="left", baseline="top", dx=3, dy=3, fontSize=10, color="#4c78a8", clip=True)
                      .encode(x=axis.x("start"), y=alt.value(0), text="label:N"))
    return layers


def events_by_bucket(events: pl.DataFrame | pl.LazyFrame, every: timedelta) -> pl.DataFrame:
    """Retractions and errors per time bucket: how many, requests retracted, the first message."""
    return (
        lazy(events)
        .filter(pl.col("kind").is_in(list(EVENT_COLORS)) & pl.col("ts").is_not_null())
        .sort("ts", "line_no")
        .group_by(bucket(every), "kind")
        .agg(count=pl.len(), retracted=pl.col("retracted_reqs").sum(),
             message=pl.col("message").first().str.slice(0, MESSAGE_CHARS),
             source=pl.col("source").first(), line_no=pl.col("line_no").first())
        .sort(BUCKET, "kind")
        .collect()
        .with_columns(time_text(every))
    )


def events_layer(events: pl.DataFrame | pl.LazyFrame | None, axis: TimeAxis) -> list[alt.Chart]:
    """Vertical rules where the server retracted requests (KV pool full) or hit an error."""
    if events is None:
        return []
    marks = events_by_bucket(events, axis.every)
    if marks.height == 0:
        return []
    kinds = list(EVENT_COLORS)
    return [alt.Chart(chart_data(marks)).mark_rule(strokeWidth=1, opacity=0.45, clip=True).encode(
        x=axis.x(),
        # stroke, not color: a panel's data layers own the color scale, and layers share scales
        stroke=alt.Stroke("kind:N", title="event", scale=alt.Scale(domain=kinds, range=[EVENT_COLORS[k] for k in kinds])),
        tooltip=[alt.Tooltip("kind:N", title="event"), axis.bucket_tooltip(),
                 alt.Tooltip("count:Q", title="events of this kind in the bucket"),
                 alt.Tooltip("retracted:Q", title="requests retracted (KV cache pool full; they are re-prefilled later)"),
                 alt.Tooltip("message:N", title="first message (log text)"),
                 alt.Tooltip("source:N", title="log file"), alt.Tooltip("line_no:Q", title="line")],
    )]


def no_data(title: str, why: str, width: int = WIDTH, height: int = 60) -> alt.Chart:
    """A panel that says why it is empty, instead of an empty frame that looks broken."""
    return alt.Chart(chart_data(pl.DataFrame({"note": [why]}))).mark_text(color="#777", fontSize=12).encode(
        text="note:N"
    ).properties(title=title, width=width, height=height)


def time_panel(data_layers: list[alt.Chart], axis: TimeAxis, title: str | alt.TitleParams, height: int,
               runs: pl.DataFrame | None = None, events: pl.DataFrame | pl.LazyFrame | None = None,
               label_runs: bool = False) -> alt.LayerChart:
    """Stack a panel: runs behind, data, event rules, extent keeper."""
    layers = runs_layer(runs, axis, label=label_runs) if runs is not None else []
    layers += data_layers
    layers += events_layer(events, axis)
    extent = axis.extent_layer()
    if extent is not None:
        layers.append(extent)
    return alt.layer(*layers).properties(title=title, width=WIDTH, height=height)
