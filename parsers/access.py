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


def parse_access(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows whose `msg` looks like an access line → (http rows, rejects)."""
    g = pl.col("msg").str.extract_groups(_ACCESS)
    out = df.with_columns(_g=g).with_columns(
        level=pl.col("_g").struct.field("1"),
        client_addr=pl.col("_g").struct.field("2"),
        client_port=pl.col("_g").struct.field("3").cast(pl.Int32, strict=False),
        method=pl.col("_g").struct.field("4"),
        path=pl.col("_g").struct.field("5"),
        http_version=pl.col("_g").struct.field("6"),
        status=pl.col("_g").struct.field("7").cast(pl.Int32, strict=False),
        status_text=pl.col("_g").struct.field("8"),
    )
    bad = out.filter(pl.col("status").is_null())
    rejects = bad.select("line_no", pl.col("line").alias("raw"), pl.lit("access line without a complete request and status (truncated?)").alias("reason"))
    good = out.filter(pl.col("status").is_not_null())
    drop = [c for c in good.columns if c.startswith("_")] + ["line", "msg", "pfx", "family", "byte_off"]
    return good.drop(drop, strict=False), rejects
