"""loglens.bench: bench_serving results in every saved form, real pastes and flawed inputs.

Fixtures: tests/fixtures/realdata/ holds real third-party excerpts (their `#! ` attribution
header kept byte for byte); tests/fixtures/bench/ holds small files named after their flaw.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loglens.bench import BenchFormatError, BenchRecord, load_bench, parse_bench, read_bench, select_records
from loglens.bench_records import (DETAIL_FIELDS, DICT_FIELDS, FLOAT_FIELDS, INT_FIELDS, LATENCY_FIELDS,
                                   STR_FIELDS)
from loglens.bench_args import parse_command, parse_namespace
from loglens.bench_text import LABEL_KEYS, label_key

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "realdata"
BAD = FIXTURES / "bench"
INF = math.inf


def one(path: Path) -> BenchRecord:
    records = load_bench(path)
    assert len(records) == 1, [r.to_dict() for r in records]
    return records[0]


def strict_json(rec: BenchRecord) -> str:
    return json.dumps(rec.to_dict(include_raw=True), allow_nan=False)


# ---- real pastes ------------------------------------------------------------------------------

def test_realdata_keeps_attribution_headers_and_loader_skips_them():
    for path in sorted(REAL.glob("*.txt")):
        assert path.read_bytes().startswith(b"#! source: https://github.com/"), path
        assert load_bench(path), path


def test_issue_2805_old_block_with_typo_cut_off_in_ttft():
    rec = one(REAL / "sglang-issue-2805.bench.txt")
    assert (rec.source_kind, rec.index, rec.line_no) == ("text", 0, 11)
    assert rec.backend == "sglang" and rec.request_rate == INF
    assert rec.max_concurrency is None and "max_concurrency" not in rec.missing  # "not set"
    assert rec.completed == 1648
    assert rec.duration == 170.41
    assert rec.total_input_tokens == 369103
    assert rec.total_output_tokens == 326408
    assert rec.total_output_tokens_retokenized == 326356
    assert rec.request_throughput == 9.67
    assert rec.input_throughput == 2165.94
    assert rec.output_throughput == 1915.40
    assert rec.total_throughput == 4081.34
    assert rec.mean_e2e_latency_ms == 80126.93 and rec.median_e2e_latency_ms == 81160.44
    assert rec.mean_ttft_ms == 44294.80 and rec.median_ttft_ms is None
    assert rec.concurrency is None  # this release printed no Concurrency line
    # the command line just before the block: 3000 prompts asked, 1648 succeeded
    assert rec.num_prompts == 3000 and rec.dataset_name == "sharegpt"
    assert rec.missing == ["mean_itl_ms"]
    assert any("cut off after 'Mean TTFT (ms)'" in w for w in rec.warnings)
    assert any("taken from the command line at line 10" in w for w in rec.warnings)
    assert rec.raw.startswith("============ Serving Benchmark Result")


def test_issue_12389_jsonl_with_user_lines_between_records():
    bench = read_bench(REAL / "sglang-issue-12389.jsonl.txt")
    first, second = bench.records
    assert bench.kind == "jsonl" and [r.index for r in bench.records] == [0, 1]
    assert first.request_rate == INF and second.request_rate == INF
    assert (first.max_concurrency, second.max_concurrency) == (16, 32)
    assert first.duration == 91.82476212800248 and second.duration == 637.274578455952
    assert first.completed == second.completed == 300
    assert first.total_output_tokens == 300000 and first.total_output_tokens_retokenized == 0
    assert first.mean_ttft_ms == 0.0 and first.accept_length is None
    assert second.p95_itl_ms == 39.689119486138225
    assert first.random_input_len == 250000 and first.random_range_ratio == 1.0
    assert first.missing == [] and second.missing == []
    # the user's `max_prefill:...` line is skipped and told on the record it precedes
    assert first.warnings[0].startswith("line 13: not a JSON record, skipped: max_prefill:8192")
    assert second.warnings[0].startswith("line 16: not a JSON record")
    assert len(bench.skipped) == 2
    assert any("total_throughput derived from input_throughput + output_throughput" in w for w in first.warnings)
    assert first.total_throughput == pytest.approx(816773.1476989945 + 3267.0925907959777)
    assert first.to_dict()["request_rate"] == "inf"


def test_pr_33108_newest_block():
    rec = one(REAL / "sglang-pr-33108.bench.txt")
    assert rec.max_concurrency == 4 and rec.completed == 32 and rec.duration == 289.93
    assert rec.total_input_text_tokens == 12778
    assert rec.max_output_tokens_per_s == 76.0
    assert rec.max_concurrent_requests == 5 and isinstance(rec.max_concurrent_requests, int)
    assert rec.concurrency == 3.71
    assert (rec.p90_e2e_latency_ms, rec.p95_e2e_latency_ms, rec.p99_e2e_latency_ms) == (56060.61, 57295.94, 59795.16)
    assert rec.median_ttft_ms == 607.40


def test_pr_36272_block_without_trailing_padding():
    rec = one(REAL / "sglang-pr-36272.bench.txt")
    assert rec.backend == "sglang-oai-chat" and rec.max_concurrency == 8
    assert rec.total_output_tokens == 6400 and rec.total_output_tokens_retokenized == 32
    assert rec.accept_length == 2.66 and rec.max_output_tokens_per_s == 5.00
    assert rec.max_concurrent_requests == 12 and rec.output_throughput == 223.49


def test_pr_9812_namespace_of_another_run_is_not_used():
    rec = one(REAL / "sglang-pr-9812.bench.txt")
    assert rec.backend == "sglang-oai-chat"  # longer than the 10-char pad
    assert rec.max_concurrency is None and rec.completed == 768
    assert rec.total_input_vision_tokens == 769536 and rec.total_input_text_tokens == 15373
    assert rec.p99_ttft_ms == 78548.58 and rec.mean_itl_ms == 0.0
    # the Namespace(...) printed before it says backend='sglang', num_prompts=100: another run
    assert rec.num_prompts is None and rec.dataset_name is None
    assert any("Namespace(...) at line 10 disagrees with the block on backend, num_prompts" in w
               for w in rec.warnings)


def test_vllm_33743_complete_block_without_backend_line():
    rec = one(REAL / "vllm-pr-33743.bench.txt")
    assert rec.completed == 16 and rec.duration == 20.38 and rec.output_throughput == 274.83
    assert rec.extra == {"failed_requests": 0}
    assert rec.max_concurrent_requests == 16  # printed as 16.00
    assert rec.p99_itl_ms == 47.80 and rec.mean_tpot_ms == 46.97
    assert rec.num_prompts == 16 and rec.random_output_len == 350 and rec.model == "google/gemma-3-27b-it"
    assert "backend" in rec.missing and "request_rate" in rec.missing
    assert not any("cut off" in w for w in rec.warnings)  # closed by the ===== line
    assert any(w.startswith("input_throughput derived from total_input_tokens / duration") for w in rec.warnings)


# ---- printed blocks with a flaw ---------------------------------------------------------------

V059 = dict(backend="sglang", request_rate=INF, max_concurrency=32, completed=200, duration=142.31,
            total_input_tokens=25600, total_output_tokens=20480, total_output_tokens_retokenized=20391,
            request_throughput=1.41, output_throughput=143.91, max_output_tokens_per_s=188.0,
            max_concurrent_requests=33, total_throughput=323.80, concurrency=29.87, p90_e2e_latency_ms=22877.12,
            p99_ttft_ms=1904.77, mean_tpot_ms=203.35, mean_itl_ms=203.34, p95_itl_ms=230.12, p99_itl_ms=260.40)


@pytest.mark.parametrize("name", ["crlf-block.txt", "ansi-block.txt", "utf16-block.txt", "tqdm-cr-block.txt",
                                  "logging-prefix-block.txt"])
def test_damaged_v059_block_reads_like_the_clean_one(name):
    rec = one(BAD / name)
    assert {k: getattr(rec, k) for k in V059} == V059
    assert rec.extra == {"max_itl_ms": 1380.33}  # printed only, never saved in JSONL
    assert rec.missing == [] and rec.source_kind == "text"
    assert not any("cut off" in w for w in rec.warnings)


def test_logging_prefix_block_picks_up_benchmark_args_namespace():
    rec = one(BAD / "logging-prefix-block.txt")
    assert (rec.num_prompts, rec.dataset_name, rec.model) == (200, "random", "Qwen/Qwen2.5-7B-Instruct")
    assert (rec.random_input_len, rec.random_output_len, rec.random_range_ratio) == (128, 102, 1.0)
    assert rec.line_no == 11


def test_two_blocks_each_with_its_own_namespace_and_variable_prefix():
    first, second = load_bench(BAD / "info-prefix-two-blocks.txt")
    assert (first.index, second.index) == (0, 1)
    assert (first.request_rate, first.max_concurrency, first.duration) == (4.0, 8, 52.10)
    assert (second.request_rate, second.max_concurrency, second.duration) == (INF, 64, 31.75)
    assert first.output_throughput == 391.55 and second.output_throughput == 642.52
    assert first.num_prompts == second.num_prompts == 200
    assert any("Namespace(...) at line 1" in w for w in first.warnings)
    assert any("Namespace(...) at line 15" in w for w in second.warnings)


def test_truncated_block_keeps_what_was_printed():
    rec = one(BAD / "truncated-block.txt")
    assert rec.mean_tpot_ms == 203.35 and rec.median_tpot_ms is None and rec.mean_itl_ms is None
    assert rec.missing == ["mean_itl_ms"]
    assert any("cut off after 'Mean TPOT (ms)'" in w for w in rec.warnings)


def test_reqeuest_typo_without_padding_and_long_values():
    rec = one(BAD / "reqeuest-typo-no-padding.txt")
    assert rec.max_concurrency is None and "max_concurrency" not in rec.missing
    assert rec.backend == "sglang-oai-chat-with-a-long-name"
    assert rec.request_rate == 16.0 and rec.duration == 12345678901.25 and rec.completed == 1000
    assert rec.total_throughput == pytest.approx(487.88 + 316.15)


def test_cache_hit_details_section_becomes_cache_report():
    rec = one(BAD / "cache-hit-details-block.txt")
    assert rec.cache_report == {"total_prompt_tokens": 25600, "total_cached_tokens": 12800, "cache_hit_rate_pct": 50.0}
    assert rec.p95_e2e_latency_ms == 23000.0


def test_block_and_jsonl_in_one_file_come_in_file_order():
    block = (BAD / "crlf-block.txt").read_bytes()
    line = (BAD / "infinity-rate.json").read_bytes()
    records = parse_bench(line + b"\n" + block + b"\n" + line, "mixed.txt").records
    assert [r.source_kind for r in records] == ["jsonl", "text", "jsonl"]
    assert [r.index for r in records] == [0, 1, 2]


# ---- JSON and JSONL ---------------------------------------------------------------------------

def test_infinity_rate_json_with_server_info():
    bench = read_bench(BAD / "infinity-rate.json")
    rec = bench.records[0]
    assert bench.kind == "json" and rec.request_rate == INF
    assert rec.server_version == "0.5.9"
    assert rec.last_gen_throughputs == [170.24, 165.5]
    assert rec.output_throughput == 20480 / 142.3104
    assert json.loads(strict_json(rec))["request_rate"] == "inf"


def test_pretty_list_and_pretty_appended_objects():
    listed = read_bench(BAD / "pretty-list.json")
    appended = read_bench(BAD / "pretty-appended.jsonl")
    assert listed.kind == "json" and appended.kind == "jsonl"
    for bench in (listed, appended):
        assert [(r.index, r.request_rate, r.max_concurrency) for r in bench.records] == [(0, INF, 32), (1, 8.0, 64)]
    assert [r.line_no for r in appended.records] == [1, 45]


def test_nan_metrics_become_none_with_one_warning():
    ok, failed = load_bench(BAD / "nan-metrics.jsonl")
    assert ok.warnings == [] and ok.mean_ttft_ms == 612.44
    assert failed.completed == 0 and failed.mean_ttft_ms is None and failed.p99_itl_ms is None
    assert failed.missing == ["mean_ttft_ms", "mean_itl_ms", "mean_e2e_latency_ms"]
    assert len(failed.warnings) == 1 and "mean_ttft_ms=nan" in failed.warnings[0]
    strict_json(failed)


def test_short_keys_of_v0_1_23_map_to_todays_names():
    rec = one(BAD / "short-keys-v0.1.23.jsonl")
    assert rec.source_kind == "jsonl"
    assert (rec.total_input_tokens, rec.total_output_tokens, rec.total_output_tokens_retokenized) == (236642, 215291, 215050)
    assert rec.output_throughput == 2401.44 and rec.duration == 89.65
    assert (rec.median_ttft_ms, rec.median_itl_ms) == (2451.9, 31.4)
    assert (rec.mean_e2e_latency_ms, rec.median_e2e_latency_ms) == (40111.2, 41021.7)
    assert rec.completed is None and "completed" in rec.missing  # v0.1.23 wrote no `completed`
    assert rec.extra == {}


def test_output_details_arrays_and_cache_report():
    rec = one(BAD / "output-details.jsonl")
    assert rec.input_lens == [10, 11, 12, 13] and rec.output_lens == [4, 4, 0, 4]
    assert rec.ttfts[1] == 0.06 and rec.itls[3] == [0.01, 0.02, 0.03]
    assert rec.errors == ["", "", "Connection reset", ""]
    assert rec.completed == 3  # printed value kept, not re-derived
    assert rec.num_prompts == 4 and any("num_prompts derived" in w for w in rec.warnings)
    assert rec.cache_report["cache_hit_rate_pct"] == 43.48
    assert "generated_texts" not in rec.extra and "generated_texts" in rec.raw


def test_unknown_future_keys_are_kept_in_extra():
    rec = one(BAD / "future-keys.jsonl")
    assert rec.extra == {"p999_ttft_ms": 2500.0, "goodput": {"slo_ttft_ms": 500, "rate": 0.97}}


def test_truncated_last_jsonl_line_is_skipped_and_reported():
    bench = read_bench(BAD / "truncated-last-line.jsonl")
    assert len(bench.records) == 1 and len(bench.skipped) == 1
    assert bench.records[0].warnings[-1].startswith("line 2: not a JSON record, skipped: {")


def test_junk_lines_are_reported_on_neighbouring_records():
    first, second = load_bench(BAD / "junk-between-records.jsonl")
    assert first.warnings == ["line 1: not a JSON record, skipped: === sweep conc=32 ==="]
    assert second.warnings == ["line 3: not a JSON record, skipped: WARNING: something",
                               "line 6: not a JSON record, skipped: done."]


def test_many_junk_lines_are_counted_not_listed():
    record = json.dumps({"duration": 1.0, "completed": 1}).encode()
    bench = parse_bench(b"junk\n" * 1000 + record + b"\n" + b"tail\n" * 30, "noisy.jsonl")
    warnings = bench.records[0].warnings
    assert warnings[:20] == [f"line {n}: not a JSON record, skipped: junk" for n in range(1, 21)]
    assert warnings[20] == "... and 980 more skipped lines"
    assert warnings[21] == "request_throughput derived from completed / duration (not in the record)"
    assert warnings[22] == "line 1002: not a JSON record, skipped: tail"
    assert warnings[-1] == "... and 10 more skipped lines" and len(warnings) == 43
    assert bench.skipped[-1] == "... and 1010 more skipped lines" and len(bench.skipped) == 21


def test_json_lines_without_result_keys_are_skipped_and_told():
    text = '{"event": "sweep start", "conc": 32}\n[1, 2]\n{"duration": 2.0, "completed": 4}\n'
    rec = parse_bench(text.encode(), "r.jsonl").records[0]
    assert rec.warnings[:2] == ["line 1: JSON without bench_serving result keys, skipped",
                                "line 2: JSON without bench_serving result keys, skipped"]
    assert rec.line_no == 3 and rec.index == 0


def test_gzip_input_and_cut_off_gzip(tmp_path):
    plain = (REAL / "sglang-issue-12389.jsonl.txt").read_bytes()
    packed = tmp_path / "results.jsonl.gz"
    packed.write_bytes(gzip.compress(plain))
    assert [r.to_dict() for r in load_bench(packed)] == [
        {**r.to_dict(), "source": str(packed)} for r in load_bench(REAL / "sglang-issue-12389.jsonl.txt")]
    many = b"".join(json.dumps({"duration": float(i), "completed": i, "pad": "x" * i}).encode() + b"\n"
                    for i in range(1, 200))
    cut = gzip.compress(many)[:-200]
    records = parse_bench(cut, "cut.jsonl.gz").records
    assert 0 < len(records) < 199
    assert "gzip stream is cut off" in records[0].warnings[0]
    with pytest.raises(BenchFormatError, match="damaged gzip"):
        parse_bench(b"\x1f\x8b" + b"not really gzip" * 10, "bad.gz")


# ---- normalisation ----------------------------------------------------------------------------

def parse_obj(obj: dict) -> BenchRecord:
    return parse_bench(json.dumps(obj).encode(), "r.jsonl").records[0]


def test_derived_values_are_said():
    rec = parse_obj({"duration": 10, "completed": 5, "total_input_tokens": 500, "total_output_tokens": 1000})
    assert (rec.output_throughput, rec.input_throughput, rec.request_throughput, rec.total_throughput) == (
        100.0, 50.0, 0.5, 150.0)
    assert sum("derived from" in w for w in rec.warnings) == 4
    rec = parse_obj({"output_throughput": 100, "total_output_tokens": 1000})
    assert rec.duration == 10.0 and "duration derived from total_output_tokens / output_throughput" in rec.warnings[0]
    rec = parse_obj({"output_lens": [3, 0, 5], "errors": ["", "boom", ""], "duration": 2})
    assert (rec.num_prompts, rec.completed, rec.total_output_tokens, rec.output_throughput) == (3, 2, 8, 4.0)


def test_details_arrays_with_junk_derive_nothing():
    rec = parse_bench(b'{"output_lens": [1, Infinity, 2.5], "errors": "oops", "duration": 1}', "d.jsonl").records[0]
    assert rec.total_output_tokens is None and rec.errors is None and rec.num_prompts == 3
    assert "errors is a str, expected a list: ignored" in rec.warnings
    strict_json(rec)
    assert parse_obj({"output_lens": [1, 2.5], "duration": 1}).total_output_tokens is None


def test_todays_key_beats_its_old_alias_and_strings_are_numbers():
    rec = parse_obj({"total_output": 1, "total_output_tokens": 2, "duration": "12.5", "request_rate": "inf",
                     "completed": "3", "max_concurrency": 8.0})
    assert (rec.total_output_tokens, rec.duration, rec.request_rate, rec.completed, rec.max_concurrency) == (
        2, 12.5, INF, 3, 8)


@pytest.mark.parametrize("bad", [True, "many", 2.5, [1], {"a": 1}, -INF, 10**30])
def test_unusable_completed_is_missing_with_a_warning(bad):
    rec = parse_obj({"duration": 1.0, "completed": bad})
    assert rec.completed is None and "completed" in rec.missing and rec.warnings
    strict_json(rec)


def test_negative_infinite_rate_is_not_a_rate():
    rec = parse_obj({"duration": 1.0, "request_rate": -INF})
    assert rec.request_rate is None and "request_rate" in rec.missing


def test_record_without_duration_or_totals_is_kept_and_says_so():
    rec = parse_obj({"mean_ttft_ms": 12.0})
    assert {"duration", "completed", "total_output_tokens"} <= set(rec.missing)


def test_field_tables_cover_the_dataclass_once():
    meta = {"source", "index", "source_kind", "line_no", "extra", "raw", "warnings", "missing"}
    typed = STR_FIELDS + INT_FIELDS + FLOAT_FIELDS + DETAIL_FIELDS + DICT_FIELDS
    assert len(typed) == len(set(typed))
    assert set(typed) | meta == {f.name for f in fields(BenchRecord)}
    assert set(LATENCY_FIELDS) <= set(FLOAT_FIELDS)
    assert set(LABEL_KEYS.values()) <= set(typed)


@pytest.mark.parametrize("label,key", [("Max reqeuest concurrency", "max_concurrency"),
                                       ("P99 E2E Latency (ms)", "p99_e2e_latency_ms"),
                                       ("Median ITL (ms)", "median_itl_ms"),
                                       ("Total Token throughput (tok/s)", "total_throughput"),
                                       ("Failed requests", "failed_requests")])
def test_label_keys(label, key):
    assert label_key(label)[0] == key


def test_namespace_and_command_parsing():
    ns = parse_namespace("benchmark_args=Namespace(backend='sglang', extra='a, b)', lens=[1, (2, 3)], "
                         "request_rate=inf, max_concurrency=None, num_prompts=10, cut='unfini")
    assert ns == {"backend": "sglang", "extra": "a, b)", "lens": [1, (2, 3)], "request_rate": INF,
                  "max_concurrency": None, "num_prompts": 10}
    args = parse_command("$ python3 -m sglang.bench_serving --backend sglang --num-prompt 1000 --random-input 256 "
                         "--request-rate=8 --max-concurrency 4 --r 1 --dataset-path x.json --dataset-name random")
    assert args == {"backend": "sglang", "num_prompts": 1000, "random_input_len": 256, "request_rate": 8,
                    "max_concurrency": 4, "dataset_name": "random"}


# ---- errors and --record ----------------------------------------------------------------------

EXPECTED_MSG = ('holds no bench_serving record (expected JSONL/JSON with keys like "duration" and "completed", '
                'or a "Serving Benchmark Result" block)')


@pytest.mark.parametrize("name,message", [
    ("not-bench.json", EXPECTED_MSG),
    ("empty-list.json", EXPECTED_MSG),
    ("empty.jsonl", "is empty (expected JSONL/JSON"),
    ("blank-lines-only.jsonl", "is empty (expected"),
    ("binary-garbage.bin", "looks binary"),
    ("header-only-block.txt", "header but no values"),
])
def test_bad_files_raise_one_clear_line(name, message):
    with pytest.raises(BenchFormatError) as err:
        load_bench(BAD / name)
    assert str(err.value).startswith(str(BAD / name) + " ")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_server_log_is_not_a_bench_result():
    log = b"[2026-02-19 00:27:40] Decode batch. #running-req: 3, #token: 900, gen throughput (token/s): 170.24\n" * 50
    with pytest.raises(BenchFormatError, match="holds no bench_serving record"):
        parse_bench(log, "server.log")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="bench results file not found: .*nope.jsonl"):
        load_bench(tmp_path / "nope.jsonl")
    with pytest.raises(BenchFormatError, match="is a directory"):
        load_bench(tmp_path)


def test_select_records():
    records = load_bench(REAL / "sglang-issue-12389.jsonl.txt")
    assert select_records(records, None) == records
    assert select_records(records, 0) == [records[0]]
    assert select_records(records, -1) == [records[1]]
    for bad in (2, -3):
        with pytest.raises(BenchFormatError, match=r"--record .* out of range: .*12389.jsonl.txt holds 2 records "
                                                   r"\(use 0..1, or -1 for the last\)"):
            select_records(records, bad)
    with pytest.raises(BenchFormatError, match="0 records"):
        select_records([], 0)


@pytest.mark.parametrize("path", sorted(p for p in [*BAD.iterdir(), *REAL.iterdir()]), ids=lambda p: p.name)
def test_every_fixture_loads_or_fails_cleanly_and_dumps_strict_json(path):
    try:
        records = load_bench(path)
    except BenchFormatError:
        return
    for rec in records:
        strict_json(rec)


# ---- properties -------------------------------------------------------------------------------

def load_or_format_error(data: bytes) -> None:
    try:
        bench = parse_bench(data, "fuzz.jsonl")
    except BenchFormatError as err:
        assert "\n" not in str(err)
        return
    assert bench.records
    for rec in bench.records:
        strict_json(rec)


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_load_or_raise_bench_format_error(data):
    load_or_format_error(data)


@FAST
@given(st.text(max_size=2000))
def test_arbitrary_text_loads_or_raises_bench_format_error(text):
    load_or_format_error(text.encode("utf-8", errors="surrogatepass"))


# Fragments of real inputs, cut and glued at random: far likelier than random bytes to reach
# the block reader, the Namespace parser and the JSON scanner with something almost valid.
_PIECES = [line for p in [*REAL.iterdir(), BAD / "logging-prefix-block.txt", BAD / "nan-metrics.jsonl",
                          BAD / "cache-hit-details-block.txt", BAD / "pretty-list.json"]
           for line in p.read_text(encoding="utf-8").splitlines()]
_piece = st.one_of(st.sampled_from(_PIECES), st.text(max_size=40),
                   st.sampled_from(["NaN", "Infinity", "-Infinity", "{", "[", "]", "}", "\r", "\x1b[1m", "not set",
                                    "Namespace(", "============ Serving Benchmark Result ============"]))


@FAST
@given(st.lists(st.tuples(_piece, st.none() | st.integers(0, 400), st.sampled_from(["\n", "\r\n", "\r", ""])),
                max_size=40))
def test_glued_fragments_of_real_inputs_load_or_raise_bench_format_error(parts):
    load_or_format_error("".join(text[:cut] + end for text, cut, end in parts).encode("utf-8", "surrogatepass"))


_KEYS = [f.name for f in fields(BenchRecord)] + ["total_input", "total_output", "benchmark_duration", "median_ttft",
                                                 "output_token_throughput", "generated_texts", "internal_states"]
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
    | st.sampled_from(["inf", "NaN", "-Infinity", "not set", "12.5", "1e400"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4),
    max_leaves=12)


@FAST
@given(st.lists(st.dictionaries(st.sampled_from(_KEYS), _json_value, max_size=12), min_size=1, max_size=4),
       st.booleans())
def test_any_json_record_loads_or_raises_bench_format_error(objects, as_list):
    # json.dumps writes bare NaN/Infinity for non-finite floats, exactly as bench_serving does
    text = json.dumps(objects, indent=1) if as_list else "\n".join(json.dumps(o) for o in objects)
    load_or_format_error(text.encode())


_BLOCK_LINES = (BAD / "crlf-block.txt").read_text(encoding="utf-8").splitlines()


@settings(max_examples=60, deadline=None)
@given(prefix=st.sampled_from(["", "[2026-02-19 00:27:40] ", "INFO 02-19 00:27:40 serving.py:88] ", "bench-1  | "]),
       strip_padding=st.booleans(), newline=st.sampled_from(["\n", "\r\n"]), colour=st.booleans())
def test_any_terminal_damage_reads_the_same_block(prefix, strip_padding, newline, colour):
    lines = [(line.rstrip() if strip_padding else line) for line in _BLOCK_LINES]
    if colour:
        lines = [f"\x1b[32m{line}\x1b[0m" for line in lines]
    text = "100%|##########| 200/200\r" + newline.join(prefix + line for line in lines) + newline
    rec = parse_bench(text.encode(), "pasted.txt").records[0]
    assert {k: getattr(rec, k) for k in V059} == V059 and rec.missing == []
