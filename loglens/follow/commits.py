"""Commit points: the latest `files` row of each file_id (ingest resumes a lineage from it)."""

from __future__ import annotations

import polars as pl

from loglens.store import Store


def latest_reads(store: Store) -> pl.DataFrame:
    """One row per file_id: its latest read, whose `resume_line`/`bytes_read` are committed."""
    files = store.read("files")
    if files.height == 0:
        return files
    return files.sort("seq").group_by("file_id").agg(pl.all().last())
