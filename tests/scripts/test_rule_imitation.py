"""``scripts/studies/rule_imitation.py``: search labels through the rule-choice env are the values the env itself
gives, and a fitted policy is a checkpoint the evaluation loads."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "studies" / "rule_imitation.py"
CONFIG = """\
env: gpusched/JobSelect-v1
env_kwargs: {cluster: tiny, num_jobs: 30, load: 1.2, window: 8, information: clairvoyant, preemption: true,
  rules: [srtf, srtf-nopreempt, srsf, las]}
steps: 128
eval_choices:
  - {workload: "philly:start=1899380,jobs=30,load=1.2,gpus=8"}
curriculum:
  - until: 128
    choices:
      - {workload: "philly:start=0,jobs=30,load=1.2,gpus=8"}
      - {workload: "philly:start=2561089,jobs=30,load=1.2,gpus=8"}
      - {workload: "philly:start=0,jobs=30,load=0.8,gpus=8"}
"""


@pytest.fixture(scope="module")
def mod():
    spec = importlib.util.spec_from_file_location("rule_imitation", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(CONFIG)
    return path


def test_the_config_gives_the_training_windows_at_its_load_and_the_held_in_ones(mod, config):
    cfg = mod.read_config(config)
    assert cfg["train"] == [
        "philly:start=0,jobs=30,load=1.2,gpus=8",
        "philly:start=2561089,jobs=30,load=1.2,gpus=8",
    ]
    assert cfg["heldin"] == ["philly:start=1899380,jobs=30,load=1.2,gpus=8"]


def test_labels_are_the_values_the_env_gives_and_the_search_never_loses(mod, config):
    cfg = mod.read_config(config)
    w = cfg["train"][0]
    r = mod.label_episode(mod.make_env(cfg["env_kwargs"], w), 0)
    values = r["values"]
    assert values.shape[1] == 4 and 0 < len(values) <= r["decisions"]
    assert (values.max(1) > values.min(1)).all()  # only decisions where the rules differ are kept
    assert r["avg_jct"] <= r["base_jct"] and r["promise"] == pytest.approx(r["avg_jct"], rel=1e-9)
    for key, arr in r["obs"].items():
        assert len(arr) == len(values), key
    # a kept decision's values, replayed through a fresh env: the search's rules up to it, rule k there, then the
    # first rule to the end
    assert len(r["actions"]) == r["decisions"] and (np.diff(r["steps"]) > 0).all()
    env = mod.make_env(cfg["env_kwargs"], w)
    for i in (0, len(values) - 1):
        t = int(r["steps"][i])
        for k in range(4):
            env.reset(seed=0)
            step = 0
            while True:
                a = int(r["actions"][step]) if step < t else (k if step == t else 0)
                *_, terminated, truncated, info = env.step(a)
                step += 1
                if terminated or truncated:
                    break
            assert info["metrics"]["avg_jct"] == pytest.approx(values[i, k], rel=1e-12)


def test_label_then_fit_gives_a_checkpoint_the_evaluation_loads(mod, config, tmp_path):
    from gpusched_lab.agents.checkpoint import load

    labels, out = tmp_path / "labels", tmp_path / "fit"
    mod.main(["label", "--config", str(config), "--seeds", "0", "--out", str(labels)])
    files = sorted(p.name for p in labels.glob("*.npz"))
    assert files == ["start0-s0.npz", "start2561089-s0.npz"]
    mtimes = [p.stat().st_mtime_ns for p in sorted(labels.glob("*.npz"))]
    mod.main(
        ["label", "--config", str(config), "--seeds", "0", "--out", str(labels)]
    )  # resumes: nothing redone
    assert [p.stat().st_mtime_ns for p in sorted(labels.glob("*.npz"))] == mtimes
    mod.main(
        ["fit", str(labels), "--config", str(config), "--epochs", "2", "--hidden", "16", "--out", str(out)]
    )
    log = json.loads((out / "fit.json").read_text())
    assert [e["epoch"] for e in log["epochs"]] == [1, 2]
    assert all(np.isfinite(e["loss"]) and e["heldin_geo_ratio"] > 0 for e in log["epochs"])
    agent = load(out / "best")
    assert agent.meta["env_kwargs"]["rules"] == ["srtf", "srtf-nopreempt", "srsf", "las"]
    env = agent.make_env(workload="philly:start=1899380,jobs=30,load=1.2,gpus=8")
    env.reset(seed=0)
    while True:
        *_, terminated, truncated, info = env.step(agent(env))
        if terminated or truncated:
            break
    assert info["metrics"]["avg_jct"] > 0
    # DAgger: label the states the fitted policy visits, then fit on both folders
    visited = tmp_path / "visited"
    mod.main(["label", "--config", str(config), "--policy", str(out / "best"), "--out", str(visited)])
    with np.load(visited / "start0-s0.npz") as z:
        actions = z["actions"].tolist()
    env = agent.make_env(workload="philly:start=0,jobs=30,load=1.2,gpus=8", num_jobs=30)
    env.reset(seed=0)
    played = []
    while True:
        played.append(agent(env))
        *_, terminated, truncated, _ = env.step(played[-1])
        if terminated or truncated:
            break
    assert actions == played
    both = tmp_path / "both"
    mod.main(
        ["fit", str(labels), str(visited), "--config", str(config), "--epochs", "1", "--hidden", "16"]
        + ["--out", str(both)]
    )
    assert json.loads((both / "fit.json").read_text())["labels"] == [str(labels), str(visited)]


def test_fit_without_labels_says_so(mod, config, tmp_path):
    with pytest.raises(SystemExit, match="no labelled decisions"):
        mod.main(["fit", str(tmp_path), "--config", str(config), "--out", str(tmp_path / "o")])


def test_fit_can_choose_on_the_training_windows_too_and_evaluate_every_k_epochs(mod, config, tmp_path):
    labels, out = tmp_path / "labels", tmp_path / "fit"
    mod.main(["label", "--config", str(config), "--seeds", "0", "--out", str(labels)])
    mod.main(
        ["fit", str(labels), "--config", str(config), "--epochs", "3", "--hidden", "16", "--eval-every", "2"]
        + ["--select-on", "heldin+train", "--out", str(out)]
    )
    log = json.loads((out / "fit.json").read_text())
    assert [e["epoch"] for e in log["epochs"]] == [2, 3]  # every second epoch and the last
    assert all(len(e["heldin_ratios"]) == 3 for e in log["epochs"])  # one held-in and two training windows
    meta = json.loads((out / "best" / "meta.json").read_text())
    assert (
        meta["evaluation"]["windows"] == mod.read_config(config)["heldin"] + mod.read_config(config)["train"]
    )
