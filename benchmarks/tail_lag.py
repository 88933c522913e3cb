"""Measure live mode: `loglens tail` as a real subprocess on a growing log.

    python benchmarks/tail_lag.py [--lines 150] [--idle 20] [--rates 1000,5000,20000,50000] [--json out.json]

1. lag: lines are appended one at a time at random intervals (50–400 ms); for each, the time
   until a row of that line is in the store (the benchmark watches the table folders for new
   Parquet files) and until a `--json-lines` status shows it (`follow.last_line`), p50/p99.
2. idle CPU: nothing is written for `--idle` seconds; the follower's CPU seconds over that
   time (all its threads, from /proc/PID/task/*/schedstat, ns resolution), for `--json-lines`
   (a status per second) and for `--no-view` (the service mode).
3. sustained rate: a realistic mix (Decode / Prefill / HTTP / other lines) is appended in
   blocks every 50 ms at each offered rate for 5 s; reported: lines/s stored, the store lag
   at the end of the burst (p99 over blocks), and the follower's CPU per second.  The highest
   rate with a p99 lag under 1 s is the sustained rate.

The follower runs with its defaults (--interval 0.5); the machine's other load is not
controlled, so run it on a quiet machine and read the numbers as such.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

TABLES = ["decode", "prefill", "http", "events", "rejects"]
T0 = datetime(2026, 2, 19, 0, 0, 0)
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU time of the process, threads that ended included (10 ms resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def thread_cpu_ns(pid: int) -> dict[str, int]:
    """CPU ns of each live thread (schedstat): for idle periods, where /proc/PID/stat's 10 ms
    ticks round everything to 0."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            pass
    return out


def idle_cpu(pid: int, seconds: float, wait=time.sleep) -> dict:
    """CPU seconds over `seconds`: per-thread ns for the threads alive throughout (a thread
    that ends takes its counter with it), and the coarse whole-process figure."""
    t0, c0 = thread_cpu_ns(pid), cpu_seconds(pid)
    wait(seconds)
    t1, c1 = thread_cpu_ns(pid), cpu_seconds(pid)
    fine = sum(t1[k] - t0[k] for k in t0.keys() & t1.keys()) / 1e9
    return {"cpu_s": round(fine, 4), "cpu_s_coarse": round(c1 - c0, 2), "seconds": seconds}


def mix_lines(n: int, start_s: float, rnd: random.Random) -> list[str]:
    """`n` realistic lines: 40% Decode (2 DP ranks), 20% Prefill, 35% HTTP, 5% other."""
    out = []
    for i in range(n):
        ts = (T0 + timedelta(seconds=start_s + i * 0.001)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        r = rnd.random()
        if r < 0.4:
            b = rnd.randint(1, 256)
            out.append(f"[{ts} DP{i % 2} TP0] Decode batch, #running-req: {b}, #token: {b * 900}, token usage: {b / 300:.2f}, cuda graph: {b <= 160}, gen throughput (token/s): {b * 38.5:.2f}, #queue-req: {rnd.randint(0, 9)}, \n")
        elif r < 0.6:
            out.append(f"[{ts} DP{i % 2} TP0] Prefill batch, #new-seq: 1, #new-token: {rnd.randint(10, 4000)}, #cached-token: 0, token usage: 0.30, #running-req: 12, #queue-req: 3, \n")
        elif r < 0.95:
            out.append(f'[{ts}] INFO:     127.0.0.1:{rnd.randint(1024, 65535)} - "POST /generate HTTP/1.1" 200 OK\n')
        else:
            out.append(f"[{ts}] Cache flushed successfully!\n")
    return out


class StoreWatcher(threading.Thread):
    """Newest line number with a row in the store, and when each line first had one."""

    def __init__(self, store: Path):
        super().__init__(daemon=True)
        self.store = store
        self.seen: set[tuple[str, int]] = set()
        self.newest = 0
        self.history: list[tuple[float, int]] = []  # (time, newest line stored)
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            for t in TABLES:
                try:
                    entries = list(os.scandir(self.store / t))
                except OSError:
                    continue
                for e in entries:
                    if not e.name.endswith(".parquet"):
                        continue
                    try:
                        key = (e.name, e.inode())
                        if key in self.seen:
                            continue
                        self.seen.add(key)
                        n = pl.read_parquet(e.path, columns=["line_no"])["line_no"].max()
                    except Exception:
                        continue
                    if n is not None and n > self.newest:
                        self.newest = n
                        self.history.append((time.monotonic(), n))
            time.sleep(0.005)

    def time_of(self, line: int) -> float | None:
        for t, n in self.history:
            if n >= line:
                return t
        return None


class JsonWatcher(threading.Thread):
    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.history: list[tuple[float, int]] = []

    def run(self) -> None:
        for raw in self.stream:
            try:
                last = json.loads(raw)["follow"]["last_line"] or 0
            except (ValueError, KeyError):
                continue
            self.history.append((time.monotonic(), last))

    def time_of(self, line: int) -> float | None:
        for t, n in self.history:
            if n >= line:
                return t
        return None


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else float("nan")


def start(log: Path, store: Path, *mode: str) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from loglens.cli import main; main()", "tail", str(log), "--store", str(store), *mode]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while "following" not in proc.stderr.readline():
        pass
    return proc


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def measure_lag(work: Path, lines: int, idle_s: float, rnd: random.Random) -> dict:
    log, store = work / "lag.log", work / "lag-store"
    proc = start(log, store, "--json-lines")
    sw, jw = StoreWatcher(store), JsonWatcher(proc.stdout)
    sw.start()
    jw.start()
    written: dict[int, float] = {}
    with open(log, "a") as f:
        for i in range(1, lines + 1):
            f.write(mix_lines(1, i, rnd)[0])
            f.flush()
            written[i] = time.monotonic()
            time.sleep(rnd.uniform(0.05, 0.4))
    time.sleep(2.5)
    store_lag = [sw.time_of(i) - t for i, t in written.items() if sw.time_of(i) is not None]
    json_lag = [jw.time_of(i) - t for i, t in written.items() if jw.time_of(i) is not None]
    idle_json = idle_cpu(proc.pid, idle_s)
    sw.stop = True
    rc = stop(proc)
    return {
        "lines": lines,
        "stored": len(store_lag),
        "store_lag_p50_s": round(pct(store_lag, 50), 3),
        "store_lag_p99_s": round(pct(store_lag, 99), 3),
        "store_lag_max_s": round(max(store_lag), 3),
        "json_lag_p50_s": round(pct(json_lag, 50), 3),
        "json_lag_p99_s": round(pct(json_lag, 99), 3),
        "idle_json_lines": idle_json,
        "exit_code": rc,
    }


def measure_view_lag(work: Path, lines: int, idle_s: float, rnd: random.Random) -> dict:
    """Append → the live view (in a pseudo-terminal) shows the line's timestamp as its log time."""
    import pty
    import select

    log, store = work / "view.log", work / "view-store"
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real command, on a terminal
        os.environ.update(COLUMNS="140", LINES="40")
        os.execvp(sys.executable, [sys.executable, "-c", "from loglens.cli import main; main()", "tail", str(log), "--store", str(store)])
    screen: list[tuple[float, bytes]] = []

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if select.select([fd], [], [], 0.01)[0]:
                try:
                    screen.append((time.monotonic(), os.read(fd, 1 << 16)))
                except OSError:
                    return

    pump(3)  # started, first frame drawn
    lags = []
    for i in range(1, lines + 1):
        line = mix_lines(1, 1000 + i, rnd)[0]
        marker = ("log time " + (T0 + timedelta(seconds=1000 + i)).strftime("%Y-%m-%d %H:%M:%S")).encode()
        with open(log, "a") as f:
            f.write(line)
        t, start = time.monotonic(), len(screen)
        seen = None
        while seen is None and time.monotonic() - t < 5:
            pump(0.01)
            seen = next((ts for ts, chunk in screen[start:] if marker in chunk), None)
        if seen is not None:
            lags.append(seen - t)
        pump(rnd.uniform(0.05, 0.4))
    pump(2)
    idle = idle_cpu(pid, idle_s, pump)  # the view redraws once a second
    os.kill(pid, signal.SIGTERM)
    pump(2)
    _, status = os.waitpid(pid, 0)
    return {
        "lines": lines,
        "shown": len(lags),
        "view_lag_p50_s": round(pct(lags, 50), 3),
        "view_lag_p99_s": round(pct(lags, 99), 3),
        "idle_view": idle,
        "exit_code": os.waitstatus_to_exitcode(status),
    }


def measure_idle_service(work: Path, idle_s: float) -> dict:
    log, store = work / "idle.log", work / "idle-store"
    log.write_text("".join(mix_lines(100, 0, random.Random(1))))
    proc = start(log, store, "--no-view")
    time.sleep(3)  # the backlog is read, the view-less loop settles
    used = idle_cpu(proc.pid, idle_s)
    stop(proc)
    return used


def measure_rate(work: Path, rate: int, seconds: float, rnd: random.Random) -> dict:
    log, store = work / f"rate-{rate}.log", work / f"rate-{rate}-store"
    proc = start(log, store, "--no-view")
    sw = StoreWatcher(store)
    sw.start()
    block_s = 0.05
    per_block = max(1, int(rate * block_s))
    blocks = int(seconds / block_s)
    text = ["".join(mix_lines(per_block, b * block_s, rnd)) for b in range(blocks)]
    c0, t0 = cpu_seconds(proc.pid), time.monotonic()
    ends: list[tuple[int, float]] = []
    with open(log, "a") as f:
        for b, chunk in enumerate(text):
            f.write(chunk)
            f.flush()
            ends.append(((b + 1) * per_block, time.monotonic()))
            time.sleep(max(0.0, t0 + (b + 1) * block_s - time.monotonic()))
    wrote_s = time.monotonic() - t0
    total = blocks * per_block
    deadline = time.monotonic() + 60
    while sw.newest < total and time.monotonic() < deadline:
        time.sleep(0.01)
    done = time.monotonic()
    cpu = cpu_seconds(proc.pid) - c0
    sw.stop = True
    stop(proc)
    lags = [sw.time_of(n) - t for n, t in ends if sw.time_of(n) is not None]
    return {
        "offered_lines_s": rate,
        "achieved_write_lines_s": round(total / wrote_s),
        "stored_lines_s": round(total / (done - t0)),
        "lag_p50_s": round(pct(lags, 50), 3),
        "lag_p99_s": round(pct(lags, 99), 3),
        "catch_up_after_last_write_s": round(done - t0 - wrote_s, 3),
        "follower_cpu_per_s": round(cpu / (done - t0), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=150)
    ap.add_argument("--idle", type=float, default=20.0)
    ap.add_argument("--rates", default="1000,5000,20000,50000")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rnd = random.Random(0)
    with tempfile.TemporaryDirectory(prefix="tail-lag-") as tmp:
        work = Path(tmp)
        result = {"lag": measure_lag(work, args.lines, args.idle, rnd)}
        print("lag", json.dumps(result["lag"]), flush=True)
        result["view"] = measure_view_lag(work, min(args.lines, 50), args.idle, rnd)
        print("view", json.dumps(result["view"]), flush=True)
        result["idle_no_view"] = measure_idle_service(work, args.idle)
        print("idle --no-view", json.dumps(result["idle_no_view"]), flush=True)
        result["rates"] = []
        for rate in map(int, args.rates.split(",")):
            r = measure_rate(work, rate, args.seconds, rnd)
            result["rates"].append(r)
            print("rate", json.dumps(r), flush=True)
        ok = [r["offered_lines_s"] for r in result["rates"] if r["lag_p99_s"] < 1.0]
        result["sustained_lines_s"] = max(ok) if ok else None
        result["idle_s"] = args.idle
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
