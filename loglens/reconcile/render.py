"""The terminal view of a reconcile report (rich).  It reads the report's dict — the same data
`--json` prints — so the two cannot disagree."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

PHASE_LABELS = {"ramp_up": "ramp-up", "steady": "steady state", "prefill": "prefill-heavy", "idle": "idle / stalls",
                "drain": "drain", "tail": "after last Decode line"}


def _confidence_word(c: float) -> str:
    return "high" if c >= 0.8 else "medium" if c >= 0.5 else "low"


def _num(x, fmt: str = ",.0f") -> str:
    return "–" if x is None else format(x, fmt)


def render_failure(d: dict, console: Console) -> None:
    console.print(f"[bold]Record {d['record']['index'] + 1}[/]: [red]{d['error']}[/]")


def render(d: dict, console: Console) -> None:
    c, w, s, tok, tm, gap = d["client"], d["window"], d["server"], d["tokens"], d["time"], d["gap"]
    rec = d["record"]
    title = (f"Record {rec['index'] + 1} ({rec['source']}{':' + str(rec['line_no']) if rec['line_no'] else ''}): "
             f"{c['completed']} requests in {c['duration_s']:.1f} s → client {c['output_throughput']:.2f} output tok/s; "
             f"server log peak {_num(s['gen_throughput_peak'], '.2f')} tok/s")
    parts = [_window(w), _tokens(tok), _time(tm, tok), _waterfall(gap)]
    if d["warnings"]:
        parts.append(Text("\n".join("! " + x for x in d["warnings"]), style="yellow"))
    console.print(Panel(Group(*parts), title=title, title_align="left"))


def _window(w: dict) -> Group:
    conf = w["confidence"]
    head = Text.assemble(("Window ", "bold"), f"{w['start']} → {w['end']}, found by {w['method']} ",
                         (f"(confidence {conf:.2f}, {_confidence_word(conf)})", "green" if conf >= 0.8 else "yellow"))
    lines = [head] + [Text("  · " + e) for e in w.get("evidence", [])]
    return Group(*lines, Text(""))


def _tokens(tok: dict) -> Group:
    t = Table(title="Token accounting", title_justify="left", show_header=False, box=None, pad_edge=False)
    t.add_column("what")
    t.add_column("tokens", justify="right")
    t.add_row("client output tokens", _num(tok["client_output_tokens"]))
    t.add_row("− first token of each request (made by prefill)", _num(tok["first_tokens_from_prefill"]))
    if tok["reprefill_tokens"]:
        t.add_row("− tokens made by re-prefill after retraction", _num(tok["reprefill_tokens"]))
    t.add_row("= decode-step tokens the server should have logged", _num(tok["expected_decode_tokens"]))
    pct = tok["unexplained_pct"]
    t.add_row("server decode tokens inside the window (Σ gen × interval)",
              f"{_num(tok['server_decode_tokens'])} ({'' if pct is None else f'{-pct:+.1f}%'})")
    if tok["other_requests_in_window"]:
        t.add_row("other generation requests inside the window", str(tok["other_requests_in_window"]))
    return Group(t, Text(""))


def _time(tm: dict, tok: dict) -> Group:
    t = Table(title=f"Time accounting (client duration {tm['duration_s']:.1f} s)", title_justify="left",
              box=None, pad_edge=False)
    for col, just in (("phase", "left"), ("seconds", "right"), ("share", "right"), ("decode tokens", "right"),
                      ("tok/s", "right")):
        t.add_column(col, justify=just)
    for phase, label in PHASE_LABELS.items():
        sec, n = tm[f"{phase}_s"], tok["by_phase"][phase]
        if sec <= 0.0005 and not n:
            continue
        t.add_row(label, f"{sec:.1f}", f"{100 * sec / tm['duration_s']:.0f}%", _num(n),
                  f"{n / sec:.1f}" if sec > 0 else "–")
    notes = []
    if tm.get("first_steady_at"):
        notes.append(f"first steady decode window starts {tm['first_steady_at']}")
    if tm.get("drain_from"):
        notes.append(f"drain from {tm['drain_from']}")
    if tm.get("prefill_counted_as_steady"):
        notes.append("prefill batches ran in nearly every window (arrivals spread out): counted as steady state")
    return Group(t, Text("  " + "; ".join(notes)) if notes else Text(""), Text(""))


def _waterfall(gap: dict) -> Group:
    t = Table(title="Waterfall: from the server figure to the client figure", title_justify="left",
              box=None, pad_edge=False)
    t.add_column("step")
    t.add_column("tok/s", justify="right")
    t.add_column("running", justify="right")
    label = "server figure (quoted)" if gap["server_figure"] == "quote" else "server figure: peak gen throughput"
    total = gap["server_tok_s"]
    t.add_row(Text(label, style="bold"), f"{total:.2f}", f"{total:.2f}")
    whys = []
    for step in gap["steps"]:
        if abs(step["tok_s"]) < 0.005:
            continue
        total += step["tok_s"]
        whys.append(f"{step['name']}: {step['why']}")
        t.add_row(f"[{len(whys)}] {step['name']}", Text(f"{step['tok_s']:+.2f}", style="red" if step["tok_s"] < 0 else "green"),
                  f"{total:.2f}")
    total += gap["residual_tok_s"]
    whys.append(f"residual: {gap.get('residual_why', '')}")
    t.add_row(f"[{len(whys)}] residual (not explained)", f"{gap['residual_tok_s']:+.2f}", f"{total:.2f}")
    t.add_row(Text("= client output throughput", style="bold"), f"{gap['client_tok_s']:.2f}", "")
    notes = [Text(f"  [{i}] {w}", style="dim") for i, w in enumerate(whys, 1)]
    return Group(t, Text(""), *notes)
