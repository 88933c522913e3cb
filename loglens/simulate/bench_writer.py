"""The bench_serving result record, computed from the simulated per-request times.

Uses bench_serving's formulas (sglang-formats.md §5.3): duration from the first dispatch to
after the end-of-run server-info call; throughputs are totals / duration; `concurrency` is
sum(e2e latency) / duration; TTFT is POST-to-first-chunk; TPOT per request is
(latency - ttft) / (output_len - 1); the native backend spreads each chunk gap evenly over the
chunk's tokens for ITL (OpenAI backends: one ITL per chunk); the peak output rate buckets tokens
into 1-s bins from the earliest request start.  Which keys a record carries depends on the
client's version (§5.2 key history); `json.dumps` defaults write `Infinity` for an infinite rate.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

import numpy as np

from .releases import version_key
from .records import Req


@dataclass(slots=True)
class ClientRequest:
    """What bench_serving knows about one request (perf_counter seconds, simulation clock)."""

    start: float
    ttft: float
    latency: float
    output_len: int
    prompt_len: int
    itls: list


def client_view(r: Req, net: float, stream: bool, native: bool) -> ClientRequest:
    recv = [(t + net, n) for t, n in r.emits]
    latency = recv[-1][0] - r.send_t
    if not stream:
        return ClientRequest(r.send_t, latency, latency, r.output_len, r.client_prompt_len, [])
    itls: list[float] = []
    prev = recv[0][0]
    for t, n in recv[1:]:
        gap = t - prev
        if native:
            itls.extend([gap / n] * n)
        else:
            itls.append(gap)
        prev = t
    return ClientRequest(r.send_t, recv[0][0] - r.send_t, latency, r.output_len, r.client_prompt_len, itls)


def _stats(prefix: str, values_s: list[float]) -> dict:
    ms = np.asarray(values_s, dtype=float) * 1000.0 if values_s else np.zeros(1)
    return {f"mean_{prefix}_ms": float(np.mean(ms)), f"median_{prefix}_ms": float(np.median(ms)),
            f"std_{prefix}_ms": float(np.std(ms)), f"p90_{prefix}_ms": float(np.percentile(ms, 90)),
            f"p95_{prefix}_ms": float(np.percentile(ms, 95)), f"p99_{prefix}_ms": float(np.percentile(ms, 99))}


def peak_rates(reqs: list[ClientRequest]) -> tuple[float, int]:
    """(max output tokens in any 1-s bin, max requests overlapping any 1-s bin), both from the
    earliest request start."""
    if not reqs:
        return 0.0, 0
    origin = min(r.start for r in reqs)
    bins: dict[int, int] = {}
    last = 0.0
    for r in reqs:
        t = r.start - origin + r.ttft
        bins[int(t)] = bins.get(int(t), 0) + 1
        for d in r.itls:
            t += d
            bins[int(t)] = bins.get(int(t), 0) + 1
        last = max(last, r.start - origin + r.latency)
    peak_conc = 0
    for k in range(int(math.ceil(last)) + 1):
        n = sum(1 for r in reqs if r.start - origin < k + 1 and r.start - origin + r.latency > k)
        peak_conc = max(peak_conc, n)
    return float(max(bins.values())), peak_conc


def _available(key: str, v: tuple) -> bool:
    """Was this key written by a bench_serving of version v (§5.2 key history)?"""
    if key in ("tag",):
        return v >= (0, 5, 4, 2)
    if key == "server_info":
        return v >= (0, 5, 4, 3)
    if key == "max_concurrency":
        return v >= (0, 3, 6, 1)
    if key in ("total_input_text_tokens", "total_input_vision_tokens"):
        return v >= (0, 5, 3, 1)
    if key == "total_throughput":
        return v >= (0, 5, 5, 2)
    if key in ("max_output_tokens_per_s", "max_concurrent_requests"):
        return v >= (0, 5, 6, 0)
    if key in ("request_throughput", "concurrency") or (key.startswith("mean_") and key != "mean_e2e_latency_ms"):
        return v >= (0, 4, 2, 0)
    if key == "accept_length" or key == "p95_itl_ms":
        return v >= (0, 4, 3, 3)
    if key == "p90_e2e_latency_ms":
        return v >= (0, 5, 8, 0)
    if key.startswith(("p90_", "p95_")):
        return v >= (0, 5, 14, 0)
    if key == "input_throughput" or key.startswith(("std_", "p99_")) or key == "median_tpot_ms":
        return v >= (0, 4, 1, 5)
    return True


def bench_record(scenario, reqs: list[ClientRequest], duration: float, server_info: dict | None,
                 bench_version: str, retok_rng: random.Random) -> dict:
    """One JSONL record as the given bench_serving version writes it."""
    done = [r for r in reqs if r.output_len > 0]
    total_in = sum(r.prompt_len for r in done)
    total_out = sum(r.output_len for r in done)
    retok = sum(max(1, round(r.output_len * retok_rng.uniform(0.985, 1.015))) for r in done)
    tpots = [(r.latency - r.ttft) / (r.output_len - 1) for r in done if r.output_len > 1]
    itls = [x for r in done for x in r.itls]
    peak_tok, peak_conc = peak_rates(done)
    accept = None
    if server_info and server_info.get("internal_states"):
        accept = server_info["internal_states"][0].get("avg_spec_accept_length")
    rec = {
        "tag": scenario.tag, "backend": scenario.backend, "dataset_name": "random",
        "request_rate": float(scenario.request_rate), "max_concurrency": scenario.max_concurrency,
        "sharegpt_output_len": None, "random_input_len": scenario.random_input_len,
        "random_output_len": scenario.random_output_len, "random_range_ratio": scenario.random_range_ratio,
        "server_info": server_info, "duration": duration, "completed": len(done),
        "total_input_tokens": total_in, "total_input_text_tokens": total_in, "total_input_vision_tokens": 0,
        "total_output_tokens": total_out, "total_output_tokens_retokenized": retok,
        "request_throughput": len(done) / duration, "input_throughput": total_in / duration,
        "output_throughput": total_out / duration, "total_throughput": (total_in + total_out) / duration,
        **_stats("e2e_latency", [r.latency for r in done]), **_stats("ttft", [r.ttft for r in done]),
        **_stats("tpot", tpots), **_stats("itl", itls),
        "concurrency": sum(r.latency for r in done) / duration, "accept_length": accept,
        "max_output_tokens_per_s": peak_tok, "max_concurrent_requests": peak_conc,
    }
    v = version_key(bench_version)
    return {k: val for k, val in rec.items() if _available(k, v)}


def to_jsonl(records: list[dict]) -> str:
    """Append-mode JSONL exactly as bench_serving writes it (json.dumps defaults: Infinity, NaN)."""
    return "".join(json.dumps(r) + "\n" for r in records)
