"""`loglens summary [--store DIR] [--json]`"""

from __future__ import annotations

import typer
from rich.table import Table

from loglens.cli.common import (
    JsonOption,
    StoreOption,
    console,
    guarded,
    open_store,
    print_json,
)
from loglens.summary import summarize


def summary(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """What the store holds: files, rows per table, rejects, time span, SGLang variants, streams, config."""
    st = open_store(store)
    s = summarize(st)
    if as_json:
        print_json(s)
        return
    t = Table(title=f"store {s['store']}", title_justify="left")
    for col in ("file", "lines", "blank", "decode", "prefill", "http", "events", "rejects", "accounted"):
        t.add_column(col, justify="left" if col == "file" else "right")
    for f in s["files"]:
        t.add_row(
            f["source"],
            f"{f['lines']:,}",
            f"{f['blank_lines']:,}",
            *[f"{f['rows'][k]:,}" for k in ("decode", "prefill", "http", "events", "rejects")],
            "yes" if f["all_lines_accounted"] else "[red]NO[/red]",
        )
    console.print(t)
    span = s["time_span"]
    console.print(f"time span: {span['first'] or '?'} → {span['last'] or '?'} (log local time)")
    if s["variants"]:
        console.print("SGLang line shapes: " + "; ".join(f"{v['table']} {v['variant']} ({v['releases']}) ×{v['lines']}" for v in s["variants"]))
    if s["rank_streams"]:
        console.print("decode streams: " + "; ".join(f"{r['stream']} ×{r['lines']} (peak {r['peak_gen_throughput']} tok/s)" for r in s["rank_streams"]))
    if s["config"]:
        c = s["config"]
        keys = [k for k in ("model_path", "tp_size", "dp_size", "pp_size", "ep_size", "decode_log_interval", "mem_fraction_static", "disable_cuda_graph", "cuda_graph_max_bs", "max_running_requests", "chunked_prefill_size") if k in c]
        console.print("server config: " + ", ".join(f"{k}={c[k]}" for k in keys))
    if s.get("capacity"):
        console.print("capacity: " + ", ".join(f"{k}={v}" for k, v in s["capacity"].items() if v is not None))
    unknown = {k: v for f in s["files"] for k, v in f["unknown_keys"].items()}
    if unknown:
        console.print("keys this parser does not know (kept in `extra`): " + ", ".join(f"{k!r} ×{v}" for k, v in unknown.items()))
    if s["rejects"]:
        console.print("commonest rejects: " + "; ".join(f"{r['family']}: {r['reason']} ×{r['count']}" for r in s["rejects"]))
    if s["event_kinds"]:
        console.print("events: " + ", ".join(f"{k} ×{v}" for k, v in s["event_kinds"].items()))


def register(app: typer.Typer) -> None:
    app.command("summary")(guarded(summary, "summary"))
