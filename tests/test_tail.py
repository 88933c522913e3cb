"""Live mode: status (pure), compaction and its crash safety, follower corner cases, and the
real `loglens tail` in a subprocess (lines in the store within 1 s, SIGTERM, kill -9 resumes)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console
from typer.testing import CliRunner

from loglens.cli import app
from loglens.follow import compact as compaction
from loglens.follow.follower import Follower
from loglens.follow.status import compute_status
from loglens.follow.view import render as render_view
from loglens.follow.view import sparkline
from loglens.follow.window import RecentRows
from loglens.ingest import ingest_file
from loglens.schema import LINE_TABLES, conform
from loglens.store import Store
from parse_util import parse_bytes
from test_tail_model import BASE, render

T0 = datetime(2026, 2, 19, 0, 0, 0)


def frames(text: str) -> dict[str, pl.DataFrame]:
    """Store rows (full schema) for log text, as one source."""
    out = {}
    for t, df in parse_bytes(text.encode()).items():
        if t in LINE_TABLES:
            out[t] = conform(df.with_columns(source=pl.lit("/x/server.log"), file_id=pl.lit("f")), t)
    return out


def dec(sec: float, dp: int | None, gen: float, running=10, queue=0, usage=0.5, graph=True) -> str:
    ts = (T0 + timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S")
    rank = f" DP{dp} TP0" if dp is not None else ""
    return f"[{ts}{rank}] Decode batch, #running-req: {running}, #token: 100, token usage: {usage:.2f}, cuda graph: {graph}, gen throughput (token/s): {gen:.2f}, #queue-req: {queue}\n"


def line(sec: float, msg: str) -> str:
    return f"[{(T0 + timedelta(seconds=sec)):%Y-%m-%d %H:%M:%S}] {msg}\n"


# ---- status: a pure function of rows -----------------------------------------------------
def test_gen_throughput_is_the_latest_line_of_each_dp_stream_summed():
    text = dec(0, 0, 100) + dec(1, 1, 50) + dec(40, 0, 300) + dec(41, 1, 200, graph=False) + dec(42, 0, 400)
    s = compute_status(frames(text))
    assert s["gen_throughput"] == 600.0  # DP0's latest 400 + DP1's latest 200, not a mean
    assert [st["dp_rank"] for st in s["streams"]] == [0, 1]
    assert s["running_req"] == 20 and s["cuda_graph"] is False
    assert {a["id"] for a in s["alerts"]} == {"cuda_graph_off"}
    # a stream silent for longer than stale_s adds nothing to "now"
    s = compute_status(frames(text + dec(100, 0, 500)))
    assert s["gen_throughput"] == 500.0 and s["streams"][1]["decoding"] is False


def test_history_buckets_sum_streams_and_leave_gaps_empty():
    text = dec(0, 0, 100) + dec(5, 0, 300) + dec(6, 1, 50) + dec(31, 0, 80)
    s = compute_status(frames(text), history_s=40, bucket_s=10)
    assert s["gen_throughput_history"]["values"] == [250.0, None, None, 80.0]  # mean 200 + 50; empty buckets
    assert sparkline([0.0, None, 4.0, 8.0]) == "▁ ▅█"


def test_alerts_queue_usage_retractions_errors_and_http():
    text = "".join(dec(i * 10, None, 100, queue=q, usage=0.97) for i, q in enumerate([0, 2, 6, 9, 14]))
    text += line(41, "KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_tokens_gained: 10, #new_token_ratio: 0.5 -> 0.7")
    text += line(42, "Scheduler hit an exception: Traceback (most recent call last):") + '  File "s.py", line 1\nValueError: boom\n'
    text += "".join(line(40 + i % 3, f'INFO:     127.0.0.1:{5000 + i} - "POST /generate HTTP/1.1" {200 if i % 4 else 500} OK') for i in range(12))
    s = compute_status(frames(text))
    assert {a["id"] for a in s["alerts"]} == {"queue_growing", "token_usage_high", "retractions", "errors"}
    assert s["queue_history"] == [0, 2, 6, 9, 14] and s["queue_req"] == 14
    assert s["retractions"] == {"events": 1, "reqs": 3, "last": T0 + timedelta(seconds=41)}
    assert s["errors"]["count"] == 1 and "Scheduler hit an exception" in s["errors"]["last"]
    assert s["http"]["requests"] == 12 and s["http"]["status"] == {"200": 9, "500": 3}
    assert s["http"]["rps"] == round(12 / 42, 2)  # the log covers 42 s of the 60 s window
    json.dumps(s, default=str, allow_nan=False)  # --json-lines can print it


def test_empty_store_and_nan_values_give_a_printable_status():
    s = compute_status({})
    assert s["gen_throughput"] is None and s["alerts"] == [] and s["http"]["requests"] == 0
    s = compute_status(frames(dec(0, None, float("nan"))))
    assert s["gen_throughput"] is None
    json.dumps(s, default=str, allow_nan=False)
    con = Console(record=True, width=120)
    con.print(render_view({**compute_status(frames(dec(0, 0, 10) + dec(0, 1, 20, graph=False))), "follow": {"log": "x.log"}}))
    out = con.export_text()
    assert "30.0 tok/s" in out and "DP1" in out and "CUDA graph" in out


# ---- compaction ------------------------------------------------------------------------
def _grow(log: Path, st: Store, reads: int, per_read: str = "decode") -> None:
    for i in range(reads):
        with open(log, "a") as f:
            f.write(render(per_read, 1000 + i) + render("event", 5000 + i))
        ingest_file(log, st, partial_lines=False)


def _rows(st: Store) -> dict[str, pl.DataFrame]:
    return {t: st.read(t).sort("line_no") for t in LINE_TABLES}


def test_compaction_merges_final_files_only_and_ingest_still_resumes(tmp_path):
    log, st = tmp_path / "a.log", Store(tmp_path / "st")
    _grow(log, st, 10)
    before = _rows(st)
    tails = [p.name for p in st.files_of("events") if p.name.endswith("-tail.parquet")]
    merges = compaction.compact(st, min_files=3)
    assert {m.table for m in merges} == {"decode", "events", "files"}
    assert len(st.files_of("decode")) == 1 and len(st.files_of("files")) == 1
    assert [p.name for p in st.files_of("events") if p.name.endswith("-tail.parquet")] == tails  # not final
    assert all(_rows(st)[t].equals(before[t]) for t in LINE_TABLES)
    _grow(log, st, 2)  # resumes after the merged files, drops only the old tail
    rows = _rows(st)
    assert rows["decode"]["line_no"].is_unique().all() and rows["events"].height == 12 and rows["decode"].height == 12


def test_merges_go_by_size_tier_and_leave_big_files_alone(tmp_path):
    sizes = [200 << 20, 300 << 10, 300 << 10, 300 << 10, 300 << 10, 5 << 10, 5 << 10, 5 << 10, 5 << 10]
    entries = []
    for i, size in enumerate(sizes):
        f = tmp_path / f"{i}.parquet"
        with open(f, "wb") as fh:
            fh.truncate(size)  # sparse: only the size matters here
        entries.append((i, f))
    runs = compaction._runs(entries, min_files=3)
    assert [[p.name for p in r] for r in runs] == [["1.parquet", "2.parquet", "3.parquet", "4.parquet"], ["5.parquet", "6.parquet", "7.parquet", "8.parquet"]]
    assert compaction._runs(entries[:4], min_files=3) == []  # the 200 MB file is never rewritten


@pytest.mark.parametrize("killed_after", ["journal", "merged"])
def test_a_merge_killed_midway_is_finished_or_forgotten_on_start(tmp_path, monkeypatch, killed_after):
    log, st = tmp_path / "a.log", Store(tmp_path / "st")
    _grow(log, st, 6)
    before = _rows(st)

    def die(*a, **k):
        raise KeyboardInterrupt

    if killed_after == "journal":
        monkeypatch.setattr(st, "write", die)
    else:
        monkeypatch.setattr(compaction, "_finish", die)
    with pytest.raises(KeyboardInterrupt):
        compaction.compact(st, min_files=3)
    monkeypatch.undo()
    if killed_after == "merged":
        assert st.read("decode").height == 2 * before["decode"].height  # the window a journal covers
        assert compaction.superseded_files(st, "decode")  # a reader can skip what the journal names
    Follower(log, st)  # start-up replays the journal
    assert not list((st.path / ".compaction").glob("*.json"))
    assert all(_rows(st)[t].equals(before[t]) for t in LINE_TABLES)


# ---- follower corner cases ----------------------------------------------------------------
def test_waits_for_a_file_that_does_not_exist_yet_then_follows_a_deleted_one_to_its_end(tmp_path):
    log, st = tmp_path / "later" / "server.log", Store(tmp_path / "st")
    f = Follower(log, st, drain_idle=0)
    assert not f.step().reports and f.current is None
    log.parent.mkdir()
    log.write_text(render("decode", 1) + render("http", 2)[:40])
    assert f.step().reports[0].rows == {"decode": 1}
    with open(log, "a") as fh:  # completed, then the file is deleted while held open
        fh.write(render("http", 2)[40:] + render("event", 3))
    log.unlink()
    res = f.step()
    assert res.rotated and f.current is None and not f.draining
    assert Store(st.path).read("http").height == 1 and Store(st.path).read("events").height == 1


def test_rewritten_in_place_to_the_same_length_is_a_new_lineage(tmp_path):
    log, st = tmp_path / "server.log", Store(tmp_path / "st")
    f = Follower(log, st)
    log.write_text(render("decode", 2) + render("decode", 4))
    f.step()
    size = log.stat().st_size
    data = (render("decode", 5) + render("decode", 7)).encode()
    assert len(data) == size
    with open(log, "r+b") as fh:  # copytruncate, and the server wrote as much again before we looked
        fh.truncate(0)
        fh.write(data)
    res = f.step()
    assert res.rewritten and res.reports[0].status == "new"
    assert sorted(st.read("decode")["token"].to_list()) == [14, 28, 35, 49]


def test_copytruncate_lines_written_before_the_copy_are_read_from_the_copy(tmp_path):
    log, st = tmp_path / "server.log", Store(tmp_path / "st")
    f = Follower(log, st, drain_idle=0)
    log.write_text(render("decode", 1))
    f.step()
    with open(log, "a") as fh:  # written after our last read ...
        fh.write(render("decode", 2) + render("http", 3)[:60])
    (tmp_path / "server.log.1").write_bytes(log.read_bytes())  # ... then logrotate's copytruncate
    os.truncate(log, 0)
    with open(log, "a") as fh:
        fh.write(render("decode", 4))
    res = f.step()
    assert res.rewritten
    assert sorted(st.read("decode")["token"].to_list()) == [7, 14, 28]
    assert st.read("rejects").height == 1  # the copy's unfinished last line: nobody will finish it
    assert st.read("decode").group_by("file_id").len().height == 2  # two lineages, rows once each


def test_a_restart_finishes_a_file_rotated_while_nobody_followed(tmp_path):
    log, st = tmp_path / "server.log", Store(tmp_path / "st")
    log.write_text(render("decode", 1))
    Follower(log, st).step()
    with open(log, "a") as fh:
        fh.write(render("decode", 2))
    log.rename(tmp_path / "server.log.1")  # rotated while the follower was down
    log.write_text(render("decode", 3))
    (tmp_path / "server.log.2").write_text(render("decode", 9))  # not ours: never read
    Follower(log, st, drain_idle=0).step()
    assert sorted(st.read("decode")["token"].to_list()) == [7, 14, 21]
    assert set(st.read("decode")["source"].to_list()) == {str(log.resolve())}


def test_a_first_read_killed_before_its_commit_leaves_nothing_once_restarted(tmp_path, monkeypatch):
    log, st = tmp_path / "server.log", Store(tmp_path / "st")
    log.write_text(render("decode", 1) + render("event", 2) + render("decode", 3))
    f = Follower(log, st)
    real = st.write

    def killed_at_commit(table, df, name=None, **kw):
        if table == "files":
            raise KeyboardInterrupt
        return real(table, df, name=name, **kw)

    monkeypatch.setattr(st, "write", killed_at_commit)
    with pytest.raises(KeyboardInterrupt):
        f.step()
    monkeypatch.undo()
    assert st.read("decode").height == 2  # uncommitted rows under the file_id of a 3-line head
    with open(log, "a") as fh:
        fh.write(render("decode", 4))  # the head grows: the next read has another file_id
    Follower(log, st).step()
    assert sorted(st.read("decode")["token"].to_list()) == [7, 21, 28]


def test_recent_rows_keep_one_copy_of_a_rewritten_tail(tmp_path):
    log, st = tmp_path / "server.log", Store(tmp_path / "st")
    f = Follower(log, st, compact_min_files=2)
    win = RecentRows(st, f.sources)
    for i in range(6):
        with open(log, "a") as fh:
            fh.write(render("decode", 10 + i) + render("traceback", 20 + i))  # a held-back record each time
        f.step()
        win.refresh()
    assert win.frames["decode"].height == 6 and win.frames["events"].height == 6
    assert win.frames["events"].sort("line_no")["line_end"].to_list() == st.read("events").sort("line_no")["line_end"].to_list()


def test_without_file_events_the_poll_keeps_the_store_current(tmp_path, monkeypatch):
    from loglens.follow import loop

    monkeypatch.setattr(loop.Watcher, "ensure", lambda self: None)  # no inotify (NFS, containers)
    log, st = tmp_path / "server.log", Store(tmp_path / "st")
    stop, ticks = threading.Event(), []
    runner = threading.Thread(target=loop.run, args=(Follower(log, st),), kwargs=dict(stop=stop, interval=0.3, on_tick=lambda: ticks.append(1)))
    runner.start()
    try:
        time.sleep(0.2)
        log.write_text(render("decode", 1))
        assert _wait(lambda: _has_token(st, 7), 5, "not stored") < 1.0  # polled every interval
        with open(log, "a") as fh:
            fh.write(render("decode", 2))
    finally:
        stop.set()
        runner.join(timeout=10)
    assert _has_token(st, 14) and ticks  # the last read on the way out stored the last line


def test_cli_refuses_a_directory_and_a_compressed_log(tmp_path):
    r = CliRunner().invoke(app, ["tail", str(tmp_path), "--store", str(tmp_path / "st")])
    assert r.exit_code == 1 and "Error:" in r.output and "directory" in r.output
    r = CliRunner().invoke(app, ["tail", str(tmp_path / "x.log.gz"), "--store", str(tmp_path / "st")])
    assert r.exit_code == 1 and "ingest" in r.output
    r = CliRunner().invoke(app, ["tail", str(tmp_path / "x.log"), "--interval", "0"])
    assert r.exit_code == 2


# ---- the real command ---------------------------------------------------------------------
# Runs `loglens tail`; with a kill point "N:TEXT" the process SIGKILLs itself right after its
# N-th Parquet write whose name contains TEXT (a data file, a commit point `-read…`, a merged
# file `-compact…`/`-reads…` before the files it replaces are unlinked).
_DRIVER = """
import os, signal, sys
from loglens.store import Store
n, text = sys.argv[1].split(":", 1)
left, real = [int(n)], Store.write
def write(self, table, df, name=None, **kw):
    out = real(self, table, df, name=name, **kw)
    if text in (name or ""):
        left[0] -= 1
        if left[0] == 0:
            os.kill(os.getpid(), signal.SIGKILL)
    return out
Store.write = write
sys.argv = ["loglens", *sys.argv[2:]]
from loglens.cli import main
main()
"""


def _start(log: Path, store: Path, tmp: Path, *extra: str, kill_at: str = "0:") -> tuple[subprocess.Popen, Path, Path]:
    out, err = tmp / f"out-{time.monotonic_ns()}.txt", tmp / f"err-{time.monotonic_ns()}.txt"
    cmd = [sys.executable, "-c", _DRIVER, kill_at, "tail", str(log), "--store", str(store), *extra]
    proc = subprocess.Popen(cmd, stdout=open(out, "w"), stderr=open(err, "w"))
    _wait(lambda: "following" in err.read_text() or proc.poll() is not None, 30, f"follower did not start: {err}")
    return proc, out, err


def _wait(cond, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(what)
        time.sleep(0.02)
    return time.monotonic() - t0


def _has_token(store: Store, token: int) -> bool:
    files = store.files_of("decode")
    return bool(files) and token in pl.read_parquet([str(p) for p in files], columns=["token"])["token"].to_list()


def test_tail_subprocess_stores_lines_within_a_second_and_stops_on_sigterm(tmp_path):
    log, store = tmp_path / "server.log", tmp_path / "st"
    proc, out, err = _start(log, store, tmp_path, "--json-lines", "--interval", "0.2")
    try:
        lags = []
        for uid in (1, 2, 3):  # the first append creates the file the follower waits for
            with open(log, "a") as fh:
                fh.write(render("http", 100 + uid) + render("decode", uid))
            lags.append(_wait(lambda: _has_token(Store(store), uid * 7), 5, "line not stored"))
        assert max(lags) < 1.0, lags
        _wait(lambda: '"log_time": "' + (BASE + timedelta(seconds=103)).isoformat() in out.read_text(), 5, "status not updated")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        proc.kill()
    status = json.loads(out.read_text().splitlines()[-1])
    assert status["http"]["requests"] == 3 and status["follow"]["following"] is True
    assert "Traceback" not in err.read_text()


def test_kill_9_mid_run_then_restart_resumes_exactly(tmp_path):
    log, store = tmp_path / "server.log", tmp_path / "st"
    rnd = random.Random(7)
    kinds = ["decode", "decode", "http", "http", "prefill", "event", "traceback", "blank", "truncated"]
    uid, rest = 0, ""
    # killed: in the very first read (its file_id changes as the head grows), mid-read, at a
    # commit, inside a merge of data files and of `files` rows (--compact-files 2 merges
    # often), and last from outside at a random moment
    for kill_at in ["1:", "3:", "2:-read0", "1:-compact", "1:-reads", "0:"]:
        proc, _, _ = _start(log, store, tmp_path, "--no-view", "--compact-files", "2", kill_at=kill_at)
        deadline = time.monotonic() + 8
        while proc.poll() is None and time.monotonic() < deadline:
            chunk = rest
            for _ in range(rnd.randint(20, 200)):
                uid += 1
                chunk += render(rnd.choice(kinds), uid)
            cut = rnd.randint(len(chunk) - 40, len(chunk))  # often leave a line unfinished
            with open(log, "a") as fh:
                fh.write(chunk[:cut])
            rest = chunk[cut:]
            time.sleep(rnd.uniform(0.0, 0.1))
            if kill_at == "0:" and time.monotonic() > deadline - 7 + rnd.uniform(0, 1):
                proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    with open(log, "a") as fh:
        fh.write(rest + render("decode", uid + 1))
    proc, _, err = _start(log, store, tmp_path, "--no-view")
    _wait(lambda: _has_token(Store(store), (uid + 1) * 7), 20, "follower did not catch up")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0, err.read_text()
    batch = Store(tmp_path / "batch")
    copy = tmp_path / "copy.log"
    copy.write_bytes(log.read_bytes())
    ingest_file(copy, batch)
    for t in LINE_TABLES:
        got = Store(store).read(t).drop("source", "file_id")
        want = batch.read(t).drop("source", "file_id")
        assert got.sort(got.columns, nulls_last=True).equals(want.sort(want.columns, nulls_last=True)), t
    assert not list((store / ".compaction").glob("*.json"))
