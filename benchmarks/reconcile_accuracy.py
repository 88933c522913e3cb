"""How close `loglens reconcile` gets to the simulator's truth on shapes the tests never saw.

Deterministic: every case is a fixed simulation (server, runs, seed), so two runs of this script
print the same table.  Each simulated log is written, ingested into a fresh store and reconciled
against its own bench JSONL; every record is compared with the run's ground truth:

* decode-token error: server decode tokens inside the window vs the true tokens of decode steps
  ending inside it (the issue's bar: within 3 %);
* window edges: reconciled start / end vs the true first dispatch / duration mark (bar: 2 s);
* peak exact: the highest gen throughput logged inside the window, to the printed 2 decimals;
* residual: the waterfall's unexplained tok/s as a share of the client's throughput (bar: 5 %).

    python benchmarks/reconcile_accuracy.py            # full sweep (~100 runs, a few minutes)
    python benchmarks/reconcile_accuracy.py --quick    # a third of it, for iterating
    python benchmarks/reconcile_accuracy.py --json out.json --only spec

Shapes: short runs of 4-16 s (few Decode lines, edges weigh most), speculative decoding (short
and long), DP=2, --max-concurrency, rate inf, millisecond timestamps, old releases (v0.3.4,
v0.4.1 without a server-info call, v0.4.6.post4), and runs buried in a long noisy log.  Every
simulation holds several runs, so most have a next run (whose first Decode line logs this
run's unlogged tail) and the last one has none.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loglens.bench import load_bench  # noqa: E402
from loglens.ingest import ingest_paths  # noqa: E402
from loglens.reconcile.core import reconcile  # noqa: E402
from loglens.simulate import Noise, Scenario, ServerConfig, Speculative, StepModel, simulate  # noqa: E402
from loglens.store import Store  # noqa: E402

STEP = StepModel(fixed_ms=30, per_req_ms=0.5)
TOKEN_BAR, EDGE_BAR, RESIDUAL_BAR = 3.0, 2.0, 5.0


@dataclass
class Case:
    name: str
    server: ServerConfig
    runs: list[Scenario]
    seed: int
    kw: dict = field(default_factory=dict)
    quick: bool = False  # part of --quick


def _short(i: int, seed: int, accept: float = 1.0, **over) -> Scenario:
    """A short run of about 4-16 s (few Decode lines: the edges weigh most); shapes cycle with i.
    The longest output decides the duration: ~`out / accept` decode steps of ~31-45 ms."""
    n = [8, 12, 16, 24, 32, 20][(i + seed) % 6]
    target_s = [4.0, 6.0, 8.0, 11.0, 14.0, 16.0][(2 * i + seed) % 6]
    step_s = (STEP.fixed_ms + STEP.per_req_ms * n / 2) / 1000
    out = max(16, int(target_s / step_s * accept * 0.9))
    rate = [math.inf, 4.0, 8.0, 16.0][(i + 2 * seed) % 4]
    conc = [None, None, 4, 8][(i + seed) % 4]
    kw = dict(num_prompts=n, request_rate=rate, max_concurrency=conc, random_input_len=256,
              random_output_len=out, dataset_seed=seed * 31 + i, idle_before_s=[8, 15, 25][i % 3])
    kw.update(over)
    return Scenario(**kw)


def _long(i: int, seed: int, **over) -> Scenario:
    n = [32, 48, 64][i % 3]
    kw = dict(num_prompts=n, request_rate=[math.inf, 4.0, 8.0][(i + seed) % 3],
              max_concurrency=[None, 16][(i + seed) % 2], random_input_len=256,
              random_output_len=[256, 512][i % 2], dataset_seed=seed * 17 + i, idle_before_s=20)
    kw.update(over)
    return Scenario(**kw)


def cases() -> list[Case]:
    out: list[Case] = []
    for seed in range(10):  # short runs, current release
        out.append(Case(f"short s{seed}", ServerConfig(step=STEP), [_short(i, seed) for i in range(4)],
                        100 + seed, quick=seed < 3))
    for seed in range(10):  # speculative: short runs and one long per simulation
        acc = [2.5, 2.0, 3.2][seed % 3]
        runs = [_short(i, seed, acc) for i in range(3)] + [_long(seed, seed)]
        out.append(Case(f"spec{acc} s{seed}", ServerConfig(step=STEP, speculative=Speculative(accept_len=acc)),
                        runs, 200 + seed, quick=seed < 3))
    for seed in range(4):  # DP=2
        runs = [_short(i, seed, num_prompts=[16, 24, 32][i % 3]) for i in range(3)] + [_long(seed, seed)]
        out.append(Case(f"dp2 s{seed}", ServerConfig(dp_size=2, step=STEP), runs, 300 + seed, quick=seed == 0))
    out.append(Case("dp2 spec", ServerConfig(dp_size=2, step=STEP, speculative=Speculative(accept_len=2.5)),
                    [_short(i, 7, 2.5, num_prompts=24) for i in range(3)], 310))
    for seed in range(3):  # millisecond timestamps
        out.append(Case(f"ms s{seed}", ServerConfig(step=STEP), [_short(i, seed + 10) for i in range(3)]
                        + [_long(seed, seed)], 400 + seed, {"log_ms": True}, quick=seed == 0))
    for rel in ("v0.3.4", "v0.4.1", "v0.4.6.post4"):  # older releases (v0.4.1: no server-info call)
        out.append(Case(rel, ServerConfig(step=STEP), [_short(i, 20) for i in range(3)] + [_long(1, 2)],
                        500, {"release": rel}, quick=rel == "v0.4.1"))
    out.append(Case("v0.5.11 noise", ServerConfig(step=STEP), [_short(i, 21) for i in range(3)], 510,
                    {"release": "v0.5.11", "noise": True}))
    for seed in range(2):  # max concurrency and rate inf, explicitly
        out.append(Case(f"conc+inf s{seed}", ServerConfig(step=STEP),
                        [_short(i, 30 + seed, max_concurrency=[4, 8, None, 2][i], request_rate=math.inf)
                         for i in range(4)], 600 + seed, quick=seed == 0))
    # buried: short and long runs far apart in an hour of health checks
    plan = [(12, 4, 300), (40, math.inf, 420), (16, 8, 200), (24, math.inf, 600), (48, 6, 500)]
    buried = [Scenario(num_prompts=n, request_rate=r, random_input_len=256, random_output_len=[160, 384][i % 2],
                       idle_before_s=idle, dataset_seed=40 + i) for i, (n, r, idle) in enumerate(plan)]
    out.append(Case("buried", ServerConfig(step=STEP), buried, 700, {"noise": Noise(health_every_s=5.0)},
                    quick=True))
    return out


def run_case(case: Case, tmp: Path) -> list[dict]:
    sim = simulate(case.server, case.runs, seed=case.seed, **case.kw)
    d = Path(tempfile.mkdtemp(prefix="acc-", dir=tmp))
    paths = sim.write(d, stem="sim", truth=False)
    store = Store(d / "store")
    ingest_paths([paths["log"]], store)
    reports = [r.to_dict() for r in reconcile(store, load_bench(paths["bench"]))]
    rows = []
    for i, (rep, tr) in enumerate(zip(reports, sim.truth.runs)):
        row = {"case": case.name, "run": i, "duration_s": tr.duration_s, "truth_tokens": tr.decode_tokens,
               "last": i == len(case.runs) - 1}
        if "error" in rep:
            row["error"] = rep["error"]
            rows.append(row)
            continue
        w, gap = rep["window"], rep["gap"]
        got = rep["server"]["decode_tokens"]
        peak = rep["server"]["gen_throughput_peak"]
        want_peak = round(tr.peak_gen_throughput, 2) if tr.peak_gen_throughput is not None else None
        total = gap["server_tok_s"] + sum(s["tok_s"] for s in gap["steps"]) + gap["residual_tok_s"]
        row.update(
            tokens=got,
            token_err_pct=100 * (got - tr.decode_tokens) / tr.decode_tokens if tr.decode_tokens else math.nan,
            start_err_s=(datetime.fromisoformat(w["start"]) - tr.window_start).total_seconds(),
            end_err_s=(datetime.fromisoformat(w["end"]) - tr.window_end).total_seconds(),
            peak_exact=peak is not None and want_peak is not None and abs(peak - want_peak) <= 0.005,
            identity_exact=abs(total - gap["client_tok_s"]) <= 1e-9,
            residual_pct=100 * gap["residual_tok_s"] / gap["client_tok_s"],
            by_phase=rep["tokens"]["by_phase"])
        rows.append(row)
    return rows


def _fails(r: dict) -> list[str]:
    if "error" in r:
        return ["error"]
    out = []
    if abs(r["token_err_pct"]) > TOKEN_BAR:
        out.append("tokens")
    if max(abs(r["start_err_s"]), abs(r["end_err_s"])) > EDGE_BAR:
        out.append("edges")
    if not r["peak_exact"]:
        out.append("peak")
    if not r["identity_exact"]:
        out.append("identity")
    if abs(r["residual_pct"]) >= RESIDUAL_BAR:
        out.append("residual")
    return out


def summarize(rows: list[dict]) -> dict:
    ok = [r for r in rows if "error" not in r]
    errs = [abs(r["token_err_pct"]) for r in ok]
    short = [abs(r["token_err_pct"]) for r in ok if r["duration_s"] <= 16]
    return {"runs": len(rows), "errors": len(rows) - len(ok),
            "token_err_median_pct": statistics.median(errs) if errs else None,
            "token_err_max_pct": max(errs) if errs else None,
            "token_err_over_3pct": sum(e > TOKEN_BAR for e in errs),
            "short_runs": len(short), "short_median_pct": statistics.median(short) if short else None,
            "short_max_pct": max(short) if short else None,
            "edge_err_max_s": max((max(abs(r["start_err_s"]), abs(r["end_err_s"])) for r in ok), default=None),
            "peak_exact": sum(r["peak_exact"] for r in ok), "identity_exact": sum(r["identity_exact"] for r in ok),
            "residual_max_pct": max((abs(r["residual_pct"]) for r in ok), default=None),
            "failing_runs": sum(bool(_fails(r)) for r in rows)}


def print_table(rows: list[dict]) -> None:
    print(f"{'case':<16} {'run':>3} {'dur s':>6} {'truth':>7} {'tok err%':>8} {'start s':>7} {'end s':>6} "
          f"{'peak':>4} {'resid%':>6}  fails")
    for r in rows:
        if "error" in r:
            print(f"{r['case']:<16} {r['run']:>3} {r['duration_s']:6.1f} {r['truth_tokens']:7d}  ERROR {r['error'][:60]}")
            continue
        last = "*" if r["last"] else " "
        print(f"{r['case']:<16} {r['run']:>2}{last} {r['duration_s']:6.1f} {r['truth_tokens']:7d} "
              f"{r['token_err_pct']:+8.2f} {r['start_err_s']:+7.2f} {r['end_err_s']:+6.2f} "
              f"{'yes' if r['peak_exact'] else 'NO':>4} {r['residual_pct']:+6.2f}  {','.join(_fails(r))}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="about a third of the cases (for iterating)")
    ap.add_argument("--only", default=None, help="only cases whose name contains this")
    ap.add_argument("--json", default=None, help="write every row and the summary here")
    ap.add_argument("--tmp-dir", default=None, help="where simulated logs and stores are written")
    args = ap.parse_args(argv)
    todo = [c for c in cases() if (c.quick or not args.quick) and (args.only is None or args.only in c.name)]
    t0 = time.perf_counter()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="loglens-accuracy-", dir=args.tmp_dir) as tmp:
        for c in todo:
            rows.extend(run_case(c, Path(tmp)))
    print_table(rows)
    s = summarize(rows)
    print()
    print(f"{s['runs']} runs in {len(todo)} simulations ({time.perf_counter() - t0:.0f} s); "
          f"{s['errors']} without a report")
    print(f"decode tokens: median |err| {s['token_err_median_pct']:.2f} %, max {s['token_err_max_pct']:.2f} %, "
          f"{s['token_err_over_3pct']} over {TOKEN_BAR:.0f} %")
    print(f"  runs <= 16 s: {s['short_runs']}, median {s['short_median_pct']:.2f} %, max {s['short_max_pct']:.2f} %")
    print(f"edges: max |err| {s['edge_err_max_s']:.2f} s; peak exact {s['peak_exact']}/{s['runs'] - s['errors']}; "
          f"identity exact {s['identity_exact']}/{s['runs'] - s['errors']}; residual max {s['residual_max_pct']:.2f} %")
    print(f"runs failing a bar: {s['failing_runs']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": s}, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
