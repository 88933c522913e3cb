"""loglens: LLM-server logs into a Parquet store, and the gap between client and server explained."""

import os

# Settings read once, when the libraries load (so before polars, pyarrow and numpy are
# imported; the user's own settings win):
# - loglens's linear algebra is tiny (a few hundred rows); OpenBLAS's worker threads would
#   only spin beside the parser's own threads (~3 % of an ingest's CPU);
# - polars' allocator (jemalloc, on Linux) keeps freed memory for 5 s instead of handing it
#   back at once: an ingest reuses the same few hundred MB chunk after chunk, and memory handed
#   back and taken again is zeroed by the kernel page by page (pyarrow's pool is chosen in
#   loglens.store, where pyarrow is imported); and it uses one arena for every thread, not
#   one per thread: memory a worker thread freed is then reused by polars' own threads too,
#   instead of each keeping its own (peak memory of a 1 GiB ingest ~10-15 % lower, no slower)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:5000,muzzy_decay_ms:5000,narenas:1")


def _keep_freed_memory() -> None:
    """The same for glibc's malloc, which numpy and Python use: by default each array of a few
    MB gets a mapping of its own, handed back when freed, so the reader's per-chunk arrays
    (line bounds, newline bitmap) were zeroed afresh by the kernel chunk after chunk — half an
    ingest's page faults.  Kept in the heap instead (up to 64 MiB free per arena).  glibc reads
    its `MALLOC_*` variables only at start, hence mallopt; a user's own setting wins."""
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt  # glibc only (musl has none; macOS no symbol)
    except (OSError, AttributeError):
        return
    mallopt(-3, 32 * 2**20)  # M_MMAP_THRESHOLD: arrays under 32 MiB come from the heap
    mallopt(-1, 64 * 2**20)  # M_TRIM_THRESHOLD: keep up to 64 MiB free at the heap's top


_keep_freed_memory()

__version__ = "0.1.0"
