"""Writing a dashboard: one self-contained HTML page, or a PNG/SVG through vl-convert.

The page carries Vega, Vega-Lite and vega-embed inline (vl-convert's bundle), so it opens
with no network; a Content-Security-Policy forbids every fetch anyway.  Log text (messages,
paths, model names) reaches the page only as data: the spec is JSON with `<`, `>` and `&`
escaped, inside a non-executing `application/json` block, and read with JSON.parse; header
text is HTML-escaped.  (Altair's own `save(inline=True)` pastes the JSON raw into a script,
where a message containing `</script>` would end the script and run what follows.)

The page records how it went on <body>: `data-status` (rendered / failed), `data-panels`
(views that drew data marks), `data-errors` (script errors, CSP violations, alert() calls)
and `data-resources` (network fetches made), for the browser test and for anyone curious.
"""

from __future__ import annotations

import html
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import altair as alt
import vl_convert as vlc

from loglens.dashboards.page import Dashboard

FORMATS = (".html", ".png", ".svg")

_CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:")

# Runs before anything else, so that even an error while loading the bundle is recorded.
_WATCH = """
window.__errors = [];
function __record(what) {
  window.__errors.push(String(what));
  if (document.body) document.body.setAttribute('data-errors', JSON.stringify(window.__errors));
}
window.addEventListener('error', function (e) { __record('error: ' + (e.message || e.type)); }, true);
window.addEventListener('unhandledrejection', function (e) { __record('rejection: ' + e.reason); });
document.addEventListener('securitypolicyviolation', function (e) { __record('csp: ' + e.violatedDirective + ' ' + e.blockedURI); });
window.alert = function (m) { __record('alert: ' + m); };
// every fetch, whenever it happens (an injected <img> would load after the charts drew)
new PerformanceObserver(function () {
  if (document.body) document.body.setAttribute('data-resources', String(performance.getEntriesByType('resource').length));
}).observe({type: 'resource', buffered: true});
"""

# Embeds the spec, then counts the views that drew data marks: a panel is a group in the
# scenegraph that directly holds a data mark ('mark' role) with at least one item.
_EMBED = """
(function () {
  var spec = JSON.parse(document.getElementById('loglens-spec').textContent);
  var options = {mode: 'vega-lite', renderer: 'canvas',
                 actions: {export: true, source: false, compiled: false, editor: false}};
  // Vega-Lite names each view's group `<view>_group` and its data marks `<view>_marks`;
  // a line split by series adds `*_pathgroup` groups in between, which are no views.
  function isView(mark) {
    return mark.marktype === 'group' && /_group$/.test(mark.name || '') && !/pathgroup$/.test(mark.name);
  }
  function drawsData(item) {
    return (item.items || []).some(function (mark) {
      if (isView(mark)) return false;  // a nested view counts for itself
      if (mark.marktype === 'group') return (mark.items || []).some(drawsData);
      return /_marks$/.test(mark.name || '') && (mark.items || []).length > 0;
    });
  }
  function panelsOf(view) {
    var panels = [];
    function collect(item) {
      (item.items || []).forEach(function (mark) {
        if (mark.marktype !== 'group') return;
        (mark.items || []).forEach(function (group) {
          if (isView(mark) && drawsData(group)) panels.push(mark.name);
          collect(group);
        });
      });
    }
    (view.scenegraph().root.items || []).forEach(collect);  // the root mark holds one group item
    return panels;
  }
  function finish(status, panels) {
    var body = document.body;
    body.setAttribute('data-panels', String(panels.length));
    body.setAttribute('data-panel-names', panels.join(' '));
    body.setAttribute('data-resources', String(performance.getEntriesByType('resource').length));
    body.setAttribute('data-errors', JSON.stringify(window.__errors));
    body.setAttribute('data-status', status);
  }
  vegaEmbed('#loglens-dashboard', spec, options)
    .then(function (result) { return result.view.runAsync().then(function () { finish('rendered', panelsOf(result.view)); }); })
    .catch(function (err) { __record('embed: ' + err); finish('failed', []); });
})();
"""


def json_for_html(obj: Any) -> str:
    """JSON that cannot end the element it sits in nor start markup: `<`, `>`, `&` and the
    two JavaScript line separators become \\u escapes (still the same JSON value)."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text


@lru_cache(maxsize=1)
def _bundle() -> str:
    script = vlc.javascript_bundle()
    if "</script" in script.lower():  # would end the inline <script> early
        raise RuntimeError("the vl-convert JavaScript bundle cannot be inlined: it contains </script")
    return script


def chart_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The chart's Vega-Lite spec, validated against the Vega-Lite schema, without `$schema`
    (a URL the page does not need)."""
    spec = chart.to_dict()
    spec.pop("$schema", None)
    return spec


def render_html(dashboard: Dashboard) -> str:
    title = html.escape(dashboard.title)
    notes = "\n".join(f"    <li>{html.escape(n)}</li>" for n in dashboard.notes)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta http-equiv="Content-Security-Policy" content="{_CSP}">
  <title>{title}</title>
  <style>
    body {{ font-family: system-ui, sans-serif; margin: 16px 24px; color: #222; }}
    h1 {{ font-size: 18px; margin: 0 0 6px; }}
    ul.notes {{ margin: 0 0 12px; padding-left: 18px; font-size: 12px; color: #555; }}
  </style>
  <script>{_WATCH}</script>
  <script>{_bundle()}</script>
</head>
<body data-status="loading">
  <h1>{title}</h1>
  <ul class="notes">
{notes}
  </ul>
  <div id="loglens-dashboard"></div>
  <script type="application/json" id="loglens-spec">{json_for_html(chart_spec(dashboard.chart))}</script>
  <script>{_EMBED}</script>
</body>
</html>
"""


def write_dashboard(dashboard: Dashboard, out: str | Path, scale: float = 1.0) -> Path:
    """Write `out` as .html (self-contained page), .png or .svg (static image, no brush)."""
    path = Path(out)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"unknown output type {path.suffix or '(none)'!r}: use one of {', '.join(FORMATS)}")
    if suffix == ".html":
        path.write_text(render_html(dashboard), encoding="utf-8")
    elif suffix == ".png":
        path.write_bytes(vlc.vegalite_to_png(chart_spec(dashboard.titled()), scale=scale))
    else:
        path.write_text(vlc.vegalite_to_svg(chart_spec(dashboard.titled())), encoding="utf-8")
    return path
