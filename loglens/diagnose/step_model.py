"""Decode step time as a line in the batch size: step_ms = fixed_ms + per_req_ms × batch.

Why a line: a decode forward reads the weights once (a cost that does not depend on how many
requests ride along: kernel launches, weight reads, TP all-reduces) and then does a little work
per request (its KV reads, its sampling).  Each Decode line of the log gives one point: the
interval it covers holds `decode_log_interval` steps, so step time ≈ interval_s / N and batch ≈
tokens / N (÷ accept len with speculative decoding).

Why a one-sided trimmed fit: whatever the line misses (a prefill squeezed between steps, the
scheduler waiting, a stale batch estimate) only ever *adds* time, so points far above the line
are dropped readily while points below it are kept unless they are wild.  Symmetric noise (the
step-to-step jitter) is averaged over N steps and barely moves the fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: residuals are judged in units of a robust scale (1.4826 × MAD); above the line more strictly
TRIM_ABOVE = 2.5
TRIM_BELOW = 4.0
MIN_POINTS = 3
#: residual scale never below this fraction of the median step time
SCALE_FLOOR = 0.01
#: the batch range must span at least this ratio (max/min) for the slope to mean anything
MIN_BATCH_SPREAD = 1.3


@dataclass(frozen=True)
class StepModel:
    fixed_ms: float | None  # fixed cost of the steps that ran as most steps did (graph or not)
    per_req_ms: float | None
    points: int  # intervals that went into the final fit
    trimmed: int  # intervals dropped as outliers by the fit itself
    r2: float | None
    rms_ms: float | None  # residual RMS of the kept points
    batch_min: float | None
    batch_max: float | None
    identifiable: bool  # False: too few points, or all at one batch size
    note: str = ""
    # when the log holds both graph and eager (no CUDA graph) steps, each one's fixed cost
    fixed_ms_graph: float | None = None
    fixed_ms_eager: float | None = None
    # when prefill-bearing intervals had to be used: what one prefill batch and one prefill
    # token add to the interval (ms)
    prefill_ms_per_batch: float | None = None
    prefill_ms_per_token: float | None = None

    def step_ms(self, batch: float) -> float | None:
        if not self.identifiable:
            return None
        return self.fixed_ms + self.per_req_ms * batch

    def tok_s(self, batch: float, accept_len: float = 1.0) -> float | None:
        """Predicted decode throughput of one scheduler at this batch size."""
        ms = self.step_ms(batch)
        if ms is None or ms <= 0:
            return None
        return 1000.0 * batch * accept_len / ms

    def fixed_share(self, batch: float) -> float | None:
        ms = self.step_ms(batch)
        if ms is None or ms <= 0:
            return None
        return self.fixed_ms / ms

    def as_dict(self) -> dict:
        return {
            "fixed_ms": _round(self.fixed_ms, 3),
            "per_req_ms": _round(self.per_req_ms, 4),
            "windows": self.points,
            "trimmed": self.trimmed,
            "r2": _round(self.r2, 4),
            "rms_ms": _round(self.rms_ms, 3),
            "batch_min": _round(self.batch_min, 2),
            "batch_max": _round(self.batch_max, 2),
            "identifiable": self.identifiable,
            "fixed_ms_graph": _round(self.fixed_ms_graph, 3),
            "fixed_ms_eager": _round(self.fixed_ms_eager, 3),
            "prefill_ms_per_batch": _round(self.prefill_ms_per_batch, 3),
            "prefill_ms_per_token": _round(self.prefill_ms_per_token, 5),
            "method": "one-sided trimmed least squares",
            "note": self.note,
        }


def _round(x: float | None, nd: int) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), nd)


def fit_step_model(batch, step_ms, eager=None, prefill_batches=None, prefill_tokens=None,
                   steps_per_interval: int = 40, max_iter: int = 20) -> StepModel:
    """Fit step_ms = fixed + per_req × batch on usable intervals (arrays of equal length).

    eager: per interval, True when its steps ran without a CUDA graph; when both kinds are
    present each gets its own fixed cost.  prefill_batches / prefill_tokens: per interval, the
    prefill batches and tokens inside it, for logs where hardly any interval is free of them;
    their cost is spread over the interval's `steps_per_interval` steps.
    """
    b = np.asarray(batch, dtype=float)
    y = np.asarray(step_ms, dtype=float)
    ok = np.isfinite(b) & np.isfinite(y) & (b > 0) & (y > 0)
    extra: dict[str, np.ndarray] = {}
    if eager is not None:
        e = np.asarray(eager, dtype=float)
        ok &= np.isfinite(e)
        e = e[ok]
        # a separate fixed cost only when both kinds have enough intervals to show it
        if min(e.sum(), (1 - e).sum()) >= MIN_POINTS:
            extra["eager"] = e
    for name, arr in (("prefill_batches", prefill_batches), ("prefill_tokens", prefill_tokens)):
        if arr is not None:
            v = np.asarray(arr, dtype=float)[ok]
            if np.nansum(v) > 0:
                extra[name] = np.nan_to_num(v) / steps_per_interval
    b, y = b[ok], y[ok]
    n = len(b)
    need = MIN_POINTS + len(extra)
    if n < need:
        return _unidentifiable(b, y, f"only {n} usable Decode interval(s); need {need}")
    if b.max() < MIN_BATCH_SPREAD * b.min():
        return _unidentifiable(b, y, f"every usable interval ran at batch ≈{np.median(b):.0f}: "
                                     "the per-request cost cannot be told from the fixed cost")
    a = np.column_stack([np.ones_like(b), b, *extra.values()])
    keep = np.ones(n, dtype=bool)
    coef = _lstsq(a, y)
    for _ in range(max_iter):
        resid = y - a @ coef
        kr = resid[keep]
        scale = 1.4826 * np.median(np.abs(kr - np.median(kr)))
        # a floor on the scale: near-perfect data must not trim points over step-time jitter
        # and 2-decimal rounding of the logged rate (under 1 % of a step)
        scale = max(scale, SCALE_FLOOR * float(np.median(y)), 1e-9)
        new_keep = (resid <= TRIM_ABOVE * scale) & (resid >= -TRIM_BELOW * scale)
        if new_keep.sum() < need or np.ptp(b[new_keep]) == 0 or np.array_equal(new_keep, keep):
            break
        keep = new_keep
        coef = _lstsq(a[keep], y[keep])
    resid = y[keep] - a[keep] @ coef
    ky, kb = y[keep], b[keep]
    ss_tot = float(((ky - ky.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else None
    fixed, per_req = float(coef[0]), float(coef[1])
    names = list(extra)
    c = dict(zip(names, coef[2:]))
    fixed_graph = fixed_eager = None
    if "eager" in c:
        fixed_graph, fixed_eager = fixed, fixed + float(c["eager"])
        # report the fixed cost of the kind most intervals ran as
        if extra["eager"][keep].mean() > 0.5:
            fixed = fixed_eager
    note = ""
    if kb.max() < MIN_BATCH_SPREAD * kb.min():
        note = "the kept intervals cover a narrow batch range: the split between fixed and per-request cost is uncertain"
    if min(fixed, per_req, *(v for v in (fixed_graph, fixed_eager) if v is not None)) < 0:
        note = "the fit gave a negative cost: the log does not follow a fixed + per-request step time"
    if "prefill_batches" in c or "prefill_tokens" in c:
        note = (note + "; " if note else "") + "few intervals were free of prefill: prefill time was fitted alongside"
    return StepModel(fixed, per_req, int(keep.sum()), int(n - keep.sum()), r2,
                     float(np.sqrt((resid**2).mean())), float(kb.min()), float(kb.max()),
                     identifiable=fixed >= 0 and per_req >= 0, note=note,
                     fixed_ms_graph=fixed_graph, fixed_ms_eager=fixed_eager,
                     prefill_ms_per_batch=_opt(c.get("prefill_batches")),
                     prefill_ms_per_token=_opt(c.get("prefill_tokens")))


def _opt(x) -> float | None:
    return None if x is None else float(x)


def _lstsq(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return coef


def _unidentifiable(b: np.ndarray, y: np.ndarray, note: str) -> StepModel:
    has = len(b) > 0
    return StepModel(None, None, len(b), 0, None, None,
                     float(b.min()) if has else None, float(b.max()) if has else None,
                     identifiable=False, note=note)
