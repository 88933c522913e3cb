"""Two log lines glued into one (a lost newline) are rejects of their own, whichever path the
line's family parser would have taken: the Decode and Prefill fast paths take no line whose
message holds a `[` (so a glued line falls to the tolerant path, which sets it aside), and the
access fast path leaves a request whose phrase may hold a glued prefix to the slow path."""

from __future__ import annotations

import re

import polars as pl
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loglens.parsers.pipeline import LineParser
from loglens.reader import lines_frame

P = "[2026-02-19 00:27:16 TP0] "
A = "[2026-02-19 00:27:12] "
DECODE = "Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, gen throughput (token/s): 170.24, #queue-req: 0"
PREFILL = "Prefill batch, #new-seq: 1, #new-token: 256, #cached-token: 0, token usage: 0.02, #running-req: 26, #queue-req: 0"
ACCESS = 'INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK'
#: (line prefix, message, family the message gives)
HEADS = [(P, DECODE, "decode"), (P, PREFILL, "prefill"), (A, ACCESS, "http"), (P, "Load weight end. elapsed=1.0 s", "event"),
         (P, DECODE + ", new key: x", "decode"), (P, "Decode batch [12], #running-req: 1, #token: 2", "decode"),
         ("(SchedulerActor pid=1, ip=1) " + A, 'INFO:     [::1]:5 - "GET / HTTP/1.1" 200 OK', "http"),
         (A, 'INFO:     [::1]:5 - "GET / HTTP/1.1" 200 OK', "http"), ("", DECODE, "decode"),
         ("(SchedulerActor pid=1, ip=1) " + A, 'INFO:     [::1]:5 - "GET / HTTP/1.1" 2000', "http"),  # (slow path)
         ("(SchedulerActor pid=1, ip=1) " + P, "Decode batch [12], #running-req: 1", "decode"),
         (P, "Decode batch, #running-req: 27, #token: 1, x", "decode")]  # (a key: needs a tail)
#: what may follow a message (a second line's prefix, with or without its message, or a near miss)
TAILS = ["", A + ACCESS, P + DECODE, A, "[2026-02-19 00:27:1", "[12]", " [x]", P.strip(), "[2026-02-19 00:27:16.5 DP1 TP3] x",
         ": 5", P + "y: 5", "[0]: 5"]  # (the last three end a key: a glued prefix inside a key)

_PREFIX = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z_]+\d+)*\] ")


def reference(prefix: str, msg: str, family: str) -> bool:
    """Glued: a Decode, Prefill or access line whose message holds another line's prefix that
    does not start the line."""
    if family == "event":
        return False
    return any(m.start() > 0 or prefix for m in _PREFIX.finditer(msg))


def glued_lines(lines: list[str]) -> set[int]:
    out = LineParser().feed(lines_frame(("\n".join(lines) + "\n").encode(), 1, 0), final=True)
    rej = out.tables.get("rejects")
    return set() if rej is None else set(rej.filter(pl.col("family") == "glued").get_column("line_no").to_list())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(HEADS), st.sampled_from(TAILS)), min_size=1, max_size=12))
@example([((P, DECODE + ", new key: x", "decode"), A + ACCESS)])  # the glued line rides in a text value
@example([((A, ACCESS, "http"), P + DECODE)])  # ... in an access line's phrase
@example([((P, "Decode batch, #running-req: 27, #token: 1, x", "decode"), P + "y: 5")])  # ... in a key
@example([(("(SchedulerActor pid=1, ip=1) " + A, 'INFO:     [::1]:5 - "GET / HTTP/1.1" 2000', "http"), "")])  # Ray's `) [` is no glue
def test_glued_lines_are_rejects_on_every_path(rows):
    lines, want = [], set()
    for i, ((prefix, msg, family), tail) in enumerate(rows):
        text = msg + tail
        lines.append(prefix + text)
        if reference(prefix, text, family):
            want.add(i + 1)
    got = glued_lines(lines)
    assert got == want, [(n, lines[n - 1]) for n in sorted(got ^ want)]
    # many copies: the shapes seen reach the fast paths' thresholds, and the same holds
    many = lines * 300
    got_many = glued_lines(many)
    assert got_many == {n + k * len(lines) for n in want for k in range(300)}
