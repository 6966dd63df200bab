"""The grid's tail: ``on_tail`` runs once, when fewer tasks remain than workers, and every cell still comes back;
a fully cached grid starts no worker process; the plots' warm-up leaves the figures' bytes as they were."""

from __future__ import annotations

import importlib
from concurrent.futures import ThreadPoolExecutor

import pytest
from gpusched_lab.evaluate import runner
from gpusched_lab.evaluate.runner import _local_stream, _tasks, plan, run_grid
from gpusched_lab.evaluate.scenarios import suite_from_dict

SUITE = suite_from_dict(
    {
        "name": "tiny",
        "defaults": {"env_id": "gpusched/JobSelect-v1", "seeds": "0-2", "env_kwargs": {"obs_mode": "flat"}},
        "scenarios": [
            {
                "name": "tiny-a",
                "env_kwargs": {
                    "cluster": "tiny",
                    "workload": "synthetic:jobs=20,load=0.9,gpus=16,max_gpus=16",
                },
            }
        ],
    },
    "test suite",
)


@pytest.mark.parametrize("workers", [2, 3])
def test_on_tail_runs_once_when_fewer_tasks_remain_than_workers(tmp_path, monkeypatch, workers):
    """Six one-cell tasks on a pool of ``workers``: on_tail is called once, as the task after which ``workers - 1``
    remain finishes, and each cell's result comes back once."""
    _, cells, _ = plan(list(SUITE.scenarios), ["fifo", "sjf"], tmp_path)
    tasks = _tasks(cells)
    assert len(tasks) == 6
    monkeypatch.setattr(
        runner, "_run_task", lambda doc, spec, seeds: [{"seed": s, "spec": spec} for s in seeds]
    )
    seen: list[tuple] = []
    tail: list[int] = []
    with ThreadPoolExecutor(workers) as pool:
        for cell, res in _local_stream(cells, workers, pool, lambda: tail.append(len(seen))):
            assert res == {"seed": cell.seed, "spec": cell.agent.spec}
            seen.append((cell.agent.spec, cell.seed))
    assert sorted(seen) == sorted((c.agent.spec, c.seed) for c in cells)
    # called as the task that leaves workers - 1 running finished, before its own cell is yielded
    assert tail == [len(tasks) - workers]


def test_a_cached_grid_starts_no_worker_process(tmp_path, monkeypatch):
    first = run_grid(list(SUITE.scenarios), ["fifo"], tmp_path, progress=False)
    assert first.computed == 3

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started for a grid without a cell to compute")

    monkeypatch.setattr(runner, "_start_pool", no_pool)
    tail = []
    again = run_grid(
        list(SUITE.scenarios), ["fifo"], tmp_path, workers=2, progress=False, on_tail=tail.append
    )
    assert again.cached == 3 and again.computed == 0
    assert [c["metrics"] for c in again.cells] == [c["metrics"] for c in first.cells]
    assert tail == []  # nothing ran, so no tail


def test_a_pool_run_calls_on_tail_once_and_gives_the_cells_of_one_process(tmp_path):
    tail: list[int] = []
    pooled = run_grid(
        list(SUITE.scenarios),
        ["fifo", "sjf"],
        tmp_path / "pool",
        workers=2,
        progress=False,
        on_tail=lambda: tail.append(1),
    )
    alone = run_grid(list(SUITE.scenarios), ["fifo", "sjf"], tmp_path / "alone", progress=False)
    assert tail == [1]
    assert [c["key"] for c in pooled.cells] == [c["key"] for c in alone.cells]  # the grid's order
    assert [c["metrics"] for c in pooled.cells] == [c["metrics"] for c in alone.cells]


def test_the_plots_warm_up_leaves_every_figure_byte_for_byte_as_it_was():
    # the module (the package's name ``plots`` is a function that writes the PNG files)
    plots = importlib.import_module("gpusched_lab.evaluate.report.plots")

    def figures():
        fig = plots.figure(3.0, 2.0)
        ax = fig.add_subplot()
        ax.plot([0.02, 3.0, 40.0], [0.0, 0.5, 1.0], label="sjf+closest")
        ax.set_xscale("log")
        ax.legend(fontsize=7)
        bars = plots.figure(3.0, 2.0)
        bars.add_subplot().barh(["a", "b"], [1.0, 2.0], xerr=[[0.1, 0.2], [0.3, 0.1]], hatch=["", "//"])
        return {"cdf": fig, "bars": bars}

    cold = {name: plots.rendered(fig) for name, fig in figures().items()}
    plots.warm_up()
    warm = {name: plots.rendered(fig) for name, fig in figures().items()}
    assert warm == cold
    assert all(png.startswith(b"\x89PNG") and svg.startswith("<svg") for png, svg in warm.values())
