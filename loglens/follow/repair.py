"""Put the store back to its last commit points after a kill -9 or a failed read.

Ingest repairs a killed read when it next reads the *same* lineage: it drops that file_id's
files from the committed resume line on.  A live log does not always give it that chance:

* a new file killed during its first read leaves rows under a file_id computed from the file's
  first bytes *at that moment*; the file then grows, its file_id (sha1 of up to 64 KiB of
  head) changes, and nothing ever drops the leftovers;
* a read killed mid-way, then a copytruncate before the restart: that lineage is never read
  again, so its uncommitted files stay.

Both would be rows no commit point covers, visible to every reader.  This drops them, but only
for the rows of the logs this follower owns (`sources`), so another process's read in
progress on another log in the same store is never touched.
"""

from __future__ import annotations

import polars as pl

from loglens.follow.commits import latest_reads
from loglens.follow.compact import DATA_TABLES, replay_journals
from loglens.store import parse_data_name
from loglens.store import Store


def _committed(store: Store, sources: set[str]) -> tuple[set[str], dict[str, int]]:
    """(every committed file_id, resume_line of the latest read of those with our sources)."""
    latest = latest_reads(store)
    ours = latest.filter(pl.col("source").is_in(list(sources)))
    return set(latest["file_id"].to_list()), dict(zip(ours["file_id"].to_list(), ours["resume_line"].to_list()))


def _source_of(path) -> str | None:
    try:
        col = pl.read_parquet(path, columns=["source"], n_rows=1)["source"]
    except (OSError, pl.exceptions.ComputeError):
        return None
    return col[0] if len(col) else None


def drop_uncommitted(store: Store, sources: set[str]) -> int:
    """Remove data files of our logs that no commit covers; returns how many."""
    known, resume = _committed(store, sources)
    removed = 0
    for table in DATA_TABLES:
        for path in store.files_of(table):
            parsed = parse_data_name(path.name)
            if parsed is None:
                continue
            fid, first, rest = parsed
            if fid in resume:
                r = resume[fid]
                # a committed read leaves exactly one file at or after its resume line: its tail
                stale = first >= r and not (first == r and rest == "-tail")
            else:
                stale = fid not in known and _source_of(path) in sources
            if stale:
                path.unlink(missing_ok=True)
                removed += 1
    return removed


def repair(store: Store, sources: set[str]) -> None:
    """Everything a follower does before its first read."""
    store.path.mkdir(parents=True, exist_ok=True)
    store.clean_tmp()
    replay_journals(store)  # a killed merge must not leave rows twice
    drop_uncommitted(store, sources)
