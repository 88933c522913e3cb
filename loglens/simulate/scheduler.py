"""One SGLang scheduler process (one DP rank), iteration by iteration.

Why a model rather than random numbers: the reconciler and the step-time fitter are tested
against it, so the log's fields must follow the real semantics (sglang-formats.md §1.3, §4):

* each iteration is either a prefill (extend) batch or a decode batch; admissible waiting
  requests are prefilled first (no mixed chunks), a chunked request continues before anything
  else, so decode stalls while a long prompt is chunked;
* the decode counter is global and never reset (only `/flush_cache` resets it); a Decode stat
  fires when it hits a multiple of `decode_log_interval`; its gen throughput is the tokens of
  decode steps since the previous stat of this rank divided by the wall time since that stat
  (the tic is set at start-up and never reset on idle);
* the first output token of a request comes from its prefill forward and is not counted;
* `#token` counts KV slots held by running (and chunked) requests; finished requests go to an
  evictable prefix cache which later requests with the same prompt hit;
* admission reserves `new_token_ratio` x the remaining outputs of the running batch; a decode
  step that finds too few free slots retracts requests (fewest generated tokens first), which
  go back to the queue and are prefilled again later.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import OrderedDict, deque

from .records import DecodeStat, PrefillStat, Req, RetractStat, Step
from .scenario import ServerConfig

__all__ = ["RankScheduler", "Req", "Step", "DecodeStat", "PrefillStat", "RetractStat"]

CLIP_MAX_NEW_TOKENS = 4096


class RankScheduler:
    """State and iteration logic of one DP rank's scheduler."""

    def __init__(self, rank: int, cfg: ServerConfig, rng: random.Random, init_t: float, release):
        self.rank, self.cfg, self.rng, self.release = rank, cfg, rng, release
        self.now = init_t
        self.inbox: list = []  # heap of (arrive_t, rid, req)
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.chunked: Req | None = None
        self.used, self.cache_tokens = 0, 0  # KV slots held; evictable slots in the prefix cache
        self.cache: OrderedDict = OrderedDict()
        self.ratio = cfg.init_new_token_ratio
        self.ratio_decay = (cfg.init_new_token_ratio - cfg.min_new_token_ratio) / max(cfg.new_token_ratio_decay_steps, 1)
        self.forward_ct = 0
        self.acc_tokens = self.acc_reqsteps = self.acc_accepted = 0
        self.tic = init_t
        self.last_gen, self.life_tokens, self.life_reqsteps = 0.0, 0, 0
        self.last_prefill_t, self.last_prefill_new = init_t, 0
        self.cum_cached = self.cum_new = 0
        self.steps: list[Step] = []
        self.stats: list = []  # DecodeStat | PrefillStat | RetractStat, in time order
        self.finished: list[Req] = []  # drained by the engine

    def deliver(self, req: Req) -> None:
        heapq.heappush(self.inbox, (req.arrive_t, req.rid, req))

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.chunked)

    def next_time(self) -> float:
        if self.has_work():
            return self.now
        return max(self.now, self.inbox[0][0]) if self.inbox else math.inf

    def flush_cache(self) -> None:
        self.forward_ct = 0
        self.acc_tokens = self.acc_reqsteps = self.acc_accepted = 0
        self.cache.clear()
        self.cache_tokens = 0

    def _jitter(self) -> float:
        j = self.cfg.step.jitter
        return max(0.5, 1.0 + self.rng.gauss(0.0, j)) if j > 0 else 1.0

    def _usage(self) -> float:
        return self.used / self.cfg.max_total_num_tokens

    def _evict(self) -> None:
        while self.cache and self.used + self.cache_tokens > self.cfg.max_total_num_tokens:
            _, tok = self.cache.popitem(last=False)
            self.cache_tokens -= tok

    def _finish(self, r: Req, t: float) -> None:
        r.finish_t = t
        self.used -= r.kv
        if r.prompt_key is not None:
            self.cache_tokens -= self.cache.pop(r.prompt_key, 0)
            self.cache[r.prompt_key] = r.kv
            self.cache_tokens += r.kv
        r.kv = 0
        self.finished.append(r)
        self._evict()

    # ----------------------------------------------------------------- iteration
    def iterate(self) -> bool:
        """Run one scheduler iteration at `self.now`; False when there was nothing to do."""
        while self.inbox and self.inbox[0][0] <= self.now:
            self.waiting.append(heapq.heappop(self.inbox)[2])
        entries = self._form_prefill()
        if entries:
            self._run_prefill(entries)
        elif self.running:
            self._run_decode()
        else:
            return False
        return True

    def _form_prefill(self) -> list:
        if not self.waiting and self.chunked is None:
            return []
        cfg = self.cfg
        rem_chunk = cfg.chunked_prefill_size if cfg.chunked_prefill_size > 0 else math.inf
        rem_input = cfg.max_prefill_tokens
        reserved = sum(min(r.output_len - r.generated, CLIP_MAX_NEW_TOKENS) for r in self.running) * self.ratio
        avail = cfg.max_total_num_tokens - self.used - reserved
        entries = []
        if self.chunked is not None:
            r = self.chunked
            ext = min(r.fill_len - r.filled, rem_chunk)
            entries.append((r, ext, 0))
            rem_chunk -= ext
            rem_input -= ext
            avail -= ext
            if r.filled + ext < r.fill_len:
                return entries
            self.chunked = None
        n_run = len(self.running)
        while self.waiting and rem_chunk > 0 and n_run + len(entries) < cfg.max_running_requests:
            r = self.waiting[0]
            cached = 0
            if r.prompt_key is not None and r.retractions == 0 and r.prompt_key in self.cache:
                cached = max(0, min(self.cache[r.prompt_key], r.fill_len - 1))
            ext = r.fill_len - cached
            need = ext + math.ceil(min(r.output_len - r.generated, CLIP_MAX_NEW_TOKENS) * self.ratio)
            if need > avail and (self.running or entries):
                break  # no room in the KV pool: the request waits
            if ext > rem_input and entries:
                break
            self.waiting.popleft()
            if cached:
                self.cache_tokens -= self.cache.pop(r.prompt_key)
                r.cached = cached
                r.filled = cached
                r.kv += cached
                self.used += cached
            if ext > rem_chunk:
                entries.append((r, int(rem_chunk), cached))
                self.chunked = r
                break
            entries.append((r, ext, cached))
            rem_chunk -= ext
            rem_input -= ext
            avail -= need
        return entries

    def _run_prefill(self, entries: list) -> None:
        cfg, rel = self.cfg, self.release
        t0 = self.now
        running_when_scheduled = len(self.running)
        new_tokens = sum(e[1] for e in entries)
        cached_tokens = sum(e[2] for e in entries)
        usage_sched, used_sched = self._usage(), self.used
        for r, ext, _ in entries:
            r.kv += ext
            self.used += ext
        self._evict()
        dur = (cfg.step.prefill_fixed_ms + cfg.step.prefill_per_token_ms * new_tokens) / 1000.0 * self._jitter()
        t1 = t0 + dur
        produced = 0
        for r, ext, _ in entries:
            r.filled += ext
            if r.filled < r.fill_len:
                continue
            r.generated += 1
            r.prefill_tokens_out += 1
            r.emits.append((t1, 1))
            produced += 1
            if r.generated >= r.output_len:
                self._finish(r, t1)
            else:
                self.running.append(r)
        self.steps.append(Step(self.rank, "prefill", t0, t1, len(entries), produced, new_tokens))
        self.cum_cached += cached_tokens
        self.cum_new += new_tokens
        t_log = t1 if rel.prefill_after_forward else t0
        gap = t_log - self.last_prefill_t
        if rel.prefill_tail == "pending_graph_thr":
            in_thr = new_tokens / gap if gap > 0 else 0.0
        else:  # lagged by one batch (v0.4.7.post1 - v0.5.10.post1)
            in_thr = self.last_prefill_new / gap if gap > 0 else 0.0
        self.last_prefill_t, self.last_prefill_new = t_log, new_tokens
        queue = len(self.waiting) + (1 if rel.queue_counts_chunked and self.chunked else 0)
        pending = sum(r.fill_len - r.filled for r in self.waiting)
        if self.chunked:
            pending += self.chunked.fill_len - self.chunked.filled
        tot = self.cum_cached + self.cum_new
        hit = 100.0 * self.cum_cached / tot if tot else 0.0
        token, usage = (self.used, self._usage()) if rel.prefill_after_forward else (used_sched, usage_sched)
        self.stats.append(PrefillStat(self.rank, t_log, len(entries), new_tokens, cached_tokens, token, usage,
                                      running_when_scheduled, queue, pending, hit, in_thr, False))
        self.now = t1

    def _spec_tokens(self, r: Req) -> int:
        sp = self.cfg.speculative
        remaining = r.output_len - r.generated
        if sp is None or sp.num_draft_tokens <= 1:
            return 1
        p = (sp.accept_len - 1.0) / (sp.num_draft_tokens - 1)
        rnd = self.rng.random
        n = 1 + sum(1 for _ in range(sp.num_draft_tokens - 1) if rnd() < p)
        return min(n, remaining)

    def _retract(self, need_per_req: int) -> None:
        cfg = self.cfg
        order = sorted(self.running, key=lambda r: (r.generated, -r.input_len), reverse=True)
        retracted, gained = [], 0
        while len(order) > 1:
            free = cfg.max_total_num_tokens - self.used
            if free >= len(order) * need_per_req * cfg.retract_decode_steps:
                break
            r = order.pop()
            gained += r.kv
            self.used -= r.kv
            r.kv, r.filled, r.cached = 0, 0, 0
            r.fill_len = r.input_len + r.generated
            r.retractions += 1
            retracted.append(r)
        if not retracted:
            return
        gone = {id(r) for r in retracted}
        self.running = [r for r in self.running if id(r) not in gone]
        for r in reversed(retracted):
            self.waiting.appendleft(r)
        decoded = sum(r.generated for r in self.running)
        max_new = sum(r.output_len for r in self.running) or 1
        before = self.ratio
        self.ratio = min(1.0, (decoded + cfg.retract_decode_steps * len(self.running)) / max_new)
        self.stats.append(RetractStat(self.rank, self.now, len(retracted), gained, before, self.ratio))

    def _run_decode(self) -> None:
        cfg = self.cfg
        per_req_max = cfg.speculative.num_draft_tokens if cfg.speculative else 1
        if cfg.max_total_num_tokens - self.used < len(self.running) * per_req_max:
            self._retract(per_req_max)
        batch = self.running
        bs = len(batch)
        graph = cfg.uses_cuda_graph(bs)
        fixed = cfg.step.graph_fixed_ms if (graph and cfg.step.graph_fixed_ms is not None) else cfg.step.fixed_ms
        ms = (fixed + cfg.step.per_req_ms * bs) * self._jitter()
        if cfg.speculative:
            ms += cfg.step.spec_overhead_ms
        t0, t1 = self.now, self.now + ms / 1000.0
        tokens = 0
        done = []
        for r in batch:
            n = self._spec_tokens(r)
            r.generated += n
            r.kv += n
            tokens += n
            r.emits.append((t1, n))
            if r.generated >= r.output_len:
                done.append(r)
        self.used += tokens
        self._evict()
        if done:
            self.running = [r for r in batch if r.generated < r.output_len]
            for r in done:
                self._finish(r, t1)
        self.forward_ct += 1
        self.acc_tokens += tokens
        self.acc_reqsteps += bs
        self.acc_accepted += tokens - bs
        self.life_tokens += tokens
        self.life_reqsteps += bs
        self.ratio = max(self.ratio - self.ratio_decay, cfg.min_new_token_ratio)
        self.steps.append(Step(self.rank, "decode", t0, t1, bs, tokens, 0, tokens - bs, graph, self.forward_ct))
        self.now = t1
        if self.forward_ct % cfg.decode_log_interval == 0:
            self._log_decode(t1, bs, graph)

    def _log_decode(self, t: float, bs: int, graph: bool) -> None:
        gap = t - self.tic
        gen = self.acc_tokens / gap if gap > 0 else 0.0
        acc_len = acc_rate = None
        sp = self.cfg.speculative
        if sp is not None and self.acc_reqsteps:
            acc_len = self.acc_tokens / self.acc_reqsteps
            acc_rate = self.acc_accepted / (self.acc_reqsteps * max(sp.num_draft_tokens - 1, 1))
        self.stats.append(DecodeStat(self.rank, t, self.forward_ct, bs, self.used, self._usage(), graph, gen,
                                     len(self.waiting), self.acc_tokens, gap, acc_len, acc_rate))
        self.last_gen = gen
        self.tic = t
        self.acc_tokens = self.acc_reqsteps = self.acc_accepted = 0
