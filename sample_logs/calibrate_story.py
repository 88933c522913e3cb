"""The bounded search behind the story settings in loglens/simulate/story.py.

    python sample_logs/calibrate_story.py            # the ranges that found today's settings (~2 min)
    python sample_logs/calibrate_story.py --wide     # the full ranges searched (~15 min, 1 core)

Stage 1 (no simulation): run-2 dataset seeds whose input/output token ratio gives ≈304 total
tok/s at 144 output tok/s.  Stage 2: those seeds × a few Poisson arrival streams, simulated
(runs 1-2 only, no noise lines), kept when the client says 144 ±1 %, 304 ±1.5 %, concurrency
18.4 ±3 % and the run's peak Decode line is 168-173 tok/s at 26-28 running.  Stage 3: run-1
seeds closest to 50.55 tok/s, arrival streams limited to spans within 2 σ of the nominal rate
(a 16-request stream at rate 2 spanning 15 s is not "rate 2"), keeping run 2's peak (run 1's
step count sets the phase of run 2's Decode lines).  Stage 4: the seed runs 3 and 4 share, and
run 3's stream, closest to 196 / 225 output tok/s.  The step model itself was chosen by running
stage 2 on a grid of fixed costs (96, 80, 65, 50, 45, 40, 35, 30, 25 ms; per-request cost set so
a step at 28 running takes ~163 ms): only at 25-30 ms did seeds meet all four run-2 figures, 35-40 ms
gave near misses (sample_logs/README.md).  The idle gap before run 2 then puts the peak line at
00:27:16.
"""

from __future__ import annotations

import argparse
import random

import numpy as np

from loglens.simulate.story import STORY_ARRIVAL_SEEDS, STORY_DATASET_SEEDS, story_simulation


def span(seed: int, n: int, rate: float) -> float:
    rng = random.Random(seed)
    return sum(rng.gammavariate(1.0, 1.0 / rate) for _ in range(n - 1))


def sim(ds, arr, n_runs):
    return story_simulation(dataset_seeds=tuple(ds), arrival_seeds=tuple(arr), noise=False, n_runs=n_runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wide", action="store_true")
    a = ap.parse_args()
    ds, arr = list(STORY_DATASET_SEEDS), list(STORY_ARRIVAL_SEEDS)
    # stage 1 + 2: run 2
    seeds2 = []
    for s in range(200_000 if a.wide else 24_000):
        rs = np.random.RandomState(s)
        ins, outs = rs.randint(1, 257, size=32), np.maximum(rs.randint(0, 257, size=32), 1)
        if abs((1 + ins.sum() / outs.sum()) * 144 / 304 - 1) < 0.012:
            seeds2.append(s)
    hits = []
    for s in (seeds2 if a.wide else seeds2[-400:]):
        for st in ((93, 5, 17, 29) if a.wide else (17,)):
            r = sim(ds[:1] + [s] + ds[2:], arr[:1] + [st] + arr[2:], 2)
            b, t = r.bench_records[1], r.truth.runs[1]
            if (abs(b["output_throughput"] / 144 - 1) < 0.01 and abs(b["total_throughput"] / 304 - 1) < 0.015
                    and abs(b["concurrency"] / 18.4 - 1) < 0.03 and 168 <= t.peak_gen_throughput <= 173
                    and 26 <= t.peak_running_req <= 28):
                hits.append((s, st, round(b["output_throughput"], 2), round(t.peak_gen_throughput, 2), t.peak_running_req))
    print("run 2 (dataset seed, arrival seed, client, peak, running):", hits[:10])
    # stage 3: run 1, streams within 2 sigma of rate 2
    streams = sorted((span(s, 16, 2.0), s) for s in range(5000))
    streams = [s for sp, s in streams if sp <= 7.5 + 2 * 1.94][-40:]
    best = []
    for s in range(400 if a.wide else 300):
        for st in streams:
            r = sim([s] + ds[1:], [st] + arr[1:], 1)
            o = r.bench_records[0]["output_throughput"]
            if abs(o / 50.55 - 1) < 0.2:
                t = sim([s] + ds[1:], [st] + arr[1:], 2).truth.runs[1]
                best.append((round(abs(o / 50.55 - 1) + abs(t.peak_gen_throughput - 170.24) / 170
                                   + 0.02 * abs(t.peak_running_req - 27), 4), s, st, round(o, 2),
                             round(t.peak_gen_throughput, 2), t.peak_running_req))
    print("run 1 (score, dataset seed, arrival seed, client, run-2 peak, running):", sorted(best)[:5])
    # stage 4: runs 3 and 4
    best = []
    for s in range(1500 if a.wide else 700):
        for st in ((51, 7, 13) if a.wide else (7,)):
            b = sim(ds[:2] + [s, s], arr[:2] + [st, None], 4).bench_records
            e = abs(b[2]["output_throughput"] / 196 - 1) + abs(b[3]["output_throughput"] / 225 - 1) \
                + 0.5 * abs(b[3]["total_throughput"] / 516 - 1)
            best.append((round(e, 4), s, st, round(b[2]["output_throughput"], 2), round(b[3]["output_throughput"], 2)))
    print("runs 3-4 (score, dataset seed, run-3 arrival seed, client 3, client 4):", sorted(best)[:5])


if __name__ == "__main__":
    main()
