"""Which part of the log to diagnose, and which bench record speaks for the client there.

A window comes from `--start/--end`, from `--run N` (loglens.runs, numbered from 1 as
`loglens runs` prints them), or from the bench record being diagnosed (`--record K`, or the only
record of the file), placed in the log by loglens.reconcile's alignment.  Without any of them the
whole log is diagnosed and, when several bench records are given, the most loaded one stands for
the client: if even it stayed far below the server's capacity, they all did.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import TYPE_CHECKING

from loglens.store import Store

if TYPE_CHECKING:
    from loglens.bench_records import BenchRecord

#: run bounds are access-log seconds ± 0.5 s; Decode timestamps are floored to the second
RUN_SLACK = timedelta(seconds=0.5)


class WindowError(Exception):
    """The requested window or record does not exist."""


@dataclass
class Selection:
    start: datetime | time | None = None
    end: datetime | time | None = None
    label: str | None = None
    bench: BenchRecord | None = None
    bench_note: str = ""


def select(store: Store, *, start: datetime | time | None = None, end: datetime | time | None = None,
           run: int | None = None, bench_path: str | None = None, record: int | None = None) -> Selection:
    if run is not None and (start is not None or end is not None):
        raise WindowError("give either --run or --start/--end, not both")
    sel = Selection(start, end)
    if run is not None:
        sel.start, sel.end, sel.label = _run_window(store, run)
    if bench_path is None:
        return sel
    every = _load(bench_path)
    placed = _aligned_windows(store, every)  # all records together: alignment keeps their order
    records = _select(every, record)
    windows = [placed[r.index] for r in records]
    if isinstance(sel.start, datetime) or isinstance(sel.end, datetime):
        best = _overlapping(records, windows, sel.start, sel.end)
        if best is not None:
            sel.bench, sel.bench_note = best, "the record aligned with this window"
            return sel
    if len(records) == 1 or record is not None:
        rec, win = records[0], windows[0]
        sel.bench = rec
        if win is not None and sel.start is None and sel.end is None:
            sel.start, sel.end = win
            sel.label = f"bench record {rec.index + 1}, placed in the log by its requests and duration"
            sel.bench_note = "the window is this record's run"
        elif win is None:
            sel.bench_note = "this record could not be placed in the log; the whole log is diagnosed"
        return sel
    sel.bench = max(records, key=lambda r: r.concurrency or 0.0)
    sel.bench_note = (f"the most loaded of {len(records)} records (concurrency {sel.bench.concurrency or 0:.1f}); "
                      "pick one with --record N or a run with --run N")
    return sel


def _run_window(store: Store, run: int) -> tuple[datetime, datetime, str]:
    from loglens.runs import detect_runs

    runs = detect_runs(store, with_decode=False)
    if not runs:
        raise WindowError("--run needs benchmark runs in the access log, and none was found (see `loglens runs`)")
    if not 1 <= run <= len(runs):
        raise WindowError(f"--run {run} is out of range: the log holds {len(runs)} run(s), numbered 1..{len(runs)} "
                          "(see `loglens runs`)")
    r = runs[run - 1]
    label = f"run {run} of {len(runs)}: {r.requests} requests to {r.endpoint}"
    return r.start - RUN_SLACK, r.end + RUN_SLACK, label


def _load(path: str) -> list:
    from loglens.bench import BenchFormatError, load_bench

    try:
        records = load_bench(path)
    except (OSError, BenchFormatError) as e:
        raise WindowError(str(e)) from None
    if not records:
        raise WindowError(f"{path} holds no bench_serving record")
    return records


def _select(records: list, record: int | None) -> list:
    from loglens.bench import BenchFormatError, select_records

    try:
        return select_records(records, record)
    except BenchFormatError as e:
        raise WindowError(str(e)) from None


def _aligned_windows(store: Store, records: list) -> list[tuple[datetime, datetime] | None]:
    from loglens.reconcile.align import align
    from loglens.runs import run_segments, to_datetime

    out = []
    for al in align(records, run_segments(store)):
        out.append(None if al is None else (to_datetime(al.start_s), to_datetime(al.end_s)))
    return out


def _overlapping(records: list, windows: list, start, end):
    """The record whose aligned window overlaps [start, end] the most."""
    lo = start if isinstance(start, datetime) else datetime.min
    hi = end if isinstance(end, datetime) else datetime.max
    best, best_s = None, 0.0
    for rec, win in zip(records, windows):
        if win is None:
            continue
        s = (min(hi, win[1]) - max(lo, win[0])).total_seconds()
        if s > best_s:
            best, best_s = rec, s
    return best
