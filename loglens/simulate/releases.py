"""Which SGLang release prints what: one `Release` row per supported line shape.

The facts come from sglang-formats.md §1-§6 (decode shapes D3/D8/D10/D12/D13, prefill shapes
P4/P5/P7/P9/P11/P12-P14, rank-prefix rules, access-line timestamps, retraction wording, the
bench client's server-info endpoint).  The writers in `formats.py` only read these flags, so a
new release is one new row here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def version_key(v: str) -> tuple[int, int, int, int]:
    """'v0.5.4.post1' -> (0, 5, 4, 1); 'v0.5.9+' -> (0, 5, 9, 0)."""
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?", v.strip())
    if not m:
        raise ValueError(f"not a release: {v!r}")
    return (int(m[1]), int(m[2]), int(m[3]), int(m[4] or 0))


@dataclass(frozen=True)
class Release:
    name: str
    ts: str  # "time" (%H:%M:%S) or "date" (%Y-%m-%d %H:%M:%S)
    tp_always: bool  # rank prefix prints TP even when tp_size == 1
    decode_sep: str  # "Decode batch" + ". " or ", "
    decode_trail: str  # "" or ", "
    decode_graph: bool  # `cuda graph: B` field
    spec: str  # "none" | "len" | "len_rate": speculative fields available
    prefill_sep: str
    prefill_hit_rate: bool  # cumulative `cache hit rate: F%`
    prefill_usage: bool  # `token usage: F`
    prefill_trail: str
    prefill_tail: str  # "" | "thr_graph" (v0.5.9) | "graph_thr" (v0.5.10) | "pending_graph_thr" (v0.5.11+)
    prefill_after_forward: bool  # logged when the result is processed (v0.5.9+), else when scheduled
    queue_counts_chunked: bool  # prefill #queue-req includes the in-flight chunked request
    access_ts: bool  # uvicorn access lines carry `[date] ` (v0.3.4+)
    retract: str  # "oom" (< v0.4.7) | "full" (v0.4.7+) | "gained" (v0.5.7+)
    deprecates_get_server_info: bool  # server >= v0.5.6
    log_ms_ok: bool  # SGLANG_LOG_MS exists (v0.5.6+)

    @property
    def version(self) -> str:
        return self.name.lstrip("v")

    @property
    def key(self) -> tuple[int, int, int, int]:
        return version_key(self.name)



_OLD = dict(decode_sep=". ", decode_trail="", decode_graph=False, spec="none", prefill_sep=". ",
            prefill_hit_rate=True, prefill_usage=True, prefill_trail="", prefill_tail="",
            prefill_after_forward=False, queue_counts_chunked=True, access_ts=True, retract="oom",
            deprecates_get_server_info=False, log_ms_ok=False, tp_always=True, ts="date")

RELEASES: dict[str, Release] = {
    r.name: r
    for r in [
        Release("v0.2.14", **{**_OLD, "ts": "time", "prefill_usage": False, "access_ts": False}),
        Release("v0.3.4", **_OLD),
        Release("v0.4.1", **_OLD),
        Release("v0.4.6.post4", **{**_OLD, "tp_always": False, "decode_graph": True, "spec": "len",
                                   "prefill_hit_rate": False, "queue_counts_chunked": False}),
        Release("v0.4.9.post3", **{**_OLD, "tp_always": False, "decode_graph": True, "spec": "len",
                                   "decode_trail": ", ", "prefill_hit_rate": False, "prefill_trail": ", ",
                                   "queue_counts_chunked": False, "retract": "full"}),
        Release("v0.5.4.post1", **{**_OLD, "tp_always": False, "decode_graph": True, "spec": "len_rate",
                                   "decode_sep": ", ", "decode_trail": ", ", "prefill_sep": ", ",
                                   "prefill_hit_rate": False, "prefill_trail": ", ",
                                   "queue_counts_chunked": False, "retract": "full"}),
        Release("v0.5.9", **{**_OLD, "tp_always": False, "decode_graph": True, "spec": "len_rate",
                             "decode_sep": ", ", "prefill_sep": ", ", "prefill_hit_rate": False,
                             "prefill_tail": "thr_graph", "prefill_after_forward": True,
                             "queue_counts_chunked": False, "retract": "gained",
                             "deprecates_get_server_info": True, "log_ms_ok": True}),
        Release("v0.5.10", **{**_OLD, "tp_always": False, "decode_graph": True, "spec": "len_rate",
                              "decode_sep": ", ", "prefill_sep": ", ", "prefill_hit_rate": False,
                              "prefill_tail": "graph_thr", "prefill_after_forward": True,
                              "queue_counts_chunked": False, "retract": "gained",
                              "deprecates_get_server_info": True, "log_ms_ok": True}),
        Release("v0.5.11", **{**_OLD, "tp_always": False, "decode_graph": True, "spec": "len_rate",
                              "decode_sep": ", ", "prefill_sep": ", ", "prefill_hit_rate": False,
                              "prefill_tail": "pending_graph_thr", "prefill_after_forward": True,
                              "queue_counts_chunked": False, "retract": "gained",
                              "deprecates_get_server_info": True, "log_ms_ok": True}),
    ]
}

def client_server_info_path(bench_version: str) -> str | None:
    """Which end-of-run call a bench_serving of this version makes (None: none before v0.4.3.post3)."""
    k = version_key(bench_version)
    if k < (0, 4, 3, 3):
        return None
    return "/get_server_info" if k < (0, 5, 10, 0) else "/server_info"


ALIASES = {"v0.5.9+": "v0.5.9", "current": "v0.5.9", "latest": "v0.5.11", "v0.5.11+": "v0.5.11"}


def get_release(name: str) -> Release:
    """Look a release up by name ('v0.5.9', '0.5.9', 'v0.5.9+')."""
    n = name if name.startswith("v") else "v" + name
    n = ALIASES.get(n, n)
    try:
        return RELEASES[n]
    except KeyError:
        raise ValueError(f"unsupported release {name!r}; choose from {sorted(RELEASES)}") from None
