"""Decode intervals: how long each `Decode batch` line's window lasted, and how many tokens it holds.

SGLang prints `gen throughput (token/s)` = tokens emitted by the decode iterations since the
previous Decode line of the same scheduler ÷ wall time since that line (format spec §4.1).  So
each line covers a window that *ends* at the line; its tokens are `gen_throughput × interval`,
exactly, if we know the interval.  The log does not print the interval, so we reconstruct it.

Method (per DP stream, in log order):

1. Model estimate.  The window holds `decode_log_interval` (40) iterations of a batch that ends
   with `#running-req` requests, each emitting `accept len` tokens (1 without speculative
   decoding), so `model_s = 40 × running_req × (accept_len or 1) / gen_throughput`.  This is
   exact when the batch did not change inside the window; when requests join (ramp-up) it runs
   long, when they finish (drain) it runs short, and after an idle gap the window may hold steps
   of an earlier burst (the counter is global), so the model can be far off there.
2. Timestamps.  A line written at true time T shows `ts = floor(T)` (1-s resolution, or 1 ms with
   `SGLANG_LOG_MS=1`, or 1 µs for the v0.4.9.post1 `timestamp:` field), i.e. `T ∈ [ts, ts + r)`.
3. Combination.  Cumulative model time C_i = Σ model_s; the clock offset o_i = T_i − C_i must lie
   in `[ts_i − C_i, ts_i + r − C_i]`.  We split the stream greedily into the longest runs of lines
   whose bands share a common offset, give each run one offset (the midpoint of the first run,
   then the point of each run's common band closest to the previous run's offset, so drift is
   corrected with the smallest jumps), interpolate linearly between run centres (model drift is
   gradual, not a step) and clamp each line back into its own band.  Then
   `interval_s = T_i − T_{i−1}`.  With ms/µs timestamps the bands are so narrow that this is Δts.

Error: every reconstructed T_i lies in its timestamp bracket, so any span between two lines —
and any sum of consecutive intervals — is off by less than 2r (r = 1 s: under 2 s; typically
≈ r/2); a single sub-second interval inherits the model's error (the batch-size change inside
its window).  Tokens over a span are exact up to that time error × the local gen throughput.

`is_sample` is False when a line's value does not describe decode speed (not_sample_reason):
`first_line` (no previous line of the stream: its window started at scheduler start-up),
`after_startup` (a server start-up lies between it and the previous line), `after_flush`
(`/flush_cache` reset the counters but not the clock), `idle_gap` (the window is ≥ 3× its
neighbours and ≥ 1 s longer: it spans an idle gap or a long stall), `implausible`
(gen throughput or batch missing or ≤ 0, or a non-positive interval).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl

#: rank columns that only duplicate a DP rank's stream (keep the lowest), in tie-break order
_DUPLICATE_RANKS = ["pp_rank", "attn_cp_rank", "moe_dp_rank", "tp_rank", "ep_rank"]
IDLE_FACTOR = 3.0  # an interval this many times its neighbours' median spans idle time
IDLE_MIN_EXTRA_S = 1.0  # ... and at least this much longer (short windows jitter a lot)
_NEIGHBOURS = 3  # lines on each side that form the reference interval

OUTPUT_COLUMNS = [
    "file_id", "source", "stream", "dp_rank", "line_no", "ts", "running_req", "queue_req",
    "token_usage", "gen_throughput", "accept_len", "cuda_graph", "model_interval_s",
    "interval_s", "tokens", "window_start", "busy_s", "is_sample", "not_sample_reason",
]


def decode_intervals(decode: pl.DataFrame, decode_log_interval: int = 40,
                     events: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per Decode line of each DP stream (duplicate TP/PP ranks dropped), with
    `interval_s`, `tokens`, `window_start`, `busy_s` (the part of the interval the stream was
    decoding: the interval itself, or for an idle-gap line an estimate from its neighbours'
    pace) and `is_sample` / `not_sample_reason`.  See the module docstring for the method."""
    df = _one_row_per_stream_line(decode)
    if df.height == 0:
        return _empty()
    boundaries = _boundary_events(events)
    parts = []
    for (file_id, stream), part in df.group_by(["file_id", "stream"], maintain_order=True):
        parts.append(_stream_intervals(part.sort("line_no"), decode_log_interval,
                                       boundaries.get(file_id, {})))
    out = pl.concat(parts, how="vertical_relaxed")
    return out.select(OUTPUT_COLUMNS).sort(["file_id", "line_no", "stream"])


def _empty() -> pl.DataFrame:
    schema = {
        "file_id": pl.String, "source": pl.String, "stream": pl.String, "dp_rank": pl.Int32,
        "line_no": pl.Int64, "ts": pl.Datetime("us"), "running_req": pl.Int64,
        "queue_req": pl.Int64, "token_usage": pl.Float64, "gen_throughput": pl.Float64,
        "accept_len": pl.Float64, "cuda_graph": pl.Boolean, "model_interval_s": pl.Float64,
        "interval_s": pl.Float64, "tokens": pl.Float64, "window_start": pl.Datetime("us"),
        "busy_s": pl.Float64, "is_sample": pl.Boolean, "not_sample_reason": pl.String,
    }
    return pl.DataFrame(schema=schema)


def _col(df: pl.DataFrame, name: str, dtype: pl.DataType) -> pl.Expr:
    return pl.col(name).cast(dtype) if name in df.columns else pl.lit(None, dtype=dtype).alias(name)


def _one_row_per_stream_line(decode: pl.DataFrame) -> pl.DataFrame:
    """Name each line's DP stream and keep only the lowest TP/PP/EP rank's copy of it."""
    if decode.height == 0:
        return decode
    df = decode.select(
        _col(decode, "file_id", pl.String).fill_null(_col(decode, "source", pl.String)).fill_null(""),
        _col(decode, "source", pl.String),
        _col(decode, "dp_rank", pl.Int32),
        _col(decode, "gpu", pl.Int32),
        *[_col(decode, r, pl.Int32) for r in _DUPLICATE_RANKS],
        _col(decode, "line_no", pl.Int64),
        # the v0.4.9.post1 `timestamp:` field has µs resolution: better than the prefix
        _col(decode, "timestamp", pl.Datetime("us")).fill_null(_col(decode, "ts", pl.Datetime("us"))).alias("ts"),
        _col(decode, "timestamp", pl.Datetime("us")).is_not_null().alias("_us_ts"),
        _col(decode, "running_req", pl.Int64),
        _col(decode, "queue_req", pl.Int64),
        _col(decode, "token_usage", pl.Float64),
        _col(decode, "gen_throughput", pl.Float64),
        _col(decode, "accept_len", pl.Float64),
        _col(decode, "cuda_graph", pl.Boolean),
    )
    # Old releases (v0.1.17–v0.2.13) name a DP worker by its GPU, not by a DP rank.
    stream = (pl.when(pl.col("dp_rank").is_not_null()).then(pl.format("DP{}", pl.col("dp_rank")))
              .when(pl.col("gpu").is_not_null()).then(pl.format("GPU{}", pl.col("gpu")))
              .otherwise(pl.lit("main")))
    df = df.with_columns(stream=stream)
    key = ["file_id", "stream"]
    for rank in _DUPLICATE_RANKS:  # lexicographic minimum, one rank column at a time
        filled = pl.col(rank).fill_null(-1)
        df = df.filter(filled == filled.min().over(key))
    return df.drop(["gpu", *_DUPLICATE_RANKS])


def _boundary_events(events: pl.DataFrame | None) -> dict[str, dict[str, np.ndarray]]:
    """Per file: sorted line numbers of server start-ups and successful cache flushes."""
    if events is None or events.height == 0 or "kind" not in events.columns:
        return {}
    ev = events.select(
        _col(events, "file_id", pl.String).fill_null(_col(events, "source", pl.String)).fill_null(""),
        pl.col("line_no").cast(pl.Int64),
        pl.col("kind"),
        _col(events, "message", pl.String),
    )
    startup = ev.filter(pl.col("kind") == "server_args")
    flush = ev.filter((pl.col("kind") == "cache_flush") & pl.col("message").str.contains("flushed successfully"))
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, frame in (("after_startup", startup), ("after_flush", flush)):
        for (fid,), g in frame.group_by(["file_id"]):
            out.setdefault(fid, {})[name] = np.sort(g["line_no"].to_numpy())
    return out


def _resolution(ts_us: np.ndarray, us_field: bool) -> float:
    """Timestamp resolution of a stream: 1 µs (`timestamp:` field), 1 ms, or 1 s."""
    if us_field:
        return 1e-6
    known = ts_us[~np.isnan(ts_us)]
    if known.size and np.any(np.mod(known, 1_000_000) != 0):
        return 1e-3
    return 1.0


def _stream_intervals(s: pl.DataFrame, log_interval: int, bounds: dict[str, np.ndarray]) -> pl.DataFrame:
    n = s.height
    gen = s["gen_throughput"].to_numpy().astype(float)
    run = s["running_req"].to_numpy().astype(float)
    accept = np.nan_to_num(s["accept_len"].to_numpy().astype(float), nan=1.0)
    accept = np.where(accept > 0, accept, 1.0)
    ts_us = s["ts"].dt.epoch("us").to_numpy().astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        model = log_interval * run * accept / gen
    valid_model = np.isfinite(model) & (model > 0)
    has_ts = not np.isnan(ts_us).any()
    if has_ts:
        t = (ts_us - ts_us[0]) / 1e6
        r = _resolution(ts_us, bool(s["_us_ts"].any()))
        true_t = _fit_times(t, np.where(valid_model, model, np.nan), r)
        interval = np.diff(true_t, prepend=np.nan)
    else:  # time-of-day-only or no timestamps: the model is all there is
        interval = np.where(valid_model, model, np.nan)
    interval[0] = model[0] if valid_model[0] else np.nan  # since scheduler start: unknowable
    reason = _not_sample_reasons(s["line_no"].to_numpy(), gen, run, interval, bounds)
    busy = _busy_seconds(interval, reason)
    tokens = gen * interval
    return s.with_columns(
        model_interval_s=pl.Series(np.where(valid_model, model, np.nan)).fill_nan(None),
        interval_s=pl.Series(interval).fill_nan(None),
        tokens=pl.Series(tokens).fill_nan(None),
        busy_s=pl.Series(busy).fill_nan(None),
        not_sample_reason=pl.Series(reason, dtype=pl.String),
    ).with_columns(
        window_start=pl.col("ts") - pl.duration(microseconds=(pl.col("interval_s") * 1e6).round(0).cast(pl.Int64)),
        is_sample=pl.col("not_sample_reason").is_null(),
    )


def _fit_times(t: np.ndarray, model: np.ndarray, r: float) -> np.ndarray:
    """True times (s, from the first line's ts) for lines stamped `t` with resolution `r`,
    following the model's step lengths as far as the brackets allow (module docstring, 3)."""
    n = t.size
    dt = np.diff(t)
    steps = np.where(np.isfinite(model[1:]), model[1:], dt)  # no model: trust the clock
    cum = np.concatenate([[0.0], np.cumsum(steps)])
    lo = (t - cum).tolist()
    hi = (t + r - cum).tolist()
    # greedy runs of lines sharing a feasible offset
    anchors_pos: list[float] = []
    anchors_off: list[float] = []
    start, band_lo, band_hi = 0, lo[0], hi[0]
    prev_off: float | None = None

    def close(first: int, last: int, b_lo: float, b_hi: float) -> None:
        nonlocal prev_off
        off = (b_lo + b_hi) / 2 if prev_off is None else min(max(prev_off, b_lo), b_hi)
        prev_off = off
        anchors_pos.append((first + last) / 2)
        anchors_off.append(off)

    for i in range(1, n):
        new_lo, new_hi = max(band_lo, lo[i]), min(band_hi, hi[i])
        if new_lo <= new_hi:
            band_lo, band_hi = new_lo, new_hi
            continue
        close(start, i - 1, band_lo, band_hi)
        start, band_lo, band_hi = i, lo[i], hi[i]
    close(start, n - 1, band_lo, band_hi)
    offset = np.interp(np.arange(n), anchors_pos, anchors_off)
    offset = np.clip(offset, lo, hi)
    return cum + offset


def _not_sample_reasons(line_no: np.ndarray, gen: np.ndarray, run: np.ndarray,
                        interval: np.ndarray, bounds: dict[str, np.ndarray]) -> list[str | None]:
    n = line_no.size
    reasons: list[str | None] = [None] * n
    reasons[0] = "first_line"
    crossed = {}
    for name, lines in bounds.items():  # did an event fall between the previous line and this one?
        below = np.searchsorted(lines, line_no)
        crossed[name] = np.diff(below, prepend=below[0]) > 0
    ref = _neighbour_median(interval)
    for i in range(1, n):
        if crossed.get("after_startup", np.zeros(n, bool))[i]:
            reasons[i] = "after_startup"
        elif crossed.get("after_flush", np.zeros(n, bool))[i]:
            reasons[i] = "after_flush"
        elif not (gen[i] > 0 and run[i] > 0 and interval[i] > 0):
            reasons[i] = "implausible"
        elif math.isfinite(ref[i]) and interval[i] >= IDLE_FACTOR * ref[i] and interval[i] >= ref[i] + IDLE_MIN_EXTRA_S:
            reasons[i] = "idle_gap"
    return reasons


def _neighbour_median(interval: np.ndarray) -> np.ndarray:
    """Median of up to `_NEIGHBOURS` intervals on each side (itself excluded)."""
    n = interval.size
    k = _NEIGHBOURS
    padded = np.concatenate([np.full(k, np.nan), interval, np.full(k, np.nan)])
    offsets = [o for o in range(-k, k + 1) if o != 0]
    window = np.stack([padded[k + o: k + o + n] for o in offsets], axis=1)
    window[~(window > 0)] = np.nan
    with warnings.catch_warnings():  # all-NaN rows (a lone line) are expected: NaN reference
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(window, axis=1)


def _busy_seconds(interval: np.ndarray, reasons: list[str | None]) -> np.ndarray:
    """Decoding time inside each interval: all of it, except for idle-gap lines, whose busy part is
    estimated as the neighbours' typical interval (their window holds as many iterations)."""
    ref = _neighbour_median(interval)
    idle = np.array([r in ("idle_gap", "first_line", "after_startup", "after_flush") for r in reasons])
    return np.where(idle & np.isfinite(ref), np.minimum(interval, ref), interval)
