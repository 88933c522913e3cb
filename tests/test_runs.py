"""Benchmark-run detection (loglens.runs) and the `loglens runs` command."""

from __future__ import annotations

import json
import math
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from loglens.cli import app
from loglens.ingest import ingest_paths
from loglens.runs import detect_runs
from loglens.simulate import Noise, Scenario, ServerConfig, StepModel, simulate
from loglens.store import Store

STEP = StepModel(fixed_ms=30, per_req_ms=0.5)
RUNS = [Scenario(num_prompts=40, request_rate=4, random_input_len=256, random_output_len=256),
        Scenario(num_prompts=48, random_input_len=256, random_output_len=256, idle_before_s=30),
        Scenario(num_prompts=32, max_concurrency=8, random_input_len=256, random_output_len=256, idle_before_s=20)]


def simulated_store(drop_access: bool = False, **kw):
    sim = simulate(ServerConfig(step=STEP), RUNS, seed=4, **kw)
    d = Path(tempfile.mkdtemp(prefix="loglens-runs-"))
    paths = sim.write(d, stem="sim")
    if drop_access:  # only the scheduler's stderr captured
        lines = paths["log"].read_text().splitlines(keepends=True)
        paths["log"].write_text("".join(x for x in lines if '"GET ' not in x and '"POST ' not in x))
    store = Store(d / "store")
    ingest_paths([paths["log"]], store)
    return store, sim.truth


def test_runs_in_a_noisy_log_match_the_truth():
    store, truth = simulated_store(noise=Noise(health_every_s=5.0, metrics_every_s=10.0))
    runs = detect_runs(store)
    assert len(runs) == 3
    for run, t in zip(runs, truth.runs):
        assert run.requests == t.num_prompts
        assert run.warmup_requests == 1
        assert run.endpoint == "/generate"
        assert run.end_anchor == "GET /get_server_info"
        assert abs((run.start - t.window_start).total_seconds()) <= 1.0
        assert abs((run.end - t.window_end).total_seconds()) <= 1.0
        assert run.confidence >= 0.9
        assert run.gen_throughput_peak == pytest.approx(round(t.peak_gen_throughput, 2), abs=0.005)
        assert run.decode_tokens == pytest.approx(t.decode_tokens, rel=0.06)  # ±0.5 s edges without a duration


def test_old_clients_without_server_info_calls():
    store, truth = simulated_store(release="v0.4.1")
    runs = detect_runs(store)
    assert [r.requests for r in runs] == [t.num_prompts for t in truth.runs]
    assert {r.end_anchor for r in runs} == {"last request"}


def test_without_access_lines_runs_come_from_decode_activity():
    store, truth = simulated_store(drop_access=True)
    runs = detect_runs(store)
    assert len(runs) == 3
    assert {r.end_anchor for r in runs} == {"decode activity"}
    for run, t in zip(runs, truth.runs):
        # decode activity starts after the prefills and may include the warmup's steps: ±3 s
        assert abs((run.start - t.window_start).total_seconds()) <= 3.0
        assert abs((run.end - t.window_end).total_seconds()) <= 3.0


def _access(rows: list[tuple[str, str, str]]) -> pl.DataFrame:
    """http rows from (time, method, path)."""
    return pl.DataFrame({
        "ts": [datetime.fromisoformat(t) for t, _, _ in rows],
        "source": ["x.log"] * len(rows), "file_id": ["f"] * len(rows),
        "line_no": list(range(1, len(rows) + 1)),
        "method": [m for _, m, _ in rows], "path": [p for _, _, p in rows],
        "status": [200] * len(rows),
    })


def hand_made_store(rows) -> Store:
    store = Store(Path(tempfile.mkdtemp(prefix="loglens-http-")) / "store")
    store.write("http", _access(rows))
    store.write("files", pl.DataFrame({"source": ["x.log"], "file_id": ["f"], "seq": [1]}))
    return store


def burst(t0: str, n: int, path: str, every_s: float = 0.1):
    start = datetime.fromisoformat(t0)
    return [((start + timedelta(seconds=i * every_s)).replace(microsecond=0).isoformat(" "), "POST", path)
            for i in range(n)]


def test_stray_requests_health_checks_and_two_endpoints():
    rows = [("2026-03-01 10:00:00", "POST", "/generate"),  # a stray curl an hour earlier
            *[(f"2026-03-01 10:{m:02d}:00", "GET", "/health") for m in range(1, 59, 5)],
            ("2026-03-01 11:00:00", "POST", "/generate"),  # the warmup
            *burst("2026-03-01 11:00:05", 20, "/generate"),
            ("2026-03-01 11:00:20", "GET", "/metrics"),
            ("2026-03-01 11:00:40", "GET", "/get_server_info"),
            ("2026-03-01 11:00:40", "GET", "/get_server_info"),
            ("2026-03-01 11:05:00", "GET", "/v1/models"),  # an OpenAI-chat client starts
            ("2026-03-01 11:05:01", "POST", "/v1/chat/completions"),
            ("2026-03-01 11:05:01", "POST", "/v1/chat/completions"),  # two warmup requests
            *burst("2026-03-01 11:05:04", 30, "/v1/chat/completions?x=1", every_s=0.5),
            ("2026-03-01 11:06:10", "GET", "/server_info")]
    runs = detect_runs(hand_made_store(rows))
    assert [(r.endpoint, r.requests, r.warmup_requests) for r in runs] == \
        [("/generate", 20, 1), ("/v1/chat/completions", 30, 2)]
    assert runs[0].start == datetime(2026, 3, 1, 11, 0, 5, 500_000)
    assert runs[0].end == datetime(2026, 3, 1, 11, 0, 40, 500_000)
    assert runs[1].end_anchor == "GET /server_info"
    assert runs[0].decode_tokens == 0 and runs[0].gen_throughput_peak is None


def test_runs_command_json_and_errors(tmp_path):
    runner = CliRunner()
    store, _ = simulated_store()
    res = runner.invoke(app, ["runs", "--store", str(store.path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [r["requests"] for r in doc["runs"]] == [40, 48, 32]
    assert {"start", "end", "requests", "endpoint", "decode_tokens", "gen_throughput_peak", "confidence"} <= set(doc["runs"][0])
    res = runner.invoke(app, ["runs", "--store", str(store.path)])
    assert res.exit_code == 0 and "/generate" in res.stdout
    res = runner.invoke(app, ["runs", "--store", str(tmp_path / "nothing")])
    assert res.exit_code == 1 and "Error:" in res.output and "Traceback" not in res.output
    only_health = hand_made_store([("2026-03-01 10:00:00", "GET", "/health")])
    res = runner.invoke(app, ["runs", "--store", str(only_health.path)])
    assert res.exit_code == 1 and "no benchmark run" in res.output


def test_inf_rate_runs_back_to_back():
    """Runs with short idle gaps still split at the server-info calls."""
    runs = [Scenario(num_prompts=16, request_rate=math.inf, random_input_len=128, random_output_len=64,
                     idle_before_s=2.0, dataset_seed=i) for i in range(4)]
    sim = simulate(ServerConfig(step=STEP), runs, seed=2)
    d = Path(tempfile.mkdtemp(prefix="loglens-b2b-"))
    store = Store(d / "store")
    ingest_paths([sim.write(d, stem="sim")["log"]], store)
    found = detect_runs(store)
    assert [r.requests for r in found] == [16] * 4
    for run, t in zip(found, sim.truth.runs):
        assert abs((run.start - t.window_start).total_seconds()) <= 1.0
