"""The printed `Serving Benchmark Result` block of bench_serving, as pasted from a terminal.

The block is `{:<40} {:<10}` label/value lines between a `=== Serving Benchmark Result ===`
header and a line of 50 `=` (format spec §5.6).  Pastes break that shape every way a terminal
can: a logging prefix on each line, stripped padding, values longer than the pad, colour, tqdm
redraws, a block cut off mid-way.  This module turns such text into dicts under today's JSONL
keys.  The run's arguments are not in the block: they are taken from the `Namespace(...)` dump
or `bench_serving` command line just before it, unless these contradict the block (pastes
splice runs together).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

HEADER_RE = re.compile(r"=+ *Serving Benchmark Result *=+", re.IGNORECASE)
CLOSING_RE = re.compile(r"={20,}")
SECTION_RE = re.compile(r"-{3,}\s*(\S.*?)\s*-{3,}")
LABEL_VALUE_RE = re.compile(r"(?P<label>[A-Za-z#][^:]*?):(?:\s+(?P<value>\S.*?))?\s*")
NUMBER_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
LATENCY_LABEL_RE = re.compile(
    r"(?P<stat>mean|median|std|max|p\d{1,2}(?:\.\d+)?) (?P<metric>e2e latency|ttft|tpot|itl) \(ms\)",
    re.IGNORECASE,
)

#: printed label (lower case, without the colon) -> today's JSONL key.  Labels of every
#: release, the `reqeuest` typo (v0.3.6.post1 - v0.4.6.post3) and vLLM's wording included.
LABEL_KEYS = {
    "backend": "backend",
    "traffic request rate": "request_rate",
    "request rate configured (rps)": "request_rate",
    "max request concurrency": "max_concurrency",
    "max reqeuest concurrency": "max_concurrency",
    "maximum request concurrency": "max_concurrency",
    "successful requests": "completed",
    "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens",
    "total input text tokens": "total_input_text_tokens",
    "total input vision tokens": "total_input_vision_tokens",
    "total generated tokens": "total_output_tokens",
    "total generated tokens (retokenized)": "total_output_tokens_retokenized",
    "request throughput (req/s)": "request_throughput",
    "input token throughput (tok/s)": "input_throughput",
    "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "peak concurrent requests": "max_concurrent_requests",
    "total token throughput (tok/s)": "total_throughput",
    "concurrency": "concurrency",
    "accept length": "accept_length",
}
# A known label anywhere in a line: how a line is found when its logging prefix differs
# from the header's (then everything before the label is prefix).
_KNOWN_LABEL_SEARCH = re.compile(
    r"(?<![A-Za-z])(?:"
    + "|".join(re.escape(label) for label in sorted(LABEL_KEYS, key=len, reverse=True))
    + "|" + LATENCY_LABEL_RE.pattern + r"):",
    re.IGNORECASE,
)
_RULE_SEARCH = re.compile(r"(?:-{3,}\s*\S.*?\s*-{3,}|={20,})\s*$")

# Column a value starts at when the label was padded to 40 (label, pad, one space).
PADDED_VALUE_COLUMN = 41
# A block line is ~50 characters plus a logging prefix; longer lines are something else, and
# keeping them away from the regexes keeps a 10 MB line from costing quadratic time.
MAX_BLOCK_LINE = 1000


@dataclass
class PrintedBlock:
    """One block: its values under today's keys, and what was odd about it."""

    line_no: int  # 1-based line of the header
    end_line_no: int  # 1-based last line that belonged to the block
    text: str
    values: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    closed: bool = False


def find_header(line: str) -> re.Match[str] | None:
    """The `=== Serving Benchmark Result ===` header in a line.  The substring test comes
    first: the regex alone is quadratic on a long run of `=`."""
    head = line[:MAX_BLOCK_LINE]
    return HEADER_RE.search(head) if "serving benchmark result" in head.lower() else None


def parse_value(text: str) -> Any:
    """A printed value: int, float (inf/nan too), None for `not set`, else the string."""
    low = text.lower()
    if low == "not set":
        return None
    if low in ("inf", "+inf", "infinity", "-inf", "-infinity", "nan"):
        return float(low.replace("infinity", "inf"))
    if NUMBER_RE.fullmatch(text):
        return int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
    return text


def label_key(label: str) -> tuple[str, bool]:
    """Today's key for a printed label, and whether the label is known."""
    low = " ".join(label.lower().split())
    if low in LABEL_KEYS:
        return LABEL_KEYS[low], True
    m = LATENCY_LABEL_RE.fullmatch(low)
    if m:
        stat = m["stat"].replace(".", "_")
        return f"{stat}_{m['metric'].replace(' ', '_')}_ms", True
    return column_name(low), False


def column_name(label: str) -> str:
    """DESIGN.md's column rule; a `(%)` unit survives as `_pct` (JSONL's `cache_hit_rate_pct`)."""
    pct = "(%)" in label
    name = re.sub(r"\([^)]*\)", " ", label.replace("#", "")).lower()
    name = re.sub(r"[^a-z0-9]+", "_", name).strip("_")
    return f"{name}_pct" if pct else name


def _prefix_shape(prefix: str) -> re.Pattern[str] | None:
    """A logging prefix as a pattern: digit runs vary from line to line, the rest does not."""
    if not prefix.strip():
        return None
    parts = re.split(r"(\d+)", prefix)
    return re.compile("".join(r"\d+" if p.isdigit() else re.escape(p) for p in parts))


def _strip_prefix(line: str, prefix: re.Pattern[str] | None) -> str:
    if prefix is not None:
        m = prefix.match(line)
        if m:
            return line[m.end():]
    m = _KNOWN_LABEL_SEARCH.search(line) or _RULE_SEARCH.search(line)
    return line[m.start():] if m else line


def _is_block_line(line: str) -> bool:
    if CLOSING_RE.fullmatch(line) or SECTION_RE.fullmatch(line):
        return True
    m = LABEL_VALUE_RE.fullmatch(line)
    if not m:
        return False
    if label_key(m["label"])[1]:
        return True
    # An unknown label is a block line only if padded like one: otherwise it is prose.
    return m["value"] is not None and (line.find(m["value"], len(m["label"])) >= PADDED_VALUE_COLUMN)


def find_blocks(lines: list[str]) -> list[PrintedBlock]:
    """Every `Serving Benchmark Result` block in `lines` (already free of CR and colour)."""
    blocks: list[PrintedBlock] = []
    i = 0
    while i < len(lines):
        header = find_header(lines[i])
        if not header:
            i += 1
            continue
        block = _read_block(lines, i, _prefix_shape(lines[i][: header.start()]))
        if block.values:
            blocks.append(block)
        i = block.end_line_no  # 1-based last line: as a 0-based index, the next one
    return blocks


def _read_block(lines: list[str], start: int, prefix: re.Pattern[str] | None) -> PrintedBlock:
    block = PrintedBlock(line_no=start + 1, end_line_no=start + 1, text="")
    section = ""
    last_label = "the header"
    j = start + 1
    while j < len(lines):
        if len(lines[j]) > MAX_BLOCK_LINE or find_header(lines[j]):
            break  # not a block line; or the next block begins, so this one was cut off
        line = _strip_prefix(lines[j], prefix).strip()
        if not line:
            # bench_serving prints no blank line inside a block; a paste may. Go on only if
            # the block visibly does.
            j = next((k for k in range(j + 1, len(lines)) if lines[k].strip()), len(lines))
            continue
        if not _is_block_line(line):
            break  # the paste ends, or something else begins
        block.end_line_no = j + 1
        j += 1
        if CLOSING_RE.fullmatch(line):
            block.closed = True
            break
        sec = SECTION_RE.fullmatch(line)
        if sec:
            section = sec[1].lower()
            continue
        m = LABEL_VALUE_RE.fullmatch(line)
        assert m is not None  # _is_block_line said so
        label = m["label"].strip()
        last_label = repr(label)
        if m["value"] is None:
            block.warnings.append(f"line {j}: {label!r} has no value (cut-off paste?)")
            continue
        _store(block, section, label, parse_value(m["value"]))
    block.text = "\n".join(lines[start: block.end_line_no])
    if not block.closed:
        block.warnings.append(
            f"block at line {block.line_no} has no closing '=====' line: the paste looks cut off "
            f"after {last_label}; later metrics are absent")
    return block


def _store(block: PrintedBlock, section: str, label: str, value: Any) -> None:
    key, known = label_key(label)
    if "cache" in section and not known:
        # the v0.5.14+ `Cache Hit Details` section mirrors the JSONL `cache_report` object
        block.values.setdefault("cache_report", {})[key] = value
    else:
        block.values[key] = value
