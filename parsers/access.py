"""uvicorn HTTP access lines, as SGLang configures them (and uvicorn's own default before v0.3.4).

`[2026-02-19 00:27:12] INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK`
The level is padded to 9 characters; the client address may be IPv6 (`::1:33670`); the status
is `<code> <phrase>`.  Colour codes were stripped before this runs.
"""

from __future__ import annotations

import polars as pl

#: does a message look like an access line at all (cheap test used for classification)
LOOKS_LIKE = r'^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s+\S* - "'

_ACCESS = (
    r'^(INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s+(\S+?)(?::(\d+))? - "(\S+) (\S+) HTTP/(\d(?:\.\d)?)" (\d{3})(?: (.*))?$'
)


_FIELDS = ["level", "client_addr", "client_port", "method", "path", "http_version", "status", "status_text"]


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


def _by_split(df: pl.DataFrame) -> pl.DataFrame:
    """The common shape cut with three splits (about twice as fast as the regex); `_ok` marks
    rows whose pieces all check out — the others are parsed by the regex."""
    halves = pl.col("msg").str.split_exact(' - "', 1).struct.rename_fields(["_who", "_req"])
    df = df.with_columns(_h=halves).unnest("_h")
    who = pl.col("_who").str.splitn(":", 2)
    # `POST /generate HTTP/1.1" 200 OK`: method, path, version", code, phrase (may hold spaces)
    req = pl.col("_req").str.splitn(" ", 5).struct.rename_fields(["method", "path", "_ver", "_code", "status_text"])
    df = df.with_columns(level=who.struct.field("field_0"), _addr=who.struct.field("field_1").str.strip_chars_start(" "),
                         _r=req).unnest("_r")
    port_at = pl.col("_port_at")
    df = df.with_columns(_port_at=pl.col("_addr").str.find(r":\d+$")).with_columns(
        client_addr=pl.when(port_at.is_null()).then(pl.col("_addr")).otherwise(pl.col("_addr").str.slice(0, port_at)),
        client_port=pl.col("_addr").str.slice(port_at + 1).cast(pl.Int32, strict=False),
        http_version=pl.col("_ver").str.slice(5, pl.col("_ver").str.len_bytes() - 6),
        status=pl.col("_code").cast(pl.Int32, strict=False),
    )
    ok = (
        pl.col("_addr").str.contains(r"^\S+:\d+$")
        & pl.col("method").str.contains(r"^\S+$")
        & pl.col("path").str.contains(r"^\S+$")
        & pl.col("_ver").str.contains(r'^HTTP/\d(?:\.\d)?"$')
        & pl.col("_code").str.contains(r"^\d{3}$")
    )
    return df.with_columns(_ok=ok.fill_null(False)).drop("_who", "_req", "_addr", "_ver", "_code", "_port_at")


def parse_access(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows whose `msg` looks like an access line → (http rows, rejects)."""
    split = _by_split(df)
    fast = split.filter(pl.col("_ok"))
    slow = split.filter(~pl.col("_ok")).drop(_FIELDS)
    out = pl.concat([fast, _by_regex(slow)], how="diagonal_relaxed") if slow.height else fast
    bad = out.filter(pl.col("status").is_null())
    rejects = bad.select("line_no", pl.col("line").alias("raw"), pl.lit("access line without a complete request and status (truncated?)").alias("reason"))
    good = out.filter(pl.col("status").is_not_null())
    drop = [c for c in good.columns if c.startswith("_")] + ["line", "msg", "family", "byte_off"]
    return good.drop(drop, strict=False), rejects
