"""The prefix fast path (today's `[YYYY-MM-DD HH:MM:SS[.fff][ RANKS]] ` read by position) gives
exactly what the generic path (every distinct bracket content parsed on its own) gives."""

from __future__ import annotations

from contextlib import contextmanager

import polars as pl
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import loglens.parsers.prefix as prefix


@contextmanager
def generic_only():
    prefix.ISO_FAST = False
    try:
        yield
    finally:
        prefix.ISO_FAST = True


def both(lines: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    df = pl.DataFrame({"line_no": range(1, len(lines) + 1), "line": lines}, schema={"line_no": pl.Int64, "line": pl.String})
    fast = prefix.split_prefix(df)
    with generic_only():
        slow = prefix.split_prefix(df)
    return fast, slow.select(fast.columns)


digits = st.text("0123456789", min_size=1, max_size=2)
rank = st.builds(lambda tok, n: f"{tok}{n}", st.sampled_from(["TP", "DP", "PP", "EP", "ATTN_CP", "MOE_DP", "tp", "X_"]), digits)
# a date-time, sometimes damaged where strptime is lenient (spaces, signs, second 60, `T`)
stamp = st.one_of(
    st.just("2026-02-19 00:27:16"),
    st.builds(lambda y, mo, d, h, mi, s: f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}",
              st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25), st.integers(0, 61), st.integers(0, 61)),
    st.builds(lambda i, c: "2026-02-19 00:27:16"[:i] + c + "2026-02-19 00:27:16"[i + 1:], st.integers(0, 18), st.sampled_from(" +-xT:.0")),
)
frac = st.one_of(st.just(""), st.builds(lambda sep, ds: sep + ds, st.sampled_from(".,"), st.text("0123456789", min_size=0, max_size=7)))
ranks = st.lists(rank, max_size=3).map(lambda rs: "".join(" " + r for r in rs))
after = st.sampled_from(["] ", "]", "]  ", " ] ", "", "]x"])
message = st.sampled_from(["Decode batch, #running-req: 1", 'INFO:     127.0.0.1:1 - "GET / HTTP/1.1" 200 OK', "", "x]y", "[nested] z"])
line = st.one_of(
    st.builds(lambda s, f, r, a, m: f"[{s}{f}{r}{a}{m}", stamp, frac, ranks, after, message),
    st.builds(lambda s, m: f"(SchedulerActor pid=1, ip=10.0.0.1) [{s} TP0] {m}", stamp, message),
    st.text(max_size=40),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# lines come in runs now and then (a log writes many lines a second with the same head)
@given(st.lists(st.tuples(line, st.integers(1, 3)), min_size=1, max_size=20).map(lambda xs: [x for x, n in xs for _ in range(n)]))
@example(["[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 27", "[2026-02-19 00:27:16.318 DP1 TP3] x"])
@example(["[ 026-02-19 00:27:16] x", "[+026-02-19 00:27:16] x", "[2026-02-19 00:27:60] x", "[2026-02- 9 00:27:16] x"])
@example(["[2026-02-30 00:27:16] x", "[2026-02-19 24:00:00] x", "[2026-02-19 00:27:16.1234567] x", "[2026-02-19 00:27:16 TP0 DP1 EP2 PP3]x"])
@example(["[2026-02-19 00:27:16 TP0]", "[2026-02-19 00:27:16,5 TP0]  x", "[2026-02-19 00:27:16 tp0] x", "    # type: ignore[func-returns-value]"])
@example(["[2026-02-19 00:27:16 TP0] a", "[2026-02-19 00:27:16 TP0] b", "[2026-02-19 00:27:16] c", "[+026-02-19 00:27:16] x",
          "[+026-02-19 00:27:16] y", "[2026-02-19 00:27:16.5 TP1] d", "x", "[2026-02-19 00:27:16 TP0] e"])
def test_fast_path_equals_generic(lines):
    fast, slow = both(lines)
    assert fast.equals(slow), pl.concat([fast.with_columns(path=pl.lit("fast")), slow.with_columns(path=pl.lit("generic"))]).sort("line_no")


def test_today_layout_takes_the_fast_path_and_reads_every_field():
    fast, _ = both(["[2026-02-19 00:27:16.318 DP1 TP3] Decode batch, #running-req: 27", "[2026-02-19 00:27:16] INFO:     x"])
    row = fast.row(0, named=True)
    assert (str(row["ts"]), row["dp_rank"], row["tp_rank"], row["msg"]) == ("2026-02-19 00:27:16.318000", 1, 3, "Decode batch, #running-req: 27")
    assert fast.get_column("msg").to_list()[1] == "INFO:     x"


def test_ray_process_prefix_is_split_off_only_where_a_bracket_follows():
    fast, slow = both([
        "(SchedulerActor pid=1234, ip=10.0.0.5) [2026-02-19 00:27:16 TP3] Decode batch, #running-req: 1",
        "(not a ray prefix) text",
        "[2026-02-19 00:27:17 TP0] (x) [y] z",
    ])
    assert fast.equals(slow)
    rows = fast.select("proc", "_pfx", "tp_rank", "msg").rows()
    assert rows == [
        ("SchedulerActor pid=1234, ip=10.0.0.5", True, 3, "Decode batch, #running-req: 1"),
        (None, False, None, "(not a ray prefix) text"),
        (None, True, 0, "(x) [y] z"),
    ]


def test_colour_codes_are_removed_from_the_lines_that_have_them():
    df = pl.DataFrame({"line_no": [1, 2], "line": ["[2026-02-19 00:27:12] \x1b[32mINFO\x1b[0m:     x", "plain [1m"]})
    assert prefix.strip_ansi(df).get_column("line").to_list() == ["[2026-02-19 00:27:12] INFO:     x", "plain [1m"]


def test_a_prefix_is_ascii_and_the_message_starts_right_after_it():
    """Digits in a prefix are ASCII ones (what Python's logging prints): a bracket with other
    Unicode digits (which `\\d` accepts) is no prefix, so the message is never cut by a byte
    offset counted over multi-byte characters."""
    lines = ["[2026-02-19 00:27:16 TP\u0663] Decode batch, #running-req: 1", "[2026-02-19 00:27:16.\u0663 TP0] x",
             "[gpu_id=\u0663] y", "[2026-02-19 00:27:16 TP3] z"]
    fast, slow = both(lines)
    assert fast.equals(slow)
    assert fast.select("_pfx", "msg").rows() == [(False, lines[0]), (False, lines[1]), (False, lines[2]), (True, "z")]
