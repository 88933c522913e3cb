"""loglens: LLM-server logs into a Parquet store, and the gap between client and server explained."""

import os

# loglens's linear algebra is tiny (a few hundred rows); OpenBLAS's worker threads would only
# spin beside the parser's own threads (~3 % of an ingest's CPU), so one thread unless told
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
