"""A model of SGLang serving a bench_serving run: writes a server log, the bench JSONL, and the truth.

Why: loglens explains why bench_serving's client throughput differs from the server log's
`gen throughput`.  Testing that needs logs whose true answer is known.  This package models
SGLang's scheduler (prefill/decode iterations, KV pool, retraction, decode-log counter and tic)
and bench_serving's client (warmup, Poisson arrivals, concurrency cap, its metric formulas), and
prints what both would print, in the line shapes of a chosen SGLang release.

API::

    from loglens.simulate import ServerConfig, StepModel, Scenario, simulate

    server = ServerConfig(tp_size=8, max_total_num_tokens=290_000, disable_cuda_graph=True,
                          step=StepModel(fixed_ms=105, per_req_ms=1.0))
    runs = [Scenario(num_prompts=32, request_rate=8, random_input_len=256, random_output_len=256),
            Scenario(num_prompts=64, idle_before_s=120)]
    sim = simulate(server, runs, seed=7, release="v0.5.9", noise=True)

    sim.log_text          # str: the whole server log (start-up, warmups, runs, noise)
    sim.bench_records     # list[dict]: one bench_serving record per run
    sim.bench_jsonl       # str: those records as bench_serving appends them (Infinity for inf)
    sim.truth             # SimTruth: log-level facts + .runs (list[RunTruth], one per run)
    sim.truth.to_dict()   # JSON-serialisable
    sim.steps, sim.stats  # internal step trace and scheduler stats (for tests)
    sim.write(dir, stem="sglang")  # <stem>.log, <stem>.bench.jsonl, <stem>.truth.json

`simulate(server, runs, *, seed=0, release="v0.5.9", bench_version=None, start=2026-02-19 00:00,
noise=False, log_ms=False, tail_idle_s=5.0)`.  Same arguments, same output, byte for byte.
Releases: see `RELEASES` (v0.2.14, v0.3.4, v0.4.1, v0.4.6.post4, v0.4.9.post3, v0.5.4.post1,
v0.5.9 (alias v0.5.9+), v0.5.10, v0.5.11).

Modules: scenario (knobs), releases (per-release flags), records (requests, steps, logged stats),
scheduler (the model), engine (client + server on one clock), formats (line writers), startup
(start-up and noise lines), logbook (interleaving and line counts), bench_writer (bench_serving
formulas), truth, story (the GLM-5 sample), api (`simulate`).
"""

from .api import Simulation, simulate
from .releases import RELEASES, get_release
from .scenario import Noise, Scenario, ServerConfig, Speculative, StepModel
from .truth import RunTruth, SimTruth

__all__ = ["simulate", "Simulation", "ServerConfig", "Scenario", "StepModel", "Speculative", "Noise",
           "RunTruth", "SimTruth", "RELEASES", "get_release"]
