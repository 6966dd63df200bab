"""``scripts/studies/workerplacement_learned.py``: the room share and ratios on hand-built figures, a drifting task
handed to the env as kwargs builds the simulator ``set_task`` builds, and a run end to end on the headroom study's
quick setting: the pairs are checked against the study's, the summary is the rows' own, the run resumes from its
file, and a study whose figures differ stops it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "scripts" / "studies"


def _load(name: str):
    sys.path.insert(0, str(STUDIES))
    spec = importlib.util.spec_from_file_location(name, STUDIES / f"{name}.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.fixture(scope="module")
def mod():
    return _load("workerplacement_learned")


def test_room_share_and_ratio_exact(mod):
    # gains 1 and 0 over rooms 2 and 1: a third of the room
    s = mod.room_share([9.0, 10.0], [10.0, 10.0], [8.0, 9.0])
    assert s["share"] == pytest.approx(1 / 3) and s["pairs"] == 2
    assert s["ci95"][0] <= 1 / 3 <= s["ci95"][1] and s["ci95"][0] >= 0.0 and s["ci95"][1] <= 0.5
    assert mod.room_share([9.0], [10.0], [10.0]) is None  # the search gained nothing: no room to share
    worse = mod.room_share([12.0, 12.0], [10.0, 10.0], [8.0, 8.0])
    assert worse["share"] == pytest.approx(-1.0) and worse["ci95"] == [pytest.approx(-1.0)] * 2
    r = mod.paired_ratio([9.0, 10.0], [10.0, 10.0])
    assert r["ratio"] == pytest.approx(0.95) and r["pairs"] == 2 and r["ci95"][0] <= 0.95 <= r["ci95"][1]


def test_a_task_as_kwargs_builds_the_set_task_simulator(mod):
    from gpusched_lab.agents.common import fresh_simulator, make_env

    from gpusched_envs.envs.worker_placement import PlacementTask
    from gpusched_envs.policies.schedulers import FIFO

    task = {"cluster": "topdrl", "load": 1.1, "num_jobs": 30, "arrival": "diurnal", "interference": 1.4}
    by_task = make_env(mod.ENV_ID, {"cluster": "topdrl", "num_jobs": 30, "obs_mode": "flat"})
    by_task.unwrapped.set_task(PlacementTask(**task))
    by_kwargs = make_env(mod.ENV_ID, {**mod.task_kwargs(task, 32), "obs_mode": "flat"})
    a, b = (fresh_simulator(e, 3).run(FIFO("first-fit", backfill=True)) for e in (by_task, by_kwargs))
    assert a == b
    plain = make_env(mod.ENV_ID, {"cluster": "topdrl", "num_jobs": 30, "load": 1.1, "obs_mode": "flat"})
    assert fresh_simulator(plain, 3).run(FIFO("first-fit", backfill=True)) != a  # the task's settings matter


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The headroom study's quick run (drift-20: two held-out tasks, one held-in, seed 0 / 100) and an untrained
    GNN checkpoint of WorkerPlacement-v1."""
    from gpusched_lab.agents import checkpoint as ckpt
    from gpusched_lab.agents.common import make_env
    from gpusched_lab.agents.nets.networks import config_for_env

    tmp = tmp_path_factory.mktemp("wp_learned")
    headroom = tmp / "headroom.json"
    _load("workerplacement_headroom").main(["--quick", "--out", str(headroom)])
    kwargs = {"cluster": "topdrl", "num_jobs": 20, "obs_mode": "graph"}
    env = make_env("gpusched/WorkerPlacement-v1", kwargs)
    cfg = config_for_env(env, "gnn", 16, 1)
    import torch

    torch.manual_seed(0)
    module = ckpt.policy_module("logits", cfg, env.observation_space)
    ck = ckpt.save(
        tmp / "ck",
        module,
        algorithm="ppo",
        policy="logits",
        env_id="gpusched/WorkerPlacement-v1",
        env_kwargs=kwargs,
        obs_mode="graph",
        network=cfg,
        steps=0,
        seed=0,
    )
    return tmp, headroom, ck


ARGS = [
    "--settings",
    "drift-20",
    "--seeds",
    "0",
    "--heldin-seeds",
    "100",
    "--tasks",
    "2",
    "--heldin-tasks",
    "1",
]


def test_a_quick_run_checks_its_pairs_summarizes_its_rows_and_resumes(mod, quick, monkeypatch):
    tmp, headroom, ck = quick
    out = tmp / "learned.json"
    argv = [*ARGS, "--checkpoint", str(ck), "--headroom", str(headroom), "--out", str(out)]
    res = mod.main(argv)
    study = json.loads(headroom.read_text())["settings_results"]["drift-20"]
    rows = [r for k, v in res["done"].items() if k.startswith("heldout/") for r in v]
    assert len(rows) == 2 and len(res["done"]) == 3  # two held-out tasks, one held-in task, one seed each
    by_pair = {(r["case"], r["seed"]): r for r in study["heldout_rows"]}
    for r in rows:  # the study's pairs: every placement rule's figure is the study's
        for p in mod.PLACEMENTS:
            assert r[p] == pytest.approx(by_pair[(r["scenario"], r["seed"])][p], rel=1e-12)
    s = res["summary"]["drift-20"]["heldout"]
    best = study["best"]
    agent = np.array([r["agent"] for r in rows])
    base = np.array([r[best] for r in rows])
    search = np.array([mod.search_jct(by_pair[(r["scenario"], r["seed"])]) for r in rows])
    assert s["best_heuristic"] == best and s["pairs"] == 2
    assert s["vs_best"]["ratio"] == pytest.approx(agent.mean() / base.mean(), rel=1e-12)
    assert s["searched"]["search_mean"] == pytest.approx(search.mean(), rel=1e-12)
    if (base - search).sum() > 0:
        want = (base - agent).sum() / (base - search).sum()
        assert s["searched"]["room_share"]["share"] == pytest.approx(want, rel=1e-12)
    assert res["summary"]["drift-20"]["heldin"]["pairs"] == 1
    assert json.loads(out.read_text())["summary"] == res["summary"]

    def no_run(*a, **k):
        raise AssertionError("a finished case was run again")

    monkeypatch.setattr(mod, "run_case", no_run)
    again = mod.main(argv)  # every case is in the file: nothing runs, the same figures
    assert again["summary"] == res["summary"]


def test_a_study_with_other_figures_stops_the_run(mod, quick):
    tmp, headroom, ck = quick
    doc = json.loads(headroom.read_text())
    study = doc["settings_results"]["drift-20"]
    study["heldout_rows"][0][study["best"]] += 1.0
    other = tmp / "other_headroom.json"
    other.write_text(json.dumps(doc))
    argv = [*ARGS, "--checkpoint", str(ck), "--headroom", str(other), "--out", str(tmp / "other.json")]
    with pytest.raises(SystemExit, match="not the study's pair"):
        mod.main(argv)


def test_bad_input_is_refused(mod, quick, tmp_path):
    tmp, headroom, ck = quick
    with pytest.raises(SystemExit):
        mod.main(
            ["--checkpoint", str(tmp_path), "--headroom", str(headroom), "--out", str(tmp_path / "x.json")]
        )
    with pytest.raises(SystemExit):  # a setting the study did not run
        mod.main([*ARGS[:0], "--settings", "drift-300", "--checkpoint", str(ck), "--headroom", str(headroom),
                  "--out", str(tmp_path / "y.json")])  # fmt: skip
