"""The part of a line before the message: `[2026-02-19 00:27:16.318 DP1 TP3] `.

SGLang's formatter writes `[<asctime>[.<ms>]<rank prefix>] <message>` (no level, no logger
name); before v0.2.14 there is no bracket at all, v0.2.14–v0.3.3 print time of day only, and
the v0.1.17–v0.2.13 releases put `[gpu_id=N] ` / `[gpu=N] ` at the start of the message.  Ray
adds `(SchedulerActor pid=…, ip=…) ` in front.  Rank tokens are a set: their order changed
three times, so each is looked up on its own.

Why it is fast: today's layout (`[YYYY-MM-DD HH:MM:SS[.fff][ RANKS]] `) is read by position, as
two constant slices: the first 17 bytes (to the minute) and the next 19 (seconds, fraction, ranks,
`]`), of which a chunk has a few hundred and a few thousand distinct values, each validated and
parsed once and mapped back through an enum's codes — no per-line strptime or regex.  Any other
bracket takes the generic path: its distinct contents are validated and parsed once each and
joined back.  A property test holds the two paths to identical columns.
"""

from __future__ import annotations

import polars as pl

from loglens.schema import DT

ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"
_TS_LIKE = r"^(?:[0-9]{4}-[0-9][0-9]-[0-9][0-9][ T])?[0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:[.,][0-9]{1,6})?(?: [A-Z_]+[0-9]+)*$"
_GPU_LIKE = r"^gpu(?:_id)?=[0-9]+$"
RANK_TOKENS = {
    "dp_rank": "DP",
    "pp_rank": "PP",
    "attn_cp_rank": "ATTN_CP",
    "moe_dp_rank": "MOE_DP",
    "tp_rank": "TP",
    "ep_rank": "EP",
}
PREFIX_COLUMNS = ["ts", "clock", *RANK_TOKENS, "gpu"]


def _parse_contents(contents: pl.Series) -> pl.DataFrame:
    """Distinct bracket contents → validity and typed prefix columns (one row each)."""
    df = pl.DataFrame({"_content": contents})
    pfx = pl.col("_content")
    df = df.with_columns(_valid=pfx.str.contains(_TS_LIKE) | pfx.str.contains(_GPU_LIKE))
    has_date = pfx.str.slice(4, 1) == "-"
    time_start = pl.when(has_date).then(11).otherwise(0)
    frac = pfx.str.slice(time_start + 8).str.extract(r"^[.,]([0-9]{1,6})")
    micros = (frac + pl.lit("000000")).str.slice(0, 6).cast(pl.Int64, strict=False).fill_null(0)
    clock = pfx.str.slice(time_start, 8).str.to_time("%H:%M:%S", strict=False)
    day = pl.when(has_date).then(pfx.str.slice(0, 10)).str.to_date("%Y-%m-%d", strict=False)
    us_of_day = clock.cast(pl.Int64) // 1000 + micros
    ranks = pfx.str.slice(time_start + 8)
    df = df.with_columns(
        ts=(day.cast(DT) + pl.duration(microseconds=us_of_day)).cast(DT),
        clock=(us_of_day * 1000).cast(pl.Time),
        gpu=pfx.str.extract(r"^gpu(?:_id)?=([0-9]+)$").cast(pl.Int32),
    )
    # rank tokens absent from every content (most logs print one or two) cost no regex
    present = df.select(**{col: pfx.str.contains(tok, literal=True).any() for col, tok in RANK_TOKENS.items()}).row(0, named=True)
    df = df.with_columns(
        **{col: ranks.str.extract(rf"(?:^|\s){tok}([0-9]+)(?:\s|$)").cast(pl.Int32) if present[col] else pl.lit(None, pl.Int32)
           for col, tok in RANK_TOKENS.items()}
    )
    # an invalid content (`[http_server] ...`) is no prefix: its columns stay null
    return df.with_columns(**{c: pl.when(pl.col("_valid")).then(pl.col(c)) for c in PREFIX_COLUMNS})


#: today's layout (`[YYYY-MM-DD HH:MM:SS[.fff][ RANKS]] `) is read in two lookups by position:
#: its first 17 bytes (`[YYYY-MM-DD HH:MM`: a chunk holds a few hundred distinct values) and
#: the next 19 (`:SS`, fraction, rank tokens, `]` and the byte after it: a few thousand), each
#: distinct value validated and parsed once
_HEAD = 17
_HEAD_LIKE = r"^\[[0-9]{4}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]$"
_TAIL = 19
#: take the fast path at all (False: every bracketed line takes the generic one; tests compare)
ISO_FAST = True
_REST_LIKE = r"^(?:[.,][0-9]{1,6})?(?: [A-Z_]+[0-9]+)*$"


def _parse_heads(heads: pl.Series) -> pl.DataFrame:
    """Distinct 17-byte heads → `_min` (the minute they name; null where no valid prefix
    starts so: strptime alone also takes ` 2026`, `+026`)."""
    h = pl.col("_head")
    minute = h.str.to_datetime("[%Y-%m-%d %H:%M", strict=False, time_unit="us")
    return pl.DataFrame({"_head": heads}).with_columns(_min=pl.when(h.str.contains(_HEAD_LIKE)).then(minute))


def _parse_tails(tails: pl.Series) -> pl.DataFrame:
    """Distinct 19-byte tails → `_mo` (where the message starts in the line; null where no
    valid prefix ends in this tail), `_us` (seconds and fraction) and the rank columns."""
    df = pl.DataFrame({"_tail": tails})
    t = pl.col("_tail")
    pos = t.str.find("]", literal=True)
    rest = t.str.slice(3, pos - 3)  # after `:SS`
    frac = rest.str.extract(r"^[.,]([0-9]{1,6})")
    # `:SS` (no leap second: strptime would roll it over), and the byte after `]` must be
    # inside the tail to know whether a space follows
    valid = t.str.contains(r"^:[0-5][0-9]") & (pos < _TAIL - 1).fill_null(False) & rest.str.contains(_REST_LIKE).fill_null(False)
    seconds = t.str.slice(1, 2).cast(pl.Int64, strict=False)
    df = df.with_columns(
        _us=seconds * 1_000_000 + (frac + pl.lit("000000")).str.slice(0, 6).cast(pl.Int64, strict=False).fill_null(0),
        # where the message starts: after `]` and the space that follows it, if any (bytes,
        # like the generic path's `find`: a valid bracket up to its tail is ASCII); validity
        # rides along as null (one column less to map back to every line)
        _mo=pl.when(valid).then(_HEAD + pos + 1 + (t.str.slice(pos + 1, 1) == " ").fill_null(False).cast(pl.UInt32)),
    )
    # rank tokens absent from every tail cost no regex (polars keeps only ~32 compiled regexes)
    present = [col for col, tok in RANK_TOKENS.items() if df.select(rest.str.contains(tok, literal=True).any()).item()]
    return df.with_columns(
        **{col: rest.str.extract(rf"(?:^|\s){tok}([0-9]+)(?:\s|$)").cast(pl.Int32) if col in present else pl.lit(None, pl.Int32)
           for col, tok in RANK_TOKENS.items()}
    )


def _lookup(df: pl.DataFrame, key: str, table: pl.DataFrame) -> list[pl.Series]:
    """`table`'s columns (but `key`) for each row of `df`, by its `key` value: an enum's codes
    are the positions of its categories (far cheaper than a join, which would gather every
    column of the frame)."""
    at = df.select(pl.col(key).cast(pl.Enum(table.get_column(key)), strict=False).to_physical()).to_series()
    return [table.get_column(c).gather(at) for c in table.columns if c != key]


def _generic(df: pl.DataFrame) -> pl.DataFrame:
    """Any bracket content, by the distinct contents (`_parse_contents`): adds the prefix
    columns, `_valid` and `_off` (where the message starts) to a frame with `_body`."""
    body = pl.col("_body")
    close = body.str.find("]", literal=True)
    df = df.with_columns(_close=close).with_columns(
        _content=pl.when((body.str.slice(0, 1) == "[") & (pl.col("_close") < 96)).then(body.str.slice(1, pl.col("_close") - 1))
    )
    table = _parse_contents(df.get_column("_content").drop_nulls().unique())
    df = df.join(table, on="_content", how="left", maintain_order="left")
    valid = pl.col("_valid").fill_null(False)
    # the message starts after `] ` (or `]`)
    space = (body.str.find("] ", literal=True) == pl.col("_close")).fill_null(False).cast(pl.Int64)
    return df.with_columns(_valid=valid, _off=pl.when(valid).then(pl.col("_close") + 1 + space).otherwise(0))


def split_prefix(df: pl.DataFrame) -> pl.DataFrame:
    """Add `proc`, `_pfx` (has a valid `[…]` prefix), `msg` and the typed prefix columns
    (`ts`, `clock`, rank columns, `gpu`) to a frame with `line`.

    Lines in today's layout (`[2026-02-19 00:27:16.318 TP0] `) take the fast path: the time
    is parsed in place from fixed positions, the rest of the bracket is looked up by its tail
    (`_parse_tails`); every other bracketed line takes the generic path (`_generic`), whose
    rows are written back in place."""
    line = pl.col("line")
    # Ray's stdout forwarding: `(SchedulerActor pid=1234, ip=10.0.0.5) [..] ...`
    df = df.with_columns(proc=pl.lit(None, pl.String), _body=line)
    ray = (pl.col("_first") if "_first" in df.columns else first_byte(line)) == ord("(")
    idx = df.select(ray.arg_true()).to_series()
    if idx.len():  # the regexes on those lines only, written back in place
        part = df.select(line.gather(idx)).with_columns(_p=line.str.extract(r"^\(([^)]*)\) \["))
        idx, part = idx.filter(part.get_column("_p").is_not_null()), part.filter(pl.col("_p").is_not_null())
        if idx.len():
            body = part.select(line.str.replace(r"^\([^)]*\) ", "")).to_series()
            df = df.with_columns(df.get_column("proc").scatter(idx, part.get_column("_p")), df.get_column("_body").scatter(idx, body))
    body = pl.col("_body")
    df = df.with_columns(_head=body.str.slice(0, _HEAD), _tail=body.str.slice(_HEAD, _TAIL))
    heads = _parse_heads(df.select(pl.col("_head").unique().drop_nulls().sort()).to_series())
    if not ISO_FAST:
        heads = heads.with_columns(_min=pl.lit(None, heads.schema["_min"]))
    df = df.with_columns(_lookup(df, "_head", heads))
    iso = pl.col("_min").is_not_null()
    tails = _parse_tails(df.select(pl.col("_tail").filter(iso).unique().sort()).to_series())
    # rank columns absent from every tail (most logs print one or two) are not carried
    tails = tails.select(c for c in tails.columns if c in ("_tail", "_us", "_mo") or tails.get_column(c).null_count() < tails.height)
    df = df.with_columns(_lookup(df, "_tail", tails))
    fast = (iso & pl.col("_mo").is_not_null()).fill_null(False)
    ts = (pl.col("_min") + pl.duration(microseconds=pl.col("_us"))).cast(DT)
    df = df.with_columns(_fast=fast).with_columns(
        ts=pl.when("_fast").then(ts),
        _valid=pl.col("_fast"),
        _off=pl.when("_fast").then(pl.col("_mo")).otherwise(0),
        gpu=pl.lit(None, pl.Int32),
        **{c: pl.when("_fast").then(pl.col(c)) if c in tails.columns else pl.lit(None, pl.Int32) for c in RANK_TOKENS},
    ).with_columns(clock=pl.col("ts").cast(pl.Time))
    # the generic path for every other line with a `]` (a line without one has no prefix)
    idx = df.select((~pl.col("_fast")).arg_true()).to_series()
    if idx.len():
        part = df.get_column("_body").gather(idx)
        idx = idx.filter(part.str.starts_with("[") & part.str.contains("]", literal=True))
    if idx.len():
        part = _generic(df.select("_body").gather(idx))
        put = ["ts", "clock", *RANK_TOKENS, "gpu", "_valid", "_off"]
        df = df.with_columns(df.get_column(c).scatter(idx, part.get_column(c).cast(df.schema[c])) for c in put)
    # rank columns null on every line (most logs print one or two) are dropped and re-added as
    # literals, which later steps carry for free
    nulls = [c for c in PREFIX_COLUMNS if df.get_column(c).null_count() == df.height]
    df = df.with_columns(pl.lit(None, df.schema[c]).alias(c) for c in nulls)
    df = df.with_columns(_pfx=pl.col("_valid"), msg=body.str.slice(pl.col("_off")))
    return df.drop("_body", "_head", "_tail", "_min", "_us", "_mo", "_fast", "_valid", "_off")


def first_byte(line: pl.Expr) -> pl.Expr:
    """Each line's first byte (0 for an empty line): the `_first` column the reader gives, for
    frames that come without it and for lines changed here."""
    return line.cast(pl.Binary).bin.head(1).bin.reinterpret(dtype=pl.UInt8).fill_null(0)


def strip_ansi(df: pl.DataFrame) -> pl.DataFrame:
    """Colour codes (uvicorn on a TTY) are removed before anything else looks at the line."""
    line = pl.col("line")
    idx = df.select(line.str.contains("\x1b", literal=True).arg_true()).to_series()
    if idx.len():  # the regex on those lines only, written back in place
        clean = df.select(line.gather(idx).str.replace_all(ANSI, "")).to_series()
        df = df.with_columns(df.get_column("line").scatter(idx, clean))
        if "_first" in df.columns:  # a line may have started with a colour code
            first = clean.to_frame("line").select(first_byte(pl.col("line"))).to_series()
            df = df.with_columns(df.get_column("_first").scatter(idx, first))
    return df
