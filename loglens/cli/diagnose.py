"""`loglens diagnose [--store DIR] [--bench RESULTS] [--json]`"""

from __future__ import annotations

from datetime import datetime, time
from typing import Annotated, Optional

import typer

from loglens.cli.common import JsonOption, StoreOption, console, fail, open_store, print_json
from loglens.diagnose import NoDecodeData, diagnose
from loglens.diagnose.render import render

TimeOption = Annotated[
    Optional[str],
    typer.Option(help="Only Decode lines at/after (--start) or at/before (--end) this log time: "
                      "'2026-02-19 00:05:00', ISO-8601, or just '00:05:00' (the log's first day).",
                 show_default=False),
]


def _parse_when(value: str | None, flag: str) -> datetime | time | None:
    if value is None:
        return None
    v = value.strip()
    for parse in (datetime.fromisoformat, time.fromisoformat):
        try:
            return parse(v)
        except ValueError:
            continue
    fail(f"{flag} {value!r} is not a time; use '2026-02-19 00:05:00', ISO-8601, or '00:05:00'.", code=2)


def _bench_record(path: str, record: int | None):
    from loglens.bench import BenchFormatError, load_bench, select_records  # only when --bench is given

    try:
        records = select_records(load_bench(path), record)
    except (OSError, BenchFormatError) as e:
        fail(f"{e}")
    if not records:
        fail(f"{path} holds no bench_serving record.")
    if len(records) == 1:
        return records[0], ""
    # Not aligned to the log yet: the most loaded record is the fair test of "the client never
    # loaded the server" (if even it stayed far below capacity, they all did).
    best = max(records, key=lambda r: r.concurrency or 0.0)
    return best, (f"the most loaded of {len(records)} records (concurrency {best.concurrency}); "
                  "pick one with --record N")


def diagnose_cmd(
    store: StoreOption = None,
    bench: Annotated[Optional[str], typer.Option("--bench", help="bench_serving results (.jsonl, .json or a printed result block).", show_default=False)] = None,
    record: Annotated[Optional[int], typer.Option("--record", help="Which bench record (0-based; -1 the last).", show_default=False)] = None,
    start: TimeOption = None,
    end: TimeOption = None,
    predict_at: Annotated[Optional[list[float]], typer.Option("--predict-at", help="Also predict decode throughput at this batch size (repeatable).", show_default=False)] = None,
    as_json: JsonOption = False,
) -> None:
    """What limits this server: a step-time model fitted from the Decode lines, and ranked findings with their evidence."""
    st = open_store(store)
    t0, t1 = _parse_when(start, "--start"), _parse_when(end, "--end")
    bench_rec, note = _bench_record(bench, record) if bench else (None, "")
    try:
        report = diagnose(st, start=t0, end=t1, bench=bench_rec, bench_note=note, predict_at=predict_at)
    except NoDecodeData as e:
        fail(f"{e}; nothing to diagnose. Ingest a server log with Decode batch lines (`loglens ingest LOG`), or widen --start/--end.")
    if as_json:
        print_json(report)
    else:
        render(report, console)


def register(app: typer.Typer) -> None:
    app.command("diagnose")(diagnose_cmd)
