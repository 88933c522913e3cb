"""What kind an event line is, decided by its content (SGLang's format has no level field, so a
warning looks like an info line).

`KINDS` and `kind_expr` define the kinds: the first regex in `KINDS` order that matches wins.
`kind_codes` computes the same for a column of messages, cheaply: at import every kind's regex
is cut into its top-level alternatives, and each alternative becomes evidence — a floating
literal (found by one `extract_all` pass for all kinds), an anchored literal start (one anchored
`extract`), or a *screen*, a literal every match must contain, after which the kind's own regex
runs only on the rows that hold it.  Checks at import fail loudly if an edit to `KINDS` breaks
an assumption (one literal able to hide another, say).  Why: polars keeps only ~32 compiled
regexes per thread, shared by every step of a parse, and each call costs ~20 µs; ~18 regexes
run on every event line were both the most calls and recompiled on every call.
"""

from __future__ import annotations

import re

import polars as pl

#: (kind, regex on the message) — first match wins; order matters
KINDS: list[tuple[str, str]] = [
    ("server_args", r"^server_args="),
    ("max_total_num_tokens", r"^max_total_num_tokens="),
    ("kv_cache", r"^KV Cache is allocated"),
    ("memory_pool", r"^Memory pool end"),
    ("load_weight", r"^Load weight (begin|end)"),
    ("graph_capture_begin", r"^Capture (draft )?\w+ graph begin"),
    ("graph_capture_end", r"^Capture (draft )?\w+ graph end"),
    ("graph_capture", r"^Capture (draft )?\w+ graph bs|^Capturing batches"),
    ("ready", r"The server is fired up and ready to roll"),
    ("retraction", r"Retract requests|Decode out of memory happened|^Testing retraction"),
    ("cache_flush", r"^Cache (flushed successfully|not flushed)"),
    ("deprecation", r"is deprecated"),
    ("error", r"Traceback \(most recent call last\)|hit an exception|Received sigquit|^\S*(Error|Exception)\b[:(]|^ERROR\b|\[http_server\] Error|watchdog timeout"),
    ("warning", r"^WARNING\b|Warning:|^\[?W\d{4}"),
    ("request_log", r"^(Receive|Finish): obj="),
    ("uvicorn", r"^INFO:\s+(Started server process|Waiting for application|Application startup|Uvicorn running|Shutting down|Finished server process)"),
    ("progress", r"\d+%\|"),
    ("distributed", r"^Init torch distributed"),
]

#: a kind's code is its position here: the KINDS, then `other` (no pattern matched) and
#: `traceback` (a record that starts with a bare continuation line)
KIND_NAMES: list[str] = [k for k, _ in KINDS] + ["other", "traceback"]
_OTHER = len(KINDS)
_TRACEBACK = _OTHER + 1
_ERROR = KIND_NAMES.index("error")


def kind_expr(msg: pl.Expr) -> pl.Expr:
    """The definition of a message's kind (`kind_codes` computes the same, much faster)."""
    expr = pl.lit("other")
    for kind, rx in reversed(KINDS):
        expr = pl.when(msg.str.contains(rx)).then(pl.lit(kind)).otherwise(expr)
    return expr


def _structure(rx: str, start: int = 0):
    """(index, character, group depth before it) of each character of `rx` from `start` that is
    outside a character class and not escaped: the ones that shape its groups and alternatives.
    A class's `[^` and a leading `]` are read as literals of the class, as the regex engine does."""
    depth, in_class, i = 0, False, start
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1 + rx.startswith("^", i + 1)
            if rx.startswith("]", i):
                i += 1
            continue
        else:
            yield i, c, depth
            depth += (c == "(") - (c == ")")
        i += 1
    if in_class:
        raise ValueError(f"unclosed character class in {rx!r}")


def _alternatives(rx: str) -> list[str]:
    """`rx` cut at its top-level `|` (not inside a group or a class, not escaped).

    Matching `rx` anywhere is matching any of the pieces anywhere.  Inline flags (`(?i)`)
    would reach across the cut, so they are refused."""
    if re.search(r"\(\?(?!:|P<)", rx):
        raise ValueError(f"inline flags are not supported in a kind's regex: {rx!r}")
    cuts = [i for i, c, depth in _structure(rx) if c == "|" and depth == 0]
    parts = [rx[a + 1:b] for a, b in zip([-1, *cuts], [*cuts, len(rx)])]
    if sum(+1 if c == "(" else -1 if c == ")" else 0 for _, c, _ in _structure(rx)) != 0:
        raise ValueError(f"cannot cut {rx!r} at its top-level alternatives")
    return parts


_META = set(".^$*+?()[]{}|\\")


def _group_end(rx: str, i: int) -> int:
    """Index of the `)` closing the group that opens at `rx[i]`."""
    for j, c, depth in _structure(rx, i):
        if c == ")" and depth == 1:
            return j
    raise ValueError(f"unbalanced group in {rx!r}")


def _literal(alt: str) -> str | None:
    """The text `alt` matches, if it is a plain literal (escaped punctuation allowed)."""
    out, i = [], 0
    while i < len(alt):
        c = alt[i]
        if c == "\\":
            if i + 1 >= len(alt) or alt[i + 1].isalnum():
                return None  # \d, \b, \x41, …
            out.append(alt[i + 1])
            i += 2
        elif c in _META:
            return None
        else:
            out.append(c)
            i += 1
    return "".join(out)


_QUANTIFIERS = ("?", "*", "+", "{")


def _items(alt: str) -> list[tuple[str, object, bool]]:
    """`alt` as a sequence of ("lit", character, optional), ("group", [literal options] or None,
    optional), ("boundary", None, False) for `\b`, and ("other", None, False) for anything else
    (a class, a repeated item…)."""
    items: list[tuple[str, object, bool]] = []
    i = 0
    while i < len(alt):
        c = alt[i]
        if c == "(":
            j = _group_end(alt, i)
            inner = alt[i + 1 : j]
            inner = inner[2:] if inner.startswith("?:") else inner
            opts = None if inner.startswith("?") else [_literal(x) for x in _alternatives(inner)]
            item: tuple[str, object, bool] = ("group", None if opts is None or None in opts else opts, False)
            i = j + 1
        elif c == "[":
            j = i + 1 + (alt[i + 1 : i + 2] == "^")
            j = alt.index("]", j + 1 if alt[j : j + 1] == "]" else j)  # a leading `]` is literal
            while alt[j - 1] == "\\":
                j = alt.index("]", j + 1)
            item, i = ("other", None, False), j + 1
        elif c == "\\" and i + 1 < len(alt) and not alt[i + 1].isalnum():
            item, i = ("lit", alt[i + 1], False), i + 2
        elif alt[i : i + 2] == "\\b":
            item, i = ("boundary", None, False), i + 2
        elif c == "\\" or c in _META:
            item, i = ("other", None, False), i + 1 + (c == "\\")
        else:
            item, i = ("lit", c, False), i + 1
        q = alt[i : i + 1]
        if q in _QUANTIFIERS:
            end = alt.index("}", i) + 1 if q == "{" else i + 1
            end += alt[end : end + 1] == "?"  # a lazy quantifier
            item = (item[0], item[1], True) if alt[i:end] == "?" and item[0] != "other" else ("other", None, False)
            i = end
        items.append(item)
    return items


#: characters that are not word characters (`\w`), so a `\b` after a word character holds
_NOT_WORD = " :,.;!?()[]-=/'\"\t"


def _is_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def _starts(items: list[tuple[str, object, bool]]) -> tuple[list[str], list[str]]:
    """For an anchored alternative: (texts it matches exactly when a message starts with one,
    texts every message it matches starts with), as far as it is literal."""
    texts = [""]
    for n, (kind, val, optional) in enumerate(items):
        if kind == "lit":
            new = [t + val for t in texts]
        elif kind == "group" and val is not None:
            new = [t + o for t in texts for o in val]
        elif kind == "boundary" and n == len(items) - 1 and all(t and _is_word(t[-1]) for t in texts):
            return [t + c for t in texts for c in _NOT_WORD], texts  # `ERROR\b`: `ERROR:` decides
        else:
            return [], texts
        texts = new + (texts if optional else [])
        if len(texts) > 16:
            return [], [""]
    return texts, []


def _needs(items: list[tuple[str, object, bool]]) -> list[str] | None:
    """Literal texts one of which every match holds (the longest such run or group), if any."""
    best, run = None, ""
    for kind, val, optional in items + [("other", None, False)]:
        if kind == "lit" and not optional:
            run += val
            continue
        options = [run] if len(run) >= 2 else None
        if kind == "group" and not optional and val is not None and min(map(len, val)) >= 2:
            options = val if options is None or min(map(len, val)) > len(run) else options
        if options and (best is None or min(map(len, options)) > min(map(len, best))):
            best = options
        run = ""
    return best


def _can_overlap(a: str, b: str) -> bool:
    """Can an occurrence of `b` start strictly inside an occurrence of `a`?"""
    return any(b.startswith(a[d:]) or a[d:].startswith(b) for d in range(1, len(a)))


# How kinds are found cheaply.  Each kind's regex is cut into its alternatives and each
# alternative gets *evidence* that two passes over the messages find at once (`str.extract`
# and `str.extract_all` of one regex each): a literal it is (decides its kind), or a literal
# every match of it holds (a screen: the kind's regex then runs on the messages that hold it,
# if no lower kind is decided).  Anchored alternatives give the literal text they start with
# (`^Cache (flushed successfully|not flushed)` is two literals, `^WARNING\b` screens with
# `WARNING`), floating ones the literal they are or hold (`is deprecated`; `%|` in `\d+%\|`).
# So most calls use a handful of regexes rather than one per kind and number.
_NONE = 255  # no kind
_MARKERS = {"elapsed": 30, "mem=": 31}  # bits for texts the numbers' regexes need (below)
_ANCH: dict[str, list[int]] = {}  # anchored start → [kind it decides (or _NONE), screen bits]
_FLOAT: dict[str, list[int]] = {}  # floating text → [kind it decides (or _NONE), screen bits]
_UNSCREENED = 0  # bits of kinds with an alternative that has no evidence: tried everywhere
_CONFIRM: list[list[str]] = [[] for _ in KINDS]  # per kind, the alternatives a screen confirms
_SOURCE: dict[str, list[tuple[int, str]]] = {}  # floating literal → (kind, alternative) it is


def _evidence(table: dict[str, list[int]], text: str, kind: int, bits: int) -> None:
    entry = table.setdefault(text, [_NONE, 0])
    entry[0], entry[1] = min(entry[0], kind), entry[1] | bits


for _k, (_, _rx) in enumerate(KINDS):
    for _alt in _alternatives(_rx):
        _body = _alt[1:] if _alt.startswith("^") else _alt
        _its = _items(_body)
        if _alt.startswith("^"):
            _decide, _screen = _starts(_its)
            _screen = [t for t in _screen if not any(u != t and t.startswith(u) for u in _screen)]  # `Capture ` for `Capture draft `
            if all(_decide + _screen):
                for _t in _decide:
                    assert re.match(_body, _t), f"{_t!r} should match {_alt!r}"  # (Python's re as a check)
                    _evidence(_ANCH, _t, _k, 0)
                for _t in _screen:
                    _evidence(_ANCH, _t, _NONE, 1 << _k)
                _CONFIRM[_k] += [_alt] if _screen else []
                continue
        elif _literal(_body):
            _evidence(_FLOAT, _literal(_body), _k, 0)
            _SOURCE.setdefault(_literal(_body), []).append((_k, _alt))
            continue
        _CONFIRM[_k].append(_alt)
        for _t in _needs(_its) or []:
            _evidence(_FLOAT, _t, _NONE, 1 << _k)
        _UNSCREENED |= 0 if _needs(_its) else 1 << _k
for _t, _bit in _MARKERS.items():
    _evidence(_FLOAT, _t, _NONE, 1 << _bit)
# Where two texts match at one place, one is a prefix of the other; both regexes list longer
# texts first (leftmost-first takes the first alternative that matches), so the longer is
# reported and carries what its prefixes tell.
for _table in (_ANCH, _FLOAT):
    for _t, _entry in _table.items():
        for _u, (_kind, _bits) in _table.items():
            if _u != _t and _t.startswith(_u):
                _entry[0], _entry[1] = min(_entry[0], _kind), _entry[1] | _bits


def _covers(hider: list[int], hidden: list[int]) -> bool:
    """Does evidence `hider` tell all that `hidden` would (for a message that holds both)?"""
    kinds = [hidden[0]] * (hidden[0] != _NONE) + [k for k in range(len(KINDS)) if hidden[1] >> k & 1]
    marks = hidden[1] & ~((1 << len(KINDS)) - 1)
    return all(hider[0] <= k or hider[1] >> k & 1 for k in kinds) and marks & ~hider[1] == 0


# `extract_all` reports non-overlapping matches: a text starting inside a reported one is not
# reported, which is harmless only when the reported one covers it (when it covers a literal's
# kind by a screen only, that screen's regex must find the literal too)
for _a, _ea in _FLOAT.items():
    for _b, _eb in _FLOAT.items():
        if _can_overlap(_a, _b):
            assert _covers(_ea, _eb), f"{_a!r} can hide {_b!r}"
            for _k, _alt in _SOURCE.get(_b, []):
                if _ea[0] > _k:  # covered by a screen for its kind
                    _CONFIRM[_k].append(_alt)
assert len(KINDS) < min(_MARKERS.values())


def _confirm(alts: list[str]) -> pl.Expr:
    """Does one of `alts` match column `m`?  Anchored and floating ones in separate regexes
    (floating pieces in one regex make the anchored ones scan the whole message)."""
    anchored, floating = [a[1:] for a in alts if a.startswith("^")], [a for a in alts if not a.startswith("^")]
    tests = ([pl.col("m").str.contains("^(?:" + "|".join(anchored) + ")")] if anchored else []) + ([pl.col("m").str.contains("|".join(floating))] if floating else [])
    return pl.any_horizontal(tests).fill_null(False)


def _union(texts: list[str], anchored: bool) -> str:
    escaped = ("".join("\\" + c if c in _META else c for c in t) for t in sorted(texts, key=len, reverse=True))
    return ("^(?:" if anchored else "(?:") + "|".join(escaped) + ")"


_ANCH_RX, _FLOAT_RX = _union(list(_ANCH), True), _union(list(_FLOAT), False)
_ANCH_ENUM, _FLOAT_ENUM = pl.Enum(list(_ANCH)), pl.Enum(list(_FLOAT))
_ANCH_KIND = pl.Series([e[0] for e in _ANCH.values()], dtype=pl.UInt8)
_ANCH_BITS = pl.Series([e[1] for e in _ANCH.values()], dtype=pl.UInt32)
_FLOAT_KIND = pl.Series([e[0] for e in _FLOAT.values()], dtype=pl.UInt8)
_FLOAT_BITS = pl.Series([e[1] for e in _FLOAT.values()], dtype=pl.UInt32)
#: screen bits of the kinds below a kind (by kind; `_NONE` and above: all kinds)
_BELOW = pl.Series([(1 << min(k, len(KINDS))) - 1 for k in range(256)], dtype=pl.UInt32)


def _kinds(msg: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(each message's kind code as `kind_codes` gives it, its marker bits)."""
    if msg.len() == 0:
        return pl.Series("kind", [], dtype=pl.UInt8), pl.Series("marks", [], dtype=pl.UInt8)
    m, l, a = pl.col("m"), pl.col("l"), pl.col("a")
    found = msg.to_frame("m").with_columns(l=m.str.extract_all(_FLOAT_RX), a=m.str.extract(_ANCH_RX, 0))
    found = found.with_columns(
        f=l.list.first().cast(_FLOAT_ENUM, strict=False).to_physical(),  # which text: a code
        s=a.cast(_ANCH_ENUM, strict=False).to_physical(),
    )
    f, s = pl.col("f"), pl.col("s")
    found = found.with_columns(
        best=pl.min_horizontal(pl.lit(_FLOAT_KIND).gather(f), pl.lit(_ANCH_KIND).gather(s)).fill_null(_NONE),
        bits=pl.lit(_FLOAT_BITS).gather(f).fill_null(0) | pl.lit(_ANCH_BITS).gather(s).fill_null(0) | pl.lit(_UNSCREENED, pl.UInt32),
        many=(l.list.len() > 1).fill_null(False),
    )
    many = found.get_column("many")
    if many.any():  # several floating texts: all of them count
        part = pl.DataFrame({"l": found.get_column("l").filter(many), "best": found.get_column("best").filter(many), "bits": found.get_column("bits").filter(many)})
        texts = [l.list.get(i, null_on_oob=True).cast(_FLOAT_ENUM, strict=False).to_physical() for i in range(1, part.get_column("l").list.len().max())]
        fixed = part.select(
            best=pl.min_horizontal(pl.col("best"), *(pl.lit(_FLOAT_KIND).gather(t) for t in texts)),
            bits=pl.reduce(lambda x, y: x | y, [pl.col("bits"), *(pl.lit(_FLOAT_BITS).gather(t).fill_null(0) for t in texts)]),
        )
        at = many.arg_true()
        found = found.with_columns(best=found.get_column("best").scatter(at, fixed.get_column("best")), bits=found.get_column("bits").scatter(at, fixed.get_column("bits")))
    best = found.get_column("best")
    # screened kinds below the decided one: their regexes, on the messages screened for them
    pending = found.select(pl.col("bits") & pl.lit(_BELOW).gather(pl.col("best"))).to_series()
    todo = pending != 0
    if todo.any():
        part = pl.DataFrame({"m": msg.filter(todo), "best": best.filter(todo), "p": pending.filter(todo)})
        present = part.select(pl.col("p").bitwise_or()).item()
        tests = [pl.when((pl.col("p") & (1 << k) != 0) & _confirm(_CONFIRM[k])).then(pl.lit(k, pl.UInt8)) for k in range(len(KINDS)) if present >> k & 1]
        best = best.scatter(todo.arg_true(), part.select(pl.min_horizontal(pl.col("best"), *tests)).to_series())
    codes = best.zip_with(best != _NONE, pl.Series([_OTHER], dtype=pl.UInt8).new_from_index(0, best.len())).alias("kind")
    return codes, (found.get_column("bits") // (1 << min(_MARKERS.values()))).cast(pl.UInt8).alias("marks")


def kind_codes(msg: pl.Series) -> pl.Series:
    """Each message's kind as a code (a position in KIND_NAMES, UInt8), the same as
    `kind_expr`: first match in KINDS order wins, `other` when none (or the message is null)."""
    return _kinds(msg)[0]
