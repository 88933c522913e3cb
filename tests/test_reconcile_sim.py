"""Reconcile against the simulator's ground truth, across server and client shapes.

For every bench record: the window edges within 2 s of the true run (first request dispatched,
duration taken), decode-step tokens within 3 % of the true tokens of decode steps inside it, the
peak gen throughput exactly the highest logged inside, the waterfall identity exact, and the
residual under 5 % of the client's throughput.
"""

from __future__ import annotations

import math
import tempfile
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loglens.bench import load_bench
from loglens.ingest import ingest_paths
from loglens.reconcile.core import reconcile
from loglens.simulate import Noise, Scenario, ServerConfig, Speculative, StepModel, simulate
from loglens.store import Store

STEP = StepModel(fixed_ms=30, per_req_ms=0.5)
SAMPLE = Path(__file__).resolve().parent.parent / "sample_logs"


def reconciled(server: ServerConfig, runs: list[Scenario], **kw):
    """Simulate, write, ingest, reconcile: (reports as dicts, truth)."""
    sim = simulate(server, runs, **kw)
    d = Path(tempfile.mkdtemp(prefix="loglens-sim-"))
    paths = sim.write(d, stem="sim")
    store = Store(d / "store")
    ingest_paths([paths["log"]], store)
    return [r.to_dict() for r in reconcile(store, load_bench(paths["bench"]))], sim.truth


def check_against_truth(report: dict, truth) -> None:
    assert "error" not in report, report.get("error")
    w = report["window"]
    assert abs((datetime.fromisoformat(w["start"]) - truth.window_start).total_seconds()) <= 2.0
    assert abs((datetime.fromisoformat(w["end"]) - truth.window_end).total_seconds()) <= 2.0
    tokens = report["server"]["decode_tokens"]
    assert tokens == pytest.approx(truth.decode_tokens, rel=0.03)
    assert report["server"]["gen_throughput_peak"] == pytest.approx(round(truth.peak_gen_throughput, 2), abs=0.005)
    check_identity(report)


def check_identity(report: dict) -> None:
    gap = report["gap"]
    total = gap["server_tok_s"] + sum(s["tok_s"] for s in gap["steps"]) + gap["residual_tok_s"]
    assert total == pytest.approx(gap["client_tok_s"], abs=1e-9)
    assert gap["client_tok_s"] == report["client"]["output_throughput"]
    assert abs(gap["residual_tok_s"]) < 0.05 * gap["client_tok_s"]


# runs of 15-60 s (10-40 Decode lines): a 5-s run has 3 lines and its edges weigh too much for 3 %
RUNS = [Scenario(num_prompts=40, request_rate=4, random_input_len=512, random_output_len=512),
        Scenario(num_prompts=48, random_input_len=512, random_output_len=512, idle_before_s=20),
        Scenario(num_prompts=48, max_concurrency=8, random_input_len=512, random_output_len=512, idle_before_s=15)]

SHAPES = {
    "v0.5.9": (ServerConfig(step=STEP), {}),
    "dp2": (ServerConfig(dp_size=2, step=STEP), {}),
    "v0.4.1 (no server-info call)": (ServerConfig(step=STEP), {"release": "v0.4.1"}),
    "v0.4.6.post4": (ServerConfig(step=STEP), {"release": "v0.4.6.post4"}),
    "milliseconds": (ServerConfig(step=STEP), {"log_ms": True}),
    "v0.5.11 + noise": (ServerConfig(step=STEP), {"release": "v0.5.11", "noise": True}),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_shapes_match_the_truth(shape):
    server, kw = SHAPES[shape]
    reports, truth = reconciled(server, RUNS, seed=3, **kw)
    assert len(reports) == len(truth.runs)
    for report, run in zip(reports, truth.runs):
        check_against_truth(report, run)


def test_speculative_decoding_counts_accepted_drafts():
    server = ServerConfig(speculative=Speculative(accept_len=2.5), step=STEP)
    runs = [Scenario(num_prompts=64, request_rate=8, random_input_len=256, random_output_len=512),
            Scenario(num_prompts=64, max_concurrency=16, random_input_len=256, random_output_len=512, idle_before_s=20)]
    reports, truth = reconciled(server, runs, seed=5)
    for report, run in zip(reports, truth.runs):
        check_against_truth(report, run)
        assert report["server"]["accept_len_mean"] == pytest.approx(2.5, rel=0.1)


def test_a_run_buried_in_a_long_noisy_log():
    """Eight runs over an hour of health checks and metrics scrapes: each record finds its own."""
    plan = [(32, 2, 300), (48, math.inf, 420), (40, 4, 200), (64, 8, 600), (32, math.inf, 150),
            (48, 6, 500), (40, 3, 250), (64, math.inf, 400)]
    runs = [Scenario(num_prompts=n, request_rate=r, random_input_len=256, random_output_len=512,
                     idle_before_s=idle, dataset_seed=i) for i, (n, r, idle) in enumerate(plan)]
    reports, truth = reconciled(ServerConfig(step=STEP), runs, seed=11, noise=Noise(health_every_s=5.0))
    assert len(reports) == len(plan)
    for report, run in zip(reports, truth.runs):
        check_against_truth(report, run)
        assert report["window"]["confidence"] >= 0.6


@pytest.mark.parametrize("rates", [(16.0, math.inf), (math.inf, 16.0)], ids=["rate16-then-inf", "inf-then-rate16"])
def test_a_burst_and_a_poisson_run_of_similar_duration_each_find_their_own(rates):
    """The same 64 prompts at rate 16 and at rate inf last about as long (~39 and ~37 s: the
    burst's bigger batches make slower steps), so count, duration and endpoint cannot tell the
    runs apart; the arrivals can: the burst's access lines fall within a second, the rate-16
    run's over ~4 s.  Each record must clearly win its own run (no "scores almost as well")."""
    runs = [Scenario(num_prompts=64, request_rate=r, random_input_len=256, random_output_len=384, dataset_seed=5,
                     idle_before_s=20) for r in rates]
    reports, truth = reconciled(ServerConfig(step=StepModel(fixed_ms=30, per_req_ms=2.0)), runs, seed=1)
    assert abs(truth.runs[0].duration_s - truth.runs[1].duration_s) < 3.0
    for report, run in zip(reports, truth.runs):
        assert "error" not in report
        w = report["window"]
        assert abs((datetime.fromisoformat(w["start"]) - run.window_start).total_seconds()) <= 2.0
        assert abs((datetime.fromisoformat(w["end"]) - run.window_end).total_seconds()) <= 2.0
        assert w["confidence"] >= 0.9
        assert not any("another run in the log scores almost as well" in x for x in report["warnings"])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(32, 64),
    rate=st.sampled_from([2.0, 8.0, math.inf]),
    concurrency=st.sampled_from([None, 8, 16]),
    out_len=st.sampled_from([256, 512]),
    dp=st.sampled_from([1, 2]),
    seed=st.integers(0, 10_000),
)
def test_random_runs_reconcile(n, rate, concurrency, out_len, dp, seed):
    runs = [Scenario(num_prompts=n, request_rate=rate, max_concurrency=concurrency, random_input_len=256,
                     random_output_len=out_len, dataset_seed=seed % 97)]
    reports, truth = reconciled(ServerConfig(dp_size=dp, step=STEP), runs, seed=seed)
    report, run = reports[0], truth.runs[0]
    assert "error" not in report
    w = report["window"]
    assert abs((datetime.fromisoformat(w["start"]) - run.window_start).total_seconds()) <= 2.0
    assert report["server"]["gen_throughput_peak"] == pytest.approx(round(run.peak_gen_throughput, 2), abs=0.005)
    # short random runs have few Decode lines: edges weigh more: 6 % here (3 % above)
    assert report["server"]["decode_tokens"] == pytest.approx(run.decode_tokens, rel=0.06)
    gap = report["gap"]
    assert gap["server_tok_s"] + sum(s["tok_s"] for s in gap["steps"]) + gap["residual_tok_s"] == \
        pytest.approx(gap["client_tok_s"], abs=1e-9)


# ---- the GLM-5 sample (sample_logs/README.md): 32 prompts at rate 8, client 143.91 tok/s, server
# peak 171.34 tok/s (27 running, 00:27:16); the story quotes 170.24 ------------------------------

@lru_cache(maxsize=1)
def _sample_reports(quote: float | None = None):
    log, bench = SAMPLE / "sglang-glm5.log", SAMPLE / "sglang-glm5.bench.jsonl"
    assert log.exists() and bench.exists(), "the story sample is part of the repository"
    d = Path(tempfile.mkdtemp(prefix="loglens-glm5-"))
    store = Store(d / "store")
    ingest_paths([log], store)
    return [r.to_dict() for r in reconcile(store, load_bench(bench), quote=quote)]


def test_sample_log_finds_all_four_runs():
    reports = _sample_reports()
    assert [r["client"]["completed"] for r in reports] == [16, 32, 64, 64]
    assert [r["window"]["start"][11:19] for r in reports] == ["00:19:22", "00:27:03", "00:30:48", "00:34:38"]
    # records 3 and 4 send the same 64 prompts, and on this server (≤ 210 tok/s) their durations
    # differ by only 2.2 s (55.06 vs 52.82); the arrivals tell them apart: run 3's (rate 16) span
    # ~3 s, run 4's (rate inf) arrive within one second, so each record clearly wins its own run
    for r in reports:
        assert r["window"]["confidence"] >= 0.9
        assert not any("another run in the log scores almost as well" in w for w in r["warnings"])
    for r in reports:
        assert "error" not in r
        assert r["tokens"]["server_decode_tokens"] == pytest.approx(r["tokens"]["expected_decode_tokens"], rel=0.03)
        check_identity(r)


def test_sample_32_prompt_run_is_explained_step_by_step():
    r = _sample_reports()[1]
    gap, steps = r["gap"], {s["name"]: s for s in r["gap"]["steps"]}
    assert r["client"]["output_throughput"] == pytest.approx(143.91, abs=0.01)
    assert gap["server_tok_s"] == r["server"]["gen_throughput_peak"] == 171.34
    assert r["server"]["peak_line"]["running_req"] == 27
    assert r["window"]["start"].startswith("2026-02-19T00:27:03")
    # the peak is one good 40-step window: the steady mean is ~164 tok/s
    assert steps["peak vs steady-state mean"]["tok_s"] == pytest.approx(164 - 171.34, abs=3)
    # the batch fills only as requests arrive (rate 8) and empties as random-length outputs finish
    assert steps["ramp-up"]["tok_s"] < -8 and steps["drain"]["tok_s"] < -8
    assert r["time"]["steady_s"] > r["time"]["ramp_up_s"] > 0 and r["time"]["drain_s"] > 0
    # one first token per request comes from prefill: completed / duration
    assert steps["first tokens from prefill"]["tok_s"] == pytest.approx(32 / r["client"]["duration_s"], abs=1e-3)
    # the named steps explain nearly all of it
    assert abs(gap["residual_tok_s"]) < 0.03 * gap["client_tok_s"]
    for s in gap["steps"]:
        if abs(s["tok_s"]) >= 0.01:
            assert any(ch.isdigit() for ch in s["why"])  # every why carries its numbers


def test_sample_quoted_figure():
    """`--quote 170.24`: the story's figure (the team's own log line) is explained instead of the peak."""
    r = _sample_reports(170.24)[1]
    gap = r["gap"]
    assert gap["server_tok_s"] == 170.24 and gap["server_figure"] == "quote"
    check_identity(r)
    assert gap["residual_tok_s"] == pytest.approx(_sample_reports()[1]["gap"]["residual_tok_s"], abs=0.01)
