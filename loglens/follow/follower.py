"""Follow one growing log file into the store: the step function, with no threads and no sleeping.

`Follower.step()` looks at the log once and hands whatever complete lines are new to the one
ingest path, `ingest_file(..., partial_lines=False)`; `loop.py` decides when to call it (file
events, a slow poll), and the model test calls it directly.

Which file is "the log".  The follower keeps the file it reads open and always reads it
through that handle (`/proc/self/fd/N`), so it reads exactly the file it holds even while the
name is being swapped.  When the name stops pointing at that file (rotated by rename, or
deleted), the handle is put aside to drain: its remaining lines are read, and once it has not
changed for `drain_idle` seconds it gets one last read that also takes an unterminated last
line (nobody will finish it now) and is closed.  The new file under the name is then opened;
ingest sees different content and makes it a new lineage.  A file that shrinks or is
rewritten in place (copytruncate) is the same handle with new content: ingest's head/tail
hash check makes that a new lineage too, and leaves everything stored before untouched.

Ingest is never called without a new complete line: a call would commit a `files` row for a
file whose only line is unterminated (0 bytes read), and such a row matches any file.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from loglens.follow.compact import MIN_FILES, Merge, compact
from loglens.follow.repair import repair
from loglens.follow.siblings import unfinished_siblings
from loglens.ingest import FileReport, ingest_file
from loglens.store import Store

FINGERPRINT_BYTES = 32  # bytes before the read position that must stay the same while a file only grows
BACKSCAN_BYTES = 64 * 1024


def _handle_path(fileno: int) -> Path:
    # /proc/self/fd/N opens the very file the descriptor holds, also once renamed or deleted
    proc = Path(f"/proc/self/fd/{fileno}")
    return proc if proc.parent.is_dir() else Path(f"/dev/fd/{fileno}")


@dataclass
class OpenLog:
    """One log file held open, and how far its complete lines have been handed to ingest."""

    file: BinaryIO
    ident: tuple[int, int]  # (st_dev, st_ino): which file this is, whatever its name now
    name: str  # its name when opened: rows keep it after a rotation
    changed_at: float
    fed_to: int = 0  # end of the last complete line given to ingest
    fingerprint: bytes = b""  # the bytes just before fed_to, when they were read
    seen: tuple[int, int] = (-1, -1)  # (size, mtime_ns) at the last look

    @classmethod
    def open(cls, path: Path, now: float, name: str | None = None) -> OpenLog | None:
        try:
            f = open(path, "rb")
        except OSError:
            return None
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            f.close()
            return None
        return cls(f, (st.st_dev, st.st_ino), name or str(_handle_path(f.fileno()).resolve()), now)

    @property
    def path(self) -> Path:
        """Reads through the held descriptor (the file itself, also once renamed or deleted)."""
        return _handle_path(self.file.fileno())

    def pread(self, offset: int, length: int) -> bytes:
        return os.pread(self.file.fileno(), length, offset)

    def still_same_content(self) -> bool:
        """False if the bytes before `fed_to` changed (rewritten in place, e.g. copytruncate)."""
        if not self.fingerprint:
            return True
        return self.pread(self.fed_to - len(self.fingerprint), len(self.fingerprint)) == self.fingerprint

    def last_line_end(self, lo: int, hi: int) -> int:
        """Offset just after the last newline in [lo, hi), or `lo` if there is none; reads
        backwards from the end, so a large backlog costs one block, not a full read."""
        end = hi
        while end > lo:
            start = max(lo, end - BACKSCAN_BYTES)
            block = self.pread(start, end - start)
            i = block.rfind(b"\n")
            if i >= 0:
                return start + i + 1
            end = start
        return lo

    def close(self) -> None:
        self.file.close()


@dataclass
class StepResult:
    reports: list[FileReport] = field(default_factory=list)
    merges: list[Merge] = field(default_factory=list)
    rotated: bool = False  # the name now points at another file (or at none)
    rewritten: bool = False  # the file held shrank or changed in place

    @property
    def changed(self) -> bool:
        return any(r.rows or r.lines for r in self.reports)


class Follower:
    def __init__(
        self,
        path: str | os.PathLike,
        store: Store,
        *,
        drain_idle: float = 5.0,
        compact_min_files: int = MIN_FILES,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.path = Path(path).absolute()
        self.store = store
        self.drain_idle = drain_idle
        self.compact_min_files = compact_min_files
        self.clock = clock
        self.current: OpenLog | None = None
        self.draining: list[OpenLog] = []
        self.file_ids: set[str] = set()  # lineages written by this follower
        self.sources: set[str] = {str(self.path.resolve())}  # `source` values its rows carry
        self.reads = 0
        self.started = False
        repair(store, self.sources)  # what a killed predecessor left half done

    def step(self) -> StepResult:
        """Look once: notice rotation, drain rotated files, read new complete lines, compact."""
        now = self.clock()
        res = StepResult()
        try:
            st = os.stat(self.path)
        except OSError:
            st = None
        cur = self.current
        if cur is not None and (st is None or (st.st_dev, st.st_ino) != cur.ident):
            self.draining.append(cur)
            self.current = None
            res.rotated = True
        if self.current is None and st is not None and stat.S_ISREG(st.st_mode):
            self.current = OpenLog.open(self.path, now)
        if not self.started:  # a predecessor may have left a rotated file half read
            self.started = True
            self._adopt_siblings(now)
        # a rotated file's lines come before the new file's: read it first
        self._drain(now, res)
        if self.current is not None:
            self._read(self.current, now, res)
        if res.rewritten:  # copytruncate: the copy may hold lines written since our last read
            self._adopt_siblings(now)
            self._drain(now, res)
        if res.reports:
            res.merges = compact(self.store, {r.file_id for r in res.reports}, self.compact_min_files)
        return res

    def _drain(self, now: float, res: StepResult) -> None:
        for old in list(self.draining):
            self._read(old, now, res)
            if now - old.changed_at >= self.drain_idle:
                self._read(old, now, res, final=True)
                old.close()
                self.draining.remove(old)

    def _adopt_siblings(self, now: float) -> None:
        held = {log.ident for log in [*self.draining, *([self.current] if self.current else [])]}
        for path, source in unfinished_siblings(self.store, self.path, self.sources, held):
            log = OpenLog.open(path, now, name=source)
            if log is not None:
                self.draining.append(log)

    def _read(self, log: OpenLog, now: float, res: StepResult, final: bool = False) -> None:
        try:
            st = os.fstat(log.file.fileno())
        except OSError:
            return
        size = st.st_size
        # rewritten in place: checked on every look, since a copytruncate followed by as many
        # bytes within one timestamp tick leaves size and mtime as they were
        if size < log.fed_to or not log.still_same_content():
            log.fed_to, log.fingerprint = 0, b""
            res.rewritten = True
            log.seen = (-1, -1)
        if (size, st.st_mtime_ns) != log.seen:
            log.seen = (size, st.st_mtime_ns)
            log.changed_at = now
        elif not final:
            return  # nothing changed since the last look
        if final:
            if size > log.fed_to:  # an unterminated last line, or lines not read yet
                self._ingest(log, res, partial_lines=True)
                log.fed_to, log.fingerprint = size, b""
            return
        end = log.last_line_end(log.fed_to, size)
        if end == log.fed_to:
            return  # no new complete line (an unterminated one waits for its newline)
        self._ingest(log, res, partial_lines=False)
        log.fed_to = end
        log.fingerprint = log.pread(max(0, end - FINGERPRINT_BYTES), min(end, FINGERPRINT_BYTES))

    def _ingest(self, log: OpenLog, res: StepResult, partial_lines: bool) -> None:
        try:
            report = ingest_file(log.path, self.store, partial_lines=partial_lines, source=log.name)
        except Exception:
            # a failed read is a killed read that goes on living: drop what it wrote now, since
            # the next read may see this file under another file_id and never drop it
            repair(self.store, self.sources | {log.name})
            raise
        self.reads += 1
        self.file_ids.add(report.file_id)
        self.sources.add(report.source)
        res.reports.append(report)

    def close(self) -> None:
        for log in [*self.draining, *([self.current] if self.current else [])]:
            log.close()
        self.draining, self.current = [], None
