"""Ingest: idempotence, growth, rewritten files, .gz, directories, bad input, CLI errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from loglens.cli import app
from loglens.ingest import ingest_paths
from loglens.store import Store
from loglens.summary import summarize

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "sample_logs" / "bad"
D = "[2026-02-19 00:27:{s:02d} TP0] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, gen throughput (token/s): 170.24, #queue-req: 0\n"
H = '[2026-02-19 00:27:{s:02d}] INFO:     127.0.0.1:33670 - "POST /generate HTTP/1.1" 200 OK\n'
runner = CliRunner()


def counts(store: Store) -> dict[str, int]:
    return {t: store.read(t).height for t in ("decode", "prefill", "http", "events", "rejects")}


def write(p: Path, text: str, mode: str = "w") -> Path:
    with open(p, mode, encoding="utf-8") as f:
        f.write(text)
    return p


def test_same_bytes_twice_add_nothing_and_growth_adds_only_new_lines(tmp_path):
    log = write(tmp_path / "a.log", "".join(D.format(s=i) + H.format(s=i) for i in range(10)))
    st = Store(tmp_path / "st")
    ingest_paths([log], st)
    assert counts(st) == {"decode": 10, "prefill": 0, "http": 10, "events": 0, "rejects": 0}
    r = ingest_paths([log], st)[0]
    assert r.status == "unchanged" and counts(st)["decode"] == 10
    write(log, D.format(s=50) + "[2026-02-19 00:27:51] a traceback follows: Traceback (most recent call last):\n", "a")
    ingest_paths([log], st)
    write(log, '  File "x.py", line 1\nValueError: x\n' + H.format(s=52), "a")
    r = ingest_paths([log], st)[0]
    assert r.status == "grown"
    c = counts(st)
    assert (c["decode"], c["http"], c["events"]) == (11, 11, 1)
    ev = st.read("events").row(0, named=True)
    assert (ev["line_no"], ev["line_end"]) == (22, 24)
    assert st.read("decode").get_column("line_no").is_unique().all()
    f = summarize(st)["files"][0]
    assert f["all_lines_accounted"] and f["lines"] == 25


def test_partial_last_line_is_kept_then_completed_without_duplicates(tmp_path):
    log = write(tmp_path / "p.log", D.format(s=1) + D.format(s=2)[:60])
    st = Store(tmp_path / "st")
    ingest_paths([log], st)
    assert counts(st)["decode"] == 1 and counts(st)["rejects"] == 1  # the cut line is not lost
    write(log, D.format(s=2)[60:], "a")
    ingest_paths([log], st)
    c = counts(st)
    assert c["decode"] == 2 and c["rejects"] == 0


def test_other_file_under_the_same_name_is_a_new_lineage(tmp_path):
    log = write(tmp_path / "a.log", D.format(s=1) * 3)
    st = Store(tmp_path / "st")
    first = ingest_paths([log], st)[0]
    write(log, H.format(s=9) * 2)
    second = ingest_paths([log], st)[0]
    assert second.status == "new" and second.file_id != first.file_id
    assert counts(st)["decode"] == 3 and counts(st)["http"] == 2


def test_gzip_and_directories(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    write(d / "one.log", D.format(s=1) * 4)
    with gzip.open(d / "two.log.gz", "wt") as f:
        f.write(H.format(s=1) * 3)
    st = Store(tmp_path / "st")
    ingest_paths([d], st)
    c = counts(st)
    assert c["decode"] == 4 and c["http"] == 3
    assert ingest_paths([d], st)[0].status == "unchanged"


def test_bad_inputs_are_rows_or_rejects_never_lost(tmp_path):
    st = Store(tmp_path / "st")
    reports = ingest_paths([BAD], st)
    assert len(reports) == len(list(BAD.glob("*.log")))
    s = summarize(st)
    assert all(f["all_lines_accounted"] for f in s["files"])
    reasons = {r["reason"] for r in s["rejects"]}
    assert any("truncated" in r for r in reasons) and any("glued" in r for r in reasons)
    unknown = {k for f in s["files"] for k in f["unknown_keys"]}
    assert {"new future field", "#brand-new"} <= unknown


def test_ten_megabyte_line(tmp_path):
    log = write(tmp_path / "long.log", D.format(s=1) + "x" * (10 * 1024 * 1024) + "\n" + D.format(s=2))
    st = Store(tmp_path / "st")
    ingest_paths([log], st)
    assert counts(st)["decode"] == 2 and counts(st)["events"] == 1


def test_atomic_files_only(tmp_path):
    log = write(tmp_path / "a.log", D.format(s=1))
    st = Store(tmp_path / "st")
    ingest_paths([log], st)
    assert not list((tmp_path / "st").rglob("*.tmp"))
    df = pl.scan_parquet(str(tmp_path / "st" / "decode" / "**" / "*.parquet")).collect()
    assert df.height == 1


def test_cli_ingest_summary_and_errors(tmp_path):
    log = write(tmp_path / "a.log", D.format(s=1) + H.format(s=2))
    st = str(tmp_path / "st")
    r = runner.invoke(app, ["ingest", str(log), "--store", st])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["summary", "--store", st, "--json"])
    assert r.exit_code == 0 and '"all_lines_accounted": true' in r.output
    r = runner.invoke(app, ["ingest", str(tmp_path / "missing.log"), "--store", st])
    assert r.exit_code == 1 and "Error:" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["summary", "--store", str(tmp_path / "nothing")])
    assert r.exit_code == 1 and "Error:" in r.output
    r = runner.invoke(app, ["ingest", "--no-such-flag", str(log)])
    assert r.exit_code == 2


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_bad_worker_thread_count_is_a_clear_error(tmp_path, monkeypatch, value):
    log = write(tmp_path / "a.log", D.format(s=1))
    monkeypatch.setenv("LOGLENS_PARSE_THREADS", value)
    for command in (["ingest", str(log)], ["tail", str(log), "--no-view"]):  # (tail: at once, not per read)
        r = runner.invoke(app, [*command, "--store", str(tmp_path / "st")])
        assert r.exit_code == 1 and "LOGLENS_PARSE_THREADS" in r.output and "Traceback" not in r.output, command


def test_store_from_environment(tmp_path, monkeypatch):
    log = write(tmp_path / "a.log", D.format(s=1))
    monkeypatch.setenv("LOGLENS_STORE", str(tmp_path / "envstore"))
    r = runner.invoke(app, ["ingest", str(log)])
    assert r.exit_code == 0
    assert Store(tmp_path / "envstore").read("decode").height == 1


def test_drop_rows_from_does_not_touch_a_sibling_lineage(tmp_path):
    from loglens.ingest import drop_rows_from

    st = Store(tmp_path / "st")
    df = pl.DataFrame({"line_no": [1], "source": ["x"], "file_id": ["0123456789abcdef"]})
    st.write("http", df, name="0123456789abcdef-000000000001")
    st.write("http", df.with_columns(file_id=pl.lit("0123456789abcdef-2")), name="0123456789abcdef-2-000000000001")
    drop_rows_from(st, "0123456789abcdef", 1)
    assert [f.name for f in st.files_of("http")] == ["0123456789abcdef-2-000000000001.parquet"]


def _tables(store: Store) -> dict[str, pl.DataFrame]:
    return {t: store.read(t).drop("file_id", "source").sort("line_no") for t in ("decode", "prefill", "http", "events", "rejects", "config")}


@pytest.mark.parametrize("workers", ["1", "2", "3", ""])
def test_chunks_parsed_by_worker_threads_give_the_rows_of_one_piece(tmp_path, monkeypatch, workers):
    """The sample log cut into ~50 chunks of 1 KiB (tracebacks, start-up dump, partial last line)
    and parsed by worker threads (`$LOGLENS_PARSE_THREADS` of them, or the default) gives
    exactly the rows of a single read."""
    import loglens.ingest as ingest

    monkeypatch.setenv("LOGLENS_PARSE_THREADS", workers)

    text = (ROOT / "sample_logs" / "sglang-glm5.log").read_text()
    log = write(tmp_path / "glm5.log", text + "[2026-02-19 01:00:00 TP0] Traceback (most recent call last):\n  File \"x\", line 1\nValueError: x\n[2026-02-19 01:00:01 TP0] Decode batch, #running")
    one = Store(tmp_path / "one")
    ingest_paths([log], one)
    monkeypatch.setattr(ingest, "CHUNK_BYTES", 1024)
    threads = Store(tmp_path / "threads")
    ingest_paths([log], threads)
    expected = _tables(one)
    assert expected["decode"].height > 20 and expected["events"].height > 50 and expected["rejects"].height == 1
    got = _tables(threads)
    for t, df in expected.items():
        assert got[t].equals(df), t
    assert threads.read("files").select("lines", "blank_lines", "resume_line").row(0) == one.read("files").select("lines", "blank_lines", "resume_line").row(0)
    assert len(threads.files_of("decode")) > 10  # the workers did write their parts


def test_lines_of_a_chunk_too_large_for_string_views_are_the_same(monkeypatch):
    """A chunk past the string-view limit (a line of over 2 GiB) takes the copying path: same
    lines, endings stripped the same way, invalid UTF-8 repaired the same way."""
    import loglens.reader as reader

    data = b"[2026-02-19 00:27:16 TP0] a\r\n\n  tb\r\r\nbad \xff byte\nshort\nlast, no newline"
    views = reader.lines_frame(data, 1, 0)
    monkeypatch.setattr(reader, "VIEW_LIMIT", 0)
    copied = reader.lines_frame(data, 1, 0)
    assert copied.equals(views)
    assert copied["line"].to_list() == ["[2026-02-19 00:27:16 TP0] a", "", "  tb", "bad \ufffd byte", "short", "last, no newline"]


def test_colour_codes_are_stripped_in_every_chunk_and_only_where_present(tmp_path, monkeypatch):
    """Chunks without an ESC byte skip the colour-code pass; a chunk with one still gets it,
    also when it is not the first (the reader tells each chunk apart)."""
    import loglens.ingest as ingest

    monkeypatch.setattr(ingest, "CHUNK_BYTES", 4096)
    plain = "[2026-02-19 00:27:12] INFO:     127.0.0.1:1 - \"POST /generate HTTP/1.1\" 200 OK\n" * 200
    coloured = "[2026-02-19 00:27:13] \x1b[32mINFO\x1b[0m:     127.0.0.1:2 - \"GET /health HTTP/1.1\" 200 OK\n" * 3
    log = write(tmp_path / "c.log", plain + coloured + plain)
    store = Store(tmp_path / "s")
    ingest_paths([log], store)
    http = store.read("http")
    assert http.height == 403 and store.read("rejects").height == 0
    assert sorted(http.filter(pl.col("client_port") == 2).get_column("level").unique().to_list()) == ["INFO"]
    assert http.filter(pl.col("client_port") == 2).get_column("path").to_list() == ["/health"] * 3


def test_fewer_chunks_at_once_when_batch_lines_take_the_tolerant_path(monkeypatch):
    """Three workers while the split fast path carries the batch lines; two (TOLERANT_THREADS)
    before any shape is known and when a log mixes many shapes (the tolerant path needs more
    memory per chunk); a worker count the user chose is used as it is."""
    import loglens.ingest as ingest
    from loglens.parsers import batch_lines

    one = {("decode", ",||#running-req:, #token:"): 1000, ("prefill", ",||#new-seq:, #new-token:"): 500}
    many = {("decode", f",||k{i}:"): 100 for i in range(10)}
    for hits, fast, limit in (({}, None, 2), (one, True, 3), ({**one, **many}, False, 2)):
        monkeypatch.setattr(batch_lines, "_HITS", hits)
        assert batch_lines.fast_path_taken() is fast
        assert ingest._busy_limit(ingest.PARSE_THREADS, False) == limit
        assert ingest._busy_limit(5, True) == 5


def test_a_rank_traceback_is_one_record_wherever_the_chunks_are_cut(tmp_path, monkeypatch):
    """torch prints a rank's traceback as `[rank0]: ...` lines, which continue the record above
    although they start with `[`: a chunk is never cut before one, so cutting the log into
    chunks of any size gives the rows of one read."""
    import loglens.ingest as ingest

    lines = []
    for i in range(30):
        lines += [f"[2026-02-19 00:27:{i:02d} TP0] Decode batch, #running-req: 1, #token: 2, token usage: 0.01, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0",
                  f"[2026-02-19 00:27:{i:02d} TP0] Scheduler hit an exception: Traceback (most recent call last):",
                  "[rank0]: Traceback (most recent call last):", '[rank0]:   File "x.py", line 1, in <module>', "[rank0]: ValueError: boom"]
    log = write(tmp_path / "ranks.log", "\n".join(lines) + "\n")
    one = Store(tmp_path / "one")
    ingest_paths([log], one)
    expected = _tables(one)
    assert expected["events"].height == 30 and expected["events"].get_column("line_end").to_list()[0] == 5
    for size in (150, 187, 298, 520, 705):
        monkeypatch.setattr(ingest, "CHUNK_BYTES", size)
        cut = Store(tmp_path / f"cut{size}")
        ingest_paths([log], cut)
        got = _tables(cut)
        for t, df in expected.items():
            assert got[t].equals(df), (size, t)


@pytest.mark.parametrize("gz", [False, True])
def test_the_tail_identity_is_that_of_the_bytes_read_across_chunks(tmp_path, monkeypatch, gz):
    """The files row's tail_sha1 is taken from the bytes as they were read (a .gz file is not
    decompressed again for it): with small chunks the last 4 KiB span several of them, and the
    hash must be that of the file's bytes there, so that the next run finds the file unchanged
    and a grown file resumes where this read stopped."""
    import hashlib

    import loglens.ingest as ingest_mod
    from loglens.reader import TAIL_BYTES, read_range

    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 2048)
    text = "".join(D.format(s=i % 60) for i in range(120))
    log = tmp_path / ("a.log.gz" if gz else "a.log")
    if gz:
        with gzip.open(log, "wt") as f:
            f.write(text)
    else:
        write(log, text)
    st = Store(tmp_path / "st")
    assert ingest_paths([log], st)[0].status == "new"
    row = st.read("files").row(0, named=True)
    br = row["bytes_read"]
    assert br == len(text) == row["size_bytes"] and counts(st)["decode"] == 120 and row["lines"] == 120
    assert row["tail_sha1"] == hashlib.sha1(read_range(log, br - TAIL_BYTES, TAIL_BYTES)).hexdigest()
    assert ingest_paths([log], st)[0].status == "unchanged"
    if not gz:
        write(log, D.format(s=1) * 3, mode="a")
        assert ingest_paths([log], st)[0].status == "grown" and counts(st)["decode"] == 123


def test_a_directory_of_many_logs_reads_the_files_table_once(tmp_path, monkeypatch):
    """Each file's identity is checked against the files table as this run keeps it (reading
    the table again for every file made a directory of many logs quadratic), and every file's
    lineage is still found: the second run finds them all unchanged."""
    d = tmp_path / "logs"
    d.mkdir()
    for i in range(6):
        write(d / f"s{i}.log", D.format(s=i) * (i + 1))
    write(d / "copy.log", D.format(s=5) * 6)  # the same content as s5.log under another name
    st = Store(tmp_path / "st")
    reads = []
    real = Store.read
    monkeypatch.setattr(Store, "read", lambda self, table: (reads.append(table), real(self, table))[1])
    first = ingest_paths([d], st)
    assert reads.count("files") == 1
    assert [r.status for r in first].count("new") == 7 and counts(st)["decode"] == 1 + 2 + 3 + 4 + 5 + 6 + 6
    reads.clear()
    again = ingest_paths([d], st)
    assert reads.count("files") == 1 and {r.status for r in again} == {"unchanged"}
