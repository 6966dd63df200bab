"""``gpusched train bc|cql --dataset``: offline learning from a recorded dataset. Smoke runs on a tiny dataset: the
loss falls, the checkpoint loads with ``agents.load`` and runs in the dataset's env, the leaderboard resolves and
runs it; bad input is one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from gpusched_lab.agents import checkpoint
from gpusched_lab.train import offline

from gpusched_envs.cli import run_command

pytest.importorskip("minari")

KWARGS = {"cluster": "tiny", "workload": "synthetic:jobs=12,load=0.9,gpus=4", "obs_mode": "flat"}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    from gpusched_lab.evaluate import datasets
    from gpusched_lab.evaluate.scenarios import Scenario

    folder = tmp_path_factory.mktemp("datasets")
    scenario = Scenario(name="tiny", env_id="gpusched/JobSelect-v1", env_kwargs=KWARGS)
    datasets.record("tiny-sjf", "sjf", scenario, [0, 1, 2], root=folder, env_kwargs={"window": 4})
    return folder


def test_transitions_line_up(root):
    data = offline.read_transitions(offline.load_dataset("tiny-sjf", root))
    assert data.episodes == 3 and data.meta["env_kwargs"]["information"] == "clairvoyant"
    n = len(data)
    assert data.obs["obs"].shape[0] == data.next_obs["obs"].shape[0] == n == len(data.rewards)
    assert data.dones.sum() == 3  # one termination per episode
    # each next observation is the following step's observation within an episode
    assert np.array_equal(data.next_obs["obs"][0], data.obs["obs"][1])


@pytest.mark.parametrize("algorithm", ["bc", "cql"])
def test_smoke_training_writes_a_checkpoint_that_runs(root, tmp_path, algorithm):
    args = offline.OfflineArgs(hidden=32, steps=200, batch_size=64, learning_rate=3e-3, alpha=1.0)
    out = tmp_path / algorithm
    result = offline.train_offline(algorithm, "tiny-sjf", out, args, root=root, eval_seeds=[50])
    history = result["history"]
    if algorithm == "bc":
        assert history[-1]["loss"] < history[0]["loss"] * 0.5
        assert history[-1]["agreement"] > 0.8
    else:
        assert history[-1]["loss"] < history[0]["loss"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["algorithm"] == algorithm and meta["policy"] == "q"
    assert meta["args"]["dataset"] == "tiny-sjf-v0" and meta["args"]["dataset_seeds"] == [0, 1, 2]
    assert meta["env_kwargs"]["window"] == 4 and meta["information"] == "clairvoyant"
    assert meta["evaluation"]["seeds"] == [50]
    agent = checkpoint.load(out)  # torch.load(weights_only=True), sha256 checked
    env = agent.make_env()
    obs, _ = env.reset(seed=50)
    assert obs["action_mask"][agent.act(obs)]
    env.close()
    # the leaderboard ranks it like any checkpoint: in the setting it was trained in
    from gpusched_lab.evaluate.agents import resolve_agent
    from gpusched_lab.evaluate.scenarios import Scenario

    ev = resolve_agent(str(out))
    scenario = Scenario(name="tiny", env_id="gpusched/JobSelect-v1", env_kwargs=KWARGS, seeds=(50,))
    assert ev.applies_to(scenario) is None
    metrics = ev.run_episode(scenario, 50)
    assert metrics["avg_jct"] == pytest.approx(meta["evaluation"]["avg_jct"], rel=1e-9)
    assert meta["evaluation"]["avg_jct_per_seed"] == [meta["evaluation"]["avg_jct"]]


def test_same_seed_same_weights(root, tmp_path):
    args = offline.OfflineArgs(hidden=16, steps=30, batch_size=32)
    a = offline.train_offline("bc", "tiny-sjf", tmp_path / "a", args, root=root)
    b = offline.train_offline("bc", "tiny-sjf", tmp_path / "b", args, root=root)
    assert a["history"] == b["history"]
    assert (tmp_path / "a" / "model.pt").read_bytes() == (tmp_path / "b" / "model.pt").read_bytes()


def _run(argv, capsys):
    from gpusched_lab.train.cli import app

    with pytest.raises(SystemExit) as exc:
        run_command(typer.main.get_command(app), argv, prog_name="gpusched")
    out, err = capsys.readouterr()
    return exc.value.code, out, [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["bc", "--dataset", "nosuch"], "no dataset nosuch-v0"),
        (["cql", "--dataset", "a/b"], "--dataset"),
        (["bc", "--dataset", "tiny-sjf", "--alpha", "2"], "--alpha"),
        (["bc", "--dataset", "tiny-sjf", "--eval-seeds", "1-3"], "held-out"),
        (["bc", "--dataset", "tiny-sjf", "--encoder", "gnn"], "--encoder gnn"),
    ],
)
def test_bad_input_is_one_line(root, tmp_path, capsys, argv, needle):
    code, _, lines = _run([*argv, "--root", str(root), "--out", str(tmp_path / "o"), "--no-progress"], capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert needle in lines[0], lines
    assert not (tmp_path / "o").exists()


def test_command_line_run(root, tmp_path, capsys):
    code = 0
    try:
        run_command(
            typer.main.get_command(__import__("gpusched_lab.train.cli", fromlist=["app"]).app),
            [
                "bc",
                "--dataset",
                "tiny-sjf",
                "--root",
                str(root),
                "--out",
                str(tmp_path / "o"),
                "--steps",
                "20",
                "--no-progress",
            ],
            prog_name="gpusched",
        )
    except SystemExit as exc:
        code = exc.code
    out, _ = capsys.readouterr()
    assert code in (0, None) and "bc: " in out and "agreement with the data" in out
    meta = json.loads((tmp_path / "o" / "meta.json").read_text())
    assert meta["command"].startswith("gpusched train bc --dataset tiny-sjf")
