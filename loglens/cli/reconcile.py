"""`loglens reconcile --bench RESULTS [LOG...] [--store DIR] [--json] [--record N] [--quote X] [--start TS --end TS]`

Output: the terminal report, or with `--json` one JSON object per bench record — pretty-printed
when there is one record, one compact object per line (JSON Lines) when there are several.
Exit 0 when at least one record was reconciled (others print as `{record, error}`), 1 when
none could be, 2 for bad flags.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Optional

import polars as pl
import typer

from loglens.cli.common import (
    JsonOption,
    StoreOption,
    console,
    err_console,
    fail,
    guarded,
    open_store,
    print_json,
)
from loglens.runs import to_seconds


def _parse_time(value: str | None, flag: str, store) -> float | None:
    """ISO date-time, or a bare time of day (the log's first date is used)."""
    if value is None:
        return None
    text = value.strip().replace("T", " ")
    try:
        return to_seconds(datetime.fromisoformat(text))
    except ValueError:
        pass
    for fmt in ("%H:%M:%S.%f", "%H:%M:%S", "%H:%M"):
        try:
            clock = datetime.strptime(text, fmt).time()
        except ValueError:
            continue
        first = store.scan("decode").select(pl.col("ts").min()).collect().item()
        if first is None:
            fail(f"{flag} {value!r} is a time of day but the log has no dates; give a full date-time.", 2)
        return to_seconds(datetime.combine(first.date(), clock))
    fail(f"{flag} {value!r} is not a time: use e.g. 2026-02-19T00:01:54 or 00:01:54.5", 2)


def reconcile(
    bench: Annotated[str, typer.Option("--bench", help="bench_serving results: .jsonl, .json or a saved result block.", show_default=False)],
    logs: Annotated[Optional[list[str]], typer.Argument(help="Server log(s) to ingest first (optional).", show_default=False)] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
    record: Annotated[Optional[int], typer.Option("--record", help="Only this record (0-based; -1 = last).")] = None,
    quote: Annotated[Optional[float], typer.Option("--quote", help="Explain this server figure (tok/s) instead of the peak.")] = None,
    start: Annotated[Optional[str], typer.Option("--start", help="Window start (log local time); overrides alignment.")] = None,
    end: Annotated[Optional[str], typer.Option("--end", help="Window end (log local time); overrides alignment.")] = None,
) -> None:
    """Align each bench_serving record with the server log and explain the throughput gap.

    --json prints one JSON object per record: pretty when there is one, one per line (JSON Lines) when there are several. Exit 0 if any record was reconciled, 1 if none could be.
    """  # noqa: E501  (one line: the help view wraps it itself)
    from loglens.bench import BenchFormatError, load_bench, select_records
    from loglens.reconcile.core import ReconcileError
    from loglens.reconcile.core import reconcile as run_reconcile
    from loglens.reconcile.render import render, render_failure

    if quote is not None and not quote > 0:
        fail(f"--quote must be a positive tok/s figure, not {quote}.", 2)
    try:
        records = load_bench(bench)
    except FileNotFoundError:
        fail(f"bench results file not found: {bench}. Pass the .jsonl that bench_serving wrote.")
    except (BenchFormatError, OSError) as e:
        fail(f"{e}.")
    try:
        records = select_records(records, record)
    except BenchFormatError as e:
        fail(f"{e}.", 2)
    if logs:
        from loglens.ingest import IngestError, ingest_paths
        from loglens.store import Store

        try:
            ingest_paths(logs, Store(store))
        except IngestError as e:
            fail(f"{e}. Pass an existing server log.")
    st = open_store(store)
    start_s, end_s = _parse_time(start, "--start", st), _parse_time(end, "--end", st)
    if start_s is not None and end_s is not None and end_s <= start_s:
        fail("--end must be after --start.", 2)
    try:
        reports = run_reconcile(st, records, quote=quote, start_s=start_s, end_s=end_s)
    except ReconcileError as e:
        fail(str(e))
    dicts = [r.to_dict() for r in reports]
    ok = [d for d in dicts if "error" not in d]
    if as_json:
        if len(dicts) == 1:
            print_json(dicts[0])
        else:
            for d in dicts:
                print_json(d, indent=None)
    else:
        for d in dicts:
            (render_failure if "error" in d else render)(d, console)
    if not ok:
        if as_json:  # the objects above already say why; one line for the terminal too
            err_console.print(f"Error: {dicts[0]['error'] if len(dicts) == 1 else 'no record could be reconciled'}", markup=False)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("reconcile")(guarded(reconcile, "reconcile"))
