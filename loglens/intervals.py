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
   in the band `[ts_i − C_i, ts_i + r − C_i]`.  A model step outside Δts ± r is certainly wrong
   (idle gap, carried-over counter): it is clipped to that range and starts a new stretch.
   Over the 2k+1 lines centred on i (k = 10) within its stretch we take the intersection of
   the bands — max of the lower ends, min of the upper ends — and use its
   midpoint, clamped into line i's own band.  Where the model is right the bands share a common
   offset and 21 brackets narrow it to ≈ r/20; where the model drifts (a growing or shrinking
   batch) the midpoint follows the drift's centre.  Then `interval_s = T_i − T_{i−1}` and
   `window_end = T_i`.  With ms/µs timestamps the bands are so narrow that this is Δts.
   Vectorised (polars and numpy, no Python loop per line): millions of lines take a second.

Precise mode (`precise=True` with a prefill table; reconcile uses it, 1-s timestamps only):
4. Step time.  Per stream, decode step time = a + c × batch is fitted on the lines without a
   Prefill inside (`_step_fit`): a constant-batch line gives `interval / 40` exactly, a
   shrinking one bounds it (its mean batch lies between its and the previous line's batch).
   A log with under 2 constant-batch lines (short speculative runs: the batch changes at every
   line) is fitted on the bounds alone (`_bounds_fit`: the centroid of the region they leave,
   a few % in step time): its lines get a looser weight, no prefill-time fit, and the longer of
   the two batch models for windows with prefills.
5. Line intervals.  Constant batch: the model (exact).  Other lines without a prefill:
   `40 a / (1 − c × gen / accept len)` (the mean batch solved from the step model).  Lines with
   prefills: the fitted prefill time on top, or the model with a time-weighted batch
   (`_window_batch`: the batch before and after each Prefill line at its timestamp).
6. Line times.  Weighted least squares of the line times against those intervals, each time
   inside its 1-s bracket (one tridiagonal box-constrained problem, active-set passes solved
   by cyclic reduction).  No link across a stretch break, nor into a window whose Prefill
   found no running request (it holds idle time of unknown length).
   Each line's end lands within ~50 ms where steps 4-5 hold (the band method: ~±0.3 s).
7. Prefill clock.  A Prefill line's `input throughput` gives the exact time since the previous
   Prefill line (spec §4.4), so chains of Prefill lines are placed to ~0.1 s or better
   (`prefill_clock`).  A Decode line comes at most 40 decode steps (of at most the batch that
   Prefill left) after the last Prefill inside its window (`_after_prefill_bound`): this pins the
   first line after a burst's start, whose window began in idle time and which nothing else ties
   to its neighbours.  Given a run's start (`warmups`), the line the client's warmup printed
   while it ran (after idle, one lone Prefill in its window, one running request) comes at most
   ~31 / accept len steps after that Prefill (`_warmup_bound`).  (Bounding every Decode line by the Prefill lines logged around it is valid
   too, but on the accuracy sweep it moved short stretches against their step targets' bias:
   no net gain, so it is not done.)

Error: every reconstructed T_i lies in its timestamp bracket, so any span between two lines —
and any sum of consecutive intervals — is off by less than 2r (r = 1 s: under 2 s; typically
≈ r/2); a single sub-second interval inherits the model's error (the batch-size change inside
its window).  Tokens over a span are exact up to that time error × the local gen throughput.

Lines without timestamps (releases before v0.2.14, or time-of-day only) get the model alone.

`is_sample` is False when a line's value does not describe decode speed (not_sample_reason):
`first_line` (no previous line of the stream: its window started at scheduler start-up —
when the scheduler's `max_total_num_tokens=` line is in `events`, the interval is measured from
it, else the model's guess is kept),
`after_startup` (a server start-up lies between it and the previous line), `after_flush`
(`/flush_cache` reset the counters but not the clock), `idle_gap` (the window is ≥ 3× the median
of the previous and the next two intervals, and ≥ 1 s longer: it spans an idle gap or a
long stall), `implausible` (gen throughput or batch missing or ≤ 0, or a non-positive interval).

Speed: about 1 s per 4 million lines (2 cores).
"""

from __future__ import annotations

import numpy as np
import polars as pl

#: rank columns that only duplicate a DP rank's stream (keep the lowest), in tie-break order
_DUPLICATE_RANKS = ["pp_rank", "attn_cp_rank", "moe_dp_rank", "tp_rank", "ep_rank"]
IDLE_FACTOR = 3.0  # an interval this many times its neighbours' median spans idle time
IDLE_MIN_EXTRA_S = 1.0  # ... and at least this much longer (short windows jitter a lot)
_BAND_HALF_WIDTH = 10
_NO_PREFILL = {k: np.zeros(0) for k in ("owner", "t", "run", "b", "p_lo", "p_hi")}
_PF_LINK_TOL_S = 0.005  # Prefill lines are chained where the printed throughput fixes their gap this well
_FIT_BOUND_LINES = 2000  # bounding lines the step-time fit samples at most
_REASONS = {0: None, 1: "first_line", 2: "after_startup", 3: "after_flush", 4: "implausible", 5: "idle_gap"}  # lines on each side whose timestamp brackets pin a line's clock offset


def decode_intervals(decode: pl.DataFrame | pl.LazyFrame, decode_log_interval: int = 40,
                     events: pl.DataFrame | None = None, prefill: pl.DataFrame | None = None,
                     precise: bool = False, warmups=(), warmup_tokens: int = 31,
                     carry: tuple[str, ...] = ()) -> pl.DataFrame:
    """One row per Decode line of each DP stream (duplicate TP/PP ranks dropped), with
    `interval_s`, `tokens`, `window_end` (the reconstructed time of the line, ts + a sub-second
    offset), `window_start` (= window_end − interval_s), `busy_s` (the part of the interval the
    stream was decoding: all of it, or for a line after idle / start-up / a flush its
    neighbours' typical interval) and `is_sample` / `not_sample_reason`.  Rows are sorted by
    file_id, stream, line_no.  See the module docstring for the method and its error.

    `prefill` (optional, the prefill table's rows for the same lines) refines the model: each
    Prefill line between two Decode lines samples the batch inside the window (its
    `#running-req` plus its `#new-seq`, which join the batch).

    `precise` (needs `prefill`, even an empty one: it says which windows held prefills) places
    the lines by a fitted step-time model and bounded least squares (module docstring, steps
    4-6); off by default: ~5× the band method's time on a whole table (1.2 s vs 0.23 s for
    600k lines); reconcile reads only a window around a run.

    `warmups` (precise mode): times (s) just before which a short request ran alone after idle —
    bench_serving's warmup, at most `warmup_tokens` decode tokens — whose Decode line, printed
    while it ran, is then bounded by its Prefill line (`_warmup_bound`).

    `carry`: columns of `decode` passed through to each line's output row as they are (what a
    caller needs beside the intervals, without joining the whole table back by line)."""
    df = _one_row_per_stream_line(decode, carry)
    if df.height == 0:
        return _empty().with_columns(pl.lit(None, df.schema[c] if c in df.columns else pl.Null).alias(c) for c in carry)
    bounds = _boundary_lines(events)
    parts = []
    # Per stream with plain expressions: a handful of streams, and no window `over()` cost.
    keys = df.select("file_id", "stream").unique().sort(["file_id", "stream"])
    for file_id, stream in keys.iter_rows():
        part = df if keys.height == 1 else df.filter((pl.col("file_id") == file_id) & (pl.col("stream") == stream))
        part = part if part["line_no"].is_sorted() else part.sort("line_no")
        part = _mark_boundaries(part, bounds.get(file_id, {}))
        part, pf_rows = _batch_samples(part, prefill, file_id, stream)
        # the precise method needs to know which windows hold prefills: only with a prefill table
        precise_rows = (pf_rows if pf_rows is not None else _NO_PREFILL) if precise and prefill is not None else None
        if precise_rows is not None and len(warmups):
            precise_rows = {**precise_rows, "warmups": np.asarray(warmups, float), "warmup_tokens": warmup_tokens}
        parts.append(_reconstruct(part, decode_log_interval, precise_rows).select(*OUTPUT_COLUMNS, *carry))
    return pl.concat(parts)


OUTPUT_SCHEMA = {
    "file_id": pl.String, "source": pl.String, "stream": pl.String, "dp_rank": pl.Int32,
    "line_no": pl.Int64, "ts": pl.Datetime("us"), "running_req": pl.Int64,
    "queue_req": pl.Int64, "token_usage": pl.Float64, "gen_throughput": pl.Float64,
    "accept_len": pl.Float64, "cuda_graph": pl.Boolean, "model_interval_s": pl.Float64,
    "interval_s": pl.Float64, "tokens": pl.Float64, "window_start": pl.Datetime("us"),
    "window_end": pl.Datetime("us"), "busy_s": pl.Float64, "is_sample": pl.Boolean,
    "not_sample_reason": pl.String,
}
OUTPUT_COLUMNS = list(OUTPUT_SCHEMA)


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema=OUTPUT_SCHEMA)


def _col(df: pl.DataFrame | pl.LazyFrame, name: str, dtype: pl.DataType) -> pl.Expr:
    names = df.collect_schema().names() if isinstance(df, pl.LazyFrame) else df.columns
    return pl.col(name).cast(dtype) if name in names else pl.lit(None, dtype=dtype).alias(name)


def stream_name(df: pl.DataFrame | pl.LazyFrame) -> pl.Expr:
    """The DP stream a line belongs to: "DP<k>", "GPU<g>" (v0.1.17–v0.2.13 name a DP worker by
    its GPU) or "main" (one scheduler logs)."""
    return pl.coalesce(pl.format("DP{}", _col(df, "dp_rank", pl.Int32)), pl.format("GPU{}", _col(df, "gpu", pl.Int32)),
                       pl.lit("main"))


def _one_row_per_stream_line(decode: pl.DataFrame | pl.LazyFrame, carry: tuple[str, ...] = ()) -> pl.DataFrame:
    """Name each line's DP stream and keep only the lowest TP/PP/EP rank's copy of it.

    One lazy query, collected once: on a whole table (the dashboard's) most rows are TP copies,
    and typing every row before dropping them took ~0.35 GiB more on a 1 GiB log."""
    if isinstance(decode, pl.LazyFrame) and not decode.collect_schema().names():
        decode = decode.collect()  # (no column to read: only literals, which would make one row)
    if isinstance(decode, pl.DataFrame) and decode.height == 0:
        return decode
    lf = decode.lazy()
    lf = lf.select(
        _col(lf, "file_id", pl.String).fill_null(_col(lf, "source", pl.String)).fill_null(""),
        _col(lf, "source", pl.String),
        _col(lf, "dp_rank", pl.Int32),
        _col(lf, "gpu", pl.Int32),
        *[_col(lf, r, pl.Int32) for r in _DUPLICATE_RANKS],
        _col(lf, "line_no", pl.Int64),
        # the v0.4.9.post1 `timestamp:` field has µs resolution: better than the prefix
        _col(lf, "timestamp", pl.Datetime("us")).fill_null(_col(lf, "ts", pl.Datetime("us"))).alias("ts"),
        _col(lf, "timestamp", pl.Datetime("us")).is_not_null().alias("_us_field"),
        _col(lf, "running_req", pl.Int64),
        _col(lf, "queue_req", pl.Int64),
        _col(lf, "token_usage", pl.Float64),
        _col(lf, "gen_throughput", pl.Float64),
        _col(lf, "accept_len", pl.Float64),
        _col(lf, "cuda_graph", pl.Boolean),
        *carry,
    )
    # a rank with one value everywhere (null included) drops nothing: the common case, and its
    # filter is skipped (applying it anyway would keep every row)
    distinct = lf.select(pl.col(r).n_unique() for r in _DUPLICATE_RANKS).collect().row(0, named=True)
    lf = lf.with_columns(stream=stream_name(lf))
    key = ["file_id", "stream"]
    for rank in _DUPLICATE_RANKS:  # lexicographic minimum, one rank column at a time
        if distinct[rank] > 1:
            lf = _keep_lowest(lf, rank, key)
    return lf.drop(["gpu", *_DUPLICATE_RANKS]).collect()


#: up to this many streams the lowest-rank copies are kept by a predicate the scan applies
_PREDICATE_STREAMS = 64


def _keep_lowest(lf: pl.LazyFrame, rank: str, key: list[str]) -> pl.LazyFrame:
    """The rows of `lf` whose `rank` is the lowest of their stream's.  With a few streams that
    is one literal condition per stream (`DP1` keeps `TP2`, say), which the scan applies as it
    reads, so the other copies are never held (a whole table of a TP=8 log is mostly copies);
    with many, a window over the streams."""
    filled = pl.col(rank).fill_null(-1)
    # a stream is named by its DP rank, else its GPU (`stream_name`): grouped by those integers
    gpu = pl.when(pl.col("dp_rank").is_null()).then(pl.col("gpu"))
    lows = lf.group_by("file_id", "dp_rank", gpu.alias("_gpu")).agg(filled.min().alias("_low")).collect()
    if lows.height > _PREDICATE_STREAMS:
        return lf.filter(filled == filled.min().over(key))
    return lf.filter(pl.any_horizontal(
        (pl.col("file_id") == f) & pl.col("dp_rank").eq_missing(pl.lit(d, pl.Int32)) & gpu.eq_missing(pl.lit(g, pl.Int32))
        & (filled == low)
        for f, d, g, low in lows.iter_rows()))


def _boundary_lines(events: pl.DataFrame | None) -> dict[str, dict[str, np.ndarray]]:
    """Per file: sorted line numbers of server start-ups and of successful cache flushes."""
    if events is None or events.height == 0 or "kind" not in events.columns:
        return {}
    ev = events.select(
        _col(events, "file_id", pl.String).fill_null(_col(events, "source", pl.String)).fill_null(""),
        pl.col("line_no").cast(pl.Int64), pl.col("kind"), _col(events, "message", pl.String),
        (_col(events, "ts", pl.Datetime("us")).dt.epoch("us").cast(pl.Float64) / 1e6).alias("_s"))
    kinds = {"_startup": pl.col("kind") == "server_args",
             "_flush": (pl.col("kind") == "cache_flush") & pl.col("message").str.contains("flushed successfully"),
             # printed by the scheduler at the end of its init, when gen throughput's clock starts
             "_init": pl.col("kind") == "max_total_num_tokens"}
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, cond in kinds.items():
        for (fid,), g in ev.filter(cond).sort("line_no").group_by(["file_id"], maintain_order=True):
            out.setdefault(fid, {})[name] = g["line_no"].to_numpy()
            out[fid][name + "_s"] = g["_s"].fill_null(np.nan).to_numpy()
    return out


def _mark_boundaries(part: pl.DataFrame, bounds: dict[str, np.ndarray]) -> pl.DataFrame:
    """`_startup` / `_flush`: a server start-up / successful cache flush lies between this line
    and the previous line of its stream (by line number: exact, unlike 1-s timestamps)."""
    line_no = part["line_no"].to_numpy()
    cols = {}
    for name in ("_startup", "_flush", "_init"):
        lines = bounds.get(name)
        if lines is None or lines.size == 0:
            cols[name] = pl.repeat(False, part.height, eager=True)
            continue
        below = np.searchsorted(lines, line_no)  # events before each line
        crossed = np.diff(below, prepend=0 if name == "_init" else below[0]) > 0
        cols[name] = pl.Series(crossed)
        if name == "_init":  # the scheduler's start time, for the first line after it
            init_s = np.where(crossed & (below > 0), bounds["_init_s"][np.maximum(below - 1, 0)], np.nan)
            cols["_init_s"] = pl.Series(init_s)
    if "_init_s" not in cols:
        cols["_init_s"] = pl.repeat(np.nan, part.height, eager=True)
    return part.with_columns(**{k: v.alias(k) for k, v in cols.items()})


def _batch_samples(part: pl.DataFrame, prefill: pl.DataFrame | None, file_id: str,
                   stream: str) -> tuple[pl.DataFrame, dict | None]:
    """`_pf_n`, `_pf_sum`, `_pf_empty`: how many Prefill lines fall inside each Decode line's
    window (by line number), the sum of the batch each leaves behind (`#running-req` +
    `#new-seq`), and whether one found no running request."""
    zeros = part.with_columns(_pf_n=pl.lit(0, pl.Int64), _pf_sum=pl.lit(0.0), _pf_empty=pl.lit(False), _pf_tok=pl.lit(0.0))
    if prefill is None or prefill.height == 0 or "running_req" not in prefill.columns:
        return zeros, None
    pf = prefill.select(
        _col(prefill, "file_id", pl.String).fill_null(_col(prefill, "source", pl.String)).fill_null(""),
        stream_name(prefill).alias("stream"),
        _col(prefill, "tp_rank", pl.Int32).fill_null(-1).alias("tp"),
        pl.col("line_no").cast(pl.Int64),
        (_col(prefill, "running_req", pl.Float64) + _col(prefill, "new_seq", pl.Float64).fill_null(0.0)).alias("b"),
        (_col(prefill, "running_req", pl.Float64) == 0).alias("empty"),
        _col(prefill, "new_token", pl.Float64).fill_null(0.0).alias("tok"),
        _col(prefill, "running_req", pl.Float64).alias("run"),
        (_col(prefill, "ts", pl.Datetime("us")).dt.epoch("us").cast(pl.Float64) / 1e6).alias("t"),
        _col(prefill, "input_throughput", pl.Float64).alias("thr"),
    ).filter((pl.col("file_id") == file_id) & (pl.col("stream") == stream) & pl.col("b").is_not_null())
    pf = pf.filter(pl.col("tp") == pl.col("tp").min()).sort("line_no")  # TP copies of one line
    if pf.height == 0:
        return zeros, None
    lines = pf["line_no"].to_numpy()
    cum = np.concatenate([[0.0], np.cumsum(pf["b"].to_numpy())])
    cum_empty = np.concatenate([[0], np.cumsum(pf["empty"].fill_null(False).to_numpy())])
    cum_tok = np.concatenate([[0.0], np.cumsum(pf["tok"].to_numpy())])
    before = np.searchsorted(lines, part["line_no"].to_numpy())
    prev = np.concatenate([before[:1], before[:-1]])
    # the batch just before (`run`) and after (`b`) each Prefill line, at its time, for the
    # time-weighted batch of the window holding it (`_window_batch`)
    owner = np.searchsorted(part["line_no"].to_numpy(), lines)  # the Decode line whose window holds it
    pf_t = pf["t"].fill_null(np.nan).to_numpy()
    p_lo, p_hi = prefill_clock(pf_t, pf["tok"].to_numpy(), pf["thr"].fill_null(np.nan).to_numpy())
    pf_rows = {"owner": owner, "t": pf_t, "run": pf["run"].to_numpy(), "b": pf["b"].to_numpy(),
               "p_lo": p_lo, "p_hi": p_hi}
    return part.with_columns(_pf_n=pl.Series(before - prev, dtype=pl.Int64), _pf_sum=pl.Series(cum[before] - cum[prev]),
                             _pf_empty=pl.Series(cum_empty[before] - cum_empty[prev] > 0),
                             _pf_tok=pl.Series(cum_tok[before] - cum_tok[prev])), pf_rows


def prefill_clock(t: np.ndarray, tok: np.ndarray, thr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (lo, hi) on the true time of each Prefill line of one stream, in log order.

    `input throughput` (format spec §4.4) is new tokens ÷ the time since the previous Prefill line:
    this line's tokens from v0.5.11, the previous line's from v0.4.7.post1 to v0.5.10 — so the gap
    between consecutive lines is tokens ÷ throughput, to a few µs where the throughput is large
    (2 decimals printed).  Linked gaps make a chain whose lines share one clock offset: the
    intersection of all its lines' timestamp brackets (1 s each), typically a few ms wide on a
    chain of dozens of lines.  The pairing (this or the previous line's tokens) is the one whose
    chains agree with their timestamps.  A link breaks where the throughput is missing or 0 (the
    first line after start-up), where its rounding leaves more than 5 ms of doubt (a long idle
    gap), or where the gap contradicts the timestamps.  Without a chain a line keeps its bracket."""
    n = t.size
    known = np.isfinite(t)
    r = 1.0 if not known.any() or np.all(np.mod(t[known], 1.0) == 0) else 1e-3
    lo0, hi0 = t.copy(), t + r
    if n < 2:
        return lo0, hi0
    best = None
    for num in (tok, np.concatenate([[np.nan], tok[:-1]])):  # v0.5.11+ pairing, then the lagged one
        with np.errstate(divide="ignore", invalid="ignore"):
            gap = num / thr
            doubt = gap * 0.005 / thr
        dts = np.diff(t, prepend=np.nan)
        link = (np.isfinite(gap) & (thr > 0) & (gap >= 0) & (doubt <= _PF_LINK_TOL_S) & known
                & np.concatenate([[False], known[:-1]]) & (np.abs(gap - dts) < r + 0.01))
        link[0] = False
        cum = np.cumsum(np.where(link, gap, 0.0))
        err = np.cumsum(np.where(link, doubt, 0.0))
        chain = np.cumsum(~link) - 1
        starts = np.flatnonzero(~link)
        off_lo = np.maximum.reduceat(np.where(known, t - cum, -np.inf), starts)[chain]
        off_hi = np.minimum.reduceat(np.where(known, t + r - cum, np.inf), starts)[chain]
        spread = (np.maximum.reduceat(err, starts) - np.minimum.reduceat(err, starts))[chain] + 1e-4
        ok = off_lo <= off_hi + spread
        size = np.bincount(chain)[chain]
        score = int(np.sum(ok & (size > 1))) - int(np.sum(~ok))
        if best is None or score > best[0]:
            lo = np.where(ok, np.maximum(lo0, cum + off_lo - spread), lo0)
            hi = np.where(ok, np.minimum(hi0, cum + off_hi + spread), hi0)
            best = (score, lo, hi)
    return best[1], best[2]


def _reconstruct(df: pl.DataFrame, log_interval: int, precise: dict | None = None) -> pl.DataFrame:
    n = df.height
    run = df["running_req"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    gen = df["gen_throughput"].fill_null(np.nan).to_numpy()
    accept = df["accept_len"].fill_null(np.nan).to_numpy()
    accept = np.where(accept > 0, accept, 1.0)
    ts_us = df["ts"].dt.epoch("us").cast(pl.Float64).fill_null(np.nan).to_numpy()
    # The batch changes inside a window (requests finish or join): its mean is closer to the
    # average of the batches at both ends (the previous line's and this one's) than to either.
    prev_run = np.concatenate([[np.nan], run[:-1]])
    batch = np.where(np.isnan(prev_run), run, (run + prev_run) / 2)
    # batches seen by Prefill lines inside the window refine the two-point mean
    # (a Prefill line with no running request: the batch had emptied, the previous line's batch
    # does not describe the steps after it)
    n_samples = df["_pf_n"].to_numpy()
    use_prev = ~np.isnan(prev_run) & ~df["_pf_empty"].to_numpy()
    sampled = (np.where(use_prev, prev_run, 0.0) + run + df["_pf_sum"].to_numpy()) / (use_prev + 1 + n_samples)
    batch = np.where(n_samples > 0, sampled, batch)
    with np.errstate(divide="ignore", invalid="ignore"):
        model = log_interval * batch * accept / gen
    model[~(np.isfinite(model) & (model > 0))] = np.nan
    t = ts_us / 1e6
    known = ts_us[~np.isnan(ts_us)]
    if bool(df["_us_field"].any()):
        r = 1e-6
    elif known.size and np.any(np.mod(known, 1_000_000) != 0):
        r = 1e-3
    else:
        r = 1.0
    dts = np.diff(t, prepend=np.nan)
    # No model for a line: follow the clock (its step is Δts).  The true interval lies within
    # Δts ± r: a model step outside that is certainly wrong (an idle gap, a counter phase carried
    # over); left alone it would shift every later line's offset, clipped it stays a local error,
    # and it starts a new stretch (the bands on either side do not share an offset).
    step = np.where(np.isnan(model), dts, np.clip(model, dts - r, dts + r))
    step = np.where(np.isnan(step), model, step)
    step = np.nan_to_num(step)
    step[0] = 0.0
    breaks = np.isnan(model) | (np.abs(model - dts) > r)
    breaks[0] = True
    cum = np.cumsum(step)
    true_t = _fit_times(t, cum, r, breaks)
    if precise is not None and r == 1.0:
        true_t = _precise_times(t, true_t, r, breaks, model, run, prev_run, accept, gen, n_samples,
                                df["_pf_empty"].to_numpy(), df["_pf_tok"].to_numpy(), dts, log_interval, precise)
    interval = np.diff(true_t, prepend=np.nan)
    # the first line after a scheduler start: its window began when the scheduler did
    init_s = df["_init_s"].to_numpy()
    since_init = true_t - (init_s + r / 2)
    interval = np.where(np.isfinite(since_init) & (since_init > 0), since_init, interval)
    no_clock = np.isnan(interval)
    interval[no_clock] = model[no_clock]  # the first line with no known start, or no timestamps
    # reference interval: median of the previous line's and the next two (robust to one outlier)
    a = np.concatenate([[np.nan], interval[:-1]])
    b = np.concatenate([interval[1:], [np.nan]])
    c = np.concatenate([interval[2:], np.full(min(2, n), np.nan)])
    ref = np.fmax(np.fmin(a, b), np.fmin(np.fmax(a, b), c))  # fmin/fmax skip a missing one
    plausible = (gen > 0) & (run > 0) & (interval > 0)
    idle = (interval >= IDLE_FACTOR * ref) & (interval >= ref + IDLE_MIN_EXTRA_S)
    # reason codes (_REASONS), first match wins; 0 = a sample
    code = np.zeros(n, dtype=np.int8)
    first = np.arange(n) == 0
    for value, mask in enumerate([first, df["_startup"].to_numpy(), df["_flush"].to_numpy(), ~plausible, idle], 1):
        code[mask & (code == 0)] = value
    partly_idle = ((code == 1) | (code == 2) | (code == 3) | (code == 5)) & np.isfinite(ref)
    busy = np.where(partly_idle, np.fmin(interval, ref), interval)
    end_us = np.round(true_t * 1e6)
    start_us = np.round((true_t - interval) * 1e6)
    return df.with_columns(
        model_interval_s=_series(model),
        interval_s=_series(interval),
        tokens=_series(gen * interval),
        busy_s=_series(busy),
        not_sample_reason=pl.Series(code, dtype=pl.Int8).replace_strict(_REASONS, return_dtype=pl.String),
        window_end=_series(end_us).cast(pl.Int64).cast(pl.Datetime("us")),
        window_start=_series(start_us).cast(pl.Int64).cast(pl.Datetime("us")),
    ).with_columns(is_sample=pl.col("not_sample_reason").is_null())


def _series(a: np.ndarray) -> pl.Series:
    return pl.Series(a, dtype=pl.Float64).fill_nan(None)


def _fit_times(t: np.ndarray, cum: np.ndarray, r: float, breaks: np.ndarray) -> np.ndarray:
    """True times: cumulative model time plus the offset that the timestamp brackets of the
    ±k lines around each line (within its stretch) agree on (module docstring, step 3)."""
    if np.isnan(t).all():
        return np.full(t.size, np.nan)
    lo, hi = t - cum, t + r - cum
    seg = np.cumsum(breaks, dtype=np.int64)
    band_lo, band_hi = lo.copy(), hi.copy()
    for k in range(1, min(_BAND_HALF_WIDTH, t.size - 1) + 1):
        if seg[-1] == seg[0]:  # one stretch: no masks needed
            lo_fwd, hi_fwd, lo_back, hi_back = lo[k:], hi[k:], lo[:-k], hi[:-k]
        else:
            other = seg[k:] != seg[:-k]  # line i and line i+k in different stretches
            lo_fwd, hi_fwd = np.where(other, -np.inf, lo[k:]), np.where(other, np.inf, hi[k:])
            lo_back, hi_back = np.where(other, -np.inf, lo[:-k]), np.where(other, np.inf, hi[:-k])
        np.maximum(band_lo[:-k], lo_fwd, out=band_lo[:-k])
        np.minimum(band_hi[:-k], hi_fwd, out=band_hi[:-k])
        np.maximum(band_lo[k:], lo_back, out=band_lo[k:])
        np.minimum(band_hi[k:], hi_back, out=band_hi[k:])
    offset = np.clip((band_lo + band_hi) / 2, lo, hi)
    return cum + offset


def _step_fit(run, prev_run, accept, gen, model, pf_n, pf_empty, dts, log_interval):
    """Decode step time `a + c × batch` (seconds) of one stream, from its lines without a Prefill
    inside.  A line whose batch did not change gives `interval / L = a + c × batch` exactly (L =
    decode_log_interval); the others bound it: without a prefill the batch only shrinks, so the
    window's mean batch m lies between this line's and the previous line's batch, and
    m (1 − c g) = a g (g = gen throughput ÷ accept len), i.e. lo (1 − c g) ≤ a g ≤ hi (1 − c g).
    Minimised: the constant-batch lines' relative squared errors plus the bounds' squared
    violations beyond 1 % (step-time jitter), over a grid of c (a in closed form for each c), then
    a finer grid around the best.  When the constant-batch lines all have one batch size they fix
    only a + c × b; the bounds decide the rest, and where they allow a range of c, its middle.
    None with under 2 constant-batch lines or under 4 usable lines."""
    g = gen / accept
    ok = (pf_n == 0) & ~pf_empty & np.isfinite(g) & (g > 0) & np.isfinite(prev_run) & (run > 0) & (prev_run > 0)
    ok &= np.isfinite(model) & ~(np.abs(model - dts) > 1.0)
    const = ok & (run == prev_run)
    if const.sum() < 2 or ok.sum() < 4:
        return None
    b0, y = run[const], model[const] / log_interval
    bnd = np.flatnonzero(ok & ~const)
    scale = 1.0
    if bnd.size > _FIT_BOUND_LINES:  # a long stretch of log: an even sample of its bounds is plenty
        scale = bnd.size / _FIT_BOUND_LINES
        bnd = bnd[np.linspace(0, bnd.size - 1, _FIT_BOUND_LINES).astype(np.int64)]
    lo, hi, gb = np.minimum(run, prev_run)[bnd], np.maximum(run, prev_run)[bnd], g[bnd]
    w = 1 / y ** 2  # relative errors: Σ ((a + c b) / y − 1)² = Σ w (a + c b − y)²
    # a(c) minimising the constant-batch term: a = Σ w (y − c b) / Σ w; the term from sums
    sw, swy, swb = w.sum(), (w * y).sum(), (w * b0).sum()
    swbb, swby, swyy = (w * b0 * b0).sum(), (w * b0 * y).sum(), (w * y * y).sum()
    c_max = swy / swb  # a(c) ≥ 0
    tol = 0.01

    def objective(c):
        a = (swy - c * swb) / sw
        f = a * a * sw + c * c * swbb + swyy + 2 * a * c * swb - 2 * a * swy - 2 * c * swby
        if gb.size:
            ag, cg = a[:, None] * gb, c[:, None] * gb
            v_lo = np.maximum(lo * (1 - cg) - ag, 0) / lo - tol  # lo (1 − c g) ≤ a g
            v_hi = np.maximum(ag - hi * (1 - cg), 0) / hi - tol  # a g ≤ hi (1 − c g)
            f = f + 10 * scale * ((np.maximum(v_lo, 0) ** 2).sum(1) + (np.maximum(v_hi, 0) ** 2).sum(1))
        return a, f

    grid = np.linspace(0.0, c_max, 401)
    for _ in range(2):
        a, f = objective(grid)
        best = f.min()
        flat = np.flatnonzero(f <= best + 1e-9 + 1e-6 * best)  # a flat minimum: its middle
        k = int(flat[flat.size // 2])
        step = grid[1] - grid[0]
        c_best, a_best = grid[k], a[k]
        grid = np.linspace(max(c_best - step, 0.0), min(c_best + step, c_max), 101)
    if not (a_best > 0 and c_best >= 0 and np.isfinite(a_best) and np.isfinite(c_best)):
        return None
    return float(a_best), float(c_best)


_BOUNDS_FIT_LINES = 8  # shrinking-batch lines the bounds-only step fit needs
BOUNDS_FIT_REL_SD = 0.02  # its error on a line's interval: a few %, not the exact fit's 0.5 %


def _bounds_fit(run, prev_run, accept, gen, model, pf_n, pf_empty, dts, tol=0.01):
    """Step time from the shrinking-batch lines alone (a log with too few constant-batch lines,
    e.g. a short speculative run whose batch changes at every line): each bounds the step model,
    lo (1 − c g) ≤ a g ≤ hi (1 − c g); over a grid of (a, c), the region where every bound holds
    (within `tol`) — or, when none does, where the bounds' squared violations are least — and its
    centroid.  Lines with different batches and speeds cut the region down to a few % in step
    time.  None when the region is empty or unbounded."""
    g = gen / accept
    use = (pf_n == 0) & ~pf_empty & np.isfinite(g) & (g > 0) & np.isfinite(prev_run) & (run > 0) & (prev_run > 0)
    use &= np.isfinite(model) & ~(np.abs(model - dts) > 1.0) & (run != prev_run)
    if use.sum() < _BOUNDS_FIT_LINES:
        return None
    idx = np.flatnonzero(use)
    if idx.size > 100:  # an even sample is plenty (and keeps the grid × lines array small)
        idx = idx[np.linspace(0, idx.size - 1, 100).astype(np.int64)]
    lo, hi, gb = np.minimum(run, prev_run)[idx], np.maximum(run, prev_run)[idx], g[idx]
    a_max, c_max = float(np.min(hi / gb)), float(np.min(1 / gb))  # a g ≤ hi (1 − c g) with c, a ≥ 0
    if not (np.isfinite(a_max) and np.isfinite(c_max) and a_max > 0 and c_max > 0):
        return None
    A = np.linspace(0.0, a_max, 121)[:, None, None]
    C = np.linspace(0.0, c_max, 121)[None, :, None]
    v_lo = np.maximum(lo * (1 - C * gb) - A * gb, 0) / lo - tol
    v_hi = np.maximum(A * gb - hi * (1 - C * gb), 0) / hi - tol
    f = (np.maximum(v_lo, 0) ** 2).sum(-1) + (np.maximum(v_hi, 0) ** 2).sum(-1)
    ia, ic = np.nonzero(f <= f.min() + 1e-12)
    if ia.size == 0 or ia.max() == A.size - 1 or ic.max() == C.size - 1:
        return None  # the region runs into the grid's edge: the bounds do not pin the model
    a, c = float(A.ravel()[ia].mean()), float(C.ravel()[ic].mean())
    return (a, c) if a > 0 else None


def _window_batch(band_t, prev_run, run, pf_rows):
    """Time-weighted mean batch of each window holding Prefill lines: the batch is piecewise
    linear between the window's start (the previous line's batch), each Prefill line (the batch
    before it, `#running-req`, then after it, + `#new-seq`, at its timestamp's mid-second clamped
    into the window) and the window's end (this line's batch).  NaN where no Prefill line.
    Arrivals bunch at a window's start and the batch then drains: one sample per Prefill line,
    equally weighted, would give the ramp far too much weight."""
    n = band_t.size
    own = pf_rows["owner"].astype(np.int64)
    ok = (own >= 1) & (own < n)
    own, t, pr, pb = own[ok], pf_rows["t"][ok], pf_rows["run"][ok], pf_rows["b"][ok]
    if own.size == 0:
        return np.full(n, np.nan)
    t0, t1 = band_t[own - 1], band_t[own]
    tk = np.clip(np.where(np.isfinite(t), t + 0.5, (t0 + t1) / 2), t0, t1)
    tk = np.maximum.accumulate(np.nan_to_num(tk, nan=-np.inf))  # keep log order
    first = np.concatenate([[True], own[1:] != own[:-1]])
    last = np.concatenate([own[1:] != own[:-1], [True]])
    t_prev = np.where(first, t0, np.concatenate([[0.0], tk[:-1]]))
    b_prev = np.where(first, prev_run[own], np.concatenate([[0.0], pb[:-1]]))
    area = (tk - t_prev) * (b_prev + np.where(np.isfinite(pr), pr, pb)) / 2
    area += np.where(last, (t1 - tk) * (pb + run[own]) / 2, 0.0)
    tot = np.zeros(n)
    np.add.at(tot, own, area)
    has = np.zeros(n, bool)
    has[own] = True
    span = band_t - np.concatenate([[np.nan], band_t[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(has & (span > 0), tot / span, np.nan)
    return out


def _precise_times(t, band_t, r, breaks, model, run, prev_run, accept, gen, pf_n, pf_empty, pf_tok, dts, log_interval,
                   pf_rows=None):
    """Line times by bounded weighted least squares inside each stretch: a line without a Prefill
    inside gets the step-time model's interval (`_step_fit`; its error is well under 1 %), bounded
    by its batch bounds; the others keep the batch model with a loose weight."""
    box_lo, box_hi = t.copy(), t + r
    fit = _step_fit(run, prev_run, accept, gen, model, pf_n, pf_empty, dts, log_interval)
    exact = fit is not None  # from constant-batch lines; else from the bounds alone, to a few %
    if not exact:
        fit = _bounds_fit(run, prev_run, accept, gen, model, pf_n, pf_empty, dts)
    rel_sd = 0.005 if exact else BOUNDS_FIT_REL_SD  # the step model's error on a line without a Prefill
    if fit is None:
        return band_t
    a, c = fit
    if pf_rows is not None and pf_rows["owner"].size:
        box_hi = _after_prefill_bound(box_lo, box_hi, a, c, log_interval, pf_rows)
        band_t = np.clip(band_t, box_lo, box_hi)
        if "warmups" in pf_rows:
            hi = _warmup_bound(box_lo, box_hi, a, c, breaks, run, accept, pf_n, pf_rows)
            moved = hi < box_hi  # an isolated line: the middle of what is left of its bracket
            box_hi = hi
            band_t = np.where(moved, (box_lo + box_hi) / 2, band_t)
    g = gen / accept
    with np.errstate(divide="ignore", invalid="ignore"):
        den = 1 - c * g
        s = np.where(den > 0.05, log_interval * a / den, np.nan)
        lo_b = log_interval * np.minimum(run, prev_run) / g
        hi_b = log_interval * np.maximum(run, prev_run) / g
    s = np.clip(s, lo_b, hi_b)
    plain = (pf_n == 0) & ~pf_empty & np.isfinite(prev_run)
    const = plain & (run == prev_run) & np.isfinite(model)  # the batch model is exact
    good = plain & ~const & np.isfinite(s) & ~(np.abs(s - dts) > r)
    # Prefill lines: decode steps plus prefill time p0 × batches + p1 × new tokens, fitted on
    # the first reconstruction's intervals (robustly; its errors are ± a few tenths, unbiased)
    band_iv = np.diff(band_t, prepend=np.nan)
    withpf = (pf_n > 0) & ~pf_empty & np.isfinite(prev_run) & np.isfinite(den) & (den > 0.05) & ~breaks
    ps = np.full(t.size, np.nan)
    if withpf.sum() >= 6 and exact:  # a rough step model leaves the prefill time unknowable
        extra = band_iv * den - log_interval * a
        X = np.stack([pf_n, pf_tok], 1).astype(float)
        keep = withpf & np.isfinite(extra)
        coef = None
        for _ in range(3):
            if keep.sum() < 6:
                coef = None
                break
            coef = np.linalg.lstsq(X[keep], extra[keep], rcond=None)[0]
            res = extra - X @ coef
            mad = 1.4826 * np.median(np.abs(res[keep]))
            keep = withpf & np.isfinite(extra) & (np.abs(res) <= max(3 * mad, 0.02))
        if coef is None or coef[0] < 0 or coef[1] < 0:  # collinear (one prompt length): per batch only
            per = (extra / np.maximum(pf_n, 1))[withpf & np.isfinite(extra)]
            coef = np.array([float(np.median(per)), 0.0]) if per.size >= 3 else None
        if coef is not None and coef[0] >= 0 and coef[1] >= 0:
            ps = (log_interval * a + X @ coef) / den
            ps[~withpf | (np.abs(ps - model) > 0.5 * model) | (np.abs(ps - dts) > r)] = np.nan
    usepf = np.isfinite(ps)
    if pf_rows is not None:  # windows with prefills: the time-weighted batch, not one sample per Prefill line
        with np.errstate(divide="ignore", invalid="ignore"):
            tw = log_interval * _window_batch(band_t, prev_run, run, pf_rows) * accept / gen
        tw_ok = (pf_n > 0) & ~pf_empty & np.isfinite(tw) & (tw > 0) & ~(np.abs(tw - dts) > r)
        if not exact:  # without a prefill-time fit both batch models leave it out: the longer is closer
            tw = np.fmax(tw, model)
        model = np.where(tw_ok, tw, model)
    step = np.where(const, model, np.where(good, s, np.where(usepf, ps, model)))
    sd = np.where(const, 0.005 * step + 0.002, np.where(good, rel_sd * step + 0.002,
                                                        np.where(usepf, 0.03 + 0.01 * pf_n, np.maximum(0.15 * model, 0.05))))
    # a Prefill line that found no running request: the batch had emptied, the window holds
    # idle time of unknown length: no link (its line's bracket alone places it)
    use = np.isfinite(step) & ~breaks & np.isfinite(t) & ~pf_empty
    # stretches (between breaks) of at least 3 lines, all with timestamps, are solved; the others
    # keep the band estimate.  One tridiagonal system for all of them (no link across stretches).
    seg = np.cumsum(breaks | ~np.isfinite(t))
    size = np.bincount(seg)
    holes = np.bincount(seg, weights=~np.isfinite(t))
    solve = (size[seg] >= 3) & (holes[seg] == 0)
    if not solve.any():
        return band_t
    # objective Σ w_j (x_j − x_{j−1} − s_j)² + eps Σ (x − bracket centre)², link j joins j−1 and j
    w = np.where(use & solve & np.concatenate([[False], solve[:-1]]), 1 / sd ** 2, 0.0)
    w[0] = 0.0
    st = np.nan_to_num(step)
    eps = 1e-6 * max(float(w.max()), 1.0)
    w_next = np.concatenate([w[1:], [0.0]])  # link to the next line
    diag = w + w_next + eps
    off = -w_next  # H[i, i+1] = H[i+1, i]
    q = w * st - w_next * np.concatenate([st[1:], [0.0]]) + eps * np.nan_to_num((box_lo + box_hi) / 2)
    lo = np.where(solve, box_lo, band_t)
    hi = np.where(solve, np.minimum(box_hi, t + r * 0.999999), band_t)
    x = _box_qp_tridiag(diag, off, q, lo, hi, np.where(np.isfinite(band_t), band_t, lo))
    return np.where(solve, x, band_t)


def _after_prefill_bound(box_lo, box_hi, a, c, log_interval, pf_rows):
    """A Decode line comes at most `log_interval` decode steps after the last Prefill line inside
    its window, and those steps run a batch no larger than the one that Prefill left (requests
    only finish until the next Prefill): its time is at most that Prefill's plus 40 such steps
    (+5 % step-time jitter).  Tight for the line after a burst's start: its window began in
    idle time, and without this only its timestamp bracket placed it."""
    own = pf_rows["owner"].astype(np.int64)
    n, m = box_lo.size, own.size
    jp = np.searchsorted(own, np.arange(n), side="right") - 1
    jc = np.clip(jp, 0, m - 1)
    inside = (jp >= 0) & (own[jc] == np.arange(n))  # the last Prefill line lies in this line's window
    ub = pf_rows["p_hi"][jc] + log_interval * (a + c * pf_rows["b"][jc]) * 1.05
    new_hi = np.where(inside & np.isfinite(ub), np.fmin(box_hi, ub), box_hi)
    return np.where(new_hi >= box_lo, new_hi, box_hi)


def _warmup_bound(box_lo, box_hi, a, c, breaks, run, accept, pf_n, pf_rows):
    """A short request alone after idle (bench_serving's warmup, just before a run's start: at
    most `warmup_tokens` decode tokens): when a Decode line was printed while it ran, the line
    comes at most its decode steps (`warmup_tokens` / accept len, the accept len taken 25 % lower
    for the spread of a single request's) plus one for its prefill forward after its Prefill line.
    The line: its window began in idle time (a stretch break), holds that one Prefill line (one
    new request, none running) and it printed with one running request.  Such a line is linked
    to nothing (idle before it; the next window's Prefill found the batch empty), so without
    this only its timestamp bracket placed it, and the run's first line's interval with it."""
    own = pf_rows["owner"].astype(np.int64)
    n = box_lo.size
    new_hi = box_hi.copy()
    single = (pf_rows["run"] == 0) & (pf_rows["b"] == 1)
    for start in pf_rows["warmups"]:
        # lone requests' Prefill lines a few seconds before the run's start (its own first
        # request may fall inside the same timestamp second: the line checks below tell them apart)
        for k in np.flatnonzero(single & (pf_rows["p_lo"] < start) & (pf_rows["p_hi"] > start - 5.0)):
            i = int(own[k])
            if not (0 < i < n and breaks[i] and pf_n[i] == 1 and run[i] == 1):
                continue
            acc = accept[i] if np.isfinite(accept[i]) and accept[i] > 1 else 1.0
            steps = min(float(np.ceil(pf_rows["warmup_tokens"] / (1 + 0.75 * (acc - 1)))), 40.0) + 1
            ub = pf_rows["p_hi"][k] + steps * (a + c) * 1.05
            if np.isfinite(ub) and box_lo[i] <= ub < new_hi[i]:
                new_hi[i] = ub
    return new_hi


def _box_qp_tridiag(diag, off, q, lo, hi, x0, iters=20):
    """argmin ½ xᵀHx − qᵀx with lo ≤ x ≤ hi, H symmetric tridiagonal (diagonal `diag`, H[i, i+1] =
    `off[i]`) and diagonally dominant: active-set passes, each one tridiagonal solve."""
    x = np.clip(x0, lo, hi)
    last = None
    for _ in range(iters):
        grad = diag * x + np.concatenate([[0.0], off[:-1] * x[:-1]]) + off * np.concatenate([x[1:], [0.0]]) - q
        fixed = (lo >= hi) | ((x <= lo) & (grad > 0)) | ((x >= hi) & (grad < 0))
        if last is not None and np.array_equal(fixed, last):
            break  # the same active set solves to the same x
        last = fixed
        # fixed variables: identity rows; their values move to the free neighbours' right side
        a = np.concatenate([[0.0], off[:-1]])  # H[i, i−1]
        c = off.copy()  # H[i, i+1]
        d = q.copy()
        left_fixed = np.concatenate([[False], fixed[:-1]])
        right_fixed = np.concatenate([fixed[1:], [False]])
        d -= np.where(left_fixed, a * np.concatenate([[0.0], x[:-1]]), 0.0)
        d -= np.where(right_fixed, c * np.concatenate([x[1:], [0.0]]), 0.0)
        a = np.where(left_fixed | fixed, 0.0, a)
        c = np.where(right_fixed | fixed, 0.0, c)
        b = np.where(fixed, 1.0, diag)
        d = np.where(fixed, x, d)
        xn = np.clip(_tridiag_solve(a, b, c, d), lo, hi)
        done = np.allclose(xn, x, atol=1e-7, rtol=0.0)
        x = xn
        if done:
            break
    return x


def _tridiag_solve(a, b, c, d):
    """Solve a_i x_{i−1} + b_i x_i + c_i x_{i+1} = d_i (a_0 = c_{n−1} = 0) by cyclic reduction:
    log2(n) vectorised levels (the system must be diagonally dominant)."""
    n = b.size
    if n == 1:
        return d / b
    # eliminate the odd unknowns from the even equations
    ev = np.arange(0, n, 2)
    im, ip = ev - 1, ev + 1
    has_m, has_p = im >= 0, ip < n
    im_c, ip_c = np.clip(im, 0, n - 1), np.clip(ip, 0, n - 1)
    alpha = np.where(has_m, -a[ev] / b[im_c], 0.0)
    gamma = np.where(has_p, -c[ev] / b[ip_c], 0.0)
    a2 = alpha * np.where(has_m, a[im_c], 0.0)
    c2 = gamma * np.where(has_p, c[ip_c], 0.0)
    b2 = b[ev] + alpha * np.where(has_m, c[im_c], 0.0) + gamma * np.where(has_p, a[ip_c], 0.0)
    d2 = d[ev] + alpha * np.where(has_m, d[im_c], 0.0) + gamma * np.where(has_p, d[ip_c], 0.0)
    x = np.empty(n)
    x[ev] = _tridiag_solve(a2, b2, c2, d2)
    od = np.arange(1, n, 2)
    right = np.where(od + 1 < n, x[np.clip(od + 1, 0, n - 1)], 0.0)
    x[od] = (d[od] - a[od] * x[od - 1] - c[od] * right) / b[od]
    return x
