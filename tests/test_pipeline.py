"""`LineParser.feed` on frames the reader does not make (a follower's or a library user's):
line numbers with gaps give the same rows as consecutive ones."""

from __future__ import annotations

import polars as pl

from loglens.parsers.pipeline import LineParser

LINES = [
    "[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, gen throughput (token/s): 170.24, #queue-req: 0",
    "[2026-02-19 00:27:17 TP0] Decode batch, #running",
    "[2026-02-19 00:27:18] INFO:     127.0.0.1:33670 - \"POST /generate HTTP/1.1\" 200 OK",
    "[2026-02-19 00:27:19] INFO:     127.0.0.1:33670 - \"POST /gen",
    "[2026-02-19 00:27:20 TP0] Prefill batch, #new-seq: 1[2026-02-19 00:27:21] INFO:     x",
]


def test_rejects_keep_their_time_whatever_the_line_numbers():
    got = {}
    for name, numbers in {"consecutive": [1, 2, 3, 4, 5], "gaps": [10, 20, 30, 40, 50]}.items():
        frame = pl.DataFrame({"line_no": numbers, "line": LINES}, schema={"line_no": pl.Int64, "line": pl.String})
        rej = LineParser().feed(frame, final=True).tables["rejects"].sort("line_no")
        got[name] = rej.select("family", "reason", pl.col("ts").dt.second())
    assert got["consecutive"].get_column("ts").to_list() == [17, 19, 20]
    assert got["consecutive"].equals(got["gaps"])
