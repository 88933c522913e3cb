"""Where an ingest's CPU goes: each step of the parser, per 32 MB of log.

    python benchmarks/profile_ingest.py                      # the 200 MiB current-mix log
    python benchmarks/profile_ingest.py --log my.log --chunks 4

Reads the first chunks of a log (the first one warms up: plans, regex caches), then parses and
writes the others `--reps` times with one polars thread and reports, per step, the smallest CPU
time over the repetitions scaled to 32 MB (the README's "where the time goes" table).  Steps are
timed by wrapping the pipeline's functions, so the figures add up to the whole parse step; the
rest of `feed` (record structure, filters, the held-back record) is reported as "other".
The real ingest runs three of these in parallel worker threads with polars' own pool.
"""

from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")  # before polars loads: CPU per step, not per core

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ingest import ensure_log  # noqa: E402  (sibling script: the same cached logs)

from loglens.parsers import batch_lines, pipeline  # noqa: E402
from loglens.reader import iter_chunks, lines_frame, may_hold  # noqa: E402
from loglens.store import Store  # noqa: E402

#: (label, module, function) timed inside `LineParser.feed`
STEPS = [
    ("prefix", pipeline, "split_prefix"),
    ("family", pipeline, "_family"),
    ("Decode + Prefill", pipeline, "parse_batch_lines"),
    ("access lines", pipeline, "parse_access"),
    ("events", pipeline, "event_rows"),
]


def _wrap(spent: dict[str, float], label: str, module, name: str) -> None:
    inner = getattr(module, name)

    def timed(*args, **kwargs):
        t = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.process_time() - t

    setattr(module, name, timed)


def profile(log: Path, chunks: int, reps: int, chunk_bytes: int | None = None) -> dict[str, float]:
    """ms per 32 MB for each step (smallest over `reps`)."""
    spent: dict[str, float] = {}
    for label, module, name in STEPS:
        _wrap(spent, label, module, name)
    data = []
    for i, chunk in enumerate(iter_chunks(log, 0, chunk_bytes) if chunk_bytes else iter_chunks(log)):
        data.append(chunk)
        if i == chunks:
            break
    if len(data) < 2:
        raise SystemExit(f"{log}: needs at least two chunks (one to warm up); pass a larger log")
    warm, timed = data[0], data[1:]
    parser = pipeline.LineParser()
    parser.feed(lines_frame(warm.data, 1, warm.start), final=True)
    nbytes = sum(len(c.data) for c in timed)
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(tmp)
        for _ in range(reps):
            spent.clear()
            for chunk in timed:
                t = time.process_time()
                frame = lines_frame(chunk.data, 1, chunk.start)
                spent["lines"] = spent.get("lines", 0.0) + time.process_time() - t
                t = time.process_time()
                out = parser.feed(frame, final=True, ansi=may_hold(chunk.data, b"\x1b"))
                spent["feed"] = spent.get("feed", 0.0) + time.process_time() - t
                t = time.process_time()
                for table, df in out.tables.items():
                    store.write(table, df, name="p", constants={"source": str(log), "file_id": "0" * 16})
                spent["Parquet"] = spent.get("Parquet", 0.0) + time.process_time() - t
            for k, v in spent.items():
                best[k] = min(best.get(k, v), v)
    scale = 32e6 / nbytes * 1000
    out = {k: v * scale for k, v in best.items()}
    out["other"] = out.pop("feed") - sum(out[label] for label, _, _ in STEPS)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", type=Path, help="a log to profile (default: the generated 200 MiB current-mix log)")
    ap.add_argument("--chunks", type=int, default=3, help="chunks timed after the warm-up one")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chunk-bytes", type=int, help="chunk size (default: the reader's)")
    args = ap.parse_args()
    log = args.log or ensure_log(200 * 2**20, "current", 0, HERE / "data")[0]
    ms = profile(log, args.chunks, args.reps, args.chunk_bytes)
    order = ["lines", "prefix", "family", "Decode + Prefill", "access lines", "events", "other", "Parquet"]
    print(f"{log.name}: CPU ms per 32 MB of log, one polars thread, best of {args.reps}")
    print("| step | ms |\n|---|---:|")
    for k in order:
        print(f"| {k} | {ms[k]:.0f} |")
    print(f"| **total** | **{sum(ms[k] for k in order):.0f}** |")
    print(f"(batch lines: split fast path for the commonest shapes; FAST_SHAPES={batch_lines.FAST_SHAPES})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
