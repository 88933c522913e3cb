"""Tests of the SGLang + bench_serving simulator (loglens.simulate) and the story sample files.

The example lines below are copied from the format reference (sglang-variants.txt); tests never
read /work/shared.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest

from loglens.simulate import RELEASES, Scenario, ServerConfig, Speculative, StepModel, simulate
from loglens.simulate.records import DecodeStat

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"

SMALL = dict(random_input_len=128, random_output_len=96, idle_before_s=20.0)


def small_server(**kw) -> ServerConfig:
    base = dict(tp_size=2, max_total_num_tokens=60_000, step=StepModel(fixed_ms=20, per_req_ms=0.5))
    base.update(kw)
    return ServerConfig(**base)


@pytest.fixture(scope="module")
def sim():
    runs = [Scenario(num_prompts=24, request_rate=6.0, **SMALL), Scenario(num_prompts=30, **SMALL)]
    return simulate(small_server(), runs, seed=11, noise=True)


# ---------------------------------------------------------------------------------------- basics
def test_deterministic_for_a_seed():
    runs = [Scenario(num_prompts=20, request_rate=5.0, **SMALL)]
    a = simulate(small_server(), runs, seed=3, noise=True)
    b = simulate(small_server(), runs, seed=3, noise=True)
    c = simulate(small_server(), runs, seed=4, noise=True)
    assert a.log_text == b.log_text and a.bench_jsonl == b.bench_jsonl
    assert a.truth.to_json() == b.truth.to_json()
    assert a.log_text != c.log_text


def test_fast_enough():
    runs = [Scenario(num_prompts=300, request_rate=20.0, random_input_len=256, random_output_len=256)]
    t = time.perf_counter()
    simulate(small_server(max_total_num_tokens=200_000), runs, seed=1)
    assert time.perf_counter() - t < 1.5


def test_truth_is_json(sim):
    d = json.loads(sim.truth.to_json())
    assert len(d["runs"]) == 2 and d["runs"][1]["request_rate"] == "inf"
    assert d["runs"][0]["window_start"] < d["runs"][0]["window_end"]


# ------------------------------------------------------------------------- gen throughput semantics
DECODE_RE = re.compile(r"^\[(?P<ts>[^\]]+)\] Decode batch[.,] .*gen throughput \(token/s\): (?P<gen>[0-9.]+)")


def test_gen_throughput_is_window_tokens_over_window_time(sim):
    """Recompute every Decode line from the step trace: decode-step tokens since the previous
    line of that rank / wall time since that line (the first window starts at scheduler init)."""
    logged = [float(m["gen"]) for m in map(DECODE_RE.match, sim.log_text.splitlines()) if m]
    stats = [s for s in sim.stats if isinstance(s, DecodeStat)]
    assert len(logged) == len(stats) >= 5
    decode_steps = [s for s in sim.steps if s.kind == "decode"]
    prev_t = None
    for st, gen in zip(stats, logged):
        start = st.t - st.window_s
        if prev_t is not None:
            assert start == pytest.approx(prev_t)  # the tic is the previous line, never reset on idle
        toks = sum(s.tokens for s in decode_steps if start < s.t1 <= st.t + 1e-12)
        assert gen == pytest.approx(round(toks / st.window_s, 2), abs=0.006)
        prev_t = st.t
    # the counter: a line exactly every decode_log_interval decode steps
    assert [s.ct for s in stats] == [40 * (i + 1) for i in range(len(stats))]
    # the first line after an idle gap is meaningless-low
    run2_first = next(s for s in stats if s.t > sim.steps[0].t0 and s.t >= _t(sim, 1, "window_start"))
    assert run2_first.gen < 0.5 * sim.truth.runs[1].peak_gen_throughput


def _t(sim, run, field):
    from datetime import datetime
    dt = getattr(sim.truth.runs[run], field)
    return (dt - sim.truth.log_start).total_seconds() if isinstance(dt, datetime) else dt


def test_prefill_tokens_are_not_counted(sim):
    for run, truth in zip(sim.requests, sim.truth.runs):
        total = sum(r.output_len for r in run)
        assert truth.first_tokens == len(run)
        assert truth.decode_tokens == total - truth.first_tokens - truth.reprefill_tokens
        assert truth.decode_tokens == total - len(run)  # no retractions here


# ------------------------------------------------------------------------------- bench formulas
def test_bench_record_formulas(sim):
    net = 0.001
    for rec, reqs, truth in zip(sim.bench_records, sim.requests, sim.truth.runs):
        d = rec["duration"]
        assert d == pytest.approx(truth.duration_s)
        assert rec["completed"] == len(reqs)
        assert rec["total_output_tokens"] == sum(r.output_len for r in reqs)
        assert rec["total_input_tokens"] == sum(r.client_prompt_len for r in reqs)
        assert rec["output_throughput"] == pytest.approx(rec["total_output_tokens"] / d)
        assert rec["input_throughput"] == pytest.approx(rec["total_input_tokens"] / d)
        assert rec["total_throughput"] == pytest.approx((rec["total_input_tokens"] + rec["total_output_tokens"]) / d)
        assert rec["request_throughput"] == pytest.approx(len(reqs) / d)
        lat = [r.emits[-1][0] + net - r.send_t for r in reqs]
        assert rec["concurrency"] == pytest.approx(sum(lat) / d)
        assert rec["mean_e2e_latency_ms"] == pytest.approx(1000 * sum(lat) / len(lat))
        ttft = [r.emits[0][0] + net - r.send_t for r in reqs]
        assert rec["median_ttft_ms"] == pytest.approx(1000 * sorted(ttft)[len(ttft) // 2], rel=0.2)
        assert rec["max_output_tokens_per_s"] <= rec["total_output_tokens"]
        assert rec["server_info"]["internal_states"][0]["last_gen_throughput"] > 0
        assert min(r.send_t for r in reqs) == pytest.approx(_t(sim, truth.index, "window_start"))


def test_bench_jsonl_writes_infinity_and_version_keys(sim):
    lines = sim.bench_jsonl.splitlines()
    assert '"request_rate": Infinity' in lines[1] and '"request_rate": 6.0' in lines[0]
    assert math.isinf(json.loads(lines[1])["request_rate"])
    rec = sim.bench_records[0]
    for k in ("backend", "dataset_name", "max_concurrency", "random_range_ratio", "duration", "completed",
              "total_output_tokens_retokenized", "p99_itl_ms", "std_tpot_ms", "concurrency",
              "max_output_tokens_per_s", "max_concurrent_requests", "accept_length", "server_info", "p90_e2e_latency_ms"):
        assert k in rec, k
    assert "p90_ttft_ms" not in rec  # v0.5.14+ only
    old = simulate(small_server(), [Scenario(num_prompts=5, **SMALL)], seed=1, release="v0.4.1").bench_records[0]
    assert "server_info" not in old and "total_throughput" not in old and "concurrency" not in old
    new = simulate(small_server(), [Scenario(num_prompts=5, **SMALL)], seed=1, bench_version="v0.5.14").bench_records[0]
    assert "p90_ttft_ms" in new and "p95_e2e_latency_ms" in new


# ----------------------------------------------------------------------------------- line counts
ACCESS_RE = re.compile(r'^(\[[0-9-]+ [0-9:]+\] )?INFO:     [0-9.]+:\d+ - "')


def _family(line: str) -> str:
    if not line.strip():
        return "blank"
    if ACCESS_RE.match(line):
        return "http"
    if re.match(r"^\[[^\]]+\] Decode batch", line):
        return "decode"
    if re.match(r"^\[[^\]]+\] Prefill batch", line):
        return "prefill"
    return "event_lines"


def test_line_counts_match_truth(sim):
    lines = sim.log_text.splitlines()
    counts = {}
    for ln in lines:
        f = _family(ln)
        counts[f] = counts.get(f, 0) + 1
    lc = sim.truth.line_counts
    for fam in ("decode", "prefill", "http", "event_lines"):
        assert counts.get(fam, 0) == lc[fam], fam
    assert lc["lines"] == len(lines)
    records = sum(1 for ln in lines if _family(ln) == "event_lines" and ln.startswith("["))
    assert records == lc["events"]
    posts = sum(1 for ln in lines if '"POST /generate' in ln)
    warm = 1 + 2  # the server's own warmup + one client warmup per run
    assert posts == warm + sum(len(r) for r in sim.requests)
    assert lc["event_kinds"]["deprecation"] == 4  # two /get_server_info calls per run, v0.5.9 server
    assert sum(1 for ln in lines if "GET /get_server_info" in ln) == 4
    assert "The server is fired up and ready to roll!" in sim.log_text


# ------------------------------------------------------------------------- release line shapes
EXAMPLES = {  # release: (decode example, prefill example); copied from sglang-variants.txt
    "v0.2.14": ("[14:03:27 TP0] Decode batch. #running-req: 8, #token: 2310, token usage: 0.02, gen throughput (token/s): 512.34, #queue-req: 0",
                "[14:03:25 TP0] Prefill batch. #new-seq: 4, #new-token: 2048, #cached-token: 512, cache hit rate: 18.75%, #running-req: 12, #queue-req: 3"),
    "v0.3.4": ("[2024-11-02 14:03:27 TP0] Decode batch. #running-req: 8, #token: 2310, token usage: 0.02, gen throughput (token/s): 512.34, #queue-req: 0",
               "[2024-11-02 14:03:25 TP0] Prefill batch. #new-seq: 4, #new-token: 2048, #cached-token: 512, cache hit rate: 18.75%, token usage: 0.03, #running-req: 12, #queue-req: 3"),
    "v0.4.1": ("[2024-11-02 14:03:27 TP0] Decode batch. #running-req: 8, #token: 2310, token usage: 0.02, gen throughput (token/s): 512.34, #queue-req: 0",
               "[2024-11-02 14:03:25 TP0] Prefill batch. #new-seq: 4, #new-token: 2048, #cached-token: 512, cache hit rate: 18.75%, token usage: 0.03, #running-req: 12, #queue-req: 3"),
    "v0.4.6.post4": ("[2025-05-20 09:12:44] Decode batch. #running-req: 32, #token: 9120, token usage: 0.07, cuda graph: True, gen throughput (token/s): 1450.22, #queue-req: 0",
                     "[2025-04-30 09:12:40] Prefill batch. #new-seq: 4, #new-token: 2048, #cached-token: 512, token usage: 0.03, #running-req: 12, #queue-req: 3"),
    "v0.4.9.post3": ("[2025-07-25 08:15:42] Decode batch. #running-req: 32, #token: 9120, token usage: 0.07, cuda graph: True, gen throughput (token/s): 1450.22, #queue-req: 0, ",
                     "[2025-07-25 08:15:41] Prefill batch. #new-seq: 4, #new-token: 2048, #cached-token: 512, token usage: 0.03, #running-req: 12, #queue-req: 3, "),
    "v0.5.4.post1": ("[2025-11-10 08:15:42] Decode batch, #running-req: 32, #token: 9120, token usage: 0.07, cuda graph: True, gen throughput (token/s): 1450.22, #queue-req: 0, ",
                     "[2025-11-10 08:15:41] Prefill batch, #new-seq: 4, #new-token: 2048, #cached-token: 512, token usage: 0.03, #running-req: 12, #queue-req: 3, "),
    "v0.5.9": ("[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, gen throughput (token/s): 170.24, #queue-req: 0",
               "[2026-02-19 00:27:12 TP0] Prefill batch, #new-seq: 1, #new-token: 1024, #cached-token: 0, token usage: 0.02, #running-req: 26, #queue-req: 0, input throughput (token/s): 8123.45, cuda graph: False"),
    "v0.5.10": (None, "[2026-03-28 11:40:02] Prefill batch, #new-seq: 4, #new-token: 2048, #cached-token: 512, token usage: 0.03, #running-req: 12, #queue-req: 3, cuda graph: False, input throughput (token/s): 9750.12"),
    "v0.5.11": (None, "[2026-05-06 11:40:02] Prefill batch, #new-seq: 4, #new-token: 2048, #cached-token: 512, token usage: 0.03, #running-req: 12, #queue-req: 3, #pending-token: 6144, cuda graph: False, input throughput (token/s): 9750.12"),
}
SPEC_EXAMPLES = {
    "v0.5.4.post1": "[2025-10-20 08:15:42] Decode batch, #running-req: 32, #token: 9120, token usage: 0.07, accept len: 2.91, accept rate: 0.73, cuda graph: True, gen throughput (token/s): 3310.55, #queue-req: 0, ",
    "v0.4.1.post7": "[2025-02-03 09:12:44 TP0] Decode batch. #running-req: 32, #token: 9120, token usage: 0.07, accept len: 2.87, gen throughput (token/s): 1450.22, #queue-req: 0",
}
ACCESS_EXAMPLES = {
    "old": 'INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK',
    "new": '[2026-02-19 00:27:12] INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK',
}


def shape(line: str) -> str:
    return re.sub(r"\b(True|False)\b", "B", re.sub(r"\d+(\.\d+)?", "N", line))


def _first(lines, word):
    return next(ln for ln in lines if f"] {word} batch" in ln)


@pytest.mark.parametrize("release", sorted(EXAMPLES))
def test_release_line_shapes(release):
    dec_ex, pre_ex = EXAMPLES[release]
    tp = 8 if (dec_ex or pre_ex).split("]")[0].endswith("TP0") and release >= "v0.4.6" else 1
    s = simulate(small_server(tp_size=tp), [Scenario(num_prompts=12, **SMALL)], seed=2, release=release)
    lines = s.log_text.splitlines()
    assert shape(_first(lines, "Prefill")) == shape(pre_ex)
    if dec_ex:
        decodes = [ln for ln in lines if "] Decode batch" in ln]
        assert decodes and all(shape(ln) == shape(dec_ex) for ln in decodes)
    access = next(ln for ln in lines if '"POST /generate' in ln)
    assert shape(access) == shape(ACCESS_EXAMPLES["old" if release == "v0.2.14" else "new"])
    assert set(RELEASES) >= set(EXAMPLES)


def test_speculative_lines_and_accounting():
    spec = Speculative(accept_len=2.6, num_draft_tokens=4)
    for release, ex in (("v0.5.4.post1", SPEC_EXAMPLES["v0.5.4.post1"]),
                        ("v0.5.9", SPEC_EXAMPLES["v0.5.4.post1"].rstrip(", ").replace("True", "False"))):
        s = simulate(small_server(tp_size=1, speculative=spec), [Scenario(num_prompts=16, **SMALL)], seed=5,
                     release=release)
        decodes = [ln for ln in s.log_text.splitlines() if "] Decode batch" in ln]
        assert decodes and all(shape(ln) == shape(ex) for ln in decodes)
        t = s.truth.runs[0]
        reqs = s.requests[0]
        assert t.decode_tokens == sum(r.output_len for r in reqs) - len(reqs)
        assert t.accepted_draft_tokens > 0.3 * t.decode_tokens  # accepted drafts are counted in gen throughput
        assert s.bench_records[0]["accept_length"] == pytest.approx(2.6, rel=0.15)


def test_dp_ranks_are_separate_streams():
    s = simulate(small_server(dp_size=2, tp_size=2), [Scenario(num_prompts=40, request_rate=20.0, **SMALL)], seed=9)
    lines = s.log_text.splitlines()
    for d in (0, 1):
        assert any(ln.split("]")[0].endswith(f"DP{d} TP0") and "Decode batch," in ln for ln in lines)
    t = s.truth.runs[0]
    assert len(t.decode_tokens_by_rank) == 2 and min(t.decode_tokens_by_rank) > 0
    assert t.decode_tokens == sum(r.output_len for r in s.requests[0]) - 40
    assert sorted({r.rank for r in s.requests[0]}) == [0, 1]


def test_log_ms_and_non_streaming_and_openai_endpoint():
    s = simulate(small_server(), [Scenario(num_prompts=10, backend="sglang-oai", stream=False, **SMALL)],
                 seed=1, log_ms=True)
    lines = s.log_text.splitlines()
    dec = next(ln for ln in lines if "Decode batch" in ln)
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} TP0\] ", dec)
    acc = [ln for ln in lines if '"POST /v1/completions' in ln]
    assert len(acc) == 11 and all(re.match(r"^\[[0-9-]+ [0-9:]+\] INFO", a) for a in acc)
    # non-streamed: the access line is written at completion, after the request's last token
    req = s.requests[0][0]
    assert s.bench_records[0]["mean_ttft_ms"] == pytest.approx(s.bench_records[0]["mean_e2e_latency_ms"])
    assert req.finish_t > req.arrive_t


# ---------------------------------------------------------------------------------- KV starvation
def test_kv_starved_server_queues_and_retracts():
    server = small_server(max_total_num_tokens=6000, tp_size=1)
    run = Scenario(num_prompts=48, random_input_len=200, random_output_len=200, random_range_ratio=1.0)
    s = simulate(server, [run], seed=4, release="v0.5.9")
    t = s.truth.runs[0]
    assert t.retractions > 0 and t.retracted_requests >= t.retractions
    lines = s.log_text.splitlines()
    retract = [ln for ln in lines if "KV cache pool is full. Retract requests." in ln]
    assert len(retract) == t.retractions
    assert re.search(r"#retracted_reqs: \d+, #new_tokens_gained: \d+, #new_token_ratio: \d\.\d{4} -> \d\.\d{4}$",
                     retract[0])
    assert any(re.search(r"#queue-req: [1-9]", ln) for ln in lines if "Decode batch" in ln)
    assert max(st.usage for st in s.stats if isinstance(st, DecodeStat)) > 0.9
    assert s.bench_records[0]["completed"] == 48
    total = sum(r.output_len for r in s.requests[0])
    assert t.reprefill_tokens > 0 and t.decode_tokens == total - 48 - t.reprefill_tokens
    old = simulate(server, [run], seed=4, release="v0.4.6.post4").log_text
    assert "Decode out of memory happened. #retracted_reqs: " in old


# -------------------------------------------------------------------------------------- the story
def test_story_files_match_the_story():
    recs = [json.loads(ln) for ln in (SAMPLES / "sglang-glm5.bench.jsonl").read_text().splitlines()]
    assert [r["request_rate"] for r in recs] == [2.0, 8.0, 16.0, math.inf]
    r2 = recs[1]
    assert r2["completed"] == 32 and abs(r2["output_throughput"] / 144.0 - 1) < 0.02
    assert abs(r2["total_throughput"] / 304.0 - 1) < 0.02 and abs(r2["concurrency"] / 18.4 - 1) < 0.02
    log = (SAMPLES / "sglang-glm5.log").read_text()
    assert "model_path='/models/GLM-5-NVFP4'" in log and "tp_size=8" in log and "disable_cuda_graph=True" in log
    assert "[2026-02-19 00:2" in log and "The server is fired up and ready to roll!" in log
    # the story's line: 27 running, ≈170 tok/s, at 00:27:16 (sample_logs/README.md)
    assert re.search(r"^\[2026-02-19 00:27:16 TP0\] Decode batch, #running-req: 27, #token: \d+, token usage: 0\.02, "
                     r"cuda graph: False, gen throughput \(token/s\): 17[01]\.\d\d, #queue-req: 0$", log, re.M)


def test_story_is_regenerated_deterministically():
    from loglens.simulate.story import story_simulation
    s = story_simulation()
    assert s.log_text == (SAMPLES / "sglang-glm5.log").read_text()
    assert s.bench_jsonl == (SAMPLES / "sglang-glm5.bench.jsonl").read_text()


def test_requests_that_cannot_fit_are_refused():
    with pytest.raises(ValueError, match="does not fit"):
        simulate(small_server(max_total_num_tokens=200), [Scenario(num_prompts=3, **SMALL)])
