"""All findings for one window, most costly first."""

from __future__ import annotations

from loglens.diagnose.context import Context
from loglens.diagnose.finding import SEVERITIES, Finding
from loglens.diagnose.findings_kv import admission_queueing, kv_cache_findings
from loglens.diagnose.findings_load import client_bound, dp_imbalance
from loglens.diagnose.findings_step import cuda_graph_off, prefill_interference, step_overhead_dominant

#: tie-break when two findings cost the same: the concrete cause before its symptom
#: (graphs off explains a large fixed cost; a full pool explains a queue)
PRIORITY = ["kv_cache_limiting", "cuda_graph_off", "admission_queueing", "client_bound",
            "prefill_interference", "step_overhead_dominant", "dp_imbalance", "kv_cache_not_limiting"]


def collect_findings(ctx: Context) -> list[Finding]:
    found: list[Finding] = list(kv_cache_findings(ctx))
    for check in (cuda_graph_off, step_overhead_dominant, admission_queueing, client_bound,
                  prefill_interference, dp_imbalance):
        f = check(ctx)
        if f is not None:
            found.append(f)
    return rank(found)


def rank(findings: list[Finding]) -> list[Finding]:
    """Problems before exonerations, then by estimated cost, then by PRIORITY."""
    def key(f: Finding):
        return (f.severity == "info", -round(f.cost_tok_s or 0.0, 1), SEVERITIES.index(f.severity),
                PRIORITY.index(f.id) if f.id in PRIORITY else len(PRIORITY))
    return sorted(findings, key=key)
