"""Measure `loglens dashboard` on a large synthetic store: page size, build time, memory.

    python benchmarks/dashboard_size.py [--rows 2000000] [--dp 8] [--keep DIR]

Builds the store in polars (loglens.dashboards.synthetic: `rows` Decode lines over `dp` DP
ranks, with prefill, HTTP and event rows alongside), then runs the command a user runs,
`loglens dashboard -o OUT.html` and `-o OUT.png`, each in its own process, and reports the
page size, wall and CPU time and peak memory of each.  On a shared 2-core machine the wall
clock also measures the neighbours; CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loglens.dashboards.synthetic import write_synthetic_store

CLI = [sys.executable, "-c", "from loglens.cli import main; main()"]


def run_dashboard(store: Path, out: Path) -> tuple[float, float, float, str]:
    """Wall s, CPU s, peak RSS MB of one `loglens dashboard` process, and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([*CLI, "dashboard", "--store", str(store), "-o", str(out)], capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"loglens dashboard failed ({done.returncode}):\n{done.stderr}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="Decode rows in the synthetic store")
    parser.add_argument("--dp", type=int, default=8, help="DP ranks (one Decode stream each)")
    parser.add_argument("--keep", type=Path, help="write the store and outputs here instead of a temporary folder")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if (work / "store").exists():
            shutil.rmtree(work / "store")  # a second run must not add to the first one's rows
        t = time.perf_counter()
        store = write_synthetic_store(work / "store", args.rows, dp=args.dp)
        parquet_mb = sum(f.stat().st_size for f in store.path.rglob("*.parquet")) / 1e6
        print(f"store: {args.rows:,} Decode rows over {args.dp} DP ranks, {parquet_mb:.1f} MB of Parquet "
              f"(written in {time.perf_counter() - t:.1f} s)")

        # peak RSS of children is a running maximum: the HTML run is measured first, on its own
        for name in ("dashboard.html", "dashboard.png"):
            out = work / name
            wall, cpu, rss, printed = run_dashboard(store.path, out)
            print(f"loglens dashboard -o {name}: {out.stat().st_size / 1e6:.2f} MB written, "
                  f"{wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS so far {rss:.0f} MB")
        print("of the HTML page, the inlined Vega/Vega-Lite/vega-embed bundle is ~0.9 MB")
        for line in printed.splitlines()[1:]:
            print(f"note: {line.strip()}")


if __name__ == "__main__":
    main()
