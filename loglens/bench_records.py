"""`BenchRecord`: one bench_serving run under today's key names (format spec §5.2).

`record_from_dict` is the one normaliser both feeders use: a JSON/JSONL object (any release,
v0.1.23's short keys included) and the key/value dict of a printed block.  It maps old keys,
coerces types, turns non-finite metrics into None, derives what follows from the rest, and
says every such step in `warnings`.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

STATS = ("mean", "median", "std", "p90", "p95", "p99")
LATENCIES = ("ttft", "tpot", "itl", "e2e_latency")
LATENCY_FIELDS = tuple(f"{s}_{m}_ms" for m in LATENCIES for s in STATS)
STR_FIELDS = ("tag", "backend", "dataset_name", "model")
INT_FIELDS = ("num_prompts", "max_concurrency", "sharegpt_output_len", "random_input_len",
              "random_output_len", "completed", "total_input_tokens", "total_input_text_tokens",
              "total_input_vision_tokens", "total_output_tokens", "total_output_tokens_retokenized")
FLOAT_FIELDS = ("request_rate", "random_range_ratio", "duration", "request_throughput",
                "input_throughput", "output_throughput", "total_throughput", "concurrency",
                "accept_length", "max_output_tokens_per_s", "max_concurrent_requests") + LATENCY_FIELDS
#: a JSON object holding none of these is not a bench result (server_info alone is not)
RESULT_FIELDS = INT_FIELDS[INT_FIELDS.index("completed"):] + FLOAT_FIELDS[FLOAT_FIELDS.index("duration"):]
DETAIL_FIELDS = ("input_lens", "output_lens", "ttfts", "itls", "errors")
DICT_FIELDS = ("server_info", "cache_report")
#: what a reconcile needs; absent (or non-finite) ones are listed in `record.missing`
EXPECTED_KEYS = ("backend", "request_rate", "max_concurrency", "duration", "completed",
                 "total_input_tokens", "total_output_tokens", "request_throughput",
                 "output_throughput", "mean_ttft_ms", "mean_itl_ms", "mean_e2e_latency_ms")
NULL_MEANS_UNSET = {"max_concurrency"}  # null / "not set" is an answer, not a gap
#: v0.1.23 wrote short keys; v0.2.12 renamed them (spec §5.2 key history)
OLD_KEYS = {
    "total_input": "total_input_tokens",
    "total_output": "total_output_tokens",
    "total_output_retokenized": "total_output_tokens_retokenized",
    "output_token_throughput": "output_throughput",
    "input_token_throughput": "input_throughput",
    "total_token_throughput": "total_throughput",
    "benchmark_duration": "duration",
}
_OLD_LATENCY_RE = re.compile(rf"(?:{'|'.join(STATS)})_(?:{'|'.join(LATENCIES)})")
_NOT_IN_EXTRA = {"generated_texts"}  # bulky and not needed: stays in `raw`
_INT_LIMIT = 2**63  # Parquet int64; also keeps float() of a count from overflowing


@dataclass
class BenchRecord:
    source: str = ""
    index: int = 0  # 0-based position among the file's records
    source_kind: str = "jsonl"  # 'jsonl' | 'json' | 'text'
    line_no: int | None = None  # 1-based line where the record (or block header) starts
    # run arguments
    tag: str | None = None
    backend: str | None = None
    dataset_name: str | None = None
    model: str | None = None
    num_prompts: int | None = None
    request_rate: float | None = None  # inf for the default "all at once"
    max_concurrency: int | None = None  # None: not set
    sharegpt_output_len: int | None = None
    random_input_len: int | None = None
    random_output_len: int | None = None
    random_range_ratio: float | None = None
    # results
    duration: float | None = None
    completed: int | None = None
    total_input_tokens: int | None = None
    total_input_text_tokens: int | None = None
    total_input_vision_tokens: int | None = None
    total_output_tokens: int | None = None
    total_output_tokens_retokenized: int | None = None
    request_throughput: float | None = None
    input_throughput: float | None = None
    output_throughput: float | None = None
    total_throughput: float | None = None
    concurrency: float | None = None
    accept_length: float | None = None
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: float | None = None  # an int from SGLang, a float from vLLM
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    std_ttft_ms: float | None = None
    p90_ttft_ms: float | None = None
    p95_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    std_tpot_ms: float | None = None
    p90_tpot_ms: float | None = None
    p95_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    std_itl_ms: float | None = None
    p90_itl_ms: float | None = None
    p95_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2e_latency_ms: float | None = None
    median_e2e_latency_ms: float | None = None
    std_e2e_latency_ms: float | None = None
    p90_e2e_latency_ms: float | None = None
    p95_e2e_latency_ms: float | None = None
    p99_e2e_latency_ms: float | None = None
    # --output-details arrays (every request in dispatch order; ttfts/itls in seconds)
    input_lens: list | None = None
    output_lens: list | None = None
    ttfts: list | None = None
    itls: list | None = None
    errors: list | None = None
    server_info: dict | None = None
    cache_report: dict | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys/labels not known (yet)
    raw: Any = None  # the original object, or the block's text
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def server_version(self) -> str | None:
        version = (self.server_info or {}).get("version")
        return version if isinstance(version, str) else None

    @property
    def last_gen_throughputs(self) -> list[float]:
        """`server_info.internal_states[*].last_gen_throughput`: the server's own figure at
        the end of the run, one per DP rank."""
        states = (self.server_info or {}).get("internal_states")
        found = [s.get("last_gen_throughput") for s in states or [] if isinstance(s, dict)]
        return [float(v) for v in found if _is_number(v) and math.isfinite(v)]

    def to_dict(self, include_raw: bool = False) -> dict[str, Any]:
        """Plain JSON-safe values: inf becomes "inf", NaN becomes None (strict JSON has neither)."""
        out = asdict(self)
        if not include_raw:
            del out["raw"]
        return _json_safe(out)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value) and 0 <= value < _INT_LIMIT and value == int(value)


def _today_key(key: str) -> str:
    if key in OLD_KEYS:
        return OLD_KEYS[key]
    return f"{key}_ms" if _OLD_LATENCY_RE.fullmatch(key) else key


def _number(value: Any) -> float | int | None:
    """A JSON number, or a number written as a string ("inf", "12.5"); None if neither."""
    if _is_number(value):
        return value
    if isinstance(value, str):
        text = value.strip().lower().replace("infinity", "inf")
        try:
            return float(text) if re.fullmatch(r"[+-]?(inf|nan|[\d.]+(e[+-]?\d+)?)", text) else None
        except ValueError:
            return None
    return None


def _coerce(key: str, value: Any, warn: list[str], non_finite: list[str]) -> tuple[Any, bool]:
    """(value for the field, whether it counts as present).  Non-finite numbers are collected
    in `non_finite` so that a run where every request failed gives one warning, not 24."""
    if value is None:
        return None, True
    if key in STR_FIELDS:
        return str(value), True
    if key in DETAIL_FIELDS or key in DICT_FIELDS:
        if isinstance(value, list if key in DETAIL_FIELDS else dict):
            return value, True
        warn.append(f"{key} is a {type(value).__name__}, expected a "
                    f"{'list' if key in DETAIL_FIELDS else 'object'}: ignored")
        return None, False
    num = _number(value)
    if num is None:
        warn.append(f"{key} = {value!r} is not a number: treated as missing")
        return None, False
    if math.isnan(num) or (math.isinf(num) and not (key == "request_rate" and num > 0)):
        non_finite.append(f"{key}={num}")
        return None, False
    if key in INT_FIELDS or key == "max_concurrent_requests":
        if num != int(num) or abs(num) >= _INT_LIMIT:
            if key in INT_FIELDS:
                warn.append(f"{key} = {value!r} is not a whole count: treated as missing")
                return None, False
            return float(num), True
        return int(num), True
    return float(num), True


def record_from_dict(values: Any, *, source: str, index: int, kind: str, line_no: int | None,
                     raw: Any, notes: list[str]) -> BenchRecord | None:
    """A record from one JSON object or printed block; None if it is not a bench result."""
    if not isinstance(values, dict):
        return None
    canonical: dict[str, Any] = {}
    for key, value in values.items():
        today = _today_key(str(key))
        if today not in canonical or today == key:  # today's key beats its old alias
            canonical[today] = value
    known = set(STR_FIELDS + INT_FIELDS + FLOAT_FIELDS + DETAIL_FIELDS + DICT_FIELDS)
    if not any(k in canonical for k in RESULT_FIELDS):
        return None  # no result key: some other JSON object
    rec = BenchRecord(source=source, index=index, source_kind=kind, line_no=line_no, raw=raw)
    warn = rec.warnings
    warn.extend(notes)
    present: set[str] = set()
    non_finite: list[str] = []
    for key, value in canonical.items():
        if key in known:
            coerced, ok = _coerce(key, value, warn, non_finite)
            setattr(rec, key, coerced)
            if ok:
                present.add(key)
        elif key not in _NOT_IN_EXTRA:
            rec.extra[key] = value
    if non_finite:
        warn.append(f"not finite, treated as missing (bench_serving writes NaN when no request "
                    f"succeeded): {', '.join(non_finite)}")
    _derive(rec, present)
    rec.missing = [k for k in EXPECTED_KEYS
                   if (k not in present if k in NULL_MEANS_UNSET else getattr(rec, k) is None)]
    return rec


def _derive(rec: BenchRecord, present: set[str]) -> None:
    """Fill what follows from other values (spec §5.3 formulas), saying so."""

    def put(key: str, value: float | int | None, how: str) -> None:
        if getattr(rec, key) is None and value is not None and math.isfinite(value):
            setattr(rec, key, value)
            present.add(key)
            rec.warnings.append(f"{key} derived from {how} (not in the record)")

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    lists = [v for v in (rec.errors, rec.output_lens, rec.input_lens) if v is not None]
    if lists:
        put("num_prompts", len(lists[0]), "the length of the --output-details arrays")
    if rec.errors is not None:
        put("completed", sum(1 for e in rec.errors if not e), "the empty entries of errors")
    if rec.output_lens is not None and all(_is_count(n) for n in rec.output_lens):
        total = sum(rec.output_lens)
        put("total_output_tokens", int(total) if total < _INT_LIMIT else None, "the sum of output_lens")
    put("duration", ratio(rec.total_output_tokens, rec.output_throughput),
        "total_output_tokens / output_throughput")
    put("duration", ratio(rec.completed, rec.request_throughput), "completed / request_throughput")
    put("output_throughput", ratio(rec.total_output_tokens, rec.duration),
        "total_output_tokens / duration")
    put("input_throughput", ratio(rec.total_input_tokens, rec.duration), "total_input_tokens / duration")
    put("request_throughput", ratio(rec.completed, rec.duration), "completed / duration")
    if rec.input_throughput is not None and rec.output_throughput is not None:
        put("total_throughput", rec.input_throughput + rec.output_throughput,
            "input_throughput + output_throughput")
