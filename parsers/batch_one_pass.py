"""Lines of many batch-line shapes cut and typed in one vectorized pass.

A log that mixes releases (or a release that prints several shapes) would otherwise cost a
dozen polars calls per shape per batch; here the bodies are cut once, and each shape's plan
only decides, through small per-shape lookup tables, where a row's values start and which
column each position feeds.
"""

from __future__ import annotations

import json

import polars as pl

from loglens.schema import DT
from .batch_plans import Plan, rows_only, typed_value, with_percent_values
from .keys import column_name, graph_device


#: plans with more keys than this are cut on their own, so a freak line cannot widen every row's split
VECTOR_KEYS = 24


def _lut(shapes: list[str], values: list, dtype: pl.DataType) -> pl.Expr:
    """Per-row value of a per-shape table (`_pid` indexes `shapes`)."""
    if len(set(values)) == 1:
        return pl.lit(values[0], dtype)
    return pl.lit(pl.Series(values, dtype=dtype)).gather(pl.col("_pid"))


def apply_all(df: pl.DataFrame, table: str, plans: dict[str, Plan], schema: dict) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Rows of many shapes, each with an ok plan → typed rows (and bad-value rejects) in one pass.

    The body is cut once into as many fields as the longest plan has keys (a line has exactly
    its plan's number of pieces).  Position j's value starts after its key (per-shape key
    length); each position is typed once per dtype its keys map to, and each column takes the
    typed value from the position its key holds in the row's plan.  Same values, rejects and
    reasons as cutting each shape on its own (`apply_plan`)."""
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
    # the cut pieces, the body and the shape are not needed past here: dropped, so that their
    # copies of the text are freed before the values are typed
    df = df.with_columns(**raw).drop([f"_f{j}" for j in range(n)] + ["_body", "_shape", "msg"], strict=False)
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
                        exprs[name] = typed_value(pl.col(f"_v{j}"), col, schema)
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
    failed = pl.any_horizontal([c for c, _ in checks]).any()
    if checks and df.select(failed).item():  # (checked again only when some value failed)
        df = with_percent_values(df, [(name, f"_v{j}") for (j, kd), name in typed.items() if kd == str(pl.Float64)])
        if df.select(failed).item():
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
    return rows_only(df.with_columns(**out)), bad
