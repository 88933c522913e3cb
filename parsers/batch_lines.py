"""`Decode batch` / `Prefill batch` lines of every SGLang release, by one key/value grammar.

How it stays fast *and* tolerant: a batch line is a header, then `key: value` pairs joined by
`, `.  Each line's *shape* (its key sequence plus the header's punctuation) is computed with
one vectorized regex replace; a log holds a handful of shapes.  For each shape a plan is
built once in Python (which key sits in which slot, what column and type it maps to, which
release range the shape belongs to), and all lines of that shape are cut with one
`split_exact` and typed with casts.  No regex per field, no loop per line; a key never seen
before is kept in `extra` and reported, never dropped.

Legacy forms are normalised into the same grammar first: v0.1 `new fill batch. #seq: 1. …`
uses `. ` separators; v0.4.9's hybrid pool prints `#token: full=N, swa=M, token usage:
full=F, swa=G` (embedded `, `), which becomes the later `#full token: N, #swa token: M, …`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import polars as pl

from loglens.schema import DECODE, DT, PREFILL
from .keys import column_name, graph_device
from .variants import decode_variant, prefill_variant

_SWA_PAIR = (
    r"#token: full=(\d+), swa=(\d+), token usage: full=([\d.]+), swa=([\d.]+)",
    "#full token: $1, #swa token: $2, full token usage: $3, swa token usage: $4",
)
_SWA_USAGE_ONLY = (r"token usage: full=([\d.]+), swa=([\d.]+)", "full token usage: $1, swa token usage: $2")

#: which keys a row cannot do without; a line missing them is a reject
REQUIRED = {"decode": ["running_req"], "prefill": ["new_seq", "new_token"]}


@dataclass
class Plan:
    """How to cut and type every line of one shape."""

    ok: bool
    reason: str = ""
    keys: list[str] = field(default_factory=list)
    columns: list[str | None] = field(default_factory=list)  # None → extra
    variant: str | None = None
    unknown: list[str] = field(default_factory=list)


_FAST = {"decode": ("Decode batch, ", "Decode batch. "), "prefill": ("Prefill batch, ", "Prefill batch. ")}


def _header(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Add `_iter`, `_sep`, `_mixed` (mixed-chunk running-req) and `_body` from `msg`.

    The common headers (`Decode batch, ` / `Decode batch. `) are cut by position; only the rare
    forms (`[n]` counters, legacy and mixed headers) pay for a regex."""
    msg = pl.col("msg")
    a, b = _FAST[table]
    fast = msg.str.contains(f"^(?:{re.escape(a)}|{re.escape(b)})")
    df = df.with_columns(_fast=fast)
    quick = df.filter(pl.col("_fast")).with_columns(
        _iter=pl.lit(None, pl.String), _sep=msg.str.slice(len(a) - 2, 1), _mixed=pl.lit(None, pl.String), _body=msg.str.slice(len(a))
    )
    rest = df.filter(~pl.col("_fast"))
    if rest.height == 0:
        return quick
    if table == "decode":
        g = msg.str.extract_groups(r"^(?:Decode batch(?: \[(\d+)\])?([.,])? ?)?(.*)$")
        rest = rest.with_columns(_iter=g.struct.field("1"), _sep=g.struct.field("2"), _mixed=pl.lit(None, pl.String), _body=g.struct.field("3"))
    else:
        rx = r"^(?:new fill batch|Prefill? batch)(?:\(mixed #running-req: (\d+)\))?(?: \[(\d+)\])?([.,])? ?(.*)$"
        g = msg.str.extract_groups(rx)
        rest = rest.with_columns(_iter=g.struct.field("2"), _sep=g.struct.field("3"), _mixed=g.struct.field("1"), _body=g.struct.field("4"))
    return pl.concat([quick, rest], how="vertical_relaxed")


def _plan(table: str, shape: str) -> Plan:
    """Shape = `<sep>|<trail>|<key>:, <key>:, ...` → a Plan (or a reason to reject)."""
    sep, trail, sig = shape.split("|", 2)
    schema = DECODE if table == "decode" else PREFILL
    if sig == "":
        return Plan(False, "no key: value fields (truncated?)")
    pieces = sig.split(", ")
    keys, columns, unknown = [], [], []
    for p in pieces:
        if not p.endswith(":") or p == ":":
            frag = p[:40]
            return Plan(False, f"unparseable fragment {frag!r} (truncated or damaged line)")
        key = p[:-1]
        dev = graph_device(key)
        col = "cuda_graph" if dev else column_name(key)
        if col in ("ts", "source", "line_no", "file_id", "variant", "extra", "graph_device"):
            col = None
        if col is not None and col not in schema:
            col = None
        if col is None:
            unknown.append(key)
        if col is not None and col in columns:
            return Plan(False, f"key {key!r} appears twice")
        keys.append(key)
        columns.append(col)
    missing = [c for c in REQUIRED[table] if c not in columns]
    if missing:
        return Plan(False, f"missing required field(s): {', '.join(missing)}")
    var = (decode_variant if table == "decode" else prefill_variant)(sep, trail, keys)
    return Plan(True, keys=keys, columns=columns, variant=var, unknown=unknown)


def _typed(value: pl.Expr, col: str, schema: dict) -> pl.Expr:
    dtype = schema[col]
    if dtype == pl.Boolean:
        return pl.when(value == "True").then(True).when(value == "False").then(False).otherwise(None)
    if dtype == DT:
        return value.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False).cast(DT)
    if dtype in (pl.Int64, pl.Int32):
        return value.cast(pl.Int64, strict=False)
    if dtype == pl.Float64:
        return value.str.strip_suffix("%").cast(pl.Float64, strict=False)
    return value


def _extra_json(values: list[tuple[str, pl.Expr]]) -> pl.Expr:
    """A JSON object `{"key": "value", ...}` built by concatenation (keys known per shape)."""
    parts: list[pl.Expr] = [pl.lit("{")]
    for i, (key, v) in enumerate(values):
        esc = v.str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True)
        parts += [pl.lit(("" if i == 0 else ", ") + json.dumps(column_name(key)) + ': "'), esc, pl.lit('"')]
    parts.append(pl.lit("}"))
    return pl.concat_str(parts)


#: plans by shape, shared across batches (a log has a handful of shapes; most batches reuse them)
_PLANS: dict[tuple[str, str], Plan] = {}
#: how many known shapes are tried by literal match before falling back to computing shapes
FAST_SHAPES = 3
#: lines each shape matched in real input, to try the commonest shapes first
_HITS: dict[tuple[str, str], int] = {}


def _shape_expr() -> pl.Expr:
    return pl.concat_str(
        [
            pl.col("_sep").fill_null(""),
            pl.lit("|"),
            pl.when(pl.col("_trail")).then(pl.lit("t")).otherwise(pl.lit("")),
            pl.lit("|"),
            pl.col("_body").str.replace_all(r": [^,]*", ":"),
        ]
    )


def _fits(plan_shape: str, plan: Plan) -> pl.Expr:
    """Does a line have exactly this plan's shape?  One anchored regex over the body (cheaper
    in polars than a `starts_with` per field), plus the header's punctuation."""
    sep, trail, _ = plan_shape.split("|", 2)
    body_rx = "^" + ", ".join(re.escape(k) + ": [^,]*" for k in plan.keys) + "$"
    conds = [pl.col("_sep").fill_null("") == sep, pl.col("_trail") == (trail == "t"), pl.col("_body").str.contains(body_rx)]
    return pl.all_horizontal(conds).fill_null(False)


def _apply(part: pl.DataFrame, table: str, plan: Plan, schema: dict) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    n = len(plan.keys)
    fields = pl.col("_body").str.split_exact(", ", n - 1)
    raw = {f"_v{i}": fields.struct.field(f"field_{i}").str.slice(len(k) + 2) for i, k in enumerate(plan.keys)}
    return _typed_rows(part.with_columns(**raw), table, plan, schema)


def _typed_rows(out: pl.DataFrame, table: str, plan: Plan, schema: dict) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Rows with the raw value of key i in `_v{i}` → typed columns (and the rows whose values
    do not parse, as rejects)."""
    typed, extras, checks = [], [], []
    for i, (k, col) in enumerate(zip(plan.keys, plan.columns)):
        v = pl.col(f"_v{i}")
        if col is None:
            extras.append((k, v))
            continue
        typed.append(_typed(v, col, schema).alias(col))
        if col == "cuda_graph":
            typed.append(pl.lit(graph_device(k)).alias("graph_device"))
    out = out.with_columns(typed)
    if extras:
        out = out.with_columns(extra=_extra_json(extras))
    for i, (k, col) in enumerate(zip(plan.keys, plan.columns)):
        if col is not None:
            checks.append((k, pl.col(col).is_null() & pl.col(f"_v{i}").is_not_null()))
    bad = None
    if checks and out.select(pl.any_horizontal([c for _, c in checks]).any()).item():
        reason = pl.coalesce([pl.when(c).then(pl.lit(f"bad value for {k!r}")) for k, c in checks])
        out = out.with_columns(_bad=reason)
        bad = out.filter(pl.col("_bad").is_not_null()).select("line_no", pl.col("line").alias("raw"), pl.col("_bad").alias("reason"))
        out = out.filter(pl.col("_bad").is_null())
    iter_, mixed = (pl.col("_iter"), pl.col("_mixed")) if "_iter" in out.columns else (pl.lit(None, pl.String),) * 2
    extra_cols = {"variant": pl.lit(plan.variant), "iter": iter_.cast(pl.Int64)}
    if table == "prefill":
        extra_cols["mixed"] = mixed.is_not_null()
        if "running_req" not in plan.columns:
            extra_cols["running_req"] = mixed.cast(pl.Int64)
    return out.with_columns(**extra_cols), bad


def parse_batch_lines(df: pl.DataFrame, table: str) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """Rows of one family (`line_no`, `line`, `msg`, prefix columns) → (typed rows, rejects, unknown keys).

    Rejects carry `line_no`, `raw`, `reason`."""
    schema = DECODE if table == "decode" else PREFILL
    rows, rejects, unknown = [], [], {}
    df = _split_known_shapes(df, table, schema, rows, rejects, unknown)
    if df.height:
        _tolerant(df, table, schema, rows, rejects, unknown)
    good = pl.concat(rows, how="diagonal_relaxed") if rows else pl.DataFrame()
    bad = (
        pl.concat(rejects, how="vertical_relaxed")
        if rejects
        else pl.DataFrame(schema={"line_no": pl.Int64, "raw": pl.String, "reason": pl.String})
    )
    if good.height:
        good = good.drop([c for c in good.columns if c.startswith("_")] + ["line", "msg", "family", "byte_off"], strict=False)
    return good, bad, unknown


#: the header the split fast path accepts: `Decode batch, key: v, ...` or `Decode batch. key: v, ...`
_SPLIT_HEADER = {"decode": "Decode batch", "prefill": "Prefill batch"}


def _split_known_shapes(df: pl.DataFrame, table: str, schema: dict, rows: list, rejects: list, unknown: dict) -> pl.DataFrame:
    """The fast path: lines of the commonest known shapes with a plain header (`Decode batch, `
    or `Decode batch. `, with or without a trailing `, `).

    The message is cut once on `, `.  A line has a plan's shape when the header is where the
    plan says (a piece of its own, or glued to the first key after `. `), each piece starts
    with its `key: `, nothing follows the last key (or exactly one empty piece, for a trailing
    `, `), and no text value holds a `,`.  A value that fails to parse sends the line back.
    Such lines give exactly the rows the tolerant path gives; every other line is returned
    for it."""
    plans = [(k, _PLANS[k]) for k in sorted((k for k in _HITS if k[0] == table), key=lambda k: -_HITS[k])[:FAST_SHAPES]]
    plans = [(k, p) for k, p in plans if p.ok and k[1].split("|", 1)[0] in (",", ".")]
    if not plans or df.height == 0:
        return df
    n_max = max(len(p.keys) for _, p in plans)
    names = [f"_f{i}" for i in range(n_max + 3)]
    rest = df.with_columns(_f=pl.col("msg").str.split_exact(", ", n_max + 2).struct.rename_fields(names)).unnest("_f")
    header = _SPLIT_HEADER[table]
    back = []  # lines of a known shape with a value that does not parse: the tolerant path rejects them
    for key, plan in plans:
        n = len(plan.keys)
        sep, trail, _ = key[1].split("|", 2)
        trail = trail == "t"
        # piece holding key i, and where its value starts in that piece
        glued = header + ". " + plan.keys[0] + ": "
        at = [(i + (sep == ","), len(k) + 2) for i, k in enumerate(plan.keys)]
        if sep == ".":
            at[0] = (0, len(glued))
        values = {f"_v{i}": pl.col(f"_f{j}").str.slice(off) for i, (j, off) in enumerate(at)}
        last = at[-1][0]
        texts = [f"_v{i}" for i, c in enumerate(plan.columns) if c is None or schema[c] == pl.String]
        checks = [pl.col(f"_f{j}").str.starts_with(k + ": ") for (j, _), k in zip(at, plan.keys) if j > 0]
        checks.append(pl.col("_f0") == header if sep == "," else pl.col("_f0").str.starts_with(glued))
        if trail:
            checks += [pl.col(f"_f{last + 1}") == "", pl.col(f"_f{last + 2}").is_null()]
        else:
            checks += [pl.col(f"_f{last + 1}").is_null(), ~pl.col(f"_v{n - 1}").str.ends_with(" ")]
        # a `,` inside a text value: the tolerant path cuts differently (numbers with one fail to parse anyway)
        checks += [~pl.col(v).str.contains(",", literal=True) for v in texts]
        rest = rest.with_columns(**values).with_columns(_hit=pl.all_horizontal(checks).fill_null(False))
        hits = rest.select(pl.col("_hit").sum()).item()
        if hits == 0:
            continue
        part, rest = (rest, rest.clear()) if hits == rest.height else (rest.filter(pl.col("_hit")), rest.filter(~pl.col("_hit")))
        good, bad = _typed_rows(part, table, plan, schema)
        if bad is not None:
            back.append(part.filter(pl.col("line_no").is_in(bad.get_column("line_no").implode())))
        _HITS[key] += good.height
        rows.append(good)
        for k in plan.unknown:
            unknown[k] = unknown.get(k, 0) + good.height
        if rest.height == 0:
            break
    rest = pl.concat([rest, *back], how="diagonal_relaxed") if back else rest
    drop = [*names, "_hit", *(c for c in rest.columns if c.startswith("_v"))]
    return rest.drop(drop, strict=False).sort("line_no") if back else rest.drop(drop, strict=False)


def _tolerant(df: pl.DataFrame, table: str, schema: dict, rows: list, rejects: list, unknown: dict) -> None:
    """Any header and grammar: shapes computed per line, one plan per shape."""
    df = _header(df, table)
    # normalise legacy grammars into `key: value, key: value`
    b = pl.col("_body").str.strip_chars_end(" ")
    df = df.with_columns(_trail=b.str.ends_with(","), _body=b.str.strip_suffix(","))
    if table == "prefill":
        legacy = pl.col("msg").str.starts_with("new fill batch")
        if df.select(legacy.any()).item():
            df = df.with_columns(
                _body=pl.when(legacy)
                .then(pl.col("_body").str.replace_all(r"\. (#|tree_)", ", $1").str.strip_suffix("."))
                .otherwise(pl.col("_body"))
            )
    if df.select(pl.col("_body").str.contains("=", literal=True).any()).item():
        df = df.with_columns(_body=pl.col("_body").str.replace(*_SWA_PAIR).str.replace(*_SWA_USAGE_ONLY))
    rest = df
    # 1) shapes seen in earlier batches, commonest first: recognised without computing shapes
    # (only the few commonest: a log of many shapes is cheaper to partition by shape below)
    seen = sorted((k for k in _HITS if k[0] == table), key=lambda k: -_HITS[k])[:FAST_SHAPES]
    for key in seen:
        tab, shape = key
        plan = _PLANS[key]
        if not plan.ok or rest.height == 0:
            continue
        hit = rest.with_columns(_hit=_fits(shape, plan))
        part = hit.filter(pl.col("_hit"))
        if part.height == 0:
            continue
        rest = hit.filter(~pl.col("_hit")).drop("_hit")
        _HITS[key] += part.height
        good, bad = _apply(part.drop("_hit"), table, plan, schema)
        rows.append(good)
        if bad is not None:
            rejects.append(bad)
        for k in plan.unknown:
            unknown[k] = unknown.get(k, 0) + part.height
    # 2) the rest: compute each line's shape, plan each new shape once
    if rest.height:
        rest = rest.with_columns(_shape=_shape_expr())
        for (sh,), part in rest.partition_by("_shape", as_dict=True).items():
            plan = _PLANS.get((table, sh))
            if plan is None:
                plan = _plan(table, sh)
                if len(_PLANS) < 512:
                    _PLANS[(table, sh)] = plan
            if plan.ok and (table, sh) in _PLANS:
                _HITS[(table, sh)] = _HITS.get((table, sh), 0) + part.height
            if not plan.ok:
                rejects.append(part.select("line_no", pl.col("line").alias("raw"), pl.lit(plan.reason).alias("reason")))
                continue
            good, bad = _apply(part, table, plan, schema)
            rows.append(good)
            if bad is not None:
                rejects.append(bad)
            for k in plan.unknown:
                unknown[k] = unknown.get(k, 0) + part.height
