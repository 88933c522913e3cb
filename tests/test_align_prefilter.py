"""`align`'s table prefilter (`_plausible`) on a long log: it may drop a segment only when no
record can score it at MIN_SCORE or more, so the alignment is what scoring every segment gives."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loglens.bench_records import BenchRecord
from loglens.reconcile import align
from loglens.runs import Segments

GAPS = [0.0, 0.3, 0.9, 1.0, 1.6, 3.5]  # seconds between POSTs: within a second, around 1 s, pauses


@st.composite
def segment_rows(draw, i: int) -> dict:
    n = draw(st.integers(1, 24))
    s, t = [], 1000.0 * i
    for _ in range(n):
        t += draw(st.sampled_from(GAPS))
        s.append(t)
    anchored = draw(st.booleans())
    cand = sorted(draw(st.sets(st.integers(1, n - 1), max_size=3))) if n > 1 and not anchored else []
    return {
        "file_id": "f", "source": "log", "endpoint": draw(st.sampled_from(["/generate", "/v1/completions"])),
        "s": s, "line_no": list(range(10 * i, 10 * i + n)),
        "end_s": s[-1] + draw(st.sampled_from([0.0, 1.0, 5.0, 30.0])) if anchored else None,
        "end_line": 10 * i + n if anchored else None, "end_path": "/server_info" if anchored else None,
        "dep_s": None, "dep_ms": None, "warmup": draw(st.integers(0, min(3, n - 1))), "w_pause": None,
        "cand": cand, "n_posts": n,
    }


@st.composite
def records(draw) -> BenchRecord:
    n = draw(st.integers(1, 20))
    completed = draw(st.integers(max(1, n - 2), n))
    return BenchRecord(num_prompts=n, completed=completed, errors=[""] * completed + ["x"] * (n - completed),
                       duration=draw(st.sampled_from([0.5, 2.0, 6.0, 25.0])), backend="sglang",
                       request_rate=draw(st.sampled_from([float("inf"), 2.0, 8.0, None])))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_prefilter_keeps_every_segment_a_record_can_match(data):
    rows = [data.draw(segment_rows(i)) for i in range(70)]  # > 64: the table path
    segments = Segments(pl.DataFrame(rows, schema_overrides={"s": pl.List(pl.Float64), "cand": pl.List(pl.Int64)}))
    recs = [data.draw(records()) for _ in range(2)]
    kept = {s.post_lines[0] for s in align._plausible(recs, segments)}
    for seg in segments:
        slots = [(seg, k) for k in seg.candidates] if seg.end_s is None and seg.candidates else [(seg, None)]
        best = max(align.score(r, sg, k, explain=False)[0] for r in recs for sg, k in slots)
        if best >= align.MIN_SCORE:
            why = [(align.request_counts(r), r.duration, r.request_rate, k, align.score(r, sg, k)) for r in recs for sg, k in slots]
            assert seg.post_lines[0] in kept, repr((seg.post_s, seg.end_s, seg.warmup_count, seg.candidates, why))
