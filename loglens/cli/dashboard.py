"""`loglens dashboard [--store DIR] [--bench RESULTS] -o OUT.html|.png|.svg`"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Optional

import typer

from loglens.cli.common import (
    StoreOption,
    console,
    err_console,
    fail,
    guarded,
    open_store,
    progress_enabled,
)


def register(app: typer.Typer) -> None:
    def dashboard(
        output: Annotated[Path, typer.Option(
            "-o", "--output", help="Where to write: OUT.html (one self-contained page, opens offline), OUT.png or OUT.svg.")],
        store: StoreOption = None,
        bench: Annotated[Optional[Path], typer.Option(
            "--bench", help="bench_serving results (.jsonl/.json/text): adds the reconcile waterfall and shades the runs.")] = None,
        scale: Annotated[float, typer.Option("--scale", help="Pixel scale of a PNG.", min=0.1, max=8)] = 1.0,
    ) -> None:
        """Write a dashboard of the store: throughput, batch, KV, prefill and HTTP panels, and the waterfall."""
        # imported here so that other commands do not pay for Altair and vl-convert
        from loglens.dashboards.html_page import FORMATS, write_dashboard
        from loglens.dashboards.page import EmptyStoreError, build_dashboard
        from loglens.dashboards.reconciled import BenchFileError

        if output.suffix.lower() not in FORMATS:
            fail(f"cannot write {output}: the output must end in {', '.join(FORMATS)}.", code=2)
        st = open_store(store)
        working = err_console.status("Building the dashboard…") if progress_enabled() else contextlib.nullcontext()
        with working:
            try:
                board = build_dashboard(st, bench=bench)
                path = write_dashboard(board, output, scale=scale)
            except EmptyStoreError as exc:
                fail(f"{exc}.")
            except BenchFileError as exc:
                fail(f"{exc}; pass the file bench_serving wrote with --output-file.")
            except OSError as exc:
                fail(f"cannot write {output}: {exc.strerror or exc}.")
        size = path.stat().st_size
        console.print(f"Wrote {path} ({size / 1e6:.1f} MB).", markup=False)
        for note in board.notes:
            console.print(f"  {note}", markup=False, soft_wrap=True)

    app.command("dashboard")(guarded(dashboard, "dashboard"))
