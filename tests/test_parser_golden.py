"""Golden tests: input lines → expected rows, for every release variant and the real excerpts.

To accept a deliberate change, regenerate with `LOGLENS_UPDATE_GOLDEN=1 pytest tests/test_parser_golden.py`
and review `git diff tests/golden/`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loglens.parsers.registry import FAMILIES, verify_samples
from parse_util import covered_lines, dumps, parse_bytes, rows_as_records

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
INPUTS = sorted((ROOT / "parsers" / "samples").glob("*.log")) + sorted((ROOT / "tests" / "fixtures" / "realdata").glob("*.log")) + sorted((ROOT / "sample_logs" / "bad").glob("*.log"))


def strip_header(data: bytes) -> bytes:
    """Real excerpts start with `#! ` attribution lines; the data follows them."""
    lines = data.split(b"\n")
    i = 0
    while i < len(lines) and lines[i].startswith(b"#! "):
        i += 1
    return b"\n".join(lines[i:])


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden(path: Path):
    data = path.read_bytes()
    if path.parent.name == "realdata":
        data = strip_header(data)
    tables = parse_bytes(data)
    got = dumps(rows_as_records(tables))
    golden = GOLDEN / f"{path.parent.name}--{path.stem}.jsonl"
    if os.environ.get("LOGLENS_UPDATE_GOLDEN"):
        golden.write_text(got, encoding="utf-8")
    assert golden.exists(), f"no golden file {golden.name}: run with LOGLENS_UPDATE_GOLDEN=1 and review it"
    assert got == golden.read_text(encoding="utf-8")
    # lossless: every physical line is covered exactly once, or counted as blank
    lines = covered_lines(tables)
    assert len(lines) == len(set(lines)), "a line is covered by two rows"
    info = tables["_blank"].row(0, named=True)
    assert len(lines) + info["blank_lines"] == info["lines"]


def test_every_variant_sample_is_a_row_with_values():
    """Each constructed variant line (one per release shape) parses into its table, typed."""
    assert verify_samples() >= 80
    for fam in FAMILIES:
        if fam.table not in ("decode", "prefill"):
            continue
        data = strip_header(fam.sample_file.read_bytes())
        df = parse_bytes(data)[fam.table]
        key = "running_req" if fam.table == "decode" else "new_token"
        assert df.get_column(key).null_count() == 0
        assert df.get_column("variant").null_count() == 0


def test_story_line_values():
    line = b"[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, gen throughput (token/s): 170.24, #queue-req: 0\n"
    r = parse_bytes(line)["decode"].row(0, named=True)
    assert (r["running_req"], r["token"], r["token_usage"], r["cuda_graph"], r["gen_throughput"], r["queue_req"]) == (27, 5760, 0.02, False, 170.24, 0)
    assert r["tp_rank"] == 0 and r["dp_rank"] is None and r["ts"].isoformat() == "2026-02-19T00:27:16"
    assert r["variant"] == "D13"


def test_rank_prefix_any_order_and_ms():
    line = b"[2026-03-02 10:00:05.318 PP1 DP3 EP2 TP5] Decode batch [77], #running-req: 4, #token: 10, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.50, #queue-req: 0, \n"
    r = parse_bytes(line)["decode"].row(0, named=True)
    assert (r["dp_rank"], r["pp_rank"], r["tp_rank"], r["ep_rank"], r["iter"]) == (3, 1, 5, 2, 77)
    assert r["ts"].microsecond == 318000


def test_unknown_key_kept_in_extra():
    line = b"[2026-09-01 10:00:05] Decode batch, #running-req: 4, #token: 10, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.50, #queue-req: 0, #new-thing: 7\n"
    r = parse_bytes(line)["decode"].row(0, named=True)
    assert r["extra"] == '{"new_thing": "7"}'


def test_traceback_is_one_event_with_line_end():
    text = (
        b"[2025-06-26 02:16:20 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        b'  File "a.py", line 1, in f\n    g()\nValueError: boom\n'
        b"[2025-06-26 02:16:21] INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK\n"
    )
    t = parse_bytes(text)
    ev = t["events"].row(0, named=True)
    assert (ev["line_no"], ev["line_end"], ev["kind"]) == (1, 4, "error")
    assert ev["message"].endswith("ValueError: boom")
    assert t["http"].height == 1


def test_uvicorn_error_and_bare_traceback_are_one_record():
    text = (
        b"[2026-02-19 00:27:16] ERROR:    Exception in ASGI application\n"
        b"Traceback (most recent call last):\n"
        b'  File "h11_impl.py", line 403, in run_asgi\n'
        b"RuntimeError: boom\n"
        b"[2026-02-19 00:27:16 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0\n"
        b"Traceback (most recent call last):\n"
        b'  File "x.py", line 1\n'
        b"[rank0]: Traceback (most recent call last):\n"
        b'[rank0]:   File "y.py", line 2\n'
    )
    ev = parse_bytes(text)["events"].select("line_no", "line_end", "kind").rows()
    assert ev == [(1, 4, "error"), (6, 9, "error")]


def test_sample_check_is_remembered_per_parser_version(tmp_path, monkeypatch):
    from loglens.parsers import registry

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    registry.ensure_verified.cache_clear()
    registry.ensure_verified()
    markers = list((tmp_path / "loglens").glob("samples-verified-*"))
    assert [m.name for m in markers] == [f"samples-verified-{registry._fingerprint()}"]
