"""What the store holds, as a plain dict (the terminal view and `--json` both render it)."""

from __future__ import annotations

import json

import polars as pl

from loglens.parsers.variants import RELEASES
from loglens.schema import RANK_COLUMNS
from loglens.store import Store

_ROW_TABLES = ["decode", "prefill", "http", "events", "rejects"]


def _latest_files(store: Store) -> pl.DataFrame:
    files = store.read("files")
    if files.height == 0:
        return files
    return files.sort("seq").group_by("file_id", maintain_order=True).agg(pl.all().last())


def _coverage(store: Store) -> pl.DataFrame:
    """Per file_id: rows per table and physical lines covered by rows."""
    parts = []
    for t in _ROW_TABLES:
        cols = ["file_id", "line_no"] + (["line_end"] if t == "events" else [])
        lf = store.scan(t).select(cols)
        covered = (pl.col("line_end") - pl.col("line_no") + 1).sum() if t == "events" else pl.len()
        parts.append(lf.group_by("file_id").agg(pl.lit(t).alias("table"), pl.len().alias("rows"), covered.cast(pl.Int64).alias("covered")))
    return pl.concat(pl.collect_all(parts), how="vertical_relaxed")


def summarize(store: Store) -> dict:
    files = _latest_files(store)
    cov = _coverage(store)
    out: dict = {"store": str(store.path), "files": []}
    for f in files.iter_rows(named=True):
        c = cov.filter(pl.col("file_id") == f["file_id"])
        rows = {r["table"]: r["rows"] for r in c.iter_rows(named=True)}
        covered = int(c.get_column("covered").sum() or 0)
        out["files"].append(
            {
                "source": f["source"],
                "file_id": f["file_id"],
                "size_bytes": f["size_bytes"],
                "lines": f["lines"],
                "blank_lines": f["blank_lines"],
                "rows": {t: rows.get(t, 0) for t in _ROW_TABLES},
                "lines_covered": covered,
                "all_lines_accounted": covered + f["blank_lines"] == f["lines"],
                "reads": f["seq"],
                "unknown_keys": json.loads(f["unknown_keys"] or "{}"),
            }
        )
    rej = store.scan("rejects").group_by("family", "reason").agg(pl.len().alias("count")).sort("count", descending=True).limit(10).collect()
    out["rejects"] = rej.to_dicts()
    spans = [
        store.scan(t).select(pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last"))
        for t in ("decode", "prefill", "http", "events")
    ]
    sp = pl.concat(pl.collect_all(spans))
    first, last = sp.get_column("first").min(), sp.get_column("last").max()
    out["time_span"] = {"first": first.isoformat() if first else None, "last": last.isoformat() if last else None}
    variants = []
    for t in ("decode", "prefill"):
        v = store.scan(t).group_by("variant").agg(pl.len().alias("lines")).sort("lines", descending=True).collect()
        for r in v.iter_rows(named=True):
            variants.append({"table": t, "variant": r["variant"], "releases": RELEASES.get(r["variant"] or "?", "?"), "lines": r["lines"]})
    out["variants"] = variants
    streams = (
        store.scan("decode")
        .group_by(RANK_COLUMNS)
        .agg(pl.len().alias("lines"), pl.col("gen_throughput").max().alias("peak_gen_throughput"))
        .sort(RANK_COLUMNS, nulls_last=True)
        .collect()
    )
    out["rank_streams"] = [
        {"stream": " ".join(f"{c.split('_')[0].upper()}{r[c]}" for c in RANK_COLUMNS if r[c] is not None) or "(no rank prefix)", "lines": r["lines"], "peak_gen_throughput": r["peak_gen_throughput"]}
        for r in streams.iter_rows(named=True)
    ]
    cfg = store.read("config")
    out["config"] = (
        {k: v for k, v in cfg.sort("line_no").row(-1, named=True).items() if v is not None and k not in ("args", "file_id")} if cfg.height else None
    )
    ev = store.scan("events").filter(pl.col("kind") == "max_total_num_tokens").select("max_total_num_tokens", "max_running_requests", "context_len").collect()
    if ev.height:
        out["capacity"] = ev.row(-1, named=True)
    kinds = store.scan("events").group_by("kind").agg(pl.len().alias("count")).sort("count", descending=True).collect()
    out["event_kinds"] = {r["kind"]: r["count"] for r in kinds.iter_rows(named=True)}
    return out
