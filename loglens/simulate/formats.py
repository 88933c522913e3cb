"""Line writers: turn the scheduler's stats and the HTTP events into text, per release.

Every writer takes the numbers and a `Release` row and returns the exact text SGLang (or
uvicorn) would print, following sglang-formats.md §1 (timestamp + rank prefix), §2 (Decode
shapes), §3 (Prefill shapes) and §6 (access lines, retraction wording).  Nothing here decides
*what* happens, only how it is spelled.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .releases import Release
from .records import DecodeStat, PrefillStat, RetractStat


class Clock:
    """Maps simulation seconds to the log's local wall clock."""

    def __init__(self, start: datetime, release: Release, log_ms: bool = False):
        self.start, self.release = start, release
        self.log_ms = log_ms and release.log_ms_ok
        self._fmt = "%H:%M:%S" if release.ts == "time" else "%Y-%m-%d %H:%M:%S"

    def at(self, t: float) -> datetime:
        return self.start + timedelta(seconds=t)

    def stamp(self, t: float, ms: bool | None = None) -> str:
        dt = self.at(t)
        s = dt.strftime(self._fmt)
        if self.log_ms if ms is None else ms:
            s += f".{dt.microsecond // 1000:03d}"
        return s

    def access_stamp(self, t: float) -> str:
        """uvicorn's formatter: always `%Y-%m-%d %H:%M:%S`, never milliseconds (§6.1)."""
        return self.at(t).strftime("%Y-%m-%d %H:%M:%S")


def rank_prefix(release: Release, dp_rank: int | None, tp_rank: int, tp_size: int) -> str:
    """' DP1 TP0', ' TP0' or '' (§1.2): TP printed always on old releases, only if tp>1 on new."""
    parts = []
    if dp_rank is not None:
        parts.append(f"DP{dp_rank}")
    if release.tp_always or tp_size > 1:
        parts.append(f"TP{tp_rank}")
    return (" " + " ".join(parts)) if parts else ""


def sglang_line(clock: Clock, t: float, prefix: str, message: str) -> str:
    return f"[{clock.stamp(t)}{prefix}] {message}"


def _spec_part(release: Release, accept_len: float | None, accept_rate: float | None) -> str:
    if accept_len is None or release.spec == "none":
        return ""
    if release.spec == "len":
        return f"accept len: {accept_len:.2f}, "
    return f"accept len: {accept_len:.2f}, accept rate: {accept_rate or 0.0:.2f}, "


def decode_body(release: Release, s: DecodeStat) -> str:
    body = f"Decode batch{release.decode_sep}#running-req: {s.running}, #token: {s.token}, token usage: {s.usage:.2f}, "
    body += _spec_part(release, s.accept_len, s.accept_rate)
    if release.decode_graph:
        body += f"cuda graph: {s.graph}, "
    body += f"gen throughput (token/s): {s.gen:.2f}, #queue-req: {s.queue}{release.decode_trail}"
    return body


def prefill_body(release: Release, s: PrefillStat) -> str:
    body = (f"Prefill batch{release.prefill_sep}#new-seq: {s.new_seq}, #new-token: {s.new_token}, "
            f"#cached-token: {s.cached_token}, ")
    if release.prefill_hit_rate:
        body += f"cache hit rate: {s.hit_rate:.2f}%, "
    if release.prefill_usage:
        body += f"token usage: {s.usage:.2f}, "
    body += f"#running-req: {s.running}, #queue-req: {s.queue}"
    tail = release.prefill_tail
    if tail == "thr_graph":
        body += f", input throughput (token/s): {s.in_thr:.2f}, cuda graph: {s.graph}"
    elif tail == "graph_thr":
        body += f", cuda graph: {s.graph}, input throughput (token/s): {s.in_thr:.2f}"
    elif tail == "pending_graph_thr":
        body += f", #pending-token: {s.pending_token}, cuda graph: {s.graph}, input throughput (token/s): {s.in_thr:.2f}"
    return body + release.prefill_trail


def retract_body(release: Release, s: RetractStat) -> str:
    if release.retract == "oom":
        return (f"Decode out of memory happened. #retracted_reqs: {s.n}, "
                f"#new_token_ratio: {s.ratio_before:.4f} -> {s.ratio_after:.4f}")
    gained = f"#new_tokens_gained: {s.gained}, " if release.retract == "gained" else ""
    return (f"KV cache pool is full. Retract requests. #retracted_reqs: {s.n}, {gained}"
            f"#new_token_ratio: {s.ratio_before:.4f} -> {s.ratio_after:.4f}")


HTTP_PHRASES = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}


def access_line(clock: Clock, t: float, addr: str, port: int | str, method: str, path: str, status: int = 200) -> str:
    """uvicorn access line; no timestamp before v0.3.4 (§6.1)."""
    body = f'INFO:     {addr}:{port} - "{method} {path} HTTP/1.1" {status} {HTTP_PHRASES.get(status, "")}'.rstrip()
    return f"[{clock.access_stamp(t)}] {body}" if clock.release.access_ts else body


def uvicorn_line(clock: Clock, t: float, level: str, message: str) -> str:
    """uvicorn's default formatter (`levelprefix` padded to 9 characters + a space)."""
    body = f"{(level + ':').ljust(9)} {message}"
    return f"[{clock.access_stamp(t)}] {body}" if clock.release.access_ts else body
