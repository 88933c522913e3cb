"""Plain records the scheduler produces: requests, forward steps and the stats it logs.

Kept apart from the scheduler so the line writers, the bench writer and the truth can use them
without importing the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(eq=False, slots=True)
class Req:
    rid: int
    kind: str  # "server_warmup" | "client_warmup" | "measured"
    run: int  # bench run index, -1 for the server's own warmup
    prompt_key: object  # prompt identity for the prefix cache (None: never shared)
    input_len: int  # server-side prompt tokens
    output_len: int
    rank: int = 0
    send_t: float = math.nan
    arrive_t: float = math.nan
    fill_len: int = 0  # tokens to prefill for the current admission (prompt, or prompt+output after retraction)
    filled: int = 0
    cached: int = 0
    generated: int = 0
    kv: int = 0
    emits: list = field(default_factory=list)  # (server time, tokens) per forward that produced tokens
    finish_t: float | None = None
    retractions: int = 0
    prefill_tokens_out: int = 0
    client_prompt_len: int = 0  # the dataset's target length (what bench_serving counts)


@dataclass(slots=True)
class Step:
    rank: int
    kind: str  # "prefill" | "decode"
    t0: float
    t1: float
    batch_size: int
    tokens: int  # output tokens this forward produced
    new_tokens: int = 0  # prefill: tokens computed
    accepted: int = 0  # decode: accepted draft tokens (speculative)
    graph: bool = False
    ct: int = 0  # decode counter after this step


@dataclass(slots=True)
class DecodeStat:
    rank: int
    t: float
    ct: int
    running: int
    token: int
    usage: float
    graph: bool
    gen: float
    queue: int
    window_tokens: int
    window_s: float
    accept_len: float | None = None
    accept_rate: float | None = None


@dataclass(slots=True)
class PrefillStat:
    rank: int
    t: float
    new_seq: int
    new_token: int
    cached_token: int
    token: int
    usage: float
    running: int
    queue: int
    pending_token: int
    hit_rate: float  # cumulative, percent
    in_thr: float
    graph: bool = False


@dataclass(slots=True)
class RetractStat:
    rank: int
    t: float
    n: int
    gained: int
    ratio_before: float
    ratio_after: float
