"""The run's arguments as a terminal shows them: the client's `Namespace(...)` dump
(`benchmark_args=Namespace(...)` in some releases) and the `bench_serving` command line.

The printed result block lacks num_prompts, dataset and lengths; these lines supply them.
"""

from __future__ import annotations

import ast
import math
import re
import shlex
from typing import Any

from loglens.bench_text import parse_value

#: arguments worth keeping (the rest describe the client, not the run)
RUN_ARGS = ("backend", "dataset_name", "model", "num_prompts", "request_rate", "max_concurrency",
            "random_input_len", "random_output_len", "random_range_ratio")
COMMAND_RE = re.compile(r"bench_serving|benchmark[._]serving|bench serve")


def parse_namespace(line: str) -> dict[str, Any]:
    """`key=value` pairs of a printed argparse `Namespace(...)` (a cut-off tail is dropped)."""
    start = line.find("Namespace(")
    if start < 0:
        return {}
    items, depth, quote, buf = [], 0, "", []
    closed = False
    for ch in line[start + len("Namespace("):]:
        if quote:
            quote = "" if ch == quote and (not buf or buf[-1] != "\\") else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                closed = True
                break
            depth -= 1
        elif ch == "," and depth == 0:
            items.append("".join(buf))
            buf = []
            continue
        buf.append(ch)
    if closed:
        items.append("".join(buf))
    args: dict[str, Any] = {}
    for item in items:
        key, eq, text = item.strip().partition("=")
        if eq and key.isidentifier():
            args[key] = _literal(text.strip())
    return args


def _literal(text: str) -> Any:
    if text in ("inf", "-inf", "nan"):
        return float(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def parse_command(line: str) -> dict[str, Any]:
    """Run arguments from a `bench_serving` / `vllm bench serve` command line.  argparse
    accepts unique prefixes (`--num-prompt`, `--random-input`), so they are matched too."""
    m = COMMAND_RE.search(line)
    if not m:
        return {}
    try:
        tokens = shlex.split(line[m.end():])
    except ValueError:
        tokens = line[m.end():].split()
    args: dict[str, Any] = {}
    for pos, tok in enumerate(tokens):
        if not tok.startswith("--"):
            continue
        flag, eq, text = tok[2:].partition("=")
        if not eq:
            nxt = tokens[pos + 1] if pos + 1 < len(tokens) else "--"
            text = nxt if not nxt.startswith("--") else ""
        names = [a for a in RUN_ARGS if flag and a.replace("_", "-").startswith(flag)]
        if len(names) == 1 and text:
            args[names[0]] = parse_value(text)
    return args


def _agrees(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return a == b or (math.isnan(a) and math.isnan(b))
    return str(a) == str(b)


def apply_run_args(values: dict[str, Any], warnings: list[str], before: list[str], offset: int) -> None:
    """Fill a block's `values` (num_prompts, dataset_name, ...) from the last command line and
    `Namespace(...)` in `before` (lines `offset`.. of the file).  Namespace wins: it holds
    argparse's resolved values and defaults."""
    sources: list[tuple[str, dict[str, Any]]] = []
    for finder, what in ((parse_command, "command line"), (parse_namespace, "Namespace(...)")):
        for k in range(len(before) - 1, -1, -1):
            found = {a: v for a, v in finder(before[k]).items() if a in RUN_ARGS}
            if found:
                sources.append((f"{what} at line {offset + k + 1}", found))
                break
    printed = set(values)
    for where, args in sources:
        clash = [a for a, v in args.items() if a in printed and not _agrees(v, values[a])]
        completed, prompts = values.get("completed"), args.get("num_prompts")
        if isinstance(completed, int) and isinstance(prompts, int) and completed > prompts:
            clash.append("num_prompts")
        if clash:
            warnings.append(f"{where} disagrees with the block on {', '.join(clash)}: "
                                  "it belongs to another run, not used")
            continue
        taken = [a for a in args if a not in printed]
        values.update({a: args[a] for a in taken})
        if taken:
            warnings.append(f"{', '.join(taken)} taken from the {where}")
