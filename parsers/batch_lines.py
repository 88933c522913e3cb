"""`Decode batch` / `Prefill batch` lines of every SGLang release, by one key/value grammar.

How it stays fast *and* tolerant: a batch line is a header, then `key: value` pairs joined by
`, `.  A log holds a handful of *shapes* (key sequence plus the header's punctuation), each
with a plan built once (`batch_plans`).  The commonest known shapes are taken straight off one
`split` of the message (`_split_known_shapes`); any other line has its shape computed with one
vectorized regex replace, and the lines of all shapes are cut and typed in one pass
(`batch_one_pass`).  No regex per field, no loop per line; a key never seen before is kept in
`extra` and reported, never dropped.

Legacy forms are normalised into the same grammar first: v0.1 `new fill batch. #seq: 1. …`
uses `. ` separators; v0.4.9's hybrid pool prints `#token: full=N, swa=M, token usage:
full=F, swa=G` (embedded `, `), which becomes the later `#full token: N, #swa token: M, …`.
"""

from __future__ import annotations

import polars as pl

from loglens.schema import DECODE, PREFILL
from .batch_one_pass import VECTOR_KEYS, apply_all
from .batch_plans import HITS as _HITS
from .batch_plans import PLANS as _PLANS
from .batch_plans import Plan, apply_plan, plan_for_shape, typed_rows
from .glued import set_aside_glued

_SWA_PAIR = (
    r"#token: full=(\d+), swa=(\d+), token usage: full=([\d.]+), swa=([\d.]+)",
    "#full token: $1, #swa token: $2, full token usage: $3, swa token usage: $4",
)
_SWA_USAGE_ONLY = (r"token usage: full=([\d.]+), swa=([\d.]+)", "full token usage: $1, swa token usage: $2")

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


#: lines whose shapes are counted first when a batch comes before any shape counts
CENSUS = 2000
#: how many known shapes are tried by literal match before falling back to computing shapes
FAST_SHAPES = 3
#: the fast path is taken only while the commonest shapes hold at least this share of the lines seen
SPLIT_SHARE = 0.8
#: cut all shapes in one vectorized pass (False: one pass per shape; the property tests compare both)
VECTORIZED = True


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


def parse_batch_lines(df: pl.DataFrame, table: str) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """Rows of one family (`line_no`, `line`, `msg`, prefix columns) → (typed rows, rejects, unknown keys).

    Rejects carry `line_no`, `raw`, `reason` and `family` (`table`, or `glued` for two lines
    glued into one: see `glued`)."""
    schema = DECODE if table == "decode" else PREFILL
    rows, rejects, unknown = [], [], {}
    if sum(n for k, n in _HITS.items() if k[0] == table) < CENSUS and df.height > 2 * CENSUS:
        # a fresh process knows no shapes yet: the first lines take the tolerant path, which
        # counts their shapes, and the rest of the batch can take the fast path
        head, df = df.head(CENSUS), df.slice(CENSUS)
        _tolerant(head, table, schema, rows, rejects, unknown)
    df = _split_known_shapes(df, table, schema, rows, rejects, unknown)
    if df.height:
        _tolerant(df, table, schema, rows, rejects, unknown)
    good = pl.concat(rows, how="diagonal_relaxed") if rows else pl.DataFrame()
    bad = (
        pl.concat(rejects, how="diagonal_relaxed")
        if rejects
        else pl.DataFrame(schema={"line_no": pl.Int64, "raw": pl.String, "reason": pl.String, "family": pl.String})
    )
    family = pl.coalesce(pl.col("family"), pl.lit(table)) if "family" in bad.columns else pl.lit(table)
    return good, bad.with_columns(family=family), unknown  # (rows come from typed_rows / apply_all: table columns only)


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
    top = _fast_shapes(table, dict(_HITS))
    if top is None:
        return df
    plans = [(k, _PLANS[k]) for k in top]
    # (a key holding a `[`: its lines are left to the tolerant path, which looks for glued lines)
    plans = [(k, p) for k, p in plans if p.ok and k[1].split("|", 1)[0] in (",", ".") and "[" not in k[1]]
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
        # a `,` inside a text value: the tolerant path cuts differently (numbers with one fail to
        # parse anyway); a `[`: the tolerant path looks for a glued line.  So no message taken
        # here holds a `[`
        checks += [~pl.col(v).str.contains(r"[,\[]") for v in texts]
        rest = rest.with_columns(**values).with_columns(_hit=pl.all_horizontal(checks).fill_null(False))
        hits = rest.select(pl.col("_hit").sum()).item()
        if hits == 0:
            continue
        part, rest = (rest, rest.clear()) if hits == rest.height else (rest.filter(pl.col("_hit")), rest.filter(~pl.col("_hit")))
        part = part.drop(names)  # the cut pieces are not needed past here (their text is freed)
        good, bad = typed_rows(part, table, plan, schema)
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


def _fast_shapes(table: str, hits: dict) -> list | None:
    """The shapes the split fast path tries for `table`, or None when it is not taken: each
    plan tried costs passes over the remaining rows, so when the commonest shapes hold only
    part of the lines seen (a log mixing releases), the one-pass tolerant path is cheaper."""
    seen = sorted((k for k in hits if k[0] == table), key=lambda k: -hits[k])
    top = seen[:FAST_SHAPES]
    if sum(hits[k] for k in top) < SPLIT_SHARE * sum(hits[k] for k in seen):
        return None
    return top


def fast_path_taken() -> bool | None:
    """Do this process's batch lines take the split fast path (None: none seen yet)?  The
    tolerant path needs ~1.5x the memory per chunk, so ingest parses fewer chunks at once when
    they do not."""
    hits = dict(_HITS)  # (a copy: worker threads add to it)
    tables = {k[0] for k in hits}
    if not tables:
        return None
    return all(_fast_shapes(t, hits) is not None for t in tables)


def _tolerant(df: pl.DataFrame, table: str, schema: dict, rows: list, rejects: list, unknown: dict) -> None:
    """Any header and grammar: shapes computed per line, a plan per shape, and all lines of
    ordinary plans cut and typed in one pass (`batch_one_pass.apply_all`).  Two lines glued
    into one are set aside first, as rejects of their own."""
    df, glued = set_aside_glued(df)
    if glued is not None:
        rejects.append(glued)
    if df.height == 0:
        return
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
            plan = plan_for_shape(table, sh)
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
        good, bad = apply_all(part, table, narrow, schema)
        rows.append(good)
        if bad is not None:
            rejects.append(bad)
    if wide:
        for (sh,), part in df.filter(pl.col("_shape").is_in(wide)).partition_by("_shape", as_dict=True).items():
            good, bad = apply_plan(part, table, ok[sh], schema)
            rows.append(good)
            if bad is not None:
                rejects.append(bad)


