"""Drives the bench_serving client and the schedulers on one clock.

The client and the server are simulated jointly because with `--max-concurrency` a request is
dispatched only when an earlier one completes.  The loop always advances whichever comes first:
the next client dispatch (known once a concurrency slot is known to be free) or the next
iteration of the scheduler that is furthest behind.  A step's finishes are known when the step
starts, and lie after every scheduler's current time, so no event is ever seen too late.

A bench run follows bench_serving (sglang-formats.md §5.5): warmup request(s) with
output_len = min(output_len of the first request, 32) awaited, optional `/flush_cache`, a 1.0 s
sleep, the measured requests (Poisson or all at once, capped by max_concurrency), then the
end-of-run server-info call (before `duration` is taken) and one more after printing.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .formats import Clock, access_line, rank_prefix, sglang_line
from .logbook import PORT, LogBook
from .releases import Release, client_server_info_path
from .scenario import Noise, Scenario, ServerConfig
from .scheduler import RankScheduler, Req
from .startup import emit_startup

DEPRECATION = ("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
               "Please use '/server_info' instead.")


@dataclass
class RunResult:
    index: int
    scenario: Scenario
    requests: list[Req]
    warmups: list[Req]
    t_client_start: float
    t0: float  # first measured dispatch (bench_serving's start mark)
    t1: float  # when duration is taken
    t_end: float  # after the second server-info call
    server_info: dict | None
    server_info_path: str | None
    lengths: tuple = field(default=())


def dataset_lengths(sc: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """bench_serving's random dataset lengths: numpy legacy RNG, input first, then output."""
    rs = np.random.RandomState(sc.dataset_seed)
    lin, lout, ratio = sc.random_input_len, sc.random_output_len, sc.random_range_ratio
    ins = rs.randint(max(int(lin * ratio), 1), lin + 1, size=sc.num_prompts)
    outs = rs.randint(int(lout * ratio), lout + 1, size=sc.num_prompts)
    return ins, np.maximum(outs, 1)


class Engine:
    def __init__(self, cfg: ServerConfig, release: Release, bench_version: str, seed: int, clock: Clock,
                 noise: Noise):
        self.cfg, self.release, self.bench_version, self.noise = cfg, release, bench_version, noise
        self.rng = random.Random(seed)
        self.seed = seed
        self.clock = clock
        self.book = LogBook(seed)
        self._rid = 0
        self._rr = 0
        init_t, http_t = emit_startup(self.book, clock, cfg, release, self.rng, noise, seed)
        self.t_init = init_t
        self.scheds = [RankScheduler(d, cfg, random.Random(self.rng.getrandbits(64)), init_t, release)
                       for d in range(cfg.dp_size)]
        self.now = http_t
        self.idle_gaps: list[tuple[float, float]] = []
        self.runs: list[RunResult] = []
        self._server_warmup()

    # ------------------------------------------------------------------ helpers
    def _req(self, kind: str, run: int, key, input_len: int, output_len: int, client_len: int = 0) -> Req:
        self._rid += 1
        return Req(self._rid, kind, run, key, int(input_len), int(output_len), client_prompt_len=int(client_len))

    def _http(self, t: float, method: str, path: str, status: int = 200) -> None:
        self.book.add(t, "http", access_line(self.clock, t, "127.0.0.1", PORT, method, path, status))

    def _main(self, t: float, msg: str, kind: str) -> None:
        self.book.add(t, "events", sglang_line(self.clock, t, "", msg), kind=kind)

    # ------------------------------------------------------------------ the loop
    def _dispatch(self, r: Req, t: float, stream: bool, endpoint: str) -> None:
        r.send_t = t
        r.arrive_t = t + self.cfg.net_latency_s
        r.rank = self._rr % self.cfg.dp_size
        self._rr += 1
        r.fill_len = r.input_len
        self.scheds[r.rank].deliver(r)
        if stream:  # a StreamingResponse starts at once: the access line marks arrival
            self._http(r.arrive_t + 0.0003, "POST", endpoint)

    def _drive(self, reqs: list[Req], arrivals: list[float], max_conc: int | None, stream: bool, endpoint: str) -> None:
        pending = deque(zip(arrivals, reqs))
        slots = [arrivals[0]] * max_conc if max_conc else None
        remaining = len(reqs)
        net = self.cfg.net_latency_s
        scheds = self.scheds
        while remaining:
            td = math.inf
            if pending:
                a = pending[0][0]
                if slots is None:
                    td = a
                elif slots:
                    td = max(a, slots[0])
            s = scheds[0] if len(scheds) == 1 else min(scheds, key=RankScheduler.next_time)
            ts = s.next_time()
            if td == math.inf and ts == math.inf:
                raise RuntimeError("simulation stalled: requests outstanding but nothing can run")
            if td <= ts:
                _, r = pending.popleft()
                if slots is not None:
                    heapq.heappop(slots)
                self._dispatch(r, td, stream, endpoint)
                continue
            s.now = ts
            s.iterate()
            if s.finished:
                for r in s.finished:
                    remaining -= 1
                    if slots is not None:
                        heapq.heappush(slots, r.finish_t + net)
                    if not stream:  # non-streamed responses start (and are logged) at completion
                        self._http(r.finish_t + 0.0005, "POST", endpoint)
                s.finished.clear()

    # ------------------------------------------------------------------ phases
    def _server_warmup(self) -> None:
        t = self.now + 0.4 + self.rng.uniform(0, 0.3)
        self._http(t, "GET", "/model_info")
        r = self._req("server_warmup", -1, None, 7, 8)
        self._drive([r], [t + 0.02], None, False, "/generate")
        t_ready = r.finish_t + 0.02
        self._main(t_ready, "The server is fired up and ready to roll!", "ready")
        self.now = t_ready + 0.001

    def server_info(self) -> dict:
        cfg = self.cfg
        states = []
        for s in self.scheds:
            st = {"last_gen_throughput": round(s.last_gen, 4), "memory_usage": {"token_capacity": cfg.max_total_num_tokens}}
            if cfg.speculative:
                st["avg_spec_accept_length"] = (s.life_tokens / s.life_reqsteps) if s.life_reqsteps else None
            states.append(st)
        return {"model_path": cfg.model_path, "tp_size": cfg.tp_size, "dp_size": cfg.dp_size,
                "max_running_requests": cfg.max_running_requests, "chunked_prefill_size": cfg.chunked_prefill_size,
                "decode_log_interval": cfg.decode_log_interval, "disable_cuda_graph": cfg.disable_cuda_graph,
                "cuda_graph_max_bs": cfg.cuda_graph_max_bs, "mem_fraction_static": cfg.mem_fraction_static,
                "max_total_num_tokens": cfg.max_total_num_tokens, "internal_states": states,
                "version": self.release.version}

    def _server_info_call(self, t: float, path: str) -> float:
        """One GET; returns the response time (the access line's moment)."""
        tr = t + 0.003 + self.rng.uniform(0, 0.008)
        if path == "/get_server_info" and self.release.deprecates_get_server_info:
            self._main(tr - 0.0005, DEPRECATION, "deprecation")
        self._http(tr, "GET", path)
        return tr

    def run_bench(self, index: int, sc: Scenario) -> RunResult:
        cfg, rng, net = self.cfg, self.rng, self.cfg.net_latency_s
        for s in self.scheds:  # each run's step jitter is its own stream: runs can be calibrated one by one
            s.rng.seed(self.seed * 1_000_033 + index * 101 + s.rank)
        t_start = self.now + sc.idle_before_s
        self.idle_gaps.append((self.now, t_start))
        ins, outs = dataset_lengths(sc)
        lo, hi = sc.retokenize_extra
        extra = [rng.randint(lo, hi) for _ in range(sc.num_prompts)]
        key = (sc.dataset_seed, sc.num_prompts, sc.random_input_len, sc.random_output_len, sc.random_range_ratio)
        t_w = t_start + 2.0 + rng.uniform(0, 1.0)  # client start-up: tokenizer, dataset
        warm = [self._req("client_warmup", index, key + (0,), ins[0] + extra[0], min(int(outs[0]), 32), ins[0])
                for _ in range(sc.warmup_requests)]
        if warm:
            self._drive(warm, [t_w] * len(warm), None, sc.stream, sc.endpoint)
            t = max(r.finish_t for r in warm) + net
        else:
            t = t_w
        if sc.flush_cache:
            t += 0.005
            self._http(t, "POST", "/flush_cache")
            for s in self.scheds:
                s.flush_cache()
                pre = rank_prefix(self.release, s.rank if cfg.dp_size > 1 else None, 0, cfg.tp_size)
                self.book.add(t, "events", sglang_line(self.clock, t, pre, "Cache flushed successfully!"), kind="flush")
            t += 0.01
        t0 = t + 1.0 + 0.0015
        if math.isinf(sc.request_rate):
            arrivals = [t0] * sc.num_prompts
        else:
            arrivals, a = [], t0
            theta = 1.0 / (sc.request_rate * sc.burstiness)
            arr_rng = random.Random(sc.arrival_seed if sc.arrival_seed is not None else self.seed * 1_000_003 + index)
            for _ in range(sc.num_prompts):
                arrivals.append(a)
                a += arr_rng.gammavariate(sc.burstiness, theta)
        reqs = [self._req("measured", index, key + (i,), ins[i] + extra[i], outs[i], ins[i])
                for i in range(sc.num_prompts)]
        self._drive(reqs, arrivals, sc.max_concurrency, sc.stream, sc.endpoint)
        t_last = max(r.emits[-1][0] for r in reqs) + net
        path = client_server_info_path(self.bench_version) if sc.backend.startswith("sglang") else None
        info = None
        if path:
            tr = self._server_info_call(t_last + 0.002 + rng.uniform(0, 0.002), path)
            info = self.server_info()
            t1 = tr + net
            t_end = self._server_info_call(t1 + 0.05 + rng.uniform(0, 0.1), path) + 0.002
        else:
            t1 = t_end = t_last + 0.0005
        self.now = t_end
        run = RunResult(index, sc, reqs, warm, t_start, t0, t1, t_end, info, path, (ins, outs))
        self.runs.append(run)
        return run
