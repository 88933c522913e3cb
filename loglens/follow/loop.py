"""When to look at the log: file events (watchdog) on its directory, and a slow poll as a safety net.

An event only wakes the loop; reads are batched (`batch_s`) so a server writing hundreds of
lines a second causes a few reads a second, not hundreds, and lines still reach the store
well within a second.  The poll catches what events miss: a directory that does not exist
yet, a filesystem without inotify (NFS, some containers), a log that is a symlink into
another directory.  Without working events the poll runs every `interval` instead, so the
store stays current within the same bound.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from watchdog.events import (
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from loglens.follow.follower import Follower, StepResult

POLL_S = 2.0
BATCH_S = 0.2
_EVENTS = [FileModifiedEvent, FileCreatedEvent, FileMovedEvent, FileDeletedEvent, FileClosedEvent]


class _Wake(FileSystemEventHandler):
    def __init__(self, follower: Follower, wake: threading.Event):
        self.follower = follower
        self.wake = wake
        self.name = os.fsencode(str(follower.path))

    def on_any_event(self, event: FileSystemEvent) -> None:
        paths = {os.fsencode(event.src_path), os.fsencode(event.dest_path or "")}
        # other files in the same directory only matter while a rotated file drains (its name
        # is unknown) or when files appear, move or vanish (a rotation in progress)
        if self.name in paths or self.follower.draining or event.event_type in ("created", "moved", "deleted"):
            self.wake.set()


class Watcher:
    """Watches the log's directory once it exists; `active` tells whether events arrive."""

    def __init__(self, follower: Follower, wake: threading.Event):
        self.handler = _Wake(follower, wake)
        self.directory = follower.path.parent
        self.observer = None

    @property
    def active(self) -> bool:
        return self.observer is not None and self.observer.is_alive()

    def ensure(self) -> None:
        if self.active or not self.directory.is_dir():
            return
        self.stop()
        try:
            obs = Observer()
            obs.schedule(self.handler, str(self.directory), recursive=False, event_filter=_EVENTS)
            obs.daemon = True
            obs.start()
            self.observer = obs
        except OSError:
            self.observer = None  # inotify unavailable or out of watches: the poll does the work

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            if self.observer.is_alive():
                self.observer.join(timeout=2)
            self.observer = None


def run(
    follower: Follower,
    *,
    stop: threading.Event,
    interval: float = 1.0,
    on_step: Callable[[StepResult], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    on_error: Callable[[Exception], None] | None = None,
    poll_s: float = POLL_S,
    batch_s: float = BATCH_S,
    wake: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Follow until `stop` is set (a signal handler sets it, and `wake` to end the wait), then
    make one last read so every complete line written so far is stored."""
    wake = wake or threading.Event()
    watcher = Watcher(follower, wake)
    watcher.ensure()
    now = clock()
    next_tick = now + interval
    last_step = -float("inf")
    dirty = True  # look at once: lines may have arrived while nobody was following
    try:
        while not stop.is_set():
            now = clock()
            poll_every = poll_s if watcher.active else min(poll_s, interval)
            if dirty:
                due = max(now, last_step + batch_s)
            else:
                due = last_step + poll_every
            deadline = min(due, next_tick) if on_tick else due
            if deadline > now:
                if dirty:
                    stop.wait(deadline - now)  # already due for a read: more events change nothing
                elif wake.wait(deadline - now):
                    wake.clear()
                    dirty = True
                    continue  # a read is due batch_s after the previous one, not at once
            if stop.is_set():
                break
            now = clock()
            if now >= due:
                dirty = False
                last_step = now
                _step(follower, on_step, on_error)
                watcher.ensure()  # the directory may have appeared, or inotify recovered
            if on_tick and now >= next_tick:
                on_tick()
                next_tick = max(next_tick + interval, now + interval / 10)
    finally:
        _step(follower, on_step, on_error)
        watcher.stop()


def _step(follower: Follower, on_step, on_error) -> None:
    try:
        res = follower.step()
    except Exception as e:  # a service keeps following: disk full or a vanished file is retried
        if on_error is None:
            raise
        on_error(e)
        return
    if on_step:
        on_step(res)
