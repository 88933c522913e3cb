"""The reconcile waterfall: from the server's throughput figure to the client's, one bar per
named cause.

Input is one record of `loglens reconcile --json` (a dict): `gap.server_tok_s`, `gap.steps`
(a list of {name, tok_s, why}), `gap.residual_tok_s` and `gap.client_tok_s`, with the
invariant server + Σ steps + residual = client.  The chart only draws what the dict says; it
never recomputes the reconciliation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import altair as alt
import polars as pl

from loglens.dashboards.aggregate import chart_data
from loglens.dashboards.timeaxis import no_data

#: the chart says so when the bars do not land on the client figure within this share
INVARIANT_TOLERANCE = 0.005


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def waterfall_rows(reconcile: Mapping[str, Any]) -> pl.DataFrame:
    """One row per bar: `label`, `kind` (figure / step / residual), `start`, `end`, `tok_s`, `why`."""
    gap = reconcile.get("gap") or {}
    server, client = _number(gap.get("server_tok_s")), _number(gap.get("client_tok_s"))
    if server is None or client is None:
        return pl.DataFrame(schema={"order": pl.Int64, "label": pl.String, "kind": pl.String, "start": pl.Float64,
                                    "end": pl.Float64, "tok_s": pl.Float64, "why": pl.String})
    rows = [{"label": "server figure", "kind": "figure", "start": 0.0, "end": server, "tok_s": server,
             "why": "the server's gen throughput being explained (the peak logged value unless --quote was given)"}]
    running = server
    for step in gap.get("steps") or []:
        change = _number(step.get("tok_s")) or 0.0
        rows.append({"label": str(step.get("name") or "unnamed step"), "kind": "step" if change <= 0 else "step up",
                     "start": running, "end": running + change, "tok_s": change, "why": str(step.get("why") or "")})
        running += change
    residual = _number(gap.get("residual_tok_s")) or 0.0
    rows.append({"label": "residual (unexplained)", "kind": "residual", "start": running, "end": running + residual,
                 "tok_s": residual, "why": str(gap.get("residual_why") or "what the named steps do not explain")})
    rows.append({"label": "client figure", "kind": "figure", "start": 0.0, "end": client, "tok_s": client,
                 "why": "bench_serving's output throughput: total output tokens ÷ benchmark duration"})
    frame = pl.DataFrame(rows).with_row_index("order")
    # bars are placed by label: make repeated step names distinct
    return frame.with_columns(
        pl.when(pl.col("label").is_duplicated())
        .then(pl.col("label") + pl.lit(" #") + (pl.col("label").cum_count().over("label")).cast(pl.String))
        .otherwise(pl.col("label")).alias("label")
    )


def waterfall_chart(reconcile: Mapping[str, Any], title: str | None = None, width: int = 420) -> alt.LayerChart | alt.Chart:
    """Horizontal waterfall of one reconcile record, top (server figure) to bottom (client)."""
    rows = waterfall_rows(reconcile)
    heading = title or "Why the client and the server disagree"
    if rows.height == 0:
        return no_data(heading, "this reconcile record has no gap.server_tok_s / gap.client_tok_s", width=width)
    gap = reconcile.get("gap") or {}
    landed = float(rows.filter(pl.col("kind") == "residual")["end"][0])
    client = float(rows["end"][-1])
    subtitle = [f"From the server's {rows['tok_s'][0]:.1f} tok/s to the client's {client:.1f} tok/s; "
                "each bar is a named cause (hover for why)."]
    if abs(landed - client) > INVARIANT_TOLERANCE * max(abs(client), 1.0):
        subtitle.append(f"Warning: server + steps + residual = {landed:.1f}, not the client's {client:.1f}.")
    rows = rows.with_columns(pl.col(pl.Float64).round(2)).with_columns(
        text=pl.Series([f"{v:.1f}" if kind == "figure" else f"{v:+.1f}" for v, kind in zip(rows["tok_s"], rows["kind"])])
    )
    order = rows["label"].to_list()
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=220))
    color = alt.Color("kind:N", legend=None, scale=alt.Scale(
        domain=["figure", "step", "step up", "residual"], range=["#4c78a8", "#e45756", "#54a24b", "#bab0ac"]))
    base = alt.Chart(chart_data(rows))
    bars = base.mark_bar(height=16).encode(
        y=y, x=alt.X("start:Q", title="tokens/s", axis=alt.Axis(tickCount=6, labelOverlap=True)), x2="end:Q", color=color,
        tooltip=[alt.Tooltip("label:N", title="step"),
                 alt.Tooltip("tok_s:Q", title="tok/s (a figure, or the change this cause makes)", format=".2f"),
                 alt.Tooltip("start:Q", title="running total before (tok/s)", format=".2f"),
                 alt.Tooltip("end:Q", title="running total after (tok/s)", format=".2f"),
                 alt.Tooltip("why:N", title="why")],
    )
    labels = base.mark_text(align="left", dx=4, fontSize=10).encode(
        y=y, x=alt.X("max_end:Q"), text="text:N",
    ).transform_calculate(max_end="max(datum.start, datum.end)")
    steps = len(gap.get("steps") or [])
    return alt.layer(bars, labels).properties(
        title=alt.TitleParams(heading, subtitle=subtitle, anchor="start"), width=width, height=24 * (steps + 3)
    )
