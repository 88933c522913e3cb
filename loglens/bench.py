"""bench_serving results: load any saved form into `BenchRecord`s under today's key names.

A results file is detected by content, not by extension (format spec §5, DESIGN.md
`reconcile --bench`): a JSON document (one object or a list), JSONL as bench_serving appends it
(with whatever else a user's script wrote between records), or text holding printed
`Serving Benchmark Result` blocks (`loglens.bench_text`).  Every release's keys are mapped to
today's (§5.2), derivable values are derived, and each guess is said in `record.warnings`.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loglens.bench_args import apply_run_args
from loglens.bench_records import BenchRecord, record_from_dict
from loglens.bench_text import find_blocks, find_header

__all__ = ["BenchFormatError", "BenchRecord", "BenchFile", "load_bench", "read_bench",
           "parse_bench", "select_records"]

EXPECTED = ('JSONL/JSON with keys like "duration" and "completed", '
            'or a "Serving Benchmark Result" block')
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
_MAX_SKIP_NOTES = 20


class BenchFormatError(ValueError):
    """The file holds no bench_serving result we can read (or a bad `--record`)."""


@dataclass
class BenchFile:
    """What `read_bench` found: the records, and the lines it had to skip (JSONL mode)."""

    source: str
    kind: str  # 'jsonl' | 'json' | 'text' (the kind of the first record)
    records: list[BenchRecord]
    skipped: list[str] = field(default_factory=list)


def load_bench(path: str | Path) -> list[BenchRecord]:
    """Every bench_serving record in `path`, in file order (see `read_bench`)."""
    return read_bench(path).records


def read_bench(path: str | Path) -> BenchFile:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"bench results file not found: {path}")
    if p.is_dir():
        raise BenchFormatError(f"{path} is a directory (expected a file with {EXPECTED})")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise BenchFormatError(f"cannot read {path}: {e.strerror or e}") from None
    return parse_bench(data, str(path))


def select_records(records: list[BenchRecord], record: int | None) -> list[BenchRecord]:
    """`--record N`: all records for None, else the one at 0-based N (negative from the end)."""
    if record is None:
        return list(records)
    n = len(records)
    if not -n <= record < n:
        where = f"{records[0].source} holds" if records else "there are"
        valid = f"use 0..{n - 1}, or -1 for the last" if n else "nothing to select"
        raise BenchFormatError(
            f"--record {record} is out of range: {where} {n} record{'s' if n != 1 else ''} ({valid})")
    return [records[record]]


# ---- bytes -> text ----------------------------------------------------------------------------

def parse_bench(data: bytes, source: str = "<bench>") -> BenchFile:
    """Parse the bytes of a results file; `source` names it in messages and records."""
    notes: list[str] = []
    text = _decode(_gunzip(data, source, notes), source)
    lines = _clean_lines(text)
    if not any(line.strip() for line in lines):
        raise BenchFormatError(f"{source} is empty (expected {EXPECTED})")
    records, skipped = _records_from_lines(lines, source)
    if not records:
        if any(find_header(line) for line in lines):
            raise BenchFormatError(f"{source} has a 'Serving Benchmark Result' header but no "
                                   "values under it (a cut-off paste?)")
        raise BenchFormatError(f"{source} holds no bench_serving record (expected {EXPECTED})")
    records[0].warnings[:0] = notes
    return BenchFile(source, records[0].source_kind, records, skipped)


def _gunzip(data: bytes, source: str, notes: list[str]) -> bytes:
    if not data.startswith(b"\x1f\x8b"):
        return data
    out, rest = [], data
    try:
        while rest.startswith(b"\x1f\x8b"):  # concatenated gzip members are one stream
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out.append(d.decompress(rest))
            if not d.eof:
                notes.append(f"{source}: gzip stream is cut off; read what was there")
                break
            rest = d.unused_data
    except zlib.error as e:
        if not out:
            raise BenchFormatError(f"{source} is a damaged gzip file ({e}); expected {EXPECTED}") from None
        notes.append(f"{source}: gzip stream is damaged after {sum(map(len, out))} bytes ({e})")
    return b"".join(out)


def _decode(data: bytes, source: str) -> str:
    # PowerShell's `>` writes UTF-16 with a BOM: a real way to save a terminal's output.
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if data.startswith(bom):
            return data[len(bom):].decode(codec, errors="replace")
    if b"\x00" in data[:65536]:
        raise BenchFormatError(f"{source} looks binary (NUL bytes); expected {EXPECTED}")
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    sample = text[:65536]
    odd = sum(c == "\ufffd" or (c < " " and c not in "\t\n\r\x1b\f") for c in sample)
    if odd > len(sample) // 10:
        raise BenchFormatError(f"{source} looks binary (not UTF-8 text); expected {EXPECTED}")
    return text


def _clean_lines(text: str) -> list[str]:
    """Lines without colour codes; a lone CR (tqdm redraw) ends a line like LF does.
    Leading `#! ` attribution lines (realdata excerpts) are blanked so line numbers hold."""
    lines = _ANSI_RE.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for i, line in enumerate(lines):
        if not (line.startswith("#! ") or line.rstrip() == "#!"):
            break
        lines[i] = ""
    return lines


# ---- text -> records --------------------------------------------------------------------------

def _records_from_lines(lines: list[str], source: str) -> tuple[list[BenchRecord], list[str]]:
    """Records in file order.  Skipped lines are told on the record that follows them (the
    user's `max_prefill:...` label line precedes its record), trailing ones on the last."""
    whole = _whole_document(lines)
    if whole is not None:
        first = next(i for i, line in enumerate(lines) if line.strip())
        one_line = len(whole) == 1 and not any(line.strip() for line in lines[first + 1:])
        # One object on one line is what bench_serving appends; the extension breaks the tie
        # with a compact .json file.
        kind = "jsonl" if one_line and not _stem(source).endswith(".json") else "json"
        line_no = first + 1 if len(whole) == 1 and isinstance(whole[0], dict) else None
        items = [(line_no, kind, item, f"list item {i}") for i, item in enumerate(whole)]
        skips: list[int] = []
    else:
        values, skips = _scan_json_lines(lines)
        blocks = find_blocks(lines)
        context_start = 0  # a block's arguments are looked for after the previous block
        for block in blocks:
            before = lines[context_start:block.line_no - 1]
            apply_run_args(block.values, block.warnings, before, context_start)
            context_start = block.end_line_no
        if blocks:
            skips = []  # in a terminal paste most lines are not records: no news
        items = [(ln, "jsonl", v, f"line {ln}") for ln, v in values]
        items += [(b.line_no, "text", b, "") for b in blocks]
        items.sort(key=lambda item: item[0] or 0)
    records: list[BenchRecord] = []
    skipped = _Skipped(lines)
    next_skip = 0
    for line_no, kind, payload, where in items:
        while next_skip < len(skips) and line_no and skips[next_skip] < line_no:
            skipped.add_line(skips[next_skip])
            next_skip += 1
        if kind == "text":
            rec = record_from_dict(payload.values, source=source, index=len(records), kind=kind,
                                   line_no=line_no, raw=payload.text, notes=payload.warnings)
        else:
            rec = record_from_dict(payload, source=source, index=len(records), kind=kind,
                                   line_no=line_no, raw=payload, notes=[])
        if rec is None:
            skipped.add(f"{where}: JSON without bench_serving result keys, skipped")
            continue
        rec.warnings[:0] = skipped.take_gap()
        records.append(rec)
    for line_no in skips[next_skip:]:
        skipped.add_line(line_no)
    if records:
        records[-1].warnings.extend(skipped.take_gap())
    return records, skipped.summary()


class _Skipped:
    """Lines that were not records: every one counted, the first few told.  A server log
    passed by mistake must not yield a warning per line."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.gap: list[str] = []  # since the last record
        self.gap_total = 0
        self.first: list[str] = []  # in the whole file
        self.total = 0

    def add_line(self, line_no: int) -> None:
        if len(self.first) < _MAX_SKIP_NOTES or len(self.gap) < _MAX_SKIP_NOTES:
            text = _clip(self.lines[line_no - 1].strip())
            self.add(f"line {line_no}: not a JSON record, skipped: {text}")
        else:
            self.add("")

    def add(self, note: str) -> None:
        self.total += 1
        self.gap_total += 1
        for kept in (self.gap, self.first):
            if len(kept) < _MAX_SKIP_NOTES:
                kept.append(note)

    def take_gap(self) -> list[str]:
        notes = self.gap + _more(self.gap_total - len(self.gap))
        self.gap, self.gap_total = [], 0
        return notes

    def summary(self) -> list[str]:
        return self.first + _more(self.total - len(self.first))


def _more(n: int) -> list[str]:
    return [f"... and {n} more skipped lines"] if n > 0 else []


def _whole_document(lines: list[str]) -> list[Any] | None:
    """The file as one JSON document: an object, or a list of objects (pretty or not)."""
    text = "\n".join(lines).strip()
    if text[:1] not in ("{", "["):
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, list) else [doc]


def _scan_json_lines(lines: list[str]) -> tuple[list[tuple[int, Any]], list[int]]:
    """JSON values line by line, as bench_serving appends them, and the 1-based numbers of
    the other non-blank lines.  A pretty-printed value (a lone `{` or `[` at column 0 up to
    its lone closer at column 0, everything between indented) may span lines: that is how
    records appended with `json.dump(indent=...)` look."""
    values: list[tuple[int, Any]] = []
    skips: list[int] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped:
            i += 1
            continue
        value, nxt = _MISSING, i + 1
        if stripped[0] in "{[" and stripped[-1] in "}]":  # cheap test first: logs start with "[" too
            try:
                value = json.loads(stripped)
            except (ValueError, RecursionError):
                pass
        elif stripped in ("{", "["):
            value, nxt = _pretty_value(lines, i)
        if value is _MISSING:
            skips.append(i + 1)
        else:
            values += [(i + 1, item) for item in (value if isinstance(value, list) else [value])]
        i = nxt
    return values, skips


def _pretty_value(lines: list[str], start: int) -> tuple[Any, int]:
    """(value, next line) for a pretty-printed value opened at `start`, else (_MISSING, start + 1).
    Only indented lines may lie between opener and closer, so candidate spans never overlap
    and a file of stray brackets costs linear time."""
    opener = lines[start].rstrip()
    if opener not in ("{", "["):  # indented: inside something else
        return _MISSING, start + 1
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0].isspace()):
        end += 1
    if end == len(lines) or lines[end].rstrip() != {"{": "}", "[": "]"}[opener]:
        return _MISSING, start + 1
    try:
        return json.loads("\n".join(lines[start:end + 1])), end + 1
    except (ValueError, RecursionError):
        return _MISSING, start + 1


_MISSING = object()


def _stem(source: str) -> str:
    low = source.lower()
    return low[:-3] if low.endswith(".gz") else low


def _clip(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
