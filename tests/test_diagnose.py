"""`loglens diagnose` on hand-made Decode lines: the step-time fit, each finding, the CLI.

Logs are written as SGLang v0.5.9 text (what a server prints), ingested, then diagnosed, so the
whole path (parser → store → intervals → fit) is exercised.  Each hand-made interval ran its
40 steps at one batch size with step time fixed_ms + per_req_ms × batch.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from loglens.cli import app
from loglens.diagnose import NoDecodeData, diagnose
from loglens.diagnose.step_model import fit_step_model
from loglens.ingest import ingest_paths
from loglens.store import Store

T0 = datetime(2026, 3, 1, 12, 0, 0)
N = 40
runner = CliRunner()


# ---- hand-made logs ---------------------------------------------------------------------------

def stamp(t: datetime, ms: bool) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S") + (f".{t.microsecond // 1000:03d}" if ms else "")


class LogWriter:
    """Writes a v0.5.9 log: start-up lines, then Decode (and Prefill) lines on a running clock."""

    def __init__(self, fixed=30.0, per_req=0.5, ms=True, graph=True, pool=100_000, cap=256,
                 disable_cuda_graph=False, dp_size=1):
        self.fixed, self.per_req, self.ms, self.graph = fixed, per_req, ms, graph
        self.pool, self.cap = pool, cap
        self.t = {d: T0 + timedelta(seconds=5) for d in range(dp_size)}
        self.lines = [
            (T0, f"[{stamp(T0, ms)}] server_args=ServerArgs(model_path='m', tp_size=2, dp_size={dp_size}, "
                 f"disable_cuda_graph={disable_cuda_graph}, cuda_graph_max_bs=160, mem_fraction_static=0.85, "
                 f"max_running_requests={cap}, decode_log_interval={N})"),
            (T0, f"[{stamp(T0, ms)} TP0] max_total_num_tokens={pool}, chunked_prefill_size=8192, "
                 f"max_prefill_tokens=16384, max_running_requests={cap}, context_len=8192, available_gpu_mem=10.00 GB"),
        ]

    def _prefix(self, dp):
        return f" DP{dp} TP0" if len(self.t) > 1 else " TP0"

    def decode(self, batch, queue=0, tokens_per_req=500, extra_s=0.0, dp=0, graph=None):
        """One Decode line closing an interval of N steps at `batch` (+ extra_s seconds of something else)."""
        graph = self.graph if graph is None else graph
        step_s = (self.fixed + self.per_req * batch) / 1000.0
        interval = N * step_s + extra_s
        self.t[dp] += timedelta(seconds=interval)
        gen = N * batch / interval
        token = batch * tokens_per_req
        self.lines.append((self.t[dp], f"[{stamp(self.t[dp], self.ms)}{self._prefix(dp)}] Decode batch, #running-req: {batch}, "
                           f"#token: {token}, token usage: {token / self.pool:.2f}, cuda graph: {graph}, "
                           f"gen throughput (token/s): {gen:.2f}, #queue-req: {queue}"))

    def prefill(self, new_tokens=1000, running=0, dp=0):
        """A Prefill line stamped a moment after the current clock (inside the next interval)."""
        t = self.t[dp] + timedelta(milliseconds=1)
        self.lines.append((t, f"[{stamp(t, self.ms)}{self._prefix(dp)}] Prefill batch, #new-seq: 1, #new-token: {new_tokens}, "
                              f"#cached-token: 0, token usage: 0.01, #running-req: {running}, #queue-req: 0, "
                              f"input throughput (token/s): 0.00, cuda graph: False"))

    def text(self) -> str:
        return "\n".join(line for _, line in sorted(self.lines, key=lambda x: x[0])) + "\n"


def plateaus(batches, repeat=3):
    return [b for b in batches for _ in range(repeat)]


def ingest_text(tmp_path, text: str, name="server.log") -> Store:
    log = tmp_path / name
    log.write_text(text)
    st = Store(tmp_path / "store")
    ingest_paths([log], st)
    return st


def finding_ids(report) -> list[str]:
    return [f["id"] for f in report["findings"]]


def finding(report, fid):
    return next(f for f in report["findings"] if f["id"] == fid)


# ---- the fit itself ---------------------------------------------------------------------------

def test_fit_recovers_known_costs_and_ignores_slow_outliers():
    rng = np.random.default_rng(0)
    b = rng.uniform(1, 100, 60)
    y = 25.0 + 0.8 * b
    y[::7] += rng.uniform(10, 40, len(y[::7]))  # prefill-like stalls only ever add time
    m = fit_step_model(b, y)
    assert m.identifiable
    assert m.fixed_ms == pytest.approx(25.0, rel=0.01)
    assert m.per_req_ms == pytest.approx(0.8, rel=0.01)
    assert m.trimmed >= len(y[::7]) - 1
    assert m.tok_s(50) == pytest.approx(1000 * 50 / (25 + 40), rel=0.01)


def test_fit_at_one_batch_size_says_it_cannot_split_the_costs():
    m = fit_step_model([8, 8, 8, 8], [30, 30.1, 29.9, 30])
    assert not m.identifiable and m.fixed_ms is None and "batch" in m.note
    assert m.tok_s(8) is None


def test_fit_gives_graph_and_eager_steps_their_own_fixed_cost():
    b = np.array([2, 4, 8, 12, 16, 20, 40, 60, 80, 100], dtype=float)
    eager = b > 16
    y = np.where(eager, 9.0, 4.0) + 0.1 * b
    m = fit_step_model(b, y, eager=eager)
    assert m.fixed_ms_graph == pytest.approx(4.0, rel=0.01)
    assert m.fixed_ms_eager == pytest.approx(9.0, rel=0.01)
    assert m.per_req_ms == pytest.approx(0.1, rel=0.01)


def test_fit_with_prefill_terms_when_every_interval_holds_a_prefill():
    rng = np.random.default_rng(1)
    b = rng.uniform(5, 80, 40)
    lines = rng.integers(1, 4, 40)
    tokens = lines * rng.integers(200, 2000, 40)
    y = 12.0 + 0.3 * b + (50.0 * lines + 0.02 * tokens) / N
    m = fit_step_model(b, y, prefill_batches=lines, prefill_tokens=tokens, steps_per_interval=N)
    assert m.fixed_ms == pytest.approx(12.0, rel=0.01)
    assert m.per_req_ms == pytest.approx(0.3, rel=0.01)
    assert m.prefill_ms_per_batch == pytest.approx(50.0, rel=0.01)


# ---- hand-made logs through the whole pipeline ------------------------------------------------

@pytest.mark.parametrize("ms", [True, False], ids=["ms-timestamps", "1s-timestamps"])
def test_hand_made_decode_lines_fit_within_1_percent(tmp_path, ms):
    # the batch jumps more than 2× between plateaus, so the one interval at each jump (whose
    # mean batch nobody can know from 1-s timestamps) is left out, and the rest are exact
    w = LogWriter(fixed=30.0, per_req=0.5, ms=ms)
    for b in plateaus([4, 10, 25, 60, 140, 60, 25, 10]):
        w.decode(b)
    r = diagnose(ingest_text(tmp_path, w.text()))
    m = r["step_model"]
    assert m["fixed_ms"] == pytest.approx(30.0, rel=0.01)
    assert m["per_req_ms"] == pytest.approx(0.5, rel=0.01)
    assert m["windows"] >= 14
    assert m["batch_min"] <= 4 and m["batch_max"] >= 140
    assert m["excluded"].get("first_line") == 1


def test_intervals_with_a_prefill_inside_are_left_out_of_the_fit(tmp_path):
    w = LogWriter(fixed=30.0, per_req=0.5)
    for i, b in enumerate(plateaus([4, 8, 16, 32, 64], repeat=4)):
        if i % 4 == 2:
            w.prefill(4000, running=b)
            w.decode(b, extra_s=0.5)  # the prefill forward took half a second
        else:
            w.decode(b)
    r = diagnose(ingest_text(tmp_path, w.text()))
    assert r["step_model"]["excluded"]["prefill_inside"] == 5
    assert r["step_model"]["fixed_ms"] == pytest.approx(30.0, rel=0.01)


def test_roomy_pool_with_graphs_on_is_kv_not_limiting_and_no_graph_finding(tmp_path):
    w = LogWriter(pool=1_000_000)
    for b in plateaus([4, 8, 16, 32]):
        w.decode(b)
    r = diagnose(ingest_text(tmp_path, w.text()))
    ids = finding_ids(r)
    assert "kv_cache_not_limiting" in ids and "kv_cache_limiting" not in ids
    assert "cuda_graph_off" not in ids
    ev = finding(r, "kv_cache_not_limiting")["evidence"]
    assert ev["peak_token_usage"] <= 0.02 and ev["retraction_events"] == 0 and ev["queued_share"] == 0


def test_graphs_disabled_gives_cuda_graph_off_with_the_config_behind_it(tmp_path):
    w = LogWriter(fixed=70.0, per_req=3.4, graph=False, disable_cuda_graph=True)
    for b in plateaus([2, 8, 16, 32]):
        w.decode(b)
    r = diagnose(ingest_text(tmp_path, w.text()))
    f = finding(r, "cuda_graph_off")
    assert f["evidence"]["share_of_decode_time_without_graph"] == 1.0
    assert f["evidence"]["disable_cuda_graph"] is True
    assert "--disable-cuda-graph" in f["text"] and f["severity"] in ("high", "medium")


def test_full_pool_with_a_queue_is_kv_limiting(tmp_path):
    w = LogWriter(pool=20_000)
    for b in plateaus([20, 24, 28, 32, 36]):
        w.decode(b, queue=30, tokens_per_req=560)  # usage 0.56 … 1.0
    r = diagnose(ingest_text(tmp_path, w.text()))
    ids = finding_ids(r)
    assert "kv_cache_limiting" in ids and "kv_cache_not_limiting" not in ids
    assert finding(r, "kv_cache_limiting")["evidence"]["queued_pool_busy_share"] > 0.5


def test_queue_at_the_running_cap_with_room_in_the_pool_is_admission_queueing(tmp_path):
    w = LogWriter(pool=1_000_000, cap=16)
    for b in plateaus([4, 8, 12]):
        w.decode(b)
    for _ in range(10):
        w.decode(16, queue=40)
    r = diagnose(ingest_text(tmp_path, w.text()))
    f = finding(r, "admission_queueing")
    assert f["evidence"]["queued_at_running_cap_share"] > 0.3
    assert "--max-running-requests" in f["text"]
    assert "kv_cache_limiting" not in finding_ids(r)
    assert f["est_cost_tok_s"] > 0


def test_prefill_stalls_give_prefill_interference(tmp_path):
    w = LogWriter(fixed=10.0, per_req=0.2)
    for b in plateaus([4, 8, 16, 32, 48]):
        w.decode(b)
    for b in [48] * 10:
        w.prefill(8000, running=b)
        w.decode(b, extra_s=0.4)  # each interval: 0.78 s of decode + 0.4 s of prefill
    r = diagnose(ingest_text(tmp_path, w.text()))
    f = finding(r, "prefill_interference")
    assert f["evidence"]["prefill_lines_inside"] == 10
    assert f["evidence"]["stalled_s"] == pytest.approx(4.0, rel=0.05)


def test_unequal_dp_streams_give_dp_imbalance(tmp_path):
    w = LogWriter(dp_size=2)
    for b in plateaus([30, 40, 50]):
        w.decode(b, dp=0)
        w.decode(max(b // 5, 2), dp=1)
    r = diagnose(ingest_text(tmp_path, w.text()))
    f = finding(r, "dp_imbalance")
    assert {s["stream"] for s in f["evidence"]["streams"]} == {"DP0", "DP1"}
    assert r["observed"]["streams"] == 2


def test_light_load_far_below_capacity_is_client_bound(tmp_path):
    w = LogWriter(pool=1_000_000, cap=512)
    for b in plateaus([2, 4, 6, 8]):
        w.decode(b)
    r = diagnose(ingest_text(tmp_path, w.text()))
    f = finding(r, "client_bound")
    assert f["evidence"]["mean_running_requests"] < 10
    assert f["evidence"]["predicted_tok_s_at_what_if_batch"] > f["evidence"]["observed_decode_tok_s"]


def test_window_fit_is_checked_against_the_rest_of_the_log(tmp_path):
    w = LogWriter(fixed=30.0, per_req=0.5)
    for b in plateaus([4, 8, 16, 32]):
        w.decode(b)
    cut = w.t[0]
    for b in [128] * 6:
        w.decode(b)
    st = ingest_text(tmp_path, w.text())
    r = diagnose(st, end=cut)
    assert r["window"]["restricted"] and r["step_model"]["batch_max"] <= 32
    c = r["comparison"]
    assert c["top_batch"] == pytest.approx(128, rel=0.01)
    assert c["predicted_tok_s_at_top_batch"] == pytest.approx(c["observed_tok_s_at_top_batch"], rel=0.02)
    with pytest.raises(NoDecodeData):
        diagnose(st, start=w.t[0] + timedelta(hours=1))


def test_pool_size_is_estimated_from_usage_when_the_start_up_line_is_missing(tmp_path):
    w = LogWriter(pool=50_000)
    w.lines = [x for x in w.lines if "max_total_num_tokens=" not in x[1]]
    for b in plateaus([10, 20, 40]):
        w.decode(b)  # 500 tokens each: usage 0.10 … 0.40
    r = diagnose(ingest_text(tmp_path, w.text()))
    assert r["limits"]["max_total_num_tokens"] is None
    assert r["limits"]["max_total_num_tokens_estimated"] == pytest.approx(50_000, rel=0.05)
    assert r["limits"]["kv_capacity_requests"] == pytest.approx(100, rel=0.05)


def test_limits_come_from_the_start_up_behind_most_decode_lines(tmp_path):
    w = LogWriter(pool=20_000, cap=32)
    for b in plateaus([4, 8]):
        w.decode(b)
    restart = w.t[0] + timedelta(seconds=30)
    w.lines.append((restart, f"[{stamp(restart, True)} TP0] max_total_num_tokens=900000, chunked_prefill_size=8192, "
                             "max_prefill_tokens=16384, max_running_requests=512, context_len=8192, available_gpu_mem=10.00 GB"))
    w.t[0] = restart + timedelta(seconds=5)
    for b in plateaus([8, 16, 32, 64]):
        w.decode(b)
    r = diagnose(ingest_text(tmp_path, w.text()))
    assert r["limits"]["max_total_num_tokens"] == 900_000 and r["limits"]["max_running_requests"] == 512
    assert r["limits"]["startups_in_window"] == 2


line_values = st.tuples(
    st.integers(0, 300),  # running
    st.floats(0.0, 5000.0, allow_nan=False),  # gen throughput (0: nonsense, must not break anything)
    st.integers(0, 50),  # queue
    st.floats(0.0, 1.0),  # usage
    st.booleans(),  # graph
    st.floats(0.0, 30.0),  # seconds since the previous line (0: several lines in one second)
    st.integers(0, 1),  # DP rank
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(line_values, min_size=1, max_size=40), prefills=st.sets(st.integers(0, 39), max_size=8))
def test_any_decode_lines_give_a_json_report_and_never_raise(tmp_path_factory, lines, prefills):
    tmp = tmp_path_factory.mktemp("any")
    w = LogWriter(dp_size=2)
    t = T0 + timedelta(seconds=5)
    for i, (run, gen, queue, usage, graph, gap, dp) in enumerate(lines):
        t += timedelta(seconds=gap)
        if i in prefills:
            w.lines.append((t, f"[{stamp(t, True)} DP{dp} TP0] Prefill batch, #new-seq: 1, #new-token: 100, #cached-token: 0, "
                               f"token usage: {usage:.2f}, #running-req: {run}, #queue-req: {queue}"))
        w.lines.append((t, f"[{stamp(t, True)} DP{dp} TP0] Decode batch, #running-req: {run}, #token: {int(usage * 100_000)}, "
                           f"token usage: {usage:.2f}, cuda graph: {graph}, gen throughput (token/s): {gen:.2f}, "
                           f"#queue-req: {queue}"))
    r = diagnose(ingest_text(tmp, w.text()))
    json.dumps(r, allow_nan=False)
    assert {"fixed_ms", "per_req_ms", "windows"} <= set(r["step_model"])
    assert all(f["severity"] in ("high", "medium", "low", "info") for f in r["findings"])
    costs = [f["est_cost_tok_s"] for f in r["findings"]]
    assert all(c is None or c >= 0 for c in costs)


# ---- the command ------------------------------------------------------------------------------

def test_cli_json_has_the_design_keys(tmp_path):
    w = LogWriter(graph=False, disable_cuda_graph=True)
    for b in plateaus([4, 8, 16, 32]):
        w.decode(b)
    st = ingest_text(tmp_path, w.text())
    res = runner.invoke(app, ["diagnose", "--store", str(st.path), "--json", "--predict-at", "100"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    sm = out["step_model"]
    assert {"fixed_ms", "per_req_ms", "windows"} <= set(sm)
    assert any(p["label"] == "requested" and p["batch"] == 100 for p in sm["predictions"])
    assert out["findings"] and all({"id", "severity", "evidence", "text"} <= set(f) for f in out["findings"])
    res = runner.invoke(app, ["diagnose", "--store", str(st.path)])
    assert res.exit_code == 0 and "per running request" in res.stdout and "cuda_graph_off" in res.stdout


def test_cli_errors_are_one_line_and_exit_1(tmp_path):
    res = runner.invoke(app, ["diagnose", "--store", str(tmp_path / "nothing")])
    assert res.exit_code == 1 and res.stderr.startswith("Error: ")
    st = ingest_text(tmp_path, "[2026-03-01 12:00:00] The server is fired up and ready to roll!\n")
    res = runner.invoke(app, ["diagnose", "--store", str(st.path), "--json"])
    assert res.exit_code == 1 and "no Decode lines" in res.stderr and "Traceback" not in res.output
    res = runner.invoke(app, ["diagnose", "--store", str(st.path), "--start", "yesterday"])
    assert res.exit_code == 2 and res.stderr.startswith("Error: ")


def test_cli_window_outside_the_log_and_bad_bench_file(tmp_path):
    w = LogWriter()
    for b in plateaus([4, 8, 16]):
        w.decode(b)
    st = ingest_text(tmp_path, w.text())
    res = runner.invoke(app, ["diagnose", "--store", str(st.path), "--start", "23:00:00"])
    assert res.exit_code == 1 and "no Decode lines between" in res.stderr
    res = runner.invoke(app, ["diagnose", "--store", str(st.path), "--bench", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 1 and res.stderr.startswith("Error: ")
