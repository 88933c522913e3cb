"""The GLM-5 story behind `sample_logs/sglang-glm5.*`.

The team served GLM-5-NVFP4 (744B MoE) with SGLang v0.5.9, TP=8 on eight PCIe RTX PRO 6000
Blackwell GPUs, CUDA graphs disabled, `--mem-fraction-static 0.85`, and ran bench_serving
(native `/generate` backend, random dataset 256 in / 256 out, default range ratio 0.0) four
times in one server log: 16 prompts at rate 2, 32 at rate 8, 64 at rate 16, 64 at rate inf.
The client said ~50.55, ~144, ~196 and ~225 output tok/s; the server's peak Decode line in the
32-prompt run said 170.24 tok/s at 27 running requests.

Nothing here was captured: the step model and seeds below were calibrated (by a bounded search,
sample_logs/calibrate_story.py) so that the 32-prompt run lands on the issue's figures: client
143.91 output / 303.75 total tok/s, concurrency 18.54, and its peak Decode line
`[2026-02-19 00:27:16 TP0] ... #running-req: 27, ... gen throughput (token/s): 171.34`.
A client/peak ratio of 144/170 = 0.85 needs a decode rate that barely falls as the batch drains,
so the step is mostly per-request cost (30 ms + 4.75 ms per running request: TP all-reduces over
PCIe and MoE experts touched grow with the batch; the fixed part is the launch overhead of the
graphless step).  Such a server cannot exceed 1000 / 4.75 = 210 tok/s, so runs 3 and 4 come out
at 174 and 181 instead of ~196 and ~225, and run 1 at 59 instead of ~50.55: the story's four
client figures and its run-2 peak are not reachable together (sample_logs/README.md says why).
"""

from __future__ import annotations

import math
from datetime import datetime

from .api import Simulation, simulate
from .scenario import Noise, Scenario, ServerConfig, StepModel

STORY_RELEASE = "v0.5.9"
STORY_START = datetime(2026, 2, 19, 0, 4, 41)
STORY_SEED = 7  # simulator seed (arrivals, step jitter, ports)
#: bench_serving --seed per run (runs 3 and 4 share one, so run 4 re-sends run 3's prompts and hits the prefix cache)
STORY_DATASET_SEEDS = (264, 23877, 597, 597)
STORY_STEP = StepModel(fixed_ms=30.0, per_req_ms=4.75, jitter=0.03, prefill_fixed_ms=55.0,
                       prefill_per_token_ms=0.1)
#: wall time between runs (client start after the previous run / server ready)
STORY_IDLE_S = (430.0, 435.0, 190.0, 170.0)
#: Poisson arrival streams of the three finite-rate runs (the inf run has none)
STORY_ARRIVAL_SEEDS = (1745, 17, 7, None)


def story_server(step: StepModel = STORY_STEP, **overrides) -> ServerConfig:
    kw = dict(model_path="/models/GLM-5-NVFP4", tp_size=8, dp_size=1, max_total_num_tokens=291_264,
              max_running_requests=2048, chunked_prefill_size=8192, max_prefill_tokens=16384,
              context_len=202752, decode_log_interval=40, disable_cuda_graph=True, cuda_graph_max_bs=256,
              mem_fraction_static=0.85, port=30000, step=step, gpu_mem_gb=94.97, weight_load_s=431.0,
              model_class="GlmMoeDsaForCausalLM", quantization="modelopt_fp4")
    kw.update(overrides)
    return ServerConfig(**kw)


def story_runs(dataset_seeds: tuple = STORY_DATASET_SEEDS, idle: tuple = STORY_IDLE_S,
               arrival_seeds: tuple = STORY_ARRIVAL_SEEDS) -> list[Scenario]:
    common = dict(random_input_len=256, random_output_len=256, random_range_ratio=0.0, backend="sglang",
                  retokenize_extra=(0, 1))
    plan = [(16, 2.0), (32, 8.0), (64, 16.0), (64, math.inf)]
    return [Scenario(num_prompts=n, request_rate=r, idle_before_s=idle[i], arrival_seed=arrival_seeds[i],
                     dataset_seed=dataset_seeds[i], **common)
            for i, (n, r) in enumerate(plan)]


def story_simulation(seed: int = STORY_SEED, step: StepModel = STORY_STEP, dataset_seeds: tuple = STORY_DATASET_SEEDS,
                     arrival_seeds: tuple = STORY_ARRIVAL_SEEDS, noise: bool | Noise = True,
                     n_runs: int = 4) -> Simulation:
    runs = story_runs(dataset_seeds, arrival_seeds=arrival_seeds)[:n_runs]
    return simulate(story_server(step), runs, seed=seed, release=STORY_RELEASE, start=STORY_START, noise=noise)
