"""The reconcile waterfall, its accounting, and the `loglens reconcile` command."""

from __future__ import annotations

import json
import math
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from loglens.cli import app
from loglens.reconcile.accounting import PHASES, Accounting, StreamAccount
from loglens.reconcile.waterfall import build_steps
from loglens.simulate import Scenario, ServerConfig, StepModel, simulate

REQUIRED = {
    "client": {"output_throughput", "duration_s", "completed", "total_output_tokens"},
    "window": {"start", "end"},
    "server": {"decode_tokens", "gen_throughput_peak", "gen_throughput_mean"},
    "gap": {"server_tok_s", "client_tok_s", "steps", "residual_tok_s"},
}


# ---- the waterfall identity ---------------------------------------------------------------------

@st.composite
def accountings(draw):
    duration = draw(st.floats(1.0, 3600.0))
    streams = []
    for i in range(draw(st.integers(1, 4))):
        acc = StreamAccount(f"DP{i}")
        cuts = sorted(draw(st.lists(st.floats(0.0, 1.0), min_size=len(PHASES) - 1, max_size=len(PHASES) - 1)))
        shares = [b - a for a, b in zip([0.0, *cuts], [*cuts, 1.0])]
        for phase, share in zip(PHASES, shares):
            acc.seconds[phase] = share * duration
            acc.tokens[phase] = 0.0 if phase == "tail" else draw(st.floats(0.0, 5000.0)) * share * duration / 10
        acc.decode_tokens = sum(acc.tokens.values())
        acc.covered_s = duration - acc.seconds["tail"]
        acc.steady_rate = acc.tokens["steady"] / acc.seconds["steady"] if acc.seconds["steady"] > 0 else 0.0
        streams.append(acc)
    peak_line = {"running_req": 7, "stream": "DP0", "line_no": 12}
    return Accounting(0.0, duration, streams, draw(st.floats(1.0, 1e4)), peak_line, 10, None,
                      draw(st.integers(0, 50)), 0)


@settings(max_examples=200, deadline=None)
@given(acc=accountings(), completed=st.integers(1, 2000), extra=st.floats(-500, 500), quote=st.none() | st.floats(1, 1e4))
def test_waterfall_identity_holds_exactly(acc, completed, extra, quote):
    D = acc.duration_s
    client_tokens = max(1, round(acc.decode_tokens + completed + acc.retracted_requests + extra))
    client = client_tokens / D
    server = quote if quote is not None else acc.peak
    steps, residual, why = build_steps(acc, server, quote is not None, client, client_tokens, completed, D)
    assert server + sum(s.tok_s for s in steps) + residual == pytest.approx(client, rel=1e-12, abs=1e-9)
    # the residual is exactly the tokens the log does not account for (up to the steps' rounding)
    unexplained = (client_tokens - completed - acc.retracted_requests - acc.decode_tokens) / D
    assert residual == pytest.approx(unexplained, abs=0.0005 * (len(steps) + 1))
    assert all(s.why and s.name for s in steps)


def test_phases_partition_the_duration():
    acc = Accounting(0.0, 100.0, [StreamAccount("main")], 10.0, None, 1, None, 0, 0)
    s = acc.streams[0]
    s.seconds.update(ramp_up=10, steady=60, prefill=5, idle=5, drain=15, tail=5)
    s.tokens.update(ramp_up=400, steady=6000, prefill=300, idle=0, drain=600, tail=0)
    s.steady_rate = 100.0
    s.decode_tokens = sum(s.tokens.values())
    steps, residual, _ = build_steps(acc, 120.0, False, 73.0 + 2.0, 7500, 200, 100.0)
    by = {x.name: x.tok_s for x in steps}
    assert by["peak vs steady-state mean"] == pytest.approx(-20.0)
    assert by["ramp-up"] == pytest.approx(-(100 * 10 - 400) / 100)
    assert by["drain"] == pytest.approx(-(100 * 15 - 600) / 100)
    assert by["after the last Decode line"] == pytest.approx(-5.0)
    assert by["first tokens from prefill"] == pytest.approx(2.0)
    assert residual == pytest.approx(0.0, abs=1e-9)


# ---- the command ------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def small_sim() -> tuple[str, str, str]:
    """(store, bench, other bench): two runs ingested, and a bench file from another server."""
    step = StepModel(fixed_ms=30, per_req_ms=0.5)
    runs = [Scenario(num_prompts=32, request_rate=8, random_input_len=256, random_output_len=256),
            Scenario(num_prompts=40, random_input_len=256, random_output_len=256, idle_before_s=20)]
    d = Path(tempfile.mkdtemp(prefix="loglens-cli-"))
    paths = simulate(ServerConfig(step=step), runs, seed=9).write(d, stem="sim")
    other = simulate(ServerConfig(step=step), [Scenario(num_prompts=77, random_output_len=64)], seed=1)
    other_paths = other.write(d / "other", stem="other")
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(paths["log"]), "--store", str(d / "store")])
    assert res.exit_code == 0, res.output
    return str(d / "store"), str(paths["bench"]), str(other_paths["bench"])


def invoke(*args):
    return CliRunner().invoke(app, ["reconcile", *args])


def test_json_per_record_has_the_design_keys_and_the_identity():
    store, bench, _ = small_sim()
    res = invoke("--bench", bench, "--store", store, "--json")
    assert res.exit_code == 0, res.output
    docs = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]  # JSON Lines: 2 records
    assert len(docs) == 2
    for doc in docs:
        for block, keys in REQUIRED.items():
            assert keys <= set(doc[block]), (block, keys - set(doc[block]))
        gap = doc["gap"]
        assert gap["server_tok_s"] == doc["server"]["gen_throughput_peak"]
        assert gap["client_tok_s"] == doc["client"]["output_throughput"]
        assert gap["server_tok_s"] + sum(s["tok_s"] for s in gap["steps"]) + gap["residual_tok_s"] == \
            pytest.approx(gap["client_tok_s"], abs=1e-9)
        assert all({"name", "tok_s", "why"} <= set(s) for s in gap["steps"])
        assert doc["window"]["start"] < doc["window"]["end"]
        assert doc["time"]["duration_s"] == pytest.approx(doc["client"]["duration_s"], abs=1e-3)
        assert sum(doc["time"][f"{p}_s"] for p in PHASES) == pytest.approx(doc["time"]["duration_s"], abs=0.01)


def test_one_record_pretty_json_quote_and_manual_window():
    store, bench, _ = small_sim()
    res = invoke("--bench", bench, "--store", store, "--json", "--record", "0", "--quote", "170.24")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # one record: one pretty object
    assert doc["gap"]["server_tok_s"] == 170.24 and doc["gap"]["server_figure"] == "quote"
    start, end = doc["window"]["start"], doc["window"]["end"]
    res = invoke("--bench", bench, "--store", store, "--json", "--record", "0", "--start", start, "--end", end)
    manual = json.loads(res.stdout)
    assert manual["window"]["method"] == "--start/--end"
    assert manual["server"]["decode_tokens"] == pytest.approx(doc["server"]["decode_tokens"], rel=0.01)


def test_terminal_report_says_it_in_words():
    store, bench, _ = small_sim()
    res = invoke("--bench", bench, "--store", store, "--record", "-1")
    assert res.exit_code == 0, res.output
    for words in ("Window", "confidence", "Token accounting", "first token of each request", "Time accounting",
                  "Waterfall", "client output throughput", "residual"):
        assert words in res.stdout


def test_ingests_the_log_first(tmp_path):
    store, bench, _ = small_sim()
    log = Path(bench).with_name("sim.log")
    res = invoke("--bench", bench, str(log), "--store", str(tmp_path / "fresh"), "--json", "--record", "1")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["client"]["completed"] == 40


@pytest.mark.parametrize("args, code, words", [
    (["--bench", "/no/such/file.jsonl"], 1, "not found"),
    (["--record", "5"], 2, "out of range"),
    (["--quote", "-3"], 2, "--quote"),
    (["--start", "yesterday"], 2, "--start"),
    (["--start", "2026-02-19 00:10:00", "--end", "2026-02-19 00:09:00"], 2, "--end must be after"),
])
def test_bad_input_is_one_error_line(args, code, words):
    store, bench, _ = small_sim()
    if "--bench" not in args:
        args = ["--bench", bench, *args]
    res = invoke(*args, "--store", store)
    assert res.exit_code == code, res.output
    assert "Error:" in res.output and words in res.output and "Traceback" not in res.output


def test_usage_errors_and_unusable_data(tmp_path):
    store, bench, other = small_sim()
    assert invoke("--store", store).exit_code == 2  # --bench is required
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not a bench result\n")
    res = invoke("--bench", str(bad), "--store", store)
    assert res.exit_code == 1 and "Error:" in res.output
    res = invoke("--bench", bench, "--store", str(tmp_path / "empty"))
    assert res.exit_code == 1 and "loglens ingest" in res.output
    res = invoke("--bench", other, "--store", store)  # a record from another server: no run matches
    assert res.exit_code == 1 and "no run in the log matches" in res.output
    res = invoke("--bench", other, "--store", store, "--json")
    assert res.exit_code == 1 and "error" in json.loads(res.stdout)
    assert math.isfinite(json.loads(invoke("--bench", bench, "--store", store, "--json", "--record", "0").stdout)
                         ["gap"]["residual_tok_s"])


def test_undated_log_and_second_call_from_the_cache(tmp_path):
    old = simulate(ServerConfig(step=StepModel(fixed_ms=30, per_req_ms=0.5)),
                   [Scenario(num_prompts=16, random_output_len=64)], release="v0.2.14")
    paths = old.write(tmp_path, stem="old")
    res = invoke("--bench", str(paths["bench"]), str(paths["log"]), "--store", str(tmp_path / "st"))
    assert res.exit_code == 1 and "carry no date" in res.output and "Traceback" not in res.output
    store, bench, _ = small_sim()
    first = invoke("--bench", bench, "--store", store, "--json").stdout
    assert list((Path(store) / ".cache").glob("segments-*.parquet"))
    assert invoke("--bench", bench, "--store", store, "--json").stdout == first


def test_scores_without_evidence_are_the_scores_with_it():
    """`align` scores every record against every candidate run without building the evidence
    text, and explains the pairs it picks: the scores must not depend on the explaining."""
    from loglens.bench import load_bench
    from loglens.reconcile import align
    from loglens.runs import run_segments
    from loglens.store import Store

    store, bench, other = small_sim()
    segments = run_segments(Store(store))
    records = [*load_bench(bench), *load_bench(other)]
    pairs = [(r, s, k) for r in records for s in segments for k in (s.candidates or [None])]
    assert len(pairs) >= 4
    for r, s, k in pairs:
        quick, full = align.score(r, s, k, explain=False), align.score(r, s, k)
        assert quick[:3] == full[:3] and quick[3] == [] and full[3]
