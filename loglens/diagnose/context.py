"""The numbers every finding shares, computed once: the fitted step model, what the server did
(throughput, batch sizes, KV usage, queueing), and what it would allow (its limits).

Time weighting: a Decode line speaks for the decoding time of its interval (`busy_s` from
loglens.intervals), so a long interval counts for more than a short one.  Quantities of one
scheduler (a DP stream) are averaged over that stream's time; totals add the streams.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from loglens.diagnose.inputs import ServerLog
from loglens.diagnose.step_model import StepModel, fit_step_model

if TYPE_CHECKING:
    from loglens.bench_records import BenchRecord

#: token usage at or above which a waiting queue is blamed on the KV pool.  SGLang admits a
#: request only if its prompt plus a reserve for every running request's remaining output
#: (× new_token_ratio) fits, so admission stops well before the pool reads 1.00
KV_BUSY_USAGE = 0.6


@dataclass
class Context:
    log: ServerLog
    model: StepModel
    accept_len: float  # mean tokens per request per step (1 without speculative decoding)
    streams: int
    busy_s: float  # decoding seconds in the window, summed over streams
    span_s: float  # wall seconds from the first to the last Decode window in the window
    decode_tok_s: float | None  # observed, time-weighted, summed over streams
    peak_gen_throughput: float | None
    batch_mean: float | None  # time-weighted #running-req, mean over streams
    batch_max: int | None
    tokens_per_req: float | None  # KV tokens held per running request (median)
    kv_capacity_reqs: int | None  # max_total_num_tokens ÷ tokens_per_req
    server_batch_limit: int | None  # the most requests one scheduler would run at once
    fixed_share: float | None = None  # share of decode time that is the fixed per-step cost
    bench: BenchRecord | None = None
    bench_note: str = ""

    @property
    def samples(self) -> pl.DataFrame:
        return self.log.intervals.filter(pl.col("is_sample"))

    def tok_s(self, batch: float | None) -> float | None:
        """Predicted throughput of one scheduler at this batch."""
        if batch is None or batch <= 0:
            return None
        return self.model.tok_s(batch, self.accept_len)

    def tok_s_expr(self, batch: pl.Expr, fixed_ms: float | None = None) -> pl.Expr:
        """`tok_s` as a polars expression (optionally with another fixed cost); null where the
        model cannot answer."""
        m = self.model
        if not m.identifiable:
            return pl.lit(None, dtype=pl.Float64)
        fixed = m.fixed_ms if fixed_ms is None else fixed_ms
        b = batch.cast(pl.Float64)
        return pl.when(b > 0).then(1000.0 * b * self.accept_len / (fixed + m.per_req_ms * b))

    def per_stream_mean(self, df: pl.DataFrame, value: pl.Expr) -> float | None:
        """Σ over streams of the busy-weighted mean of `value` (e.g. a throughput gain)."""
        if df.height == 0:
            return None
        per = (df.with_columns(_v=value, _w=pl.col("busy_s").fill_null(0.0))
               .filter(pl.col("_v").is_not_null())
               .group_by("stream").agg(((pl.col("_v") * pl.col("_w")).sum() / pl.col("_w").sum()).alias("m")))
        total = per.get_column("m").drop_nans().sum() if per.height else None
        return float(total) if total is not None else None


def _weighted(df: pl.DataFrame, col: str) -> float | None:
    d = df.filter(pl.col(col).is_not_null() & (pl.col("busy_s") > 0))
    w = d.get_column("busy_s").sum()
    return float((d.get_column(col) * d.get_column("busy_s")).sum() / w) if w > 0 else None


#: fewer prefill-free intervals than this and the fit takes prefill-bearing ones too
MIN_CLEAN_INTERVALS = 8


def fit_from_intervals(iv: pl.DataFrame, steps_per_interval: int) -> StepModel:
    """The step model from the usable intervals; graph and eager steps get their own fixed
    cost.  When prefills touch nearly every interval (steady arrivals), those intervals are
    used too, with the prefill batches and tokens inside them as extra terms."""
    clean = iv.filter(pl.col("fit_excluded").is_null())
    model = None
    if clean.height >= MIN_CLEAN_INTERVALS:
        model = fit_step_model(clean["batch"].to_numpy(), clean["step_ms"].to_numpy(), eager=_eager(clean))
        if model.identifiable:
            return model
    rows = iv.filter(pl.col("fit_excluded").is_null() | (pl.col("fit_excluded") == "prefill_inside"))
    if rows.height <= clean.height:
        return model or fit_step_model(clean["batch"].to_numpy(), clean["step_ms"].to_numpy(), eager=_eager(clean))
    return fit_step_model(rows["batch"].to_numpy(), rows["step_ms"].to_numpy(), eager=_eager(rows),
                          prefill_batches=rows["prefill_lines"].to_numpy(),
                          prefill_tokens=rows["prefill_new_token"].to_numpy(),
                          steps_per_interval=steps_per_interval)


def _eager(rows: pl.DataFrame):
    """Per interval, True when it ran without a CUDA graph; None when the log has no graph flag."""
    graph = rows.get_column("cuda_graph")
    return None if graph.null_count() else (~graph).to_numpy()


def fixed_share_of_decode_time(model: StepModel, samples: pl.DataFrame) -> float | None:
    """Busy-weighted share of decode time that is the fixed per-step cost, at the batches seen."""
    if not model.identifiable:
        return None
    rows = samples.filter(pl.col("running_req") > 0)
    b = pl.col("running_req").cast(pl.Float64)
    share = rows.select(model.fixed_ms / (model.fixed_ms + model.per_req_ms * b)).to_series()
    w = rows.get_column("busy_s")
    total = float(w.sum())
    return float((share * w).sum() / total) if total > 0 else None


def build_context(log: ServerLog, bench: BenchRecord | None = None, bench_note: str = "") -> Context:
    iv = log.intervals
    model = fit_from_intervals(iv, log.decode_log_interval)
    samples = iv.filter(pl.col("is_sample"))
    accept = _weighted(samples, "accept_len") or 1.0
    busy = float(iv.get_column("busy_s").fill_null(0.0).sum())
    per_stream = (samples.group_by("stream")
                  .agg(tok=pl.col("tokens").sum(), s=pl.col("interval_s").sum(),
                       b=(pl.col("running_req") * pl.col("busy_s")).sum() / pl.col("busy_s").sum()))
    per_stream = per_stream.filter(pl.col("s") > 0)
    decode_tok_s = float((per_stream["tok"] / per_stream["s"]).sum()) if per_stream.height else None
    batch_mean = float(per_stream["b"].mean()) if per_stream.height else None
    # from the first moment of decoding (a line's busy part ends at the line; an idle-gap line's
    # window reaches back over the idle time, its busy part does not) to the last line
    first = iv.select((pl.col("ts") - pl.duration(microseconds=(pl.col("busy_s") * 1e6).cast(pl.Int64))).min()).item()
    span = (iv.get_column("ts").max() - first).total_seconds() if first is not None else 0.0

    held = iv.filter((pl.col("running_req") > 0) & pl.col("token").is_not_null())
    tokens_per_req = float((held["token"] / held["running_req"]).median()) if held.height else None
    mtnt = log.limits.get("max_total_num_tokens") or log.limits.get("max_total_num_tokens_estimated")
    kv_cap = int(mtnt // tokens_per_req) if mtnt and tokens_per_req else None
    caps = [c for c in (log.limits.get("max_running_requests"), kv_cap) if c]
    return Context(
        log=log, model=model, accept_len=accept,
        streams=iv.get_column("stream").n_unique(),
        busy_s=busy, span_s=max(span, 0.0),
        decode_tok_s=decode_tok_s,
        peak_gen_throughput=iv.get_column("gen_throughput").max(),
        batch_mean=batch_mean,
        batch_max=iv.get_column("running_req").max(),
        tokens_per_req=tokens_per_req,
        kv_capacity_reqs=kv_cap,
        server_batch_limit=min(caps) if caps else None,
        fixed_share=fixed_share_of_decode_time(model, samples),
        bench=bench, bench_note=bench_note,
    )
