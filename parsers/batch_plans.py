"""One plan per batch-line *shape*: which key sits in which slot, what column and type it
maps to, which release range the shape belongs to; and how a plan types the raw values of
its lines (`typed_rows`), or cuts and types the lines of one shape on its own (`apply_plan`).

A shape is `<sep>|<trail>|<key>:, <key>:, ...` (the header's punctuation, a trailing comma,
the key sequence).  Plans are built once per shape and shared by every batch of a process.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from loglens.schema import DECODE, DT, PREFILL
from .keys import column_name, graph_device
from .variants import decode_variant, prefill_variant

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


#: plans by shape, shared across batches (a log has a handful of shapes; most batches reuse them)
PLANS: dict[tuple[str, str], Plan] = {}
#: lines each shape matched in real input, to try the commonest shapes first
HITS: dict[tuple[str, str], int] = {}


def plan_for_shape(table: str, shape: str) -> Plan:
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


def typed_value(value: pl.Expr, col: str, schema: dict) -> pl.Expr:
    dtype = schema[col]
    if dtype == pl.Boolean:
        return pl.when(value == "True").then(True).when(value == "False").then(False).otherwise(None)
    if dtype == DT:
        return value.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False).cast(DT)
    if dtype in (pl.Int64, pl.Int32):
        return value.cast(pl.Int64, strict=False)
    if dtype == pl.Float64:  # a percent sign (`cache hit rate: 50.00%`): see `with_percent_values`
        return value.cast(pl.Float64, strict=False)
    return value


def with_percent_values(df: pl.DataFrame, floats: list[tuple[str, str]]) -> pl.DataFrame:
    """Float columns read again, without a trailing `%`, where the plain reading failed
    (`floats`: pairs of typed column and raw value column).  Called only when some value did
    not parse: stripping the sign from every value first costs more than the parse itself."""
    fixes = {}
    for typed, raw in floats:
        v = pl.col(raw)
        fixes[typed] = pl.when(pl.col(typed).is_null() & v.str.ends_with("%")).then(v.str.strip_suffix("%").cast(pl.Float64, strict=False)).otherwise(pl.col(typed))
    return df.with_columns(**fixes) if fixes else df


def extra_json(values: list[tuple[str, pl.Expr]]) -> pl.Expr:
    """A JSON object `{"key": "value", ...}` built by concatenation (keys known per shape)."""
    parts: list[pl.Expr] = [pl.lit("{")]
    for i, (key, v) in enumerate(values):
        esc = v.str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True)
        parts += [pl.lit(("" if i == 0 else ", ") + json.dumps(column_name(key)) + ': "'), esc, pl.lit('"')]
    parts.append(pl.lit("}"))
    return pl.concat_str(parts)


def apply_plan(part: pl.DataFrame, table: str, plan: Plan, schema: dict) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Lines of one shape (`_body` holds their `key: value` list) → typed rows and rejects."""
    n = len(plan.keys)
    fields = pl.col("_body").str.split_exact(", ", n - 1)
    raw = {f"_v{i}": fields.struct.field(f"field_{i}").str.slice(len(k) + 2) for i, k in enumerate(plan.keys)}
    return typed_rows(part.with_columns(**raw), table, plan, schema)


def typed_rows(out: pl.DataFrame, table: str, plan: Plan, schema: dict) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Rows with the raw value of key i in `_v{i}` → typed columns (and the rows whose values
    do not parse, as rejects)."""
    typed, extras, checks = [], [], []
    for i, (k, col) in enumerate(zip(plan.keys, plan.columns)):
        v = pl.col(f"_v{i}")
        if col is None:
            extras.append((k, v))
            continue
        typed.append(typed_value(v, col, schema).alias(col))
        if col == "cuda_graph":
            typed.append(pl.lit(graph_device(k)).alias("graph_device"))
    out = out.with_columns(typed)
    if extras:
        out = out.with_columns(extra=extra_json(extras))
    for i, (k, col) in enumerate(zip(plan.keys, plan.columns)):
        if col is not None:
            checks.append((k, pl.col(col).is_null() & pl.col(f"_v{i}").is_not_null()))
    bad = None
    failed = pl.any_horizontal([c for _, c in checks]).any()
    if checks and out.select(failed).item():  # (checked again only when some value failed)
        floats = [(col, f"_v{i}") for i, col in enumerate(plan.columns) if col is not None and schema[col] == pl.Float64]
        out = with_percent_values(out, floats)
        if out.select(failed).item():
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
    return rows_only(out.with_columns(**extra_cols)), bad


def rows_only(df: pl.DataFrame) -> pl.DataFrame:
    """The table's columns of parsed rows, without the parser's working columns (`_`-prefixed
    cuts and values, the line and message): dropped as soon as the rows are made, so that the
    copies of the text they hold are freed before the next shape or family is parsed."""
    return df.drop([c for c in df.columns if c.startswith("_")] + ["line", "msg", "family", "byte_off"], strict=False)
