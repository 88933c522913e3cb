"""Shaping store tables for charts, in polars: streams, time buckets, chart data.

A chart never receives raw rows.  A 1 GiB log holds millions of Decode lines; a browser wants
a few thousand points.  Every panel is one polars query per table that groups by stream and
time bucket, so the cost is a scan of the columns the panel needs, not a loop over rows.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import altair as alt
import polars as pl

from loglens.schema import RANK_COLUMNS

#: a label per scheduler stream: `DP<n>`, `GPU<n>` (old releases) or `main` (no DP), as
#: loglens.intervals names them
STREAM = "stream"
#: the time bucket a row falls into (its left edge)
BUCKET = "ts"
#: most buckets one series may carry to the browser
MAX_POINTS = 1200

#: bucket widths a reader can think in
_NICE_WIDTHS = [
    timedelta(milliseconds=ms)
    for ms in (100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
               600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000)
]
#: ranks that only duplicate a DP rank's stream (some releases print a batch from every TP
#: rank or PP stage); the lowest is kept
_DUPLICATE_RANKS = [c for c in RANK_COLUMNS if c != "dp_rank"]


def lazy(frame: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    return frame.lazy() if isinstance(frame, pl.DataFrame) else frame


def stream_label() -> pl.Expr:
    """The stream a row belongs to, named as loglens.intervals names it."""
    return (
        pl.when(pl.col("dp_rank").is_not_null()).then(pl.format("DP{}", pl.col("dp_rank")))
        .when(pl.col("gpu").is_not_null()).then(pl.format("GPU{}", pl.col("gpu")))
        .otherwise(pl.lit("main"))
        .alias(STREAM)
    )


def _primary_ranks(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The rank combinations to keep: per stream, the one with the lowest duplicate ranks."""
    return (
        frame.select(*RANK_COLUMNS, "gpu").unique()
        .with_columns(stream_label())
        .sort([STREAM, *_DUPLICATE_RANKS], nulls_last=False)
        .group_by(STREAM, maintain_order=True).first()
        .drop(STREAM)
    )


def per_stream_bucket(frame: pl.DataFrame | pl.LazyFrame, every: timedelta, *aggs: pl.Expr,
                      **named_aggs: pl.Expr) -> pl.DataFrame:
    """`aggs` per stream and time bucket, duplicate TP/PP streams left out.  Groups by the
    integer rank columns and names the groups afterwards: building a label on every one of
    millions of rows costs more than the whole aggregation."""
    ranks = [*RANK_COLUMNS, "gpu"]
    rows = lazy(frame).filter(pl.col("ts").is_not_null())
    return (
        rows.group_by(*ranks, bucket(every))
        .agg(*aggs, **named_aggs)
        .join(_primary_ranks(rows), on=ranks, how="semi", nulls_equal=True)
        .with_columns(stream_label())
        .drop(ranks)
        .sort(STREAM, BUCKET)
        .collect()
    )


def time_span(*frames: pl.DataFrame | pl.LazyFrame) -> tuple[datetime, datetime] | None:
    """Earliest and latest `ts` over the given tables (None when no row has a time)."""
    spans = pl.concat(
        [lazy(f).select(lo=pl.col("ts").min(), hi=pl.col("ts").max()) for f in frames], how="vertical"
    ).select(pl.col("lo").min(), pl.col("hi").max()).collect()
    lo, hi = spans.row(0)
    return None if lo is None else (lo, hi)


def has_subsecond_times(*frames: pl.DataFrame | pl.LazyFrame) -> bool:
    """SGLang stamps lines to the second unless SGLANG_LOG_MS=1: buckets finer than the
    stamps would only show the stamping."""
    return any(
        lazy(f).select((pl.col("ts").dt.microsecond() != 0).any()).collect().item() is True for f in frames
    )


def bucket_width(span: tuple[datetime, datetime] | None, max_points: int = MAX_POINTS,
                 finest: timedelta = timedelta(seconds=1)) -> timedelta:
    """The smallest readable bucket width, no finer than `finest`, that keeps a series under
    `max_points` points."""
    if span is None:
        return finest
    seconds = (span[1] - span[0]).total_seconds()
    for width in _NICE_WIDTHS:
        if width >= finest and seconds / width.total_seconds() <= max_points:
            return width
    return timedelta(days=math.ceil(seconds / 86_400 / max_points))


def bucket(every: timedelta, column: str = "ts") -> pl.Expr:
    return pl.col(column).dt.truncate(every).alias(BUCKET)


def time_text(every: timedelta, column: str = BUCKET) -> pl.Expr:
    """Times travel to the browser as ISO text without a zone: the log's local time, shown as
    the log wrote it whatever the viewer's zone (Vega parses zone-less ISO as local)."""
    fmt = "%Y-%m-%dT%H:%M:%S%.3f" if every < timedelta(seconds=1) else "%Y-%m-%dT%H:%M:%S"
    return pl.col(column).dt.strftime(fmt).alias(column)


def with_bucket_end(frame: pl.DataFrame, every: timedelta) -> pl.DataFrame:
    """Bucket start and end as text (`ts`, `ts_end`), so bars span exactly their bucket."""
    return frame.with_columns((pl.col(BUCKET) + every).alias("ts_end")).with_columns(
        time_text(every), time_text(every, "ts_end")
    )


def stream_grid(lines: pl.LazyFrame, every: timedelta) -> pl.LazyFrame:
    """Every (stream, bucket) from each stream's first to its last bucket: the frame that lets a
    series show idle time as a gap and lets streams be summed bucket by bucket."""
    return (
        lines.group_by(STREAM)
        .agg(lo=pl.col(BUCKET).min().dt.truncate(every), hi=pl.col(BUCKET).max().dt.truncate(every))
        .with_columns(pl.datetime_ranges("lo", "hi", every, time_unit="us").alias(BUCKET))
        .explode(BUCKET)
        .select(STREAM, BUCKET)
    )


def gauge_by_bucket(frame: pl.DataFrame | pl.LazyFrame, columns: list[str], every: timedelta) -> pl.DataFrame:
    """Per stream and bucket: mean and max of gauge columns (`<col>_mean`, `<col>_max`).

    A bucket with no line of its own holds the stream's last logged value for up to twice the
    usual spacing of its lines (a scheduler logs every 40 steps, not every bucket), so sums over
    streams do not dip between lines; after that the stream is idle and the bucket stays null."""
    means = per_stream_bucket(
        frame, every, pl.len().alias("_lines"),
        *[pl.col(c).mean().alias(f"{c}_mean") for c in columns],
        *[pl.col(c).max().alias(f"{c}_max") for c in columns],
    )
    if means.height == 0:
        return means.drop("_lines")
    # the usual spacing of a stream's lines: the median gap between its buckets that have lines
    # (not span ÷ count, which idle gaps between benchmark runs would inflate)
    spacing_s = means.sort(STREAM, BUCKET).group_by(STREAM).agg(
        (pl.col(BUCKET).diff().dt.total_microseconds() / 1e6).median().alias("_gap")
    ).get_column("_gap").median() or 0.0
    limit = max(1, math.ceil(2 * spacing_s / every.total_seconds()))
    grid = stream_grid(means.lazy(), every).join(means.lazy().drop("_lines"), on=[STREAM, BUCKET], how="left")
    return grid.sort(STREAM, BUCKET).with_columns(
        [pl.col(f"{c}_{agg}").fill_null(strategy="forward", limit=limit).over(STREAM)
         for c in columns for agg in ("mean", "max")]
    ).collect()


def round_floats(frame: pl.DataFrame, digits: int = 3) -> pl.DataFrame:
    """Fewer digits, smaller page: nobody reads the fourth decimal of a throughput."""
    return frame.with_columns(pl.col(pl.Float64, pl.Float32).round(digits))


def chart_data(frame: pl.DataFrame) -> alt.InlineData:
    """A panel's rows as inline CSV.

    CSV names each column once instead of in every row, which halves the page; and a chart
    holding one string is cheap for Altair to copy and validate (a list of 50 000 dicts is
    deep-copied at every layer and concat).  Numbers and booleans are parsed back by type;
    empty cells are nulls."""
    parse = {name: "boolean" if dtype == pl.Boolean else "number"
             for name, dtype in frame.schema.items() if dtype.is_numeric() or dtype == pl.Boolean}
    return alt.InlineData(values=frame.write_csv(), format=alt.CsvDataFormat(type="csv", parse=parse))
