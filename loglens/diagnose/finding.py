"""One finding: an id from DESIGN.md, its evidence (numbers), plain words, and what it costs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

SEVERITIES = ("high", "medium", "low", "info")


@dataclass
class Finding:
    id: str
    severity: str
    evidence: dict
    text: str  # what the numbers say, what would prove it wrong, what to try
    cost_tok_s: float = 0.0  # decode tok/s it plausibly costs (the ranking key); 0 for exonerations
    cost_basis: str = ""  # how cost_tok_s was estimated, in words
    title: str = ""  # a one-line headline for the terminal
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "evidence": self.evidence,
            "text": self.text,
            "est_cost_tok_s": rnd(self.cost_tok_s, 1),
            "cost_basis": self.cost_basis,
        }


def severity_for(cost_tok_s: float | None, observed_tok_s: float | None, floor: str = "low") -> str:
    """high ≥ 30 %, medium ≥ 10 % of the observed decode throughput; never below `floor`."""
    level = "low"
    if cost_tok_s and observed_tok_s and observed_tok_s > 0:
        share = cost_tok_s / observed_tok_s
        level = "high" if share >= 0.30 else "medium" if share >= 0.10 else "low"
    return min(level, floor, key=SEVERITIES.index)


def rnd(x, nd: int = 2):
    """Round for JSON; None/NaN/inf become None (JSON has no NaN)."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return x
    if not math.isfinite(f):
        return None
    return int(round(f)) if nd == 0 else round(f, nd)


def pct(x: float | None, nd: int = 0) -> str:
    return "?" if x is None else f"{100 * x:.{nd}f}%"


def num(x: float | None, nd: int = 0) -> str:
    return "?" if x is None else f"{x:,.{nd}f}"
