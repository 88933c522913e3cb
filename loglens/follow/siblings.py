"""Rotated copies of the log that still hold lines the store has not read.

Two moments leave lines of an old lineage unread on disk, next to the log:

* copytruncate: logrotate copies `server.log` to `server.log.1`, then empties it.  Lines the
  server wrote after our last read and before the copy are only in the copy;
* a restart: a follower killed (or stopped) after a rename rotation, before it drained the
  old file, does not know where that file went.

Those files are found by content, as ingest finds lineages: a file next to the log whose name
starts with the log's name, whose first `head_len` bytes and the bytes before `bytes_read`
hash as a lineage of ours last committed, and which is longer than that commit: it is that
lineage, grown.  Compressed files (`.gz`) are skipped: a rotated file is compressed only on
the rotation after (delaycompress), long after it was drained.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import polars as pl

from loglens.follow.commits import latest_reads
from loglens.reader import TAIL_BYTES, read_range, sha1
from loglens.store import Store


def _candidates(store: Store, sources: set[str]) -> list[dict]:
    return latest_reads(store).filter(pl.col("source").is_in(list(sources)), pl.col("bytes_read") > 0).to_dicts()


def _matches(path: Path, size: int, row: dict, heads: dict[int, str | None]) -> bool:
    hl, br = row["head_len"], row["bytes_read"]
    if br >= size or hl > size:
        return False
    if hl not in heads:
        head = read_range(path, 0, hl)
        # a head of blank lines is in every file that starts with one: it identifies nothing
        heads[hl] = sha1(head) if head.strip() else None
    if heads[hl] is None or heads[hl] != row["head_sha1"]:
        return False
    lo = max(0, br - TAIL_BYTES)
    return sha1(read_range(path, lo, br - lo)) == row["tail_sha1"]


def unfinished_siblings(store: Store, log: Path, sources: set[str], skip: set[tuple[int, int]]) -> list[tuple[Path, str]]:
    """(file, the `source` its lineage is stored under) for each rotated copy with unread bytes;
    files whose (st_dev, st_ino) is in `skip` (already held open) are left out."""
    try:
        entries = list(os.scandir(log.parent))
    except OSError:
        return []
    siblings = [e for e in entries if e.name.startswith(log.name) and e.name != log.name and not e.name.endswith(".gz")]
    if not siblings:
        return []
    rows = _candidates(store, sources)
    out = []
    for e in sorted(siblings, key=lambda e: e.name):
        try:
            st = e.stat()
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in skip:
            continue
        heads: dict[int, str] = {}
        for row in rows:
            try:
                if _matches(Path(e.path), st.st_size, row, heads):
                    out.append((Path(e.path), row["source"]))
                    break
            except OSError:
                break
    return out
