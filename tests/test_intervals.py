"""decode_intervals on hand-made Decode rows whose true window lengths are known."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loglens.intervals import decode_intervals

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, 300_000)


def make_stream(batch_sizes, *, idle_at=(), idle_s=10.0, ms=False, dp=None, tp=None, line0=1,
                line_step=1, drift=None, step_ms=(30.0, 0.5), interval=40):
    """Decode rows of one stream plus the true interval of each line.

    The batch inside a window may change: `drift[i]` is the mean batch minus the printed one
    (requests finishing inside the window make the printed batch smaller than the mean)."""
    rows, truth, t = [], [], 0.0
    for i, bs in enumerate(batch_sizes):
        mean_bs = bs + (drift[i] if drift else 0.0)
        step = (step_ms[0] + step_ms[1] * mean_bs) / 1000
        iv = interval * step + (idle_s if i in idle_at else 0.0)
        t += iv
        gen = interval * mean_bs / iv
        true = T0 + dt.timedelta(seconds=t)
        ts = true.replace(microsecond=(true.microsecond // 1000) * 1000 if ms else 0)
        rows.append(dict(file_id="f", source="x.log", line_no=line0 + i * line_step, ts=ts,
                         running_req=bs, gen_throughput=round(gen, 2), dp_rank=dp, tp_rank=tp,
                         cuda_graph=True, queue_req=0, token_usage=0.1))
        truth.append((iv, gen * iv))
    return rows, truth


def frame(rows):
    return pl.DataFrame(rows, schema_overrides={"dp_rank": pl.Int32, "tp_rank": pl.Int32})


def test_steady_stream_intervals_match_the_truth():
    rows, truth = make_stream([20] * 30)
    out = decode_intervals(frame(rows))
    assert out.height == 30
    iv = out["interval_s"].to_numpy()[1:]
    np.testing.assert_allclose(iv, [t[0] for t in truth[1:]], rtol=1e-3)
    np.testing.assert_allclose(out["tokens"].to_numpy()[1:], 800, rtol=1e-3)
    assert out["not_sample_reason"][0] == "first_line"
    assert out["is_sample"][1:].all()
    assert out["stream"].unique().to_list() == ["main"]


def test_model_drift_is_corrected_by_the_timestamps():
    # drain: requests finish inside each window, so 40 x printed batch undercounts by 30 %
    sizes = list(range(40, 10, -1))
    rows, truth = make_stream(sizes, drift=[0.3 * b for b in sizes])
    out = decode_intervals(frame(rows))
    true_total = sum(t[0] for t in truth[1:])
    model_total = out["model_interval_s"][1:].sum()
    got_total = out["interval_s"][1:].sum()
    assert abs(model_total - true_total) > 5  # the model alone is far off ...
    assert abs(got_total - true_total) < 2.0  # ... the brackets keep the sum within 2 s
    tokens_true = sum(t[1] for t in truth[1:])
    assert out["tokens"][1:].sum() == pytest.approx(tokens_true, rel=0.03)


def test_idle_gap_line_is_not_a_sample_and_busy_time_excludes_the_gap():
    rows, truth = make_stream([20] * 20, idle_at={10})
    out = decode_intervals(frame(rows))
    row = out.row(10, named=True)
    assert row["not_sample_reason"] == "idle_gap"
    assert row["interval_s"] == pytest.approx(truth[10][0], abs=1.0)
    assert row["busy_s"] == pytest.approx(truth[9][0], rel=0.05)
    assert out.filter(pl.col("not_sample_reason").is_not_null()).height == 2


def test_millisecond_timestamps_use_the_clock():
    sizes = [5, 30, 8, 40, 12, 25, 3, 33] * 3
    rows, truth = make_stream(sizes, ms=True, drift=[b * 0.5 for b in sizes])
    out = decode_intervals(frame(rows))
    np.testing.assert_allclose(out["interval_s"].to_numpy()[1:], [t[0] for t in truth[1:]], atol=0.0015)


def test_dp_streams_are_separate_and_tp_duplicates_dropped():
    a, _ = make_stream([10] * 5, dp=0, tp=0, line0=1, line_step=4)
    a_dup, _ = make_stream([10] * 5, dp=0, tp=1, line0=2, line_step=4)
    b, _ = make_stream([20] * 5, dp=1, tp=2, line0=3, line_step=4)
    b_dup, _ = make_stream([20] * 5, dp=1, tp=3, line0=4, line_step=4)
    out = decode_intervals(frame(a + a_dup + b + b_dup))
    assert out.height == 10
    assert sorted(out["stream"].unique().to_list()) == ["DP0", "DP1"]
    assert out.filter(pl.col("stream") == "DP0")["line_no"].to_list() == [1, 5, 9, 13, 17]
    assert out.filter(pl.col("stream") == "DP1")["line_no"].to_list() == [3, 7, 11, 15, 19]
    # a lazy table (the dashboard's and `loglens runs`'s whole-table reads) gives the same rows
    assert decode_intervals(frame(a + a_dup + b + b_dup).lazy()).equals(out)
    assert decode_intervals(pl.DataFrame()).height == decode_intervals(pl.DataFrame().lazy()).height == 0
    # columns a caller needs beside the intervals ride along with their own line
    tagged = frame(a + a_dup + b + b_dup).with_columns(tag=pl.col("line_no") * 10 + pl.col("tp_rank"))
    carried = decode_intervals(tagged.lazy(), carry=("tag",))
    assert carried.drop("tag").equals(out) and (carried["tag"] == carried["line_no"] * 10 + (carried["line_no"] - 1) % 4).all()
    assert "tag" in decode_intervals(tagged.clear(), carry=("tag",)).columns


def test_startup_and_flush_events_end_samples():
    rows, _ = make_stream([20] * 10, line_step=10)
    events = pl.DataFrame({"file_id": ["f", "f"], "line_no": [35, 75],
                           "kind": ["cache_flush", "server_args"],
                           "message": ["Cache flushed successfully!", "server_args=ServerArgs()"]})
    out = decode_intervals(frame(rows), events=events)
    reasons = dict(zip(out["line_no"], out["not_sample_reason"]))
    assert reasons[1] == "first_line"
    assert reasons[41] == "after_flush"
    assert reasons[81] == "after_startup"
    assert sum(r is not None for r in reasons.values()) == 3


def test_speculative_accept_len_scales_the_model():
    rows, truth = make_stream([16] * 12)
    for r in rows:  # every request emits 2.5 tokens per verify step
        r["accept_len"] = 2.5
        r["gen_throughput"] = round(r["gen_throughput"] * 2.5, 2)
    out = decode_intervals(frame(rows))
    np.testing.assert_allclose(out["model_interval_s"].to_numpy()[1:], [t[0] for t in truth[1:]], rtol=1e-3)


def test_implausible_and_empty_inputs():
    rows, _ = make_stream([20] * 6)
    rows[3]["gen_throughput"] = 0.0
    out = decode_intervals(frame(rows))
    assert out["not_sample_reason"][3] == "implausible"
    assert decode_intervals(frame(rows).head(0)).height == 0
    assert "interval_s" in decode_intervals(frame(rows).head(0)).columns


def test_custom_log_interval_and_missing_timestamps():
    rows, truth = make_stream([20] * 6, interval=10)
    out = decode_intervals(frame(rows), decode_log_interval=10)
    np.testing.assert_allclose(out["interval_s"].to_numpy()[1:], [t[0] for t in truth[1:]], rtol=1e-3)
    no_ts = frame(rows).with_columns(ts=pl.lit(None, pl.Datetime("us")))
    out = decode_intervals(no_ts, decode_log_interval=10)
    assert out["window_start"].null_count() == 6
    np.testing.assert_allclose(out["interval_s"].to_numpy()[1:], [t[0] for t in truth[1:]], rtol=1e-3)


def test_first_line_interval_runs_from_the_scheduler_start():
    rows, truth = make_stream([20] * 5)
    init = T0 - dt.timedelta(seconds=30)  # the scheduler logged max_total_num_tokens 30 s before
    rows[0]["gen_throughput"] = round(800 / (30 + truth[0][0]), 2)
    events = pl.DataFrame({"file_id": ["f"], "line_no": [0], "kind": ["max_total_num_tokens"],
                           "message": ["max_total_num_tokens=1000"], "ts": [init.replace(microsecond=0)]})
    out = decode_intervals(frame(rows), events=events)
    assert out["not_sample_reason"][0] == "first_line"
    assert out["interval_s"][0] == pytest.approx(30 + truth[0][0], abs=1.0)
    assert out["tokens"][0] == pytest.approx(800, rel=0.05)
    assert decode_intervals(frame(rows))["interval_s"][0] == pytest.approx(40 * 20 / rows[0]["gen_throughput"])


def test_prefill_lines_refine_the_batch_inside_a_window():
    # the batch jumps from 2 to 20 inside window 3; a Prefill line there shows the new batch
    sizes = [2, 2, 2, 20, 20, 20]
    rows, truth = make_stream(sizes, drift=[0, 0, 0, -2, 0, 0], ms=True, line_step=10)
    prefill = pl.DataFrame({"file_id": ["f"], "line_no": [25], "running_req": [2], "new_seq": [16],
                            "dp_rank": pl.Series([None], dtype=pl.Int32)})  # between lines 21 and 31
    with_pf = decode_intervals(frame(rows), prefill=prefill)
    without = decode_intervals(frame(rows))
    true_model = truth[3][0]
    assert abs(with_pf["model_interval_s"][3] - true_model) < abs(without["model_interval_s"][3] - true_model)


# ---- precise=True: a per-stream step-time fit and bounded least squares of the line times ----

NO_PREFILL = pl.DataFrame({"file_id": [], "line_no": [], "running_req": [], "new_seq": [], "new_token": []},
                          schema={"file_id": pl.String, "line_no": pl.Int64, "running_req": pl.Int64,
                                  "new_seq": pl.Int64, "new_token": pl.Int64})


def _drain(late=0.8):
    """Constant batches, then a drain whose requests finish late inside each window (the window's
    mean batch is near the previous line's, not halfway), then a constant tail."""
    sizes = [24] * 12 + list(range(22, 1, -2)) + [2] * 8
    prev = [sizes[0]] + sizes[:-1]
    drift = [late * (p - b) for p, b in zip(prev, sizes)]
    return sizes, drift


def test_precise_times_beat_the_band_method_on_a_shrinking_batch():
    sizes, drift = _drain()
    rows, truth = make_stream(sizes, drift=drift)
    band = decode_intervals(frame(rows), prefill=NO_PREFILL)
    precise = decode_intervals(frame(rows), prefill=NO_PREFILL, precise=True)
    true_iv = np.array([t[0] for t in truth[1:]])
    err_band = np.abs(band["interval_s"].to_numpy()[1:] - true_iv)
    err_precise = np.abs(precise["interval_s"].to_numpy()[1:] - true_iv)
    assert err_precise.max() < 0.05  # every interval within 50 ms (1-s timestamps)
    assert err_precise.mean() < err_band.mean() / 3
    drain = slice(12, 23)  # the shrinking lines' tokens
    true_tok = sum(t[1] for t in truth[drain])
    assert abs(precise["tokens"].to_numpy()[drain].sum() - true_tok) < 0.01 * true_tok
    assert abs(precise["tokens"].to_numpy()[drain].sum() - true_tok) < \
        abs(band["tokens"].to_numpy()[drain].sum() - true_tok)
    # without a prefill table the windows with prefills are unknown: the band method
    assert decode_intervals(frame(rows), precise=True)["interval_s"].equals(band["interval_s"])


def _fit_inputs(sizes, drift, step_ms=(30.0, 0.5)):
    rows, _ = make_stream(sizes, drift=drift, step_ms=step_ms)
    run = np.array(sizes, float)
    prev = np.concatenate([[np.nan], run[:-1]])
    gen = np.array([r["gen_throughput"] for r in rows])
    model = 40 * run / gen
    t = np.array([(r["ts"] - T0).total_seconds() for r in rows])
    return run, prev, np.ones(run.size), gen, model, np.zeros(run.size, np.int64), np.zeros(run.size, bool), \
        np.diff(t, prepend=np.nan)


@pytest.mark.parametrize("step_ms", [(30.0, 0.5), (96.0, 1.4)])
def test_step_fit_recovers_fixed_and_per_request_cost(step_ms):
    from loglens.intervals import _step_fit

    sizes, drift = _drain()
    a, c = _step_fit(*_fit_inputs(sizes, drift, step_ms), 40)
    assert a == pytest.approx(step_ms[0] / 1000, rel=0.03)
    assert c == pytest.approx(step_ms[1] / 1000, rel=0.1)


def test_step_fit_with_one_constant_batch_size_lets_the_bounds_decide():
    """Every constant-batch line at batch 4 (a --max-concurrency 4 run) fixes only a + 4c; the
    shrinking lines' batch bounds pin c (a least-squares fit alone gave a ≈ 2 ms, c ≈ 7.5 ms)."""
    from loglens.intervals import _step_fit

    sizes = [4] * 15 + [18, 15, 10, 8, 6, 5, 4, 3, 2, 1]
    prev = [sizes[0]] + sizes[:-1]
    drift = [0.5 * (p - b) for p, b in zip(prev, sizes)]
    a, c = _step_fit(*_fit_inputs(sizes, drift), 40)
    assert a == pytest.approx(0.030, rel=0.1)
    assert c == pytest.approx(0.0005, rel=0.3)


def test_bounds_fit_without_constant_batch_lines():
    """A log whose batch changes at every line (short speculative runs): no constant-batch line,
    so `_step_fit` has nothing exact to fit; the shrinking lines' bounds alone still pin the
    step time to a few %."""
    from loglens.intervals import _bounds_fit, _step_fit

    sizes = [24, 20, 16, 13, 10, 8, 6, 5, 4, 3, 2, 1, 16, 12, 9, 7, 5, 3, 1]
    prev = [sizes[0]] + sizes[:-1]
    drift = [0.5 * (p - b) for p, b in zip(prev, sizes)]
    run, prev_run, accept, gen, model, pf_n, pf_empty, dts = _fit_inputs(sizes, drift)
    prev_run[12] = np.nan  # a new burst: no batch bound across it
    assert _step_fit(run, prev_run, accept, gen, model, pf_n, pf_empty, dts, 40) is None
    a, c = _bounds_fit(run, prev_run, accept, gen, model, pf_n, pf_empty, dts)
    for b in (1, 10, 24):
        assert a + c * b == pytest.approx(0.030 + 0.0005 * b, rel=0.04)
    # too few shrinking lines: no fit
    few = slice(0, 6)
    assert _bounds_fit(run[few], prev_run[few], accept[few], gen[few], model[few], pf_n[few], pf_empty[few],
                       dts[few]) is None


@pytest.mark.parametrize("lagged", [False, True])
def test_prefill_clock_places_prefill_lines_from_their_input_throughput(lagged):
    """`input throughput` = new tokens / time since the previous Prefill line (this line's tokens
    from v0.5.11, the previous line's before): chained, the lines' 1-s brackets pin them to
    well under 0.1 s, and an idle gap whose rounding leaves too much doubt breaks the chain."""
    from loglens.intervals import prefill_clock

    rng = np.random.default_rng(3)
    gaps = rng.uniform(0.03, 0.4, 60)
    gaps[30] = 400.0  # a long idle gap: 256 tokens / 400 s prints 0.64, ±0.8 % -> no link
    true = 1000.3 + np.cumsum(gaps)
    tok = rng.integers(100, 3000, 60).astype(float)
    tok[29] = tok[30] = 256.0  # whichever line's tokens the throughput uses
    num = np.concatenate([[np.nan], tok[:-1]]) if lagged else tok
    thr = np.round(num / np.diff(true, prepend=np.nan), 2)
    thr[0] = 0.0  # the first line after start-up prints 0.00
    lo, hi = prefill_clock(np.floor(true), tok, thr)
    assert np.all((lo <= true + 1e-6) & (true <= hi + 1e-6))
    assert np.all(hi - lo <= 1.0 + 1e-9)
    assert np.median(hi - lo) < 0.1  # the bare brackets: 1 s
    # without the throughput: the brackets alone
    lo2, hi2 = prefill_clock(np.floor(true), tok, np.full(60, np.nan))
    np.testing.assert_allclose(hi2 - lo2, 1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["f1", "f2", None]), st.sampled_from([None, 0, 1]), st.sampled_from([None, 0, 3]),
                          st.sampled_from([None, 0, 1, 2]), st.sampled_from([None, 0, 1])), min_size=1, max_size=40))
@example([("f1", None, 0, 1, None), ("f1", None, 3, 0, None), ("f1", None, 3, 1, None)])  # streams named by GPU
def test_lowest_rank_copies_by_predicate_are_those_of_the_window(rows):
    """With a few streams the lowest TP/PP copy of each is kept by a condition per stream (which
    the scan applies as it reads); with many, by a window: both keep the same lines."""
    import loglens.intervals as iv

    df = pl.DataFrame(
        [{"file_id": f, "source": "src", "dp_rank": d, "gpu": g, "tp_rank": t, "pp_rank": p, "line_no": i + 1,
          "ts": dt.datetime(2026, 2, 19, 0, 0, i // 4), "running_req": 4, "gen_throughput": 100.0}
         for i, (f, d, g, t, p) in enumerate(rows)],
        schema_overrides={"dp_rank": pl.Int32, "gpu": pl.Int32, "tp_rank": pl.Int32, "pp_rank": pl.Int32})
    by_predicate = iv._one_row_per_stream_line(df.lazy())
    limit = iv._PREDICATE_STREAMS
    try:
        iv._PREDICATE_STREAMS = -1
        by_window = iv._one_row_per_stream_line(df.lazy())
    finally:
        iv._PREDICATE_STREAMS = limit
    assert by_predicate.equals(by_window)
