"""The knobs of a simulation, as frozen dataclasses.

`ServerConfig` is the SGLang server (parallelism, KV pool, limits, logging interval, how long a
forward takes); `Scenario` is one `bench_serving` invocation against it (dataset, rate,
concurrency, backend).  They are plain values so that tests and hypothesis strategies can build,
compare and `dataclasses.replace` them freely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

NATIVE_BACKENDS = ("sglang", "sglang-native")
COMPLETIONS_BACKENDS = ("sglang-oai", "vllm", "lmdeploy")
CHAT_BACKENDS = ("sglang-oai-chat", "vllm-chat", "lmdeploy-chat")


@dataclass(frozen=True)
class StepModel:
    """How long one scheduler iteration takes.

    Decode step seconds = (fixed_ms + per_req_ms * batch_size) / 1000, times (1 + N(0, jitter)).
    A prefill (extend) forward takes prefill_fixed_ms + prefill_per_token_ms * new tokens.
    `graph_fixed_ms` is the fixed cost of a decode step that runs inside a CUDA graph (None: the
    same as `fixed_ms`); a speculative verify step adds `spec_overhead_ms` for the draft model.
    """

    fixed_ms: float = 30.0
    per_req_ms: float = 0.5
    jitter: float = 0.02
    graph_fixed_ms: float | None = None
    prefill_fixed_ms: float = 40.0
    prefill_per_token_ms: float = 0.05
    spec_overhead_ms: float = 0.0


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding (EAGLE-style): every verify step emits 1..num_draft_tokens tokens per
    request, `accept_len` on average (the bonus token included)."""

    accept_len: float = 2.5
    num_draft_tokens: int = 4
    algorithm: str = "EAGLE"

    def __post_init__(self) -> None:
        if not 1.0 <= self.accept_len <= self.num_draft_tokens:
            raise ValueError("accept_len must lie in [1, num_draft_tokens]")


@dataclass(frozen=True)
class ServerConfig:
    """One SGLang server.  KV numbers are per DP rank (each DP rank owns a pool)."""

    model_path: str = "/models/Llama-3.1-8B-Instruct"
    tp_size: int = 1
    dp_size: int = 1
    max_total_num_tokens: int = 200_000
    max_running_requests: int = 256
    chunked_prefill_size: int = 8192  # <= 0 disables chunking
    max_prefill_tokens: int = 16384
    context_len: int = 131072
    decode_log_interval: int = 40
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: int = 160
    mem_fraction_static: float = 0.85
    page_size: int = 1
    port: int = 30000
    host: str = "127.0.0.1"
    step: StepModel = field(default_factory=StepModel)
    speculative: Speculative | None = None
    init_new_token_ratio: float = 0.7
    min_new_token_ratio: float = 0.1
    new_token_ratio_decay_steps: int = 600
    retract_decode_steps: int = 20
    net_latency_s: float = 0.001  # one-way client<->server latency (loopback plus HTTP handling)
    gpu_mem_gb: float = 95.0  # per GPU, only for the start-up lines
    weight_load_s: float = 60.0  # only for the start-up lines
    model_class: str = "LlamaForCausalLM"
    quantization: str | None = None

    def __post_init__(self) -> None:
        if self.tp_size < 1 or self.dp_size < 1:
            raise ValueError("tp_size and dp_size must be >= 1")
        if self.decode_log_interval < 1:
            raise ValueError("decode_log_interval must be >= 1")
        if self.max_total_num_tokens < 16:
            raise ValueError("max_total_num_tokens is too small")

    @property
    def served_model_name(self) -> str:
        return self.model_path

    def uses_cuda_graph(self, batch_size: int) -> bool:
        return (not self.disable_cuda_graph) and batch_size <= self.cuda_graph_max_bs


@dataclass(frozen=True)
class Scenario:
    """One `python -m sglang.bench_serving` run against the server.

    The dataset is bench_serving's `random` dataset: lengths drawn with numpy's legacy
    `RandomState(dataset_seed).randint` (input first, then output), input in
    [max(int(L*ratio), 1), L], output in [int(L*ratio), L] floored at 1.  Same seed and same
    num_prompts mean the same prompts, so a repeated run hits the server's prefix cache.
    `idle_before_s` is the wall time between the end of the previous run (or the server being
    ready) and this client starting.
    """

    num_prompts: int = 100
    request_rate: float = math.inf
    max_concurrency: int | None = None
    random_input_len: int = 1024
    random_output_len: int = 1024
    random_range_ratio: float = 0.0
    backend: str = "sglang"
    stream: bool = True
    dataset_seed: int = 1
    warmup_requests: int = 1
    idle_before_s: float = 30.0
    flush_cache: bool = False
    burstiness: float = 1.0
    retokenize_extra: tuple[int, int] = (0, 0)  # server-side prompt tokens minus client target, drawn uniformly
    arrival_seed: int | None = None  # Poisson arrival stream (None: derived from the simulation seed and run index)
    tag: str | None = None

    def __post_init__(self) -> None:
        if self.num_prompts < 1:
            raise ValueError("num_prompts must be >= 1")
        if not self.request_rate > 0:
            raise ValueError("request_rate must be > 0 (math.inf for all at once)")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be None or >= 1")
        if self.backend not in NATIVE_BACKENDS + COMPLETIONS_BACKENDS + CHAT_BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}")

    @property
    def endpoint(self) -> str:
        if self.backend in NATIVE_BACKENDS:
            return "/generate"
        if self.backend in CHAT_BACKENDS:
            return "/v1/chat/completions"
        return "/v1/completions"

    @property
    def is_native(self) -> bool:
        return self.backend in NATIVE_BACKENDS


@dataclass(frozen=True)
class Noise:
    """Unrelated lines a real log carries.  All off with `Noise.none()`."""

    health_every_s: float | None = 20.0  # a load-balancer probe: `GET /health` 200
    metrics_every_s: float | None = 60.0  # a Prometheus scraper without --enable-metrics: 404
    warnings: bool = True  # a few harmless warnings at start-up
    traceback: bool = True  # one uvicorn traceback (client disconnect) in an idle gap
    tqdm: bool = True  # weight-loading progress lines (no prefix; continuation lines)

    @classmethod
    def none(cls) -> "Noise":
        return cls(None, None, False, False, False)
