"""Benchmark runs in a server log: where each bench_serving invocation starts and ends.

bench_serving records no wall clock (format spec §5.1), so a run is found from what it does to
the server (§5.5, §6.1, §8.6): a lone warmup request to the bench endpoint, a pause of ≥ 1 s
(warmup latency + a fixed 1.0 s sleep), the burst of measured POSTs to the same endpoint, then
`GET /get_server_info` (≤ v0.5.9 clients) or `GET /server_info` — the call that ends the
client's `duration` — which servers ≥ v0.5.6 also mark with a deprecation warning.

Detection, vectorised over the access log (a 1 GiB log holds millions of POSTs):

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
(or the deprecation warning's millisecond time, when the server logs milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from loglens.store import Store

GEN_ENDPOINTS = ("/generate", "/v1/completions", "/v1/chat/completions")
INFO_PATHS = ("/get_server_info", "/server_info")
CLIENT_START_PATHS = ("/v1/models",)
MAX_WARMUP_POSTS = 8
WARMUP_PAUSE_S = (1.0, 120.0)
STRONG_PAUSE_S = 3.0  # without server-info calls, a warmup must also follow a pause this long
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


# ---- reading the store ------------------------------------------------------------------------

def _markers(store: Store, file_id: str | None) -> pl.DataFrame:
    """Access lines and events that delimit runs, in log order: kind P (generation POST),
    I (server-info call), B (a boundary: start-up, ready, client start), D (deprecation)."""
    base = pl.col("path").str.split("?").list.first()
    http = (store.scan("http")
            .select("file_id", "source", "line_no", "ts", "method", "path")
            .filter(pl.col("method").is_in(["POST", "GET"])))
    if file_id:
        http = http.filter(pl.col("file_id") == file_id)
    http = http.with_columns(path=base).filter(pl.col("path").is_in(GEN_ENDPOINTS + INFO_PATHS + CLIENT_START_PATHS))
    http = http.with_columns(kind=pl.when((pl.col("method") == "POST") & pl.col("path").is_in(GEN_ENDPOINTS)).then(pl.lit("P"))
                             .when((pl.col("method") == "GET") & pl.col("path").is_in(INFO_PATHS)).then(pl.lit("I"))
                             .when(pl.col("method") == "GET").then(pl.lit("B")))
    http = http.filter(pl.col("kind").is_not_null()).select("file_id", "source", "line_no", "ts", "path", "kind")
    ev = (store.scan("events").select("file_id", "source", "line_no", "ts", "kind", "message")
          .filter(pl.col("kind").is_in(["server_args", "ready", "deprecation"])))
    if file_id:
        ev = ev.filter(pl.col("file_id") == file_id)
    ev = ev.filter((pl.col("kind") != "deprecation") | pl.col("message").str.contains("server_info"))
    ev = ev.select("file_id", "source", "line_no", "ts", pl.lit(None, pl.String).alias("path"),
                   pl.when(pl.col("kind") == "deprecation").then(pl.lit("D")).otherwise(pl.lit("B")).alias("kind"))
    both = pl.concat([http, ev]).collect()
    return both.sort(["file_id", "line_no"]).with_columns(
        s=pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6,
        ms=(pl.col("ts").dt.epoch("us") % 1_000_000) != 0,
    )


def find_segments(store: Store, file_id: str | None = None) -> list[Segment]:
    m = _markers(store, file_id)
    if m.height == 0:
        return []
    kind = pl.col("kind")
    prev_kind = kind.shift(1).over("file_id")
    # a new segment starts after an info-call group ends, and at every boundary
    m = m.with_columns(_cut=((prev_kind == "I") & (kind != "I") & (kind != "D")) | (kind == "B"))
    m = m.with_columns(seg=pl.col("_cut").cast(pl.Int64).cum_sum())
    posts = m.filter(kind == "P")
    if posts.height == 0:
        return []
    dominant = (posts.group_by("seg", "path").len().sort(["seg", "len", "path"], descending=[False, True, False])
                .group_by("seg", maintain_order=True).first().select("seg", pl.col("path").alias("endpoint")))
    posts = posts.join(dominant, on="seg").filter(pl.col("path") == pl.col("endpoint"))
    ends = (m.filter(kind == "I").group_by("seg").agg(pl.col("s").first().alias("end_s"),
                                                        pl.col("line_no").first().alias("end_line"),
                                                        pl.col("path").first().alias("end_path")))
    deps = (m.filter(kind == "D").group_by("seg").agg(pl.col("s").first().alias("dep_s"),
                                                        pl.col("ms").first().alias("dep_ms")))
    # warmup clusters: POSTs < 1 s apart (same second) form a cluster
    posts = posts.with_columns(gap=pl.col("s").diff().over("seg").fill_null(float("inf")))
    posts = posts.with_columns(cluster=(pl.col("gap") >= 1.0).cast(pl.Int64).cum_sum().over("seg"))
    clusters = (posts.group_by("seg", "cluster").agg(pl.len().alias("size"), pl.col("gap").first().alias("before"),
                                                      pl.col("s").first().alias("c_start"))
                .sort("seg", "cluster")
                .with_columns(after=pl.col("before").shift(-1).over("seg")))
    lo, hi = WARMUP_PAUSE_S
    cand = clusters.filter((pl.col("size") <= MAX_WARMUP_POSTS) & pl.col("after").is_between(lo, hi)
                           & (pl.col("before") >= pl.col("after")))
    best = (cand.sort(["seg", "before", "cluster"], descending=[False, True, False])
            .group_by("seg", maintain_order=True).first().select("seg", pl.col("cluster").alias("w_cluster"),
                                                                  pl.col("after").alias("w_pause")))
    strong = (cand.filter(pl.col("before") >= STRONG_PAUSE_S).group_by("seg")
              .agg(pl.col("cluster").sort().alias("w_all")))
    per_seg = (posts.group_by("seg", maintain_order=True)
               .agg(pl.col("file_id").first(), pl.col("source").first(), pl.col("endpoint").first(),
                    pl.col("s"), pl.col("line_no"), pl.col("cluster"))
               .join(ends, on="seg", how="left").join(deps, on="seg", how="left").join(best, on="seg", how="left")
               .join(strong, on="seg", how="left"))
    out = []
    for row in per_seg.iter_rows(named=True):
        seg = _segment(row, 0, len(row["s"]), row["w_cluster"], row["w_pause"])
        clusters = row["cluster"]
        seg.candidates = [clusters.index(c + 1) for c in (row["w_all"] or []) if c + 1 in clusters]
        out.append(seg)
    return out


def _segment(row: dict, lo: int, hi: int, w_cluster: int | None, w_pause: float | None) -> Segment:
    """The segment of POSTs lo..hi-1 of a segment row, with warmup cluster `w_cluster`."""
    clusters = row["cluster"][lo:hi]
    warmup = sum(1 for c in clusters if w_cluster is not None and c <= w_cluster)
    if warmup == hi - lo:
        warmup = 0  # nothing after it: a lone request, not a warmup
    return Segment(row["file_id"], row["source"], row["endpoint"], row["s"][lo:hi], row["line_no"][lo:hi],
                   row["end_s"], row["end_line"], row["end_path"],
                   row["dep_s"] if row["dep_ms"] else None, row["dep_s"] is not None,
                   warmup, w_pause if warmup else None)


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


def run_segments(store: Store, file_id: str | None = None) -> list[Segment]:
    """Segments that look like bench runs: a lone POST with no server-info call after it (the
    server's own warmup, a stray curl) is not one."""
    return [s for s in find_segments(store, file_id) if s.end_s is not None or len(s.post_s) - s.warmup_count >= 2]


def detect_runs(store: Store, file_id: str | None = None, with_decode: bool = True) -> list[Run]:
    """Every benchmark-like run in the store's access log, in log order, with its decode activity;
    without access lines (only the scheduler's stderr captured), the bursts of decode activity."""
    from loglens.reconcile.activity import annotate_decode_activity, decode_bursts  # avoids an import cycle

    segs = [part for seg in run_segments(store, file_id) for part in split_segment(seg)]
    runs = [run_from_segment(seg, i) for i, seg in enumerate(segs)]
    if not runs:
        return decode_bursts(store, file_id)
    if with_decode:
        annotate_decode_activity(store, runs)
    return runs
