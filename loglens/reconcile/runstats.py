"""Decode activity of many runs at once (`loglens runs` on a long log: 100 000 runs).

Per DP stream the cumulative decode tokens form a piecewise-linear function of time: flat over
each line's idle part, rising over its busy part.  The tokens of any window are C(end) − C(start)
(np.interp), the lines logged inside it a searchsorted difference, its peak a reduceat over the
lines sorted by time.  This skips the per-window edge refinements of `reconcile` (warmup and
previous-run steps in the first line, unlogged steps after the last), so it reads a few percent
lower or higher at run edges; `reconcile` gives the exact accounting of one run.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from loglens.intervals import decode_intervals
from loglens.reconcile.access import cache_path, read_cache, write_cache
from loglens.runs import Run, to_datetime, to_seconds
from loglens.store import Store

MARGIN_S = 180.0
_COLUMNS = ["file_id", "source", "line_no", "ts", "timestamp", "dp_rank", "pp_rank", "attn_cp_rank",
            "moe_dp_rank", "tp_rank", "ep_rank", "gpu", "running_req", "gen_throughput", "accept_len"]


def annotate_many(store: Store, runs: list[Run], log_interval: int) -> None:
    """Fill decode_tokens / gen_throughput_peak / decode_lines of every run (cached in the store's
    .cache for its current content, like the segment table)."""
    path = cache_path(store, "runstats")
    cached = read_cache(path)
    starts = [to_seconds(r.start) for r in runs]
    if cached is not None and cached.height == len(runs) and cached["start"].to_list() == starts:
        for r, (t, p, n) in zip(runs, cached.select("tokens", "peak", "lines").iter_rows()):
            r.decode_tokens, r.gen_throughput_peak, r.decode_lines = t, p, n
        return
    _annotate(store, runs, log_interval)
    write_cache(path, pl.DataFrame({"start": starts, "tokens": [r.decode_tokens for r in runs],
                                    "peak": [r.gen_throughput_peak for r in runs],
                                    "lines": [r.decode_lines for r in runs]},
                                   schema={"start": pl.Float64, "tokens": pl.Float64, "peak": pl.Float64,
                                           "lines": pl.Int64}))


def _annotate(store: Store, runs: list[Run], log_interval: int) -> None:
    by_file: dict[str, list[Run]] = {}
    for r in runs:
        by_file.setdefault(r.file_id, []).append(r)
    for fid, group in by_file.items():
        starts = np.array([to_seconds(r.start) for r in group])
        ends = np.array([to_seconds(r.end) for r in group])
        lo, hi = to_datetime(starts.min() - MARGIN_S), to_datetime(ends.max() + MARGIN_S)
        # (lazy: decode_intervals reads it once, dropping duplicate TP/PP copies as it goes)
        dec = store.scan("decode").select(_COLUMNS).filter((pl.col("file_id") == fid) & pl.col("ts").is_between(lo, hi))
        ev = (store.scan("events").select("file_id", "line_no", "ts", "kind", "message")
              .filter((pl.col("file_id") == fid)
                      & pl.col("kind").is_in(["server_args", "cache_flush", "max_total_num_tokens"])).collect())
        iv = decode_intervals(dec, log_interval, events=ev).filter(pl.col("window_end").is_not_null())
        tokens, peak, lines = window_stats(iv, starts, ends)
        for r, t, p, n in zip(group, tokens, peak, lines):
            r.decode_tokens, r.gen_throughput_peak, r.decode_lines = float(t), (None if np.isnan(p) else float(p)), int(n)


def window_stats(iv: pl.DataFrame, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window: decode tokens, highest gen throughput logged inside (NaN: none), lines inside."""
    tokens = np.zeros(starts.size)
    if iv.height == 0:
        return tokens, np.full(starts.size, np.nan), np.zeros(starts.size, int)
    iv = iv.with_columns(_end=pl.col("window_end").dt.epoch("us").cast(pl.Float64) / 1e6)
    for _, part in iv.group_by("stream", maintain_order=True):
        end = part["_end"].to_numpy()
        busy0 = end - np.nan_to_num(part["busy_s"].to_numpy(), nan=0.0)
        cum = np.cumsum(np.nan_to_num(part["tokens"].to_numpy()))
        # C(t): cum[i-1] at the start of line i's busy part, cum[i] at its end
        x = np.empty(2 * end.size)
        y = np.empty(2 * end.size)
        x[0::2], x[1::2] = busy0, end
        y[0::2], y[1::2] = np.concatenate([[0.0], cum[:-1]]), cum
        x = np.maximum.accumulate(x)  # guard against a µs of overlap from rounding
        tokens += np.interp(ends, x, y) - np.interp(starts, x, y)
    order = np.argsort(iv["_end"].to_numpy(), kind="stable")
    end_sorted = iv["_end"].to_numpy()[order]
    gen_sorted = np.nan_to_num(iv["gen_throughput"].to_numpy()[order], nan=-np.inf)
    i0 = np.searchsorted(end_sorted, starts, side="left")
    i1 = np.searchsorted(end_sorted, ends, side="right")
    lines = i1 - i0
    peak = np.full(starts.size, np.nan)
    bounds = np.column_stack([i0, i1]).ravel()
    if np.all(np.diff(bounds) >= 0) and end_sorted.size:  # windows in order, not overlapping
        ok = lines > 0
        red = np.maximum.reduceat(np.append(gen_sorted, -np.inf), np.minimum(bounds, end_sorted.size))[0::2]
        peak[ok] = red[ok]
    else:
        for k in np.flatnonzero(lines > 0):
            peak[k] = gen_sorted[i0[k]:i1[k]].max()
    peak[~np.isfinite(peak)] = np.nan
    return tokens, peak, lines
