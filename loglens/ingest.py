"""Whole-file ingest: log files (plain, `.gz`, directories) → the store, idempotently.

A file's identity is its content, not its name: the sha1 of its first 64 KiB (`head`) and of
the 4 KiB before where the last read stopped (`tail`).  Same head and tail → the same file,
grown or not: reading resumes where it stopped, so the same bytes twice add no rows and a
grown file adds only its new lines.  A different file under the same name fails the check
and is read as a new lineage (new `file_id`).

The rows made from the end of a read (the held-back last record and an unterminated last
line) go to files named `*-tail.parquet`; when the file has grown, those are removed and the
read resumes at their first line, so a line completed later is never counted twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import polars as pl

from loglens.parsers.batch_lines import fast_path_taken
from loglens.parsers.pipeline import LineParser, Parsed
from loglens.reader import Chunk
from loglens.reader import CHUNK_BYTES, HEAD_BYTES, TAIL_BYTES, iter_chunks, lines_frame, logical_size, may_hold, read_range, sha1, is_gzip
from loglens.schema import LINE_TABLES, conform
from loglens.store import Store, parse_data_name


#: Worker threads parsing and writing segments.  Three are ~3 % faster than two on two cores
#: (a core is idle whenever both of two workers wait: for polars' pool to pick up and hand back
#: each step, or for the GIL) and take ~0.15 GiB more: peak 0.76 GiB on a 1 GiB log (two: 0.6).
#: That fits the 1 GiB bound since polars' allocator uses one arena (loglens/__init__.py).  A
#: log whose batch lines take the tolerant path (one mixing many releases' shapes) needs ~1.5x
#: the memory per chunk: three workers peaked at 0.96 GiB on a 1 GiB one, so such a log gets
#: TOLERANT_THREADS (0.74 GiB), decided from the shapes the parser has seen (two until the first
#: chunk is parsed).  (Worker processes were tried: same wall time on 2 cores, ~10 % more CPU
#: for start-up and re-reading, and more to go wrong.)
PARSE_THREADS = 3
TOLERANT_THREADS = 2


def parse_threads() -> tuple[int, bool]:
    """(worker threads, whether the user chose them): `$LOGLENS_PARSE_THREADS` (a positive
    integer, used as it is: fewer use less memory), else PARSE_THREADS."""
    value = os.environ.get("LOGLENS_PARSE_THREADS", "").strip()
    if not value:
        return PARSE_THREADS, False
    if not value.isdigit() or int(value) < 1:
        raise IngestError(f"LOGLENS_PARSE_THREADS={value!r}: expected a positive integer")
    return int(value), True


def _busy_limit(threads: int, chosen: bool) -> int:
    """How many segments may be parsed at once now (see PARSE_THREADS)."""
    if chosen or fast_path_taken():
        return threads
    return min(threads, TOLERANT_THREADS)


class IngestError(Exception):
    """A file that cannot be read at all (missing, a directory without logs, no permission)."""


@dataclass
class FileReport:
    source: str
    file_id: str = ""
    status: str = ""  # new | grown | unchanged | rewritten | empty
    lines: int = 0  # physical lines read in this run
    blank_lines: int = 0
    bytes: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    unknown_keys: dict[str, int] = field(default_factory=dict)
    note: str = ""


def expand_paths(paths: list[str | Path], exclude: Path | None = None) -> list[Path]:
    """Files named, plus the regular files under directories named (hidden ones skipped)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if not f.is_file() or any(part.startswith(".") for part in f.relative_to(p).parts):
                    continue
                if exclude is not None and exclude.resolve() in f.resolve().parents:
                    continue
                if f.suffix in (".parquet", ".jsonl", ".json") or f.name.endswith(".parquet.tmp"):
                    continue  # a store or bench results, not a log
                out.append(f)
        elif p.exists():
            out.append(p)
        else:
            raise IngestError(f"{p}: no such file or directory")
    return out


class KnownFiles:
    """The store's `files` table, read once for a run of `ingest_paths` and kept current as each
    file is read (read again for every file, it made a directory of many logs quadratic)."""

    def __init__(self, store: Store):
        self.store = store
        self._frame: pl.DataFrame | None = None
        self._latest: pl.DataFrame | None = None

    def frame(self) -> pl.DataFrame:
        if self._frame is None:
            self._frame = self.store.read("files")
        return self._frame

    def latest(self) -> pl.DataFrame:
        """Each lineage's last read."""
        if self._latest is None:
            self._latest = self.frame().sort("seq").group_by("file_id").agg(pl.all().last())
        return self._latest

    def add(self, row: pl.DataFrame) -> None:
        if self._frame is not None:
            self._frame = pl.concat([self._frame, conform(row, "files")], how="vertical")
            self._latest = None


def _lineage(known: KnownFiles, path: Path, size_of: Callable[[], int], source: str) -> tuple[dict | None, str, bytes]:
    """The previous read of this content, if any, its file_id (or a new one), and the content's
    first HEAD_BYTES.  `size_of()` gives the content's size; it is asked only when a previous
    read's head matches (for a .gz file it costs a pass of decompression)."""
    files = known.frame()
    head = read_range(path, 0, HEAD_BYTES)
    head_now = sha1(head)
    if files.height == 0:
        return None, head_now[:16], head
    # the reads that could be this content's, found by a filter first (a store holding many
    # files would be looped over in Python for each one): a head no longer than this one's, and
    # under another name only a whole 64 KiB head that matches
    full = pl.col("head_len") == HEAD_BYTES
    candidates = known.latest().filter(
        (pl.col("bytes_read") > 0) & (pl.col("head_len") <= len(head))
        & ((pl.col("source") == source) | (full & (pl.col("head_sha1") == head_now))))
    cache: dict[int, str] = {len(head): head_now}
    for row in candidates.sort("ingested_at", descending=True).iter_rows(named=True):
        hl = row["head_len"]  # (at most HEAD_BYTES)
        if row["source"] != source and hl < HEAD_BYTES:
            continue  # under another name only a full 64 KiB head is identity enough
        if hl not in cache:
            cache[hl] = sha1(head[:hl])
        if cache[hl] != row["head_sha1"] or size_of() < row["bytes_read"]:
            continue
        br = row["bytes_read"]
        lo = max(0, br - TAIL_BYTES)
        if sha1(read_range(path, lo, br - lo)) == row["tail_sha1"]:
            return row, row["file_id"], head
    taken = set(files.get_column("file_id").to_list())
    fid, n = head_now[:16], 1
    while fid in taken:
        n += 1
        fid = f"{head_now[:16]}-{n}"
    return None, fid, head


def _write(store: Store, parsed: Parsed, source: str, file_id: str, name: str, report: FileReport) -> None:
    for table, df in parsed.tables.items():
        if df.height == 0:
            continue
        store.write(table, df, name=name, constants={"source": source, "file_id": file_id})
        report.rows[table] = report.rows.get(table, 0) + df.height
    for k, v in parsed.unknown_keys.items():
        report.unknown_keys[k] = report.unknown_keys.get(k, 0) + v


def drop_rows_from(store: Store, file_id: str, line_no: int) -> None:
    """Remove every data file of `file_id` that starts at or after `line_no`.

    Data files are named by their first line, and rows of one file never reach past the next
    file's first line, so this removes exactly what an unfinished or superseded read wrote
    (its held-back tail, an unterminated last line, or whatever a killed run left behind)."""
    for table in [*LINE_TABLES, "config"]:
        # (only this lineage's names: listing and sorting every file of the table for each file
        # ingested made a directory of many logs quadratic)
        for f in store.files_of(table, f"{file_id}-"):
            parsed = parse_data_name(f.name)
            if parsed is not None and parsed[0] == file_id and parsed[1] >= line_no:
                f.unlink(missing_ok=True)


def _parse_segment(segment: list[tuple[Chunk, int]], store: Store, source: str, file_id: str, last: bool = False) -> tuple[list[tuple[FileReport, int, int]], LineParser]:
    """Parse and write chunks no record spans beyond (in a worker thread: polars releases the
    GIL); returns (rows written, blank lines, bytes) per chunk, and the parser.  The file's
    `last` segment keeps its last record back (the file may grow): the caller finishes it."""
    parser = LineParser()
    out = []
    for i, (chunk, first_no) in enumerate(segment):
        held = parser.pending_start
        final = not last and i == len(segment) - 1
        parsed = parser.feed(lines_frame(chunk.data, first_no, chunk.start, chunk.newlines), final=final, ansi=may_hold(chunk.data, b"\x1b"))
        written = FileReport(source=source)
        _write(store, parsed, source, file_id, f"{file_id}-{(held[0] if held else first_no):012d}", written)
        out.append((written, parsed.blank_lines, len(chunk.data)))
    return out, parser


def _collect(results: tuple[list[tuple[FileReport, int, int]], LineParser], report: FileReport, on_progress) -> int:
    """Add what a worker wrote to the report; returns the blank lines."""
    blanks = 0
    for written, blank_lines, nbytes in results[0]:
        for k, v in written.rows.items():
            report.rows[k] = report.rows.get(k, 0) + v
        for k, v in written.unknown_keys.items():
            report.unknown_keys[k] = report.unknown_keys.get(k, 0) + v
        blanks += blank_lines
        if on_progress:
            on_progress(nbytes)
    return blanks


def ingest_file(
    path: Path,
    store: Store,
    on_progress: Callable[[int], None] | None = None,
    partial_lines: bool = True,
    source: str | None = None,
    known: KnownFiles | None = None,
) -> FileReport:
    """Read what is new in `path` into `store`.  The `files` row written last is the commit
    point: a run killed before it leaves files that the next run removes and writes again.

    `partial_lines=False` (live mode) leaves an unterminated last line for a later read;
    `source` names the file when `path` is not its name (a follower reading a rotated file
    through its open descriptor); `known`: the store's files table as a run of ingest_paths
    keeps it (else it is read here)."""
    source = source or str(path.resolve())
    report = FileReport(source=source)
    size: int | None = None

    def size_of() -> int:
        """The content's size, found once and only when needed: a .gz file's costs a pass of
        decompression (a new one's is counted while it is read instead)."""
        nonlocal size
        if size is None:
            size = logical_size(path)
        return size

    try:
        if not is_gzip(path):
            size_of()
        known = known or KnownFiles(store)
        prev, file_id, head = _lineage(known, path, size_of, source)
    except OSError as e:
        raise IngestError(f"{path}: cannot read ({e.strerror or e})") from e
    report.file_id = file_id
    if prev is not None and prev["source"] != source:
        report.note = f"same content as {prev['source']} (rows keep that name)"
        source = prev["source"]
    if prev is not None and size_of() == prev["bytes_read"]:
        report.status = "unchanged"
        return report
    if prev is None:
        start, line_no, seq, lines_before, blanks_before = 0, 1, 1, 0, 0
        report.status = "new" if head else "empty"
        drop_rows_from(store, file_id, 1)  # leftovers of a run killed before its first commit
    else:
        drop_rows_from(store, file_id, prev["resume_line"])
        start, line_no, seq = prev["resume_at"], prev["resume_line"], prev["seq"] + 1
        lines_before = prev["resume_line"] - 1
        # blank lines among the re-read tail are counted again below
        blanks_before = prev["blank_lines"] - (prev["tail_blank_lines"] or 0)
        report.status = "grown"
    # Segments are runs of chunks that no record spans (each cut is before a line that starts a
    # record: `reader._cut`); they are parsed and written independently, PARSE_THREADS at a
    # time, by worker threads (polars and pyarrow release the GIL) while this thread reads
    # ahead.  The last segment goes to a worker too, which keeps its last record back; its
    # parser comes back here, so that record and an unterminated last line are finished (or
    # left to resume) by this thread.
    total_blank = 0
    consumed = start
    partial = None
    dropped = 0  # bytes of an unterminated last line left for a later read (live mode)
    recent = b""  # the last TAIL_BYTES read: the tail's sha1 without reading them again
    problems: list[str] = []
    segments: list[list[tuple[Chunk, int]]] = []
    current: list[tuple[Chunk, int]] = []
    futures: deque = deque()
    threads, chosen = parse_threads()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for chunk in iter_chunks(path, start, CHUNK_BYTES, problems):
            if not chunk.complete:
                partial = chunk if partial_lines else None
                dropped = 0 if partial_lines else len(chunk.data)
                break
            current.append((chunk, line_no))
            line_no += chunk.lines
            consumed += len(chunk.data)
            recent = (recent + bytes(chunk.data[-TAIL_BYTES:]))[-TAIL_BYTES:]
            if chunk.ends_record:
                if segments:  # the segment before is not the last: hand it to a worker
                    futures.append(pool.submit(_parse_segment, segments.pop(), store, source, file_id))
                segments.append(current)
                current = []
            # a segment is handed over only when a worker is free (none waits in the pool's
            # queue): one chunk less in memory, and measured no slower
            while len(futures) >= _busy_limit(threads, chosen) or (futures and futures[0].done()):
                total_blank += _collect(futures.popleft().result(), report, on_progress)
        if current:
            if segments:
                futures.append(pool.submit(_parse_segment, segments.pop(), store, source, file_id))
            segments.append(current)
        last = None
        if segments:
            while len(futures) >= _busy_limit(threads, chosen):  # (no more parses at once at the end either)
                total_blank += _collect(futures.popleft().result(), report, on_progress)
            last = pool.submit(_parse_segment, segments[0], store, source, file_id, True)
        while futures:
            total_blank += _collect(futures.popleft().result(), report, on_progress)
        parser = LineParser()
        if last is not None:
            results = last.result()
            total_blank += _collect(results, report, on_progress)
            parser = results[1]
    pend = parser.pending_start
    if pend is not None:
        resume_line, resume_at = pend
    elif partial is not None:
        resume_line, resume_at = line_no, partial.start
    else:
        resume_line, resume_at = line_no, consumed
    tail = lines_frame(partial.data, line_no, partial.start) if partial else lines_frame(b"", line_no, consumed)
    line_no += tail.height
    if partial:
        consumed += len(partial.data)
        recent = (recent + bytes(partial.data[-TAIL_BYTES:]))[-TAIL_BYTES:]
    if problems:
        report.note = "; ".join([*([report.note] if report.note else []), *problems])
    parsed = parser.feed(tail, final=True)
    total_blank += parsed.blank_lines
    tail_blanks = parsed.blank_lines
    _write(store, parsed, source, file_id, f"{file_id}-{resume_line:012d}-tail", report)
    if on_progress and partial:
        on_progress(len(partial.data))
    report.lines = line_no - 1 - lines_before
    report.blank_lines = total_blank
    report.bytes = consumed - start
    head_len = min(consumed, HEAD_BYTES)
    lo = max(0, consumed - TAIL_BYTES)
    # the tail as read (when this read covered it), else read again
    tail_bytes = recent[len(recent) - (consumed - lo):] if lo >= start and consumed - lo <= len(recent) else read_range(path, lo, consumed - lo)
    unknown_keys = dict(json.loads(prev["unknown_keys"] or "{}")) if prev else {}
    for k, v in report.unknown_keys.items():
        unknown_keys[k] = unknown_keys.get(k, 0) + v
    row = {
        "source": source,
        "file_id": file_id,
        "seq": seq,
        "size_bytes": size if size is not None else consumed + dropped,  # (a .gz file read to its end)
        "bytes_read": consumed,
        "lines": line_no - 1,
        "blank_lines": blanks_before + total_blank,
        "head_len": head_len,
        "head_sha1": sha1(read_range(path, 0, head_len)),
        "tail_sha1": sha1(tail_bytes),
        "resume_at": resume_at,
        "resume_line": resume_line,
        "compressed": is_gzip(path),
        "mtime": datetime.fromtimestamp(path.stat().st_mtime),
        "ingested_at": datetime.now(),
        "unknown_keys": json.dumps(unknown_keys),
        "tail_blank_lines": tail_blanks,
    }
    written = pl.DataFrame([row])
    store.write("files", written, name=f"{file_id}-read{seq:06d}")
    known.add(written)
    return report


def ingest_paths(paths: list[str | Path], store: Store, on_progress: Callable[[int], None] | None = None) -> list[FileReport]:
    from loglens.follow.compact import replay_journals  # a merge killed by a follower

    store.path.mkdir(parents=True, exist_ok=True)
    store.clean_tmp()
    replay_journals(store)
    known = KnownFiles(store)
    return [ingest_file(p, store, on_progress, known=known) for p in expand_paths(paths, exclude=store.path)]
