"""Smoke tests of the ingest benchmark harness (benchmarks/): the log generator's ground-truth
counts, the naive baseline's correctness, and one tiny end-to-end harness run, so CI proves the
harness still runs.  Sizes are tiny; nothing here measures speed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from loglens.schema import TABLES

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import gen_log  # noqa: E402
import naive_ingest  # noqa: E402

TS_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    out = {}
    for mix in ("current", "mixed"):
        path = d / f"{mix}.log"
        out[mix] = (path, gen_log.generate(path, gen_log.parse_size("2MiB"), mix, seed=7))
    return out


def test_parse_size():
    assert gen_log.parse_size("2MiB") == 2 * 2**20
    assert gen_log.parse_size("1GiB") == 2**30
    assert gen_log.parse_size("200MiB") == 200 * 2**20
    assert gen_log.parse_size("1.5KB") == 1500
    with pytest.raises(ValueError):
        gen_log.parse_size("12 parsecs")


@pytest.mark.parametrize("mix", ["current", "mixed"])
def test_sidecar_counts_are_exact(logs, mix):
    path, side = logs[mix]
    data = path.read_bytes()
    assert len(data) == side["size_bytes"] <= 2 * 2**20
    assert side["size_bytes"] > 0.99 * 2 * 2**20
    lines = data.decode("ascii").split("\n")
    assert lines[-1] == ""  # ends with a newline
    lines = lines[:-1]
    assert len(lines) == side["lines"]
    assert side["decode"] + side["prefill"] + side["http"] + side["other"] + side["blank"] == side["lines"]
    assert sum(1 for x in lines if not x.strip()) == side["blank"]
    # the mix by line count: ~40/20/35/5
    n = side["lines"]
    assert 0.36 < side["decode"] / n < 0.44
    assert 0.17 < side["prefill"] / n < 0.23
    assert 0.31 < side["http"] / n < 0.39
    assert 0.03 < side["other"] / n < 0.08
    # continuation lines (no `[` prefix) exist, and each record starts with a prefixed line
    assert side["other"] > side["other_records"] > 0
    # rg's view: every labelled Decode line, and nothing else, says "Decode batch"
    labelled = side["decode"] - side["variants"].get("D0", 0) - side["variants"].get("D0b", 0)
    assert sum("Decode batch" in x for x in lines) == labelled
    # timestamps never go backwards
    stamps = [m.group(1) for x in lines if (m := TS_RE.match(x))]
    assert stamps == sorted(stamps)


def test_current_mix_has_only_current_shapes(logs):
    path, side = logs["current"]
    assert set(side["variants"]) == {"D13", "P12"}
    text = path.read_text()
    assert re.search(r"^\[\S+ \S+(?: [A-Z_]+\d+)*\] Decode batch, #running-req: \d+, #token: \d+, token usage: \d\.\d\d, "
                     r"cuda graph: (True|False), gen throughput \(token/s\): \d+\.\d\d, #queue-req: \d+$", text, re.M)
    assert re.search(r"input throughput \(token/s\): \d+\.\d\d, cuda graph: False$", text, re.M)
    assert '] INFO:     ::1:' in text  # IPv6 clients
    assert "KV cache pool is full. Retract requests. #retracted_reqs:" in text
    assert "\nTraceback (most recent call last):\n" in text
    assert "Decode batch. " not in text and ", \n" not in text


def test_mixed_mix_interleaves_releases(logs):
    path, side = logs["mixed"]
    assert len(side["variants"]) > 40  # most of the Decode and Prefill shapes appear in 2 MiB
    text = path.read_text()
    for needle in ["Decode batch. ", "Decode batch, ", "#queue-req: 0, \n", "\n[gpu=0] Decode batch. ",
                   "Prefil batch. ", "Prefill batch(mixed #running-req: ", "accept len: ", "#swa token: ",
                   "\nnew fill batch. #seq: ", "\nINFO:     "]:
        assert needle in text, needle
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}( [A-Z]+\d+)*\] ", text, re.M)  # ms stamps
    assert re.search(r"^\[\d\d:\d\d:\d\d(?: [A-Z_]+\d+)*\] ", text, re.M)  # time-only stamps
    assert re.search(r"Decode batch \[\d+\], ", text)


def test_generator_is_deterministic(tmp_path):
    size = gen_log.parse_size("256KiB")
    a = gen_log.generate(tmp_path / "a.log", size, "mixed", seed=3)
    b = gen_log.generate(tmp_path / "b.log", size, "mixed", seed=3)
    c = gen_log.generate(tmp_path / "c.log", size, "mixed", seed=4)
    assert (tmp_path / "a.log").read_bytes() == (tmp_path / "b.log").read_bytes()
    assert (tmp_path / "a.log").read_bytes() != (tmp_path / "c.log").read_bytes()
    assert {k: v for k, v in a.items() if k not in ("path", "gen_seconds")} == \
        {k: v for k, v in b.items() if k not in ("path", "gen_seconds")}
    assert c["seed"] == 4


@pytest.mark.parametrize("mix", ["current", "mixed"])
def test_naive_rows_match_sidecar(logs, mix, tmp_path):
    path, side = logs[mix]
    out = subprocess.run([sys.executable, str(BENCH / "naive_ingest.py"), str(path), str(tmp_path / "out")],
                         capture_output=True, text=True, check=True)
    res = json.loads(out.stdout)
    assert res["rows"] == {"decode": side["decode"], "prefill": side["prefill"], "http": side["http"],
                           "events": side["other_records"], "rejects": 0}
    assert res["lines"] == side["lines"] and res["blank_lines"] == side["blank"]
    ev = pl.read_parquet(tmp_path / "out" / "events" / "part-0.parquet")
    assert int((ev["line_end"] - ev["line_no"] + 1).sum()) == side["other"]
    dec = pl.read_parquet(tmp_path / "out" / "decode" / "part-0.parquet")
    assert dec["running_req"].null_count() == 0
    assert dec["gen_throughput"].null_count() == side["variants"].get("D0", 0)  # v0.1.3-v0.1.15 had none
    assert dec["extra"].null_count() == dec.height  # every key of every release was known


def test_naive_columns_follow_the_store_schema():
    for table, schema in naive_ingest.SCHEMAS.items():
        got = pl.from_arrow(schema.empty_table()).schema
        for name, dtype in got.items():
            assert name in TABLES[table], (table, name)
            assert dtype == TABLES[table][name], (table, name, dtype)


def test_naive_parses_values(tmp_path):
    log = tmp_path / "x.log"
    log.write_text(
        "[2026-02-19 00:27:12 TP0] Prefill batch, #new-seq: 1, #new-token: 1024, #cached-token: 0, token usage: 0.02, "
        "#running-req: 26, #queue-req: 0, input throughput (token/s): 8123.45, cuda graph: False\n"
        "[2026-02-19 00:27:16 DP1 TP1] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, "
        "gen throughput (token/s): 170.24, #queue-req: 0\n"
        "[2025-07-01 09:12:44] Decode batch. #running-req: 32, #token: full=9120, swa=4096, token usage: full=0.07, "
        "swa=0.03, cuda graph: True, gen throughput (token/s): 1450.22, #queue-req: 0, \n"
        '[2026-02-19 00:27:12] INFO:     ::1:33670 - "POST /generate HTTP/1.1" 200 OK\n'
        "[2026-02-19 00:27:13 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, "
        "#new_tokens_gained: 1024, #new_token_ratio: 0.7000 -> 0.8500\n"
        "[2026-02-19 00:27:14 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "RuntimeError: boom\n"
        "\n")
    res = naive_ingest.ingest(str(log), str(tmp_path / "out"))
    assert res == {"rows": {"decode": 2, "prefill": 1, "http": 1, "events": 2, "rejects": 0}, "lines": 9, "blank_lines": 1}
    read = lambda t: pl.read_parquet(tmp_path / "out" / t / "part-0.parquet").to_dicts()  # noqa: E731
    d = read("decode")
    assert d[0]["dp_rank"] == 1 and d[0]["tp_rank"] == 1 and d[0]["running_req"] == 27 and d[0]["token"] == 5760
    assert d[0]["cuda_graph"] is False and d[0]["gen_throughput"] == 170.24 and d[0]["queue_req"] == 0
    assert str(d[0]["ts"]) == "2026-02-19 00:27:16"
    assert d[1]["full_token"] == 9120 and d[1]["swa_token"] == 4096 and d[1]["swa_token_usage"] == 0.03
    p = read("prefill")[0]
    assert (p["new_seq"], p["new_token"], p["cached_token"], p["running_req"], p["input_throughput"]) == (1, 1024, 0, 26, 8123.45)
    h = read("http")[0]
    assert (h["client_addr"], h["client_port"], h["method"], h["path"], h["status"]) == ("::1", 33670, "POST", "/generate", 200)
    e = read("events")
    assert e[0]["kind"] == "retract" and e[0]["retracted_reqs"] == 2 and e[0]["new_token_ratio_after"] == 0.85
    assert e[1]["kind"] == "traceback" and (e[1]["line_no"], e[1]["line_end"]) == (6, 8)
    assert e[1]["message"].endswith("RuntimeError: boom")


def test_fixed_field_rows_match_sidecar(logs, tmp_path):
    """The reference pass does the same job as loglens on the current mix (every Decode,
    Prefill and access line a row, every other line an events row), so their times compare."""
    path, side = logs["current"]
    out = subprocess.run([sys.executable, str(BENCH / "fixed_field.py"), str(path), str(tmp_path / "out")],
                         capture_output=True, text=True, check=True)
    res = json.loads(out.stdout)
    assert res == {"decode": side["decode"], "prefill": side["prefill"], "http": side["http"], "events": side["other"],
                   "lines": side["lines"]}
    read = lambda t: pl.scan_parquet(str(tmp_path / "out" / t / "*.parquet")).collect()  # noqa: E731
    dec, pre, http = read("decode"), read("prefill"), read("http")
    # the store's schema, and no value lost to the fixed layout
    assert dec.schema == pl.Schema(TABLES["decode"]) and http.schema == pl.Schema(TABLES["http"])
    for df, cols in ((dec, ["ts", "tp_rank", "running_req", "token", "token_usage", "cuda_graph", "gen_throughput", "queue_req"]),
                     (pre, ["ts", "new_seq", "new_token", "cached_token", "running_req", "input_throughput"]),
                     (http, ["ts", "level", "client_addr", "client_port", "method", "path", "http_version", "status", "status_text"])):
        assert df.select(pl.col(cols).null_count()).row(0) == (0,) * len(cols)


def test_fixed_field_values(tmp_path):
    log = tmp_path / "x.log"
    log.write_text(
        "[2026-02-19 00:27:12 TP0] Prefill batch, #new-seq: 1, #new-token: 1024, #cached-token: 0, token usage: 0.02, "
        "#running-req: 26, #queue-req: 0, input throughput (token/s): 8123.45, cuda graph: False\n"
        "[2026-02-19 00:27:16 TP1] Decode batch, #running-req: 27, #token: 5760, token usage: 0.02, cuda graph: False, "
        "gen throughput (token/s): 170.24, #queue-req: 0\n"
        '[2026-02-19 00:27:12 TP0] INFO:     ::1:33670 - "POST /generate HTTP/1.1" 200 OK\n'
        '[2026-02-19 00:27:13 TP0] INFO:     127.0.0.1:8 - "GET /health HTTP/1.0" 404 Not Found\n'
        "  File \"x.py\", line 1, in f\n")
    import fixed_field

    assert fixed_field.ingest(str(log), str(tmp_path / "out")) == {"decode": 1, "prefill": 1, "http": 2, "events": 1, "lines": 5}
    read = lambda t: pl.scan_parquet(str(tmp_path / "out" / t / "*.parquet")).collect().to_dicts()  # noqa: E731
    d = read("decode")[0]
    assert (str(d["ts"]), d["tp_rank"], d["running_req"], d["token"], d["token_usage"], d["cuda_graph"], d["gen_throughput"],
            d["queue_req"]) == ("2026-02-19 00:27:16", 1, 27, 5760, 0.02, False, 170.24, 0)
    p = read("prefill")[0]
    assert (p["new_seq"], p["new_token"], p["cached_token"], p["token_usage"], p["running_req"], p["queue_req"],
            p["input_throughput"], p["cuda_graph"]) == (1, 1024, 0, 0.02, 26, 0, 8123.45, False)
    h = read("http")
    assert [(r["level"], r["client_addr"], r["client_port"], r["method"], r["path"], r["http_version"], r["status"], r["status_text"])
            for r in h] == [("INFO", "::1", 33670, "POST", "/generate", "1.1", 200, "OK"),
                            ("INFO", "127.0.0.1", 8, "GET", "/health", "1.0", 404, "Not Found")]
    e = read("events")[0]
    assert e["ts"] is None and e["line_no"] == 5 and e["message"].startswith("  File")


def test_harness_runs_end_to_end(tmp_path):
    tools = "rg,naive" if shutil.which("rg") else "naive"
    out_json = tmp_path / "r.json"
    failing = f"{sys.executable} -c 'import sys; sys.exit(\"Error: no ingest here\")'"
    res = subprocess.run([sys.executable, str(BENCH / "ingest.py"), "--sizes", "256KiB", "--runs", "1",
                          "--tools", tools + ",fixed,loglens", "--loglens-cmd", failing, "--check-rows",
                          "--data-dir", str(tmp_path / "data"), "--tmp-dir", str(tmp_path), "--json", str(out_json)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "| loglens ingest | n/a |" in res.stdout and "Error: no ingest here" in res.stdout
    assert "MISMATCH" not in res.stdout and "| naive | OK |" in res.stdout and "| fixed | OK |" in res.stdout
    report = json.loads(out_json.read_text())
    naive = report["summary"]["256KiB"]["naive"]
    assert naive["ok"] and naive["wall_s"] > 0 and naive["maxrss_mib"] > 0 and naive["cpu_s"] > 0
    assert {t["result"] for t in report["targets"]} == {"n/a"}
    # the log is cached: a second run reuses it
    assert list((tmp_path / "data").glob("*.log")) and not list(tmp_path.glob("loglens-bench-*"))
    assert report["meta"]["tools"] == [*tools.split(","), "fixed", "loglens"]
    # the fixed-field pass knows one layout: it is refused on the mixed log (and left out by default)
    res = subprocess.run([sys.executable, str(BENCH / "ingest.py"), "--mix", "mixed", "--tools", "fixed"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "knows only the current mix" in res.stderr


def test_harness_times_summary_and_reconcile_on_the_largest_store(tmp_path):
    """After the last loglens run on the largest log, the harness adds the sample story to that
    store and times `summary` and `reconcile` (first call and again): the 2 s target's figures."""
    out_json = tmp_path / "r.json"
    res = subprocess.run([sys.executable, str(BENCH / "ingest.py"), "--sizes", "64KiB,128KiB", "--runs", "1",
                          "--tools", "loglens", "--data-dir", str(tmp_path / "data"), "--tmp-dir", str(tmp_path),
                          "--json", str(out_json)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    queries = json.loads(out_json.read_text())["queries"]
    assert list(queries) == ["128KiB"]  # the largest log only
    for name in ("summary", "reconcile"):
        m = queries["128KiB"][name]
        assert m["ok"] and m["first_s"] > 0 and m["again_s"] > 0 and m["again_runs"] == 1 and m["maxrss_mib"] > 0
    assert "| loglens reconcile --json |" in res.stdout
    target = [t for t in json.loads(out_json.read_text())["targets"] if t["target"].startswith("summary and reconcile")]
    assert target and target[0]["result"] in ("PASS", "FAIL") and target[0]["value"] > 0
    # --no-queries skips them
    res = subprocess.run([sys.executable, str(BENCH / "ingest.py"), "--sizes", "64KiB", "--runs", "1", "--tools", "loglens",
                          "--no-queries", "--data-dir", str(tmp_path / "data"), "--tmp-dir", str(tmp_path),
                          "--json", str(out_json)], capture_output=True, text=True)
    assert res.returncode == 0 and json.loads(out_json.read_text())["queries"] == {}, res.stderr
    assert "summary and reconcile" not in res.stdout


def test_profile_script_reports_every_step(logs):
    """`benchmarks/profile_ingest.py` (the README's "where the time goes" table) runs and prints
    a row per step that adds up to its total."""
    path, _ = logs["current"]
    out = subprocess.run([sys.executable, str(BENCH / "profile_ingest.py"), "--log", str(path), "--chunks", "2",
                          "--reps", "1", "--chunk-bytes", str(512 * 1024)], capture_output=True, text=True, check=True).stdout
    rows = {k.strip("*"): v for k, v in re.findall(r"^\| ([A-Za-z +*]+?) \| \**(-?\d+)\**", out, re.M)}
    steps = ["lines", "prefix", "family", "Decode + Prefill", "access lines", "events", "other", "Parquet"]
    assert set(steps) <= set(rows), out
    assert abs(sum(int(rows[s]) for s in steps) - int(rows["total"])) <= len(steps), out
