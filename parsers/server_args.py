"""`server_args=ServerArgs(model_path='…', tp_size=8, …)` → one typed configuration row.

The dump is a Python dataclass repr printed once at launch.  It is split at top-level commas
(respecting quotes and brackets) and each value read with `ast.literal_eval`; a value that is
not a literal (an enum repr, say) is kept as its text.  These lines are rare (one per launch),
so a small Python pass over them is the right tool; the bulk of a log never comes here.
"""

from __future__ import annotations

import ast
import json

from loglens.schema import CONFIG


def split_top_level(s: str) -> list[str]:
    parts, depth, quote, buf, i = [], 0, None, [], 0
    while i < len(s):
        c = s[i]
        if quote:
            buf.append(c)
            if c == "\\" and i + 1 < len(s):
                buf.append(s[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
            buf.append(c)
        elif c in "([{":
            depth += 1
            buf.append(c)
        elif c in ")]}":
            depth -= 1
            buf.append(c)
        elif c == "," and depth == 0:
            parts.append("".join(buf).strip())
            buf = []
        else:
            buf.append(c)
        i += 1
    if "".join(buf).strip():
        parts.append("".join(buf).strip())
    return parts


def parse_server_args(message: str) -> dict | None:
    """The configuration in one `server_args=ServerArgs(...)` message, or None if unreadable."""
    start = message.find("(")
    if not message.startswith("server_args=") or start < 0:
        return None
    body = message[start + 1 :]
    body = body[:-1] if body.endswith(")") else body  # a cut-off dump still yields its fields
    args: dict[str, object] = {}
    for part in split_top_level(body):
        key, eq, val = part.partition("=")
        if not eq or not key.strip().isidentifier():
            continue
        try:
            args[key.strip()] = ast.literal_eval(val.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            args[key.strip()] = val.strip()
    if not args:
        return None
    row: dict[str, object] = {}
    for col, dtype in CONFIG.items():
        if col in args and col != "args":
            v = args[col]
            row[col] = v if not isinstance(v, (list, dict, tuple, set)) else json.dumps(v, default=str)
    if row.get("max_total_tokens") is None and isinstance(args.get("max_total_tokens"), int):
        row["max_total_tokens"] = args["max_total_tokens"]
    row["args"] = json.dumps({k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v)) for k, v in args.items()})
    return row
