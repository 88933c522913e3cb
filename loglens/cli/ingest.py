"""`loglens ingest LOG... [--store DIR]`"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from loglens.cli.common import (
    JsonOption,
    StoreOption,
    console,
    fail,
    guarded,
    print_json,
    progress_enabled,
)
from loglens.ingest import IngestError, expand_paths, ingest_paths
from loglens.reader import size_hint
from loglens.store import Store


def ingest(
    logs: Annotated[list[str], typer.Argument(help="Log files, directories or .gz files.", show_default=False)],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Parse server logs into the store (idempotent: re-ingesting adds only new lines)."""
    st = Store(store)
    try:
        files = expand_paths(logs, exclude=st.path)
    except IngestError as e:
        fail(f"{e}. Pass existing log files or directories.")
    if not files:
        fail("no log files found in " + ", ".join(logs) + ".")
    try:
        if progress_enabled() and not as_json:
            from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn  # (only on a terminal: ~15 ms)

            total = sum(size_hint(f) for f in files)  # (a .gz file's from its trailer: reading it twice to count would cost a pass)
            with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(), console=console, transient=True) as bar:
                task = bar.add_task("ingesting", total=total)
                reports = ingest_paths(files, st, on_progress=lambda n: bar.advance(task, n))
        else:
            reports = ingest_paths(files, st)
    except IngestError as e:
        fail(str(e))
    if as_json:
        print_json({"store": str(st.path), "files": [r.__dict__ for r in reports]})
        return
    t = Table(title=f"ingested into {st.path}", title_justify="left")
    for col in ("file", "status", "lines", "decode", "prefill", "http", "events", "rejects"):
        t.add_column(col, justify="right" if col not in ("file", "status") else "left")
    for r in reports:
        t.add_row(
            r.source,
            r.status + (f" ({r.note})" if r.note else ""),
            f"{r.lines:,}",
            *[f"{r.rows.get(k, 0):,}" for k in ("decode", "prefill", "http", "events", "rejects")],
        )
    console.print(t)
    unknown = {k: v for r in reports for k, v in r.unknown_keys.items()}
    if unknown:
        console.print("new batch-line keys kept in the `extra` column: " + ", ".join(f"{k!r} ×{v}" for k, v in unknown.items()))
    rejected = sum(r.rows.get("rejects", 0) for r in reports)
    if rejected:
        console.print(f"{rejected} line(s) looked like a known kind but could not be parsed: see `loglens summary`.")


def register(app: typer.Typer) -> None:
    app.command("ingest")(guarded(ingest, "ingest"))
