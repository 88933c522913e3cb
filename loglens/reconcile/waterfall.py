"""The waterfall: from the server's figure to the client's, in named steps of tok/s.

With D the client's duration, P the server figure (the peak Decode line in the window, or a
quoted value), m the steady-state decode rate (time-weighted, summed over DP streams), n the
number of active DP streams, and for every phase the token equivalents it lost against the
steady rate (accounting.py), the chain is an identity:

    P
    + (m/n − P)                       peak line vs the steady-state mean of one rank
    + (m − m/n)                       the other DP ranks (n > 1 only)
    + Σ_phase −lost_phase / D         ramp-up, prefill stretches, idle gaps, drain, tail
    = server decode tokens / D        (every second of D is in exactly one phase)
    + completed / D                   each request's first token comes from its prefill
    + retracted / D                   each retraction's re-prefill also makes one token
    + residual                        = client tokens / D − all of the above
    = client output throughput

The residual collects what the log cannot attribute: decode steps after a run's last Decode
line (logged only with the next burst), warmup steps counted in the run's first window, window
edge error (timestamps to the second) and, on OpenAI backends, requested rather than counted
output tokens.  It must stay small; it is reported, never hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

from loglens.reconcile.accounting import Accounting
from loglens.runs import to_datetime

PHASE_STEPS = [  # (phase, step name, what it is)
    ("ramp_up", "ramp-up", "from the first request to the first steady decode window (arrivals, prefills, first partial windows)"),
    ("prefill", "prefill-heavy windows", "decode windows that also ran prefill batches"),
    ("idle", "idle gaps and stalls", "stretches inside the run where the server was not decoding"),
    ("drain", "drain", "the tail of the run with fewer than half the largest batch still running"),
    ("tail", "after the last Decode line", "decode steps not logged until the next burst, and the server-info round trip"),
]


@dataclass
class Step:
    name: str
    tok_s: float
    why: str
    kind: str  # "rate" | "time" | "tokens"

    def to_dict(self) -> dict:
        return {"name": self.name, "tok_s": self.tok_s, "why": self.why, "kind": self.kind}


def _t(seconds: float) -> str:
    return to_datetime(seconds).strftime("%H:%M:%S")


def build_steps(acc: Accounting, server_tok_s: float, quoted: bool, client_tok_s: float, client_tokens: int,
                completed: int, duration: float) -> tuple[list[Step], float, str]:
    """Steps (tok/s rounded to 3 decimals) and the residual that closes the identity exactly."""
    D = duration
    m = acc.steady_rate
    n = max(len(acc.active_streams), 1)
    steps: list[Step] = []
    figure = f"the quoted {server_tok_s:.2f} tok/s" if quoted else f"the peak line ({server_tok_s:.2f} tok/s"
    if not quoted and acc.peak_line:
        pl_ = acc.peak_line
        where = f"{pl_['stream']}, " if pl_["stream"] != "main" else ""
        figure += f" at {pl_['running_req']} running requests, {where}log line {pl_['line_no']})"
    elif not quoted:
        figure += ")"
    steady_s = acc.seconds("steady")
    steps.append(Step("peak vs steady-state mean", m / n - server_tok_s,
                      f"{figure} vs the steady-state decode rate {m / n:.2f} tok/s per rank, time-weighted over "
                      f"{steady_s:.1f} s of steady windows: a single 40-step window is the best moment, "
                      f"not the typical one", "rate"))
    if n > 1:
        steps.append(Step("other DP ranks", m - m / n,
                          f"{n} DP ranks decode in parallel and each logs its own gen throughput; together they "
                          f"make {m:.2f} tok/s in steady state", "rate"))
    window = acc.duration_s
    if abs(window - D) > 1e-6:  # --start/--end gave a window of another length
        steps.append(Step("window length vs client duration", m * (window - D) / D,
                          f"the window given is {window:.1f} s, the client's duration {D:.1f} s: the steady rate "
                          f"over the difference", "time"))
    for phase, name, what in PHASE_STEPS:
        sec, tok, lost = acc.seconds(phase), acc.tokens(phase), acc.lost(phase)
        rate = tok / sec if sec > 0 else 0.0
        steps.append(Step(name, -lost / D,
                          f"{what}: {sec:.1f} s of the {D:.1f} s client duration, in which the server made "
                          f"{tok:,.0f} decode tokens ({rate:.1f} tok/s) instead of {m * sec:,.0f} at the steady rate",
                          "time"))
    steps.append(Step("first tokens from prefill", completed / D,
                      f"the client counts every output token, the server's gen throughput only decode-step tokens: "
                      f"the first token of each of the {completed} requests comes from its prefill "
                      f"({completed} tokens over {D:.1f} s)", "tokens"))
    if acc.retracted_requests:
        steps.append(Step("re-prefill after retraction", acc.retracted_requests / D,
                          f"{acc.retracted_requests} retracted request(s) were prefilled again; each re-prefill "
                          f"makes one output token outside decode", "tokens"))
    for s in steps:
        s.tok_s = round(s.tok_s, 3)
    residual = client_tok_s - server_tok_s - sum(s.tok_s for s in steps)
    expected = client_tokens - completed - acc.retracted_requests
    diff = expected - acc.decode_tokens
    why = (f"client tokens minus first tokens{' and re-prefills' if acc.retracted_requests else ''} = {expected:,} "
           f"decode-step tokens expected; the log accounts for {acc.decode_tokens:,.0f} inside the window "
           f"({diff:+,.0f}, {100 * diff / expected if expected else 0:+.1f}%): steps after the run's last Decode line "
           f"(logged with the next burst), warmup steps in the first window, and window edges known to ±1 s")
    return steps, residual, why
