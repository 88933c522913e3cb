"""loglens: LLM-server logs into a Parquet store, and the gap between client and server explained."""

import os

# Settings read once, when the libraries load (so before polars, pyarrow and numpy are
# imported; the user's own settings win):
# - loglens's linear algebra is tiny (a few hundred rows); OpenBLAS's worker threads would
#   only spin beside the parser's own threads (~3 % of an ingest's CPU);
# - polars' allocator (jemalloc, on Linux) keeps freed memory for 5 s instead of handing it
#   back at once: an ingest reuses the same few hundred MB chunk after chunk, and memory handed
#   back and taken again is zeroed by the kernel page by page (pyarrow's pool is chosen in
#   loglens.store, where pyarrow is imported)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:5000,muzzy_decay_ms:5000")

__version__ = "0.1.0"
