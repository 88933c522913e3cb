"""`simulate()`: the one entry point, and the `Simulation` it returns."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Sequence

from .bench_writer import bench_record, client_view, to_jsonl
from .engine import Engine
from .formats import Clock, decode_body, prefill_body, rank_prefix, retract_body, sglang_line
from .releases import Release, get_release
from .scenario import Noise, Scenario, ServerConfig
from .records import DecodeStat, PrefillStat, Req, Step
from .startup import emit_noise
from .truth import SimTruth, run_truth

DEFAULT_START = datetime(2026, 2, 19, 0, 0, 0)


@dataclass
class Simulation:
    log_text: str
    bench_records: list[dict]
    truth: SimTruth
    release: Release
    steps: list[Step] = field(repr=False)  # every forward of every rank, by start time
    stats: list = field(repr=False)  # DecodeStat / PrefillStat / RetractStat, by time
    requests: list[list[Req]] = field(repr=False)  # measured requests per run, in dispatch order
    decode_lines: dict = field(repr=False, default_factory=dict)  # id(DecodeStat) -> rendered line

    @property
    def bench_jsonl(self) -> str:
        return to_jsonl(self.bench_records)

    def write(self, directory: str | Path, stem: str = "sglang", truth: bool = True) -> dict[str, Path]:
        """Write `<stem>.log`, `<stem>.bench.jsonl` and (optionally) `<stem>.truth.json`."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        paths = {"log": d / f"{stem}.log", "bench": d / f"{stem}.bench.jsonl"}
        paths["log"].write_text(self.log_text, encoding="utf-8")
        paths["bench"].write_text(self.bench_jsonl, encoding="utf-8")
        if truth:
            paths["truth"] = d / f"{stem}.truth.json"
            paths["truth"].write_text(self.truth.to_json(indent=1) + "\n", encoding="utf-8")
        return paths


def _render_stats(eng: Engine) -> dict:
    rel, cfg, clock = eng.release, eng.cfg, eng.clock
    lines = {}
    for s in eng.scheds:
        pre = rank_prefix(rel, s.rank if cfg.dp_size > 1 else None, 0, cfg.tp_size)
        for st in s.stats:
            if isinstance(st, DecodeStat):
                line = sglang_line(clock, st.t, pre, decode_body(rel, st))
                lines[id(st)] = line
                eng.book.add(st.t, "decode", line)
            elif isinstance(st, PrefillStat):
                eng.book.add(st.t, "prefill", sglang_line(clock, st.t, pre, prefill_body(rel, st)))
            else:
                eng.book.add(st.t, "events", sglang_line(clock, st.t, pre, retract_body(rel, st)), kind="retract")
    return lines


def simulate(server: ServerConfig, runs: Sequence[Scenario], *, seed: int = 0, release: str = "v0.5.9",
             bench_version: str | None = None, start: datetime = DEFAULT_START, noise: bool | Noise = False,
             log_ms: bool = False, tail_idle_s: float = 5.0) -> Simulation:
    """Simulate an SGLang server started at `start` serving the bench runs one after another.

    release: server line shapes (see `releases.RELEASES`); bench_version: the bench_serving client
    (defaults to the server's release; decides the end-of-run endpoint and the JSONL keys);
    noise: True for the default `Noise()`; log_ms: SGLANG_LOG_MS=1 (v0.5.6+ only).
    """
    rel = get_release(release)
    for sc in runs:  # SGLang would reject such requests; the model would overfill the pool
        longest = sc.random_input_len + sc.retokenize_extra[1] + sc.random_output_len
        if longest > min(server.max_total_num_tokens, server.context_len):
            raise ValueError(f"a request of up to {longest} tokens does not fit max_total_num_tokens="
                             f"{server.max_total_num_tokens} / context_len={server.context_len}")
    bench_version = bench_version or rel.name
    noise_cfg = Noise() if noise is True else (Noise.none() if noise is False else noise)
    clock = Clock(start, rel, log_ms)
    eng = Engine(server, rel, bench_version, seed, clock, noise_cfg)
    ready = eng.now
    results = [eng.run_bench(i, sc) for i, sc in enumerate(runs)]
    t_tail = eng.now + tail_idle_s
    eng.idle_gaps.append((eng.now, t_tail))
    emit_noise(eng.book, clock, noise_cfg, eng.rng, ready, t_tail, eng.idle_gaps)
    decode_lines = _render_stats(eng)
    records, truths = [], []
    for res in results:
        sc = res.scenario
        views = [client_view(r, server.net_latency_s, sc.stream, sc.is_native) for r in res.requests]
        rec = bench_record(sc, views, res.t1 - res.t0, res.server_info, bench_version,
                           random.Random(seed * 7919 + res.index))
        records.append(rec)
        truths.append(run_truth(eng, res, rec, decode_lines))
    ordered = eng.book.ordered()
    truth = SimTruth(release=rel.name, bench_version=bench_version, seed=seed, log_start=clock.at(0.0),
                     log_end=clock.at(ordered[-1].t), ready_at=clock.at(ready), tp_size=server.tp_size,
                     dp_size=server.dp_size, max_total_num_tokens=server.max_total_num_tokens,
                     decode_log_interval=server.decode_log_interval, line_counts=eng.book.counts(), runs=truths)
    steps = sorted((st for s in eng.scheds for st in s.steps), key=lambda x: (x.t0, x.rank))
    stats = sorted((st for s in eng.scheds for st in s.stats), key=lambda x: (x.t, x.rank))
    return Simulation(eng.book.render(), records, truth, rel, steps, stats, [r.requests for r in results],
                      decode_lines)
