""".gz logs: the reader gives exactly gzip's content (members, padding, any read sizes); a
truncated or damaged file gives every byte that decompresses, says why it stopped, and ingest
keeps those lines (a clear note, no traceback, nothing lost that could be read)."""

from __future__ import annotations

import gzip
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loglens import gz
from loglens.ingest import ingest_paths
from loglens.reader import logical_size, read_range
from loglens.store import Store
from loglens.summary import summarize

LINE = "[2026-02-19 00:27:{s:02d} TP0] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, gen throughput (token/s): 170.24, #queue-req: 0\n"


def _read_all(path, sizes) -> tuple[bytes, str | None]:
    out = []
    with gz.GzipReader(path) as f:
        i = 0
        while True:
            block = f.read(sizes[i % len(sizes)])
            i += 1
            if not block:
                return b"".join(out), f.problem
            out.append(block)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 3000), max_size=3),
       sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=4), padding=st.integers(0, 3),
       small=st.booleans())
def test_reader_gives_gzips_content(tmp_path_factory, data, cuts, sizes, padding, small):
    """Members (the content cut at `cuts`), zero padding after them, any read sizes, and tiny
    compressed blocks and zlib steps (so every boundary is crossed): the same bytes as gzip."""
    bounds = sorted({0, len(data), *[c for c in cuts if c <= len(data)]})
    members = b"".join(gzip.compress(data[a:b]) for a, b in zip(bounds, bounds[1:])) or gzip.compress(b"")
    path = tmp_path_factory.mktemp("gz") / "x.log.gz"
    path.write_bytes(members + b"\x00" * padding)
    block, step = gz.BLOCK, gz.STEP
    try:
        if small:
            gz.BLOCK, gz.STEP = 7, 5
        got, problem = _read_all(path, sizes)
    finally:
        gz.BLOCK, gz.STEP = block, step
    assert got == gzip.decompress(members) == data and problem is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 400), cut=st.floats(0.05, 0.95))
def test_a_truncated_file_gives_what_decompresses_and_says_so(tmp_path_factory, n, cut):
    content = "".join(LINE.format(s=i % 60) for i in range(n)).encode()
    whole = gzip.compress(content)
    path = tmp_path_factory.mktemp("gz") / "cut.log.gz"
    path.write_bytes(whole[: max(11, int(len(whole) * cut))])
    got, problem = _read_all(path, [4096])
    assert content.startswith(got) and len(got) < len(content)
    assert problem is not None and "ends early" in problem
    # what zlib itself can decompress from the same bytes is all there is
    assert len(got) == len(zlib.decompressobj(31).decompress(path.read_bytes()))
    assert logical_size(path) == len(got) and read_range(path, 0, 10**9) == got


def test_trailing_garbage_and_damage_stop_with_a_reason(tmp_path):
    good = gzip.compress(b"a line\n" * 50)
    (tmp_path / "tail.log.gz").write_bytes(good + b"this is not gzip")
    got, problem = _read_all(tmp_path / "tail.log.gz", [100])
    assert got == b"a line\n" * 50 and "not gzip data" in problem
    bad = bytearray(good)
    bad[20:30] = b"\xff" * 10
    (tmp_path / "bad.log.gz").write_bytes(bytes(bad))
    got, problem = _read_all(tmp_path / "bad.log.gz", [100])
    # (deflate has no check before a member's end: what comes out before the damage is found may
    # be garbage, which ingest keeps as lines like any other bytes)
    assert problem is not None


def test_ingest_keeps_the_lines_of_a_truncated_gz_and_notes_why(tmp_path):
    content = "".join(LINE.format(s=i % 60) for i in range(300)).encode()
    whole = gzip.compress(content)
    log = tmp_path / "server.log.gz"
    log.write_bytes(whole[: len(whole) // 2])
    st_ = Store(tmp_path / "st")
    rep = ingest_paths([log], st_)[0]
    readable = zlib.decompressobj(31).decompress(log.read_bytes())
    assert rep.status == "new" and "ends early" in rep.note
    assert rep.lines == readable.count(b"\n") + (not readable.endswith(b"\n"))
    assert rep.rows["decode"] >= readable.count(b"\n") - 1
    files = summarize(st_)["files"]
    assert files[0]["all_lines_accounted"]
    assert ingest_paths([log], st_)[0].status == "unchanged"
    # a whole .gz: the same rows as the plain log, in one pass of decompression
    (tmp_path / "whole.log.gz").write_bytes(whole)
    (tmp_path / "plain.log").write_bytes(content)
    a, b = ingest_paths([tmp_path / "whole.log.gz"], Store(tmp_path / "a"))[0], ingest_paths([tmp_path / "plain.log"], Store(tmp_path / "b"))[0]
    assert a.rows == b.rows and a.lines == b.lines == 300 and not a.note


def test_a_gz_line_longer_than_a_chunk_is_read_whole(tmp_path, monkeypatch):
    import loglens.ingest as ingest_mod

    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 2048)
    long = "[2026-02-19 00:27:16 TP0] Scheduler hit an exception: " + "x" * 9000 + "\n"
    text = LINE.format(s=1) * 20 + long + LINE.format(s=2) * 20
    log = tmp_path / "long.log.gz"
    log.write_bytes(gzip.compress(text.encode()))
    st_ = Store(tmp_path / "st")
    rep = ingest_paths([log], st_)[0]
    assert rep.lines == 41 and rep.rows["decode"] == 40 and not rep.note
    ev = st_.read("events")
    assert ev.height == 1 and len(ev["message"][0]) > 9000
