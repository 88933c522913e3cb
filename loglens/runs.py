"""Benchmark runs in a server log: where each bench_serving invocation starts and ends.

bench_serving records no wall clock (format spec §5.1), so a run is found from what it does to
the server (§5.5, §6.1, §8.6): a lone warmup request to the bench endpoint, a pause of ≥ 1 s
(warmup latency + a fixed 1.0 s sleep), the burst of measured POSTs to the same endpoint, then
`GET /get_server_info` (≤ v0.5.9 clients) or `GET /server_info` — the call that ends the
client's `duration` — which servers ≥ v0.5.6 also mark with a deprecation warning.

Detection (one polars plan in loglens.reconcile.access, cached in STORE/.cache/ for the store's
current content: a 1 GiB log holds millions of POSTs):

* segments: the generation POSTs between two server-info call groups; a server start-up
  (`server_args`, `ready`: the server's own warmup POST precedes `ready`) and `GET /v1/models`
  (a bench client starting) also cut segments;
* clusters: POSTs of a segment's dominant endpoint closer than 1 s to the previous one;
* the warmup: the cluster of ≤ 8 POSTs followed by a 1–120 s pause and preceded by a pause at
  least as long (the longest such pause wins, so stray requests earlier in the segment are not
  taken for the run); the burst is every POST after it;
* the end: the first server-info call after the burst (else the last POST: lower confidence);
  clients older than v0.4.3.post3 make no such call, so a segment may hold several runs: it is
  split before every warmup-like cluster that also follows a pause of ≥ 3 s.

Access timestamps have 1-s resolution and streamed requests log at arrival, so a run's start
is the first burst POST's second + 0.5 s (± 0.5 s), its end the server-info call's second + 0.5
(or the deprecation warning's millisecond time, when the server logs milliseconds).  Without
any access line (only the scheduler's stderr captured) runs are the bursts of decode activity
between idle gaps (reconcile.activity.decode_bursts), with low confidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from loglens.reconcile.access import GEN_ENDPOINTS, INFO_PATHS, WARMUP_PAUSE_S, segment_table  # noqa: F401
from loglens.store import Store

EPOCH = datetime(1970, 1, 1)


def to_seconds(ts: datetime) -> float:
    return (ts - EPOCH).total_seconds()


def to_datetime(seconds: float) -> datetime:
    return EPOCH + timedelta(microseconds=round(seconds * 1e6))


@dataclass
class Segment:
    """The generation POSTs (one endpoint) between two boundaries, and the call that ends it."""

    file_id: str
    source: str | None
    endpoint: str
    post_s: list[float]  # access-line seconds of each POST, in log order
    post_lines: list[int]
    end_s: float | None  # first server-info call after the POSTs (its second)
    end_line: int | None
    end_path: str | None
    end_precise_s: float | None  # the deprecation warning's time, when it has milliseconds
    deprecation: bool
    warmup_count: int  # POSTs before the burst taken as the client warmup (0: none seen)
    warmup_pause_s: float | None
    #: without a server-info call one segment may hold several runs: the POSTs that follow a
    #: warmup-like cluster after a pause of ≥ 3 s, where a run may start
    candidates: list[int] = field(default_factory=list)


@dataclass
class Run:
    index: int
    file_id: str
    source: str | None
    endpoint: str
    start: datetime
    end: datetime
    requests: int
    warmup_requests: int
    end_anchor: str  # "GET /get_server_info" | "GET /server_info" | "last request" | "decode activity"
    deprecation_warning: bool
    confidence: float
    evidence: list[str]
    first_line: int
    end_line: int | None
    decode_tokens: float | None = None
    gen_throughput_peak: float | None = None
    decode_lines: int = 0
    segment: Segment | None = field(default=None, repr=False)
    busy_start_s: float | None = field(default=None, repr=False)  # decode-activity runs: first busy second

    @property
    def duration_s(self) -> float:
        return (self.end - self.start).total_seconds()

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("segment", "busy_start_s")}
        d["start"], d["end"] = self.start.isoformat(timespec="milliseconds"), self.end.isoformat(timespec="milliseconds")
        d["duration_s"] = round(self.duration_s, 3)
        if self.decode_tokens is not None:
            d["decode_tokens"] = round(self.decode_tokens, 1)
        return d


# ---- segments of the access log ---------------------------------------------------------------

#: the segment table's columns a Segment is made from (the others, per-POST `cluster` ids above
#: all, would only cost converting to Python)
SEGMENT_COLUMNS = ["file_id", "source", "endpoint", "s", "line_no", "end_s", "end_line", "end_path", "dep_s",
                   "dep_ms", "warmup", "w_pause", "cand"]


def segment_from_row(row: dict) -> Segment:
    candidates = list(row.get("cand") or [])
    return Segment(row["file_id"], row["source"], row["endpoint"], row["s"], row["line_no"],
                   row["end_s"], row["end_line"], row["end_path"],
                   row["dep_s"] if row["dep_ms"] else None, row["dep_s"] is not None,
                   row["warmup"], row["w_pause"], candidates)


class Segments(Sequence):
    """The segments of a store, as a table (`.table`, for vectorised filters) that gives Segment
    objects on demand: a long log can hold 100 000 of them."""

    def __init__(self, table: pl.DataFrame):
        self.table = table
        self._cache: dict[int, Segment] = {}

    def __len__(self) -> int:
        return self.table.height

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        if i not in self._cache:
            self._cache[i] = segment_from_row(self.table.select(SEGMENT_COLUMNS).row(i, named=True))
        return self._cache[i]

    def take(self, indices: list[int]) -> list[Segment]:
        """The segments at `indices`, their rows read in one pass (one `row` call each costs
        ~10 µs: a long log can make reconcile take tens of thousands)."""
        missing = [i for i in indices if i not in self._cache]
        if missing:
            for i, row in zip(missing, self.table.select(SEGMENT_COLUMNS)[missing].iter_rows(named=True)):
                self._cache[i] = segment_from_row(row)
        return [self._cache[i] for i in indices]

    def subset(self, mask: pl.Series | pl.Expr) -> "Segments":
        return Segments(self.table.filter(mask))


def find_segments(store: Store, file_id: str | None = None) -> Segments:
    return Segments(segment_table(store, file_id))


def run_segments(store: Store, file_id: str | None = None) -> Segments:
    """Segments that look like bench runs: a lone POST with no server-info call after it (the
    server's own warmup, a stray curl) is not one."""
    segs = find_segments(store, file_id)
    if segs.table.height == 0:
        return segs
    return segs.subset(pl.col("end_s").is_not_null() | (pl.col("n_posts") - pl.col("warmup") >= 2))


def split_segment(seg: Segment) -> list[Segment]:
    """A segment without a server-info call, cut before each warmup candidate (old clients)."""
    if seg.end_s is not None or len(seg.candidates) < 2:
        return [seg]
    starts = sorted(seg.candidates)
    out = []
    for i, k in enumerate(starts):
        lo = _cluster_start(seg, k)
        hi = _cluster_start(seg, starts[i + 1]) if i + 1 < len(starts) else len(seg.post_s)
        warm = k - lo
        out.append(Segment(seg.file_id, seg.source, seg.endpoint, seg.post_s[lo:hi], seg.post_lines[lo:hi],
                           None, None, None, None, False, warm, seg.post_s[k] - seg.post_s[k - 1] if warm else None))
    return out


def _cluster_start(seg: Segment, k: int) -> int:
    """First POST of the warmup cluster before POST k (POSTs under 1 s apart)."""
    i = k - 1
    while i > 0 and seg.post_s[i] - seg.post_s[i - 1] < 1.0:
        i -= 1
    return max(i, 0)


def run_from_segment(seg: Segment, index: int, burst_from: int | None = None) -> Run:
    """The run whose burst is `seg.post_s[burst_from:]` (default: after the detected warmup)."""
    k = seg.warmup_count if burst_from is None else burst_from
    first_s = seg.post_s[k]
    evidence = [f"{len(seg.post_s) - k} POST {seg.endpoint}"]
    confidence = 0.4
    if k > 0:
        pause = first_s - seg.post_s[k - 1]
        evidence.append(f"{k} warmup request(s) then a {pause:.0f} s pause")
        confidence += 0.25 if 1.0 <= pause <= WARMUP_PAUSE_S[1] else 0.1
    if seg.end_s is not None:
        end_s = seg.end_precise_s if seg.end_precise_s is not None else seg.end_s + 0.5
        anchor = f"GET {seg.end_path}"
        evidence.append(f"ended by {anchor}")
        confidence += 0.25
        if seg.deprecation:
            evidence.append("deprecation warning at the end")
            confidence += 0.05
    else:
        end_s, anchor = seg.post_s[-1] + 0.5, "last request"
        evidence.append("no server-info call: end is the last request's arrival")
    start_s = first_s + 0.5
    return Run(index=index, file_id=seg.file_id, source=seg.source, endpoint=seg.endpoint,
               start=to_datetime(start_s), end=to_datetime(max(end_s, start_s)), requests=len(seg.post_s) - k,
               warmup_requests=k, end_anchor=anchor, deprecation_warning=seg.deprecation,
               confidence=round(min(confidence, 1.0), 2), evidence=evidence, first_line=seg.post_lines[k],
               end_line=seg.end_line, segment=seg)


def detect_runs(store: Store, file_id: str | None = None, with_decode: bool = True) -> list[Run]:
    """Every benchmark-like run in the store's access log, in log order, with its decode activity;
    without access lines (only the scheduler's stderr captured), the bursts of decode activity."""
    from loglens.reconcile.activity import annotate_decode_activity, decode_bursts  # avoids an import cycle

    segs = run_segments(store, file_id)
    if len(segs) == 0:
        return decode_bursts(store, file_id)
    runs = _runs_from_table(segs)
    if with_decode:
        annotate_decode_activity(store, runs)
    return runs


def _runs_from_table(segs: Segments) -> list[Run]:
    """Run objects, built from table rows (fast for 100 000 segments); the rare segments of old
    clients that hold several runs go through split_segment."""
    t = segs.table
    several = (t["end_s"].is_null() & (t["w_all"].list.len().fill_null(0) >= 2)).to_list()
    runs: list[Run] = []
    cols = ["file_id", "source", "endpoint", "n_posts", "warmup", "w_size", "w_pause", "burst_s", "burst_line", "end_s",
            "end_line", "end_path", "dep_s", "dep_ms"]
    last_s = t["s"].list.last().to_list()
    for i, row in enumerate(t.select(cols).iter_rows(named=True)):
        if several[i]:
            runs += [run_from_segment(part, len(runs)) for part in split_segment(segs[i])]
            continue
        runs.append(_run_from_row(row, last_s[i], len(runs)))
    return runs


def _run_from_row(row: dict, last_post_s: float, index: int) -> Run:
    k = row["warmup"]
    evidence = [f"{row['n_posts'] - k} POST {row['endpoint']}"]
    confidence = 0.4
    if k > 0:
        evidence.append(f"{row['w_size']} warmup request(s) then a {row['w_pause']:.0f} s pause")
        confidence += 0.25
    if row["end_s"] is not None:
        end_s = row["dep_s"] if row["dep_ms"] else row["end_s"] + 0.5
        anchor = f"GET {row['end_path']}"
        evidence.append(f"ended by {anchor}")
        confidence += 0.25
        if row["dep_s"] is not None:
            evidence.append("deprecation warning at the end")
            confidence += 0.05
    else:
        end_s, anchor = last_post_s + 0.5, "last request"
        evidence.append("no server-info call: end is the last request's arrival")
    start_s = row["burst_s"] + 0.5
    return Run(index=index, file_id=row["file_id"], source=row["source"], endpoint=row["endpoint"],
               start=to_datetime(start_s), end=to_datetime(max(end_s, start_s)), requests=row["n_posts"] - k,
               warmup_requests=row["w_size"], end_anchor=anchor, deprecation_warning=row["dep_s"] is not None,
               confidence=round(min(confidence, 1.0), 2), evidence=evidence, first_line=row["burst_line"],
               end_line=row["end_line"])
