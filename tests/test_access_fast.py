"""The access-line parser's fast path (one split, then each distinct half matched once) gives
exactly what the reference grammar `_ACCESS` gives on its own: the same rows, values, dtypes
and order, and the same rejects, for valid lines and damaged ones."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loglens.parsers.access import _FIELDS, _ORDER, _REASON, _by_regex, _by_split, parse_access
from loglens.parsers.glued import set_aside_glued

# characters that make a piece odd: whitespace other than a space (\s is Unicode-aware in the
# grammar), non-ASCII letters and digits (\d is too), quotes, colons, separators' parts
_ODD = "aZ09.:/-\" \t\u00a0\u2028\x0b\r\n\x00é٣%[]?=&_"
_odd = st.text(alphabet=_ODD, max_size=8)

_LEVELS = ["INFO", "WARNING", "ERROR", "DEBUG", "CRITICAL", "TRACE"]

#: each piece of a line: (well-formed values, odd values); a line has at most two odd pieces,
#: since a damaged piece is interesting when the rest is not
_PIECES = {
    "level": (st.sampled_from(_LEVELS), st.sampled_from(["WARN", "info", "", "INFO ", "xINFO", "[INFO]"])),
    "pad": (st.none(), st.text(alphabet=" \t\u00a0", max_size=4)),  # None: uvicorn's padding to 10
    "addr": (st.sampled_from(["127.0.0.1", "::1", "10.1.2.3", "[::1]", "unix", "fe80::1%eth0", "host.example", "é"]),
             st.one_of(st.sampled_from(["a:1", "1:", ":", "", "1.2.3.4:"]), _odd)),
    "port": (st.one_of(st.none(), st.integers(0, 65535).map(str)),
             st.sampled_from(["05", "+5", "-1", "99999999999", "\u0663\u0663", "", "1a", "0", ":1"])),
    "method": (st.sampled_from(["GET", "POST", "DELETE", "PATCH"]), _odd),
    "path": (st.sampled_from(["/generate", "/v1/chat/completions", "/health?x=1&y=%20", '/a"b', "/é", "/:1", '/ - "x']), _odd),
    "version": (st.sampled_from(["1.0", "1.1", "2", "2.0", "\u0662"]), st.sampled_from(["11", "1.x", "", "1.1 ", "1."])),
    "status": (st.integers(100, 599).map(str), st.sampled_from(["20", "2000", "\u0662\u0660\u0660", "+12", "abc", "012", ""])),
    "phrase": (st.sampled_from(["", " OK", " Not Found", " Internal Server Error", ' OK - "x', " é", "  two", " "]),
               st.one_of(st.sampled_from(["\tOK", "OK", "\nOK"]), _odd)),
}


@st.composite
def _access_msg(draw) -> str:
    odd = set(draw(st.lists(st.sampled_from([*_PIECES, "none", "none", "none"]), max_size=2)))
    v = {name: draw(pair[name in odd]) for name, pair in _PIECES.items()}
    prefix = f"{v['level']}:" + (" " * max(1, 9 - len(v["level"])) if v["pad"] is None else v["pad"])
    who = v["addr"] + ("" if v["port"] is None else f":{v['port']}")
    msg = f'{prefix}{who} - "{v["method"]} {v["path"]} HTTP/{v["version"]}" {v["status"]}{v["phrase"]}'
    damage = draw(st.sampled_from(["none"] * 5 + ["cut", "append", "insert", "glue"]))
    if damage == "cut":
        msg = msg[: draw(st.integers(0, len(msg)))]
    elif damage == "append":
        msg += draw(st.text(alphabet=_ODD, min_size=1, max_size=6))
    elif damage == "insert":
        at = draw(st.integers(0, len(msg)))
        msg = msg[:at] + draw(st.text(alphabet=_ODD, min_size=1, max_size=3)) + msg[at:]
    elif damage == "glue":  # another line's prefix (and maybe message) inside this one
        at = draw(st.integers(0, len(msg)))
        msg = msg[:at] + draw(st.sampled_from(["[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 1", "[2026-02-19 00:27:16] ", "[2026-02-19 00:27:16"])) + msg[at:]
    return msg


def _frame(msgs: list[str | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "line_no": pl.Series(range(1, len(msgs) + 1), dtype=pl.Int64),
            "line": pl.Series([None if m is None else f"[2026-02-19 00:27:12] {m}" for m in msgs], dtype=pl.String),
            "tp_rank": pl.Series([None] * len(msgs), dtype=pl.Int32),  # a prefix column riding along
            "msg": pl.Series(msgs, dtype=pl.String),
            "family": pl.Series(["http"] * len(msgs), dtype=pl.String),
        }
    )


def _reference(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`parse_access` by the regex alone, on every line that is not two lines glued into one
    (those are set aside first, by the rule in `glued`)."""
    rest, glued = set_aside_glued(df)
    out = _by_regex(rest)
    bad = out.filter(pl.col("status").is_null())
    rejects = bad.select("line_no", pl.col("line").alias("raw"), pl.lit(_REASON).alias("reason"), pl.lit("http").alias("family"))
    if glued is not None:
        rejects = pl.concat([rejects, glued]).sort("line_no")
    good = out.filter(pl.col("status").is_not_null())
    drop = {"line", "msg", "family", "byte_off", *_FIELDS}
    return good.select(*(c for c in good.columns if c not in drop and not c.startswith("_")), *_ORDER), rejects


def _assert_same(msgs: list[str | None]) -> None:
    df = _frame(msgs)
    (good, bad), (ref_good, ref_bad) = parse_access(df), _reference(df)
    assert good.schema == ref_good.schema and bad.schema == ref_bad.schema, msgs
    assert good.equals(ref_good), (msgs, good.to_dicts(), ref_good.to_dicts())
    assert bad.equals(ref_bad), (msgs, bad.to_dicts(), ref_bad.to_dicts())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_access_msg(), min_size=1, max_size=12))
@example(['INFO:     é:5 - "GET / HTTP/1.1" 200 OK'])  # byte offsets, not characters
@example(['INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 1'])  # glued
@example(['INFO:     1.2.3.4:5 - "GET /x HTTP/\u0662" 200 OK'])  # a non-ASCII digit in the version
@example(['INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK - "x'])  # the separator again in the phrase
@example(['INFO:     a:1:2 - "GET / HTTP/1.1" 200 ', 'INFO:     :5 - "GET / HTTP/1.1" 200 OK'])
@example(['INFO:     1.2.3.4:\u0663 - "GET / HTTP/1.1" 200 OK', 'INFO:     1.2.3.4:+5 - "GET / HTTP/1.1" 200 OK'])
@example(['INFO:     1\u20282:5 - "GET / HTTP/1.1" 200 OK', 'TRACE:    x:1 - "GET /\u2028 HTTP/1.1" 200 OK'])
@example(['xINFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK', 'INFO:     1.2.3.4: - "GET / HTTP/1.1" 200 OK'])
@example(['INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK\nzz', 'INFO:     1.2.3.4:5 - "GET /ge', "INFO:     1.2.3.4:5"])
def test_parse_access_is_the_reference_grammar_row_for_row(msgs):
    _assert_same(msgs)
    # repeated lines: the distinct values are matched once and mapped back (mostly distinct
    # ones are matched row by row)
    _assert_same(msgs * 3)


def test_edge_frames():
    _assert_same([])
    _assert_same([None, 'INFO:     ::1:33670 - "POST /generate HTTP/1.1" 200 OK', None])
    _assert_same(['INFO:     1.2.3.4:99999999999 - "GET / HTTP/1.1" 200 OK', 'INFO:     ::1 - "GET / HTTP/1.0" 200'])
    _assert_same(['\x00INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK', 'INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK\x00'])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_LEVELS),
            st.sampled_from(["127.0.0.1", "::1", "10.0.1.7", "[::1]", "fe80::1%eth0", "é"]),
            st.integers(0, 65535),
            st.sampled_from(["GET", "POST", "DELETE"]),
            st.sampled_from(["/generate", "/v1/chat/completions", "/health?x=1", "/é"]),
            st.sampled_from(["1.0", "1.1", "2"]),
            st.integers(100, 599),
            st.sampled_from(["", " OK", " Not Found", " Internal Server Error"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_well_formed_lines_take_the_fast_path(rows):
    """Not only equal: the common shapes are parsed by the fast path, not left to the regex."""
    msgs = [f'{lv}:{" " * (9 - len(lv))}{a}:{p} - "{m} {path} HTTP/{v}" {s}{ph}' for lv, a, p, m, path, v, s, ph in rows]
    for lines in (msgs, msgs * 3):  # matched row by row, and through the table of distinct values
        assert _by_split(_frame(lines)).get_column("_ok").all(), lines
        _assert_same(lines)
