"""`loglens diagnose` against simulated SGLang servers whose step costs, pool and load are known.

The simulator (loglens.simulate) runs a scheduler with decode step time fixed_ms + per_req_ms ×
batch (± 2 % jitter per step), prints the log a real server would, and keeps the truth aside;
diagnose sees only the log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from typer.testing import CliRunner

from loglens.cli import app
from loglens.diagnose import diagnose
from loglens.ingest import ingest_paths
from loglens.simulate.api import simulate
from loglens.simulate.scenario import Scenario, ServerConfig, Speculative, StepModel
from loglens.store import Store

TOLERANCE = 0.15
SAMPLE_LOGS = Path(__file__).resolve().parent.parent / "sample_logs"

#: a story-like server (GLM-5 shape: TP=8, no CUDA graphs, a roomy pool, the same four runs) with
#: longer outputs than the sample log's, so each run holds more Decode intervals
STORY_SERVER = ServerConfig(model_path="/models/GLM-5", tp_size=8, disable_cuda_graph=True,
                            max_total_num_tokens=1_000_000, mem_fraction_static=0.85,
                            step=StepModel(fixed_ms=70.0, per_req_ms=3.4))
STORY_RUNS = [Scenario(num_prompts=16, request_rate=2), Scenario(num_prompts=32, request_rate=8),
              Scenario(num_prompts=64, request_rate=16), Scenario(num_prompts=64)]


def run_sim(tmp_path, server, runs, seed=0, **kw):
    sim = simulate(server, runs, seed=seed, **kw)
    paths = sim.write(tmp_path / "sim")
    store = Store(tmp_path / "store")
    ingest_paths([paths["log"]], store)
    return sim, store


def ids(report):
    return [f["id"] for f in report["findings"]]


def finding(report, fid):
    return next(f for f in report["findings"] if f["id"] == fid)


def assert_costs_near(report, fixed, per_req, tol=TOLERANCE):
    m = report["step_model"]
    assert m["identifiable"], m["note"]
    assert m["fixed_ms"] == pytest.approx(fixed, rel=tol), m
    assert m["per_req_ms"] == pytest.approx(per_req, rel=tol), m


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fixed=st.floats(5.0, 80.0), per_req_share=st.floats(0.25, 4.0), graphs=st.booleans(),
       seed=st.integers(0, 10_000))
def test_fitted_step_costs_are_within_15_percent_of_the_truth(tmp_path_factory, fixed, per_req_share, graphs, seed):
    # per_req_share: the per-request part of a full batch's step relative to the fixed part
    # (0.25: launch-bound … 4: compute-bound), so both costs are visible in the log
    prompts = 48
    per_req = fixed * per_req_share / prompts
    server = ServerConfig(disable_cuda_graph=not graphs, step=StepModel(fixed_ms=fixed, per_req_ms=per_req))
    # outputs up to 1024 tokens: the drain from 48 running requests spans ≈25 Decode intervals
    runs = [Scenario(num_prompts=prompts, random_input_len=256, random_output_len=1024, idle_before_s=5.0)]
    _, store = run_sim(tmp_path_factory.mktemp("sim"), server, runs, seed=seed)
    assert_costs_near(diagnose(store), fixed, per_req)


@pytest.mark.parametrize("name, server, runs, kw", [
    ("dp2", ServerConfig(dp_size=2, step=StepModel(fixed_ms=12.0, per_req_ms=0.15)), [Scenario(num_prompts=96)], {}),
    ("speculative", ServerConfig(speculative=Speculative(accept_len=2.5), step=StepModel(fixed_ms=12.0, per_req_ms=0.15)),
     [Scenario(num_prompts=64, random_output_len=2048)], {}),
    ("ms-timestamps", ServerConfig(step=StepModel(fixed_ms=8.0, per_req_ms=0.1)), [Scenario(num_prompts=128)], {"log_ms": True}),
    ("old-release", ServerConfig(step=StepModel(fixed_ms=8.0, per_req_ms=0.1)), [Scenario(num_prompts=64)], {"release": "v0.4.1"}),
    ("concurrency-capped", ServerConfig(step=StepModel(fixed_ms=8.0, per_req_ms=0.1)),
     [Scenario(num_prompts=200, max_concurrency=32)], {}),
])
def test_fit_across_server_shapes(tmp_path, name, server, runs, kw):
    _, store = run_sim(tmp_path, server, runs, **kw)
    assert_costs_near(diagnose(store), server.step.fixed_ms, server.step.per_req_ms)


def test_graph_and_eager_steps_get_their_own_fixed_cost(tmp_path):
    server = ServerConfig(cuda_graph_max_bs=16, step=StepModel(fixed_ms=8.0, per_req_ms=0.1, graph_fixed_ms=4.0))
    _, store = run_sim(tmp_path, server, [Scenario(num_prompts=64)])
    r = diagnose(store)
    m = r["step_model"]
    assert m["fixed_ms_graph"] == pytest.approx(4.0, rel=TOLERANCE)
    assert m["fixed_ms_eager"] == pytest.approx(8.0, rel=TOLERANCE)
    f = finding(r, "cuda_graph_off")
    assert "--cuda-graph-max-bs" in f["text"] and f["evidence"]["share_above_cuda_graph_max_bs"] > 0.5


def test_kv_starved_server_is_kv_limited(tmp_path):
    server = ServerConfig(max_total_num_tokens=20_000, step=StepModel(fixed_ms=20.0, per_req_ms=0.4))
    sim, store = run_sim(tmp_path, server, [Scenario(num_prompts=200)])
    assert sum(t.retractions for t in sim.truth.runs) > 0  # the scenario really is starved
    r = diagnose(store)
    assert "kv_cache_limiting" in ids(r) and "kv_cache_not_limiting" not in ids(r)
    assert "client_bound" not in ids(r)
    ev = finding(r, "kv_cache_limiting")["evidence"]
    assert ev["retraction_events"] > 0 and ev["peak_token_usage"] >= 0.9 and ev["queued_pool_busy_share"] > 0.3
    assert r["findings"][0]["id"] == "kv_cache_limiting"
    assert_costs_near(r, 20.0, 0.4)


def test_story_server_kv_not_limiting_and_cuda_graph_off(tmp_path):
    _, store = run_sim(tmp_path, STORY_SERVER, STORY_RUNS, seed=1, noise=True)
    r = diagnose(store)
    assert {"kv_cache_not_limiting", "cuda_graph_off"} <= set(ids(r))
    assert "kv_cache_limiting" not in ids(r)
    kv = finding(r, "kv_cache_not_limiting")
    assert kv["evidence"]["peak_token_usage"] < 0.05 and kv["evidence"]["retraction_events"] == 0
    assert kv["evidence"]["queued_share"] == 0 and "--mem-fraction-static" in kv["text"]
    graphs = finding(r, "cuda_graph_off")
    assert graphs["evidence"]["share_of_decode_time_without_graph"] == 1.0
    assert graphs["evidence"]["fixed_ms"] == pytest.approx(70.0, rel=TOLERANCE)
    assert_costs_near(r, 70.0, 3.4)


def test_story_fit_on_the_32_prompt_run_predicts_the_saturated_run(tmp_path):
    sim, store = run_sim(tmp_path, STORY_SERVER, STORY_RUNS, seed=1)
    run32, saturated = sim.truth.runs[1], sim.truth.runs[3]
    r = diagnose(store, start=run32.window_start, end=run32.window_end)
    assert r["step_model"]["batch_max"] <= 32
    c = r["comparison"]
    # the saturated run reaches ≈60 running requests: twice what the fit saw
    assert c["top_batch"] > 50
    assert c["predicted_tok_s_at_top_batch"] == pytest.approx(c["observed_tok_s_at_top_batch"], rel=0.05)
    assert c["peak_gen_throughput_outside"] == pytest.approx(saturated.peak_gen_throughput, rel=0.01)
    assert c["predicted_at_peak_line_batch"] == pytest.approx(c["peak_gen_throughput_outside"], rel=0.10)


def test_story_cli_run_2_with_bench_reports_both_numbers(tmp_path):
    sim, store = run_sim(tmp_path, STORY_SERVER, STORY_RUNS, seed=2, noise=True)
    bench = tmp_path / "sim" / "sglang.bench.jsonl"
    runner = CliRunner()
    res = runner.invoke(app, ["diagnose", "--store", str(store.path), "--run", "2", "--bench", str(bench), "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    assert r["window"]["label"].startswith("run 2 of 4")
    assert r["bench"]["index"] == 1 and r["bench"]["concurrency"] == pytest.approx(sim.bench_records[1]["concurrency"], rel=0.01)
    assert r["step_model"]["batch_max"] <= 32
    c = r["comparison"]
    assert c["predicted_tok_s_at_top_batch"] == pytest.approx(c["observed_tok_s_at_top_batch"], rel=0.05)
    assert "client_bound" in ids(r) and finding(r, "client_bound")["evidence"]["client_concurrency"] < 32
    res = runner.invoke(app, ["diagnose", "--store", str(store.path), "--run", "2"])
    assert res.exit_code == 0
    assert "Fitted on this window alone, the model predicts" in res.stdout and "the log shows" in res.stdout
    res = runner.invoke(app, ["diagnose", "--store", str(store.path), "--bench", str(bench), "--record", "3", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    assert r["window"]["label"].startswith("bench record 4") and r["observed"]["max_running_requests"] > 50
    assert r["comparison"] is not None  # the other runs are outside the window
    res = runner.invoke(app, ["diagnose", "--store", str(store.path), "--run", "9"])
    assert res.exit_code == 1 and "out of range" in res.stderr
    res = runner.invoke(app, ["diagnose", "--store", str(store.path), "--run", "1", "--start", "00:00:00"])
    assert res.exit_code == 2


@pytest.fixture(scope="module")
def glm5_store(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("glm5") / "store")
    ingest_paths([SAMPLE_LOGS / "sglang-glm5.log"], store)
    return store


def test_sample_log_story_kv_not_limiting_graphs_off_and_fitted_costs(glm5_store):
    # sample_logs/README.md: decode step = 30 ms + 4.75 ms per running request, pool 291,264 tokens
    r = diagnose(glm5_store)
    assert_costs_near(r, 30.0, 4.75)
    assert r["step_model"]["asymptote_tok_s"] == pytest.approx(1000 / 4.75, rel=0.02)  # why run 4 cannot reach 225
    kv = finding(r, "kv_cache_not_limiting")
    assert kv["evidence"]["peak_token_usage"] <= 0.05 and kv["evidence"]["retraction_events"] == 0
    assert kv["evidence"]["queued_share"] == 0 and kv["evidence"]["max_total_num_tokens"] == 291_264
    assert "will not raise throughput" in kv["text"]
    graphs = finding(r, "cuda_graph_off")
    # the run-2 calibration makes the step mostly per-request cost: graphs off is found, the fixed cost does not dominate
    assert graphs["evidence"]["disable_cuda_graph"] is True and 0.15 < graphs["evidence"]["fixed_share_of_decode_time"] < 0.35
    assert "kv_cache_limiting" not in ids(r) and "step_overhead_dominant" not in ids(r)


def test_sample_log_run_2_alone_predicts_the_saturated_runs(glm5_store):
    runner = CliRunner()
    res = runner.invoke(app, ["diagnose", "--store", str(glm5_store.path), "--run", "2",
                              "--bench", str(SAMPLE_LOGS / "sglang-glm5.bench.jsonl"), "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    assert r["observed"]["max_running_requests"] <= 32 and r["bench"]["completed"] == 32
    c = r["comparison"]
    assert c["top_batch"] > 45  # the 64-prompt runs
    assert c["predicted_tok_s_at_top_batch"] == pytest.approx(c["observed_tok_s_at_top_batch"], rel=0.10)
    assert c["predicted_at_peak_line_batch"] == pytest.approx(c["peak_gen_throughput_outside"], rel=0.10)
    assert finding(r, "kv_cache_not_limiting")["evidence"]["peak_token_usage"] <= 0.03  # the story's ≈2 %
    assert "cuda_graph_off" in ids(r)
