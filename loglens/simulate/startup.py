"""Server start-up lines and unrelated noise.

A real log starts with the `server_args=ServerArgs(...)` dump, per-rank init / weight-loading /
KV-pool lines, the `max_total_num_tokens=...` line, uvicorn's start-up lines and the server's own
warmup; parsers and the config table read these, so they must be spelled as SGLang spells them
(sglang-formats.md §6.2).  The noise (health probes, a scraper getting 404s, harmless warnings, a
uvicorn traceback, tqdm progress lines) exists so parsers are tested against realistic clutter.
"""

from __future__ import annotations

import random

from .formats import Clock, access_line, rank_prefix, sglang_line, uvicorn_line
from .logbook import PORT, LogBook
from .releases import Release
from .scenario import Noise, ServerConfig


def server_args_repr(cfg: ServerConfig, release: Release, seed: int) -> str:
    """`ServerArgs(...)` as a dataclass repr: `name=repr(value)` joined by ', '."""
    sp = cfg.speculative
    fields = [
        ("model_path", cfg.model_path), ("tokenizer_path", cfg.model_path), ("tokenizer_mode", "auto"),
        ("skip_tokenizer_init", False), ("load_format", "auto"), ("trust_remote_code", True),
        ("context_length", None), ("is_embedding", False), ("revision", None), ("host", cfg.host),
        ("port", cfg.port), ("skip_server_warmup", False), ("dtype", "auto"), ("quantization", cfg.quantization),
        ("kv_cache_dtype", "auto"), ("mem_fraction_static", cfg.mem_fraction_static),
        ("max_running_requests", cfg.max_running_requests), ("max_queued_requests", None),
        ("max_total_tokens", None), ("chunked_prefill_size", cfg.chunked_prefill_size),
        ("max_prefill_tokens", cfg.max_prefill_tokens), ("schedule_policy", "fcfs"),
        ("schedule_conservativeness", 1.0), ("page_size", cfg.page_size), ("device", "cuda"),
        ("tp_size", cfg.tp_size), ("pp_size", 1), ("stream_interval", 1), ("stream_output", False),
        ("random_seed", seed), ("watchdog_timeout", 300), ("download_dir", None), ("base_gpu_id", 0),
        ("gpu_id_step", 1), ("log_level", "info"), ("log_level_http", None), ("log_requests", False),
        ("log_requests_level", 2), ("show_time_cost", False), ("enable_metrics", False),
        ("decode_log_interval", cfg.decode_log_interval), ("api_key", None),
        ("served_model_name", cfg.served_model_name), ("chat_template", None), ("dp_size", cfg.dp_size),
        ("load_balance_method", "round_robin"), ("ep_size", 1), ("attention_backend", None),
        ("sampling_backend", "flashinfer"), ("grammar_backend", "xgrammar"),
        ("speculative_algorithm", sp.algorithm if sp else None),
        ("speculative_num_draft_tokens", sp.num_draft_tokens if sp else None),
        ("disable_radix_cache", False), ("cuda_graph_max_bs", cfg.cuda_graph_max_bs), ("cuda_graph_bs", None),
        ("disable_cuda_graph", cfg.disable_cuda_graph), ("disable_cuda_graph_padding", False),
        ("enable_dp_attention", False), ("disable_overlap_schedule", False), ("enable_mixed_chunk", False),
        ("enable_torch_compile", False), ("torch_compile_max_bs", 32), ("num_continuous_decode_steps", 1),
        ("allow_auto_truncate", False), ("disaggregation_mode", "null"),
    ]
    if release.key < (0, 3, 5, 0):
        fields = [f for f in fields if f[0] != "decode_log_interval"]
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields) + ")"


def _ranks(cfg: ServerConfig, release: Release):
    for dp in range(cfg.dp_size):
        for tp in range(cfg.tp_size):
            yield dp, tp, rank_prefix(release, dp if cfg.dp_size > 1 else None, tp, cfg.tp_size)


def emit_startup(book: LogBook, clock: Clock, cfg: ServerConfig, release: Release, rng: random.Random,
                 noise: Noise, seed: int) -> tuple[float, float]:
    """Write the start-up lines from t=0; return (scheduler init time, HTTP server up time)."""
    add = book.add
    add(0.0, "events", sglang_line(clock, 0.0, "", "server_args=" + server_args_repr(cfg, release, seed)),
        kind="server_args")
    if noise.warnings:
        add(1.2, "events", sglang_line(clock, 1.2, "", "Attention backend not explicitly specified. "
                                       "Use flashinfer backend by default."), kind="warning")
    total = cfg.tp_size * cfg.dp_size
    weight_gb = cfg.gpu_mem_gb * 0.55
    kv_gb = max(0.5, cfg.gpu_mem_gb * cfg.mem_fraction_static - weight_gb)
    t_load = 9.0 + rng.uniform(0, 2)
    t_end = t_load + cfg.weight_load_s
    for dp, tp, pre in _ranks(cfg, release):
        j = rng.uniform(0, 0.6)
        avail = cfg.gpu_mem_gb - rng.uniform(0.5, 1.5)
        add(5.0 + j, "events", sglang_line(clock, 5.0 + j, pre, "Init torch distributed begin."), kind="startup")
        add(t_load - 0.5 + j, "events", sglang_line(clock, t_load - 0.5 + j, pre,
            f"Init torch distributed ends. elapsed={t_load - 5.5:.2f} s, mem usage={0.3 + 0.1 * total:.2f} GB"),
            kind="startup")
        add(t_load + j, "events", sglang_line(clock, t_load + j, pre, f"Load weight begin. avail mem={avail:.2f} GB"),
            kind="startup")
        if noise.tqdm and tp == 0 and dp == 0:
            shards = 83
            for k, frac in enumerate((0.0, 0.25, 0.5, 0.75, 1.0)):
                tq = t_load + j + 0.01 + frac * (cfg.weight_load_s - 1.0)
                done = int(shards * frac)
                add(tq, "events", f"Loading safetensors checkpoint shards: {int(frac * 100):3d}% Completed | "
                    f"{done}/{shards} [{int(tq - t_load) // 60:02d}:{int(tq - t_load) % 60:02d}<?, ?it/s]",
                    kind="tqdm", continuation=True)
        te = t_end + rng.uniform(0, 1.5)
        add(te, "events", sglang_line(clock, te, pre,
            f"Load weight end. elapsed={te - t_load:.2f} s, type={cfg.model_class}, dtype=torch.bfloat16, "
            f"avail mem={avail - weight_gb:.2f} GB, mem usage={weight_gb:.2f} GB."), kind="startup")
        tk = t_end + 3.0 + rng.uniform(0, 0.3)
        add(tk, "events", sglang_line(clock, tk, pre, f"KV Cache is allocated. #tokens: {cfg.max_total_num_tokens}, "
            f"K size: {kv_gb / 2:.2f} GB, V size: {kv_gb / 2:.2f} GB"), kind="kv_alloc")
        add(tk + 0.01, "events", sglang_line(clock, tk + 0.01, pre,
            f"Memory pool end. avail mem={avail - weight_gb - kv_gb:.2f} GB"), kind="startup")
    t = t_end + 4.0
    if not cfg.disable_cuda_graph:
        bss = [b for b in (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256)
               if b <= cfg.cuda_graph_max_bs]
        for dp, tp, pre in _ranks(cfg, release):
            add(t, "events", sglang_line(clock, t, pre, "Capture cuda graph begin. This can take up to several "
                                          f"minutes. avail mem={cfg.gpu_mem_gb * 0.1:.2f} GB"), kind="startup")
            add(t + 0.01, "events", sglang_line(clock, t + 0.01, pre, f"Capture cuda graph bs {bss}"), kind="startup")
        t += 20.0 + 0.3 * len(bss)
        for dp, tp, pre in _ranks(cfg, release):
            add(t, "events", sglang_line(clock, t, pre, f"Capture cuda graph end. Time elapsed: {t - t_end - 4:.2f} s. "
                                          f"mem usage=1.21 GB. avail mem={cfg.gpu_mem_gb * 0.08:.2f} GB."),
                kind="startup")
        t += 0.5
    for dp in range(cfg.dp_size):
        pre = rank_prefix(release, dp if cfg.dp_size > 1 else None, 0, cfg.tp_size)
        if noise.warnings and dp == 0:
            add(t, "events", sglang_line(clock, t, pre, "Detected fp4 checkpoint. Please note that the format is "
                                          "experimental and subject to change."), kind="warning")
        add(t + 0.05, "events", sglang_line(clock, t + 0.05, pre,
            f"max_total_num_tokens={cfg.max_total_num_tokens}, chunked_prefill_size={cfg.chunked_prefill_size}, "
            f"max_prefill_tokens={cfg.max_prefill_tokens}, max_running_requests={cfg.max_running_requests}, "
            f"context_len={cfg.context_len}, available_gpu_mem={cfg.gpu_mem_gb * 0.08:.2f} GB"), kind="kv_limits")
    init_t = t + 0.1
    th = init_t + 1.0
    pid = rng.randint(1000, 400000)
    for k, msg in enumerate((f"Started server process [{pid}]", "Waiting for application startup.",
                             "Application startup complete.",
                             f"Uvicorn running on http://{cfg.host}:{cfg.port} (Press CTRL+C to quit)")):
        add(th + 0.001 * k, "events", uvicorn_line(clock, th + 0.001 * k, "INFO", msg), kind="uvicorn")
    return init_t, th + 0.01


TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/uvicorn/protocols/http/httptools_impl.py", line 409, in run_asgi',
    "    result = await app(  # type: ignore[func-returns-value]",
    '  File "/usr/local/lib/python3.12/dist-packages/starlette/responses.py", line 250, in stream_response',
    '    await send({"type": "http.response.body", "body": chunk, "more_body": True})',
    '  File "/usr/local/lib/python3.12/dist-packages/uvicorn/protocols/http/httptools_impl.py", line 520, in send',
    "    raise ClientDisconnected",
    "uvicorn.protocols.utils.ClientDisconnected",
]


def emit_noise(book: LogBook, clock: Clock, noise: Noise, rng: random.Random, t_from: float, t_to: float,
               idle_gaps: list[tuple[float, float]]) -> None:
    """Periodic probes between t_from and t_to, plus one traceback in the longest idle gap."""
    for every, path, status in ((noise.health_every_s, "/health", 200), (noise.metrics_every_s, "/metrics", 404)):
        if not every:
            continue
        t = t_from + rng.uniform(0, every)
        while t < t_to:
            book.add(t, "http", access_line(clock, t, "127.0.0.1", PORT, "GET", path, status))
            t += every * rng.uniform(0.98, 1.02)
    gaps = [g for g in idle_gaps if g[1] - g[0] > 6.0]
    if gaps and noise.warnings:
        a, b = gaps[0]
        t = a + 2.0
        book.add(t, "events", uvicorn_line(clock, t, "WARNING", "Invalid HTTP request received."), kind="warning")
    if gaps and noise.traceback:
        a, b = max(gaps, key=lambda g: g[1] - g[0])
        t = (a + b) / 2
        book.add(t, "events", [uvicorn_line(clock, t, "ERROR", "Exception in ASGI application")] + TRACEBACK,
                 kind="traceback")
