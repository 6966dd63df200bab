"""Plots of the leaderboard (matplotlib, imported on use): one style per agent that every plot shares, figures
built without pyplot (no global backend state), saved as PNG files and as inline SVG for the HTML page.

Styles: 20 qualitative colours (matplotlib's tab10, then ten more that differ from them in hue or lightness), and
after each 10 agents the next line style (solid, dashed, dash-dot, dotted) and bar hatch: the first 20 agents differ
by colour, and colour and line style together tell 40 agents apart.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gpusched_lab.evaluate.cache import slug
from gpusched_lab.evaluate.report.files import write_bytes
from gpusched_lab.evaluate.report.tables import num
from gpusched_lab.evaluate.stats import performance_profile

PALETTE = (
    # tab10
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    # ten more, apart from those in hue or lightness (drawn dashed / hatched: see agent_styles)
    "#000075",
    "#800000",
    "#469990",
    "#f032e6",
    "#ffd700",
    "#000000",
    "#006400",
    "#fa8072",
    "#6a3d9a",
    "#b15928",
)
LINE_STYLES = ("-", "--", "-.", ":")
HATCHES = ("", "//", "..", "xx")
DPI = 110


@dataclass(frozen=True)
class Style:
    """How one agent is drawn: colour, line style of its curves, hatch of its bars."""

    color: str
    linestyle: str
    hatch: str


def agent_styles(agents: list[str]) -> dict[str, Style]:
    """One style per agent in the given order: colour ``i mod 20``, line style and hatch ``(i div 10) mod 4``."""
    n = len(PALETTE)
    return {
        a: Style(PALETTE[i % n], LINE_STYLES[(i // 10) % len(LINE_STYLES)], HATCHES[(i // 10) % len(HATCHES)])
        for i, a in enumerate(agents)
    }


def agents_that_ran(doc: dict) -> list[str]:
    """The document's agents that ran on at least one scenario, in its order (the ones the plots and tables
    show, so agents of other envs take no colour)."""
    ran = {r["agent"] for r in doc["summary"]}
    return [a["name"] for a in doc["agents"] if a["name"] in ran]


def figure(width: float, height: float):
    from matplotlib.figure import Figure  # no pyplot: no global backend state, renders with Agg

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def svg_text(fig) -> str:
    """The figure as an ``<svg>`` element to inline in a page: text as paths (no font needed), no XML prolog,
    comment or metadata block, and ids that are the same for the same figure (a fixed hash salt)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "gpusched", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->\s*", "", text, flags=re.S)
    return text


def rendered(fig) -> tuple[bytes, str]:
    """The figure as (:func:`png_bytes`, :func:`svg_text`)."""
    return png_bytes(fig), svg_text(fig)


def warm_up() -> None:
    """Import matplotlib and render a small figure like the leaderboard's (log axis, legend, bars with a hatch
    and error bars, PNG and path-text SVG) and drop it: the imports, the font and the text caches that the first
    real figure would pay for are ready. The figures rendered after it are the same bytes."""
    fig = figure(2.0, 1.6)
    ax = fig.add_subplot()
    ax.plot([0.01, 10.0], [0.0, 1.0], label="agent", linestyle="--")
    ax.set_xscale("log")
    ax.barh(["agent"], [1.0], xerr=[[0.1], [0.1]], hatch="//", capsize=3)
    ax.set_xlabel("h")
    ax.set_title("warm-up", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    rendered(fig)


def render_all(figures: dict[str, object]) -> dict[str, tuple[bytes, str]]:
    """:func:`rendered` of every figure, by name. On Linux a forked child renders about half of them (by
    :func:`_render_cost`) while this process renders the rest, each figure exactly as it renders alone; should the
    child fail, its figures are rendered here."""
    names = list(figures)
    theirs: list[str] = []
    if len(names) > 1 and sys.platform.startswith("linux") and hasattr(os, "fork"):
        mine_cost = their_cost = 0.0
        for name in sorted(names, key=lambda n: -_render_cost(figures[n])):
            if their_cost <= mine_cost:
                theirs.append(name)
                their_cost += _render_cost(figures[name])
            else:
                mine_cost += _render_cost(figures[name])
    child = _fork_render(figures, theirs) if theirs else None
    try:
        done = {name: rendered(figures[name]) for name in names if child is None or name not in theirs}
    finally:
        got = _collect(*child) if child is not None else {}
    done.update(got)
    for name in names:  # the child's share when it failed
        if name not in done:
            done[name] = rendered(figures[name])
    return {name: done[name] for name in names}


def _render_cost(fig) -> float:
    """A rough relative cost of rendering the figure: one per figure and half as much again per further axes."""
    return 1.0 + 0.5 * (len(fig.axes) - 1)


def _fork_render(figures: dict[str, object], names: list[str]) -> tuple[int, int] | None:
    """A forked child that renders ``names`` and writes them, pickled, to a pipe: ``(pid, read end)``, or None
    when no child could be started."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: render, write, leave without running the parent's exit handlers
        code = 1
        try:
            os.close(r)
            data = memoryview(pickle.dumps({name: rendered(figures[name]) for name in names}))
            while data:
                data = data[os.write(w, data) :]
            os.close(w)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _collect(pid: int, r: int) -> dict[str, tuple[bytes, str]]:
    """What the child of :func:`_fork_render` rendered, or nothing when it failed."""
    chunks = []
    try:
        while chunk := os.read(r, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(r)
    data = b"".join(chunks)
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return {}
    try:
        out = pickle.loads(data)  # written by this process's own child
    except Exception:  # noqa: BLE001
        return {}
    return out if isinstance(out, dict) else {}


def save_png(fig, path: Path) -> Path:
    return write_bytes(path, png_bytes(fig))


def cdf_file_name(scenario: str) -> str:
    return f"jct_cdf_{slug(scenario)}.png"


def leaderboard_figures(doc: dict, quantiles: dict[tuple[str, str], list[list[float]]]) -> dict[str, object]:
    """The leaderboard's figures by PNG file name: a JCT CDF per scenario (``jct_cdf_SCENARIO.png``), average-JCT
    bars with intervals per scenario (``avg_jct_bars.png``), aggregate IQM bars (``aggregate_iqm.png``) and the
    performance profile (``performance_profile.png``). ``quantiles``: per (scenario, agent) the JCT quantiles of
    each seed (quantile-averaged over seeds for the CDF)."""
    figures: dict[str, object] = {}
    agents = agents_that_ran(doc)
    styles = agent_styles(agents)
    for sc in doc["scenarios"]:
        fig = figure(6.4, 4.2)
        ax = fig.add_subplot()
        drawn = 0
        for agent in agents:
            qs = [q for q in quantiles.get((sc["name"], agent), []) if q]
            if not qs:
                continue
            x = np.mean(np.asarray(qs), axis=0) / 3600.0  # quantile averaging over seeds
            st = styles[agent]
            ax.plot(
                np.maximum(x, 1e-3),
                np.linspace(0, 1, len(x)),
                label=agent,
                color=st.color,
                linestyle=st.linestyle,
            )
            drawn += 1
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h, log scale)")
        ax.set_ylabel("fraction of jobs")
        load = sc["measured_offered_load"]["mean"]
        ax.set_title(f"{sc['name']}: JCT CDF (offered load {num(load, 'score')})", fontsize=10)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=7, ncols=2 if drawn > 12 else 1)
        figures[cdf_file_name(sc["name"])] = fig

    n = len(doc["scenarios"])
    fig = figure(4.2 * max(n, 1), 0.45 * len(agents) + 1.6)
    for i, sc in enumerate(doc["scenarios"]):
        ax = fig.add_subplot(1, n, i + 1)
        rows = [r for r in doc["summary"] if r["scenario"] == sc["name"]]
        names = [r["agent"] for r in rows]
        m = np.array([_nan(r["avg_jct"]["mean"]) for r in rows]) / 3600.0
        lo = np.array([_nan(r["avg_jct"]["low"]) for r in rows]) / 3600.0
        hi = np.array([_nan(r["avg_jct"]["high"]) for r in rows]) / 3600.0
        ax.barh(
            names,
            m,
            xerr=[m - lo, hi - m],
            color=[styles[a].color for a in names],
            hatch=[styles[a].hatch for a in names],
            capsize=3,
        )
        bound = sc["lower_bound_avg_jct"]["mean"]
        if bound is not None:
            ax.axvline(bound / 3600.0, color="k", ls="--", lw=1, label="lower bound")
            ax.legend(fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("average JCT (h), 95% CI")
        ax.set_title(sc["name"], fontsize=10)
    figures["avg_jct_bars.png"] = fig

    agg = [r for r in doc["aggregate"] if r["iqm_score"]["mean"] is not None]
    if agg:
        fig = figure(6.4, 0.45 * len(agg) + 1.4)
        ax = fig.add_subplot()
        names = [r["agent"] + ("" if r["complete"] else " *") for r in agg]
        m = np.array([r["iqm_score"]["mean"] for r in agg])
        lo = np.array([_nan(r["iqm_score"]["low"]) for r in agg])
        hi = np.array([_nan(r["iqm_score"]["high"]) for r in agg])
        ax.barh(
            names,
            m,
            xerr=[m - lo, hi - m],
            color=[styles[r["agent"]].color for r in agg],
            hatch=[styles[r["agent"]].hatch for r in agg],
            capsize=3,
        )
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("IQM of normalised score (lower-bound avg JCT ÷ avg JCT),\n95% stratified-bootstrap CI")
        ax.set_title("aggregate over scenarios (* = not on every scenario)", fontsize=10)
        figures["aggregate_iqm.png"] = fig

        fig = figure(6.4, 4.2)
        ax = fig.add_subplot()
        taus = np.linspace(0.0, 1.0, 201)
        for r in agg:
            st = styles[r["agent"]]
            ax.plot(
                taus,
                performance_profile(np.array(r["scores"]), taus),
                label=r["agent"],
                color=st.color,
                linestyle=st.linestyle,
            )
        ax.set_xlabel("normalised score τ")
        ax.set_ylabel("fraction of runs with score > τ")
        ax.set_title("performance profile (all scenarios and seeds)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncols=2 if len(agg) > 12 else 1)
        figures["performance_profile.png"] = fig
    return figures


def _nan(x) -> float:
    return float("nan") if x is None else float(x)


def plots(doc: dict, quantiles: dict[tuple[str, str], list[list[float]]], folder: Path) -> list[Path]:
    """Write :func:`leaderboard_figures` as PNG files under ``folder``; returns their paths."""
    return [save_png(fig, Path(folder) / name) for name, fig in leaderboard_figures(doc, quantiles).items()]
