"""Is admission held back, and by what: the KV pool (kv_cache_limiting / kv_cache_not_limiting)
or a cap on running requests while the pool had room (admission_queueing)?

Decode lines are the witnesses: SGLang schedules waiting requests before it decodes, so a Decode
line that still reports `#queue-req > 0` saw requests that could not be admitted.  Why they could
not is read from the same line: running at `max_running_requests` is a cap; a busy pool
(usage ≥ KV_BUSY_USAGE) or a retraction inside the interval is the KV cache.
"""

from __future__ import annotations

import polars as pl

from loglens.diagnose.context import KV_BUSY_USAGE, Context
from loglens.diagnose.finding import Finding, num, pct, rnd, severity_for

#: the pool counts as "mostly empty" below this peak usage
KV_ROOMY_USAGE = 0.7
MIN_LINES_TO_EXONERATE = 5
#: a kind of queueing matters when it covers at least this share of decoding time
QUEUE_SHARE_MIN = 0.05


def queue_kinds(ctx: Context) -> pl.DataFrame:
    """The window's Decode lines with why their queue waited: kv | cap | room | None."""
    cap = ctx.log.limits.get("max_running_requests")
    at_cap = (pl.col("running_req") >= cap) if cap else pl.lit(False)
    kv_busy = (pl.col("token_usage").fill_null(0.0) >= KV_BUSY_USAGE) | (pl.col("retraction_lines") > 0)
    queued = pl.col("queue_req").fill_null(0) > 0
    kind = (pl.when(~queued).then(None)
            .when(at_cap).then(pl.lit("cap"))
            .when(kv_busy).then(pl.lit("kv"))
            .otherwise(pl.lit("room")))
    return ctx.log.intervals.with_columns(queue_kind=kind, busy_s=pl.col("busy_s").fill_null(0.0))


def _share(df: pl.DataFrame, mask: pl.Expr, total: float) -> float:
    return float(df.filter(mask).get_column("busy_s").sum()) / total if total > 0 else 0.0


def _admission_gain(ctx: Context, df: pl.DataFrame, kinds: tuple[str, ...], ceiling: int | None) -> float | None:
    """Throughput the waiting requests would have added had they been admitted (up to `ceiling`),
    busy-time weighted over the whole window, summed over streams."""
    if not ctx.model.identifiable:
        return None
    target = pl.min_horizontal(pl.col("running_req") + pl.col("queue_req").fill_null(0), pl.lit(ceiling or 10**9))
    gain = (pl.when(pl.col("queue_kind").is_in(list(kinds)) & (target > pl.col("running_req")))
            .then(ctx.tok_s_expr(target) - ctx.tok_s_expr(pl.col("running_req")).fill_null(0.0))
            .otherwise(0.0))
    return ctx.per_stream_mean(df, gain)


def _retraction_totals(ctx: Context) -> tuple[int, int]:
    ev = ctx.log.retractions
    events = ev.height
    reqs = int(ev.get_column("retracted_reqs").fill_null(0).sum()) if events else 0
    return events, reqs


def _pool_evidence(ctx: Context, df: pl.DataFrame) -> dict:
    usage = df.get_column("token_usage").drop_nulls()
    prefill_usage = ctx.log.prefill.get_column("token_usage").drop_nulls()
    peak = max([x for x in (usage.max(), prefill_usage.max()) if x is not None], default=None)
    mtnt = ctx.log.limits.get("max_total_num_tokens")
    estimated = ctx.log.limits.get("max_total_num_tokens_estimated")
    max_token = df.get_column("token").max()
    events, reqs = _retraction_totals(ctx)
    return {
        "peak_token_usage": rnd(peak, 3),
        "p95_token_usage": rnd(usage.quantile(0.95), 3) if len(usage) else None,
        "max_token": rnd(max_token, 0),
        "max_total_num_tokens": mtnt,
        "max_total_num_tokens_estimated": estimated,
        "retraction_events": events,
        "retracted_requests": reqs,
        "mem_fraction_static": ctx.log.config.get("mem_fraction_static"),
    }


def kv_cache_findings(ctx: Context) -> list[Finding]:
    df = queue_kinds(ctx)
    total = float(df.get_column("busy_s").sum())
    ev = _pool_evidence(ctx, df)
    kv_share = _share(df, pl.col("queue_kind") == "kv", total)
    queued_share = _share(df, pl.col("queue_kind").is_not_null(), total)
    ev.update(decode_time_s=rnd(total, 1), queued_share=rnd(queued_share, 3), queued_pool_busy_share=rnd(kv_share, 3),
              tokens_per_request=rnd(ctx.tokens_per_req, 0), kv_capacity_requests=ctx.kv_capacity_reqs)
    retracted = ev["retraction_events"] > 0
    peak = ev["peak_token_usage"]
    if retracted or kv_share >= QUEUE_SHARE_MIN:
        kv_rows = df.filter(pl.col("queue_kind") == "kv")
        ev["mean_running_when_pool_busy"] = rnd(kv_rows.get_column("running_req").mean(), 1)
        ev["mean_queue_when_pool_busy"] = rnd(kv_rows.get_column("queue_req").mean(), 1)
        cap = ctx.log.limits.get("max_running_requests")
        cost = _admission_gain(ctx, df, ("kv",), cap) or 0.0
        text = (f"The KV cache holds the batch down: token usage peaked at {pct(peak)}"
                f"{_of_pool(ev)}, {ev['retraction_events']} retraction(s) sent {ev['retracted_requests']} request(s) back "
                f"to be prefilled again, and requests waited while the pool was busy during {pct(kv_share)} of decoding time "
                f"(about {num(ev.get('mean_running_when_pool_busy'))} running, {num(ev.get('mean_queue_when_pool_busy'))} waiting). "
                f"Try: more KV memory (--mem-fraction-static{_now(ev['mem_fraction_static'])}), a smaller model footprint "
                "(FP8 KV cache, more TP), or shorter contexts. It would be wrong if the queue also forms with the pool "
                "nearly empty (then a request cap is the limit), or if retractions stop while throughput stays the same.")
        # a retraction or two with hardly any waiting is a sign, not yet a limit
        floor = "medium" if kv_share >= QUEUE_SHARE_MIN else "low"
        return [Finding("kv_cache_limiting", severity_for(cost, ctx.decode_tok_s, floor=floor), ev, text, cost,
                        "throughput of the running batch plus the waiting requests, minus that of the running batch, "
                        "by the fitted step model, over the time they waited", "The KV cache limits the batch size")]
    # an exoneration needs a little history, and a pool that would hold at least twice the batch
    roomy = ctx.kv_capacity_reqs is None or ctx.kv_capacity_reqs >= 2 * (ctx.batch_max or 0)
    enough = df.height >= MIN_LINES_TO_EXONERATE
    if peak is not None and peak < KV_ROOMY_USAGE and kv_share < 0.01 and roomy and enough:
        text = (f"The KV cache is not what limits this server: token usage peaked at {pct(peak, 1)}{_of_pool(ev)}, "
                f"no request was retracted, and requests waited for admission during {pct(queued_share, 1)} of decoding "
                f"time. At ≈{num(ctx.tokens_per_req)} KV tokens per request the pool would hold ≈{num(ctx.kv_capacity_reqs)} "
                f"requests. More KV memory (--mem-fraction-static{_now(ev['mem_fraction_static'])}) will not raise "
                "throughput. It would be wrong if a heavier load (more concurrency, longer prompts) drives usage toward "
                "1.00 or causes retractions.")
        return [Finding("kv_cache_not_limiting", "info", ev, text, 0.0, "an exoneration: costs nothing",
                        "The KV cache is not the limit")]
    return []


def admission_queueing(ctx: Context) -> Finding | None:
    df = queue_kinds(ctx)
    total = float(df.get_column("busy_s").sum())
    mask = pl.col("queue_kind").is_in(["cap", "room"])
    share = _share(df, mask, total)
    if share < QUEUE_SHARE_MIN:
        return None
    rows = df.filter(mask)
    cap = ctx.log.limits.get("max_running_requests")
    cap_share = _share(df, pl.col("queue_kind") == "cap", total)
    ev = {
        "queued_with_room_share": rnd(share, 3),
        "queued_at_running_cap_share": rnd(cap_share, 3),
        "mean_queue": rnd(rows.get_column("queue_req").mean(), 1),
        "mean_running": rnd(rows.get_column("running_req").mean(), 1),
        "mean_token_usage_when_queued": rnd(rows.get_column("token_usage").mean(), 3),
        "max_running_requests": cap,
    }
    cost = _admission_gain(ctx, df, ("cap", "room"), ctx.kv_capacity_reqs) or 0.0
    if cap_share >= share / 2:
        why = (f"the running batch sat at --max-running-requests ({cap}) while the KV pool was "
               f"{pct(ev['mean_token_usage_when_queued'])} full. Try: raise --max-running-requests")
    else:
        why = (f"the pool read only {pct(ev['mean_token_usage_when_queued'])} full and the batch was below the cap "
               f"({num(ev['mean_running'])} running). SGLang also reserves KV room for the remaining output of running "
               "requests (new_token_ratio) and admits at most --max-prefill-tokens per prefill, so check those. Try: "
               "--schedule-conservativeness below 1, or a larger --max-prefill-tokens")
    text = (f"Requests waited for admission during {pct(share)} of decoding time (about {num(ev['mean_queue'])} waiting) "
            f"although the KV pool had room: {why}. It would be wrong if the waiting requests could not have fit "
            "(long prompts near the pool size) or if the queue is only the moment a burst arrives.")
    return Finding("admission_queueing", severity_for(cost, ctx.decode_tok_s), ev, text, cost,
                   "throughput had the waiting requests joined the batch (up to the KV capacity), by the step model",
                   "Requests wait although the KV pool has room")


def _of_pool(ev: dict) -> str:
    pool = ev.get("max_total_num_tokens") or ev.get("max_total_num_tokens_estimated")
    if ev.get("max_token") is None or not pool:
        return ""
    about = "" if ev.get("max_total_num_tokens") else "≈"
    return f" (at most {num(ev['max_token'])} of {about}{num(pool)} KV tokens)"


def _now(value) -> str:
    return f", now {value}" if value is not None else ""
