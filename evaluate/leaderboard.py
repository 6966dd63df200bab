"""One call from Python: run a suite's grid (resuming from the cache) and write every output."""

from __future__ import annotations

from pathlib import Path

from gpusched_lab.evaluate.agents import expand_agent_specs
from gpusched_lab.evaluate.report import write_outputs
from gpusched_lab.evaluate.runner import run_grid
from gpusched_lab.evaluate.scenarios import Scenario, Suite, load_suite


def _report_warm_up() -> None:
    """The plots' warm-up (:func:`~gpusched_lab.evaluate.report.plots.warm_up`), run while the grid's last tasks
    leave a processor idle."""
    from gpusched_lab.evaluate.report.plots import warm_up

    warm_up()


def run_leaderboard(
    suite: str | Path | Suite = "quick",
    agents: list[str] | str | None = None,
    out: str | Path = "results/leaderboard",
    *,
    scenarios: list[str] | None = None,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    checkpoints: str | Path | None = None,
    plots: bool = True,
    progress: bool = False,
    on_cell=None,
) -> dict:
    """Rank ``agents`` (specs or groups, default ``all``) on ``suite``; returns the ``leaderboard.json`` document
    with ``run`` statistics (cells computed, cached, recomputed, failed; wall seconds) added."""
    s = suite if isinstance(suite, Suite) else load_suite(suite)
    chosen: list[Scenario] = [s.scenario(n) for n in scenarios] if scenarios else list(s.scenarios)
    result = run_grid(
        chosen,
        expand_agent_specs(agents, checkpoints),
        out,
        workers=workers,
        backend=backend,
        address=address,
        progress=progress,
        on_cell=on_cell,
        on_tail=_report_warm_up if plots else None,
    )
    doc = write_outputs(result, out, s.name, s.description, make_plots=plots)
    doc["run"] = {
        "computed": result.computed,
        "cached": result.cached,
        "recomputed": result.recomputed,
        "failed": len(result.failed),
        "wall_s": result.wall_s,
    }
    return doc
