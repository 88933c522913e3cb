"""loglens: LLM-server logs into a Parquet store, and the gap between client and server explained."""

__version__ = "0.1.0"
