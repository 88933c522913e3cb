"""`lines_frame` and the chunk helpers against a plain-Python reference on random bytes."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loglens.reader as reader

# pieces that make the interesting cases likely: line endings, runs of \r, short and long runs of
# ASCII, valid multi-byte UTF-8, invalid UTF-8 (lone continuation, truncated sequence, surrogate,
# overlong, past U+10FFFF) and any byte at all
PIECES = st.one_of(
    st.sampled_from([b"\n", b"\r", b"\r\n", b"\r\r\n", b"\n\n", b"a", b"[", b" ", b"\t", b"\x00",
                     b"\xe2\x82\xac", b"\xc3\xa9", b"\xf0\x9f\x98\x80", b"\xff", b"\x80", b"\xc3",
                     b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"]),
    st.integers(0, 300).map(lambda k: b"x" * k),
    st.binary(max_size=20),
)
DATA = st.lists(PIECES, max_size=60).map(b"".join)


def reference(data: bytes, first_line_no: int, first_byte: int) -> pl.DataFrame:
    """Split on `\\n` (a final `\\n` ends the last line), strip every trailing `\\r`, repair UTF-8."""
    parts = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        parts.pop()
    offsets, off = [], first_byte
    for p in parts:
        offsets.append(off)
        off += len(p) + 1
    return pl.DataFrame(
        {
            "line_no": list(range(first_line_no, first_line_no + len(parts))),
            "byte_off": offsets,
            "line": [p.rstrip(b"\r").decode("utf-8", errors="replace") for p in parts],
            "_first": [p.rstrip(b"\r").decode("utf-8", errors="replace").encode("utf-8")[:1] or b"\0" for p in parts],
        },
        schema={"line_no": pl.Int64, "byte_off": pl.Int64, "line": pl.String, "_first": pl.Binary},
    ).with_columns(pl.col("_first").bin.reinterpret(dtype=pl.UInt8))


def check(data: bytes, first_line_no: int = 1, first_byte: int = 0) -> None:
    expected = reference(data, first_line_no, first_byte)
    # bytes, and a memoryview into a larger buffer (as iter_chunks gives)
    inner = memoryview(b"\xff\r\n" + data + b"\r\xff")[3 : 3 + len(data)]
    for chunk in (data, inner):
        got = reader.lines_frame(chunk, first_line_no, first_byte)
        assert got.schema == expected.schema
        assert got.equals(expected), (data, got, expected)
    # the newline positions found while reading, handed over: the same lines, and left as they were
    newlines = reader._newline_positions(inner)
    kept = newlines.copy()
    assert reader.lines_frame(inner, first_line_no, first_byte, newlines).equals(expected)
    assert np.array_equal(newlines, kept)


@settings(max_examples=400, deadline=None)
@given(DATA, st.integers(1, 10**9), st.integers(0, 2**40))
def test_lines_frame_matches_the_reference(data, first_line_no, first_byte):
    check(data, first_line_no, first_byte)


@settings(max_examples=150, deadline=None)
@given(DATA)
def test_every_search_path_and_the_copying_path_match_the_reference(data):
    saved = reader.DENSE_NEWLINES, reader.SERIES_LIMIT, reader.VIEW_LIMIT
    try:
        for series_limit in (saved[1], 0):  # the bytes compared by polars, by numpy (huge chunks)
            reader.SERIES_LIMIT = series_limit
            for dense in (1, 10**18):  # always the bitmap search, always numpy's flatnonzero
                reader.DENSE_NEWLINES = dense
                check(data)
        reader.DENSE_NEWLINES, reader.SERIES_LIMIT = saved[:2]
        reader.VIEW_LIMIT = 0  # every chunk takes the copying path
        check(data)
    finally:
        reader.DENSE_NEWLINES, reader.SERIES_LIMIT, reader.VIEW_LIMIT = saved


@pytest.mark.parametrize("every", [1, 2, 3, 17, 63, 64, 65, 139, 1000])
def test_newline_positions_in_a_large_chunk(every, monkeypatch):
    """Many newlines per 64-bit word or few, and a length that is not a multiple of 64: the same
    positions as `np.flatnonzero`."""
    rng = np.random.default_rng(every)
    size = 3 * 1024 * 1024 + 37
    arr = rng.integers(32, 127, size, dtype=np.uint8)
    arr[rng.integers(0, size, size // every)] = 10
    arr[-1] = 10
    expected = np.flatnonzero(arr == 10)
    for series_limit in (reader.SERIES_LIMIT, 0):
        monkeypatch.setattr(reader, "SERIES_LIMIT", series_limit)
        for dense in (1, 16, 10**18):
            monkeypatch.setattr(reader, "DENSE_NEWLINES", dense)
            got = reader._newline_positions(arr.tobytes())
            assert got.dtype == np.int64 and np.array_equal(got, expected)
        assert np.array_equal(reader._newline_positions(memoryview(arr.tobytes())), expected)  # a view, as chunks are
        assert reader._is_ascii(arr.tobytes()) and not reader._is_ascii(arr.tobytes() + b"\x80")
    monkeypatch.undo()
    # a large chunk of lines: the string views (prefix word, inline short lines) against the reference
    data = arr.tobytes().replace(b"\x7e", b"\r")
    got = reader.lines_frame(memoryview(data), 1, 0)
    expected_lines = reference(data, 1, 0)
    assert got.equals(expected_lines)


@pytest.mark.parametrize("data", [b"", b"\n", b"abc", b"\r", b"\r\r\n\r", b"a\rb\r\n", b"\n" * 70, b"\xff\n\xc3"])
def test_lines_frame_small_cases(data):
    check(data)



def test_a_read_buffer_is_refilled_only_when_no_view_of_it_is_left():
    buffers = reader._Buffers(keep=2)
    first = buffers.get(64)
    view = memoryview(first)[:10]
    assert buffers.get(64) is not first  # a chunk still points into it
    frame = reader.lines_frame(view, 1, 0)
    del view
    assert buffers.get(64) is not first  # the frame's column still points into it
    del frame
    assert buffers.get(64) is first


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([
    b"[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, gen throughput (token/s): 170.24, #queue-req: 0",
    b'[2026-02-19 00:27:12] INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK',
    b"[2026-02-19 00:27:13 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    b'  File "/x/scheduler.py", line 2620, in run_scheduler_process',
    b"ValueError: boom",
    b"",
]), min_size=1, max_size=300), st.integers(200, 3000))
def test_reused_read_buffers_give_the_same_store_as_one_read(tmp_path_factory, lines, chunk):
    """Small chunks make the reader refill its buffers many times while workers still hold
    frames of earlier ones: every table comes out as from a single read of the whole file."""
    from loglens import ingest
    from loglens.store import Store

    tmp = tmp_path_factory.mktemp("reuse")
    log = tmp / "x.log"
    log.write_bytes(b"\n".join(lines) + b"\n")
    stores = []
    for size in (chunk, 1 << 20):
        old = ingest.CHUNK_BYTES
        ingest.CHUNK_BYTES = size
        try:
            store = Store(tmp / f"s{size}")
            ingest.ingest_paths([log], store)
        finally:
            ingest.CHUNK_BYTES = old
        stores.append(store)
    for table in ("decode", "http", "events", "rejects"):
        a, b = (s.read(table).drop("file_id").sort("line_no") for s in stores)
        assert a.equals(b), table
