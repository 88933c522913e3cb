"""Benchmark runs for the dashboard: reconcile records for the waterfall panel (`--bench`), and
the windows to shade on the time panels.

The bench reader (`loglens.bench`), the reconciler (`loglens.reconcile`) and run detection
(`loglens.runs`) are other modules; the dashboard uses them when they are installed and says
on the page what it could not do, so a dashboard never fails for want of a waterfall.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loglens.store import Store


class BenchFileError(Exception):
    """The bench results file cannot be read (missing, or not bench_serving output)."""


@dataclass
class Reconciled:
    records: list[dict[str, Any]] = field(default_factory=list)  # reconcile JSON, one per aligned record
    notes: list[str] = field(default_factory=list)  # what could not be done, for the page header

    @property
    def runs(self) -> list[dict[str, Any]]:
        """The records' windows as {start, end, label}, for shading the time panels."""
        out = []
        for i, record in enumerate(self.records):
            window = record.get("window") or {}
            if window.get("start") and window.get("end"):
                out.append({"start": window["start"], "end": window["end"], "label": run_label(record, i)})
        return out


def run_label(record: Mapping[str, Any], index: int) -> str:
    """`record N (tag)`, N counted from 1 as `loglens reconcile` counts them."""
    info = record.get("record") or {}
    number = info["index"] + 1 if isinstance(info.get("index"), int) else index + 1
    tag = info.get("tag")
    return f"record {number}" + (f" ({tag})" if tag else "")


def reconcile_for_dashboard(store: Store, bench_path: str | Path) -> Reconciled:
    """Read the bench file and reconcile each record against the store, as far as the
    installed modules allow."""
    path = Path(bench_path)
    if not path.is_file():
        raise BenchFileError(f"bench results file not found: {bench_path}")
    try:
        from loglens.bench import load_bench
    except ImportError:
        return Reconciled(notes=["Waterfall skipped: the bench reader (loglens.bench) is not installed."])
    try:
        records = load_bench(path)
    except (ValueError, OSError) as exc:  # the reader's format errors are ValueErrors
        raise BenchFileError(str(exc)) from exc
    if not records:
        return Reconciled(notes=[f"Waterfall skipped: no bench_serving record in {bench_path}."])
    try:
        from loglens.reconcile.core import reconcile
    except ImportError:
        return Reconciled(notes=[f"Waterfall skipped: the reconciler (loglens.reconcile) is not installed "
                                 f"({len(records)} bench record(s) read)."])
    try:
        results = [r.to_dict() for r in reconcile(store, records)]
    except Exception as exc:  # the page is still worth writing without its waterfall
        return Reconciled(notes=[f"Waterfall skipped: reconciling failed ({type(exc).__name__}: {exc})."])
    done = [r for r in results if "gap" in r]
    notes = [f"{run_label(r, i).capitalize()} not reconciled: {r.get('error')}"
             for i, r in enumerate(results) if "gap" not in r]
    return Reconciled(records=done, notes=notes)


def runs_in_log(store: Store) -> tuple[list[dict[str, Any]], list[str]]:
    """Benchmark runs found in the access log itself (loglens.runs), for shading when no
    --bench file is given; ([], note) when that is not possible."""
    try:
        from loglens.runs import detect_runs
    except ImportError:
        return [], ["Benchmark runs not shaded: run detection (loglens.runs) is not installed."]
    try:
        runs = detect_runs(store, with_decode=False)
    except Exception as exc:  # shading is a nicety: never fail the page for it
        return [], [f"Benchmark runs not shaded: run detection failed ({type(exc).__name__}: {exc})."]
    shaded = [{"start": r.start, "end": r.end, "label": f"run {i + 1} ({r.requests} requests)"} for i, r in enumerate(runs)]
    return shaded, ([f"{len(shaded)} benchmark run(s) found in the access log (shaded)."] if shaded else [])
