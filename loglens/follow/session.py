"""A live session: the follower, the recent rows it wrote, and the status they give.

The one library call behind `loglens tail`: the command only chooses how a status is shown
(rich view, JSON lines, nothing).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import datetime

import polars as pl

from loglens.follow.compact import MIN_FILES
from loglens.follow.follower import Follower, StepResult
from loglens.follow.loop import run
from loglens.follow.status import compute_status
from loglens.follow.window import RecentRows
from loglens.store import Store


class LiveSession:
    def __init__(self, log: str | os.PathLike, store: Store, *, compact_min_files: int = MIN_FILES, drain_idle: float = 5.0):
        self.store = store
        self.follower = Follower(log, store, compact_min_files=compact_min_files, drain_idle=drain_idle)
        self.window = RecentRows(store, self.follower.sources)
        self._status: dict | None = None
        self._stale = True
        self.rows = 0
        self.file_id: str | None = None  # lineage of the latest read
        self._last_line: int | None = None
        self.last_data: float | None = None  # monotonic time of the last read that stored rows
        self.errors: list[str] = []

    def on_step(self, res: StepResult) -> None:
        if res.changed:
            self._stale = True
            self.last_data = time.monotonic()
            self.rows += sum(sum(r.rows.values()) for r in res.reports)
            self.file_id = res.reports[-1].file_id

    def status(self) -> dict:
        """The status now; the store is only read again after a read stored something."""
        if self._stale or self._status is None:
            self.window.refresh()
            self._status = compute_status(self.window.frames)
            self._last_line = self._newest_line()
            self._stale = False
        f = self.follower
        follow = {
            "log": str(f.path),
            "store": str(self.store.path),
            "following": f.current is not None,
            "draining": len(f.draining),
            "file_id": self.file_id,
            "last_line": self._last_line,  # the newest line of that lineage with a row
            "reads": f.reads,
            "rows_written": self.rows,
            "last_data_s_ago": None if self.last_data is None else round(time.monotonic() - self.last_data, 3),
            "updated": datetime.now().isoformat(timespec="milliseconds"),
        }
        return {**self._status, "follow": follow}

    def _newest_line(self) -> int | None:
        lines = [
            df.filter(pl.col("file_id") == self.file_id)["line_no"].max() for df in self.window.frames.values() if df.height
        ]
        lines = [n for n in lines if n is not None]
        return max(lines) if lines else None

    def run(
        self,
        stop: threading.Event,
        *,
        interval: float,
        on_status: Callable[[dict], None] | None,
        on_change: Callable[[], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
        wake: threading.Event | None = None,
    ) -> None:
        def step(res: StepResult) -> None:
            self.on_step(res)
            if res.changed and on_change:
                on_change()

        run(
            self.follower,
            stop=stop,
            interval=interval,
            on_step=step,
            on_tick=(lambda: on_status(self.status())) if on_status else None,
            on_error=on_error,
            wake=wake,
        )
        self.follower.close()
