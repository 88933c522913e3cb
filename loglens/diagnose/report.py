"""`diagnose()`: the whole answer as one plain dict (the `--json` object; the terminal view
renders the same dict, so the two cannot disagree)."""

from __future__ import annotations

import math
from datetime import datetime, time
from typing import TYPE_CHECKING

import polars as pl

from loglens.diagnose.context import Context, build_context
from loglens.diagnose.finding import rnd
from loglens.diagnose.findings import collect_findings
from loglens.diagnose.inputs import ServerLog, load_server_log
from loglens.store import Store

if TYPE_CHECKING:
    from loglens.bench_records import BenchRecord

#: rows at or above this fraction of the largest batch outside the fit window form the
#: "saturated" comparison
TOP_BATCH_FRACTION = 0.9


def diagnose(store: Store, *, start: datetime | time | None = None, end: datetime | time | None = None,
             window_label: str | None = None, bench: BenchRecord | None = None, bench_note: str = "",
             predict_at: list[float] | None = None) -> dict:
    """Fit the step model and derive the findings for Decode lines in [start, end]."""
    full = load_server_log(store)
    start, end = _on_log_day(start, full), _on_log_day(end, full)
    restricted = start is not None or end is not None
    log = full.restrict(start, end) if restricted else full
    ctx = build_context(log, bench, bench_note)
    findings = collect_findings(ctx)
    return _json_safe({
        "store": str(store.path),
        "window": {
            "start": _iso(log.window["start"]), "end": _iso(log.window["end"]),
            "restricted": restricted, "label": window_label,
        },
        "decode_log_interval": log.decode_log_interval,
        "step_model": _step_model(ctx, predict_at or []),
        "observed": _observed(ctx),
        "limits": _limits(ctx),
        "comparison": _comparison(ctx, full) if restricted else None,
        "bench": _bench(ctx),
        "findings": [f.as_dict() for f in findings],
    })


def _json_safe(obj):
    """NaN and infinities (a degenerate log can produce them) become null: JSON has neither."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _on_log_day(when: datetime | time | None, log: ServerLog) -> datetime | None:
    """A bare time of day means that time on the log's first day."""
    if isinstance(when, time) and log.window.get("start") is not None:
        return datetime.combine(log.window["start"].date(), when)
    return when if isinstance(when, datetime) else None


def _iso(ts) -> str | None:
    return ts.isoformat() if ts is not None else None


def _step_model(ctx: Context, predict_at: list[float]) -> dict:
    m = ctx.model
    out = m.as_dict()
    excluded = ctx.log.intervals.get_column("fit_excluded").drop_nulls().value_counts(sort=True)
    out["excluded"] = {r: int(c) for r, c in excluded.iter_rows()}
    out["fixed_share_of_decode_time"] = rnd(ctx.fixed_share, 3)
    out["accept_len"] = rnd(ctx.accept_len, 3)
    out["asymptote_tok_s"] = rnd(1000.0 * ctx.accept_len / m.per_req_ms, 1) if m.identifiable and m.per_req_ms > 0 else None
    points = [
        ("mean batch observed", ctx.batch_mean),
        ("largest batch observed", ctx.batch_max),
        ("max_running_requests", ctx.log.limits.get("max_running_requests")),
        ("KV capacity at the observed tokens per request", ctx.kv_capacity_reqs),
        *[("requested", b) for b in predict_at],
    ]
    out["predictions"] = sorted((_prediction(ctx, label, b) for label, b in points if b), key=lambda p: p["batch"])
    return out


def _prediction(ctx: Context, label: str, batch: float) -> dict:
    m = ctx.model
    tok = ctx.tok_s(batch)
    return {
        "label": label,
        "batch": rnd(batch, 1),
        "tok_s": rnd(tok, 1),  # one scheduler (DP stream)
        "tok_s_all_streams": rnd(tok * ctx.streams, 1) if tok is not None else None,
        "fixed_share": rnd(m.fixed_share(batch), 3),
        "extrapolated": bool(m.batch_max is not None and batch > 1.05 * m.batch_max),
    }


def _observed(ctx: Context) -> dict:
    return {
        "decode_tok_s": rnd(ctx.decode_tok_s, 1),
        "peak_gen_throughput": rnd(ctx.peak_gen_throughput, 2),
        "mean_running_requests": rnd(ctx.batch_mean, 2),
        "max_running_requests": ctx.batch_max,
        "streams": ctx.streams,
        "decode_lines": ctx.log.intervals.height,
        "samples": ctx.samples.height,
        "decode_time_s": rnd(ctx.busy_s, 1),
        "span_s": rnd(ctx.span_s, 1),
        "tokens_per_request": rnd(ctx.tokens_per_req, 1),
    }


def _limits(ctx: Context) -> dict:
    cfg = ctx.log.config
    out = {k: v for k, v in ctx.log.limits.items()}
    out.update(kv_capacity_requests=ctx.kv_capacity_reqs, server_batch_limit=ctx.server_batch_limit,
               startups_in_window=ctx.log.startups_in_window)
    for key in ("tp_size", "dp_size", "disable_cuda_graph", "cuda_graph_max_bs", "mem_fraction_static", "model_path"):
        out[key] = cfg.get(key)
    return out


def _comparison(ctx: Context, full: ServerLog) -> dict | None:
    """The step model fitted on the window, checked against the largest batches outside it."""
    inside = ctx.log.intervals.select("file_id", "line_no")
    outside = (full.intervals.join(inside, on=["file_id", "line_no"], how="anti")
               .filter(pl.col("is_sample") & (pl.col("running_req") > 0)))
    if outside.height == 0:
        return None
    peak = outside.sort("gen_throughput", descending=True).row(0, named=True)
    clean = outside.filter(pl.col("fit_excluded").is_null())
    out = {
        "peak_gen_throughput_outside": rnd(peak["gen_throughput"], 2),
        "peak_line_running_req": peak["running_req"],
        "peak_line_mean_batch": rnd(peak["batch"], 1),  # over its interval: a drain runs above the end batch
        "peak_line_ts": _iso(peak["ts"]),
        "predicted_at_peak_line_batch": rnd(ctx.tok_s(peak["batch"]), 1),
    }
    if clean.height:
        top = clean.filter(pl.col("batch") >= TOP_BATCH_FRACTION * clean.get_column("batch").max())
        secs = float(top.get_column("interval_s").sum())
        observed = float(top.get_column("tokens").sum()) / secs if secs > 0 else None
        batch = float((top["batch"] * top["interval_s"]).sum()) / secs if secs > 0 else None
        # per stream: the prediction is for one scheduler
        observed = observed / top.get_column("stream").n_unique() if observed else None
        predicted = ctx.tok_s(batch)
        out.update(
            top_batch=rnd(batch, 1), top_intervals=top.height,
            observed_tok_s_at_top_batch=rnd(observed, 1),
            predicted_tok_s_at_top_batch=rnd(predicted, 1),
            error_pct=rnd(100.0 * (predicted - observed) / observed, 1) if predicted and observed else None,
        )
    return out


def _bench(ctx: Context) -> dict | None:
    b = ctx.bench
    if b is None:
        return None
    return {
        "source": b.source, "index": b.index, "note": ctx.bench_note,
        "num_prompts": b.num_prompts, "request_rate": _rate(b.request_rate), "max_concurrency": b.max_concurrency,
        "concurrency": rnd(b.concurrency, 2), "output_throughput": rnd(b.output_throughput, 2),
        "duration_s": rnd(b.duration, 2), "completed": b.completed,
    }


def _rate(rate: float | None):
    """JSON has no infinity: bench_serving's default "all at once" becomes the string "inf"."""
    return "inf" if rate is not None and rate == float("inf") else rnd(rate, 3)
