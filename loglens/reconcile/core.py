"""`reconcile()`: bench_serving records + the store → one Report (or Failure) per record."""

from __future__ import annotations

import polars as pl

from loglens.reconcile.accounting import PHASES, Accounting, account
from loglens.reconcile.activity import decode_bursts, load_activity
from loglens.reconcile.edges import split_edges
from loglens.reconcile.align import Alignment, align, align_bursts, manual
from loglens.reconcile.report import Failure, Report, client_block, record_info
from loglens.reconcile.waterfall import build_steps
from loglens.runs import GEN_ENDPOINTS, run_segments, to_datetime
from loglens.store import Store


class ReconcileError(Exception):
    """The store cannot answer at all (nothing ingested, no Decode lines)."""


def reconcile(store: Store, records: list, *, quote: float | None = None, start_s: float | None = None,
              end_s: float | None = None) -> list[Report | Failure]:
    n, dated = store.scan("decode").select(pl.len(), pl.col("ts").count()).collect().row(0)
    if n == 0:
        raise ReconcileError(f"the store at {store.path} holds no Decode lines (run `loglens ingest SERVER.log`, "
                             f"with the scheduler's stderr captured, or pass --store DIR)")
    if dated == 0:
        raise ReconcileError("the log's lines carry no date (SGLang before v0.3.4 prints the time of day only, "
                             "or nothing): they cannot be placed on the bench run's clock; re-run with a newer "
                             "server to reconcile")
    segments = run_segments(store)
    if start_s is not None or end_s is not None:
        alignments: list[Alignment | None] = [
            manual(start_s, end_s, r.duration or 0.0) if (r.duration or start_s is not None and end_s is not None) else None
            for r in records]
    else:
        alignments = align(records, segments) if segments else align_bursts(records, decode_bursts(store))
    return [_one(store, rec, al, quote, segments) for rec, al in zip(records, alignments)]


def _previous_run_end(al: Alignment, segments) -> float | None:
    """When the run before this one ended (its server-info call), if the log shows it."""
    table = getattr(segments, "table", None)
    if table is None or table.height == 0:
        return None
    end = pl.coalesce(pl.when(pl.col("dep_ms")).then(pl.col("dep_s")), pl.col("end_s") + 0.5)
    before = table.filter(pl.col("end_s").is_not_null() & (pl.col("end_s") + 0.5 < al.start_s))
    if al.segment is not None:
        before = before.filter(pl.col("file_id") == al.segment.file_id)
    return before.select(end.max()).item() if before.height else None


def _usable(rec) -> str | None:
    for name in ("duration", "completed", "total_output_tokens"):
        v = getattr(rec, name)
        if v is None or v <= 0:
            return f"record {rec.index + 1} has no usable `{name}` ({v!r}): nothing to reconcile"
    return None


def _one(store: Store, rec, al: Alignment | None, quote: float | None, segments: list) -> Report | Failure:
    info = record_info(rec)
    problem = _usable(rec)
    if problem:
        return Failure(info, problem)
    if al is None:
        return Failure(info, f"no run in the log matches record {rec.index + 1} ({rec.completed} requests, "
                             f"{rec.duration:.1f} s): ingest the server log of that run, or give the window "
                             f"with --start/--end")
    file_id = al.segment.file_id if al.segment is not None else None
    # the warmup bound applies only where the alignment saw the client's warmup request(s)
    act = load_activity(store, al.start_s, al.end_s, file_id, warmups=[al.start_s] if al.warmup_requests else [])
    prev_end = _previous_run_end(al, segments)
    intervals = split_edges(act.intervals, al.start_s, al.end_s, act.decode_log_interval, prev_end,
                            al.warmup_requests)
    acc = account(intervals, al.start_s, al.end_s, act.retractions)
    if acc.lines == 0 or acc.decode_tokens <= 0:
        return Failure(info, f"no Decode lines inside the window {to_datetime(al.start_s).isoformat()} → "
                             f"{to_datetime(al.end_s).isoformat()} for record {rec.index + 1}: was the scheduler's "
                             f"output (stderr) captured in the ingested log? Check with `loglens runs`")
    client_tok_s = rec.output_throughput if rec.output_throughput is not None else rec.total_output_tokens / rec.duration
    server_tok_s = float(quote) if quote is not None else acc.peak
    steps, residual, residual_why = build_steps(acc, server_tok_s, quote is not None, client_tok_s,
                                                rec.total_output_tokens, rec.completed, rec.duration)
    warnings = list(al.warnings)
    other = _other_requests(store, al, file_id)
    if other:
        warnings.append(f"{other} other generation request(s) reached the server inside the window: their tokens "
                        f"are in the server's count but not the client's")
    if rec.backend and rec.backend not in ("sglang", "sglang-native"):
        warnings.append(f"backend {rec.backend}: total_output_tokens may be the requested max_tokens, not the count")
    window = {"start": to_datetime(al.start_s).isoformat(timespec="milliseconds"),
              "end": to_datetime(al.end_s).isoformat(timespec="milliseconds"), **al.to_dict()}
    return Report(
        record=info, client=client_block(rec), window=window,
        server=_server_block(acc, act.decode_log_interval),
        tokens=_token_block(acc, rec, other),
        time=_time_block(acc),
        gap={"server_tok_s": server_tok_s, "server_figure": "quote" if quote is not None else "peak",
             "client_tok_s": client_tok_s, "steps": [s.to_dict() for s in steps],
             "residual_tok_s": residual, "residual_why": residual_why},
        warnings=warnings)


def _other_requests(store: Store, al: Alignment, file_id: str | None) -> int:
    if al.segment is None:
        return 0
    lo, hi = to_datetime(al.start_s), to_datetime(al.end_s)
    http = store.scan("http").select("file_id", "ts", "method", "path").filter(
        pl.col("ts").is_between(lo, hi) & (pl.col("method") == "POST"))
    if file_id:
        http = http.filter(pl.col("file_id") == file_id)
    n = http.filter(pl.col("path").str.split("?").list.first().is_in(GEN_ENDPOINTS)).select(pl.len()).collect().item()
    k = al.burst_from or 0
    burst = al.segment.post_s[k:k + al.requests] if al.requests else al.segment.post_s[k:]
    measured = sum(1 for s in burst if al.start_s - 1 <= s <= al.end_s)
    return max(0, n - measured)


def _server_block(acc: Accounting, log_interval: int) -> dict:
    return {"decode_tokens": round(acc.decode_tokens, 1), "gen_throughput_peak": acc.peak,
            "gen_throughput_mean": round(acc.mean_rate, 3), "gen_throughput_steady": round(acc.steady_rate, 3),
            "peak_line": acc.peak_line, "decode_lines": acc.lines, "dp_streams": len(acc.active_streams),
            "decode_log_interval": log_interval,
            "accept_len_mean": round(acc.accept_len_mean, 3) if acc.accept_len_mean else None}


def _token_block(acc: Accounting, rec, other: int) -> dict:
    expected = rec.total_output_tokens - rec.completed - acc.retracted_requests
    unexplained = expected - acc.decode_tokens
    return {"client_output_tokens": rec.total_output_tokens, "first_tokens_from_prefill": rec.completed,
            "reprefill_tokens": acc.retracted_requests, "expected_decode_tokens": expected,
            "server_decode_tokens": round(acc.decode_tokens, 1), "unexplained_tokens": round(unexplained, 1),
            "unexplained_pct": round(100 * unexplained / expected, 2) if expected else None,
            "other_requests_in_window": other,
            "by_phase": {p: round(acc.tokens(p), 1) for p in PHASES}}


def _time_block(acc: Accounting) -> dict:
    firsts = [s.first_steady_s for s in acc.active_streams if s.first_steady_s is not None]
    drains = [s.drain_from_s for s in acc.active_streams if s.drain_from_s is not None]
    return {"duration_s": round(acc.duration_s, 3),
            **{f"{p}_s": _clean(acc.seconds(p)) for p in PHASES},
            "first_steady_at": to_datetime(min(firsts)).isoformat(timespec="milliseconds") if firsts else None,
            "drain_from": to_datetime(min(drains)).isoformat(timespec="milliseconds") if drains else None,
            "prefill_batches": acc.prefill_batches,
            "prefill_counted_as_steady": any(s.prefill_counted_as_steady for s in acc.active_streams)}


def _clean(seconds: float) -> float:
    """Round to ms; float leftovers (−1e-12) are 0."""
    return max(0.0, round(seconds, 3))
