"""Helpers shared by the parser tests: parse text with the real parser, rows as plain dicts."""

from __future__ import annotations

import json
from datetime import date, datetime, time

import polars as pl

from loglens.parsers.pipeline import LineParser
from loglens.reader import lines_frame

_SKIP = {"byte_off", "file_id", "source"}


def parse_bytes(data: bytes, splits: list[int] | None = None) -> dict[str, pl.DataFrame]:
    """Parse `data` as one file, optionally fed in pieces cut at the given line indexes."""
    frame = lines_frame(data, 1, 0)
    parser = LineParser()
    bounds = [0, *(sorted(set(s for s in (splits or []) if 0 < s < frame.height))), frame.height]
    tables: dict[str, list[pl.DataFrame]] = {}
    blanks = 0
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        out = parser.feed(frame.slice(a, b - a), final=(i == len(bounds) - 2))
        blanks += out.blank_lines
        for t, df in out.tables.items():
            if df.height:
                tables.setdefault(t, []).append(df)
    merged = {t: pl.concat(v, how="diagonal_relaxed").sort("line_no") for t, v in tables.items()}
    merged["_blank"] = pl.DataFrame({"blank_lines": [blanks], "lines": [frame.height]})
    return merged


def _plain(v):
    if isinstance(v, (datetime, date, time)):
        return v.isoformat()
    if isinstance(v, float):
        return round(v, 6)
    return v


def rows_as_records(tables: dict[str, pl.DataFrame]) -> list[dict]:
    """One dict per row (non-null fields only), ordered by line number: the golden format."""
    out = []
    for t, df in tables.items():
        if t.startswith("_"):
            continue
        for r in df.iter_rows(named=True):
            rec = {"table": t}
            rec.update({k: _plain(v) for k, v in r.items() if v is not None and k not in _SKIP})
            out.append(rec)
    out.sort(key=lambda r: (r["line_no"], r["table"]))
    return out


def covered_lines(tables: dict[str, pl.DataFrame]) -> list[int]:
    """Every physical line number a row covers (events cover line_no..line_end)."""
    lines = []
    for t, df in tables.items():
        if t.startswith("_") or t == "config":
            continue
        if t == "events":
            for a, b in df.select("line_no", "line_end").iter_rows():
                lines.extend(range(a, b + 1))
        else:
            lines.extend(df.get_column("line_no").to_list())
    return lines


def dumps(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
