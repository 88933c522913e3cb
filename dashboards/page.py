"""The whole dashboard: every panel of a store, arranged as one Altair chart, plus the
notes the page header shows.

One compound chart rather than several: the time brush on the main panel can only zoom
panels that live in the same Vega view.  Tables are passed to the panels as lazy scans, so
each panel reads only the columns it needs from the Parquet files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from loglens.dashboards.aggregate import MAX_POINTS
from loglens.dashboards.batch import throughput_vs_batch_chart
from loglens.dashboards.reconciled import Reconciled, reconcile_for_dashboard, run_label, runs_in_log
from loglens.dashboards.samples import decode_samples
from loglens.dashboards.timeaxis import TimeAxis
from loglens.dashboards.timeseries import cuda_graph_chart, gen_throughput_chart, requests_chart, token_usage_chart
from loglens.dashboards.traffic import http_status_chart, input_throughput_chart, prefill_tokens_chart
from loglens.dashboards.waterfall import waterfall_chart
from loglens.reconcile.activity import decode_log_interval
from loglens.schema import LINE_TABLES
from loglens.store import Store

#: the interval selection drawn on the main panel; its name is part of the spec
BRUSH_NAME = "time_brush"
#: waterfalls drawn at most (one per bench record); the rest are named in a note
MAX_WATERFALLS = 6


class EmptyStoreError(Exception):
    """The store holds no rows to draw."""


@dataclass
class Dashboard:
    title: str  # from the store's contents: text, never markup
    chart: alt.VConcatChart  # every panel; the HTML page shows the title and notes above it
    notes: list[str] = field(default_factory=list)

    def titled(self) -> alt.VConcatChart:
        """The chart with the title drawn in (for PNG/SVG, which have no page around them)."""
        return self.chart.properties(title=alt.TitleParams(self.title, anchor="start", fontSize=16))


def row_counts(store: Store) -> dict[str, int]:
    return {t: store.scan(t).select(pl.len()).collect().item() for t in LINE_TABLES}


def _title(store: Store) -> str:
    """`loglens: <model> (<log file>)` from what the store says about itself."""
    config = store.scan("config").select("served_model_name", "model_path").drop_nulls("model_path").head(1).collect()
    sources = store.scan("files").select("source").unique().sort("source").collect().to_series().to_list()
    model = (config["served_model_name"][0] or config["model_path"][0]) if config.height else None
    where = Path(sources[0]).name + (f" and {len(sources) - 1} more" if len(sources) > 1 else "") if sources else str(store.path)
    return "loglens: " + (f"{model} ({where})" if model else where)


def time_panels(decode: Any, prefill: Any, http: Any, events: Any, runs: list[dict] | None = None,
                max_points: int = MAX_POINTS, samples: Any = None) -> tuple[list[alt.LayerChart | alt.Chart], TimeAxis]:
    """The time panels, sharing one axis; the first is the main panel carrying the brush.
    `samples` is `decode` already run through decode_samples, when the caller has it."""
    brush = alt.selection_interval(name=BRUSH_NAME, encodings=["x"])
    axis = TimeAxis.covering(decode, prefill, http, events, brush=brush, max_points=max_points)
    detail = axis.detail()
    panels = [
        gen_throughput_chart(decode if samples is None else samples, axis, runs, events),
        requests_chart(decode, detail, runs, events),
        token_usage_chart(decode, detail, runs, events),
        cuda_graph_chart(decode, detail, runs, events),
        prefill_tokens_chart(prefill, detail, runs, events),
        input_throughput_chart(prefill, detail, runs, events),
        http_status_chart(http, detail, runs, events),
    ]
    return panels, axis


def _waterfalls(reconciled: Reconciled) -> tuple[list[alt.LayerChart | alt.Chart], list[str]]:
    records = reconciled.records
    charts = [waterfall_chart(r, title=f"{run_label(r, i)}: why client and server disagree")
              for i, r in enumerate(records[:MAX_WATERFALLS])]
    notes = [f"{len(records) - MAX_WATERFALLS} more bench record(s) not drawn; see `loglens reconcile`."] \
        if len(records) > MAX_WATERFALLS else []
    return charts, notes


#: above this many Decode lines the page fits its own curve instead of running the full diagnosis
DIAGNOSE_MAX_DECODE = 200_000


def _diagnosed_step_model(store: Store, n_decode: int, notes: list[str]) -> tuple[float | None, float | None]:
    """The step-time model `loglens diagnose` fits (prefill-free intervals, outliers trimmed),
    so the batch panel draws the same curve the diagnosis talks about."""
    if n_decode == 0 or n_decode > DIAGNOSE_MAX_DECODE:
        return None, None
    try:
        from loglens.diagnose import diagnose

        model = diagnose(store).get("step_model") or {}
    except Exception as e:  # the page must not fail because the diagnosis could not fit
        notes.append(f"Step-time curve fitted on the page ({type(e).__name__} from diagnose).")
        return None, None
    fixed, per_req = model.get("fixed_ms"), model.get("per_req_ms")
    if fixed is None or per_req is None:
        return None, None
    notes.append(f"Step-time curve from `loglens diagnose`: {fixed:.1f} ms + {per_req:.3f} ms × batch.")
    return float(fixed), float(per_req)


def build_dashboard(store: Store, bench: str | Path | None = None, max_points: int = MAX_POINTS) -> Dashboard:
    """Every panel for `store` (and the waterfall of each record in `bench`, when the bench
    reader and reconciler are installed).  Raises EmptyStoreError when there is nothing to draw."""
    counts = row_counts(store)
    if not any(counts[t] for t in ("decode", "prefill", "http", "events")):
        raise EmptyStoreError(f"the store at {store.path} holds no log rows; run `loglens ingest LOG` first")
    tables = {t: store.scan(t) for t in ("decode", "prefill", "http", "events")}
    timed = tables["decode"].select(pl.col("ts").is_not_null().sum()).collect().item()

    reconciled = reconcile_for_dashboard(store, bench) if bench is not None else Reconciled()
    notes = list(reconciled.notes)
    runs = reconciled.runs
    if not runs:  # no bench file, or it could not be aligned: shade what the access log shows
        runs, found = runs_in_log(store)
        notes += found
    # the main panel and the batch panel both need every Decode line's window and whether it
    # is a throughput sample: reconstruct that once
    samples = decode_samples(tables["decode"], tables["events"], decode_log_interval(store, None))
    panels, axis = time_panels(tables["decode"], tables["prefill"], tables["http"], tables["events"],
                               runs, max_points, samples=samples)
    if axis.start is not None:
        notes.insert(0, f"{axis.start:%Y-%m-%d %H:%M:%S} to {axis.end:%Y-%m-%d %H:%M:%S} (log time), "
                        f"in buckets of {axis.bucket_text}.")
    else:
        notes.append("No line in the store has a time stamp (releases before v0.2.14): time panels are empty.")
    if counts["decode"] > timed:
        notes.append(f"{counts['decode'] - timed} Decode line(s) without a date are not on the time panels.")
    notes.append("Rows: " + ", ".join(f"{t} {n:,}" for t, n in counts.items()) + ".")

    waterfalls, more = _waterfalls(reconciled)
    notes += more
    if bench is None:
        notes.append("No --bench RESULTS given: no reconcile waterfall.")
    # two charts a row under the time panels: the batch scatter, then the waterfalls
    fixed_ms, per_req_ms = _diagnosed_step_model(store, counts["decode"], notes)
    below = [throughput_vs_batch_chart(samples, fixed_ms, per_req_ms), *waterfalls]
    rows = [alt.hconcat(*below[i:i + 2], spacing=40).resolve_scale(color="independent") for i in range(0, len(below), 2)]
    chart = alt.vconcat(*panels, *rows, spacing=18).resolve_scale(color="independent", stroke="shared")
    return Dashboard(title=_title(store), chart=chart, notes=notes)
