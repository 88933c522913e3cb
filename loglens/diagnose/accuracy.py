"""How well the step-time fit recovers known costs: `python -m loglens.diagnose.accuracy`.

Simulates servers with known fixed_ms / per_req_ms (loglens.simulate), ingests their logs, runs
diagnose, and prints the fitted costs against the truth with the findings, scenario by
scenario, then a random sweep (fixed 5–80 ms, per-request share of a full 48-request step
0.25–4×).  A measurement, not a test: tests/test_diagnose_sim.py holds the pass/fail bars.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from loglens.diagnose import diagnose
from loglens.ingest import ingest_paths
from loglens.simulate.api import simulate
from loglens.simulate.scenario import Scenario, ServerConfig, Speculative, StepModel
from loglens.store import Store

SMALL = ServerConfig(step=StepModel(fixed_ms=8.0, per_req_ms=0.1))
SCENARIOS = [
    ("story: GLM-5, TP8, no graphs, 4 runs",
     ServerConfig(tp_size=8, disable_cuda_graph=True, max_total_num_tokens=1_000_000, step=StepModel(fixed_ms=70.0, per_req_ms=3.4)),
     [Scenario(num_prompts=16, request_rate=2), Scenario(num_prompts=32, request_rate=8),
      Scenario(num_prompts=64, request_rate=16), Scenario(num_prompts=64)], {}),
    ("KV-starved (20k-token pool)", ServerConfig(max_total_num_tokens=20_000, step=StepModel(fixed_ms=20.0, per_req_ms=0.4)),
     [Scenario(num_prompts=200)], {}),
    ("Poisson 20 req/s, graphs above max bs off", SMALL,
     [Scenario(num_prompts=300, request_rate=20, random_input_len=512, random_output_len=512)], {}),
    ("all at once, 128 prompts", SMALL, [Scenario(num_prompts=128, random_output_len=1024)], {}),
    ("max concurrency 32", SMALL, [Scenario(num_prompts=200, max_concurrency=32)], {}),
    ("millisecond timestamps", SMALL, [Scenario(num_prompts=128)], {"log_ms": True}),
    ("DP=2", replace(SMALL, dp_size=2), [Scenario(num_prompts=128)], {}),
    ("speculative, accept len 2.5", replace(SMALL, speculative=Speculative(accept_len=2.5)), [Scenario(num_prompts=64)], {}),
    ("v0.4.1 (no graph flag)", SMALL, [Scenario(num_prompts=64)], {"release": "v0.4.1"}),
    ("max_running_requests 16", replace(SMALL, max_running_requests=16), [Scenario(num_prompts=100)], {}),
    ("graphs only up to batch 16 (4 ms with, 8 without)",
     replace(SMALL, cuda_graph_max_bs=16, step=StepModel(fixed_ms=8.0, per_req_ms=0.1, graph_fixed_ms=4.0)),
     [Scenario(num_prompts=64)], {}),
    ("prefill-heavy: 4k prompts at 30 req/s",
     replace(SMALL, step=StepModel(fixed_ms=10, per_req_ms=0.2, prefill_fixed_ms=60, prefill_per_token_ms=0.2)),
     [Scenario(num_prompts=400, request_rate=30, random_input_len=4096, random_output_len=256)], {}),
]


def run_one(server: ServerConfig, runs: list[Scenario], seed: int = 0, **kw) -> dict:
    sim = simulate(server, runs, seed=seed, **kw)
    with tempfile.TemporaryDirectory() as d:
        paths = sim.write(Path(d))
        store = Store(Path(d) / "store")
        ingest_paths([paths["log"]], store)
        return diagnose(store)


def _err(fitted, truth) -> str:
    return "   n/a" if fitted is None else f"{100 * (fitted - truth) / truth:+6.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", type=int, default=40, help="random servers in the sweep (0: none)")
    args = ap.parse_args()
    print(f"{'scenario':52} {'fixed truth→fit':>22} {'per-req truth→fit':>26} {'n':>4} {'R²':>6}  findings")
    for name, server, runs, kw in SCENARIOS:
        r = run_one(server, runs, **kw)
        m, s = r["step_model"], server.step
        print(f"{name:52} {s.fixed_ms:6.2f}→{m['fixed_ms'] or 0:7.2f} {_err(m['fixed_ms'], s.fixed_ms)} "
              f"{s.per_req_ms:7.3f}→{m['per_req_ms'] or 0:7.3f} {_err(m['per_req_ms'], s.per_req_ms)} "
              f"{m['windows']:4d} {m['r2'] or 0:6.3f}  {', '.join(f['id'] for f in r['findings'])}")
    if args.sweep:
        rng = random.Random(7)
        errs, t = [], time.perf_counter()
        for _ in range(args.sweep):
            fixed, share = rng.uniform(5, 80), rng.uniform(0.25, 4.0)
            per_req = fixed * share / 48
            server = ServerConfig(disable_cuda_graph=rng.random() < 0.5, step=StepModel(fixed_ms=fixed, per_req_ms=per_req))
            m = run_one(server, [Scenario(num_prompts=48, random_input_len=256, random_output_len=1024, idle_before_s=5.0)],
                        seed=rng.randint(0, 10_000))["step_model"]
            if m["identifiable"]:
                errs.append((abs(m["fixed_ms"] - fixed) / fixed, abs(m["per_req_ms"] - per_req) / per_req))
        fe, pe = sorted(e[0] for e in errs), sorted(e[1] for e in errs)
        pick = lambda xs, q: 100 * xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
        print(f"\nsweep: {len(errs)}/{args.sweep} identifiable in {time.perf_counter() - t:.0f} s; |error| median / p90 / max: "
              f"fixed {pick(fe, .5):.1f}% / {pick(fe, .9):.1f}% / {100 * fe[-1]:.1f}%, "
              f"per-request {pick(pe, .5):.1f}% / {pick(pe, .9):.1f}% / {100 * pe[-1]:.1f}%")


if __name__ == "__main__":
    main()
