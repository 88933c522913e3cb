"""Which run in the log each bench_serving record measured, and its exact window.

A record carries no clock (format spec §5.1), only what it measured: requests sent
(`num_prompts`, or completed + failed), `duration` (precise, from perf_counter), the request
rate, the backend.  Each record is scored against each access-log segment (runs.find_segments):

* count — the last N POSTs before the server-info call, with a ≥ 1 s pause before them
  (the warmup's), N = num_prompts / completed + failed / completed;
* duration — server-info call minus first burst POST vs `duration` (±1 s per timestamp);
* endpoint — the backend's endpoint (§5.4);
* rate — the arrival span vs the record's request rate: ~0 for an infinite rate (a burst),
  (N − 1)/rate with Poisson spread otherwise; not checked under a concurrency cap or when the
  access lines log at completion (non-streamed requests);

and records are assigned to segments in order (bench_serving appends records as runs finish,
the log grows the same way) by a monotone best-total-score matching.  The window is then placed
from both anchors and the duration: W0 within the first POST's second, W1 within the
server-info call's second (or at the deprecation warning's millisecond), W1 − W0 = duration.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import polars as pl

from loglens.runs import GEN_ENDPOINTS, Segment, to_datetime

MIN_SCORE = 0.35
BACKEND_ENDPOINTS = {"sglang": "/generate", "sglang-native": "/generate", "sglang-oai": "/v1/completions",
                     "vllm": "/v1/completions", "lmdeploy": "/v1/completions",
                     "sglang-oai-chat": "/v1/chat/completions", "vllm-chat": "/v1/chat/completions",
                     "lmdeploy-chat": "/v1/chat/completions"}


@dataclass
class Alignment:
    start_s: float
    end_s: float
    method: str
    confidence: float
    evidence: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    segment: Segment | None = None
    burst_from: int | None = None  # index of the first measured POST in the segment
    requests: int | None = None  # measured POSTs from there

    @property
    def warmup_requests(self) -> int:
        return _warmup_count(self.segment, self.burst_from) if self.segment is not None and self.burst_from else 0

    def to_dict(self) -> dict:
        d = {"method": self.method, "confidence": round(self.confidence, 2), "evidence": self.evidence}
        if self.segment is not None and self.burst_from is not None:
            seg = self.segment
            d.update(source=seg.source, file_id=seg.file_id, endpoint=seg.endpoint,
                     requests=self.requests, warmup_requests=self.warmup_requests,
                     first_request_line=seg.post_lines[self.burst_from], end_line=seg.end_line,
                     end_anchor=f"GET {seg.end_path}" if seg.end_path else "last request")
        return d


def _warmup_count(seg: Segment, k: int) -> int:
    """POSTs of the cluster (under 1 s apart) just before POST k: the warmup; 0 if none."""
    if k <= 0:
        return 0
    i = k - 1
    while i > 0 and seg.post_s[i] - seg.post_s[i - 1] < 1.0:
        i -= 1
    return k - i


#: request counts by record, while it lives (a record is scored against every candidate run,
#: ~100 000 times on a long log; counting its errors each time was a fifth of `align`)
_COUNTS: dict[int, tuple[object, list[int]]] = {}


def request_counts(rec) -> list[int]:
    """Requests the run sent, most specific first (records are not changed once loaded)."""
    hit = _COUNTS.get(id(rec))
    if hit is not None and hit[0] is rec:
        return hit[1]
    if len(_COUNTS) > 1024:
        _COUNTS.clear()
    out = _request_counts(rec)
    _COUNTS[id(rec)] = (rec, out)  # (holding the record keeps its id from being reused)
    return out


def _request_counts(rec) -> list[int]:
    failed = sum(1 for e in (rec.errors or []) if e) if isinstance(rec.errors, list) else None
    counts = [rec.num_prompts, (rec.completed + failed) if rec.completed is not None and failed is not None else None,
              rec.completed]
    out: list[int] = []
    for c in counts:
        if c and c > 0 and c not in out:
            out.append(int(c))
    return out


def _burst_for(rec, seg: Segment, explain: bool = True) -> tuple[int, int, str, float]:
    """(index of the first measured POST, requests, how it was chosen, count score) for a
    segment that ends with a server-info call: the measured requests are its last N POSTs.
    (`explain=False`: `how` is left empty: `align` scores every candidate run and explains
    only the ones it picks.)"""
    p = len(seg.post_s)
    for n in request_counts(rec):
        if n > p:
            continue
        k = p - n
        if k == 0:
            return 0, n, f"all {n} POST {seg.endpoint} of the segment = the record's requests (no warmup seen)" if explain else "", 0.3
        pause = seg.post_s[k] - seg.post_s[k - 1]
        if pause >= 1.0:
            return k, n, (f"the last {n} POST {seg.endpoint} = the record's requests, after {k} earlier request(s) "
                          f"and a {pause:.0f} s pause (the warmup)" if explain else ""), 0.45
    n_seg = p - seg.warmup_count
    want = request_counts(rec)[0] if request_counts(rec) else None
    closeness = max(0.0, 1 - abs(n_seg - want) / want) if want else 0.0
    # a few requests more or less (lost access lines, failures not in the record) may still be
    # this run; more than 10 % off is another run
    return (seg.warmup_count, n_seg, f"{n_seg} POST {seg.endpoint} after the warmup, the record has {want}" if explain else "",
            0.2 * closeness if closeness >= 0.9 else -1.0)


def _burst_from(rec, seg: Segment, k: int, explain: bool = True) -> tuple[int, str, float]:
    """(requests, how, count score + end evidence) for a run starting at POST k of a segment
    without a server-info call (an old client): N POSTs from k, then a pause, and the next run's
    requests (if any) only after this one's duration."""
    p, d = len(seg.post_s), rec.duration or 0.0
    for n in request_counts(rec):
        if k + n > p:
            continue
        after = seg.post_s[k + n] if k + n < p else None
        if after is not None and after - seg.post_s[k + n - 1] < 1.0:
            continue
        sc = 0.45 if k > 0 else 0.3
        how = f"{n} POST {seg.endpoint} after a warmup pause" if explain else ""
        if after is None or after >= seg.post_s[k] + d - 1.0:
            sc += 0.2
            how += ", and nothing else until the duration had passed" if explain else ""
        return n, how, sc
    return min(p - k, request_counts(rec)[0] if request_counts(rec) else p - k), "request count does not match", -1.0


def place(seg: Segment, k: int, duration: float) -> tuple[float, float, list[str], list[str]]:
    """Window (W0, W1) from the anchors and the duration; evidence and warnings."""
    first = seg.post_s[k]
    evidence, warnings = [], []
    start_lo, start_hi = first - 0.05, first + 1.0  # dispatch is a few ms before arrival
    if seg.end_precise_s is not None:
        end = seg.end_precise_s + 0.002
        evidence.append("end at the deprecation warning's millisecond timestamp")
        if not start_lo - 0.5 <= end - duration <= start_hi + 0.5:
            warnings.append(f"the first request's access line is {first - (end - duration):+.1f} s from the start "
                            f"the duration implies (requests not streamed? their access lines log at completion)")
        return end - duration, end, evidence, warnings
    if seg.end_s is not None:
        lo, hi = max(start_lo, seg.end_s - duration), min(start_hi, seg.end_s + 1.0 - duration)
        if lo <= hi:
            start = (lo + hi) / 2
            evidence.append(f"start within the first request's second, end within the GET {seg.end_path} second "
                            f"(±{(hi - lo) / 2:.2f} s)")
        else:
            start = seg.end_s + 0.5 - duration
            evidence.append(f"end within the GET {seg.end_path} second, start = end − duration")
            warnings.append(f"the first request's access line is {first - start:+.1f} s from the start the "
                            f"duration implies (requests not streamed? their access lines log at completion)")
        return start, start + duration, evidence, warnings
    start = first + 0.5
    evidence.append("no server-info call: start within the first request's second, end = start + duration")
    return start, start + duration, evidence, warnings


def score(rec, seg: Segment, k_fixed: int | None = None, explain: bool = True) -> tuple[float, int, int, list[str]]:
    """(score 0..1, first measured POST, requests, evidence) of a record against a segment (or a
    run start `k_fixed` inside an unanchored one).  `explain=False` leaves the evidence empty
    (`align` scores every record against every candidate run, ~100 000 pairs on a long log, and
    explains only the pairs it picks: the same scores)."""
    if k_fixed is None:
        k, n, how, s = _burst_for(rec, seg, explain)
    else:
        k = k_fixed
        n, how, s = _burst_from(rec, seg, k, explain)
    evidence = [how] if explain else None
    d = rec.duration or 0.0
    first, last = seg.post_s[k], seg.post_s[min(k + n, len(seg.post_s)) - 1]
    if seg.end_s is not None and d > 0:
        span = seg.end_s - first
        diff = abs(span - d)
        s += 0.35 if diff <= 1.5 else 0.35 * max(0.0, 1 - (diff - 1.5) / max(5.0, 0.2 * d))
        if explain:
            evidence.append(f"server-info call {span:.0f} s after the first request, duration {d:.2f} s")
    elif d > 0:
        s += 0.15 if last - first <= d + 1 else 0.0
        if explain:
            evidence.append(f"requests arrive over {last - first:.0f} s, duration {d:.2f} s")
    want = BACKEND_ENDPOINTS.get(rec.backend or "")
    s += 0.05 if want is None else (0.1 if want == seg.endpoint else 0.0)
    s += _rate_score(rec, seg, first, last, n, evidence)
    return min(s, 1.0), k, n, evidence or []


def _wilson_hilferty(k: float, z: float) -> float:
    """The z-quantile of a Gamma(k, 1) variable (Wilson–Hilferty; good to a few % for k ≥ 1)."""
    c = 1.0 / (9.0 * k)
    return k * max(0.0, 1.0 - c + z * math.sqrt(c)) ** 3


@functools.lru_cache(maxsize=4096)
def arrival_span_range(rate: float | None, n: int) -> tuple[float, float]:
    """Where the true first-to-last arrival span of n requests sent at `rate` can fall: ~0 (a
    burst: bench_serving sends every request at once) for an infinite rate; for a Poisson rate
    the sum of n − 1 exponential gaps, mean (n − 1)/rate, its 3.5-σ quantiles widened to
    0.4-2.5 × the mean (the client's --burstiness is not recorded).  Plus the client's dispatch
    time (an event loop sending n requests): 1 s + n/200 s at the top."""
    dispatch = 1.0 + n / 200
    if rate is None or not math.isfinite(rate):
        return 0.0, dispatch
    mean = (n - 1) / rate
    lo = min(0.4 * mean, _wilson_hilferty(n - 1, -3.5) / rate)
    hi = max(2.5 * mean, _wilson_hilferty(n - 1, 3.5) / rate)
    return lo, hi + dispatch


def _rate_score(rec, seg: Segment, first: float, last: float, n: int, evidence: list[str] | None) -> float:
    """+0.1 if the arrival span fits the record's request rate, −0.1 if it cannot (an inf-rate
    burst arrives within a second or two, a rate-16 run of 64 over ~4 s), 0.05 if the log cannot
    say: a --max-concurrency cap (or a record too old to say whether there was one) paces the
    requests by completions, two requests make no span, and non-streamed requests log their access line at completion (format spec §6.1): then
    the last POST comes within a second of the server-info call, and a span that does not fit
    is no evidence (a streamed run whose last request finished last looks the same: neutral)."""
    rate = rec.request_rate
    if not rate or rate <= 0 or rec.max_concurrency or n <= 2:
        return 0.05
    span = last - first  # whole seconds: the true span is within ±1 s of it
    lo, hi = arrival_span_range(rate, n)
    fits = span - 1.0 <= hi and span + 1.0 >= lo
    if fits:
        result, why = 0.1, ": consistent"
    elif "max_concurrency" in (getattr(rec, "missing", None) or []):
        result, why = 0.05, (", but the record has no max_concurrency key (clients before v0.3.6.post1): "
                             "a cap may have paced them")
    elif seg.end_s is not None and seg.end_s - last <= 1.0:
        result, why = 0.05, (", but the last POST is at the server-info call: access lines at completion "
                             "(not streamed?), not arrivals")
    else:
        result, why = -0.1, ": inconsistent"
    if evidence is not None:
        evidence.append(f"arrivals over {span:.0f} s at {rate:g} req/s (expected {lo:.1f}-{hi:.1f} s)" + why)
    return result


def align(records: list, segments: list[Segment]) -> list[Alignment | None]:
    """One alignment (or None) per record, in order, matched monotonically to runs in the log:
    a segment ending with a server-info call is one run; one without (old clients) may hold a
    run at each of its warmup candidates."""
    slots = []
    for seg in _plausible(records, segments):
        if seg.end_s is None and seg.candidates:
            slots += [(seg, k) for k in seg.candidates]
        else:
            slots.append((seg, None))
    slots.sort(key=lambda sk: sk[0].post_s[sk[1] or 0])
    table = [[score(r, seg, k, explain=False) for seg, k in slots] for r in records]
    picks = _monotone_match(table, MIN_SCORE)
    return [None if j is None else _alignment(records[i], slots[j][0], score(records[i], *slots[j]), j, len(slots), [t[0] for t in table[i]])
            for i, j in enumerate(picks)]


def _plausible(records: list, segments) -> list[Segment]:
    """The segments any record could match, found with table filters first when the log holds
    many (a long log can hold 100 000).  A run's requests must fit the segment: its last N
    POSTs after a pause of ≥ 1 s, or all of them, or N within 10 % of those after the warmup
    (`_burst_for`); without a server-info call, N POSTs from a place a run may start and then a
    pause or the end (`_burst_from`).  A segment where no record's count fits scores below
    MIN_SCORE whatever else it shows, so dropping it changes no alignment."""
    table = getattr(segments, "table", None)
    if table is None or len(segments) <= 64:
        return [s for s in segments if s.endpoint in GEN_ENDPOINTS]
    counts = sorted({n for rec in records for n in request_counts(rec)})
    if not counts:
        return []
    table = table.with_row_index("_i")
    s, p, k = pl.col("s"), pl.col("n_posts").cast(pl.Int64), pl.col("cand")
    loose = pl.col("end_s").is_null() & (k.list.len() > 0)  # scored from each candidate, not by the last N
    last_n = [(p >= n) & ((p == n) | (s.list.get(p - n, null_on_oob=True) - s.list.get(p - n - 1, null_on_oob=True) >= 1.0))
              for n in counts]
    close = [(p - pl.col("warmup") - rec_counts[0]).abs() <= 0.1 * rec_counts[0]
             for rec_counts in (request_counts(r) for r in records) if rec_counts]
    whole = table.filter(~loose & pl.any_horizontal(last_n + close).fill_null(False)).get_column("_i")
    from_k = [(k + n <= p) & ((k + n == p) | (s.list.get(k + n, null_on_oob=True) - s.list.get(k + n - 1, null_on_oob=True) >= 1.0))
              for n in counts]
    starts = (table.filter(loose).select("_i", "s", "n_posts", "cand").explode("cand")
              .filter(pl.any_horizontal(from_k).fill_null(False)).get_column("_i").unique())
    keep = pl.concat([whole, starts]).sort().to_list()
    return [s for s in segments.take(keep) if s.endpoint in GEN_ENDPOINTS]


def _monotone_match(table: list[list[tuple]], min_score: float) -> list[int | None]:
    """For each row (record) a column (run) or None: columns increase with rows, total score is
    the largest possible (records and runs are both in time order)."""
    n, m = len(table), len(table[0]) if table else 0
    best = [[0.0] * (m + 1) for _ in range(n + 1)]  # best[i][j]: records i.., segments j..
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            take = table[i][j][0] + best[i + 1][j + 1] if table[i][j][0] >= min_score else -1.0
            best[i][j] = max(take, best[i + 1][j], best[i][j + 1])
    out: list[int | None] = [None] * n
    i = j = 0
    while i < n and j < m:
        sc = table[i][j][0]
        if sc >= min_score and abs(best[i][j] - (sc + best[i + 1][j + 1])) < 1e-12:
            out[i] = j
            i, j = i + 1, j + 1
        elif best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1
    return out


def align_bursts(records: list, bursts: list) -> list[Alignment | None]:
    """Without access lines: match records to bursts of decode activity by duration and order.
    A burst spans less than the client's duration (prefills before the first Decode line, the
    tail after the last); the window is placed with 70 % of the slack before the burst."""
    table = []
    for r in records:
        row = []
        for b in bursts:
            d, span = r.duration or 0.0, b.duration_s
            fit = 0.0 if d <= 0 else max(0.0, 1 - max(0.0, span - d - 1) / d - max(0.0, d - span) / d)
            row.append((0.6 * fit, b))
        table.append(row)
    out: list[Alignment | None] = []
    for i, j in enumerate(_monotone_match(table, 0.3)):
        if j is None:
            out.append(None)
            continue
        r, b = records[i], bursts[j]
        slack = max(0.0, r.duration - b.duration_s)
        start = b.busy_start_s - 0.7 * slack
        ev = [f"no access lines: burst {j + 1} of {len(bursts)} of decode activity ({b.decode_lines} Decode lines, "
              f"{b.duration_s:.1f} s busy) vs duration {r.duration:.2f} s",
              f"window placed with {0.7 * slack:.1f} s before the first decode window and {0.3 * slack:.1f} s after the last"]
        out.append(Alignment(start, start + r.duration, "decode activity", min(0.5, table[i][j][0]), ev,
                             ["the window is placed from decode activity only (±1-2 s): capture the access log "
                              "(uvicorn, stdout) too for an exact alignment"]))
    return out


def _alignment(rec, seg: Segment, scored, j: int, m: int, row: list[float]) -> Alignment:
    sc, k, n, evidence = scored
    start, end, ev2, warnings = place(seg, k, rec.duration)
    others = sorted((x for jj, x in enumerate(row) if jj != j), reverse=True)
    confidence = sc
    if others and others[0] >= sc - 0.1:
        confidence *= 0.7
        warnings.append(f"another run in the log scores almost as well ({others[0]:.2f} vs {sc:.2f}): "
                        f"the order of records in the file decided; pass --start/--end if this is wrong")
    evidence = evidence + ev2 + [f"record {rec.index + 1} ↔ run {j + 1} of {m} in the log"]
    return Alignment(start, end, "access log", confidence, evidence, warnings, seg, k, n)


def manual(start_s: float | None, end_s: float | None, duration: float) -> Alignment:
    if start_s is None:
        start_s = end_s - duration
    if end_s is None:
        end_s = start_s + duration
    ev = [f"window given by --start/--end: {to_datetime(start_s).isoformat()} → {to_datetime(end_s).isoformat()}"]
    return Alignment(start_s, end_s, "--start/--end", 1.0, ev)
