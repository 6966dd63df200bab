"""``leaderboard.html``: one self-contained page of a leaderboard run — the ranked overall table, a sortable table
per scenario, the plots (inline SVG), the suite's settings and offered loads, and the provenance. Nothing is
fetched when the page is viewed: data, plots, CSS and the small sorting script are all inline, and it prints to
PDF (print CSS).

Sorting: click a column header (again to reverse), or open the page with ``#sort=TABLE:COLUMN:asc|desc`` in the
URL (``TABLE``: ``overall`` or ``sc-SCENARIO``; ``COLUMN``: the header's ``data-key``). ``window.gpuschedSort(table,
column, direction)`` does the same from a script; a sorted table carries ``data-sorted="COLUMN:DIRECTION"``.

:func:`rebuild` makes the page again from a results folder (``gpusched report DIR``): ``leaderboard.json``, the
cells' JCT quantiles under ``cells/`` (for the CDFs) and ``provenance.json``.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from datetime import UTC, datetime
from html import escape
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from gpusched_lab.evaluate.cache import cell_path, checksum, slug
from gpusched_lab.evaluate.report.document import NORMALISATION, REPORT_SCHEMA
from gpusched_lab.evaluate.report.files import write_json, write_text
from gpusched_lab.evaluate.report.tables import cell_text, num, scale, seed_text

PAGE = "leaderboard.html"
PROVENANCE = "provenance.json"
PACKAGE = "gpusched-envs"
# (key, title, unit, better): the per-scenario columns after rank and agent
SCENARIO_COLUMNS = (
    ("avg_jct", "avg JCT (h)", "h", "lower"),
    ("p95_jct", "p95 JCT (h)", "h", "lower"),
    ("makespan", "makespan (h)", "h", "lower"),
    ("gpu_utilisation", "GPU util.", "%", "higher"),
    ("communication_overhead", "comm. overhead", "%", "lower"),
    ("score", "score", "score", "higher"),
)


class ReportError(ValueError):
    """A results folder the page cannot be built from (one line naming the file)."""


# ---------------------------------------------------------------------------------------------- provenance
def package_version() -> str:
    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "0"


def provenance(argv: list[str] | None = None) -> dict:
    """Who made the results: package version, the command line, the date (UTC) and the machine."""
    argv = list(sys.argv if argv is None else argv)
    if argv:
        argv[0] = Path(argv[0]).name
    return {
        "package": PACKAGE,
        "version": package_version(),
        "command": shlex.join(argv),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node() or 'unknown host'}: {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs",
        "python": platform.python_version(),
    }


# ---------------------------------------------------------------------------------------------- page
CSS = """
:root { --fg: #1d2330; --muted: #5b6474; --line: #d9dde4; --band: #f5f7fa; --accent: #1f5fbf; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 1360px; margin: 0 auto; padding: 1.2rem 1rem 3rem; }
header h1 { margin: 0 0 .3rem; font-size: 1.6rem; }
header p { margin: .2rem 0; color: var(--muted); }
nav { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid var(--line);
      padding: .45rem 1.5rem; font-size: .9rem; }
nav a { color: var(--accent); text-decoration: none; margin-right: 1rem; }
h2 { margin: 2rem 0 .6rem; font-size: 1.25rem; border-bottom: 2px solid var(--line); padding-bottom: .2rem; }
h3 { margin: 1.6rem 0 .4rem; font-size: 1.08rem; }
p.note, p.settings { color: var(--muted); font-size: .88rem; margin: .3rem 0 .6rem; }
code { font-size: .85em; background: var(--band); padding: 0 .25em; border-radius: 3px; }
.tw { overflow-x: auto; }
table { border-collapse: collapse; font-size: .85rem; font-variant-numeric: tabular-nums; min-width: 60%; }
th, td { padding: .3rem .55rem; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th:nth-child(2), td:nth-child(2), table.text td, table.text th { text-align: left; }
table.text td { white-space: normal; }
thead th { background: var(--band); }
tbody tr:nth-child(even) { background: #fafbfc; }
tfoot td { color: var(--muted); font-style: italic; }
th button { all: unset; cursor: pointer; }
th button::after { content: " \\21C5"; color: #aab; font-size: .8em; }
th[aria-sort=ascending] button::after { content: " \\25B2"; color: var(--accent); }
th[aria-sort=descending] button::after { content: " \\25BC"; color: var(--accent); }
th button:focus-visible { outline: 2px solid var(--accent); }
.sw { display: inline-block; width: .8em; height: .8em; border-radius: 2px; margin-right: .4em;
      vertical-align: -.05em; }
.unranked td { color: var(--muted); }
.figs { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 1rem; }
figure { margin: .6rem 0; }
figure svg { width: 100%; max-width: 760px; height: auto; display: block; }
figure.wide svg { max-width: 100%; }
.figs figure svg { max-width: 100%; }
figcaption { font-size: .82rem; color: var(--muted); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; font-size: .9rem; }
dt { color: var(--muted); }
dd { margin: 0; word-break: break-word; }
@media print {
  @page { size: A4; margin: 12mm; }
  body { font-size: 9pt; }
  main { max-width: none; padding: 0; }
  nav { display: none; }
  th button::after { content: ""; }
  table { font-size: 7.5pt; }
  th, td { padding: .15rem .35rem; }
  .tw { overflow: visible; }
  figure, tr { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
  .figs { display: block; }
  figure svg { max-height: 120mm; }
}
"""

SCRIPT = """
(function () {
  function value(td) {
    var v = td.getAttribute("data-value");
    if (v === null || v === "") return null;
    var f = parseFloat(v);
    return isNaN(f) ? v : f;
  }
  function sortTable(id, key, dir) {
    var t = document.getElementById(id);
    if (!t || !t.tHead) return false;
    var heads = t.tHead.rows[0].cells, col = -1;
    for (var i = 0; i < heads.length; i++) { if (heads[i].getAttribute("data-key") === key) col = i; }
    if (col < 0) return false;
    var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a.cells[col]), y = value(b.cells[col]);
      if (x === null || y === null) return (x === null) - (y === null);  // missing values last
      var c = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
      return dir === "desc" ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (var j = 0; j < heads.length; j++) heads[j].removeAttribute("aria-sort");
    heads[col].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
    t.setAttribute("data-sorted", key + ":" + dir);
    return true;
  }
  window.gpuschedSort = sortTable;
  document.querySelectorAll("table.sortable th[data-key] button").forEach(function (b) {
    b.addEventListener("click", function () {
      var th = b.parentNode, t = th.closest("table"), key = th.getAttribute("data-key");
      var now = t.getAttribute("data-sorted"), dir = th.getAttribute("data-first") || "asc";
      if (now === key + ":" + dir) dir = dir === "asc" ? "desc" : "asc";
      if (sortTable(t.id, key, dir) && window.history && history.replaceState) {
        history.replaceState(null, "", "#sort=" + t.id + ":" + key + ":" + dir);
      }
    });
  });
  function fromHash() {
    var m = /^#sort=([^:]+):([^:]+):(asc|desc)$/.exec(decodeURIComponent(location.hash));
    if (m) sortTable(m[1], m[2], m[3]);
  }
  fromHash();
  window.addEventListener("hashchange", fromHash);
  document.documentElement.setAttribute("data-ready", "1");
})();
"""


def _attr(x) -> str:
    return escape(str(x), quote=True)


def _th(key: str, title: str, first: str = "asc") -> str:
    return f'<th data-key="{_attr(key)}" data-first="{first}"><button type="button">{escape(title)}</button></th>'


def _td(text: str, value=None) -> str:
    v = "" if value is None else (f"{value:.10g}" if isinstance(value, float) else str(value))
    return f'<td data-value="{_attr(v)}">{escape(text)}</td>'


def _agent_td(name: str, colours: dict[str, str]) -> str:
    sw = f'<span class="sw" style="background:{colours[name]}"></span>' if name in colours else ""
    return f'<td data-value="{_attr(name)}">{sw}{escape(name)}</td>'


def _stat_value(stat: dict, unit: str):
    m = stat.get("mean") if stat else None
    return None if m is None else scale(unit, m)


def _overall_table(doc: dict, colours: dict[str, str]) -> str:
    n = len(doc["scenarios"])
    head = "".join(
        [
            _th("rank", "rank"),
            _th("agent", "agent"),
            _th("kind", "kind"),
            _th("scenarios", "scenarios", "desc"),
            _th("iqm_score", "IQM score (95% CI)", "desc"),
            _th("mean_score", "mean score (95% CI)", "desc"),
            _th("mean_rank", "mean rank"),
            _th("gpu_utilisation", "GPU util.", "desc"),
            _th("communication_overhead", "comm. overhead"),
        ]
    )
    rows = []
    for r in doc["aggregate"]:
        cls = "" if r["rank"] is not None else ' class="unranked"'
        cells = [
            _td("—" if r["rank"] is None else str(r["rank"]), r["rank"]),
            _agent_td(r["agent"], colours),
            _td(r["agent_kind"], r["agent_kind"]),
            _td(f"{r['scenarios']}/{n}", r["scenarios"]),
            _td(cell_text(r["iqm_score"], "score"), r["iqm_score"]["mean"]),
            _td(cell_text(r["mean_score"], "score"), r["mean_score"]["mean"]),
            _td(f"{r['mean_rank']:.1f}", r["mean_rank"]),
            _td(num(100 * r["gpu_utilisation"], "%"), 100 * r["gpu_utilisation"]),
            _td(num(100 * r["communication_overhead"], "%"), 100 * r["communication_overhead"]),
        ]
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    foot = (
        f"<tr><td>—</td><td>lower bound</td><td></td><td>{n}/{n}</td><td>1.000</td><td>1.000</td>"
        "<td>—</td><td>—</td><td>—</td></tr>"
    )
    return (
        f'<div class="tw"><table id="overall" class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody><tfoot>{foot}</tfoot></table></div>"
    )


def _scenario_table(doc: dict, sc: dict, colours: dict[str, str]) -> str:
    head = _th("rank", "rank") + _th("agent", "agent")
    head += "".join(
        _th(k, t, "desc" if better == "higher" else "asc") for k, t, _, better in SCENARIO_COLUMNS
    )
    rows = []
    for r in (r for r in doc["summary"] if r["scenario"] == sc["name"]):
        cells = [_td(str(r["rank"]), r["rank"]), _agent_td(r["agent"], colours)]
        cells += [_td(cell_text(r[k], unit), _stat_value(r[k], unit)) for k, _, unit, _ in SCENARIO_COLUMNS]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    lb_jct = cell_text(sc["lower_bound_avg_jct"], "h")
    lb_mk = cell_text(sc["lower_bound_makespan"], "h")
    foot = (
        f"<tr><td>—</td><td>lower bound</td><td>{escape(lb_jct)}</td><td>—</td><td>{escape(lb_mk)}</td>"
        "<td>—</td><td>—</td><td>1.000</td></tr>"
    )
    return (
        f'<div class="tw"><table id="sc-{_attr(slug(sc["name"]))}" class="sortable"><thead><tr>{head}</tr>'
        f"</thead><tbody>{''.join(rows)}</tbody><tfoot>{foot}</tfoot></table></div>"
    )


def _kwargs_text(kw: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(kw.items()))


def _settings_table(doc: dict) -> str:
    head = (
        "<tr><th>scenario</th><th>env</th><th>env kwargs</th><th>seeds</th><th>offered load (stated)</th>"
        "<th>offered load (measured, 95% CI)</th><th>jobs</th><th>lower bound avg JCT (h)</th></tr>"
    )
    rows = []
    for sc in doc["scenarios"]:
        stated = sc.get("offered_load")
        cells = [
            escape(sc["name"]),
            f"<code>{escape(sc['env_id'])}</code>",
            f"<code>{escape(_kwargs_text(sc['env_kwargs']))}</code>",
            escape(seed_text(list(sc["seeds"]))),
            escape(num(stated, "score") if stated is not None else "—"),
            escape(cell_text(sc["measured_offered_load"], "score")),
            escape(num(sc["jobs"]["mean"])),
            escape(cell_text(sc["lower_bound_avg_jct"], "h")),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (
        f'<div class="tw"><table id="settings" class="text"><thead>{head}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _figure(svgs: dict[str, str], name: str, caption: str, width: int = 0) -> str:
    svg = svgs.get(name)
    if svg is None:
        return ""
    cls = f' class="wide" style="max-width:{width}px"' if width else ""
    return f'<figure{cls} data-plot="{_attr(name)}">{svg}<figcaption>{escape(caption)}</figcaption></figure>'


def _provenance_list(prov: dict | None, doc: dict, built: dict | None) -> str:
    items = []
    if prov:
        items += [
            ("package", f"{prov.get('package', PACKAGE)} {prov.get('version', '?')}"),
            ("code version", doc.get("code_version", "?")),
            ("command", prov.get("command", "?")),
            ("date (UTC)", prov.get("date", "?")),
            ("machine", prov.get("machine", "?")),
            ("Python", prov.get("python", "?")),
        ]
    else:
        items += [
            ("code version", doc.get("code_version", "?")),
            ("run", f"not recorded (no {PROVENANCE} in the results folder)"),
        ]
    if built:
        items.append(("page rebuilt", f"{built['command']} on {built['date']} ({built['machine']})"))
    body = "".join(
        f"<dt>{escape(k)}</dt><dd>{'<code>' + escape(v) + '</code>' if k == 'command' else escape(v)}</dd>"
        for k, v in items
    )
    return f'<dl id="provenance-list">{body}</dl>'


def render(
    doc: dict, svgs: dict[str, str] | None = None, prov: dict | None = None, built: dict | None = None
) -> str:
    """The page of a ``leaderboard.json`` document; ``svgs``: inline SVG by plot file name
    (:func:`gpusched_lab.evaluate.report.plots.leaderboard_figures`), ``None``: without plots; ``prov``: the
    run's :func:`provenance`; ``built``: the provenance of a rebuild, if this is one."""
    from gpusched_lab.evaluate.report.plots import agent_styles, agents_that_ran, cdf_file_name

    svgs = svgs or {}
    ran = agents_that_ran(doc)
    colours = {a: s.color for a, s in agent_styles(ran).items()}
    # agents of another env (DAG, multi-agent, ...) that apply to no scenario: named once, not per scenario
    nowhere = [a["name"] for a in doc["agents"] if a["name"] not in ran]
    suite = doc["suite"]
    title = f"Leaderboard: suite {suite['name']}"
    n_cells = len(doc.get("cells", []))
    intro = (
        f"{len(ran)} agents × {len(doc['scenarios'])} scenarios, {n_cells} episodes"
        + (f"; run {prov['date']}" if prov else "")
        + "."
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        '<nav><a href="#overall-section">Overall</a><a href="#plots">Plots</a>'
        '<a href="#scenarios">Scenarios</a><a href="#settings-section">Settings</a>'
        '<a href="#provenance">Provenance</a></nav>',
        "<main>",
        f"<header><h1>{escape(title)}</h1>",
        f"<p>{escape(suite.get('description') or '')}</p><p>{escape(intro)}</p></header>",
        '<section id="overall-section"><h2>Overall</h2>',
        f'<p class="note">{escape(NORMALISATION)}. Overall: interquartile mean (IQM) of the scores over all '
        "scenarios and seeds with 95% stratified-bootstrap intervals; agents that ran on only some scenarios are "
        "listed unranked. Click a column header to sort.</p>",
        _overall_table(doc, colours),
        (
            f'<p class="note">Not applicable to any scenario of this suite ({len(nowhere)}): '
            f"{escape(', '.join(nowhere))}.</p>"
            if nowhere
            else ""
        ),
        "</section>",
        '<section id="plots"><h2>Plots</h2>',
    ]
    if svgs:
        parts += [
            '<div class="figs">',
            _figure(svgs, "aggregate_iqm.png", "IQM of the normalised score per agent, 95% interval."),
            _figure(svgs, "performance_profile.png", "Share of (scenario, seed) runs with a score above τ."),
            "</div>",
            _figure(
                svgs,
                "avg_jct_bars.png",
                "Average JCT per scenario (95% interval); dashed: lower bound.",
                width=420 * max(len(doc["scenarios"]), 2),
            ),
        ]
    else:
        parts.append('<p class="note">Plots were not made for this run (--no-plots).</p>')
    parts.append('</section><section id="scenarios"><h2>Scenarios</h2>')
    skipped = doc.get("skipped", [])
    for sc in doc["scenarios"]:
        load = sc["measured_offered_load"]["mean"]
        stated = sc.get("offered_load")
        parts += [
            f'<section id="scenario-{_attr(slug(sc["name"]))}"><h3>{escape(sc["name"])}</h3>',
            f'<p class="settings"><code>{escape(sc["env_id"])}</code> ({escape(_kwargs_text(sc["env_kwargs"]))});'
            f" seeds {escape(seed_text(list(sc['seeds'])))}; offered load "
            f"{escape(num(stated, 'score') if stated is not None else '—')} stated, "
            f"{escape(num(load, 'score') if load is not None else '—')} measured.</p>",
        ]
        if sc.get("description"):
            parts.append(f"<p>{escape(sc['description'])}</p>")
        parts.append(_scenario_table(doc, sc, colours))
        gone = [
            f"{s['agent']} ({s['reason']})"
            for s in skipped
            if s["scenario"] == sc["name"] and s["agent"] not in nowhere
        ]
        if gone:
            parts.append(f'<p class="note">Not applicable: {escape("; ".join(gone))}.</p>')
        parts.append(
            _figure(svgs, cdf_file_name(sc["name"]), f"{sc['name']}: JCT CDF (mean quantiles over seeds).")
        )
        parts.append("</section>")
    parts += [
        "</section>",
        '<section id="settings-section"><h2>Settings and offered loads</h2>',
        '<p class="note">Offered load: GPU-time the jobs need at their typical-placement speed ÷ (cluster GPUs × '
        "arrival span), the quantity a workload's <code>load=</code> sets; measured over each cell's finished "
        "jobs.</p>",
        _settings_table(doc),
        "</section>",
    ]
    if doc.get("failed"):
        items = "".join(
            f"<li>{escape(f['agent'])} on {escape(f['scenario'])}, seed {f['seed']}: {escape(f['error'])}</li>"
            for f in doc["failed"]
        )
        parts.append(f'<section id="failed"><h2>Failed cells</h2><ul>{items}</ul></section>')
    parts += [
        '<section id="provenance"><h2>Provenance</h2>',
        _provenance_list(prov, doc, built),
        "</section></main>",
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def figures_svg(doc: dict, quantiles: dict[tuple[str, str], list[list[float]]]) -> dict[str, str]:
    """The leaderboard's figures as inline SVG, by PNG file name."""
    from gpusched_lab.evaluate.report.plots import leaderboard_figures, svg_text

    return {name: svg_text(fig) for name, fig in leaderboard_figures(doc, quantiles).items()}


def write_page(out: Path, doc: dict, svgs: dict[str, str] | None, prov: dict | None, built=None) -> Path:
    return write_text(Path(out), render(doc, svgs, prov, built))


# ---------------------------------------------------------------------------------------------- rebuild
def read_quantiles(folder: Path, doc: dict) -> dict[tuple[str, str], list[list[float]]]:
    """The JCT quantiles of the document's cells from their cache files (a missing, corrupt or other-code file
    is left out: its CDF then has fewer seeds)."""
    out: dict[tuple[str, str], list[list[float]]] = {}
    for c in doc.get("cells", []):
        path = cell_path(folder, c["scenario"], c["agent"], c["seed"])
        try:
            payload = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (
            not isinstance(payload, dict)
            or payload.get("checksum") != checksum(payload)
            or payload.get("code_version") != doc.get("code_version")
        ):
            continue
        out.setdefault((c["scenario"], c["agent"]), []).append(payload.get("jct_quantiles") or [])
    return out


def load_results(folder: str | Path) -> tuple[dict, dict[tuple[str, str], list[list[float]]], dict | None]:
    """``(leaderboard.json document, JCT quantiles, run provenance or None)`` of a results folder."""
    folder = Path(folder)
    path = folder / "leaderboard.json"
    if not folder.is_dir():
        raise ReportError(f"{folder}: not a folder (give the --out folder of a leaderboard run)")
    if not path.is_file():
        raise ReportError(f"{path}: missing (give the --out folder of a leaderboard run)")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != REPORT_SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ReportError(f"{path}: schema {found!r}, expected {REPORT_SCHEMA!r}")
    missing = [k for k in ("suite", "agents", "scenarios", "summary", "aggregate") if k not in doc]
    if missing:
        raise ReportError(f"{path}: lacks {', '.join(missing)}")
    prov = None
    try:
        prov = json.loads((folder / PROVENANCE).read_text())
    except (OSError, ValueError):
        prov = None
    if not isinstance(prov, dict):
        prov = None
    return doc, read_quantiles(folder, doc), prov


def rebuild(folder: str | Path, out: str | Path | None = None, plots: bool = True) -> Path:
    """Write ``leaderboard.html`` (or ``out``) from a results folder; returns the page's path."""
    doc, quantiles, prov = load_results(folder)
    svgs = figures_svg(doc, quantiles) if plots else None
    built = provenance()
    return write_page(Path(out) if out else Path(folder) / PAGE, doc, svgs, prov, built)


def write_provenance(folder: Path, prov: dict) -> Path:
    return write_json(Path(folder) / PROVENANCE, prov, indent=1, sort_keys=True)
