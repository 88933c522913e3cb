"""Every line that is not a batch line or an access line: one row per record, with its kind
(`event_kinds`) and the numbers some kinds carry.

Multi-line records (tracebacks) are grouped here: records are contiguous runs of rows (shifts
and forward fills, a group_by only to join a traceback's lines), and numbers are read only from
the rows that can hold them.  Cost: only ~5 % of a log's lines are events, so this must stay
cheap per call (each polars call costs ~20 µs) as well as per row (reading a message costs more
than testing it).
"""

from __future__ import annotations

import polars as pl

from .event_kinds import _ERROR, _MARKERS, _NONE, _OTHER, _TRACEBACK, KIND_NAMES, _kinds
# KINDS, kind_expr and kind_codes are part of this module's interface too
from .event_kinds import KINDS, kind_codes, kind_expr  # noqa: F401


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
    # each of these regexes needs a text in _MARKERS ("elapsed", "mem="), in that order
    "elapsed_s": (r"(?:elapsed[=:] ?|Time elapsed: )([\d.]+) ?s", pl.Float64),
    "avail_mem_gb": (r"avail(?:able_gpu)?[_ ]mem=([\d.]+) ?GB", pl.Float64),
}
# SGLang's retraction line, its four numbers with one regex, read from the first `#` on (which
# must be `#retracted_reqs: `): with no `#` before them (and, without #new_tokens_gained, none
# after either) each number's own regex finds the same text.  Other lines fall back to those.
_RETRACTION = (
    r"^#retracted_reqs: (?P<r>\d+), (?:#new_tokens_gained: (?P<g>\d+), #new_token_ratio: (?P<b1>[\d.]+) -> (?P<a1>[\d.]+)"
    r"|#new_token_ratio: (?P<b2>[\d.]+) -> (?P<a2>[\d.]+)[^#]*$)"
)


def _retraction_numbers(msg: pl.Series) -> pl.DataFrame:
    spec = _KIND_NUMBERS["retraction"]
    m, g = pl.col("m"), pl.col("g")
    at = m.str.find("#retracted_reqs: ", literal=True)
    found = msg.to_frame("m").select(
        # the first `#` starts `#retracted_reqs: ` (a byte offset; the slice counts characters)
        g=pl.when((m.str.find("#", literal=True) == at) & (m.str.len_bytes() == m.str.len_chars())).then(m.str.slice(at).str.extract_groups(_RETRACTION))
    )
    got = found.select(
        g.struct.field("r").cast(pl.Int64, strict=False).alias("retracted_reqs"),
        g.struct.field("g").cast(pl.Int64, strict=False).alias("new_tokens_gained"),
        pl.coalesce(g.struct.field("b1"), g.struct.field("b2")).cast(pl.Float64, strict=False).alias("new_token_ratio_before"),
        pl.coalesce(g.struct.field("a1"), g.struct.field("a2")).cast(pl.Float64, strict=False).alias("new_token_ratio_after"),
        g.struct.field("r").is_null().alias("miss"),
    )
    miss = got.get_column("miss")
    if miss.any():
        pos = miss.arg_true()
        part = msg.filter(miss).to_frame("m").select(_num(m, rx, dtype).alias(name) for name, (rx, dtype) in spec.items())
        got = got.with_columns(got.get_column(c).scatter(pos, part.get_column(c)) for c in spec)
    return got


def _numbers(message: pl.Series, codes: pl.Series, marks: pl.Series) -> list[pl.Series]:
    """Typed numbers (null where absent): a kind's numbers on its rows only, the others on the
    rows `marks` says may hold them (bit i: the i-th of _ANY_NUMBERS)."""
    n, cols = message.len(), []
    for kind, spec in _KIND_NUMBERS.items():
        nulls = [pl.Series(name, [None], dtype=dtype).new_from_index(0, n) for name, (_, dtype) in spec.items()]
        mine = codes == KIND_NAMES.index(kind)
        if mine.any():
            pos, part = mine.arg_true(), message.filter(mine)
            if kind == "retraction":
                values = _retraction_numbers(part)
            else:
                values = part.to_frame("m").select(_num(pl.col("m"), rx, dtype).alias(name) for name, (rx, dtype) in spec.items())
            nulls = [s.scatter(pos, values.get_column(s.name)) for s in nulls]
        cols += nulls
    for i, (name, (rx, dtype)) in enumerate(_ANY_NUMBERS.items()):
        col = pl.Series(name, [None], dtype=dtype).new_from_index(0, n)
        maybe = (marks // (1 << i)) % 2 == 1
        if maybe.any():
            col = col.scatter(maybe.arg_true(), message.filter(maybe).to_frame("m").select(_num(pl.col("m"), rx, dtype)).to_series())
        cols.append(col)
    return cols


def event_numbers(df: pl.DataFrame) -> pl.DataFrame:
    """Typed numbers for the kinds that carry them (null elsewhere), from `kind` and `message`."""
    codes = df.get_column("kind").replace_strict(KIND_NAMES, list(range(len(KIND_NAMES))), default=_NONE, return_dtype=pl.UInt8)
    return df.with_columns(_numbers(df.get_column("message"), codes, pl.Series([3], dtype=pl.UInt8).new_from_index(0, df.height)))


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
    rs, orphan, need = ev.select(rec_start.alias("rs"), (cont & ~pl.col("_head_ev")).alias("o"), (~cont | rec_start).alias("n")).get_columns()
    codes = pl.Series("_kc", [None], dtype=pl.UInt8).new_from_index(0, n)
    marks = pl.Series("_km", [None], dtype=pl.UInt8).new_from_index(0, n)
    if need.any():
        at = need.arg_true()
        kinds, found = _kinds(ev.get_column("msg").filter(need))
        codes, marks = codes.scatter(at, kinds), marks.scatter(at, found)
    rec_start, orphan = pl.lit(rs), pl.lit(orphan)
    head_error = pl.when(rec_start).then(pl.lit(codes) == _ERROR).forward_fill()
    cand_first = pl.when(rec_start).then(cont).forward_fill()
    attached = pl.col("_head_ev") & (head_error | cand_first)
    prev_orphan = pl.when(rec_start).then(pl.lit(False)).otherwise(orphan.shift(1)).fill_null(False)
    first_orphan = orphan & ~prev_orphan
    tb_start = pl.col("line").str.starts_with("Traceback (most recent call last)")
    start = (~cont) | (~orphan & ~attached) | first_orphan | (orphan & tb_start)
    rid = ev.select((start | rec_start).cast(pl.Int64).cum_sum().alias("_rid")).to_series()
    # blank lines end records but make no rows: the first and last *event* row of each record
    is_event = pl.col("family") == "event"
    r = pl.col("_rid")
    ev_rid = pl.when(is_event).then(r)
    first = is_event & (r != ev_rid.forward_fill().shift(1)).fill_null(True)
    last = is_event & (r != ev_rid.backward_fill().shift(-1)).fill_null(True)
    fam = pl.DataFrame({"family": ev.get_column("family"), "_rid": rid})
    is_first, is_last, in_several = fam.select(first.alias("f"), last.alias("l"), (is_event & ~(first & last)).alias("s")).get_columns()
    heads = ev.filter(is_first)
    line_end = ev.get_column("line_no").filter(is_last)
    msg = heads.get_column("msg")
    message = msg
    codes, marks = codes.filter(is_first), marks.filter(is_first)
    if in_several.any():
        # a record of several lines: the first line's message, then the other lines whole
        text = ev.get_column("msg").filter(in_several).zip_with(is_first.filter(in_several), ev.get_column("line").filter(in_several))
        joined = pl.DataFrame({"r": rid.filter(in_several), "t": text}).group_by("r", maintain_order=True).agg(pl.col("t").str.join("\n"))
        several = (is_first & ~is_last).filter(is_first).arg_true()
        message = msg.clone().scatter(several, joined.get_column("t"))
    missing = codes.is_null()
    if missing.any():  # a continuation line that starts a record (its own message decides)
        at = missing.arg_true()
        kinds, found = _kinds(msg.filter(missing))
        codes, marks = codes.scatter(at, kinds), marks.scatter(at, found)
    if in_several.any():  # numbers may be on any line of a record, and only the first was screened
        marks = marks.scatter(several, 0xFF)
    # a record that starts with a bare continuation line (after a blank, say) is traceback text
    tb = ((codes == _OTHER) & heads.get_column("_cont")).arg_true()
    if tb.len():
        codes = codes.scatter(tb, _TRACEBACK)
    added = [pl.Series(KIND_NAMES).gather(codes).alias("kind"), line_end.alias("line_end"), message.alias("message"), *_numbers(message, codes, marks)]
    dropped = [c for c in heads.columns if c.startswith("_")] + ["line", "msg", "family", "byte_off"]
    if any(s.name in heads.columns for s in added):  # (not from the pipeline) replaced in place
        out = heads.with_columns(added[0]).with_columns(added[1:3]).with_columns(added[3:])
        return out.drop(dropped, strict=False)
    return heads.drop(dropped, strict=False).hstack(added)
