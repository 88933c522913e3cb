"""Regenerate the GLM-5 story sample: `python sample_logs/make_story.py`.

Writes sglang-glm5.log (the SGLang v0.5.9 server log) and sglang-glm5.bench.jsonl (the four
bench_serving records, in append order) next to this script.  Both are simulated by
loglens.simulate with the calibrated story settings in loglens/simulate/story.py; the output is
byte-for-byte deterministic.  Pass --truth to also write sglang-glm5.truth.json (ground truth).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from loglens.simulate.story import story_simulation

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE, help="output directory (default: sample_logs/)")
    ap.add_argument("--truth", action="store_true", help="also write sglang-glm5.truth.json")
    args = ap.parse_args()
    sim = story_simulation()
    paths = sim.write(args.out, stem="sglang-glm5", truth=args.truth)
    for rec, run in zip(sim.bench_records, sim.truth.runs):
        print(f"run {run.index}: {run.num_prompts:3d} prompts @ {rec['request_rate']:>4}: "
              f"output {rec['output_throughput']:.2f} tok/s, total {rec['total_throughput']:.2f}, "
              f"concurrency {rec['concurrency']:.2f}, peak gen throughput {run.peak_gen_throughput:.2f} "
              f"(#running-req {run.peak_running_req})")
    for p in paths.values():
        print("wrote", p)


if __name__ == "__main__":
    main()
