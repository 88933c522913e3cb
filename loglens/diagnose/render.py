"""The terminal view of a diagnose report (the dict from `report.diagnose`), in plain words."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from loglens.diagnose.finding import num, pct

SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "green"}

EXCLUSION_WORDS = {
    "first_line": "first line of a stream",
    "after_startup": "first after a start-up",
    "after_flush": "first after a cache flush",
    "idle_gap": "spanning idle time",
    "implausible": "without a usable rate",
    "prefill_inside": "with a prefill inside",
    "batch_changed": "where the batch changed much",
    "graph_changed": "where CUDA graphs switched on or off",
    "idle": "with nothing running",
    "no_interval": "without an interval",
}


def render(report: dict, console: Console) -> None:
    w = report["window"]
    label = f" ({w['label']})" if w.get("label") else ""
    console.print(Text(f"What limits this server: {report['store']}", style="bold"))
    console.print(f"Decode lines from {w['start']} to {w['end']}{label}.")
    _observed(report, console)
    _step_model(report, console)
    if report.get("comparison"):
        _comparison(report, console)
    _findings(report, console)


def _observed(report: dict, console: Console) -> None:
    o, lim = report["observed"], report["limits"]
    streams = f" over {o['streams']} DP streams" if o["streams"] > 1 else ""
    console.print(
        f"Observed{streams}: {num(o['decode_tok_s'], 1)} decode tok/s (time-weighted), peak logged gen throughput "
        f"{num(o['peak_gen_throughput'], 1)}; {num(o['mean_running_requests'], 1)} requests running on average, "
        f"at most {o['max_running_requests']}. The server allows up to {num(lim.get('server_batch_limit'))} "
        f"(max_running_requests {num(lim.get('max_running_requests'))}, KV room for ≈{num(lim.get('kv_capacity_requests'))} "
        f"at {num(o.get('tokens_per_request'))} tokens each).")
    if (lim.get("startups_in_window") or 0) > 1:
        console.print(f"Caution: the window spans {lim['startups_in_window']} server start-ups; the limits and flags "
                      "quoted are those of the one behind most Decode lines.")
    if report.get("bench"):
        b = report["bench"]
        prompts = f"{b['num_prompts']} prompts, " if b.get("num_prompts") else ""
        console.print(f"Client: record --record {b['index']} of {b['source']} ({b.get('note') or 'given'}): {prompts}"
                      f"rate {b['request_rate']}, concurrency {num(b['concurrency'], 1)}, "
                      f"{num(b['output_throughput'], 1)} output tok/s.")


def _step_model(report: dict, console: Console) -> None:
    m = report["step_model"]
    console.print()
    console.print(Text("Decode step time", style="bold"))
    excluded = ", ".join(f"{n} {EXCLUSION_WORDS.get(r, r)}" for r, n in m["excluded"].items()) or "none"
    if not m["identifiable"]:
        console.print(f"Could not fit fixed + per-request cost: {m['note']}. Intervals left out: {excluded}.")
        return
    console.print(
        f"One decode step takes {num(m['fixed_ms'], 1)} ms + {num(m['per_req_ms'], 3)} ms per running request "
        f"(fit over {m['windows']} Decode intervals, batch {num(m['batch_min'], 0)}–{num(m['batch_max'], 0)}, "
        f"R² {num(m['r2'], 3)}; {m['trimmed']} dropped as outliers; left out: {excluded}). The fixed part is "
        f"{pct(m['fixed_share_of_decode_time'])} of decode time at the batches seen; no batch size can exceed "
        f"{num(m['asymptote_tok_s'])} tok/s per scheduler.")
    if m["note"]:
        console.print(f"Caution: {m['note']}.")
    t = Table(title_justify="left", box=None, pad_edge=False)
    for col, just in (("at batch", "right"), ("predicted tok/s", "right"), ("fixed share", "right"), ("", "left")):
        t.add_column(col, justify=just)
    for p in m["predictions"]:
        note = p["label"] + ("  (extrapolated beyond the fitted range)" if p["extrapolated"] else "")
        t.add_row(num(p["batch"], 0), num(p["tok_s_all_streams"], 1), pct(p["fixed_share"]), note)
    console.print(t)


def _comparison(report: dict, console: Console) -> None:
    c = report["comparison"]
    console.print()
    console.print(Text("Check against the rest of the log", style="bold"))
    if c.get("top_batch") is not None:
        console.print(
            f"Fitted on this window alone, the model predicts {num(c['predicted_tok_s_at_top_batch'], 1)} tok/s at batch "
            f"{num(c['top_batch'], 1)}; outside the window the log shows {num(c['observed_tok_s_at_top_batch'], 1)} tok/s "
            f"at that batch ({c['top_intervals']} intervals; error {num(c['error_pct'], 1)}%).")
    console.print(f"The highest gen throughput outside the window is {num(c['peak_gen_throughput_outside'], 1)} "
                  f"({c['peak_line_ts']}, {c['peak_line_running_req']} running at the line, "
                  f"{num(c['peak_line_mean_batch'], 1)} on average over its interval); the model says "
                  f"{num(c['predicted_at_peak_line_batch'], 1)} there.")


def _findings(report: dict, console: Console) -> None:
    console.print()
    findings = report["findings"]
    if not findings:
        console.print("No finding: the log shows no clear limit (too little load, or too few Decode lines).")
        return
    console.print(Text("Findings, most costly first", style="bold"))
    for i, f in enumerate(findings, 1):
        head = Text(f"{i}. ")
        head.append(f"[{f['severity']}] ", style=SEVERITY_STYLE.get(f["severity"], ""))
        head.append(f"{f['title']} ({f['id']})", style="bold")
        if f["est_cost_tok_s"]:
            head.append(f"  ≈{num(f['est_cost_tok_s'])} tok/s at stake")
        console.print(head)
        console.print(f"   {f['text']}")
        ev = ", ".join(f"{k}={_short(v)}" for k, v in f["evidence"].items() if v is not None)
        console.print(Text(f"   evidence: {ev}", style="dim"))


def _short(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_short(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_short(x)}" for k, x in v.items()) + "}"
    return str(v)
