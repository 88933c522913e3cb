"""Server activity around a time window, read lazily from the store.

Only the rows near the window are read (predicate pushdown on `ts`, projection of the columns
used), so a reconcile on a 1 GiB store reads a few thousand rows, not millions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from loglens.intervals import decode_intervals, stream_name
from loglens.reconcile.edges import WARMUP_DECODE_TOKENS, refine_busy, split_edges
from loglens.runs import Run, to_datetime, to_seconds
from loglens.store import Store

#: read this much before/after a window: the interval reconstruction pins clock offsets with
#: ±10 neighbouring lines, and the first line after an idle gap may start long before the window
MARGIN_S = 180.0
DECODE_COLUMNS = ["file_id", "source", "line_no", "ts", "timestamp", "dp_rank", "pp_rank", "attn_cp_rank",
                  "moe_dp_rank", "tp_rank", "ep_rank", "gpu", "running_req", "queue_req", "token_usage",
                  "gen_throughput", "accept_len", "cuda_graph"]


@dataclass
class Activity:
    """Decode lines (with reconstructed intervals) and related facts for one time range."""

    intervals: pl.DataFrame  # decode_intervals(...) plus `prefill_batches`, `prefill_tokens`, `_end_s`, `_busy_start_s`
    retractions: pl.DataFrame  # events: ts, retracted_reqs
    decode_log_interval: int


def _ts_range(lf: pl.LazyFrame, lo: float, hi: float) -> pl.LazyFrame:
    return lf.filter(pl.col("ts").is_between(to_datetime(lo), to_datetime(hi)))


def decode_log_interval(store: Store, file_id: str | None) -> int:
    cfg = store.scan("config").select("file_id", "line_no", "decode_log_interval")
    if file_id:
        cfg = cfg.filter(pl.col("file_id") == file_id)
    vals = cfg.drop_nulls("decode_log_interval").sort("line_no").collect()
    return int(vals["decode_log_interval"][-1]) if vals.height else 40


def load_activity(store: Store, start_s: float, end_s: float, file_id: str | None = None,
                  margin_s: float = MARGIN_S, warmups: list[float] | None = None) -> Activity:
    """Decode lines (with intervals, prefill counts, refined busy time), retractions and the
    decode-log interval around [start, end].  The margin before the start widens (×20 each time)
    until every stream has lines before the start: the first line of a run after a long idle
    gap needs its predecessor, or its interval would be unknowable."""
    first_ts = None
    before = margin_s
    while True:
        lo, hi = start_s - before, end_s + margin_s
        dec = _ts_range(store.scan("decode").select(DECODE_COLUMNS), lo, hi)
        ev = store.scan("events").select("file_id", "line_no", "ts", "kind", "message", "retracted_reqs")
        ev = _ts_range(ev.filter(pl.col("kind").is_in(["server_args", "cache_flush", "retraction"])), lo, hi)
        pre = _ts_range(store.scan("prefill").select("file_id", "line_no", "ts", "dp_rank", "tp_rank", "gpu",
                                                     "new_token", "new_seq", "running_req", "input_throughput"), lo, hi)
        if file_id:
            dec, ev, pre = (f.filter(pl.col("file_id") == file_id) for f in (dec, ev, pre))
        init = store.scan("events").select("file_id", "line_no", "ts", "kind", "message", "retracted_reqs").filter(
            pl.col("kind") == "max_total_num_tokens")  # scheduler starts: few, and needed whatever the margin
        if file_id:
            init = init.filter(pl.col("file_id") == file_id)
        dec, ev, pre, init = pl.collect_all([dec, ev, pre, init])
        ev = pl.concat([ev, init])
        if _enough_before(dec, start_s):
            break
        if first_ts is None:
            first_ts = store.scan("decode").select(pl.col("ts").min()).collect().item()
        if first_ts is None or to_datetime(lo) <= first_ts:
            break
        before *= 20
    interval = decode_log_interval(store, file_id)
    iv = decode_intervals(dec, interval, events=ev, prefill=pre, precise=True,
                          warmups=[start_s] if warmups is None else warmups, warmup_tokens=WARMUP_DECODE_TOKENS)
    iv = refine_busy(_with_prefill_counts(iv, pre), interval)  # edges.py
    iv = iv.with_columns(
        _end_s=pl.col("window_end").dt.epoch("us").cast(pl.Float64) / 1e6,
    ).with_columns(_busy_start_s=pl.col("_end_s") - pl.col("busy_s"), _start_s=pl.col("_end_s") - pl.col("interval_s"))
    retr = ev.filter(pl.col("kind") == "retraction").select("ts", "retracted_reqs")
    return Activity(iv, retr, interval)


def _enough_before(dec: pl.DataFrame, start_s: float) -> bool:
    """Every DP stream in `dec` has at least two lines before the start."""
    if dec.height == 0:
        return False
    counts = dec.group_by(stream_name(dec).alias("_s")).agg((pl.col("ts") < to_datetime(start_s)).sum().alias("n"))
    return bool((counts["n"] >= 2).all())


def _with_prefill_counts(iv: pl.DataFrame, pre: pl.DataFrame) -> pl.DataFrame:
    """Prefill batches (and their new tokens) logged between a Decode line and the previous one
    of its stream: the prefills that ran inside its window (by line number: exact at any
    timestamp resolution).  The first line's window began before what was read: 0."""
    if iv.height == 0:
        return iv.with_columns(prefill_batches=pl.lit(0, pl.Int64), prefill_tokens=pl.lit(0, pl.Int64))
    stream = stream_name(pre)
    tp = pl.col("tp_rank").fill_null(-1)
    pre = pre.with_columns(stream=stream).filter(tp == tp.min().over("file_id", "stream"))  # TP copies
    parts = []
    for (fid, st), part in iv.group_by(["file_id", "stream"], maintain_order=True):
        p = pre.filter((pl.col("file_id") == fid) & (pl.col("stream") == st)).sort("line_no")
        lines = p["line_no"].to_numpy()
        cum_tok = np.concatenate([[0], np.cumsum(p["new_token"].fill_null(0).to_numpy())])
        before = np.searchsorted(lines, part["line_no"].to_numpy())  # prefill lines before each line
        prev = np.concatenate([before[:1], before[:-1]])
        parts.append(part.with_columns(prefill_batches=pl.Series(before - prev, dtype=pl.Int64),
                                       prefill_tokens=pl.Series(cum_tok[before] - cum_tok[prev], dtype=pl.Int64)))
    return pl.concat(parts)


def overlap(a0: np.ndarray, a1: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip(np.minimum(a1, hi) - np.maximum(a0, lo), 0.0, None)


def window_tokens(iv: pl.DataFrame, start_s: float, end_s: float) -> tuple[float, float | None, int]:
    """Decode-step tokens made inside [start, end] (each line's tokens spread over its busy part,
    pro-rated at the edges), the highest gen throughput logged inside, and the lines logged inside."""
    if iv.height == 0:
        return 0.0, None, 0
    end = iv["_end_s"].to_numpy()
    busy0 = iv["_busy_start_s"].to_numpy()
    busy = np.maximum(end - busy0, 1e-9)
    tok = np.nan_to_num(iv["tokens"].to_numpy())
    tokens = float(np.sum(tok * overlap(busy0, end, start_s, end_s) / busy))
    logged = iv["_logged"].to_numpy() if "_logged" in iv.columns else np.ones(iv.height, bool)
    inside = (end >= start_s) & (end <= end_s) & logged
    gen = iv["gen_throughput"].to_numpy()[inside]
    peak = float(np.nanmax(gen)) if gen.size and np.isfinite(gen).any() else None
    return tokens, peak, int(inside.sum())


def annotate_decode_activity(store: Store, runs: list[Run]) -> None:
    """Fill each run's decode tokens, peak gen throughput and line count (one read for all runs
    of a file; runs far apart are read separately so a long log is not read whole).  Past 200
    runs the vectorised `runstats.annotate_many` does it without the edge refinements."""
    if len(runs) > 200:
        from loglens.reconcile.runstats import annotate_many

        annotate_many(store, runs, decode_log_interval(store, None))
        return
    by_file: dict[str, list[Run]] = {}
    for r in runs:
        by_file.setdefault(r.file_id, []).append(r)
    for fid, group in by_file.items():
        group.sort(key=lambda r: r.start)
        chunk: list[Run] = []
        for r in group + [None]:
            if chunk and (r is None or (r.start - chunk[-1].end).total_seconds() > 2 * MARGIN_S):
                lo, hi = to_seconds(chunk[0].start), max(to_seconds(x.end) for x in chunk)
                act = load_activity(store, lo, hi, fid,
                                    warmups=[to_seconds(x.start) for x in chunk if x.warmup_requests])
                for x in chunk:
                    a, b = to_seconds(x.start), to_seconds(x.end)
                    prev_end = max((to_seconds(y.end) for y in group if y.end <= x.start), default=None)
                    iv = split_edges(act.intervals, a, b, act.decode_log_interval, prev_end, x.warmup_requests)
                    x.decode_tokens, x.gen_throughput_peak, x.decode_lines = window_tokens(iv, a, b)
                chunk = []
            if r is not None:
                chunk.append(r)


def decode_bursts(store: Store, file_id: str | None = None, min_lines: int = 2) -> list[Run]:
    """Runs seen from decode activity alone (a log without access lines): stretches of Decode
    lines between idle gaps (or start-ups, flushes).  Start = the first line's busy part, end =
    the last line; requests unknown.  Reads the whole decode table: only used as a fallback."""
    dec = store.scan("decode").select(DECODE_COLUMNS)
    ev = store.scan("events").select("file_id", "line_no", "ts", "kind", "message").filter(
        pl.col("kind").is_in(["server_args", "cache_flush", "max_total_num_tokens"]))
    if file_id:
        dec, ev = dec.filter(pl.col("file_id") == file_id), ev.filter(pl.col("file_id") == file_id)
    dec, ev = pl.collect_all([dec, ev])
    iv = decode_intervals(dec, decode_log_interval(store, file_id), events=ev).filter(pl.col("window_end").is_not_null())
    if iv.height == 0:
        return []
    iv = iv.with_columns(_end_s=pl.col("window_end").dt.epoch("us").cast(pl.Float64) / 1e6)
    iv = iv.with_columns(_busy_start_s=pl.col("_end_s") - pl.col("busy_s").fill_null(pl.col("interval_s")).fill_null(0.0))
    # a burst starts where a line's busy part begins more than 1 s after every earlier line ended
    # (all DP streams together)
    iv = iv.sort("_busy_start_s").with_columns(
        _burst=(pl.col("_busy_start_s") > pl.col("_end_s").cum_max().shift(1).fill_null(-1e18) + 1.0).cum_sum())
    out: list[Run] = []
    for (_, fid), g in iv.group_by(["_burst", "file_id"], maintain_order=True):
        if g.height < min_lines:
            continue
        first = g.sort("_busy_start_s").row(0, named=True)
        busy_start = float(g["_busy_start_s"].min())
        out.append(Run(index=len(out), file_id=fid, source=first["source"], endpoint="?",
                       start=to_datetime(busy_start), end=to_datetime(float(g["_end_s"].max())), requests=0,
                       warmup_requests=0, end_anchor="decode activity", deprecation_warning=False, confidence=0.3,
                       evidence=[f"{g.height} Decode lines between idle gaps (no access lines in the log)"],
                       first_line=int(g["line_no"].min()), end_line=int(g["line_no"].max()),
                       decode_tokens=float(g["tokens"].sum()), gen_throughput_peak=float(g["gen_throughput"].max()),
                       decode_lines=g.height, busy_start_s=busy_start))
    return out
