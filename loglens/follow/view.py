"""The terminal view of a live status (rich renderables; the status dict is the only input)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    """One character per value, scaled to the largest; a gap (no Decode line) is a space."""
    top = max((v for v in values if v is not None), default=0) or 1
    return "".join(" " if v is None else BARS[min(len(BARS) - 1, int(v / top * (len(BARS) - 1) + 0.5))] for v in values)


def _fmt(x, spec: str = "", none: str = "–") -> str:
    return none if x is None else format(x, spec)


def _streams_table(streams: list[dict]) -> Table:
    t = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("stream", "gen tok/s", "running", "queue", "token usage", "cuda graph", "last decode"):
        t.add_column(col, justify="left" if col == "stream" else "right")
    for st in streams:
        graph = {True: "on", False: "[yellow]off[/yellow]", None: "–"}[st["cuda_graph"]]
        t.add_row(
            f"DP{st['dp_rank']}" if st["dp_rank"] is not None else "scheduler",
            _fmt(st["gen_throughput"], ",.1f", "idle" if not st["decoding"] else "–"),
            _fmt(st["running_req"]),
            _fmt(st["queue_req"]),
            _fmt(st["token_usage"], ".2f"),
            graph,
            _fmt(st["last_decode"], "%H:%M:%S"),
        )
    return t


def render(status: dict) -> RenderableType:
    f = status.get("follow", {})
    head = Text.assemble(
        ("loglens tail ", "bold"),
        f.get("log", ""),
        " → ",
        f.get("store", ""),
        ("" if f.get("following", True) else "   (waiting for the file to appear)", "yellow"),
    )
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    hist = status["gen_throughput_history"]
    n = sum(1 for s in status["streams"] if s["decoding"])
    grid.add_row(
        "gen throughput",
        f"{_fmt(status['gen_throughput'], ',.1f')} tok/s"
        + (f"  (sum of {n} DP streams)" if n > 1 else "")
        + f"   {sparkline(hist['values'])}  last {len(hist['values']) * hist['bucket_s'] // 60} min",
    )
    graph = {True: "on", False: "[yellow]OFF[/yellow]", None: "–"}[status["cuda_graph"]]
    grid.add_row(
        "requests",
        f"running {_fmt(status['running_req'])}   queued {_fmt(status['queue_req'])}"
        f"   token usage {_fmt(status['token_usage'], '.2f')}   CUDA graph {graph}",
    )
    http = status["http"]
    codes = "  ".join(f"{k}×{v}" for k, v in http["status"].items()) or "none"
    grid.add_row("HTTP", f"{http['rps']:.1f} req/s over {http['window_s']} s   status {codes}")
    r, e = status["retractions"], status["errors"]
    grid.add_row(
        "trouble",
        f"retractions {r['events']} ({r['reqs']} req)   errors {e['count']}   unparsed lines {status['rejects']}"
        + (f"   last error: {e['last']}" if e["last"] else ""),
    )
    grid.add_row(
        "follower",
        f"log time {_fmt(status['log_time'], '%Y-%m-%d %H:%M:%S')}   reads {f.get('reads', 0)}"
        f"   last new lines {_fmt(f.get('last_data_s_ago'), '.1f')} s ago",
    )
    parts: list[RenderableType] = [head, grid]
    if len(status["streams"]) > 1:
        parts.append(_streams_table(status["streams"]))
    alerts = status["alerts"]
    if alerts:
        lines = Text()
        for a in alerts:
            lines.append(("⚠ " if a["severity"] == "warning" else "✖ ") + a["text"] + "\n", style="yellow" if a["severity"] == "warning" else "bold red")
        lines.rstrip()
        parts.append(Panel(lines, title="alerts", border_style="red", expand=True))
    return Group(*parts)
