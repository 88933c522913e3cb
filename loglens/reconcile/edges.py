"""Where inside a Decode line's interval its tokens were made: decode time vs the rest, and the
lines that straddle a window's edges.

Inside a window, a line's tokens are spread evenly over its busy part (activity.window_tokens).
That is right in steady decoding and wrong in two places, both at a run's edges:

* a line's interval can hold much more than its 40 decode steps (a 1-s sleep, a burst's
  prefills, an idle gap: the tic is never reset), so its busy part is shortened to the decode
  time a step-time model predicts (`refine_busy`);
* the first line of a run also holds steps of what ran before it (the client's warmup, the
  previous run's last steps), and the steps after a run's last Decode line are logged only by
  the next line, after the next burst (`split_edges`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

WARMUP_DECODE_TOKENS = 31  # a client warmup request: output_len = min(dataset output_len, 32)
SERVER_WARMUP_DECODE_TOKENS = 7  # the server's own warmup at start-up: max_new_tokens=8
IDLE_REASONS = ("idle_gap", "first_line", "after_startup", "after_flush")


def refine_busy(iv: pl.DataFrame, log_interval: int) -> pl.DataFrame:
    """Decode step time is close to linear in the batch (fixed + per-request cost): fit
    `interval / 40 = a + c × batch` per stream on clean lines (samples, no prefill inside, model
    agreeing with the clock within 10 %, one trimming pass) and give each line
    `busy_s = min(busy_s, 1.1 × 40 × (a + c × mean batch))`, mean batch = tokens ÷ (40 × accept
    len).  The rest of the interval is non-decode time, taken to be at its start."""
    if iv.height == 0:
        return iv
    return pl.concat([_refine_stream(part, log_interval)
                      for _, part in iv.group_by(["file_id", "stream"], maintain_order=True)])


def _refine_stream(part: pl.DataFrame, log_interval: int) -> pl.DataFrame:
    interval = part["interval_s"].fill_null(np.nan).to_numpy()
    model = part["model_interval_s"].fill_null(np.nan).to_numpy()
    tokens = part["tokens"].fill_null(np.nan).to_numpy()
    accept = part["accept_len"].fill_null(1.0).to_numpy()
    batch = tokens / (log_interval * np.where(accept > 0, accept, 1.0))
    step = interval / log_interval
    clean = (part["is_sample"].to_numpy() & (part["prefill_batches"].to_numpy() == 0)
             & (np.abs(model - interval) <= 0.1 * interval) & np.isfinite(step) & np.isfinite(batch))
    fit = _fit_step(batch[clean], step[clean])
    if fit is None:
        return part
    a, c = fit
    decode_s = 1.1 * log_interval * np.maximum(a + c * batch, 0.0)
    busy = part["busy_s"].fill_null(np.nan).to_numpy()
    refined = np.where(np.isfinite(decode_s) & (decode_s < busy), decode_s, busy)
    return part.with_columns(busy_s=pl.Series(refined).fill_nan(None))


def _fit_step(batch: np.ndarray, step: np.ndarray) -> tuple[float, float] | None:
    """Least squares step = a + c × batch, refitted once without the lines it under-predicts by
    more than 10 % (a stall the clean-line filter missed); None with under 3 lines."""
    if batch.size < 3:
        return None
    keep = np.ones(batch.size, bool)
    a = c = 0.0
    for _ in range(2):
        if keep.sum() < 3:
            return None
        if np.ptp(batch[keep]) < 1.0:  # one batch size: the step time is all we can know
            a, c = float(np.median(step[keep])), 0.0
        else:
            c, a = np.polyfit(batch[keep], step[keep], 1)
        keep = step <= 1.1 * (a + c * batch)
    return float(a), float(c)


def tail_tokens(line: dict, seconds: float, log_interval: int) -> tuple[float, float]:
    """(tokens, seconds of decoding) of the steps a stream ran for `seconds` after `line` when its
    activity was ending: as many steps as fit at the line's pace (at most 39, or the next line
    would have been printed), the batch shrinking linearly from the line's to 1 (a run ends
    when its last request does)."""
    step_s = (line["interval_s"] or 0.0) / log_interval
    if seconds <= 0 or step_s <= 0 or not line["running_req"]:
        return 0.0, 0.0
    steps = min(log_interval - 1, seconds / step_s)
    return steps * (line["running_req"] + 1) / 2 * (line["accept_len"] or 1.0), steps * step_s


def split_edges(iv: pl.DataFrame, start_s: float, end_s: float, log_interval: int,
                prev_end_s: float | None = None, warmup_requests: int = 0) -> pl.DataFrame:
    """Split the lines at the window's edges (per stream); rows get `_logged` (False for parts
    that are not a line logged inside the window).

    Head — the line straddling the start: if it spans an idle gap,
    what it holds from before is the previous activity's tail (`tail_tokens` up to
    `prev_end_s`, the previous run's end when known), the client's warmup (≤ 31 decode tokens
    per warmup request, shared among DP streams) and, after start-up, the server's own warmup
    (7); otherwise the steps that fit before the start at the previous line's batch and pace.
    Tail — after the window's last line: `tail_tokens` up to the end, taken from the next line
    (whose tokens shrink by as much) when that one's busy part lies after the window; when that
    line holds only the tail and the warmup's single-request steps, the tail is read off its
    40 steps instead (`_tail_from_next`)."""
    iv = iv.with_columns(_logged=pl.lit(True))
    if iv.height == 0:
        return iv
    parts = []
    streams = iv.select("file_id", "stream").unique().height
    # the warmup went to one DP rank, which one the log does not say: share it out
    warmup_tokens = warmup_requests * WARMUP_DECODE_TOKENS / streams
    for _, part in iv.group_by(["file_id", "stream"], maintain_order=True):
        part = _head(part, start_s, log_interval, prev_end_s, warmup_tokens)
        parts.append(_tail(part, start_s, end_s, log_interval))
    return pl.concat(parts, how="vertical_relaxed")


def _head(part: pl.DataFrame, start_s: float, log_interval: int, prev_end_s: float | None,
          warmup_tokens: float) -> pl.DataFrame:
    begin, end = part["_start_s"].to_numpy(), part["_end_s"].to_numpy()
    straddle = np.flatnonzero((begin < start_s) & (end > start_s))
    if straddle.size == 0:
        return part
    i = int(straddle[0])
    line = part.row(i, named=True)
    prev = part.row(i - 1, named=True) if i > 0 else None  # none: the first line after start-up
    if not line["tokens"] or line["tokens"] <= 0:
        return part
    if line["not_sample_reason"] in IDLE_REASONS:
        before = warmup_tokens
        if line["not_sample_reason"] in ("first_line", "after_startup"):
            before += SERVER_WARMUP_DECODE_TOKENS  # the server's own warmup request
        if prev is not None and prev_end_s is not None and prev_end_s > prev["_end_s"]:
            before += tail_tokens(prev, min(prev_end_s, start_s) - prev["_end_s"], log_interval)[0]
    elif prev is None:
        return part  # no earlier line to take a pace from: its tokens are spread over its busy part
    else:
        step_s = (prev["interval_s"] or 0.0) / log_interval
        steps = min(log_interval, (start_s - line["_start_s"]) / step_s) if step_s > 0 else 0.0
        before = steps * (prev["running_req"] or 0) * (prev["accept_len"] or 1.0)
    before = min(line["tokens"], before)
    inside_busy = min(line["busy_s"] or 0.0, line["_end_s"] - start_s)
    pre = {**line, "_end_s": start_s, "_busy_start_s": line["_start_s"], "interval_s": start_s - line["_start_s"],
           "busy_s": start_s - line["_start_s"], "tokens": before, "_logged": False,
           "is_sample": False, "not_sample_reason": "before_window"}
    rest = part.slice(i, 1).with_columns(_start_s=pl.lit(start_s), tokens=pl.lit(line["tokens"] - before),
                                         _busy_start_s=pl.lit(line["_end_s"] - inside_busy),
                                         busy_s=pl.lit(inside_busy))
    return pl.concat([part.slice(0, i), pl.DataFrame([pre], schema=part.schema), rest, part.slice(i + 1)])


def _tail(part: pl.DataFrame, start_s: float, end_s: float, log_interval: int) -> pl.DataFrame:
    end = part["_end_s"].to_numpy()
    logged = part["_logged"].to_numpy()
    inside = np.flatnonzero((end >= start_s) & (end <= end_s) & logged)
    if inside.size == 0:
        return part
    i = int(inside[-1])
    last = part.row(i, named=True)
    nxt = part.row(i + 1, named=True) if i + 1 < part.height else None
    if nxt is not None and nxt["_busy_start_s"] < end_s:
        return part  # decoding went on past the window: its tokens are spread where they belong
    tokens, span = tail_tokens(last, end_s - last["_end_s"], log_interval)
    exact = _tail_from_next(last, nxt, end_s - last["_end_s"], log_interval) if nxt is not None else None
    if exact is not None:
        tokens, span = exact
    elif nxt is not None:
        tokens = min(tokens, max(nxt["tokens"] or 0.0, 0.0))
    if tokens <= 0 or span <= 0:
        return part
    row = {**last, "_start_s": last["_end_s"], "_busy_start_s": last["_end_s"], "_end_s": last["_end_s"] + span,
           "interval_s": span, "busy_s": span, "tokens": tokens, "gen_throughput": tokens / span,
           "is_sample": False, "not_sample_reason": "unlogged_tail", "prefill_batches": 0, "prefill_tokens": 0,
           "_logged": False}
    out = pl.concat([part.slice(0, i + 1), pl.DataFrame([row], schema=part.schema), part.slice(i + 1)])
    if nxt is not None:  # the next line keeps what is left, and starts where the tail ends
        is_next = pl.col("line_no") == nxt["line_no"]
        out = out.with_columns(tokens=pl.when(is_next).then(pl.col("tokens") - tokens).otherwise(pl.col("tokens")),
                               _start_s=pl.when(is_next).then(last["_end_s"] + span).otherwise(pl.col("_start_s")))
    return out


def _tail_from_next(last: dict, nxt: dict, seconds: float, log_interval: int) -> tuple[float, float] | None:
    """(tokens, seconds) of the unlogged tail after `last`, read off the next line when that line
    holds nothing but the tail and single-request steps: it follows an idle gap, one Prefill batch
    ran inside its window (the client's warmup request) and it printed with one running request.
    Its 40 steps are then the tail's j steps and 40 - j steps of batch 1, so the tail holds
    `tokens - (40 - j) × accept len`.  j: the steps that fit in `seconds` at the last line's pace,
    kept where the counts allow it — the warmup made at most 31 tokens (j ≥ 40 - 31 / accept len),
    and the tail's batch was at most the last line's (tail ≤ j × its running requests × accept).
    The tail ends the run: its span is kept inside the window (at most `seconds`)."""
    if (nxt["not_sample_reason"] not in IDLE_REASONS or nxt["running_req"] != 1 or nxt["prefill_batches"] != 1
            or not nxt["tokens"] or not last["running_req"] or not last["interval_s"] or seconds <= 0):
        return None
    acc = nxt["accept_len"] or 1.0
    step_s = last["interval_s"] / log_interval
    per_step = last["running_req"] * (last["accept_len"] or 1.0)  # the tail's largest tokens per step
    total = nxt["tokens"]
    lo = max(0.0, log_interval - WARMUP_DECODE_TOKENS / acc)
    if per_step > acc:
        lo = max(lo, (total - log_interval * acc) / (per_step - acc))
    hi = log_interval - 1.0
    if lo > hi:
        return None
    j = min(max(seconds / step_s, lo), hi)
    tokens = total - (log_interval - j) * acc
    if tokens <= 0:
        return None
    return tokens, min(seconds, j * step_s)
