"""`loglens tail LOG [--store DIR] [--no-view] [--json-lines] [--interval 0.5]`"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live

from loglens.cli.common import StoreOption, console, err_console, fail, guarded
from loglens.follow.compact import MIN_FILES
from loglens.store import Store


def _iso(value: object) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _json_line(status: dict) -> None:
    sys.stdout.write(json.dumps(status, default=_iso, allow_nan=False) + "\n")
    sys.stdout.flush()


def tail(
    log: Annotated[Path, typer.Argument(help="The server log to follow (it may not exist yet).", show_default=False)],
    store: StoreOption = None,
    no_view: Annotated[bool, typer.Option("--no-view", help="No live view: keep the store current (run as a service).")] = False,
    json_lines: Annotated[bool, typer.Option("--json-lines", help="Print one JSON status object per interval on stdout (no view).")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between status updates (and JSON lines).", min=0.05)] = 0.5,
    compact_files: Annotated[int, typer.Option("--compact-files", hidden=True, min=1)] = MIN_FILES,
    drain_idle: Annotated[float, typer.Option("--drain-idle", hidden=True, min=0.0)] = 5.0,
) -> None:
    """Follow a growing server log: keep the store current and show a live view (Ctrl-C stops)."""
    from loglens.follow.session import LiveSession  # here: `loglens ingest` does not load the follower
    from loglens.follow.view import render

    if log.is_dir():
        fail(f"{log} is a directory; pass the log file to follow (it may not exist yet).")
    if log.suffix == ".gz":
        fail(f"{log} is compressed and cannot grow; use `loglens ingest {log}`.")
    from loglens.ingest import IngestError, parse_threads

    try:
        parse_threads()  # a bad $LOGLENS_PARSE_THREADS is one error now, not a warning per read
    except IngestError as e:
        fail(str(e))
    if not log.parent.exists():
        err_console.print(f"waiting for {log.parent} to appear", markup=False)
    st = Store(store)
    try:
        session = LiveSession(log, st, compact_min_files=compact_files, drain_idle=drain_idle)
    except OSError as e:
        fail(f"cannot use the store at {st.path} ({e.strerror or e}); pass --store DIR.")

    stop, wake = threading.Event(), threading.Event()

    def _stop(signum, frame):  # flush and exit 0: the loop makes a last read before returning
        stop.set()
        wake.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)

    last_error = [""]

    def _error(e: Exception) -> None:
        msg = f"{type(e).__name__}: {e}"
        if msg != last_error[0]:  # once per distinct problem, not once per poll
            err_console.print(f"warning: reading {log} failed, retrying: {msg}", markup=False)
            last_error[0] = msg

    show_view = not (no_view or json_lines) and console.is_terminal
    if not show_view:
        err_console.print(f"following {log} into {st.path} (SIGTERM or Ctrl-C stops)", markup=False)
    try:
        if json_lines:
            session.run(stop, interval=interval, on_status=_json_line, on_error=_error, wake=wake)
        elif show_view:
            with Live(render(session.status()), console=console, auto_refresh=False, transient=False) as live:

                def show(status: dict | None = None) -> None:
                    live.update(render(status or session.status()), refresh=True)

                # new lines are drawn as soon as they are stored (reads are >= 0.2 s apart),
                # and the view is redrawn every interval for its clocks
                session.run(stop, interval=interval, on_status=show, on_change=show, on_error=_error, wake=wake)
        else:
            session.run(stop, interval=interval, on_status=None, on_error=_error, wake=wake)
    except BrokenPipeError:  # `loglens tail --json-lines | head`: the reader left; the last read was made
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    err_console.print(f"stopped; the store at {st.path} is current", markup=False)


def register(app: typer.Typer) -> None:
    app.command("tail")(guarded(tail, "tail"))
