"""Was the server given enough work, and was it spread evenly: client_bound, dp_imbalance."""

from __future__ import annotations

import polars as pl

from loglens.diagnose.context import Context
from loglens.diagnose.finding import Finding, num, pct, rnd, severity_for

#: the load counts as "far below" what the server takes under this fraction of its batch limit
LOAD_FRACTION_MAX = 0.5
QUEUED_SHARE_MAX = 0.02
#: how far past the largest batch seen the linear step model is trusted for the what-if
EXTRAPOLATION_LIMIT = 2.0
IMBALANCE_MIN = 0.25


def _queued_share(ctx: Context) -> float:
    df = ctx.log.intervals
    total = float(df.get_column("busy_s").fill_null(0.0).sum())
    queued = float(df.filter(pl.col("queue_req").fill_null(0) > 0).get_column("busy_s").fill_null(0.0).sum())
    return queued / total if total > 0 else 0.0


def client_bound(ctx: Context) -> Finding | None:
    limit = ctx.server_batch_limit
    if limit is None or ctx.batch_mean is None or ctx.log.retractions.height:
        return None
    queued = _queued_share(ctx)
    if queued > QUEUED_SHARE_MAX:
        return None  # requests waited: the server, not the client, held the load down
    bench = ctx.bench
    load = ctx.batch_mean * ctx.streams
    capacity = limit * ctx.streams
    client_conc = bench.concurrency if bench is not None else None
    seen = max(load, client_conc or 0.0)
    if seen > LOAD_FRACTION_MAX * capacity:
        return None
    target = min(limit, EXTRAPOLATION_LIMIT * (ctx.batch_max or 1))
    predicted = ctx.tok_s(target)
    predicted_total = predicted * ctx.streams if predicted else None
    cost = max((predicted_total or 0.0) - (ctx.decode_tok_s or 0.0), 0.0)
    idle = min(max(1.0 - ctx.busy_s / (ctx.span_s * ctx.streams), 0.0), 1.0) if ctx.span_s > 0 else None
    ev = {
        "mean_running_requests": rnd(load, 1),
        "max_running_requests_seen": ctx.batch_max,
        "server_batch_limit": capacity,
        "max_running_requests": ctx.log.limits.get("max_running_requests"),
        "kv_capacity_requests": ctx.kv_capacity_reqs,
        "queued_share": rnd(queued, 3),
        "idle_share_of_window": rnd(idle, 3),
        "observed_decode_tok_s": rnd(ctx.decode_tok_s, 1),
        "what_if_batch": rnd(target, 0),
        "predicted_tok_s_at_what_if_batch": rnd(predicted_total, 1),
    }
    client = ""
    if bench is not None:
        ev.update(client_concurrency=rnd(client_conc, 2), client_max_concurrency=bench.max_concurrency,
                  client_request_rate=rnd(bench.request_rate, 2), client_num_prompts=bench.num_prompts,
                  client_output_tok_s=rnd(bench.output_throughput, 1))
        settings = [f"max concurrency {bench.max_concurrency or 'unset'}", f"request rate {bench.request_rate:g}"
                    if bench.request_rate is not None else None,
                    f"{bench.num_prompts} prompts" if bench.num_prompts else None]
        client = (f" bench_serving kept {num(client_conc, 1)} requests in flight on average "
                  f"({', '.join(x for x in settings if x)}).")
    what_if = ""
    if predicted_total:
        what_if = (f" The step model predicts {num(predicted_total)} tok/s at batch {num(target)} "
                   f"against {num(ctx.decode_tok_s)} tok/s observed.")
    text = (f"The client never loaded the server to its capacity: {num(load, 1)} requests were running on average "
            f"(at most {ctx.batch_max}) while the server would take about {num(capacity)}, no request waited, and the "
            f"decode loop was idle {pct(idle)} of the window.{client}{what_if} The benchmark measured the client's "
            "load, not the server's limit. Try: more concurrency (--max-concurrency, --request-rate, --num-prompts). "
            "It would be wrong if, at higher load, requests start to queue or token usage nears 1.00 before throughput rises.")
    return Finding("client_bound", severity_for(cost, ctx.decode_tok_s), ev, text, cost,
                   f"predicted throughput at {EXTRAPOLATION_LIMIT:g}× the largest batch seen (capped at the server's "
                   "limit) minus the observed throughput", "The client, not the server, set the load")


def dp_imbalance(ctx: Context) -> Finding | None:
    if ctx.streams < 2:
        return None
    per = (ctx.log.intervals.with_columns(pl.col("busy_s").fill_null(0.0))
           .group_by("stream")
           .agg(mean_running=(pl.col("running_req") * pl.col("busy_s")).sum() / pl.col("busy_s").sum(),
                tokens=pl.col("tokens").filter(pl.col("is_sample")).sum(),
                busy_s=pl.col("busy_s").sum())
           .sort("stream"))
    loads = per.get_column("mean_running").drop_nulls().drop_nans()
    if len(loads) < 2 or loads.mean() <= 0:
        return None
    mean = float(loads.mean())
    spread = float(loads.max()) / mean - 1.0
    if spread < IMBALANCE_MIN or float(loads.max() - loads.min()) < 2:
        return None
    cost = 0.0
    if ctx.model.identifiable:
        cost = max(sum((ctx.tok_s(mean) or 0.0) - (ctx.tok_s(b) or 0.0) for b in loads.to_list() if b > 0), 0.0)
    ev = {
        "streams": [{"stream": s, "mean_running": rnd(m, 1), "tokens": rnd(t, 0), "busy_s": rnd(b, 1)}
                    for s, m, t, b in per.iter_rows()],
        "max_over_mean": rnd(spread + 1.0, 3),
        "dp_size": ctx.log.config.get("dp_size"),
        "enable_dp_attention": ctx.log.config.get("enable_dp_attention"),
    }
    hi = per.sort("mean_running", descending=True).row(0)
    lo = per.sort("mean_running").row(0)
    text = (f"Data-parallel ranks carried unequal load: {hi[0]} ran {num(hi[1], 1)} requests on average, {lo[0]} "
            f"{num(lo[1], 1)} (the busiest is {pct(spread)} above the mean). With DP attention the ranks step together, so "
            "the busiest sets the pace. Try: another --load-balance-method, or check the router in front. It would "
            "be wrong if the difference comes only from the edges of a run (ramp-up, drain).")
    return Finding("dp_imbalance", severity_for(cost, ctx.decode_tok_s), ev, text, cost,
                   "throughput of every rank at the mean load minus that at their actual loads, by the step model",
                   "DP ranks are unevenly loaded")
