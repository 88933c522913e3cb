"""Generate a deterministic, realistic SGLang server log of a requested size.

    python benchmarks/gen_log.py --size 200MiB -o benchmarks/data/x.log [--mix current|mixed] [--seed 0]

Writes the log plus a JSON sidecar `<log>.counts.json` with the exact number of physical lines
per family (decode / prefill / http / other, blank), the number of `events` records the other
lines form (a traceback is one record), and per-variant counts, so a test can check a parser's
row counts against ground truth.

Speed matters (1 GiB must take well under a minute), so values are drawn with numpy a block
(~20k lines) at a time and lines are rendered with one f-string each; nothing is formatted per
field in a Python loop.  Realism matters too: running requests follow a random walk bounded by
the session's `max_running_requests`, `#token` follows the running batch times a drifting
context length and saturates at the KV pool, `cuda graph` turns False above the session's
`cuda_graph_max_bs`, `gen throughput` follows a step-time model, queues build when the pool is
full, and the server restarts now and then (start-up dump, crash tracebacks, shutdowns).

`--mix current` emits the v0.5.9+ shapes only; `--mix mixed` interleaves every release's
Decode/Prefill shape from /work/shared/formats/sglang-variants.txt (period vs comma headers,
trailing `, `, `[n]` counters, legacy `[gpu=0]` forms, millisecond and time-only stamps, ...).
"""

from __future__ import annotations

import argparse
import json
import operator
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

GENERATOR_VERSION = 1  # bump when the output for a given (size, mix, seed) changes

# family codes (per record)
DECODE, PREFILL, HTTP, OTHER, BLANK = range(5)
FAMILY_NAMES = ["decode", "prefill", "http", "other", "blank"]
MIXES = ("current", "mixed")

#: share of physical lines per family (the rest of "other" comes from session start/stop)
LINE_MIX = {DECODE: 0.40, PREFILL: 0.20, HTTP: 0.35, OTHER: 0.05}
BLOCK_LINES = 20_000

START_EPOCH = 1771460832  # 2026-02-19 00:27:12, rendered as naive local time (no timezone)


# ---------------------------------------------------------------------------------------
# sizes


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "k": 2**10, "m": 2**20, "g": 2**30}


def parse_size(text: str) -> int:
    """'200MiB' -> 209715200; accepts B, KB/MB/GB (10^3) and KiB/MiB/GiB (2^10)."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"bad size {text!r} (use e.g. 2MiB, 200MiB, 1GiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


# ---------------------------------------------------------------------------------------
# session (one server start): what the prefixes and limits are


@dataclass
class Session:
    all_ranks: list[str]  # rank prefixes of every scheduler (start-up lines)
    log_ranks: list[str]  # prefixes of the schedulers that print Decode/Prefill lines
    tp: int
    dp: int
    pp: int
    ep: int
    model: str
    max_running: int
    max_total_tokens: int
    cuda_graph_max_bs: int  # 0: graphs disabled
    chunked_prefill: int
    port: int
    pid: int
    step_fixed_ms: float  # decode step = fixed + per_req * batch
    step_per_req_ms: float


_MODELS = [
    ("meta-llama/Llama-3.1-8B-Instruct", "LlamaForCausalLM", 15.0),
    ("Qwen/Qwen2.5-72B-Instruct", "Qwen2ForCausalLM", 36.0),
    ("Qwen/Qwen3-30B-A3B", "Qwen3MoeForCausalLM", 15.2),
    ("deepseek-ai/DeepSeek-V3", "DeepseekV3ForCausalLM", 80.0),
    ("mistralai/Mistral-7B-Instruct-v0.3", "MistralForCausalLM", 13.5),
]

# (all_ranks, log_ranks, tp, dp, pp, ep, weight)
_TOPOLOGIES = [
    ([""], [""], 1, 1, 1, 1, 0.15),
    ([" TP0", " TP1"], [" TP0"], 2, 1, 1, 1, 0.30),
    ([f" TP{i}" for i in range(4)], [" TP0"], 4, 1, 1, 1, 0.15),
    ([f" DP{i} TP{i}" for i in range(4)], [f" DP{i} TP{i}" for i in range(4)], 4, 4, 1, 1, 0.15),
    ([" DP0", " DP1"], [" DP0", " DP1"], 1, 2, 1, 1, 0.10),
    ([f" PP{p} TP{t}" for p in range(2) for t in range(2)], [" PP0 TP0", " PP1 TP0"], 2, 1, 2, 1, 0.05),
    ([f" TP{i} EP{i}" for i in range(8)], [" TP0 EP0"], 8, 1, 1, 8, 0.10),
]


def new_session(rng: np.random.Generator) -> Session:
    w = np.array([t[-1] for t in _TOPOLOGIES])
    all_r, log_r, tp, dp, pp, ep, _ = _TOPOLOGIES[rng.choice(len(_TOPOLOGIES), p=w / w.sum())]
    model = _MODELS[rng.integers(len(_MODELS))][0]
    max_running = int(rng.choice([64, 128, 256, 512]))
    return Session(
        all_ranks=all_r, log_ranks=log_r, tp=tp, dp=dp, pp=pp, ep=ep, model=model,
        max_running=max_running,
        max_total_tokens=int(rng.integers(200, 2000)) * 1000 + int(rng.integers(0, 999)),
        cuda_graph_max_bs=int(rng.choice([0, 128, 160, 256, 512], p=[0.1, 0.3, 0.3, 0.2, 0.1])),
        chunked_prefill=int(rng.choice([2048, 4096, 8192, 16384])),
        port=int(rng.choice([30000, 30000, 8000, 30010])),
        pid=int(rng.integers(1000, 4_000_000)),
        step_fixed_ms=float(rng.uniform(6, 25)),
        step_per_req_ms=float(rng.uniform(0.02, 0.15)),
    )


# ---------------------------------------------------------------------------------------
# line variants.  Each function gets the common per-line values and returns the body after
# the `[time ranks] ` prefix.  `stamp` says how the prefix looks in that release:
# "date" `[YYYY-MM-DD HH:MM:SS R] `, "ms" with `.mmm`, "time" `[HH:MM:SS R] `, "none" nothing.
#   decode args: r=#running-req t=#token u=usage c=graph flag g=gen tput q=#queue-req it=[n] a=U(0,1)
#   prefill args: s=#new-seq n=#new-token k=#cached-token u r q x=input tput it a


def _b(a: float) -> str:
    return "True" if a < 0.5 else "False"


DECODE_VARIANTS: list[tuple[str, str, float, object]] = [
    # name, stamp, weight in --mix mixed, body
    ("D0", "none", 1, lambda r, t, u, c, g, q, it, a:
        f"#running-req: {r}, #token: {t}, token usage: {u:.2f}, #queue-req: {q}"),
    ("D0b", "none", 1, lambda r, t, u, c, g, q, it, a:
        f"#running-req: {r}, #token: {t}, token usage: {u:.2f}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D1", "none", 2, lambda r, t, u, c, g, q, it, a:
        f"[gpu_id=0] Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D2", "none", 2, lambda r, t, u, c, g, q, it, a:
        f"[gpu=0] Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D3t", "time", 3, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D3", "date", 4, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D4", "date", 2, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, accept len: {1 + 3 * a:.2f}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D5", "date", 2, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, gen throughput (token/s): {g:.2f}, largest-len: 0, #queue-req: {q}, "),
    ("D6", "date", 3, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D7", "date", 2, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D7pd", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, pre-allocated usage: {a / 10:.2f}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D8", "date", 4, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D8pd", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, pre-allocated usage: {a / 10:.2f}, #retracted-req: {int(a * 3)}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D8swa", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: full={t}, swa={t // 2}, token usage: full={u:.2f}, swa={u / 2:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D9", "date", 2, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, timestamp: {{iso}}"),
    ("D10", "date", 5, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D10swa", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #full token: {t}, full token usage: {u:.2f}, #swa token: {t // 2}, swa token usage: {u / 2:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D10cpu", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, cpu graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D10pd", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, pre-allocated usage: {a / 10:.2f}, #prealloc-req: {int(a * 8)}, #transfer-req: {int(a * 4)}, #retracted-req: 0, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D10spec", "date", 2, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #token: {t}, token usage: {u:.2f}, accept len: {1 + 3 * a:.2f}, accept rate: {a:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D10mamba", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch. #running-req: {r}, #full token: {t}, full token usage: {u:.2f}, mamba num: {r}, mamba usage: {a:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D11", "date", 2, lambda r, t, u, c, g, q, it, a:
        f"Decode batch [{it}], #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D12", "date", 5, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D12ms", "ms", 2, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, "),
    ("D13", "date", 12, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D13it", "date", 2, lambda r, t, u, c, g, q, it, a:
        f"Decode batch [{it}], #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D13ms", "ms", 3, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D13npu", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u:.2f}, npu graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D13img", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u:.2f}, waiting-image-req: {int(a * 4)}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D13mfu", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, est. decode TFLOPS/s (per GPU): {60 * a:.2f}, est. read BW (GB/s per GPU): {3000 * a:.2f}, est. write BW (GB/s per GPU): {5 * a:.2f}"),
    ("D13fwd", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}, fwd occupancy: {50 + 50 * a:.2f}%"),
    ("D13hisparse", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #gpu token: {t}, gpu token usage: {u:.2f}, #cpu token: {t * 4}, cpu token usage: {a:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
    ("D13cap", "date", 1, lambda r, t, u, c, g, q, it, a:
        f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u:.2f}, accept len: {1 + 3 * a:.2f}, accept rate: {a:.2f}, cap len: 4.00, block accept len: {1 + 2.9 * a:.2f}, cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"),
]

PREFILL_VARIANTS: list[tuple[str, str, float, object]] = [
    ("P0", "none", 1, lambda s, n, k, u, r, q, x, it, a:
        f"new fill batch. #seq: {s}. #cached_token: {k}. #new_token: {n}. #remaining_req: {q}. #running_req: {r}"),
    ("P0b", "none", 1, lambda s, n, k, u, r, q, x, it, a:
        f"new fill batch. #seq: {s}. #cached_token: {k}. #new_token: {n}. #remaining_req: {q}. #running_req: {r}. tree_cache_hit_rate: {100 * a:.2f}%."),
    ("P1", "none", 1, lambda s, n, k, u, r, q, x, it, a:
        f"[gpu_id=0] Prefil batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, cache hit rate: {100 * a:.2f}%, #running-req: {r}, #queue-req: {q}"),
    ("P2", "none", 2, lambda s, n, k, u, r, q, x, it, a:
        f"[gpu_id=0] Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, cache hit rate: {100 * a:.2f}%, #running-req: {r}, #queue-req: {q}"),
    ("P3", "none", 2, lambda s, n, k, u, r, q, x, it, a:
        f"[gpu=0] Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, cache hit rate: {100 * a:.2f}%, #running-req: {r}, #queue-req: {q}"),
    ("P4t", "time", 2, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, cache hit rate: {100 * a:.2f}%, #running-req: {r}, #queue-req: {q}"),
    ("P4m", "time", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch(mixed #running-req: {r}). #new-seq: {s}, #new-token: {n}, #cached-token: {k}, cache hit rate: {100 * a:.2f}%, #queue-req: {q}"),
    ("P5", "date", 3, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, cache hit rate: {100 * a:.2f}%, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}"),
    ("P5m", "time", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch(mixed #running-req: {r}). #new-seq: {s}, #new-token: {n}, #cached-token: {k}, cache hit rate: {100 * a:.2f}%, token usage: {u:.2f}, #queue-req: {q}"),
    ("P6", "date", 3, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, "),
    ("P7", "date", 3, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}"),
    ("P7pd", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: 0, #unbootstrapped-req: {int(a * 4)}, #queue-req: {q}, #transferring-req: {int(a * 8)} "),
    ("P7pdt", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: 0, #unbootstrapped-req: {int(a * 4)}, #queue-req: {q}, #transferring-req: {int(a * 8)}, time: {a:.2f} "),
    ("P7pdx", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #unbootstrapped-req: {int(a * 4)}, #queue-req: {q}, #transferring-req: {int(a * 8)}, input throughput (token/s): {x:.2f} "),
    ("P7v", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, #token: {n + k + r * 300}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}"),
    ("P8", "date", 2, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, #token: {n + k + r * 300}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, timestamp: {{iso}}"),
    ("P9", "date", 5, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, "),
    ("P9pd", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #unbootstrapped-req: {int(a * 4)}, #queue-req: {q}, #transferring-req: {int(a * 8)}, input throughput (token/s): {x:.2f}, "),
    ("P9pd2", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch. #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: 0, #queue-req: {q}, #prealloc-req: {int(a * 4)}, #inflight-req: {int(a * 8)}, "),
    ("P10", "date", 2, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch [{it}], #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, "),
    ("P11", "date", 5, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, "),
    ("P11ms", "ms", 2, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, "),
    ("P11pd", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: 0, #queue-req: {q}, #prealloc-req: {int(a * 4)}, #inflight-req: {int(a * 8)}, input throughput (token/s): {x:.2f}, "),
    ("P12", "date", 8, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, input throughput (token/s): {x:.2f}, cuda graph: False"),
    ("P12pd", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: 0, #queue-req: {q}, #prealloc-req: {int(a * 4)}, #inflight-req: {int(a * 8)}, input throughput (token/s): {x:.2f}, cuda graph: False"),
    ("P13", "date", 3, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, cuda graph: False, input throughput (token/s): {x:.2f}"),
    ("P13mfu", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, cuda graph: False, input throughput (token/s): {x:.2f}, est. prefill TFLOPS/s (per GPU): {400 * a:.2f}"),
    ("P14", "date", 6, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, #pending-token: {q * 700}, cuda graph: False, input throughput (token/s): {x:.2f}"),
    ("P14ms", "ms", 2, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, #pending-token: {q * 700}, cuda graph: False, input throughput (token/s): {x:.2f}"),
    ("P14pd", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: 0, #queue-req: {q}, #pending-token: {q * 700}, #bootstrap-req: {int(a * 4)}, #inflight-req: {int(a * 8)}, cuda graph: False, input throughput (token/s): {x:.2f}"),
    ("P14pdo", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: 0, #queue-req: {q}, #pending-token: {q * 700}, #bootstrap-req: {int(a * 4)}, #inflight-req: {int(a * 8)}, #optimistic-req: {int(a * 2)}, cuda graph: False, input throughput (token/s): {x:.2f}"),
    ("P14replay", "date", 1, lambda s, n, k, u, r, q, x, it, a:
        f"Prefill batch, #new-seq: {s}, #new-token: {n}, #cached-token: {k}, token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, #pending-token: {q * 700}, #replay-token: {1 + int(a * 512)}, cuda graph: False, input throughput (token/s): {x:.2f}"),
]

# the shapes `--mix current` uses (v0.5.9+, exactly as in the issue)
CURRENT_DECODE = "D13"
CURRENT_PREFILL = "P12"

VARIANT_NAMES = [v[0] for v in DECODE_VARIANTS] + [v[0] for v in PREFILL_VARIANTS]

# uvicorn access lines: (request line, status, weight)
_HTTP_REQUESTS = [
    ("POST /generate", "200 OK", 0.52),
    ("POST /v1/chat/completions", "200 OK", 0.15),
    ("POST /v1/completions", "200 OK", 0.08),
    ("GET /health", "200 OK", 0.07),
    ("GET /metrics", "200 OK", 0.05),
    ("GET /health_generate", "200 OK", 0.02),
    ("GET /get_server_info", "200 OK", 0.01),
    ("GET /server_info", "200 OK", 0.01),
    ("GET /v1/models", "200 OK", 0.02),
    ("GET /get_model_info", "200 OK", 0.005),
    ("GET /model_info", "200 OK", 0.005),
    ("POST /flush_cache", "200 OK", 0.003),
    ("GET /metrics?format=prometheus", "200 OK", 0.002),
    ("HEAD /health", "200 OK", 0.002),
    ("POST /generate", "400 Bad Request", 0.01),
    ("POST /v1/chat/completions", "400 Bad Request", 0.008),
    ("POST /v1/chat/completions", "422 Unprocessable Entity", 0.003),
    ("GET /favicon.ico", "404 Not Found", 0.003),
    ("GET /", "404 Not Found", 0.002),
    ("POST /generate", "500 Internal Server Error", 0.003),
    ("GET /health", "503 Service Unavailable", 0.002),
    ("POST /v1/completions", "503 Service Unavailable", 0.001),
]
_HTTP_CLIENTS = ["127.0.0.1"] * 16 + ["::1"] * 2 + [f"10.0.{i}.{j}" for i, j in ((0, 12), (0, 13), (1, 7), (3, 41))]


# ---------------------------------------------------------------------------------------
# other lines: start-up dump, warnings, tracebacks, shutdowns


def _server_args(s: Session, rng: np.random.Generator) -> str:
    args = [
        f"model_path='{s.model}'", f"tokenizer_path='{s.model}'", "tokenizer_mode='auto'",
        "skip_tokenizer_init=False", "load_format='auto'", "trust_remote_code=False",
        "dtype='auto'", "kv_cache_dtype='auto'", "quantization=None", "context_length=None",
        "device='cuda'", f"served_model_name='{s.model}'", "chat_template=None", "is_embedding=False",
        "revision=None", "host='127.0.0.1'", f"port={s.port}", f"mem_fraction_static={rng.uniform(0.7, 0.9):.3f}",
        f"max_running_requests={s.max_running}", "max_total_tokens=None",
        f"chunked_prefill_size={s.chunked_prefill}", f"max_prefill_tokens={2 * s.chunked_prefill}",
        "schedule_policy='fcfs'", "schedule_conservativeness=1.0", "cpu_offload_gb=0", "page_size=1",
        f"tp_size={s.tp}", f"pp_size={s.pp}", "max_micro_batch_size=None", "stream_interval=1",
        "stream_output=False", f"random_seed={int(rng.integers(0, 2**30))}", "constrained_json_whitespace_pattern=None",
        "watchdog_timeout=300", "dist_timeout=None", "download_dir=None", "base_gpu_id=0", "gpu_id_step=1",
        "log_level='info'", "log_level_http=None", "log_requests=False", "log_requests_level=0",
        "show_time_cost=False", "enable_metrics=False", "decode_log_interval=40",
        "api_key=None", "file_storage_path='sglang_storage'", "enable_cache_report=False",
        "reasoning_parser=None", f"dp_size={s.dp}", "load_balance_method='round_robin'",
        f"ep_size={s.ep}", "dist_init_addr=None", "nnodes=1", "node_rank=0",
        "json_model_override_args='{}'", "lora_paths=None", "max_loras_per_batch=8",
        "attention_backend='flashinfer'", "sampling_backend='flashinfer'", "grammar_backend='xgrammar'",
        "speculative_algorithm=None", "speculative_num_steps=None", "speculative_num_draft_tokens=None",
        f"enable_dp_attention={s.dp > 1 and s.tp > 1}", "enable_ep_moe=False",
        f"disable_cuda_graph={s.cuda_graph_max_bs == 0}", "disable_radix_cache=False",
        f"cuda_graph_max_bs={s.cuda_graph_max_bs or 'None'}", "cuda_graph_bs=None",
        "torch_compile_max_bs=32", "enable_mixed_chunk=False", "enable_torch_compile=False",
        "disaggregation_mode='null'", "enable_metrics_for_all_schedulers=False",
    ]
    return "server_args=ServerArgs(" + ", ".join(args) + ")"


def startup_lines(s: Session, rng: np.random.Generator) -> list[tuple[str, str]]:
    """(rank prefix or None for the main process, body) in start-up order; '' body = blank line."""
    model_cls = next(c for m, c, _ in _MODELS if m == s.model)
    weight_gb = next(w for m, _, w in _MODELS if m == s.model)
    mem = 79.1
    out: list[tuple[str | None, str]] = [(None, _server_args(s, rng))]
    out.append((None, "Using default HuggingFace chat template with detected content format: string"))
    for rk in s.all_ranks:
        out.append((rk, "Init torch distributed begin."))
    for rk in s.all_ranks:
        out.append((rk, f"Init torch distributed ends. elapsed={rng.uniform(0.3, 9):.2f} s, mem usage={rng.uniform(0.05, 1.2):.2f} GB"))
    rk0 = s.all_ranks[0]
    out.append((rk0, f"Load weight begin. avail mem={mem:.2f} GB"))
    after = mem - weight_gb / max(s.tp, 1)
    out.append((rk0, f"Load weight end. elapsed={rng.uniform(3, 120):.2f} s, type={model_cls}, dtype=torch.bfloat16, avail mem={after:.2f} GB, mem usage={mem - after:.2f} GB."))
    kv_gb = after * 0.8
    out.append((rk0, f"KV Cache is allocated. #tokens: {s.max_total_tokens}, K size: {kv_gb / 2:.2f} GB, V size: {kv_gb / 2:.2f} GB"))
    out.append((rk0, f"Memory pool end. avail mem={after - kv_gb:.2f} GB"))
    if s.cuda_graph_max_bs:
        bs = [1, 2, 4, 8] + list(range(16, s.cuda_graph_max_bs + 1, 8))
        out.append((rk0, f"Capture cuda graph begin. This can take up to several minutes. avail mem={after - kv_gb:.2f} GB"))
        out.append((rk0, f"Capture cuda graph bs {bs}"))
        out.append((rk0, f"Capture cuda graph end. Time elapsed: {rng.uniform(5, 60):.2f} s. mem usage={rng.uniform(0.3, 2):.2f} GB. avail mem={after - kv_gb - 1:.2f} GB."))
    out.append((rk0, f"max_total_num_tokens={s.max_total_tokens}, chunked_prefill_size={s.chunked_prefill}, "
                     f"max_prefill_tokens={2 * s.chunked_prefill}, max_running_requests={s.max_running}, "
                     f"context_len=131072, available_gpu_mem={after - kv_gb - 1:.2f} GB"))
    out.append((None, f"INFO:     Started server process [{s.pid}]"))
    out.append((None, "INFO:     Waiting for application startup."))
    out.append((None, "INFO:     Application startup complete."))
    out.append((None, f"INFO:     Uvicorn running on http://127.0.0.1:{s.port} (Press CTRL+C to quit)"))
    out.append((None, "The server is fired up and ready to roll!"))
    return out


_SCHED = "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py"
_PY = "/usr/local/lib/python3.12/dist-packages"

_ASGI_TRACEBACK = [
    "Traceback (most recent call last):",
    f'  File "{_PY}/uvicorn/protocols/http/httptools_impl.py", line 409, in run_asgi',
    "    result = await app(  # type: ignore[func-returns-value]",
    "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_PY}/uvicorn/middleware/proxy_headers.py", line 60, in __call__',
    "    return await self.app(scope, receive, send)",
    f'  File "{_PY}/fastapi/applications.py", line 1054, in __call__',
    "    await super().__call__(scope, receive, send)",
    f'  File "{_PY}/starlette/routing.py", line 73, in app',
    "    response = await f(request)",
    '  File "/sgl-workspace/sglang/python/sglang/srt/entrypoints/http_server.py", line 498, in generate_request',
    "    async for out in _global_state.tokenizer_manager.generate_request(obj, request):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/tokenizer_manager.py", line 512, in _tokenize_one_request',
    "    raise ValueError(",
]
_ASGI_ERRORS = [
    "ValueError: The input ({n} tokens) is longer than the model's context length (131072 tokens).",
    "ValueError: Requested token count exceeds the model's maximum context length of 131072 tokens. You requested a total of {n} tokens.",
    "asyncio.exceptions.CancelledError",
]

_FATAL_TRACEBACK = [
    f'  File "{_SCHED}", line 2871, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    f'  File "{_PY}/torch/utils/_contextlib.py", line 116, in decorate_context',
    "    return func(*args, **kwargs)",
    "           ^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_SCHED}", line 1012, in event_loop_overlap',
    "    batch_result = self.run_batch(batch)",
    "                   ^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_SCHED}", line 1884, in run_batch',
    "    ) = self.tp_worker.forward_batch_generation(model_worker_batch)",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1721, in forward',
    "    return self.forward_decode(forward_batch, pp_proxy_tensors=pp_proxy_tensors)",
]
_FATAL_ERRORS = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {g:.2f} GiB. GPU 0 has a total capacity of 79.25 GiB of which {f:.2f} MiB is free.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "AssertionError: Memory pool leak detected!",
]


class OtherLines:
    """Draws the single- and multi-line records of the `other` family during traffic."""

    # kind, weight
    KINDS = [("retract", 0.30), ("deprecated", 0.22), ("flushed", 0.06), ("not_flushed", 0.04),
             ("invalid_http", 0.08), ("log_req", 0.06), ("asgi_traceback", 0.035), ("nccl_warn", 0.02),
             ("finish", 0.10), ("blank", 0.025)]

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        w = np.array([k[1] for k in self.KINDS])
        self.p = w / w.sum()

    def draw(self, n_lines: int, s: Session, mixed: bool) -> list[tuple[int, str | None, str, int]]:
        """Records totalling >= n_lines lines: (family, rank prefix or None, text, line count).
        A multi-line text carries its continuation lines after '\\n'."""
        rng = self.rng
        out = []
        got = 0
        kinds = rng.choice(len(self.KINDS), size=max(1, n_lines), p=self.p)
        vals = rng.random((len(kinds), 3))
        for k, (a, b, c) in zip(kinds.tolist(), vals.tolist()):
            if got >= n_lines:
                break
            kind = self.KINDS[k][0]
            rk = s.log_ranks[int(a * len(s.log_ranks))]
            if kind == "retract":
                before = 0.3 + 0.5 * b
                if mixed and c < 0.3:
                    text = f"Decode out of memory happened. #retracted_reqs: {1 + int(a * 8)}, #new_token_ratio: {before:.4f} -> {min(1.0, before + 0.15):.4f}"
                else:
                    text = (f"KV cache pool is full. Retract requests. #retracted_reqs: {1 + int(a * 8)}, "
                            f"#new_tokens_gained: {int(b * 8192)}, #new_token_ratio: {before:.4f} -> {min(1.0, before + 0.15):.4f}")
                rec = (OTHER, rk, text, 1)
            elif kind == "deprecated":
                rec = (OTHER, None, "Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead.", 1)
            elif kind == "flushed":
                rec = (OTHER, rk, "Cache flushed successfully!", 1)
            elif kind == "not_flushed":
                rec = (OTHER, rk, f"Cache not flushed because there are pending requests. #queue-req: {int(a * 20)}, #running-req: {int(b * 64)}", 1)
            elif kind == "invalid_http":
                rec = (OTHER, None, "WARNING:  Invalid HTTP request received.", 1)
            elif kind == "log_req":
                rid = f"{int(a * 2**52):013x}{int(c * 4096):03x}"
                rec = (OTHER, None, f"Receive: obj=GenerateReqInput(rid='{rid}', text='The capital city of France is', sampling_params={{'max_new_tokens': {int(b * 512)}, 'temperature': 0.0}}, stream=True)", 1)
            elif kind == "finish":
                rid = f"{int(a * 2**52):013x}{int(c * 4096):03x}"
                rec = (OTHER, None, f"Finish: obj=GenerateReqInput(rid='{rid}'), out={{'meta_info': {{'id': '{rid}', "
                                    f"'finish_reason': {{'type': 'length', 'length': {int(b * 512)}}}, 'prompt_tokens': {int(c * 4096)}, "
                                    f"'completion_tokens': {int(b * 512)}, 'cached_tokens': {int(a * 1024)}, 'e2e_latency': {b * 30:.4f}}}}}", 1)
            elif kind == "nccl_warn":
                rec = (OTHER, rk, f"[W219 00:31:0{int(b * 9)}.{int(c * 1e6):06d} ProcessGroupNCCL.cpp:1476] Warning: process group has NOT been destroyed before we destruct ProcessGroupNCCL.", 1)
            elif kind == "asgi_traceback":
                err = _ASGI_ERRORS[int(b * len(_ASGI_ERRORS))].format(n=131072 + int(c * 50000))
                tail = _ASGI_TRACEBACK + [err]
                rec = (OTHER, None, "ERROR:    Exception in ASGI application\n" + "\n".join(tail), 1 + len(tail))
            else:  # blank
                rec = (BLANK, None, "", 1)
            out.append(rec)
            got += rec[3]
        return out

    def shutdown(self, s: Session, crash: bool) -> list[tuple[int, str | None, str, int]]:
        rng = self.rng
        if crash:
            err = _FATAL_ERRORS[int(rng.integers(len(_FATAL_ERRORS)))].format(g=rng.uniform(0.1, 4), f=rng.uniform(10, 900))
            tail = _FATAL_TRACEBACK + [err]
            recs = [(OTHER, s.log_ranks[0], "Scheduler hit an exception: Traceback (most recent call last):\n" + "\n".join(tail), 1 + len(tail))]
            # torch's per-rank stderr lines have no [time] prefix: they continue the record above
            recs.append((OTHER, None, "Received sigquit from a child process. It usually means the child failed.\n"
                                      "[rank0]:[W219 00:31:02.123456789 ProcessGroupNCCL.cpp:1476] Warning: WARNING: "
                                      "process group has NOT been destroyed before we destruct ProcessGroupNCCL.", 2))
            recs.append((BLANK, None, "", 1))
            return recs
        return [(OTHER, None, "INFO:     Shutting down", 1),
                (OTHER, None, "INFO:     Waiting for application shutdown.", 1),
                (OTHER, None, "INFO:     Application shutdown complete.", 1),
                (OTHER, None, f"INFO:     Finished server process [{s.pid}]", 1),
                (BLANK, None, "", 1)]


# ---------------------------------------------------------------------------------------
# the generator


@dataclass
class Counts:
    families: np.ndarray = field(default_factory=lambda: np.zeros(5, np.int64))  # lines per family
    other_records: int = 0
    variants: np.ndarray = field(default_factory=lambda: np.zeros(len(VARIANT_NAMES), np.int64))
    bytes: int = 0


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Fold an unbounded walk into [lo, hi] (a reflecting random walk, vectorized)."""
    span = hi - lo
    y = np.mod(x - lo, 2 * span)
    return lo + np.where(y > span, 2 * span - y, y)


class LogGenerator:
    def __init__(self, mix: str = "current", seed: int = 0):
        if mix not in MIXES:
            raise ValueError(f"mix must be one of {MIXES}")
        self.mix = mix
        self.mixed = mix == "mixed"
        self.rng = np.random.default_rng(seed)
        self.others = OtherLines(self.rng)
        self.t_ms = START_EPOCH * 1000 + int(self.rng.integers(0, 3_600_000))
        self.session: Session | None = None
        self.session_left = 0  # records until this server "stops"
        self.walk_run = 20.0  # running-req walk state
        self.walk_ctx = 800.0  # mean context length walk state
        self.iter = 0  # forward counter, for `[n]` headers
        self._sec_cache: dict[int, str] = {}
        d = [(i, v) for i, v in enumerate(DECODE_VARIANTS)]
        p = [(len(DECODE_VARIANTS) + i, v) for i, v in enumerate(PREFILL_VARIANTS)]
        if self.mixed:
            self.dec_vars, self.pre_vars = d, p
        else:
            self.dec_vars = [x for x in d if x[1][0] == CURRENT_DECODE]
            self.pre_vars = [x for x in p if x[1][0] == CURRENT_PREFILL]
        self.dec_p = self._weights(self.dec_vars)
        self.pre_p = self._weights(self.pre_vars)

    @staticmethod
    def _weights(vs):
        w = np.array([v[1][2] for v in vs], float)
        return w / w.sum()

    # -- time ------------------------------------------------------------------------
    def _date(self, sec: int) -> str:
        s = self._sec_cache.get(sec)
        if s is None:
            if len(self._sec_cache) > 100_000:
                self._sec_cache.clear()
            s = self._sec_cache[sec] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(sec))
        return s

    def _times(self, n: int, mean_ms: float = 25.0) -> np.ndarray:
        """Monotonic ms timestamps for n records: ~25 ms apart, with rare idle gaps."""
        step = self.rng.exponential(mean_ms, n)
        idle = self.rng.random(n) < 2e-5
        step[idle] += self.rng.uniform(30_000, 3_600_000, int(idle.sum()))
        t = self.t_ms + np.cumsum(step).astype(np.int64)
        self.t_ms = int(t[-1]) if n else self.t_ms
        return t

    def _prefix(self, t_ms: int, rank: str | None, stamp: str = "date") -> str:
        rank = rank or ""
        d = self._date(t_ms // 1000)
        if stamp == "date":
            return f"[{d}{rank}] "
        if stamp == "ms":
            return f"[{d}.{t_ms % 1000:03d}{rank}] "
        if stamp == "time":
            return f"[{d[11:]}{rank}] "
        return ""

    # -- one block -------------------------------------------------------------------
    def block(self):
        """Render the next block of records, in file order.

        Returns (texts, family per record, lines per record, variant id per record or -1)."""
        rng = self.rng
        head: list[tuple[int, str | None, str, int]] = []
        tail: list[tuple[int, str | None, str, int]] = []
        if self.session is None:
            self.session = new_session(rng)
            self.session_left = int(rng.integers(100_000, 1_500_000))
            for rk, body in startup_lines(self.session, rng):
                head.append((OTHER, rk, body, 1))
        s = self.session

        L = BLOCK_LINES
        n_other = int(rng.binomial(L, LINE_MIX[OTHER]))
        others = self.others.draw(n_other, s, self.mixed)
        n_other = sum(r[3] for r in others)
        rest = L - n_other
        n_dec = int(rng.binomial(rest, LINE_MIX[DECODE] / (1 - LINE_MIX[OTHER])))
        n_pre = int(rng.binomial(rest - n_dec, LINE_MIX[PREFILL] / (1 - LINE_MIX[OTHER] - LINE_MIX[DECODE])))
        n_http = rest - n_dec - n_pre

        self.session_left -= L
        if self.session_left <= 0:
            tail = self.others.shutdown(s, crash=bool(rng.random() < 0.4))
            self.session = None

        # file order of the traffic records: a shuffle of the family codes
        kinds = np.concatenate([np.full(n_dec, DECODE, np.int8), np.full(n_pre, PREFILL, np.int8),
                                np.full(n_http, HTTP, np.int8), np.full(len(others), OTHER, np.int8)])
        order = rng.permutation(len(kinds))
        kinds = kinds[order]
        t_head = self._times(len(head), 2500.0) if head else np.zeros(0, np.int64)
        t = self._times(len(kinds))
        t_tail = self._times(len(tail), 500.0) if tail else np.zeros(0, np.int64)

        dec_pos = np.flatnonzero(kinds == DECODE)
        pre_pos = np.flatnonzero(kinds == PREFILL)
        http_pos = np.flatnonzero(kinds == HTTP)
        oth_pos = np.flatnonzero(kinds == OTHER)

        sched_pos = np.flatnonzero((kinds == DECODE) | (kinds == PREFILL))
        state = self._state(len(sched_pos), s)
        is_dec = kinds[sched_pos] == DECODE
        dec_txt, dec_var = self._decode(t[dec_pos], s, [x[is_dec] for x in state])
        pre_txt, pre_var = self._prefill(t[pre_pos], s, [x[~is_dec] for x in state])
        http_txt = self._http(t[http_pos])
        oth_txt = [self._other_text(tt, r) for tt, r in zip(t[oth_pos].tolist(), others)]

        # scatter the per-family lists back into file order with one C-level gather
        src = np.empty(len(kinds), np.int64)
        off = 0
        for pos in (dec_pos, pre_pos, http_pos, oth_pos):
            src[pos] = np.arange(off, off + len(pos))
            off += len(pos)
        pool = dec_txt + pre_txt + http_txt + oth_txt
        traffic = list(operator.itemgetter(*src.tolist())(pool)) if len(src) > 1 else pool

        fam = kinds.copy()
        nlines = np.ones(len(kinds), np.int32)
        var = np.full(len(kinds), -1, np.int16)
        var[dec_pos] = dec_var
        var[pre_pos] = pre_var
        fam_o = np.array([r[0] for r in others], np.int8)
        fam[oth_pos] = fam_o
        nlines[oth_pos] = [r[3] for r in others]

        head_txt = [self._other_text(tt, r) for tt, r in zip(t_head.tolist(), head)]
        tail_txt = [self._other_text(tt, r) for tt, r in zip(t_tail.tolist(), tail)]
        texts = head_txt + traffic + tail_txt
        fam = np.concatenate([np.array([r[0] for r in head], np.int8).reshape(-1), fam,
                              np.array([r[0] for r in tail], np.int8).reshape(-1)])
        nlines = np.concatenate([np.array([r[3] for r in head], np.int32).reshape(-1), nlines,
                                 np.array([r[3] for r in tail], np.int32).reshape(-1)])
        var = np.concatenate([np.full(len(head), -1, np.int16), var, np.full(len(tail), -1, np.int16)])
        return texts, fam, nlines, var

    def _other_text(self, t_ms: int, rec) -> str:
        fam, rank, text, _ = rec
        if fam == BLANK:
            return ""
        stamp = "ms" if self.mixed and rank is not None and (t_ms % 10) == 0 else "date"
        return self._prefix(t_ms, rank, stamp) + text

    def _ranks(self, s: Session, n: int) -> list[str]:
        if len(s.log_ranks) == 1:
            return [s.log_ranks[0]] * n
        idx = self.rng.integers(len(s.log_ranks), size=n)
        return operator.itemgetter(*idx.tolist())(s.log_ranks) if n > 1 else [s.log_ranks[i] for i in idx]

    def _state(self, n: int, s: Session):
        """Running batch, token counts, usage and queue for the n scheduler lines of a block,
        in file order, so Decode and Prefill lines written close together agree.  The walks
        continue across blocks."""
        rng = self.rng
        walk = self.walk_run + np.cumsum(rng.normal(0, 1.5, n))
        self.walk_run = float(walk[-1]) if n else self.walk_run
        run = np.rint(_reflect(walk, 1, s.max_running)).astype(np.int64)
        ctx_walk = self.walk_ctx + np.cumsum(rng.normal(0, 6, n))
        self.walk_ctx = float(ctx_walk[-1]) if n else self.walk_ctx
        ctx = _reflect(ctx_walk, 64, 6000)
        tok = np.minimum(run * ctx * rng.uniform(0.95, 1.05, n), 0.985 * s.max_total_tokens).astype(np.int64)
        usage = tok / s.max_total_tokens
        full = (usage > 0.9) | (run >= s.max_running)
        queue = np.where(full, rng.poisson(25, n), np.where(rng.random(n) < 0.08, rng.poisson(2, n), 0))
        return run, tok, usage, queue

    def _decode(self, t: np.ndarray, s: Session, state):
        rng = self.rng
        n = len(t)
        if n == 0:
            return [], np.zeros(0, np.int16)
        run, tok, usage, queue = state
        per_req = 1000.0 / (s.step_fixed_ms + s.step_per_req_ms * run)
        gen = run * per_req * rng.uniform(0.85, 1.05, n)
        slow = rng.random(n) < 0.005  # first window after an idle gap: tiny throughput
        gen[slow] *= rng.uniform(0.005, 0.3, int(slow.sum()))
        graph = (run <= s.cuda_graph_max_bs) if s.cuda_graph_max_bs else np.zeros(n, bool)
        graph_s = np.where(graph, "True", "False").tolist()
        self.iter += 40 * n
        it = (self.iter - 40 * np.arange(n, 0, -1)).tolist()
        ranks = self._ranks(s, n)
        tl = t.tolist()
        R, T, U, G, Q = run.tolist(), tok.tolist(), usage.tolist(), gen.tolist(), queue.tolist()
        if not self.mixed:
            # the hot path: one f-string per line, shape D13
            d = self._date
            txt = [f"[{d(ms // 1000)}{rk}] Decode batch, #running-req: {r}, #token: {k}, token usage: {u:.2f}, "
                   f"cuda graph: {c}, gen throughput (token/s): {g:.2f}, #queue-req: {q}"
                   for ms, rk, r, k, u, c, g, q in zip(tl, ranks, R, T, U, graph_s, G, Q)]
            return txt, np.full(n, self.dec_vars[0][0], np.int16)
        A = rng.random(n).tolist()
        choice = rng.choice(len(self.dec_vars), size=n, p=self.dec_p)
        txt = []
        for i, ci in enumerate(choice.tolist()):
            _, (name, stamp, _, fn) = self.dec_vars[ci]
            body = fn(R[i], T[i], U[i], graph_s[i], G[i], Q[i], it[i], A[i])
            if name == "D9":
                body = body.replace("{iso}", self._iso(tl[i]))
            txt.append(self._prefix(tl[i], ranks[i], stamp) + body)
        return txt, np.array([self.dec_vars[c][0] for c in choice.tolist()], np.int16)

    def _prefill(self, t: np.ndarray, s: Session, state):
        rng = self.rng
        n = len(t)
        if n == 0:
            return [], np.zeros(0, np.int16)
        run, _, usage, queue = state
        seq = np.minimum(rng.geometric(0.45, n), 64)
        new_tok = np.clip(seq * rng.lognormal(6.3, 1.0, n), 1, s.chunked_prefill).astype(np.int64)
        cached = np.where(rng.random(n) < 0.45, 0, (new_tok * rng.uniform(0, 2.5, n)).astype(np.int64))
        tput = new_tok / rng.uniform(0.05, 0.6, n)
        tput[rng.random(n) < 0.003] = 0.0
        ranks = self._ranks(s, n)
        tl = t.tolist()
        S, N, K, U, R, Q, X = (seq.tolist(), new_tok.tolist(), cached.tolist(), usage.tolist(),
                               run.tolist(), queue.tolist(), tput.tolist())
        if not self.mixed:
            d = self._date
            txt = [f"[{d(ms // 1000)}{rk}] Prefill batch, #new-seq: {s_}, #new-token: {n_}, #cached-token: {k}, "
                   f"token usage: {u:.2f}, #running-req: {r}, #queue-req: {q}, input throughput (token/s): {x:.2f}, cuda graph: False"
                   for ms, rk, s_, n_, k, u, r, q, x in zip(tl, ranks, S, N, K, U, R, Q, X)]
            return txt, np.full(n, self.pre_vars[0][0], np.int16)
        A = rng.random(n).tolist()
        choice = rng.choice(len(self.pre_vars), size=n, p=self.pre_p)
        self.iter += n
        txt = []
        for i, ci in enumerate(choice.tolist()):
            _, (name, stamp, _, fn) = self.pre_vars[ci]
            body = fn(S[i], N[i], K[i], U[i], R[i], Q[i], X[i], self.iter + i, A[i])
            if name == "P8":
                body = body.replace("{iso}", self._iso(tl[i]))
            txt.append(self._prefix(tl[i], ranks[i], stamp) + body)
        return txt, np.array([self.pre_vars[c][0] for c in choice.tolist()], np.int16)

    def _iso(self, t_ms: int) -> str:
        return self._date(t_ms // 1000).replace(" ", "T") + f".{(t_ms % 1000) * 1000 + t_ms % 997:06d}"

    _http_p = np.array([h[2] for h in _HTTP_REQUESTS]) / sum(h[2] for h in _HTTP_REQUESTS)

    def _http(self, t: np.ndarray) -> list[str]:
        rng = self.rng
        n = len(t)
        if n == 0:
            return []
        req = rng.choice(len(_HTTP_REQUESTS), size=n, p=self._http_p).tolist()
        cli = rng.integers(len(_HTTP_CLIENTS), size=n).tolist()
        port = rng.integers(20000, 65536, size=n).tolist()
        ver = np.where(rng.random(n) < 0.005, "HTTP/1.0", "HTTP/1.1").tolist()
        d = self._date
        reqs, clis = _HTTP_REQUESTS, _HTTP_CLIENTS
        txt = [f'[{d(ms // 1000)}] INFO:     {clis[c]}:{p} - "{reqs[r][0]} {v}" {reqs[r][1]}'
               for ms, r, c, p, v in zip(t.tolist(), req, cli, port, ver)]
        if self.mixed:  # uvicorn's own default format (SGLang <= v0.3.3): no timestamp
            for i in np.flatnonzero(rng.random(n) < 0.08).tolist():
                txt[i] = txt[i][txt[i].index("] ") + 2:]
        return txt


# ---------------------------------------------------------------------------------------
# writing


def sidecar_path(log_path: str | Path) -> Path:
    return Path(str(log_path) + ".counts.json")


def generate(path: str | Path, size: int, mix: str = "current", seed: int = 0, quiet: bool = True) -> dict:
    """Write a log of at most `size` bytes (whole records only) and its sidecar; return the counts."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    gen = LogGenerator(mix, seed)
    c = Counts()
    t0 = time.perf_counter()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb", buffering=16 << 20) as f:
        while c.bytes < size:
            texts, fam, nlines, var = gen.block()
            data = ("\n".join(texts) + "\n").encode("ascii")
            if c.bytes + len(data) > size:
                # last block: keep the records that fit (each record is its text plus '\n')
                ends = np.cumsum(np.fromiter((len(x) + 1 for x in texts), np.int64, len(texts)))
                keep = int(np.searchsorted(ends, size - c.bytes, side="right"))
                keep = max(keep, 1 if c.bytes == 0 else 0)
                texts, fam, nlines, var = texts[:keep], fam[:keep], nlines[:keep], var[:keep]
                data = ("\n".join(texts) + "\n").encode("ascii") if keep else b""
                size = c.bytes  # stop after this block
            f.write(data)
            c.bytes += len(data)
            c.families += np.bincount(fam, weights=nlines, minlength=5).astype(np.int64)
            c.other_records += int(np.count_nonzero(fam == OTHER))
            v = var[var >= 0]
            c.variants += np.bincount(v, minlength=len(VARIANT_NAMES)).astype(np.int64)
            if not quiet:
                print(f"\r{c.bytes / 2**20:9.1f} MiB", end="", file=sys.stderr, flush=True)
    tmp.replace(path)
    elapsed = time.perf_counter() - t0
    if not quiet:
        print(file=sys.stderr)
    fams = {name: int(c.families[i]) for i, name in enumerate(FAMILY_NAMES)}
    counts = {
        "generator_version": GENERATOR_VERSION,
        "mix": mix,
        "seed": seed,
        "path": str(path),
        "size_bytes": c.bytes,
        "lines": int(c.families.sum()),
        **fams,
        # the `events` table should hold one row per prefixed other line; its rows span `other` lines
        "other_records": c.other_records,
        "variants": {VARIANT_NAMES[i]: int(n) for i, n in enumerate(c.variants) if n},
        "gen_seconds": round(elapsed, 3),
    }
    sidecar_path(path).write_text(json.dumps(counts, indent=1) + "\n")
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", required=True, help="target size, e.g. 2MiB, 200MiB, 1GiB")
    ap.add_argument("-o", "--out", required=True, help="log path to write (sidecar: <path>.counts.json)")
    ap.add_argument("--mix", choices=MIXES, default="current")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    counts = generate(args.out, parse_size(args.size), args.mix, args.seed, quiet=not sys.stderr.isatty())
    secs = counts["gen_seconds"]
    print(json.dumps({k: v for k, v in counts.items() if k != "variants"}))
    print(f"wrote {counts['size_bytes'] / 2**20:.1f} MiB, {counts['lines']} lines in {secs:.1f} s "
          f"({counts['size_bytes'] / 1e6 / max(secs, 1e-9):.0f} MB/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
