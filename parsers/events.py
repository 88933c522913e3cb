"""Every line that is not a batch line or an access line: what kind it is, and its numbers.

Kinds are decided by content (SGLang's format has no level field, so a warning looks like an
info line).  Multi-line records (tracebacks) are grouped here too, and `event_rows` turns
event lines into one row per record.

Cost: only ~5 % of a log's lines are events, so this must stay cheap per call as well as per
row.  Kinds are computed only where a record starts (`kind_codes`, a cascade that runs each
regex on the rows no earlier kind has claimed), records are contiguous runs of rows (shifts
and forward fills, no group_by except to join a traceback's lines), and the numbers are
extracted only from the rows of the kinds that carry them.
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


def _alternatives(rx: str) -> list[str]:
    """`rx` cut at its top-level `|` (not inside a group or a class, not escaped).

    Matching `rx` anywhere is matching any of the pieces anywhere.  Inline flags (`(?i)`)
    would reach across the cut, so they are refused."""
    if re.search(r"\(\?(?!:|P<)", rx):
        raise ValueError(f"inline flags are not supported in a kind's regex: {rx!r}")
    parts, depth, start, in_class, i = [], 0, 0, False, 0
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1 + rx.startswith("^", i + 1)  # `[^` then a leading `]` is a literal
            if rx.startswith("]", i):
                i += 1
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(rx[start:i])
            start = i + 1
        i += 1
    parts.append(rx[start:])
    if "|".join(parts) != rx or depth or in_class:
        raise ValueError(f"cannot cut {rx!r} at its top-level alternatives")
    return parts


_META = set(".^$*+?()[]{}|\\")


def _group_end(rx: str, i: int) -> int:
    """Index of the `)` closing the group that opens at `rx[i]`."""
    depth, in_class = 0, False
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
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


def _spell(alt: str) -> tuple[str, list[str] | None]:
    """(literal prefix, every text `alt` can match if that is a short list of literals).

    `alt` is read as characters (escaped punctuation allowed) and groups of literal
    alternatives, a group maybe optional (`(draft )?`); the prefix stops at anything else (a
    character under a quantifier is not part of it)."""
    texts, prefix, fixed, i = [""], "", True, 0
    while i < len(alt):
        c = alt[i]
        if c == "(":
            j = _group_end(alt, i)
            inner = alt[i + 1 : j]
            inner = inner[2:] if inner.startswith("?:") else inner
            options = None if inner.startswith("?") else [_literal(x) for x in _alternatives(inner)]
            optional = alt[j + 1 : j + 2] == "?"
            if options is None or None in options or alt[j + 1 : j + 2] in ("*", "+", "{") or len(texts) * len(options) > 16:
                return prefix, None
            options = options + [""] if optional else options
            texts = [t + o for t in texts for o in options]
            fixed = False
            i = j + 1 + optional
            continue
        if c == "\\" and i + 1 < len(alt) and not alt[i + 1].isalnum():
            ch, step = alt[i + 1], 2
        elif c in _META:
            return prefix, None
        else:
            ch, step = c, 1
        if alt[i + step : i + step + 1] in ("?", "*", "+", "{"):
            return prefix, None
        texts = [t + ch for t in texts]
        prefix = prefix + ch if fixed else prefix
        i += step
    return prefix, texts


def _can_overlap(a: str, b: str) -> bool:
    """Can an occurrence of `b` start strictly inside an occurrence of `a`?"""
    return any(b.startswith(a[d:]) or a[d:].startswith(b) for d in range(1, len(a)))


# How kinds are found cheaply: each kind's regex is cut into its alternatives, and most are
# checked without a regex of their own.  Compiling a regex costs 20-200 µs and polars keeps only
# ~32 per thread, shared by all of a feed's steps, so every regex used on every call counts; so
# does every polars call (~20 µs).  Two passes over all messages:
#  - floating literals (`is deprecated`): found at once by `str.extract_all` of their union;
#  - anchored alternatives that start with 4+ literal characters (`^Cache (flushed
#    successfully|not flushed)`, `^WARNING\b`): the first four characters of a message pick
#    its candidate starts, then `starts_with`; a start that is the whole alternative decides;
# then the regexes left (alternatives that are not just literals, e.g. `^\S*(Error|Exception)
# \b[:(]`, `\d+%\|`, `^WARNING\b`) run together, only on the messages a lower kind has not
# already claimed (and a screened one only when some message passed its screen).
_LITERALS: dict[str, int] = {}  # floating literal → the first kind it belongs to
_LITERAL_RX: list[str] = []  # their regexes, in KINDS order
_STARTS: dict[str, list[int]] = {}  # anchored literal start → kinds of the alternatives it decides
_SCREENED: dict[str, list[tuple[int, str]]] = {}  # literal start → (kind, regex) it screens for
_UNSCREENED: list[tuple[int, str]] = []  # (kind, regex) tried on every message not yet claimed
for _k, (_, _rx) in enumerate(KINDS):
    for _alt in _alternatives(_rx):
        if _alt.startswith("^"):
            _prefix, _texts = _spell(_alt[1:])
            if _texts is not None and min(map(len, _texts)) >= 4:
                for _t in _texts:
                    _STARTS.setdefault(_t, []).append(_k)
            elif len(_prefix) >= 4:
                _SCREENED.setdefault(_prefix, []).append((_k, _alt))
            else:
                _UNSCREENED.append((_k, _alt))
        elif _literal(_alt):
            _LITERALS.setdefault(_literal(_alt), _k)
            _LITERAL_RX.append(_alt)
        else:
            _UNSCREENED.append((_k, _alt))
# `extract_all` reports non-overlapping matches, leftmost first; at one position the earliest
# alternative (the lowest kind).  So every literal that occurs is reported (or one of a lower
# kind at the same place) only if no literal can start inside another's occurrence.
assert not any(_can_overlap(a, b) for a in _LITERALS for b in _LITERALS), "floating literals overlap"
_LITERALS_RX = "|".join(_LITERAL_RX)
_LITERAL_ENUM = pl.Enum(list(_LITERALS))
_LITERAL_KIND = pl.Series(list(_LITERALS.values()), dtype=pl.UInt8)
_NONE = 255  # no kind (yet)
# starts by their first four characters (`head`); the j-th start of each head is tried in pass j
_HEADS: dict[str, list[str]] = {}
for _t in [*_STARTS, *_SCREENED]:
    _HEADS.setdefault(_t[:4], []).append(_t)
_HEAD_ENUM = pl.Enum(list(_HEADS))
_HEAD_CODE = {head: i for i, head in enumerate(_HEADS)}
_PASSES = [
    (
        pl.Series([ts[j] if j < len(ts) else None for ts in _HEADS.values()], dtype=pl.String),
        # the kind a start decides (`_NONE`: none), the lowest kind it screens for
        pl.Series([min(_STARTS.get(ts[j], [_NONE])) if j < len(ts) else _NONE for ts in _HEADS.values()], dtype=pl.UInt8),
        pl.Series([min((k for k, _ in _SCREENED.get(ts[j], [])), default=_NONE) if j < len(ts) else _NONE for ts in _HEADS.values()], dtype=pl.UInt8),
    )
    for j in range(max(map(len, _HEADS.values())))
]
_UNSCREENED_LOW = min((k for k, _ in _UNSCREENED), default=_NONE)


def kind_codes(msg: pl.Series) -> pl.Series:
    """Each message's kind as a code (a position in KIND_NAMES, UInt8), the same as
    `kind_expr`: first match in KINDS order wins, `other` when none (or the message is null).

    A message's kind is the lowest kind with an alternative that matches (see above)."""
    if msg.len() == 0:
        return pl.Series("kind", [], dtype=pl.UInt8)
    m, h, l = pl.col("m"), pl.col("h"), pl.col("l")
    df = msg.to_frame("m").with_columns(
        l=m.str.extract_all(_LITERALS_RX),
        h=m.str.slice(0, 4).cast(_HEAD_ENUM, strict=False).to_physical(),
    )
    hits = [m.str.starts_with(pl.lit(start).gather(h)).fill_null(False) for start, _, _ in _PASSES]
    decided = pl.min_horizontal([pl.when(hit).then(pl.lit(kind).gather(h)) for hit, (_, kind, _) in zip(hits, _PASSES)])
    screened = pl.min_horizontal([pl.when(hit).then(pl.lit(low).gather(h)) for hit, (_, _, low) in zip(hits, _PASSES)])
    literal = pl.lit(_LITERAL_KIND).gather(l.list.first().cast(_LITERAL_ENUM, strict=False).to_physical())
    df = df.with_columns(
        best=pl.min_horizontal(literal, decided).fill_null(_NONE),
        screened=screened.fill_null(_NONE),
        many=(l.list.len() > 1).fill_null(False),
    )
    best = df.get_column("best")
    many = df.get_column("many")
    if many.any():  # several literals (often of one kind): their lowest kind
        low = df.filter(many).select(
            pl.min_horizontal(l.list.eval(pl.element().replace_strict(_LITERALS, return_dtype=pl.UInt8)).list.min(), decided)
        )
        best = best.scatter(many.arg_true(), low.to_series())
    # the regexes left, on the messages they may still claim (a screened one only if screened)
    screened = df.get_column("screened")
    open_ = screened < best
    tests = list(_UNSCREENED)
    if open_.any():
        heads = set(df.get_column("h").filter(open_).unique().to_list())
        tests += [t for start, ts in _SCREENED.items() if _HEAD_CODE[start[:4]] in heads for t in ts]
    tests.sort(key=lambda t: t[0])
    if tests:
        open_ = open_ | (best > tests[0][0])
    if tests and open_.any():
        b = pl.col("best")
        expr = b
        for kind, rx in reversed(tests):
            expr = pl.when((b > kind) & m.str.contains(rx).fill_null(False)).then(pl.lit(kind, pl.UInt8)).otherwise(expr)
        part = pl.DataFrame({"m": msg.filter(open_), "best": best.filter(open_)}).select(expr)
        best = best.scatter(open_.arg_true(), part.to_series())
    return best.zip_with(best != _NONE, pl.Series([_OTHER], dtype=pl.UInt8).new_from_index(0, best.len())).alias("kind")


def _num(msg: pl.Expr, rx: str, dtype) -> pl.Expr:
    return msg.str.extract(rx).cast(dtype, strict=False)


#: numbers only some kinds carry (null in every other row), then numbers any row may carry
_KIND_NUMBERS: dict[str, dict[str, tuple[str, pl.DataType]]] = {
    "retraction": {
        "retracted_reqs": (r"#retracted_reqs: (\d+)", pl.Int64),
        "new_tokens_gained": (r"#new_tokens_gained: (\d+)", pl.Int64),
        "new_token_ratio_before": (r"#new_token_ratio: ([\d.]+)", pl.Float64),
        "new_token_ratio_after": (r"#new_token_ratio: [\d.]+ -> ([\d.]+)", pl.Float64),
    },
    "max_total_num_tokens": {
        "max_total_num_tokens": (r"^max_total_num_tokens=(\d+)", pl.Int64),
        "max_running_requests": (r"max_running_requests=(\d+)", pl.Int64),
        "chunked_prefill_size": (r"chunked_prefill_size=(-?\d+)", pl.Int64),
        "max_prefill_tokens": (r"max_prefill_tokens=(\d+)", pl.Int64),
        "context_len": (r"context_len=(\d+)", pl.Int64),
    },
    "kv_cache": {"kv_tokens": (r"#tokens: (\d+)", pl.Int64)},
}
_ANY_NUMBERS: dict[str, tuple[str, pl.DataType]] = {
    "elapsed_s": (r"(?:elapsed[=:] ?|Time elapsed: )([\d.]+) ?s", pl.Float64),
    "avail_mem_gb": (r"avail(?:able_gpu)?[_ ]mem=([\d.]+) ?GB", pl.Float64),
}


def event_numbers(df: pl.DataFrame) -> pl.DataFrame:
    """Typed numbers for the kinds that carry them (null elsewhere): each kind's regexes run on
    that kind's rows only."""
    msg, kind, n = df.get_column("message"), df.get_column("kind"), df.height
    cols: list[pl.Series] = []
    for k, spec in _KIND_NUMBERS.items():
        mine = kind == k
        nulls = [pl.Series(name, [None], dtype=dtype).new_from_index(0, n) for name, (_, dtype) in spec.items()]
        if mine.any():
            pos = mine.arg_true()
            part = msg.filter(mine).to_frame("m").select(_num(pl.col("m"), rx, dtype).alias(name) for name, (rx, dtype) in spec.items())
            nulls = [s.scatter(pos, part.get_column(s.name)) for s in nulls]
        cols += nulls
    cols += df.select(_num(pl.col("message"), rx, dtype).alias(name) for name, (rx, dtype) in _ANY_NUMBERS.items()).get_columns()
    return df.with_columns(cols)


def event_rows(ev: pl.DataFrame) -> pl.DataFrame:
    """Event and blank lines, in line order (with `_rec`, `_cont`, `_head_ev` computed over all
    lines) → one row per record.

    `_rec` (from the caller) numbers runs of rows: a line plus the continuation lines after it.
    Those continuation lines join its record when its head is an error (or a blank line, after
    which traceback text groups on its own).  Continuation lines right after a batch or access
    line are orphans: they group by themselves, a new group at each `Traceback (most recent
    call last):`, so a traceback printed after a Decode line is still one record.  Records are
    runs of consecutive rows, so "first of the run" is a forward fill from the run's first row
    (much cheaper than window expressions over thousands of groups)."""
    if ev.height == 0:
        return pl.DataFrame()
    rec, cont, n = pl.col("_rec"), pl.col("_cont"), ev.height
    rec_start = (rec != rec.shift(1)).fill_null(True)
    # a kind matters only where a record may start: every line that is not a continuation, and
    # the first row of each `_rec` run (its kind decides whether continuation lines attach)
    need = ev.select(~cont | rec_start).to_series()
    codes = pl.Series("_kc", [None], dtype=pl.UInt8).new_from_index(0, n)
    if need.any():
        codes = codes.scatter(need.arg_true(), kind_codes(ev.get_column("msg").filter(need)))
    head_error = pl.when(rec_start).then(pl.col("_kc") == _ERROR).forward_fill()
    cand_first = pl.when(rec_start).then(cont).forward_fill()
    attached = pl.col("_head_ev") & (head_error | cand_first)
    orphan = cont & ~pl.col("_head_ev")
    prev_orphan = pl.when(rec_start).then(pl.lit(False)).otherwise(orphan.shift(1)).fill_null(False)
    first_orphan = orphan & ~prev_orphan
    tb_start = pl.col("line").str.starts_with("Traceback (most recent call last)")
    start = (~cont) | (~orphan & ~attached) | first_orphan | (orphan & tb_start)
    rid = (start | rec_start).cast(pl.Int64).cum_sum()
    work = ev.with_columns(_kc=codes).with_columns(_rid=rid)
    # blank lines end records but make no rows: the first and last *event* row of each record
    is_event = pl.col("family") == "event"
    ev_rid = pl.when(is_event).then(pl.col("_rid"))
    first = is_event & (pl.col("_rid") != ev_rid.forward_fill().shift(1)).fill_null(True)
    last = is_event & (pl.col("_rid") != ev_rid.backward_fill().shift(-1)).fill_null(True)
    marks = work.select(_first=first, _last=last, _multi=is_event & ~(first & last))
    first, last, multi = marks.get_columns()
    heads = work.filter(first)
    line_end = work.get_column("line_no").filter(last)
    msg = heads.get_column("msg")
    message = msg
    if multi.any():
        # a record of several lines: the first line's message, then the other lines whole
        text = pl.when(pl.col("_first")).then(pl.col("msg")).otherwise(pl.col("line"))
        joined = (
            work.hstack([first]).filter(multi).select("_rid", _text=text)
            .group_by("_rid", maintain_order=True).agg(pl.col("_text").str.join("\n"))
        )
        message = msg.clone().scatter((first & ~last).filter(first).arg_true(), joined.get_column("_text"))
    codes = heads.get_column("_kc")
    missing = codes.is_null()
    if missing.any():  # a continuation line that starts a record (its own message decides)
        codes = codes.scatter(missing.arg_true(), kind_codes(msg.filter(missing)))
    # a record that starts with a bare continuation line (after a blank, say) is traceback text
    tb = ((codes == _OTHER) & heads.get_column("_cont")).arg_true()
    if tb.len():
        codes = codes.scatter(tb, _TRACEBACK)
    out = heads.with_columns(kind=pl.Series(KIND_NAMES).gather(codes)).with_columns(line_end=line_end, message=message)
    out = event_numbers(out)
    return out.drop([c for c in out.columns if c.startswith("_")] + ["line", "msg", "family", "byte_off"], strict=False)
