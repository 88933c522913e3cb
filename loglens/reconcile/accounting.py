"""Where the client's duration went, and which decode tokens the server made inside it.

Every second of the window [W0, W1] (W1 − W0 = the client's duration) is given, per DP stream,
to exactly one phase, walking the stream's Decode lines (each covers [window_start, window_end],
contiguous by construction; a line after idle/start-up has an idle part then a busy part):

* ramp_up — from W0 to the start of the first steady line (requests arriving, prefills, the
  first partial windows);
* steady  — lines that are samples (intervals.is_sample) with no prefill batch inside;
* prefill — lines with prefill batches inside (the decode batch waited for them);
* idle    — lines that are not samples inside the run (they span an idle gap or a stall);
* drain   — lines after the last one still running ≥ half the run's largest batch;
* tail    — after the last Decode line of the run: decode steps not yet logged (they appear
  in the next Decode line, after the run) and the end-of-run server-info round trip.

If prefill batches sit in almost every line (Poisson arrivals), prefill lines count as steady.
Tokens: each line's tokens are spread evenly over its busy part and pro-rated at the edges.
The steady rate of a stream m = steady tokens / steady seconds; the phases' "lost" token
equivalents `m × seconds − tokens` are what the waterfall turns into tok/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from loglens.reconcile.activity import overlap
from loglens.runs import to_datetime

PHASES = ["ramp_up", "steady", "prefill", "idle", "drain", "tail"]
DRAIN_FRACTION = 0.5  # drain: batch below this fraction of the run's largest batch
MIN_PREFILL_FREE_SHARE = 0.25  # fewer prefill-free steady seconds than this: prefill is steady


@dataclass
class StreamAccount:
    stream: str
    decode_tokens: float = 0.0
    covered_s: float = 0.0  # seconds of the window covered by this stream's Decode lines
    steady_rate: float = 0.0
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    tokens: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    first_steady_s: float | None = None
    drain_from_s: float | None = None
    prefill_counted_as_steady: bool = False

    def lost(self, phase: str) -> float:
        """Token equivalents this phase cost against the stream's steady rate."""
        return self.steady_rate * self.seconds[phase] - self.tokens[phase]


@dataclass
class Accounting:
    start_s: float
    end_s: float
    streams: list[StreamAccount]
    peak: float | None
    peak_line: dict | None
    lines: int  # Decode lines logged inside the window (all streams)
    accept_len_mean: float | None
    retracted_requests: int
    prefill_batches: int

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def decode_tokens(self) -> float:
        return sum(s.decode_tokens for s in self.streams)

    @property
    def active_streams(self) -> list[StreamAccount]:
        return [s for s in self.streams if s.decode_tokens > 0]

    @property
    def mean_rate(self) -> float:
        """Time-weighted mean gen throughput, summed over DP streams (DESIGN: gen_throughput_mean)."""
        return sum(s.decode_tokens / s.covered_s for s in self.streams if s.covered_s > 0)

    @property
    def steady_rate(self) -> float:
        return sum(s.steady_rate for s in self.streams)

    def seconds(self, phase: str) -> float:
        """Seconds of the phase, averaged over streams weighted by their steady rates."""
        total = self.steady_rate
        if total <= 0:
            return float(np.mean([s.seconds[phase] for s in self.streams])) if self.streams else 0.0
        return sum(s.steady_rate * s.seconds[phase] for s in self.streams) / total

    def tokens(self, phase: str) -> float:
        return sum(s.tokens[phase] for s in self.streams)

    def lost(self, phase: str) -> float:
        return sum(s.lost(phase) for s in self.streams)


def account(intervals: pl.DataFrame, start_s: float, end_s: float, retractions: pl.DataFrame | None = None) -> Accounting:
    streams, lines, peak, peak_row = [], 0, None, None
    accept_num = accept_den = 0.0
    prefill_batches = 0
    for (stream,), part in intervals.sort("line_no", maintain_order=True).group_by(["stream"], maintain_order=True):
        acc = _account_stream(stream, part, start_s, end_s)
        streams.append(acc)
        end = part["_end_s"].to_numpy()
        logged = part["_logged"].to_numpy() if "_logged" in part.columns else np.ones(part.height, bool)
        inside = (end >= start_s) & (end <= end_s) & logged
        lines += int(inside.sum())
        prefill_batches += int(part["prefill_batches"].to_numpy()[inside].sum())
        gen = part["gen_throughput"].to_numpy()
        if inside.any() and np.isfinite(gen[inside]).any():
            i = int(np.flatnonzero(inside)[np.nanargmax(gen[inside])])
            if peak is None or gen[i] > peak:
                peak, peak_row = float(gen[i]), part.row(i, named=True)
        acc_len = part["accept_len"].to_numpy()
        tok = np.nan_to_num(part["tokens"].to_numpy())
        ok = inside & np.isfinite(acc_len)
        accept_num += float(np.sum(tok[ok]))
        accept_den += float(np.sum(tok[ok] / acc_len[ok]))
    retracted = 0
    if retractions is not None and retractions.height:
        inside = retractions.filter(pl.col("ts").is_between(to_datetime(start_s), to_datetime(end_s)))
        retracted = int(inside["retracted_reqs"].fill_null(1).sum())
    peak_line = None
    if peak_row is not None:
        peak_line = {"ts": peak_row["ts"].isoformat() if peak_row["ts"] else None, "line_no": peak_row["line_no"],
                     "stream": peak_row["stream"], "running_req": peak_row["running_req"],
                     "source": peak_row["source"]}
    return Accounting(start_s, end_s, streams, peak, peak_line, lines,
                      accept_num / accept_den if accept_den > 0 else None, retracted, prefill_batches)


def _account_stream(stream: str, part: pl.DataFrame, w0: float, w1: float) -> StreamAccount:
    acc = StreamAccount(stream)
    end = part["_end_s"].to_numpy()
    busy0 = part["_busy_start_s"].to_numpy()
    start = part["_start_s"].to_numpy()
    tokens = np.nan_to_num(part["tokens"].to_numpy())
    busy_len = np.maximum(end - busy0, 1e-9)
    busy_in = overlap(busy0, end, w0, w1)
    idle_in = overlap(start, busy0, w0, w1)
    tok_in = tokens * busy_in / busy_len
    sample = part["is_sample"].to_numpy()
    prefill = part["prefill_batches"].to_numpy() > 0
    running = part["running_req"].fill_null(0).to_numpy()
    active = busy_in > 0
    acc.decode_tokens = float(tok_in.sum())
    acc.covered_s = float((busy_in + idle_in).sum())
    if not active.any():
        acc.seconds["idle"] = w1 - w0
        return acc
    steady = active & sample & ~prefill
    if busy_in[steady].sum() < MIN_PREFILL_FREE_SHARE * busy_in[active & sample].sum():
        steady = active & sample  # prefills everywhere (Poisson arrivals): part of steady state
        acc.prefill_counted_as_steady = True
    if not steady.any():
        steady = active.copy()
    idx = np.arange(part.height)
    first_steady = int(idx[steady][0])
    big = steady & (running >= DRAIN_FRACTION * running[active].max()) & (idx >= first_steady)
    last_full = int(idx[big][-1]) if big.any() else int(idx[steady][-1])
    last_active = int(idx[active][-1])
    phase = np.full(part.height, "", dtype=object)
    phase[idx < first_steady] = "ramp_up"
    middle = (idx >= first_steady) & (idx <= last_full)
    phase[middle & steady] = "steady"
    phase[middle & ~steady & ~sample] = "idle"
    phase[middle & ~steady & sample & prefill] = "prefill"
    phase[middle & (phase == "")] = "steady"
    phase[(idx > last_full) & (idx <= last_active)] = "drain"
    phase[idx > last_active] = "tail"
    for p in PHASES:
        sel = phase == p
        acc.seconds[p] = float((busy_in[sel] + idle_in[sel]).sum())
        acc.tokens[p] = float(tok_in[sel].sum())
    # time no line of this stream covers: before its first line is ramp-up, after its last is tail
    covered = busy_in + idle_in > 0
    first_cover = float(max(start[covered].min(), w0)) if covered.any() else w1
    last_cover = float(min(end[covered].max(), w1)) if covered.any() else w1
    acc.seconds["ramp_up"] += first_cover - w0
    acc.seconds["tail"] += w1 - last_cover
    # whatever rounding left over (µs-rounded window edges) goes to idle, so phases sum to W1 − W0
    acc.seconds["idle"] += (w1 - w0) - sum(acc.seconds.values())
    acc.steady_rate = acc.tokens["steady"] / acc.seconds["steady"] if acc.seconds["steady"] > 0 else 0.0
    acc.first_steady_s = float(max(start[first_steady], w0))
    acc.drain_from_s = float(min(end[last_full], w1)) if last_full < last_active else None
    return acc
