"""Model-based test of the follower: random appends, partial lines, rotations, copytruncates,
restarts and crashes mid-read, against a model of what the store must hold.

The model keeps every lineage's bytes (one per file content: the first file, each file created
after a rotation, each file emptied by copytruncate) and how much of each the follower must
have stored: at every step, the complete lines of the file under the name; for a rotated file,
all of it (it is drained, its unterminated last line included, since drain_idle is 0).  Every
old lineage also sits next to the log (renamed, or the copy copytruncate made): at a
follower's first step, and at the step that sees a copytruncate, each one the store has
already begun is finished from there.  At the end, the store's rows must be exactly what a
batch ingest of those bytes gives, lineage by lineage: every line once, none twice, none from
bytes the follower could not have seen.

Every record carries a unique timestamp (base + uid seconds), so each row says which line it
came from and so which lineage, whatever file_id the follower's first read gave it (a row
without one, should the parser make any, takes the lineage of its file_id).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from loglens.follow.follower import Follower
from loglens.ingest import ingest_file
from loglens.schema import LINE_TABLES
from loglens.store import Store

BASE = datetime(2026, 3, 1)
KINDS = ["decode", "prefill", "http", "event", "retraction", "traceback", "truncated", "blank"]
SINGLE = ["decode", "prefill", "http", "event", "retraction"]


def stamp(uid: int, dp: int | None = None) -> str:
    ranks = f" DP{dp}" if dp is not None else ""
    return f"[{(BASE + timedelta(seconds=uid)):%Y-%m-%d %H:%M:%S}{ranks}]"


def render(kind: str, uid: int) -> str:
    """One log record (one or more physical lines, each ending in a newline)."""
    dp = uid % 2
    if kind == "decode":
        return f"{stamp(uid, dp)} Decode batch. #running-req: {uid % 50}, #token: {uid * 7}, token usage: 0.{uid % 100:02d}, cuda graph: {uid % 3 > 0}, gen throughput (token/s): {uid % 997}.25, #queue-req: {uid % 5}\n"
    if kind == "prefill":
        return f"{stamp(uid, dp)} Prefill batch. #new-seq: 1, #new-token: {uid}, #cached-token: 0, token usage: 0.10, #running-req: 1, #queue-req: 0\n"
    if kind == "http":
        return f'{stamp(uid)} INFO:     127.0.0.1:{1000 + uid % 60000} - "POST /generate HTTP/1.1" {200 if uid % 7 else 503} OK\n'
    if kind == "event":
        return f"{stamp(uid)} Load weight end. elapsed={uid}.5 s, avail mem=12.5 GB\n"
    if kind == "retraction":
        return f"{stamp(uid, dp)} KV cache pool is full. Retract requests. #retracted_reqs: {uid % 9 + 1}, #new_token_ratio: 0.5 -> 0.7\n"
    if kind == "traceback":  # as SGLang prints it: the traceback starts on the prefixed line
        return (
            f"{stamp(uid)} Scheduler hit an exception: Traceback (most recent call last):\n"
            f'  File "scheduler.py", line {uid}, in event_loop\n'
            f"ValueError: boom {uid}\n"
        )
    if kind == "truncated":
        return f"{stamp(uid, dp)} Decode batch. #running-req: 8, #tok\n"
    return "\n"


class TailModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="tail-model-"))
        self.log = self.dir / "server.log"
        self.store = Store(self.dir / "store")
        self.lineages: list[bytearray] = []  # every content the name has held
        self.current: int | None = None  # lineage under the name (None: no file)
        self.held: int | None = None  # lineage the follower has open
        self.expect: dict[int, int] = {}  # lineage → bytes the store must hold
        self.uid = 0
        self.rest: bytes | None = None  # the rest of a line written in part
        self.rotations = 0
        self.follower = None
        self.fresh = True  # the follower has not stepped yet: it will look for rotated files
        self.truncated = False  # the file it holds was emptied in place since its last step

    @initialize(exists=st.booleans())
    def start(self, exists):
        if exists:
            self._append(b"")  # an empty file; else the follower waits for one
        self.follower = self._new_follower()

    def _new_follower(self) -> Follower:
        return Follower(self.log, self.store, drain_idle=0.0, compact_min_files=2)

    # ---- the world --------------------------------------------------------------------
    def _append(self, data: bytes) -> None:
        if self.current is None:
            self.lineages.append(bytearray())
            self.current = len(self.lineages) - 1
        with open(self.log, "ab") as f:
            f.write(data)
        self.lineages[self.current] += data

    def _records(self, kinds: list[str]) -> bytes:
        out = []
        for k in kinds:
            self.uid += 1
            out.append(render(k, self.uid))
        return "".join(out).encode()

    @rule(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=6))
    def append_lines(self, kinds):
        if kinds[0] == "blank" and (self.current is None or not self.lineages[self.current]):
            # a file starts with a line of its own: two files holding only blank lines are the
            # same bytes, and ingest (by design) keeps the same bytes once
            kinds = ["event", *kinds]
        data = (self.rest or b"") + self._records(kinds)
        self.rest = None
        self._append(data)

    @precondition(lambda self: self.rest is None)
    @rule(kind=st.sampled_from(SINGLE), cut=st.floats(0.0, 1.0))
    def append_partial(self, kind, cut):
        line = self._records([kind])
        at = 30 + int(cut * (len(line) - 31))  # past the timestamp, before the newline
        self._append(line[:at])
        self.rest = line[at:]

    @precondition(lambda self: self.rest is not None)
    @rule()
    def complete_partial(self):
        rest, self.rest = self.rest, None
        self._append(rest)

    @precondition(lambda self: self.current is not None)
    @rule(create_new=st.booleans())
    def rotate(self, create_new):
        self.rotations += 1
        os.rename(self.log, self.dir / f"server.log.{self.rotations}")
        self.current, self.rest = None, None
        if create_new:
            self._append(b"")

    @precondition(lambda self: self.current is not None)
    @rule()
    def copytruncate(self):
        self.rotations += 1
        shutil.copyfile(self.log, self.dir / f"server.log.{self.rotations}")
        os.truncate(self.log, 0)
        old = self.current
        self.lineages.append(bytearray())
        self.current = len(self.lineages) - 1
        if self.held == old:
            self.held = self.current  # same file, same handle, new content
            self.truncated = self.truncated or self.expect.get(old, 0) > 0  # it had read some: it notices
        self.rest = None

    @rule()
    def restart(self):
        self.follower = self._new_follower()  # the old one is dropped as is, as by kill -9
        self.held = None
        self.fresh, self.truncated = True, False

    # ---- the follower -------------------------------------------------------------------
    def _model_step(self) -> None:
        if self.fresh or self.truncated:
            for idx, content in enumerate(self.lineages):
                if idx != self.current and self.expect.get(idx, 0) > 0:
                    self.expect[idx] = len(content)  # its rotated file is found and finished
            self.fresh = self.truncated = False
        if self.held is not None and self.held != self.current:
            self.expect[self.held] = len(self.lineages[self.held])  # drained, last line and all
            self.held = None
        if self.current is not None:
            self.held = self.current
            content = self.lineages[self.current]
            self.expect[self.current] = content.rfind(b"\n") + 1

    @rule()
    def step(self):
        self.follower.step()
        self._model_step()

    @precondition(lambda self: self.held is not None and self.held == self.current and not (self.fresh or self.truncated))
    @rule(after=st.integers(1, 8))
    def crash_during_step(self, after):
        """The `after`-th Parquet write of the next step lands, then the process dies."""
        writes, committed = [0], [False]
        real = self.store.write

        def write(table, df, name=None, **kw):
            out = real(table, df, name=name, **kw)
            writes[0] += 1
            if table == "files" and re.search(r"-read\d+$", name or ""):
                committed[0] = True  # an ingest commit point (a merged `files` file is `-reads…`)
            if writes[0] == after:
                raise KeyboardInterrupt("killed")  # not an Exception: nothing may catch it
            return out

        self.store.write = write
        try:
            self.follower.step()
        except KeyboardInterrupt:
            pass
        finally:
            del self.store.write
        if committed[0]:
            self._model_step()
        self.restart()

    def teardown(self):
        try:
            if self.follower is not None:
                self.follower.step()
                self._model_step()
                check_store(self)
        finally:
            if self.follower is not None:
                self.follower.close()
            shutil.rmtree(self.dir, ignore_errors=True)


def _uid() -> pl.Expr:
    return ((pl.col("ts") - pl.lit(BASE)).dt.total_seconds()).cast(pl.Int64)


def _with_lineage(store: Store, lineage_of: dict[int, int]) -> dict[str, pl.DataFrame]:
    """Every table's rows with `lineage`: by the row's timestamp, else by its file_id."""
    tables = {t: store.read(t).with_columns(uid=_uid()) for t in LINE_TABLES}
    by_ts = pl.concat([df.select("uid", "file_id") for df in tables.values()]).drop_nulls("uid")
    by_ts = by_ts.with_columns(lineage=pl.col("uid").replace_strict(lineage_of, return_dtype=pl.Int64))
    fid_lineage = by_ts.select("file_id", "lineage").unique()
    # one file_id per lineage, a different one for each
    assert fid_lineage["lineage"].n_unique() == fid_lineage.height == fid_lineage["file_id"].n_unique(), fid_lineage
    out = {}
    for t, df in tables.items():
        df = df.join(fid_lineage, on="file_id", how="left")
        cols = [c for c in df.columns if c not in ("source", "file_id")]
        out[t] = df.select(cols).sort(cols, nulls_last=True)
    return out


def check_store(m: TailModel) -> None:
    expected_dir = m.dir / "expected"
    expected_dir.mkdir()
    exp_store = Store(expected_dir / "store")
    lineage_of: dict[int, int] = {}
    for idx, content in enumerate(m.lineages):
        for u in re.findall(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", bytes(content), flags=re.M):
            lineage_of[int((datetime.strptime(u.decode(), "%Y-%m-%d %H:%M:%S") - BASE).total_seconds())] = idx
        n = m.expect.get(idx, 0)
        if n:
            f = expected_dir / f"lineage-{idx}.log"
            f.write_bytes(bytes(content[:n]))
            ingest_file(f, exp_store)  # batch ingest of the same bytes, unterminated last line included
    got, want = _with_lineage(m.store, lineage_of), _with_lineage(exp_store, lineage_of)
    for table in LINE_TABLES:
        g, w = got[table], want[table]
        assert g.equals(w), f"{table}: the store differs from a batch ingest of the same bytes\n got {g.select('lineage', 'line_no', 'uid')}\nwant {w.select('lineage', 'line_no', 'uid')}"
    assert _commits(m.store) == _commits(exp_store)


def _commits(store: Store) -> list[tuple[int, int]]:
    """(lines, blank lines) of each lineage's latest commit point."""
    latest = store.read("files").sort("seq").group_by("file_id").agg(pl.col("lines", "blank_lines").last())
    return sorted(zip(latest["lines"].to_list(), latest["blank_lines"].to_list()))


TailModel.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_follower_matches_batch_ingest = TailModel.TestCase
