"""`event_rows` (and `kind_codes`) against the straightforward implementation they replaced.

The reference below is the earlier `parsers/events.py` (a when/then chain of every kind's regex
on every row, a group_by per record, every number's regex on every row), kept verbatim: the fast
path must give the same rows, columns, dtypes, values and order for every input.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import loglens.parsers.events as events
import loglens.parsers.pipeline as pipeline
from loglens.parsers.events import KIND_NAMES, KINDS, kind_codes
from loglens.reader import lines_frame

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------
# the reference (verbatim from the earlier parsers/events.py)


def kind_expr(msg: pl.Expr) -> pl.Expr:
    expr = pl.lit("other")
    for kind, rx in reversed(KINDS):
        expr = pl.when(msg.str.contains(rx)).then(pl.lit(kind)).otherwise(expr)
    return expr


def _num(msg: pl.Expr, rx: str, dtype) -> pl.Expr:
    return msg.str.extract(rx).cast(dtype, strict=False)


def _ref_event_numbers(df: pl.DataFrame) -> pl.DataFrame:
    """Typed numbers for the kinds that carry them (null elsewhere)."""
    m = pl.col("message")
    k = pl.col("kind")
    retr = k == "retraction"
    mtn = k == "max_total_num_tokens"
    return df.with_columns(
        retracted_reqs=pl.when(retr).then(_num(m, r"#retracted_reqs: (\d+)", pl.Int64)),
        new_tokens_gained=pl.when(retr).then(_num(m, r"#new_tokens_gained: (\d+)", pl.Int64)),
        new_token_ratio_before=pl.when(retr).then(_num(m, r"#new_token_ratio: ([\d.]+)", pl.Float64)),
        new_token_ratio_after=pl.when(retr).then(_num(m, r"#new_token_ratio: [\d.]+ -> ([\d.]+)", pl.Float64)),
        max_total_num_tokens=pl.when(mtn).then(_num(m, r"^max_total_num_tokens=(\d+)", pl.Int64)),
        max_running_requests=pl.when(mtn).then(_num(m, r"max_running_requests=(\d+)", pl.Int64)),
        chunked_prefill_size=pl.when(mtn).then(_num(m, r"chunked_prefill_size=(-?\d+)", pl.Int64)),
        max_prefill_tokens=pl.when(mtn).then(_num(m, r"max_prefill_tokens=(\d+)", pl.Int64)),
        context_len=pl.when(mtn).then(_num(m, r"context_len=(\d+)", pl.Int64)),
        kv_tokens=pl.when(k == "kv_cache").then(_num(m, r"#tokens: (\d+)", pl.Int64)),
        elapsed_s=_num(m, r"(?:elapsed[=:] ?|Time elapsed: )([\d.]+) ?s", pl.Float64),
        avail_mem_gb=_num(m, r"avail(?:able_gpu)?[_ ]mem=([\d.]+) ?GB", pl.Float64),
    )


def _ref_records(ev: pl.DataFrame) -> pl.DataFrame:
    """Event lines with `_rec` (computed over all lines) → records.

    Continuation lines join the record above when its head is an error (or a blank line, after
    which traceback text groups on its own).  Continuation lines right after a batch or access
    line are orphans: they group by themselves, a new group at each `Traceback (most recent
    call last):`, so a traceback printed after a Decode line is still one record.

    `_rec` groups are runs of consecutive rows, so "first of the group" is a forward fill from
    the group's first row (much cheaper than window expressions over thousands of groups)."""
    ev = ev.with_columns(_cand=pl.col("_cont"), kind=kind_expr(pl.col("msg")))
    rec_start = (pl.col("_rec") != pl.col("_rec").shift(1)).fill_null(True)
    head_kind = pl.when(rec_start).then(pl.col("kind")).forward_fill()
    cand_first = pl.when(rec_start).then(pl.col("_cand")).forward_fill()
    attached = pl.col("_head_ev") & (head_kind.is_in(["error", "traceback"]) | cand_first)
    orphan = pl.col("_cand") & ~pl.col("_head_ev")
    prev_orphan = pl.when(rec_start).then(pl.lit(False)).otherwise(orphan.shift(1)).fill_null(False)
    first_orphan = orphan & ~prev_orphan
    tb_start = pl.col("line").str.starts_with("Traceback (most recent call last)")
    start = (~pl.col("_cand")) | (~orphan & ~attached) | first_orphan | (orphan & tb_start)
    # every group's first row starts a record, so one running count numbers them all
    return ev.with_columns(_rec=(start | rec_start).cast(pl.Int64).cum_sum())


def _ref_event_rows(ev: pl.DataFrame) -> pl.DataFrame:
    """Event and blank lines (with `_rec`, `_cont`, `_head_ev` computed over all lines) → event rows."""
    if ev.height == 0:
        return pl.DataFrame()
    ev = _ref_records(ev.with_columns(family=pl.col("family")))
    ev = ev.filter(pl.col("family") == "event")
    rec = pl.col("_rec")
    ev = ev.with_columns(_multi=((rec == rec.shift(1)) | (rec == rec.shift(-1))).fill_null(False))
    single = ev.filter(~pl.col("_multi")).with_columns(line_end=pl.col("line_no"), message=pl.col("msg"))
    parts = [single]
    multi = ev.filter(pl.col("_multi")).sort("line_no")
    if multi.height:
        first = (pl.col("_rec") != pl.col("_rec").shift(1)).fill_null(True)
        text = pl.when(first).then(pl.col("msg")).otherwise(pl.col("line"))
        agg = multi.with_columns(_text=text).group_by("_rec").agg(
            pl.all().exclude("_text").first(),
            line_end=pl.col("line_no").max(),
            message=pl.col("_text").str.join("\n"),
        )
        parts.append(agg)
    out = pl.concat(parts, how="diagonal_relaxed").sort("line_no")
    # a record that starts with a bare continuation line (after a blank, say) is traceback text
    out = out.with_columns(kind=pl.when((pl.col("kind") == "other") & pl.col("_cand")).then(pl.lit("traceback")).otherwise(pl.col("kind")))
    out = _ref_event_numbers(out)
    return out.drop([c for c in out.columns if c.startswith("_")] + ["line", "msg", "family", "byte_off"], strict=False)


# ---------------------------------------------------------------------------------------------
# inputs as the pipeline builds them


def _event_inputs(data: bytes, splits: list[int] | None = None) -> list[pl.DataFrame]:
    """The frames `LineParser.feed` passes to `event_rows` for `data` (cut at `splits` lines)."""
    seen: list[pl.DataFrame] = []
    real = pipeline.event_rows

    def spy(ev: pl.DataFrame) -> pl.DataFrame:
        seen.append(ev)
        return real(ev)

    pipeline.event_rows = spy
    try:
        frame = lines_frame(data, 1, 0)
        parser = pipeline.LineParser()
        bounds = [0, *sorted({s for s in splits or [] if 0 < s < frame.height}), frame.height]
        for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
            parser.feed(frame.slice(a, b - a), final=i == len(bounds) - 2)
    finally:
        pipeline.event_rows = real
    return seen


def _same(ev: pl.DataFrame) -> None:
    before = ev.clone()
    got, want = events.event_rows(ev), _ref_event_rows(ev)
    assert got.schema == want.schema
    assert got.equals(want), (got, want)
    assert ev.equals(before)  # the input is not modified


FILES = (
    sorted((ROOT / "parsers" / "samples").glob("*.log"))
    + sorted((ROOT / "tests" / "fixtures" / "realdata").glob("*.log"))
    + sorted((ROOT / "sample_logs" / "bad").glob("*.log"))
    + [ROOT / "sample_logs" / "sglang-glm5.log"]
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_files_give_the_reference_rows(path: Path):
    data = path.read_bytes()
    frames = _event_inputs(data) + _event_inputs(data, splits=[3, 10, 11, 40])
    assert frames or not data
    for ev in frames:
        _same(ev)


def test_all_fixtures_in_one_frame():
    """One big frame holding every fixture: every kind, tracebacks, orphans, blanks, junk."""
    data = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in FILES)
    frames = _event_inputs(data)
    assert sum(f.height for f in frames) > 500
    for ev in frames:
        _same(ev)


# ---------------------------------------------------------------------------------------------
# generated inputs: kinds' example messages, their fragments mixed, tracebacks, random text

_SAMPLES = [
    line.split("] ", 1)[1] if line.startswith("[") else line
    for line in (ROOT / "parsers" / "samples" / "events.log").read_text().splitlines()
    if line and not line.startswith("#")
]
# pieces of every kind's alternatives (and near misses), to put several in one message
_FRAGMENTS = [
    "server_args=", "max_total_num_tokens=1000, chunked_prefill_size=-1, max_prefill_tokens=7, max_running_requests=8, context_len=9",
    "KV Cache is allocated. #tokens: 12", "KV cache pool is full", "Memory pool end", "Load weight begin", "Load weight end",
    "Load weight ", "Capture cuda graph begin", "Capture draft cuda graph end", "Capture cuda graph bs [1, 2]", "Capturing batches",
    "Capture  graph begin", "Capture é graph end", "The server is fired up and ready to roll", "Retract requests",
    "Decode out of memory happened", "Testing retraction", "Cache flushed successfully", "Cache not flushed", "Cache ",
    "is deprecated", "Traceback (most recent call last)", "hit an exception", "Received sigquit", "ValueError: x",
    "torch.OutOfMemoryError(", "Exception:", "MyErrorX: no", "ERROR", "ERROR:", "ERRORS", "[http_server] Error",
    "watchdog timeout", "WARNING", "WARNING:", "WARNINGS", "Warning:", "W0219", "[W0219", "W12", "Receive: obj=",
    "Finish: obj=", "Received: obj=", "INFO:     Started server process [1]", "INFO: Shutting down", "INFO:x",
    "45%|", "٣%|", "%|", "Init torch distributed", "elapsed=1.5 s", "elapsed: 2s", "Time elapsed: 3.0 s",
    "avail mem=3.5 GB", "available_gpu_mem=4 GB", "avail_mem=5GB", "#retracted_reqs: 5, ", "#retracted_reqs: x, ",
    "#new_tokens_gained: 7, ", "#new_token_ratio: 0.5 -> 0.7", "#new_token_ratio: 1.2.3 -> .", "#retracted_reqs: ٣",
    "#", ", ", " -> ", "é", "\\", "  ", "\t", "x",
]
_CONT = [
    "Traceback (most recent call last):", '  File "/x/y.py", line 1, in f', "    raise ValueError('no')",
    "ValueError: no", "During handling of the above exception, another exception occurred:", "[rank0]: boom", "RuntimeError(x)",
]
_OTHER_LINES = [
    "[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, gen throughput (token/s): 170.24, #queue-req: 0",
    '[2026-02-19 00:27:12] INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK',
    "",
]

messages = st.one_of(
    st.sampled_from(_SAMPLES),
    st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=5).map("".join),
    st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=8)), min_size=1, max_size=6).map(" ".join),
    st.text(max_size=40),
).map(lambda s: s.replace("\n", " ").replace("\r", " "))
# retraction lines: the usual layouts (numbers any width, Unicode digits) and scrambled ones
_number = st.one_of(st.integers(0, 10**12).map(str), st.floats(0, 100, allow_nan=False).map(lambda x: f"{x:.4f}"), st.sampled_from(["٣", "1.2.3", ".", "", "-1", "+2", "0x1"]))
retraction_msgs = st.one_of(
    st.tuples(st.sampled_from(["KV cache pool is full. Retract requests. ", "Decode out of memory happened. ", "Retract requests #x ", "Retract requests #new_tokens_gained: 1 ", "#new_token_ratio: 2 -> 3 Retract requests "]),
        _number, st.booleans(), _number, _number, _number,
        st.sampled_from(["", " tail", " #more", " #retracted_reqs: 9", " #new_tokens_gained: 3", " #new_token_ratio: 4 -> 5"]),).map(
        lambda t: f"{t[0]}#retracted_reqs: {t[1]}, " + (f"#new_tokens_gained: {t[3]}, " if t[2] else "") + f"#new_token_ratio: {t[4]} -> {t[5]}{t[6]}"
    ),
    st.tuples(
        st.sampled_from(["Retract requests. ", "Decode out of memory happened. ", "Testing retraction é ", "#Retract requests "]),
        st.lists(st.one_of(st.sampled_from(["#retracted_reqs: ", "#new_tokens_gained: ", "#new_token_ratio: ", ", ", " -> ", "#", " ", "é"]), _number), max_size=12),
    ).map(lambda t: t[0] + "".join(t[1])),
)
messages = st.one_of(messages, retraction_msgs)
lines = st.one_of(
    messages.map(lambda m: f"[2026-02-19 00:27:16 TP0] {m}"),
    messages,
    st.sampled_from(_CONT),
    st.sampled_from(_OTHER_LINES),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages, min_size=1, max_size=30))
@example(["WARNINGS x", "ERROR", "Receive: obj=Retract requests", "Capture x graph begin is deprecated", "", "٣%|"])
def test_kind_codes_is_kind_expr(msgs):
    s = pl.Series("m", msgs + [None], dtype=pl.String)
    want = pl.select(kind_expr(pl.lit(s))).to_series()
    got = pl.Series(KIND_NAMES).gather(kind_codes(s))
    assert got.to_list() == want.to_list()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages, min_size=1, max_size=25))
def test_one_line_records_give_the_reference_rows(msgs):
    """Each message its own event line (kinds and numbers, no grouping)."""
    n = len(msgs)
    ev = pl.DataFrame(
        {
            "line_no": pl.Series(range(1, n + 1), dtype=pl.Int64),
            "line": msgs,
            "msg": msgs,
            "family": pl.Series(["event"] * n, dtype=pipeline.FAMILY),
            "_cont": [False] * n,
            "_rec": pl.Series(range(n), dtype=pl.UInt32),
            "_head_ev": [True] * n,
        }
    )
    _same(ev)


def test_input_columns_named_like_output_columns_are_replaced_in_place():
    """Not something the pipeline passes, but the earlier code replaced such a column in place."""
    data = (ROOT / "parsers" / "samples" / "events.log").read_bytes()
    for ev in _event_inputs(data):
        _same(ev.with_columns(kind=pl.lit("x"), elapsed_s=pl.lit(1.0)).select("kind", pl.all().exclude("kind")))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages, min_size=1, max_size=25))
def test_event_numbers_is_the_reference(msgs):
    df = pl.DataFrame({"message": msgs + [None], "kind": pl.select(kind_expr(pl.lit(pl.Series(msgs + [None], dtype=pl.String)))).to_series()})
    got, want = events.event_numbers(df), _ref_event_numbers(df)
    assert got.schema == want.schema and got.equals(want)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines, min_size=1, max_size=40), st.lists(st.integers(1, 39), max_size=4))
def test_generated_logs_give_the_reference_rows(log_lines, cuts):
    data = ("\n".join(log_lines) + "\n").encode()
    for ev in _event_inputs(data, splits=cuts):
        _same(ev)
