"""`loglens diagnose [--store DIR] [--bench RESULTS] [--json]`"""

from __future__ import annotations

from datetime import datetime, time
from typing import Annotated, Optional

import typer

from loglens.cli.common import (
    JsonOption,
    StoreOption,
    console,
    fail,
    guarded,
    open_store,
    print_json,
)

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


def diagnose_cmd(
    store: StoreOption = None,
    bench: Annotated[Optional[str], typer.Option("--bench", help="bench_serving results (.jsonl, .json or a printed result block): the client's side of the load.", show_default=False)] = None,
    record: Annotated[Optional[int], typer.Option("--record", help="Diagnose the run of this bench record (0-based; -1 the last).", show_default=False)] = None,
    run: Annotated[Optional[int], typer.Option("--run", help="Only this benchmark run (numbered as `loglens runs` prints them).", show_default=False)] = None,
    start: TimeOption = None,
    end: TimeOption = None,
    predict_at: Annotated[Optional[list[float]], typer.Option("--predict-at", help="Also predict decode throughput at this batch size (repeatable).", show_default=False)] = None,
    as_json: JsonOption = False,
) -> None:
    """What limits this server: a step-time model fitted from the Decode lines, and ranked findings with their evidence."""
    # here, not at the top: other commands (ingest above all) do not load the model fitting
    from loglens.diagnose import NoDecodeData, diagnose
    from loglens.diagnose.render import render
    from loglens.diagnose.window import WindowError, select

    st = open_store(store)
    if record is not None and bench is None:
        fail("--record picks a record of --bench RESULTS; pass --bench too.", code=2)
    if run is not None and (start is not None or end is not None):
        fail("give either --run N or --start/--end, not both.", code=2)
    try:
        sel = select(st, start=_parse_when(start, "--start"), end=_parse_when(end, "--end"), run=run,
                     bench_path=bench, record=record)
        report = diagnose(st, start=sel.start, end=sel.end, window_label=sel.label, bench=sel.bench,
                          bench_note=sel.bench_note, predict_at=predict_at)
    except WindowError as e:
        fail(f"{e}.")
    except NoDecodeData as e:
        fail(f"{e}; nothing to diagnose. Ingest a server log with Decode batch lines (`loglens ingest LOG`), "
             "or widen the window.")
    if as_json:
        print_json(report)
    else:
        render(report, console)


def register(app: typer.Typer) -> None:
    app.command("diagnose")(guarded(diagnose_cmd, "diagnose"))
