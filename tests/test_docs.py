"""The README is tested: its first two commands, every command documented, and the numbers it
shows for the sample are the numbers the tool computes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.main import get_command
from typer.testing import CliRunner

from loglens.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
runner = CliRunner()


def test_readme_starts_with_exactly_two_commands():
    first_block = re.search(r"```\n(.*?)```", README, re.S).group(1)
    commands = [l.split("#")[0].strip() for l in first_block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_every_command_is_documented():
    names = sorted(get_command(app).commands)
    assert {"ingest", "summary", "runs", "reconcile", "diagnose", "tail", "dashboard"} <= set(names)
    for name in names:
        assert f"`loglens {name}" in README, f"loglens {name} is not in the README's command table"


def test_readme_reconcile_numbers_are_real(tmp_path):
    store = str(tmp_path / "st")
    r = runner.invoke(app, ["ingest", str(ROOT / "sample_logs" / "sglang-glm5.log"), "--store", store])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        ["reconcile", "--bench", str(ROOT / "sample_logs" / "sglang-glm5.bench.jsonl"), "--record", "1", "--quote", "170.24", "--store", store, "--json"],
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    shown = README[README.index("Waterfall: from the server figure") :]
    assert f"{rep['gap']['client_tok_s']:.2f}" in shown
    for step in rep["gap"]["steps"]:
        if abs(step["tok_s"]) < 0.005:
            continue  # zero steps are left out of the terminal waterfall
        assert f"{step['tok_s']:+.2f}" in shown, step["name"]
    assert f"{rep['gap']['residual_tok_s']:+.2f}" in shown
    total = rep["gap"]["server_tok_s"] + sum(s["tok_s"] for s in rep["gap"]["steps"]) + rep["gap"]["residual_tok_s"]
    assert abs(total - rep["gap"]["client_tok_s"]) < 1e-6
