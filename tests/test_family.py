"""Which family a line goes to: the shortcuts (`_first` names the few lines that may be blank or
an unprefixed `#running-req:` line; one regex for Prefill and access lines, told apart by the
first 12 characters) give exactly what the plain regexes over every line give."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loglens.parsers import pipeline
from loglens.parsers.access import LOOKS_LIKE
from loglens.parsers.prefix import split_prefix
from loglens.reader import lines_frame


def reference(df: pl.DataFrame) -> pl.Series:
    """The family rule with every regex over every line (the definition the shortcuts keep)."""
    msg, line = pl.col("msg"), pl.col("line")
    return df.select(
        pl.when(line.str.contains(r"^\s*$")).then(pl.lit("blank"))
        .when((msg.str.slice(0, 12) == "Decode batch") | (~pl.col("_pfx") & line.str.contains(r"^#running-req:"))).then(pl.lit("decode"))
        .when(msg.str.contains(r"^(?:Prefill? batch|new fill batch)")).then(pl.lit("prefill"))
        .when(msg.str.contains(LOOKS_LIKE)).then(pl.lit("http"))
        .otherwise(pl.lit("event"))
    ).to_series()


SPACES = " \t\x0b\x0c\r\u0085\u00a0\u1680\u2003\u2028\u202f\u205f\u3000"
piece = st.sampled_from(["", " ", "\t", "\u00a0", "\u2003", "\u3000", "\u0085", "x", "#running-req: 3", "#running-req:",
                         "(SchedulerActor pid=1, ip=1) ", "[2026-02-19 00:27:16 TP0] ", "[2026-02-19 00:27:16] ",
                         "Decode batch, #running-req: 1", "Prefill batch, #new-seq: 1", 'INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK',
                         "é", "\x1b[32m", "  File \"x.py\", line 1", "Prefil batch, #new-seq: 1", "new fill batch. #seq: 1",
                         "Prefill batc", "new fill bat", "Prefill batcher", 'WARNING:  ::1:80 - "', "INFO: x", "INFO:"])
line = st.one_of(st.lists(piece, max_size=4).map("".join), st.text(SPACES + "#(x", max_size=6))


def families(lines: list[str]) -> tuple[pl.Series, pl.Series]:
    frame = lines_frame("\n".join(lines).encode() + b"\n", 1, 0)
    from loglens.parsers.prefix import strip_ansi

    df = split_prefix(strip_ansi(frame))
    got = pipeline._family(df).get_column("family").cast(pl.String)
    return got, reference(df)  # (glued lines are found later, by the family's parser: test_glued.py)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(line, min_size=1, max_size=20))
@example(["", " ", "\u00a0", "\u3000 ", "  x", "\t#running-req: 1", "#running-req: 2, #token: 3", "(p) #running-req: 4", "\x1b[32m  \x1b[0m"])
def test_first_byte_shortcuts_equal_the_regex_rule(lines):
    got, want = families(lines)
    assert got.to_list() == want.to_list(), list(zip(lines, got.to_list(), want.to_list()))


def test_frames_without_the_first_byte_column_get_it():
    frame = lines_frame(b"  \n#running-req: 1\n(x) y\n\n", 1, 0).drop("_first")
    out = pipeline.LineParser().feed(frame, final=True)
    assert out.blank_lines == 2 and out.tables["decode"].height == 1
