"""`Decode batch` / `Prefill batch` lines of every SGLang release, by one key/value grammar.

How it stays fast *and* tolerant: a batch line is a header, then `key: value` pairs joined by
`, `.  Each line's *shape* (its key sequence plus the header's punctuation) is computed with
one vectorized regex replace; a log holds a handful of shapes.  For each shape a plan is
built once in Python (which key sits in which slot, what column and type it maps to, which
release range the shape belongs to); the lines of all shapes are cut with one `split_exact`,
each slot typed with casts and routed to its column by the line's plan.  No regex per field, no loop per line; a key never seen
before is kept in `extra` and reported, never dropped.

Legacy forms are normalised into the same grammar first: v0.1 `new fill batch. #seq: 1. …`
uses `. ` separators; v0.4.9's hybrid pool prints `#token: full=N, swa=M, token usage:
full=F, swa=G` (embedded `, `), which becomes the later `#full token: N, #swa token: M, …`.
"""

from __future__ import annotations

import json
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
    fast = msg.str.starts_with(a) | msg.str.starts_with(b)
    df = df.with_columns(
        _iter=pl.lit(None, pl.String), _sep=msg.str.slice(len(a) - 2, 1), _mixed=pl.lit(None, pl.String), _body=msg.str.slice(len(a)), _fast=fast
    )
    idx = (~df.get_column("_fast")).arg_true()
    if idx.len() == 0:
        return df
    # the few other lines: regex on those rows only, written back in place
    rest = df.get_column("msg").gather(idx).to_frame()
    if table == "decode":
        g = pl.col("msg").str.extract_groups(r"^(?:Decode batch(?: \[(\d+)\])?([.,])? ?)?(.*)$")
        got = {"_iter": "1", "_sep": "2", "_body": "3"}
    else:
        rx = r"^(?:new fill batch|Prefill? batch)(?:\(mixed #running-req: (\d+)\))?(?: \[(\d+)\])?([.,])? ?(.*)$"
        g = pl.col("msg").str.extract_groups(rx)
        got = {"_iter": "2", "_sep": "3", "_mixed": "1", "_body": "4"}
    rest = rest.select(g.struct.rename_fields([str(i + 1) for i in range(len(got))]).alias("g")).unnest("g")
    return df.with_columns(df.get_column(c).scatter(idx, rest.get_column(f)) for c, f in got.items())


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
#: the fast path is taken only while the commonest shapes hold at least this share of the lines seen
SPLIT_SHARE = 0.8
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
    seen = sorted((k for k in _HITS if k[0] == table), key=lambda k: -_HITS[k])
    top = seen[:FAST_SHAPES]
    # each plan tried costs passes over the remaining rows: when the commonest shapes hold only
    # part of the lines (a log mixing releases), the one-pass tolerant path is cheaper for all
    if sum(_HITS[k] for k in top) < SPLIT_SHARE * sum(_HITS[k] for k in seen):
        return df
    plans = [(k, _PLANS[k]) for k in top]
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
    """Any header and grammar: shapes computed per line, a plan per shape, and all lines of
    ordinary plans cut and typed in one pass (`_apply_all`)."""
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
    df = df.with_columns(_shape=_shape_expr())
    counts = dict(df.group_by("_shape").len().iter_rows())
    plans: dict[str, Plan] = {}
    for sh, n in counts.items():
        plan = _PLANS.get((table, sh))
        if plan is None:
            plan = _plan(table, sh)
            if len(_PLANS) < 512:
                _PLANS[(table, sh)] = plan
        if plan.ok and (table, sh) in _PLANS:
            _HITS[(table, sh)] = _HITS.get((table, sh), 0) + n
        if plan.ok:
            for k in plan.unknown:
                unknown[k] = unknown.get(k, 0) + n
        plans[sh] = plan
    failed = [sh for sh, p in plans.items() if not p.ok]
    if failed:
        bad = df.filter(pl.col("_shape").is_in(failed))
        reason = pl.col("_shape").replace_strict(failed, [plans[sh].reason for sh in failed], return_dtype=pl.String)
        rejects.append(bad.select("line_no", pl.col("line").alias("raw"), reason.alias("reason")))
        df = df.filter(~pl.col("_shape").is_in(failed))
    ok = {sh: p for sh, p in plans.items() if p.ok}
    # cut on its own: a plan with very many keys (a freak line must not widen every row's
    # split), or one with a key named like a column the line already has (`tp_rank: 3`)
    taken = set(df.columns)
    wide = [sh for sh, p in ok.items() if not VECTORIZED or len(p.keys) > VECTOR_KEYS or taken.intersection(p.columns)]
    narrow = {sh: p for sh, p in ok.items() if sh not in wide}
    if narrow:
        part = df.filter(~pl.col("_shape").is_in(wide)) if wide else df
        good, bad = _apply_all(part, table, narrow, schema)
        rows.append(good)
        if bad is not None:
            rejects.append(bad)
    if wide:
        for (sh,), part in df.filter(pl.col("_shape").is_in(wide)).partition_by("_shape", as_dict=True).items():
            good, bad = _apply(part, table, ok[sh], schema)
            rows.append(good)
            if bad is not None:
                rejects.append(bad)


#: cut all shapes in one vectorized pass (False: one pass per shape; the property tests compare both)
VECTORIZED = True
#: plans with more keys than this are cut on their own, so a freak line cannot widen every row's split
VECTOR_KEYS = 24


def _lut(shapes: list[str], values: list, dtype: pl.DataType) -> pl.Expr:
    """Per-row value of a per-shape table (`_pid` indexes `shapes`)."""
    if len(set(values)) == 1:
        return pl.lit(values[0], dtype)
    return pl.lit(pl.Series(values, dtype=dtype)).gather(pl.col("_pid"))


def _apply_all(df: pl.DataFrame, table: str, plans: dict[str, Plan], schema: dict) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Rows of many shapes, each with an ok plan → typed rows (and bad-value rejects) in one pass.

    The body is cut once into as many fields as the longest plan has keys (a line has exactly
    its plan's number of pieces).  Position j's value starts after its key (per-shape key
    length); each position is typed once per dtype its keys map to, and each column takes the
    typed value from the position its key holds in the row's plan.  Same values, rejects and
    reasons as cutting each shape on its own (`_apply`)."""
    shapes = list(plans)
    P = [plans[sh] for sh in shapes]
    n = max(len(p.keys) for p in P)
    one = len(shapes) == 1
    if not one:
        df = df.with_columns(_pid=pl.col("_shape").replace_strict(shapes, list(range(len(shapes))), return_dtype=pl.UInt32))
    lut = (lambda vals, dt: pl.lit(vals[0], dt)) if one else (lambda vals, dt: _lut(shapes, vals, dt))
    fields = pl.col("_body").str.split_exact(", ", n - 1).struct.rename_fields([f"_f{j}" for j in range(n)])
    df = df.with_columns(_f=fields).unnest("_f")
    # raw values
    raw = {}
    for j in range(n):
        lens = [len(p.keys[j]) + 2 if j < len(p.keys) else None for p in P]
        known = {x for x in lens if x is not None}
        off = pl.lit(known.pop()) if len(known) == 1 else lut(lens, pl.Int64)
        raw[f"_v{j}"] = pl.col(f"_f{j}").str.slice(off)
    df = df.with_columns(**raw)
    # each position typed once per dtype its keys map to
    def dkey(col):
        return str(schema[col])
    typed: dict[tuple[int, str], str] = {}
    exprs = {}
    for j in range(n):
        for p in P:
            if j < len(p.keys) and p.columns[j] is not None:
                col = p.columns[j]
                tk = (j, dkey(col))
                if tk not in typed:
                    name = f"_t{j}_{len(typed)}"
                    typed[tk] = name
                    if schema[col] == pl.String:
                        exprs[name] = pl.col(f"_v{j}")
                    else:
                        exprs[name] = _typed(pl.col(f"_v{j}"), col, schema)
    df = df.with_columns(**exprs)
    # bad values: the first key (in the line's order) whose value does not parse
    checks = []
    for j in range(n):
        kinds = {dkey(p.columns[j]) for p in P if j < len(p.keys) and p.columns[j] is not None and schema[p.columns[j]] != pl.String}
        if not kinds:
            continue
        codes = [dkey(p.columns[j]) if j < len(p.keys) and p.columns[j] is not None else None for p in P]
        conds = []
        for kd in sorted(kinds):
            isnull = pl.col(typed[(j, kd)]).is_null()
            conds.append(isnull if codes.count(kd) == len(codes) else (lut(codes, pl.String) == kd) & isnull)
        bad_j = pl.any_horizontal(conds).fill_null(False) & pl.col(f"_v{j}").is_not_null()
        names = [f"bad value for {p.keys[j]!r}" if j < len(p.keys) else None for p in P]
        checks.append((bad_j, names))
    bad = None
    if checks and df.select(pl.any_horizontal([c for c, _ in checks]).any()).item():
        reason = pl.coalesce([pl.when(c).then(lut(names, pl.String)) for c, names in checks])
        df = df.with_columns(_bad=reason)
        bad = df.filter(pl.col("_bad").is_not_null()).select("line_no", pl.col("line").alias("raw"), pl.col("_bad").alias("reason"))
        df = df.filter(pl.col("_bad").is_null())
    # columns: the typed value at the position the column's key holds in the row's plan
    cols: dict[str, list[int | None]] = {}
    for i, p in enumerate(P):
        for j, col in enumerate(p.columns):
            if col is not None:
                cols.setdefault(col, [None] * len(P))[i] = j
    out = {}
    for col, pos in cols.items():
        at = sorted({j for j in pos if j is not None})
        if len(at) == 1 and None not in pos:
            out[col] = pl.col(typed[(at[0], dkey(col))])
        else:
            pe = lut(pos, pl.Int64)
            e = pl.when(pe == at[0]).then(pl.col(typed[(at[0], dkey(col))]))
            for j in at[1:]:
                e = e.when(pe == j).then(pl.col(typed[(j, dkey(col))]))
            out[col] = e.otherwise(pl.lit(None, schema[col] if schema[col] != DT else DT))
        if col == "cuda_graph":
            out["graph_device"] = lut([graph_device(p.keys[pos[i]]) if pos[i] is not None else None for i, p in enumerate(P)], pl.String)
    ext = [j for j in range(n) if any(j < len(p.keys) and p.columns[j] is None for p in P)]
    if ext:
        parts = []
        for j in ext:
            pre = []
            for p in P:
                if j < len(p.keys) and p.columns[j] is None:
                    first = all(c is not None for c in p.columns[:j])
                    pre.append(("{" if first else ", ") + json.dumps(column_name(p.keys[j])) + ': "')
                else:
                    pre.append(None)
            v = pl.col(f"_v{j}").str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True)
            parts.append(pl.concat_str([lut(pre, pl.String), v, pl.lit('"')]))
        has = [any(c is None for c in p.columns) for p in P]
        body = pl.concat_str([*parts, pl.lit("}")], ignore_nulls=True)
        out["extra"] = body if all(has) else pl.when(lut(has, pl.Boolean)).then(body)
    out["variant"] = lut([p.variant for p in P], pl.String)
    out["iter"] = pl.col("_iter").cast(pl.Int64)
    if table == "prefill":
        out["mixed"] = pl.col("_mixed").is_not_null()
        has_rr = ["running_req" in p.columns for p in P]
        if not all(has_rr):
            from_mixed = pl.col("_mixed").cast(pl.Int64)
            out["running_req"] = from_mixed if not any(has_rr) else pl.when(lut(has_rr, pl.Boolean)).then(out["running_req"]).otherwise(from_mixed)
    return df.with_columns(**out), bad
