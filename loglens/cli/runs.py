"""`loglens runs [--store DIR] [--json]`: the benchmark runs found in the log."""

from __future__ import annotations

import json
import sys

import typer
from rich.table import Table

from loglens.cli.common import (
    JsonOption,
    StoreOption,
    console,
    fail,
    guarded,
    open_store,
    print_json,
)

SHOWN = 50  # a terminal table of 100 000 runs helps nobody


def runs(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Benchmark runs in the server log: warmup, burst, server-info call, and their decode activity."""
    from loglens.runs import detect_runs

    st = open_store(store)
    found = detect_runs(st)
    if not found:
        fail(f"no benchmark run found in the access log of {st.path}: a run is a warmup POST, a pause, a burst "
             f"of POSTs and GET /get_server_info. Were uvicorn's access lines (stdout) captured in the log?")
    if as_json:
        doc = {"store": str(st.path), "runs": [r.to_dict() for r in found]}
        if len(found) <= 100:
            print_json(doc)
        else:  # compact: the C encoder, ~10x faster than indenting 100 000 runs
            sys.stdout.write(json.dumps(doc, separators=(",", ":"), default=str, allow_nan=False) + "\n")
        return
    t = Table(title=f"benchmark runs in {st.path}", title_justify="left")
    for col in ("#", "start", "end", "s", "endpoint", "reqs", "decode tok", "peak tok/s", "conf"):
        t.add_column(col, justify="left" if col in ("start", "end", "endpoint") else "right")
    for r in found[:SHOWN]:
        t.add_row(str(r.index + 1), r.start.strftime("%Y-%m-%d %H:%M:%S"), r.end.strftime("%H:%M:%S"),
                  f"{r.duration_s:.0f}", r.endpoint, str(r.requests),
                  "–" if r.decode_tokens is None else f"{r.decode_tokens:,.0f}",
                  "–" if r.gen_throughput_peak is None else f"{r.gen_throughput_peak:.2f}",
                  f"{r.confidence:.2f}")
    console.print(t)
    for r in found[:SHOWN]:
        console.print(f"run {r.index + 1}: " + "; ".join(r.evidence))
    if len(found) > SHOWN:
        console.print(f"… and {len(found) - SHOWN} more runs: use --json for all of them")
    console.print("start/end: access-log seconds (±0.5 s); `loglens reconcile --bench` places each run exactly "
                  "from its recorded duration.")


def register(app: typer.Typer) -> None:
    app.command("runs")(guarded(runs, "runs"))
