"""Ground truth: what really happened, for tests of the reconciler and the step-time fitter.

Everything here is computed from the simulator's internal step trace and request records, never
from the rendered log, so a parser/reconciler bug cannot hide in both sides.  All objects turn
into plain JSON (`to_dict`, datetimes as ISO-8601 local time without zone, like the log).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime

from .engine import Engine, RunResult


def _iso(x):
    if isinstance(x, datetime):
        return x.isoformat()
    if isinstance(x, dict):
        return {k: _iso(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_iso(v) for v in x]
    return x


@dataclass
class RunTruth:
    index: int
    num_prompts: int
    request_rate: float
    max_concurrency: int | None
    endpoint: str
    window_start: datetime  # first measured request dispatched (bench_serving's start mark)
    window_end: datetime  # duration taken (after the end-of-run server-info call)
    duration_s: float
    warmup_start: datetime  # the client warmup request(s) dispatched
    completed: int
    total_output_tokens: int
    client_output_throughput: float
    decode_tokens_by_rank: list[int]  # tokens of decode steps ending inside the window
    decode_tokens: int
    first_tokens: int  # first output tokens, produced by prefill forwards (measured requests)
    reprefill_tokens: int  # tokens produced by re-prefills after retraction (measured requests)
    warmup_tokens: int  # output tokens of the client warmup request(s)
    accepted_draft_tokens: int
    logged_tokens: float  # sum over Decode lines inside the window of gen throughput x interval
    decode_lines: int
    peak_gen_throughput: float | None  # highest logged gen throughput inside the window
    peak_decode_line: str | None
    peak_running_req: int | None
    step_model: dict
    prefill_s_by_rank: list[float]
    decode_s_by_rank: list[float]
    idle_s_by_rank: list[float]
    max_running_requests: int  # largest decode batch inside the window (any rank)
    retractions: int  # retraction events inside the window
    retracted_requests: int
    server_info_calls: list[datetime] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = _iso(asdict(self))
        if d["request_rate"] == float("inf"):
            d["request_rate"] = "inf"
        return d


@dataclass
class SimTruth:
    release: str
    bench_version: str
    seed: int
    log_start: datetime
    log_end: datetime
    ready_at: datetime
    tp_size: int
    dp_size: int
    max_total_num_tokens: int
    decode_log_interval: int
    line_counts: dict  # physical lines per family (decode, prefill, http, events, blank), event records, kinds
    runs: list[RunTruth]

    def __getitem__(self, i: int) -> RunTruth:
        return self.runs[i]

    def __len__(self) -> int:
        return len(self.runs)

    def to_dict(self) -> dict:
        d = _iso({k: v for k, v in asdict(self).items() if k != "runs"})
        d["runs"] = [r.to_dict() for r in self.runs]
        return d

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)


def _clip(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def run_truth(eng: Engine, run: RunResult, bench: dict, lines_by_stat: dict) -> RunTruth:
    cfg, clock = eng.cfg, eng.clock
    t0, t1 = run.t0, run.t1
    span = t1 - t0
    dec_by_rank, pre_s, dec_s, idle_s = [], [], [], []
    accepted = max_bs = 0
    for s in eng.scheds:
        tok = p = d = 0.0
        for st in s.steps:
            if st.t1 < t0 or st.t0 > t1:
                continue
            if st.kind == "decode":
                if t0 <= st.t1 <= t1:
                    tok += st.tokens
                    accepted += st.accepted
                    max_bs = max(max_bs, st.batch_size)
                d += _clip(st.t0, st.t1, t0, t1)
            else:
                p += _clip(st.t0, st.t1, t0, t1)
        dec_by_rank.append(int(tok))
        pre_s.append(p)
        dec_s.append(d)
        idle_s.append(max(0.0, span - p - d))
    stats_in = [(s, st) for s in eng.scheds for st in s.stats if t0 <= st.t <= t1]
    decs = [st for _, st in stats_in if type(st).__name__ == "DecodeStat"]
    rets = [st for _, st in stats_in if type(st).__name__ == "RetractStat"]
    peak = max(decs, key=lambda x: x.gen) if decs else None
    calls = []
    if run.server_info_path:
        calls = [e.t for e in eng.book.entries if e.family == "http" and run.t0 < e.t <= run.t_end + 1e-9
                 and run.server_info_path + " HTTP" in e.lines[0]]
    first = sum(1 for r in run.requests)
    repre = sum(r.prefill_tokens_out for r in run.requests) - first
    return RunTruth(
        index=run.index, num_prompts=run.scenario.num_prompts, request_rate=run.scenario.request_rate,
        max_concurrency=run.scenario.max_concurrency, endpoint=run.scenario.endpoint,
        window_start=clock.at(t0), window_end=clock.at(t1), duration_s=span,
        warmup_start=clock.at(run.warmups[0].send_t) if run.warmups else clock.at(t0),
        completed=bench["completed"], total_output_tokens=bench["total_output_tokens"],
        client_output_throughput=bench["output_throughput"],
        decode_tokens_by_rank=dec_by_rank, decode_tokens=sum(dec_by_rank), first_tokens=first,
        reprefill_tokens=repre, warmup_tokens=sum(r.output_len for r in run.warmups),
        accepted_draft_tokens=int(accepted), logged_tokens=sum(d.gen * d.window_s for d in decs),
        decode_lines=len(decs), peak_gen_throughput=peak.gen if peak else None,
        peak_decode_line=lines_by_stat.get(id(peak)) if peak else None,
        peak_running_req=peak.running if peak else None,
        step_model={"fixed_ms": cfg.step.fixed_ms, "per_req_ms": cfg.step.per_req_ms,
                    "graph_fixed_ms": cfg.step.graph_fixed_ms, "prefill_fixed_ms": cfg.step.prefill_fixed_ms,
                    "prefill_per_token_ms": cfg.step.prefill_per_token_ms},
        prefill_s_by_rank=pre_s, decode_s_by_rank=dec_s, idle_s_by_rank=idle_s, max_running_requests=max_bs,
        retractions=len(rets), retracted_requests=sum(r.n for r in rets),
        server_info_calls=[clock.at(t) for t in calls],
    )
