"""What one decode step costs and what slows it: cuda_graph_off, step_overhead_dominant,
prefill_interference.  All three read the fitted step model (fixed_ms + per_req_ms × batch)."""

from __future__ import annotations

import polars as pl

from loglens.diagnose.context import Context
from loglens.diagnose.finding import Finding, num, pct, rnd, severity_for

GRAPH_OFF_SHARE_MIN = 0.2
FIXED_SHARE_MIN = 0.5
PREFILL_SHARE_MIN = 0.10
#: without a log that shows both, how much of the fixed per-step cost CUDA graphs are assumed
#: to remove when estimating what running without them costs (launch overhead, not TP comms)
GRAPH_FIXED_CUT = 0.5


def _fixed_cut_gain(ctx: Context, rows: pl.DataFrame, mask: pl.Expr, cut: float) -> float | None:
    """Decode tok/s gained, over the window, if the fixed cost of the masked steps were `cut` lower."""
    m = ctx.model
    if not m.identifiable or rows.height == 0:
        return None
    b = pl.col("running_req")
    gain = ctx.tok_s_expr(b, m.fixed_ms * (1 - cut)) - ctx.tok_s_expr(b)
    return ctx.per_stream_mean(rows, pl.when(mask).then(gain).otherwise(0.0))


def _busy_share(df: pl.DataFrame, mask: pl.Expr, within: pl.Expr) -> float | None:
    base = df.filter(within)
    total = float(base.get_column("busy_s").sum())
    return float(base.filter(mask).get_column("busy_s").sum()) / total if total > 0 else None


def cuda_graph_off(ctx: Context) -> Finding | None:
    df = ctx.log.intervals.with_columns(pl.col("busy_s").fill_null(0.0))
    cfg = ctx.log.config
    disabled, max_bs = cfg.get("disable_cuda_graph"), cfg.get("cuda_graph_max_bs")
    known = pl.col("cuda_graph").is_not_null()
    off = pl.col("cuda_graph") == False  # noqa: E712  (a polars expression, not a Python bool)
    fits = (pl.col("running_req") <= max_bs) if (max_bs and not disabled) else pl.lit(True)
    n_known = df.filter(known).height
    share_small = _busy_share(df, off, known & fits)  # graphs could have applied
    share_large = _busy_share(df, off, known & ~fits)  # batch above --cuda-graph-max-bs
    share_all = _busy_share(df, off, known)
    if n_known:
        if not ((share_small or 0) >= GRAPH_OFF_SHARE_MIN or (share_large or 0) >= GRAPH_OFF_SHARE_MIN):
            return None
    elif disabled is not True:
        return None  # no graph flag in the log and no config saying graphs were off: no evidence
    off_rows = df.filter(off) if n_known else df
    ev = {
        "share_of_decode_time_without_graph": rnd(share_all if n_known else 1.0, 3),
        "share_where_graphs_could_apply": rnd(share_small, 3),
        "share_above_cuda_graph_max_bs": rnd(share_large, 3),
        "decode_lines_without_graph": off_rows.height,
        "decode_lines_with_flag": n_known,
        "batch_range_without_graph": [rnd(off_rows.get_column("running_req").min(), 0), rnd(off_rows.get_column("running_req").max(), 0)],
        "disable_cuda_graph": disabled,
        "cuda_graph_max_bs": max_bs,
        "fixed_ms": rnd(ctx.model.fixed_ms, 1),
        "fixed_share_of_decode_time": rnd(ctx.fixed_share, 3),
    }
    m = ctx.model
    measured = m.fixed_ms_graph is not None and m.fixed_ms_eager and m.fixed_ms_graph < m.fixed_ms_eager
    if measured:
        ev.update(fixed_ms_graph=rnd(m.fixed_ms_graph, 2), fixed_ms_eager=rnd(m.fixed_ms_eager, 2))
    cut = 1.0 - m.fixed_ms_graph / m.fixed_ms_eager if measured else GRAPH_FIXED_CUT
    cost = _fixed_cut_gain(ctx, df, off if n_known else pl.lit(True), cut) or 0.0
    if disabled:
        cause = "the server was started with --disable-cuda-graph"
        fix = "drop --disable-cuda-graph"
    elif (share_large or 0) >= GRAPH_OFF_SHARE_MIN and (share_small or 0) < GRAPH_OFF_SHARE_MIN:
        cause = f"the batch grew past --cuda-graph-max-bs ({max_bs})"
        fix = f"raise --cuda-graph-max-bs above {ev['batch_range_without_graph'][1]}"
    else:
        cause = "the server ran them eagerly although the batch fit the captured sizes"
        fix = "check the start-up log for a failed graph capture and the attention backend"
    fixed_words = ""
    if measured:
        fixed_words = (f" This log shows what that costs: the fixed part of a step is {num(m.fixed_ms_graph, 1)} ms with a "
                       f"graph and {num(m.fixed_ms_eager, 1)} ms without.")
    elif ctx.model.identifiable:
        fixed_words = (f" Every step then pays its kernel launches on the CPU: the step-time fit puts the fixed cost at "
                       f"{num(ctx.model.fixed_ms, 1)} ms per step ({pct(ev['fixed_share_of_decode_time'])} of decode time) "
                       f"against {num(ctx.model.per_req_ms, 2)} ms per request.")
    text = (f"Decode ran without CUDA graphs for {pct(ev['share_of_decode_time_without_graph'])} of decoding time "
            f"(batch {ev['batch_range_without_graph'][0]}–{ev['batch_range_without_graph'][1]}): {cause}.{fixed_words} "
            f"Try: {fix}. It would be wrong if a run with graphs on shows the same fixed per-step cost (then it is "
            "communication or the model's own work, not launch overhead).")
    basis = ("the fixed cost of graph steps measured in this log, applied to the graphless steps" if measured else
             f"assumes CUDA graphs remove {pct(GRAPH_FIXED_CUT)} of the fixed per-step cost on the graphless steps")
    return Finding("cuda_graph_off", severity_for(cost, ctx.decode_tok_s, floor="medium"), ev, text, cost, basis,
                   "Decode runs without CUDA graphs")


def step_overhead_dominant(ctx: Context) -> Finding | None:
    m = ctx.model
    share = ctx.fixed_share
    if share is None or share < FIXED_SHARE_MIN:
        return None
    break_even = m.fixed_ms / m.per_req_ms if m.per_req_ms > 0 else None
    ev = {
        "fixed_ms": rnd(m.fixed_ms, 2),
        "per_req_ms": rnd(m.per_req_ms, 3),
        "fixed_share_of_decode_time": rnd(share, 3),
        "mean_batch": rnd(ctx.batch_mean, 1),
        "break_even_batch": rnd(break_even, 0),
        "r2": rnd(m.r2, 3),
        "batch_range_fitted": [rnd(m.batch_min, 1), rnd(m.batch_max, 1)],
        "tp_size": ctx.log.config.get("tp_size"),
    }
    cost = _fixed_cut_gain(ctx, ctx.log.intervals.with_columns(pl.col("busy_s").fill_null(0.0)), pl.lit(True), 0.5) or 0.0
    text = (f"The fixed per-step cost dominates: {num(m.fixed_ms, 1)} ms of every decode step does not depend on the "
            f"batch, against {num(m.per_req_ms, 2)} ms per request, so at the batches seen (mean {num(ctx.batch_mean, 1)}) "
            f"{pct(share)} of decode time is that fixed cost. Only at ≈{num(break_even)} requests per batch would the "
            "per-request work match it. The step is launch- or communication-bound: try CUDA graphs, fewer TP ranks "
            f"(tp_size={ev['tp_size']}) with more DP, or larger batches. It would be wrong if the fit is poor "
            f"(R² {num(m.r2, 2)} over batch {ev['batch_range_fitted'][0]}–{ev['batch_range_fitted'][1]}): then the "
            "split between fixed and per-request cost is not established.")
    return Finding("step_overhead_dominant", severity_for(cost, ctx.decode_tok_s), ev, text, cost,
                   "throughput gained if the fixed per-step cost were halved, by the step model",
                   "The fixed per-step cost is most of the step time")


def prefill_interference(ctx: Context) -> Finding | None:
    m = ctx.model
    if not m.identifiable:
        return None
    n = ctx.log.decode_log_interval
    rows = ctx.samples.filter(pl.col("running_req") > 0).with_columns(pl.col("busy_s").fill_null(0.0))
    expected = n * (m.fixed_ms + m.per_req_ms * pl.col("batch")) / 1000.0
    excess = pl.when(pl.col("prefill_lines") > 0).then((pl.col("interval_s") - expected).clip(lower_bound=0.0)).otherwise(0.0)
    rows = rows.with_columns(excess_s=excess)
    total = float(rows.get_column("busy_s").sum())
    stalled = float(rows.get_column("excess_s").sum())
    share = stalled / total if total > 0 else 0.0
    if share < PREFILL_SHARE_MIN:
        return None
    hit = rows.filter(pl.col("prefill_lines") > 0)
    lines = int(hit.get_column("prefill_lines").sum())
    ev = {
        "share_of_decode_time": rnd(share, 3),
        "stalled_s": rnd(stalled, 1),
        "decode_time_s": rnd(total, 1),
        "intervals_with_prefill": hit.height,
        "prefill_lines_inside": lines,
        "prefill_new_tokens_inside": int(hit.get_column("prefill_new_token").sum()),
        "ms_per_prefill_line": rnd(1000 * stalled / lines, 1) if lines else None,
        "chunked_prefill_size": ctx.log.limits.get("chunked_prefill_size"),
    }
    obs = ctx.decode_tok_s or 0.0
    cost = obs * share / (1 - share) if share < 1 else obs
    text = (f"Prefill batches interrupted decoding: {lines} prefill batch(es) ({num(ev['prefill_new_tokens_inside'])} new "
            f"tokens) ran between decode steps and took ≈{num(stalled, 1)} s, {pct(share)} of decoding time, while the "
            "running requests waited. Try: --enable-mixed-chunk (decode rides along with prefill), a smaller "
            f"--chunked-prefill-size (now {ev['chunked_prefill_size']}) to bound each stall, or prefill/decode "
            "disaggregation. It would be wrong if intervals without a prefill are just as slow at the same batch "
            "(then the time goes to scheduling, not prefill).")
    return Finding("prefill_interference", severity_for(cost, ctx.decode_tok_s), ev, text, cost,
                   "decode throughput had the stalled time gone to decode steps", "Prefill stalls decoding")
