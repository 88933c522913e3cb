"""Property tests: the parser never raises, accounts for every line, and does not care how
its input is cut into batches."""

from __future__ import annotations

from contextlib import contextmanager

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from parse_util import covered_lines, parse_bytes, rows_as_records

LINES = [
    b"[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, gen throughput (token/s): 170.24, #queue-req: 0",
    b"[2025-07-25 08:15:41] Prefill batch. #new-seq: 4, #new-token: 2048, #cached-token: 512, token usage: 0.03, #running-req: 12, #queue-req: 3, ",
    b'[2026-02-19 00:27:12] INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK',
    b"[2025-06-26 02:16:20 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    b'  File "/x/scheduler.py", line 2620, in run_scheduler_process',
    b"ValueError: Failed to allocate token prealloc indices",
    b"",
    b"During handling of the above exception, another exception occurred:",
    b"[2026-02-19 01:02:11 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_tokens_gained: 1024, #new_token_ratio: 0.7000 -> 0.8500",
    b"[14:03:27 TP0] Decode batch. #running-req: 8, #token: 2310, token usage: 0.02, gen throughput (token/s): 512.34, #queue-req: 0",
    b"[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 27, #tok",
    b"\x1b[32mINFO\x1b[0m:     ::1:5 - \"GET /health HTTP/1.1\" 200 OK",
    b"random words \xff\xfe here\r",
]

lines_strategy = st.lists(st.one_of(st.sampled_from(LINES), st.binary(max_size=80).map(lambda b: b.replace(b"\n", b" "))), min_size=1, max_size=40)


def _accounted(tables):
    lines = covered_lines(tables)
    info = tables["_blank"].row(0, named=True)
    return len(lines) == len(set(lines)) and len(lines) + info["blank_lines"] == info["lines"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_crash_and_every_line_is_accounted(data):
    tables = parse_bytes(data)
    assert _accounted(tables)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines_strategy, st.lists(st.integers(min_value=1, max_value=39), max_size=6))
def test_same_rows_however_the_input_is_split(lines, cuts):
    data = b"\n".join(lines) + b"\n"
    whole = parse_bytes(data)
    pieces = parse_bytes(data, splits=cuts)
    assert rows_as_records(whole) == rows_as_records(pieces)
    assert _accounted(whole) and _accounted(pieces)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(["INFO", "WARNING", "ERROR"]),
    st.sampled_from(["127.0.0.1", "::1", "10.1.2.3", "[::1]", "unix"]),
    st.one_of(st.none(), st.integers(0, 65535)),
    st.sampled_from(["GET", "POST", "DELETE", "PATCH"]),
    st.text(alphabet=st.characters(blacklist_categories=("Zs", "Cc", "Cs")), min_size=1, max_size=30),
    st.sampled_from(["1.0", "1.1", "2"]),
    st.integers(100, 599),
    st.sampled_from(["", " OK", " Not Found", " Internal Server Error"]),
)
def test_access_split_path_agrees_with_the_regex(level, addr, port, method, path, version, status, phrase):
    import polars as pl

    from loglens.parsers.access import _FIELDS, _by_regex, _by_split

    who = f"{addr}:{port}" if port is not None else addr
    msg = f'{level}:{" " * (9 - len(level) - 1)}{who} - "{method} {path} HTTP/{version}" {status}{phrase}'
    df = pl.DataFrame({"line_no": [1], "msg": [msg], "line": [msg]})
    split = _by_split(df)
    if split.item(0, "_ok"):
        assert split.select(_FIELDS).row(0) == _by_regex(df).select(_FIELDS).row(0), msg


_ODD = st.sampled_from(["", "1,5", "2 ", "7%", "0.5, x: 1", "nan", "x", "-3"])


def _value(key: str):
    """A well-formed value for the key, now and then an odd one."""
    good = (st.sampled_from(["True", "False"]) if key == "cuda graph"
            else st.floats(0, 1e5, allow_nan=False).map(lambda f: f"{f:.2f}") if "usage" in key or "throughput" in key
            else st.integers(0, 10**6).map(str))
    return st.one_of(good, good, good, _ODD)


_KEYS = {"decode": ["#running-req", "#token", "token usage", "cuda graph", "gen throughput (token/s)", "#queue-req"],
         "prefill": ["#new-seq", "#new-token", "#cached-token", "token usage", "#running-req", "#queue-req",
                     "input throughput (token/s)", "cuda graph"]}
_LINE = st.sampled_from(["decode", "prefill"]).flatmap(
    lambda t: st.tuples(st.just(t), st.tuples(*[_value(k) for k in _KEYS[t]]),
                        st.sampled_from(["", "", ", ", " ", ", extra: 1", ",", ",  ", ", , x: 1"])))
_OK = {"decode": ("1", "2", "0.5", "True", "3.25", "0"), "prefill": ("1", "2", "3", "0.5", "4", "0", "9.5", "False")}


@contextmanager
def _plans_restored():
    """The batch parser's shared plan registries and switches, put back as they were."""
    from loglens.parsers import batch_lines

    saved = dict(batch_lines._HITS), dict(batch_lines._PLANS)
    try:
        yield batch_lines
    finally:
        batch_lines.VECTORIZED = True
        batch_lines._HITS.clear()
        batch_lines._HITS.update(saved[0])
        batch_lines._PLANS.clear()
        batch_lines._PLANS.update(saved[1])


def _assert_same_parse(a, b, lines):
    """(rows, rejects, unknown keys) of two parses of the same lines are equal."""
    for x, y in zip(a[:2], b[:2]):
        assert (x.height == y.height == 0) or x.select(sorted(x.columns)).sort("line_no").equals(
            y.select(sorted(y.columns)).sort("line_no")), lines
    assert a[2] == b[2]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, min_size=1, max_size=12), st.sampled_from([", ", ". ", ".", " [7], "]),
       st.sampled_from(["", ", "]))
@example([("decode", _OK["decode"], ", extra: 1"), ("prefill", _OK["prefill"], ", , x: 1")], ", ", "")
@example([("decode", _OK["decode"], ", , x: 1"), ("prefill", _OK["prefill"], ", extra: 1")], ". ", ", ")
@example([("decode", _OK["decode"], ""), ("prefill", _OK["prefill"], ", ")], ". ", "")
def test_batch_split_path_agrees_with_the_tolerant_path(specs, sep, primed_tail):
    """Lines the fast path takes (a known shape: `, ` or `. ` header, trailing `, ` or not)
    give exactly the rows and rejects the tolerant path gives, whatever the values hold."""
    import polars as pl

    keys = _KEYS
    header = {"decode": "Decode batch" + sep, "prefill": "Prefill batch" + sep}
    msgs = {"decode": [], "prefill": []}
    for table, values, tail in specs:
        body = ", ".join(f"{k}: {v}" for k, v in zip(keys[table], values))
        msgs[table].append(header[table] + body + tail)
    with _plans_restored() as batch_lines:
        for table, lines in msgs.items():
            if not lines:
                continue
            df = pl.DataFrame({"line_no": range(1, len(lines) + 1), "line": lines, "msg": lines})
            batch_lines._HITS.clear()
            slow = batch_lines.parse_batch_lines(df, table)
            # prime the fast path with the clean shape only, as a clean line of it would
            batch_lines._HITS.clear()
            clean = header[table] + ", ".join(f"{k}: 1" for k in keys[table]) + primed_tail
            batch_lines.parse_batch_lines(pl.DataFrame({"line_no": [0], "line": [clean], "msg": [clean]}), table)
            _assert_same_parse(batch_lines.parse_batch_lines(df, table), slow, lines)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, min_size=1, max_size=24), st.lists(st.sampled_from([", ", ". ", " [7], "]), min_size=1, max_size=3))
@example([("decode", _OK["decode"], "")] * 9 + [("decode", _OK["decode"], ", x: 1")], [", "])
def test_first_batch_counts_shapes_on_its_head_then_takes_the_fast_path(specs, seps):
    """A fresh process (no shape counts) parses a batch's first CENSUS lines by the tolerant
    path and the rest by the fast path with the shapes counted: same rows, rejects and unknown
    keys as the tolerant path alone."""
    import polars as pl

    msgs = {"decode": [], "prefill": []}
    for i, (table, values, tail) in enumerate(specs):
        head = {"decode": "Decode batch", "prefill": "Prefill batch"}[table] + seps[i % len(seps)]
        msgs[table].append(head + ", ".join(f"{k}: {v}" for k, v in zip(_KEYS[table], values)) + tail)
    with _plans_restored() as batch_lines:
        saved = batch_lines.CENSUS, batch_lines.FAST_SHAPES
        try:
            for table, lines in msgs.items():
                if not lines:
                    continue
                df = pl.DataFrame({"line_no": range(1, len(lines) + 1), "line": lines, "msg": lines})
                batch_lines._HITS.clear()
                batch_lines.CENSUS, batch_lines.FAST_SHAPES = 10**9, 0
                slow = batch_lines.parse_batch_lines(df, table)
                batch_lines._HITS.clear()
                batch_lines.CENSUS, batch_lines.FAST_SHAPES = 3, saved[1]
                _assert_same_parse(batch_lines.parse_batch_lines(df, table), slow, lines)
        finally:
            batch_lines.CENSUS, batch_lines.FAST_SHAPES = saved


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, min_size=1, max_size=16), st.lists(st.sampled_from([", ", ". ", ".", " [7], ", " [7]. ", ""]), min_size=1, max_size=4),
       st.lists(st.integers(0, 7), min_size=1, max_size=16))
def test_batch_one_pass_agrees_with_one_pass_per_shape(specs, seps, drops):
    """The tolerant path cuts all shapes of a batch in one pass; cutting each shape on its own
    gives the same rows, rejects and unknown-key counts (lines of many shapes, odd values)."""
    import polars as pl

    msgs = {"decode": [], "prefill": []}
    for i, (table, values, tail) in enumerate(specs):
        pairs = [f"{k}: {v}" for k, v in zip(_KEYS[table], values)]
        d = drops[i % len(drops)]
        if d < len(pairs) and d > 0:
            del pairs[d]  # another shape
        head = {"decode": "Decode batch", "prefill": "Prefill batch"}[table] + seps[i % len(seps)]
        msgs[table].append(head + ", ".join(pairs) + tail)
    with _plans_restored() as batch_lines:
        for table, lines in msgs.items():
            if not lines:
                continue
            df = pl.DataFrame({"line_no": range(1, len(lines) + 1), "line": lines, "msg": lines})
            got = []
            for vectorized in (True, False):
                batch_lines._HITS.clear()
                batch_lines.VECTORIZED = vectorized
                got.append(batch_lines.parse_batch_lines(df, table))
            _assert_same_parse(*got, lines)
