"""Dashboards: pure functions from store tables to Altair charts, the page, the CLI.

Frames are hand-made with `conform(df, table)` so they carry the store's real columns.
Decode lines use millisecond stamps and batch sizes that agree with their gen throughput
(40 × batch ÷ gen = the line spacing), so loglens.intervals reconstructs the windows exactly.
"""

from __future__ import annotations

import io
import json
import re
import struct
import sys
import types
from datetime import datetime, timedelta

import altair as alt
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from loglens.cli import app
from loglens.dashboards import aggregate, batch, samples, timeseries, traffic, waterfall
from loglens.dashboards.html_page import chart_spec, json_for_html, render_html, write_dashboard
from loglens.dashboards.page import BRUSH_NAME, EmptyStoreError, build_dashboard, time_panels
from loglens.dashboards.synthetic import HOSTILE, write_synthetic_store
from loglens.schema import conform
from loglens.store import Store

T0 = datetime(2026, 2, 19, 10, 0, 0)
HOSTILE_PATH = "/var/log/<img src=x onerror=alert(2)>.log"
HOSTILE_MODEL = "</title><script>alert(3)</script>"


# ---- hand-made tables -------------------------------------------------------------------------

def decode(rows: list[dict]) -> pl.DataFrame:
    """Decode rows from {t (seconds after T0), dp, gen, bs, ...}; line numbers in time order."""
    rows = sorted(rows, key=lambda r: r["t"])
    out = []
    for i, r in enumerate(rows):
        row = {k: v for k, v in r.items() if k not in ("t", "dp", "gen", "bs")}
        out.append({"ts": T0 + timedelta(seconds=r["t"]), "dp_rank": r.get("dp"), "gen_throughput": r.get("gen"),
                    "running_req": r.get("bs"), "file_id": "f1", "source": "/logs/server.log", "line_no": i + 1, **row})
    return conform(pl.DataFrame(out), "decode")


def steady(dp: int | None, start: float, end: float, every: float = 0.5, bs: int = 10, **extra) -> list[dict]:
    """Lines every `every` s whose gen throughput matches 40 steps of `bs` per interval."""
    gen = 40 * bs / every
    n = int(round((end - start) / every))
    return [{"t": start + i * every, "dp": dp, "gen": gen, "bs": bs, **extra} for i in range(n + 1)]


def prefill(n: int = 10) -> pl.DataFrame:
    return conform(pl.DataFrame([
        {"ts": T0 + timedelta(seconds=i), "new_token": 100 * (i + 1), "cached_token": 50, "input_throughput": 1000.0 + i,
         "line_no": 1000 + i, "file_id": "f1"} for i in range(n)]), "prefill")


def http(n: int = 30) -> pl.DataFrame:
    return conform(pl.DataFrame([
        {"ts": T0 + timedelta(seconds=i // 3), "status": [200, 404, 503][i % 3], "method": "POST", "path": "/generate",
         "line_no": 2000 + i, "file_id": "f1"} for i in range(n)]), "http")


def events(message: str = "KV cache pool is full. Retract requests. #retracted_reqs: 2") -> pl.DataFrame:
    return conform(pl.DataFrame([
        {"ts": T0 + timedelta(seconds=3), "kind": "retraction", "message": message, "retracted_reqs": 2, "line_no": 3000},
        {"ts": T0 + timedelta(seconds=5), "kind": "error", "message": "Scheduler hit an exception: Traceback", "line_no": 3001},
        {"ts": T0 + timedelta(seconds=6), "kind": "warning", "message": "a warning, not drawn", "line_no": 3002},
    ]).with_columns(file_id=pl.lit("f1"), source=pl.lit(HOSTILE_PATH)), "events")


def two_rank_decode() -> pl.DataFrame:
    return decode(steady(0, 0, 10, bs=10, cuda_graph=True, token_usage=0.5, queue_req=1)
                  + steady(1, 0.25, 10.25, bs=5, cuda_graph=True, token_usage=0.25, queue_req=0))


def write_store(path, **tables: pl.DataFrame) -> Store:
    store = Store(path)
    for name, frame in tables.items():
        store.write(name, conform(frame, name))
    store.write("files", conform(pl.DataFrame({"source": [HOSTILE_PATH], "file_id": ["f1"]}), "files"))
    store.write("config", conform(pl.DataFrame({"served_model_name": [HOSTILE_MODEL], "model_path": ["/m"]}), "config"))
    return store


def datasets(chart: alt.TopLevelMixin) -> dict[str, pl.DataFrame]:
    """The chart's data, as frames (chart data travels as CSV text)."""
    spec = chart_spec(chart)
    return {name: pl.read_csv(io.StringIO(text)) for name, text in spec.get("datasets", {}).items()}


def data_with(chart: alt.TopLevelMixin, column: str) -> pl.DataFrame:
    found = [f for f in datasets(chart).values() if column in f.columns]
    assert found, f"no dataset with a {column!r} column"
    return found[0]


# ---- aggregation ------------------------------------------------------------------------------

def test_stream_label_matches_intervals_naming():
    frame = pl.DataFrame({"dp_rank": [0, None, None], "gpu": [None, 3, None]}, schema={"dp_rank": pl.Int32, "gpu": pl.Int32})
    assert frame.select(aggregate.stream_label()).to_series().to_list() == ["DP0", "GPU3", "main"]


def test_duplicate_tp_streams_are_not_counted_twice():
    # some releases print the same batch from every TP rank: DP0 TP1 must not add to DP0
    rows = steady(0, 0, 4, tp_rank=0, queue_req=2) + steady(0, 0, 4, tp_rank=1, queue_req=2) + steady(1, 0, 4, tp_rank=0, queue_req=1)
    gauges = aggregate.gauge_by_bucket(decode(rows), ["queue_req"], timedelta(seconds=1))
    assert sorted(gauges["stream"].unique()) == ["DP0", "DP1"]
    per_bucket = gauges.group_by("ts").agg(pl.col("queue_req_mean").sum())
    assert per_bucket["queue_req_mean"].max() == 3


def test_bucket_width_bounds_points_and_respects_stamp_resolution():
    span = (T0, T0 + timedelta(hours=20))
    every = aggregate.bucket_width(span, max_points=1000)
    assert span[1] - span[0] <= every * 1000
    assert aggregate.bucket_width((T0, T0 + timedelta(seconds=30))) == timedelta(seconds=1)
    assert aggregate.bucket_width((T0, T0 + timedelta(seconds=30)), finest=timedelta(milliseconds=100)) == timedelta(milliseconds=100)


def test_gauge_holds_between_lines_and_stops_when_idle():
    rows = steady(0, 0, 6, every=2.0, queue_req=4) + steady(0, 60, 62, every=2.0, queue_req=1)
    gauges = aggregate.gauge_by_bucket(decode(rows), ["queue_req"], timedelta(seconds=1)).sort("ts")
    by_second = {int((t - T0).total_seconds()): v for t, v in zip(gauges["ts"], gauges["queue_req_mean"])}
    assert by_second[1] == 4  # between two lines 2 s apart: the last value holds
    assert by_second[30] is None  # 54 s without a line: idle, not "4 queued"


def test_throughput_is_time_weighted_and_idle_is_a_gap():
    rows = steady(0, 0, 10, bs=10) + [{"t": 70.0, "dp": 0, "gen": 3.0, "bs": 10}]  # a line after 60 idle seconds
    marked = samples.decode_samples(decode(rows))
    assert marked.filter(pl.col("ts") == T0 + timedelta(seconds=70))["not_sample_reason"].to_list() == ["idle_gap"]
    series = samples.throughput_by_bucket(marked, timedelta(seconds=1))
    busy = series.filter(pl.col("ts") < T0 + timedelta(seconds=10))
    assert busy["gen_tok_s"].to_list() == pytest.approx([800.0] * busy.height)
    idle = series.filter(pl.col("ts").is_between(T0 + timedelta(seconds=20), T0 + timedelta(seconds=60)))
    assert idle.height == 0 or idle["gen_tok_s"].null_count() == idle.height


def test_bucket_without_a_line_is_covered_by_the_next_window():
    rows = steady(0, 0, 12, every=3.0, bs=30)  # a line every 3 s, buckets of 1 s
    series = samples.throughput_by_bucket(samples.decode_samples(decode(rows)), timedelta(seconds=1))
    inside = series.filter(pl.col("ts").is_between(T0 + timedelta(seconds=1), T0 + timedelta(seconds=11)))
    assert inside["gen_tok_s"].null_count() == 0
    assert inside["gen_tok_s"].to_list() == pytest.approx([400.0] * inside.height)


# ---- time panels ------------------------------------------------------------------------------

PANELS = [
    (timeseries.gen_throughput_chart, "decode"), (timeseries.requests_chart, "decode"),
    (timeseries.token_usage_chart, "decode"), (timeseries.cuda_graph_chart, "decode"),
    (traffic.prefill_tokens_chart, "prefill"), (traffic.input_throughput_chart, "prefill"),
    (traffic.http_status_chart, "http"),
]


@pytest.mark.parametrize("panel,table", PANELS, ids=[p.__name__ for p, _ in PANELS])
def test_panels_validate_with_data_and_without(panel, table):
    frames = {"decode": two_rank_decode(), "prefill": prefill(), "http": http()}
    with_data = panel(frames[table], runs=[{"start": T0, "end": T0 + timedelta(seconds=5), "label": "run"}], events=events())
    spec = with_data.to_dict()  # validates against the Vega-Lite schema
    assert spec["title"]["text"]
    assert any(len(text.splitlines()) > 1 for text in spec["datasets"].values())
    empty = panel(conform(pl.DataFrame(), table))
    assert "no " in json.dumps(empty.to_dict())  # says why it is empty


def test_gen_throughput_per_stream_and_summed():
    series = data_with(timeseries.gen_throughput_chart(two_rank_decode()), "gen_tok_s")
    mid = series.filter(pl.col("ts").str.starts_with("2026-02-19T10:00:05"))
    by_stream = dict(zip(mid["stream"], mid["gen_tok_s"]))
    assert by_stream["DP0"] == pytest.approx(800.0) and by_stream["DP1"] == pytest.approx(400.0)
    assert by_stream[timeseries.SUM_LABEL] == pytest.approx(1200.0)


def test_first_line_is_shown_as_no_sample():
    left_out = data_with(timeseries.gen_throughput_chart(two_rank_decode()), "why")
    assert left_out.height == 2  # the first line of each stream
    assert all("first Decode line" in why for why in left_out["why"])


def test_tooltips_say_what_the_numbers_mean():
    text = json.dumps(timeseries.gen_throughput_chart(two_rank_decode()).to_dict())
    assert "tokens from the last 40 decode steps" in text and "seconds since the previous Decode line" in text


def test_runs_are_shaded_from_a_frame_or_a_list():
    as_list = [{"start": "2026-02-19T10:00:02", "end": "2026-02-19T10:00:06", "label": "run A"}]
    as_frame = pl.DataFrame({"start": [T0 + timedelta(seconds=2)], "end": [T0 + timedelta(seconds=6)], "label": ["run A"]})
    for runs in (as_list, as_frame):
        spans = data_with(timeseries.gen_throughput_chart(two_rank_decode(), runs=runs), "label")
        assert spans.select(pl.col("start", "end").str.to_datetime(), "label").row(0) == (
            T0 + timedelta(seconds=2), T0 + timedelta(seconds=6), "run A")


def test_retractions_and_errors_are_rules_other_events_are_not():
    chart = timeseries.requests_chart(two_rank_decode(), events=events())
    rules = data_with(chart, "kind")
    assert sorted(rules["kind"]) == ["error", "retraction"]
    layer_marks = [layer["mark"]["type"] for layer in chart.to_dict()["layer"]]
    assert "rule" in layer_marks


def test_brush_on_main_panel_zooms_the_others():
    panels, axis = time_panels(two_rank_decode(), prefill(), http(), events())
    main = panels[0].to_dict()
    brush = next(p for p in main["params"] if p["name"] == BRUSH_NAME)  # Altair lifts it, naming its view
    assert brush["select"] == {"type": "interval", "encodings": ["x"]}
    assert brush["views"][0] in [layer.get("name") for layer in main["layer"]]
    for detail in panels[1:]:
        spec = detail.to_dict()
        domains = [layer["encoding"]["x"]["scale"].get("domain") for layer in spec["layer"]
                   if "x" in layer.get("encoding", {}) and "scale" in layer["encoding"]["x"]]
        assert {"param": BRUSH_NAME} in domains


def test_http_requests_per_second_by_status_class():
    counts = data_with(traffic.http_status_chart(http(30)), "status_class")
    assert set(counts["status_class"]) == {"2xx", "4xx", "5xx"}
    assert counts.filter(pl.col("status_class") == "2xx")["req_s"].to_list() == pytest.approx([1.0] * 10)


def test_prefill_tokens_new_vs_cached_per_second():
    tokens = data_with(traffic.prefill_tokens_chart(prefill(3)), "tok_s")
    first = tokens.filter(pl.col("ts") == "2026-02-19T10:00:00")
    assert dict(zip(first["kind"], first["tokens"])) == {"new (computed)": 100, "cached (prefix hit)": 50}


# ---- throughput vs batch size -----------------------------------------------------------------

def step_rows(fixed_ms: float, per_req_ms: float, sizes: list[int], every: float = 1.0) -> list[dict]:
    rows, t = [], 0.0
    for bs in sizes:
        rows.append({"t": t, "dp": 0, "bs": bs, "gen": 1000.0 * bs / (fixed_ms + per_req_ms * bs)})
        t += every
    return rows


def test_step_model_fit_recovers_the_costs():
    sizes = [4, 8, 16, 32, 64, 96, 128] * 6
    found = batch.fit_step_curve(batch.batch_samples(decode(step_rows(12.0, 0.25, sizes))))
    assert found.usable
    assert found.fixed_ms == pytest.approx(12.0, rel=1e-3) and found.per_req_ms == pytest.approx(0.25, rel=1e-3)


def test_step_model_fit_ignores_a_line_after_idle_and_a_prefill_window():
    rows = step_rows(12.0, 0.25, [4, 8, 16, 32, 64, 96, 128] * 6)
    rows.append({"t": 200.0, "dp": 0, "bs": 64, "gen": 5.0})  # first line after 150 idle seconds
    rows[20]["gen"] /= 4  # a window that held a long prefill
    found = batch.fit_step_curve(batch.batch_samples(decode(rows)))
    assert found.fixed_ms == pytest.approx(12.0, rel=1e-2) and found.per_req_ms == pytest.approx(0.25, rel=1e-2)


def test_given_step_model_is_drawn_instead_of_a_fit():
    chart = batch.throughput_vs_batch_chart(decode(step_rows(12.0, 0.25, [4, 8, 16] * 3)), fixed_ms=20.0, per_req_ms=0.5)
    subtitle = " ".join(chart.to_dict()["title"]["subtitle"])
    assert "20.00 ms + 0.500 ms" in subtitle and "given" in subtitle
    curve = data_with(chart, "tok_s")
    assert curve.filter(pl.col("running_req") == 1)["tok_s"][0] == pytest.approx(1000 / 20.5, rel=1e-3)


def test_one_batch_size_gives_no_curve():
    chart = batch.throughput_vs_batch_chart(decode(step_rows(12.0, 0.25, [32] * 10)))
    assert "No step-time curve" in " ".join(chart.to_dict()["title"]["subtitle"])
    assert not any("tok_s" in f.columns for f in datasets(chart).values())


def test_many_samples_are_binned():
    sizes = [1 + (i * 7) % 250 for i in range(3000)]
    chart = batch.throughput_vs_batch_chart(decode(step_rows(12.0, 0.25, sizes, every=0.3)))
    points = data_with(chart, "lo")
    assert points.height <= batch.MAX_BINS * 3 and points["n"].sum() > 2900


# ---- waterfall --------------------------------------------------------------------------------

RECONCILE = {"gap": {"server_tok_s": 170.24, "client_tok_s": 144.0, "residual_tok_s": -1.24,
                     "steps": [{"name": "peak vs steady-state mean", "tok_s": -12.0, "why": "one window is the best moment"},
                               {"name": "other DP ranks", "tok_s": 5.0, "why": "two ranks"},
                               {"name": "drain", "tok_s": -18.0, "why": "few requests left"}]}}


def test_waterfall_walks_from_server_to_client():
    rows = waterfall.waterfall_rows(RECONCILE)
    assert rows["label"].to_list() == ["server figure", "peak vs steady-state mean", "other DP ranks", "drain",
                                       "residual (unexplained)", "client figure"]
    assert rows["start"][1:5].to_list() == pytest.approx([170.24, 158.24, 163.24, 145.24])
    assert rows["end"][4] == pytest.approx(144.0)  # the residual lands on the client figure
    spec = waterfall.waterfall_chart(RECONCILE).to_dict()
    assert "Warning" not in json.dumps(spec["title"])


def test_waterfall_says_when_the_steps_do_not_add_up():
    broken = {"gap": {**RECONCILE["gap"], "residual_tok_s": 30.0}}
    assert "Warning" in json.dumps(waterfall.waterfall_chart(broken).to_dict()["title"])


def test_waterfall_without_figures_says_so_and_repeated_names_stay_apart():
    assert "no gap.server_tok_s" in json.dumps(waterfall.waterfall_chart({"error": "no run"}).to_dict())
    twice = {"gap": {**RECONCILE["gap"], "steps": [{"name": "x", "tok_s": -1}, {"name": "x", "tok_s": -2}]}}
    labels = waterfall.waterfall_rows(twice)["label"].to_list()
    assert labels == ["server figure", "x #1", "x #2", "residual (unexplained)", "client figure"]


# ---- the page ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("small") / "store", decode=two_rank_decode(), prefill=prefill(),
                       http=http(), events=events(message=HOSTILE))


@pytest.fixture(scope="module")
def page_html(small_store):
    return render_html(build_dashboard(small_store))


def test_page_is_self_contained(page_html):
    assert not re.search(r"<script[^>]*\bsrc\s*=", page_html, re.I)
    assert not re.search(r"<link\b", page_html, re.I)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page_html, re.I)
    assert not re.search(r"cdn\.jsdelivr|unpkg\.com|cdnjs", page_html)
    assert "Content-Security-Policy" in page_html and "default-src 'none'" in page_html
    assert "vegaEmbed" in page_html and '"$schema"' not in page_html


def test_log_text_is_escaped_data_in_the_page(page_html):
    assert HOSTILE not in page_html
    assert "<img src=x" not in page_html and "onerror=alert(1)>" not in page_html.replace("\\u003e", "")
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in page_html  # the message, escaped inside the JSON
    assert HOSTILE_MODEL not in page_html and "<img src=x onerror=alert(2)>" not in page_html
    title = re.search(r"<title>(.*?)</title>", page_html, re.S).group(1)
    assert title == "loglens: &lt;/title&gt;&lt;script&gt;alert(3)&lt;/script&gt; (&lt;img src=x onerror=alert(2)&gt;.log)"
    header = re.search(r"<h1>(.*?)</h1>", page_html, re.S).group(1)
    assert header == title


def test_page_spec_is_valid_and_parses_back(page_html):
    block = re.search(r'<script type="application/json" id="loglens-spec">(.*?)</script>', page_html, re.S).group(1)
    spec = json.loads(block)
    alt.VConcatChart.from_dict(spec)  # validates
    messages = [text for text in spec["datasets"].values() if "alert(1)" in text]
    assert messages and HOSTILE in messages[0]  # the data itself is unchanged


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.text() | st.integers() | st.booleans() | st.none(),
                    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
                    max_leaves=20))
def test_json_for_html_round_trips_and_cannot_close_a_tag(value):
    text = json_for_html(value)
    assert json.loads(text) == value
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}


def test_png_and_svg_export(small_store, tmp_path):
    board = build_dashboard(small_store)
    png = write_dashboard(board, tmp_path / "d.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 800 and height > 1000
    svg = write_dashboard(board, tmp_path / "d.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "<script" not in svg and "<img" not in svg
    with pytest.raises(ValueError, match="unknown output type"):
        write_dashboard(board, tmp_path / "d.pdf")


def test_large_store_page_stays_small(tmp_path):
    store = write_synthetic_store(tmp_path / "big", 2_000_000)
    board = build_dashboard(store)
    page = render_html(board)
    assert len(page.encode()) < 5_000_000
    assert "2,000,000" in " ".join(board.notes)
    rows = [len(text.splitlines()) for text in chart_spec(board.chart)["datasets"].values()]
    assert max(rows) <= aggregate.MAX_POINTS * 8 + 1  # 8 DP streams at most MAX_POINTS buckets each


def test_the_same_store_gives_the_same_page(tmp_path):
    """Each chart's rows come out in one order, and ties (the most frequent of equally frequent
    paths) are broken the same way: group-bys over this many rows return groups in an order
    that varies from run to run, and so did the page.  (A bucket's mean may still differ in its
    last printed digit: polars adds a group's values in parallel, in no fixed order.)"""
    from polars.testing import assert_frame_equal

    store = write_synthetic_store(tmp_path / "mid", 60_000)
    first, second = ([*chart_spec(build_dashboard(store).chart)["datasets"].values()] for _ in range(2))
    assert len(first) == len(second) > 5
    for a, b in zip(first, second):
        if not isinstance(a, str):
            assert a == b
            continue
        fa, fb = pl.read_csv(io.StringIO(a)), pl.read_csv(io.StringIO(b))
        assert_frame_equal(fa, fb, check_exact=False, rel_tol=0, abs_tol=0.0015)


def test_ties_are_broken_the_same_way_every_time():
    """The most frequent path of a bucket among equally frequent ones is the first in sort
    order; binned batch sizes list the graph states in order; lines left out of the throughput
    series are ordered by bucket, then stream."""
    t0 = datetime(2026, 2, 19, 0, 0, 0)
    paths = ["/z", "/v1/completions", "/a", "/generate"] * 50
    http = pl.DataFrame({"ts": [t0] * 100 + [t0 + timedelta(seconds=1)] * 100, "path": paths,
                         "status": [200] * len(paths), "method": ["POST"] * len(paths)})
    spec = chart_spec(traffic.http_status_chart(http))
    rows = [pl.read_csv(io.StringIO(v)) for v in spec["datasets"].values() if isinstance(v, str) and "top_path" in v]
    assert rows and set(rows[0]["top_path"]) == {"/a"}

    n = aggregate.MAX_POINTS * 3
    many = pl.DataFrame({"running_req": [i % 40 + 1 for i in range(n)], "cuda_graph": [i % 3 == 0 for i in range(n)],
                         "gen_throughput": [100.0 + i % 7 for i in range(n)], "step_ms": [20.0 + i % 5 for i in range(n)]})
    binned, was_binned = batch._scatter_points(many)
    assert was_binned and binned.select("running_req", "cuda_graph").equals(binned.select("running_req", "cuda_graph").sort("running_req", "cuda_graph"))

    out = pl.DataFrame({
        "stream": [f"DP{7 - i % 8}" for i in range(400)], "window_end": [t0 + timedelta(seconds=i // 8) for i in range(400)],
        "is_sample": [False] * 400, "gen_throughput": [1.0] * 400, "not_sample_reason": ["idle_gap"] * 400,
        "interval_s": [1.0] * 400})
    left_out = samples.not_samples_by_bucket(out, timedelta(seconds=10))
    keys = left_out.select(aggregate.BUCKET, aggregate.STREAM)
    assert keys.height == 40 and keys.equals(keys.sort(aggregate.BUCKET, aggregate.STREAM))


def test_empty_store_is_an_error(tmp_path):
    store = write_store(tmp_path / "empty")
    with pytest.raises(EmptyStoreError, match="holds no log rows"):
        build_dashboard(store)


# ---- the command ------------------------------------------------------------------------------

runner = CliRunner()


def test_cli_writes_a_page(small_store, tmp_path):
    out = tmp_path / "d.html"
    result = runner.invoke(app, ["dashboard", "--store", str(small_store.path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "Wrote" in result.output and out.stat().st_size > 500_000
    assert "No --bench RESULTS given" in result.output


def test_cli_missing_store_is_exit_1(tmp_path):
    result = runner.invoke(app, ["dashboard", "--store", str(tmp_path / "nope"), "-o", str(tmp_path / "d.html")])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "Traceback" not in result.output


def test_cli_empty_store_is_exit_1(tmp_path):
    store = write_store(tmp_path / "empty")
    result = runner.invoke(app, ["dashboard", "--store", str(store.path), "-o", str(tmp_path / "d.html")])
    assert result.exit_code == 1 and "Error: " in result.output and "no log rows" in result.output


def test_cli_unknown_extension_is_exit_2(small_store, tmp_path):
    result = runner.invoke(app, ["dashboard", "--store", str(small_store.path), "-o", str(tmp_path / "d.pdf")])
    assert result.exit_code == 2 and "Error: " in result.output and ".html, .png, .svg" in result.output


def test_cli_missing_bench_file_is_exit_1(small_store, tmp_path):
    result = runner.invoke(app, ["dashboard", "--store", str(small_store.path), "--bench", str(tmp_path / "r.jsonl"),
                                 "-o", str(tmp_path / "d.html")])
    assert result.exit_code == 1 and "bench results file not found" in result.output


def fake_module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


class FakeReport:
    def __init__(self, index: int):
        self.index = index

    def to_dict(self) -> dict:
        return {"record": {"index": self.index, "tag": "<b>tag</b>"}, **RECONCILE,
                "window": {"start": "2026-02-19T10:00:01.500", "end": "2026-02-19T10:00:08.000"}}


def test_cli_bench_draws_a_waterfall_and_shades_the_run(small_store, tmp_path, monkeypatch):
    bench_file = tmp_path / "r.jsonl"
    bench_file.write_text('{"duration": 7}\n')
    monkeypatch.setitem(sys.modules, "loglens.bench", fake_module("loglens.bench", load_bench=lambda path: ["rec"]))
    monkeypatch.setitem(sys.modules, "loglens.reconcile.core", fake_module(
        "loglens.reconcile.core", reconcile=lambda store, records: [FakeReport(i) for i, _ in enumerate(records)]))
    out = tmp_path / "d.html"
    result = runner.invoke(app, ["dashboard", "--store", str(small_store.path), "--bench", str(bench_file), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "record 1 (\\u003cb\\u003etag\\u003c/b\\u003e): why client and server disagree" in page
    assert "peak vs steady-state mean" in page and "2026-02-19T10:00:01" in page


def test_cli_bench_without_the_bench_reader_skips_the_waterfall(small_store, tmp_path, monkeypatch):
    bench_file = tmp_path / "r.jsonl"
    bench_file.write_text('{"duration": 7}\n')
    monkeypatch.setitem(sys.modules, "loglens.bench", None)  # import fails
    result = runner.invoke(app, ["dashboard", "--store", str(small_store.path), "--bench", str(bench_file),
                                 "-o", str(tmp_path / "d.html")])
    assert result.exit_code == 0, result.output
    assert "Waterfall skipped: the bench reader (loglens.bench) is not installed." in result.output
