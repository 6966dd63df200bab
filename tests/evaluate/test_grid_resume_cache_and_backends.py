"""The leaderboard grid: resume after an interruption, corrupt-cache detection, user agents, backends, outputs.
Tiny suites (the ``tiny`` cluster, 24–30 jobs) keep every test under a few seconds."""

from __future__ import annotations

import json
import textwrap
import warnings

import pytest
from gpusched_lab.evaluate import run_leaderboard
from gpusched_lab.evaluate.runner import CacheWarning, run_grid
from gpusched_lab.evaluate.scenarios import suite_from_dict

TINY = {
    "name": "tiny",
    "description": "two tiny contended scenarios",
    "defaults": {"env_id": "gpusched/JobSelect-v1", "seeds": "0-2", "env_kwargs": {"obs_mode": "flat"}},
    "scenarios": [
        {
            "name": "tiny-a",
            "offered_load": 0.9,
            "env_kwargs": {"cluster": "tiny", "workload": "synthetic:jobs=30,load=0.9,gpus=16,max_gpus=16"},
        },
        {
            "name": "tiny-b",
            "offered_load": 1.0,
            "seeds": [5, 6],
            "env_kwargs": {"cluster": "tiny", "workload": "synthetic:jobs=24,load=1.0,gpus=16,max_gpus=16"},
        },
    ],
}
AGENTS = ["fifo", "sjf", "srtf"]
CELLS = 3 * 3 + 2 * 3

USER_AGENT = '''
class FirstFit:
    """Starts the first job of the window that fits; waits only when nothing fits."""

    name = "first-valid"

    def act(self, obs):
        mask = obs["action_mask"]
        return int(mask[:-1].argmax()) if mask[:-1].any() else len(mask) - 1


class Greedy:
    """A scheduler on the simulator: smallest GPU demand first."""

    name = "smallest-first"

    def schedule(self, sim):
        from gpusched_envs.policies.placement import get_placement

        place = get_placement("closest")
        for job in sorted(sim.queue, key=lambda j: (sim.job_gpus_n[j], j)):
            gpus = place(sim, job)
            if gpus is not None:
                sim.start(job, gpus)


def make():
    return FirstFit()


def make_scheduler():
    return Greedy()
'''


@pytest.fixture
def tiny_suite():
    return suite_from_dict(TINY, "tiny.yaml")


@pytest.fixture
def user_agent_file(tmp_path):
    path = tmp_path / "my_agents.py"
    path.write_text(textwrap.dedent(USER_AGENT))
    return path


def run(suite, out, agents=AGENTS, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_grid(list(suite.scenarios), agents, out, progress=False, **kw)
    return result, [w for w in caught if issubclass(w.category, CacheWarning)]


class Stop(Exception):
    pass


def test_interrupted_run_resumes_only_missing_cells(tiny_suite, tmp_path):
    done = []

    def crash_after_four(cell, payload):
        done.append(cell.key)
        if len(done) == 4:
            raise Stop

    with pytest.raises(Stop):
        run_grid(list(tiny_suite.scenarios), AGENTS, tmp_path, progress=False, on_cell=crash_after_four)
    assert len(list((tmp_path / "cells").rglob("*.json"))) == 4

    computed = []
    result, cache_warnings = run(tiny_suite, tmp_path, on_cell=lambda c, p: computed.append(c.key))
    assert not cache_warnings
    assert (result.cached, result.computed) == (4, CELLS - 4)
    assert not set(computed) & set(done)
    assert len(result.cells) == CELLS

    again, _ = run(tiny_suite, tmp_path)
    assert (again.cached, again.computed) == (CELLS, 0)
    assert [c["metrics"] for c in again.cells] == [c["metrics"] for c in result.cells]


def test_corrupt_partial_and_stale_cells_are_recomputed_with_a_warning(tiny_suite, tmp_path):
    first, _ = run(tiny_suite, tmp_path)
    files = sorted((tmp_path / "cells").rglob("*.json"))
    text = files[0].read_text()
    files[0].write_text(text[: len(text) // 2])  # partial write
    files[1].write_text("not json at all")
    doc = json.loads(files[2].read_text())
    doc["metrics"]["avg_jct"] = 1.0  # edited by hand: checksum no longer matches
    files[2].write_text(json.dumps(doc))
    doc = json.loads(files[3].read_text())
    del doc["metrics"]
    files[3].write_text(json.dumps(doc))
    doc = json.loads(files[4].read_text())
    doc["key"] = "0" * 32  # computed by other code or for another scenario
    from gpusched_lab.evaluate.cache import checksum

    doc["checksum"] = checksum(doc)
    files[4].write_text(json.dumps(doc))

    second, cache_warnings = run(tiny_suite, tmp_path)
    assert (second.recomputed, second.computed, second.cached) == (5, 5, CELLS - 5)
    messages = " | ".join(str(w.message) for w in cache_warnings)
    assert len(cache_warnings) == 5
    for reason in ("not JSON", "checksum mismatch", "stale"):
        assert reason in messages
    assert [c["metrics"] for c in second.cells] == [c["metrics"] for c in first.cells]


def test_user_agents_appear_in_the_tables(tiny_suite, tmp_path, user_agent_file):
    agents = ["fifo", f"{user_agent_file}:make", f"{user_agent_file}:make_scheduler"]
    doc = run_leaderboard(tiny_suite, agents, tmp_path, plots=False)
    names = [a["name"] for a in doc["agents"]]
    assert names == ["fifo+closest", "first-valid", "smallest-first"]
    table = (tmp_path / "leaderboard.md").read_text()
    for name in names:
        assert table.count(f"| {name} |") == 3  # overall + both scenarios
    assert "offered load 0.900 stated" in table and "*lower bound*" in table
    assert {r["agent"] for r in doc["aggregate"] if r["rank"]} == set(names)
    assert not doc["failed"]


def test_module_colon_callable_from_the_working_directory(tiny_suite, tmp_path, user_agent_file, monkeypatch):
    monkeypatch.chdir(user_agent_file.parent)
    doc = run_leaderboard(tiny_suite, "my_agents:make", tmp_path / "out", scenarios=["tiny-b"], plots=False)
    assert [r["agent"] for r in doc["summary"]] == ["first-valid"]


def test_outputs_files_and_schema(tiny_suite, tmp_path):
    doc = run_leaderboard(tiny_suite, AGENTS, tmp_path, plots=True)
    for name in ("leaderboard.md", "leaderboard.json", "cells.csv", "summary.csv", "aggregate.csv"):
        assert (tmp_path / name).is_file()
    pngs = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert pngs == sorted(
        [
            "aggregate_iqm.png",
            "avg_jct_bars.png",
            "jct_cdf_tiny-a.png",
            "jct_cdf_tiny-b.png",
            "performance_profile.png",
        ]
    )
    saved = json.loads((tmp_path / "leaderboard.json").read_text())
    assert saved["schema"] == "gpusched.leaderboard/1"
    assert len(saved["cells"]) == CELLS and len(saved["summary"]) == 6
    assert [s["measured_offered_load"]["mean"] for s in saved["scenarios"]] == pytest.approx(
        [0.9, 1.0], abs=0.02
    )
    row = saved["summary"][0]
    assert row["avg_jct"]["low"] <= row["avg_jct"]["mean"] <= row["avg_jct"]["high"]
    agg = saved["aggregate"][0]
    assert (
        agg["rank"] == 1 and agg["iqm_score"]["low"] <= agg["iqm_score"]["mean"] <= agg["iqm_score"]["high"]
    )
    header = (tmp_path / "cells.csv").read_text().splitlines()[0].split(",")
    assert header[:5] == ["scenario", "agent", "agent_kind", "seed", "score"] and "avg_jct" in header
    assert doc["run"]["computed"] == CELLS


def test_process_pool_gives_the_same_tables(tiny_suite, tmp_path):
    run_leaderboard(tiny_suite, AGENTS, tmp_path / "serial", plots=False)
    run_leaderboard(tiny_suite, AGENTS, tmp_path / "pool", plots=False, workers=2)
    for name in ("leaderboard.md", "summary.csv", "aggregate.csv", "cells.csv"):
        assert (tmp_path / "serial" / name).read_text() == (tmp_path / "pool" / name).read_text()


@pytest.fixture
def local_ray():
    ray = pytest.importorskip(
        "ray", reason="ray is not installed (optional extra: pip install 'gpusched-envs[ray]')"
    )
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_backend_gives_identical_tables(tiny_suite, tmp_path, local_ray, user_agent_file):
    agents = [*AGENTS, f"{user_agent_file}:make"]
    run_leaderboard(tiny_suite, agents, tmp_path / "local", plots=False)
    doc = run_leaderboard(tiny_suite, agents, tmp_path / "ray", plots=False, backend="ray")
    assert doc["run"]["computed"] == CELLS + 5 and not doc["failed"]
    cell = json.loads(next((tmp_path / "ray" / "cells").rglob("*.json")).read_text())
    assert cell["backend"] == "ray"
    for name in ("leaderboard.md", "summary.csv", "aggregate.csv", "cells.csv"):
        assert (tmp_path / "local" / name).read_text() == (tmp_path / "ray" / name).read_text()
