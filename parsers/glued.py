"""Two log lines glued into one (a newline lost in a paste or a torn write):
`... 200 OK[2026-02-19 00:27:16 TP0] Decode batch, ...`.

Such a line is a reject of its own (family `glued`), never parsed as the line it starts with.
Only Decode, Prefill and access lines are checked, and only the few their fast paths do not
take: a line those take cannot hold a `[` in its message (every value it keeps is a number, a
flag, or a text checked for one), and a glued line always does.
"""

from __future__ import annotations

import polars as pl

#: another log line's prefix inside this one, after at least one character
GLUED = r".\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z_]+\d+)*\] "
REASON = "two log lines glued together (lost newline)"


def set_aside_glued(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(`df` without its glued lines, their rejects or None).  A line is glued when its message
    holds another line's prefix `[date time ...] ` that does not start the line (a literal test
    for `[` first, then the regex on those lines only)."""
    if df.height == 0:
        return df, None
    maybe = df.select(pl.col("msg").str.contains("[", literal=True).fill_null(False).arg_true()).to_series()
    if maybe.len() == 0:
        return df, None
    part = df.select(pl.col("line").gather(maybe), pl.col("msg").gather(maybe))
    msg = pl.col("msg")
    # a message after a prefix is preceded by at least one character of the line
    subject = pl.when(pl.col("line").str.len_bytes() > msg.str.len_bytes()).then(pl.concat_str([pl.lit(" "), msg])).otherwise(msg)
    hit = maybe.filter(part.select(subject.str.contains(GLUED)).to_series())
    if hit.len() == 0:
        return df, None
    glued = pl.repeat(False, df.height, eager=True).scatter(hit, True)
    rejects = df.filter(glued).select("line_no", pl.col("line").alias("raw"), pl.lit(REASON).alias("reason"), pl.lit("glued").alias("family"))
    return df.filter(~glued), rejects
