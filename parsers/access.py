"""uvicorn HTTP access lines, as SGLang configures them (and uvicorn's own default before v0.3.4).

`[2026-02-19 00:27:12] INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK`
The level is padded to 9 characters; the client address may be IPv6 (`::1:33670`); the status
is `<code> <phrase>`.  Colour codes were stripped before this runs.
"""

from __future__ import annotations

import polars as pl

from .glued import GLUED, set_aside_glued

#: does a message look like an access line at all (cheap test used for classification)
LOOKS_LIKE = r'^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s+\S* - "'

#: the grammar (the reference: `_by_regex` parses with it, the fast path must agree with it)
_ACCESS = (
    r'^(INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s+(\S+?)(?::(\d+))? - "(\S+) (\S+) HTTP/(\d(?:\.\d)?)" (\d{3})(?: (.*))?$'
)
#: `_ACCESS` in two parts, for the fast path: what comes before the port (`INFO:     127.0.0.1`)
#: and what comes after ` - "` (`POST /generate HTTP/1.1" 200 OK`)
_WHO = r"^(INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s+(\S+)$"
_REQUEST = r'^(\S+) (\S+) HTTP/(\d(?:\.\d)?)" (\d{3})(?: (.*))?$'

_FIELDS = ["level", "client_addr", "client_port", "method", "path", "http_version", "status", "status_text"]
#: the fields in the order the output frame has them
_ORDER = ["level", "method", "path", "status_text", "client_addr", "client_port", "http_version", "status"]
_REASON = "access line without a complete request and status (truncated?)"


def _by_regex(df: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("msg").str.extract_groups(_ACCESS)
    return df.with_columns(_g=g).with_columns(
        level=pl.col("_g").struct.field("1"),
        client_addr=pl.col("_g").struct.field("2"),
        client_port=pl.col("_g").struct.field("3").cast(pl.Int32, strict=False),
        method=pl.col("_g").struct.field("4"),
        path=pl.col("_g").struct.field("5"),
        http_version=pl.col("_g").struct.field("6"),
        status=pl.col("_g").struct.field("7").cast(pl.Int32, strict=False),
        status_text=pl.col("_g").struct.field("8"),
    ).drop("_g")


def _lookup(keys: pl.Series, pattern: str, names: list[str], ints: tuple[str, ...] = (), flag: str | None = None) -> list[pl.Series]:
    """The groups of `pattern` in each key (null where it does not match), matched once per
    distinct key: each key's row of the small table is its code as an enum of the distinct keys
    (cheaper than a join).  The groups named in `ints` are cast to Int32 (in the small table).
    Mostly distinct keys are matched one by one (the table would be as large as the keys).
    With `flag`, last comes whether each key holds a match of that regex."""
    distinct = keys.drop_nulls().unique()
    if len(distinct) > len(keys) // 2:  # mostly distinct keys (a path per request, say): match each
        table, codes = keys, None
    else:
        table, codes = distinct, keys.cast(pl.Enum(distinct)).to_physical()
    groups = table.str.extract_groups(pattern).struct.unnest()
    out = []
    for i, name in enumerate(names):
        col = groups.get_column(str(i + 1))
        col = col.cast(pl.Int32, strict=False) if name in ints else col
        out.append((col if codes is None else col.gather(codes)).alias(name))
    if flag is not None:
        hit = table.str.contains(flag)
        out.append(hit if codes is None else hit.gather(codes))
    return out


def _split_fields(df: pl.DataFrame) -> tuple[list[pl.Series], pl.Series]:
    """The fields of every row (in output order) by one split at the first ` - "`, the port cut
    off the first half, and each half's distinct values matched by its part of `_ACCESS` (access
    lines repeat a few levels, addresses and requests; ports differ); and which rows that parsed
    — the others are for the regex.

    Exact wherever it parses: the message is `<who> - "<request>` with `<who>` free of
    whitespace (`_WHO` checks it), so `_ACCESS`'s address token ends at the split point and the
    request is matched by `_REQUEST` alone; the port is the `:<ASCII digits>` ending `<who>`,
    the part `_ACCESS` takes as its port too.  Offsets are in bytes (`bin.*`) and fall on ASCII
    characters."""
    msg = df.get_column("msg")
    # a compact copy first: the messages' bytes lie scattered over the buffers of the whole
    # chunk, and a plain copy reads them far more cheaply than the split does (a message that
    # starts with NUL, which no access line does, is changed by it: left to the regex)
    compact = msg.str.strip_chars_start("\x00")
    who, req = compact.str.splitn(' - "', 2).struct.unnest().get_columns()
    q = who.str.find(r":[0-9]+$")  # the port's colon
    raw = who.cast(pl.Binary)
    port = raw.bin.slice(q + 1).cast(pl.String).cast(pl.Int32, strict=False).alias("client_port")
    level, addr = _lookup(raw.bin.head(q).cast(pl.String), _WHO, ["level", "client_addr"])
    # (a glued line's prefix holds spaces: in a line parsed here, only the request's phrase can hold it)
    method, path, version, status, text, glued = _lookup(req, _REQUEST, ["method", "path", "http_version", "status", "status_text"], ints=("status",), flag=GLUED[1:])
    # a request that does not parse makes a reject: left to the regex, like every row not parsed
    # here; so is a line that may be two lines glued (`parse_access` looks)
    ok = level.is_not_null() & status.is_not_null() & (compact.str.len_bytes() == msg.str.len_bytes()) & ~glued
    return [level, method, path, text, addr, port, version, status], ok.fill_null(False).alias("_ok")


def _by_split(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with the fields by `_split_fields`; `_ok` marks the rows that parsed."""
    fields, ok = _split_fields(df)
    return df.with_columns(*fields, ok)


def parse_access(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows whose `msg` looks like an access line → (http rows, rejects), both in input order.

    Rejects carry `line_no`, `raw`, `reason` and `family` (`http`, or `glued` for two lines
    glued into one: see `glued`)."""
    fields, ok = _split_fields(df)
    keep = [c for c in df.columns if c not in ("line", "msg", "family", "byte_off", *_FIELDS) and not c.startswith("_")]
    if ok.all():  # the common case: every row parsed (so none is a reject)
        rejects = pl.DataFrame(schema={"line_no": df.schema["line_no"], "raw": df.schema["line"], "reason": pl.String, "family": pl.String})
        return df[keep].hstack(fields), rejects
    split = df.with_columns(*fields, ok).with_row_index("_access_row")
    rest, glued = set_aside_glued(split.filter(~pl.col("_ok")).drop(_FIELDS))
    slow = _by_regex(rest)
    out = pl.concat([split.filter(pl.col("_ok")), slow], how="diagonal_relaxed").sort("_access_row")
    status = pl.col("status")
    rejects = out.filter(status.is_null()).select("line_no", pl.col("line").alias("raw"), pl.lit(_REASON).alias("reason"), pl.lit("http").alias("family"))
    if glued is not None:
        rejects = pl.concat([rejects, glued], how="vertical_relaxed").sort("line_no")
    return out.filter(status.is_not_null()).select(*keep, *_ORDER), rejects
