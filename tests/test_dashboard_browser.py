"""The one browser test: the written page really renders, offline, without running log text.

Headless Chromium loads the page from a file with every host name unresolvable, runs it for a
virtual-time budget and dumps the DOM.  The page writes what happened onto <body>
(loglens/dashboards/html_page.py): `data-status`, `data-panels` (views that drew data marks),
`data-errors` (script errors, CSP violations, alert() calls) and `data-resources` (fetches).
The store carries markup in an event message, a log path and the model name: had any of it
been run, alert() would be in data-errors, and the <img> would have fetched a resource.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from loglens.cli import app
from test_dashboards import HOSTILE, events, http, prefill, two_rank_decode, write_store

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)")


def render_in_chromium(page: Path, profile: Path) -> str:
    command = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing resolves: the page must need no network
        "--virtual-time-budget=30000", "--dump-dom", page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def body_attributes(dom: str) -> dict[str, str]:
    """Attributes of the page's <body> (the inlined bundle's text mentions `<body>` too, so
    look for the one that carries the status)."""
    tag = re.search(r"<body\b([^>]*\bdata-status=[^>]*)>", dom)
    assert tag, "the page never set data-status: its script did not run"
    return {name: html.unescape(value) for name, value in re.findall(r'([\w-]+)="([^"]*)"', tag.group(1))}


def test_page_renders_offline_and_runs_no_log_text(tmp_path):
    store = write_store(tmp_path / "store", decode=two_rank_decode(), prefill=prefill(), http=http(),
                        events=events(message=HOSTILE))
    page = tmp_path / "dashboard.html"
    result = CliRunner().invoke(app, ["dashboard", "--store", str(store.path), "-o", str(page)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert not re.search(r"<script\b[^>]*\bsrc\s*=", text, re.I)
    markup = re.sub(r"(<script\b[^>]*>).*?</script>", r"\1</script>", text, flags=re.S | re.I)  # the bundle is code
    assert not re.search(r"<(link|img|iframe|object|embed)\b", markup, re.I)

    body = body_attributes(render_in_chromium(page, tmp_path / "profile"))

    assert body.get("data-status") == "rendered", body
    assert json.loads(body["data-errors"]) == []
    assert body["data-resources"] == "0"
    panels = body["data-panel-names"].split()
    assert int(body["data-panels"]) == len(panels) >= 4
    # the main panel, the time panels under it and the batch scatter all drew data
    assert {"concat_0_group", "concat_1_group", "concat_6_group", "concat_7_concat_0_group"} <= set(panels)


def test_chromium_is_really_checked(tmp_path):
    """The harness must be able to fail: a page whose script errors, which fetches and alerts,
    is reported as such (otherwise the test above proves nothing)."""
    page = tmp_path / "bad.html"
    page.write_text("""<!DOCTYPE html><html><head><script>
window.__errors = [];
function __record(w) { window.__errors.push(String(w)); }
window.addEventListener('error', function (e) { __record('error: ' + e.message); }, true);
window.alert = function (m) { __record('alert: ' + m); };
</script></head><body><img src="https://example.invalid/x.png" onerror="alert(1)">
<script>
window.addEventListener('load', function () {  // after the image has failed
  document.body.setAttribute('data-resources', String(performance.getEntriesByType('resource').length));
  document.body.setAttribute('data-errors', JSON.stringify(window.__errors));
  document.body.setAttribute('data-status', 'done');
});
</script></body></html>""")
    body = body_attributes(render_in_chromium(page, tmp_path / "profile"))
    assert body["data-status"] == "done"
    assert "alert: 1" in json.loads(body["data-errors"])
    assert body["data-resources"] == "1"
