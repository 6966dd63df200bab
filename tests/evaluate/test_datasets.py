"""``gpusched dataset``: a recorded Minari dataset reads back with ``minari.load_dataset`` and holds exactly the
episodes a fresh run of the same agent and seed gives (returns, actions, metrics); bad input (unknown agent or
scenario, an existing name, a write failure mid-way) is one line and leaves nothing half-written."""

from __future__ import annotations

import errno

import gymnasium as gym
import numpy as np
import pytest
import typer
from gpusched_lab.evaluate import datasets
from gpusched_lab.evaluate.scenarios import Scenario

from gpusched_envs.cli import run_command
from gpusched_envs.envs.adapters import HeuristicAgent
from gpusched_envs.policies import make_policy

minari = pytest.importorskip("minari")

TINY = Scenario(
    name="tiny",
    env_id="gpusched/JobSelect-v1",
    env_kwargs={"cluster": "tiny", "workload": "synthetic:jobs=12,load=0.9,gpus=4", "obs_mode": "flat"},
)


def fresh_run(kwargs: dict, policy: str, seed: int) -> tuple[list[int], float, dict]:
    env = gym.make("gpusched/JobSelect-v1", **kwargs)
    expert = HeuristicAgent(make_policy(policy, "closest"))
    env.reset(seed=seed)
    actions, total = [], 0.0
    while True:
        a = expert(env)
        _, r, term, trunc, info = env.step(a)
        actions.append(a)
        total += float(r)
        if term or trunc:
            env.close()
            return actions, total, info["metrics"]


def test_round_trip_equals_a_fresh_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    path = datasets.record(
        "tiny-srtf", "srtf", TINY, [3, 4], env_kwargs={"preemption": True}, command="gpusched dataset ..."
    )
    assert path == tmp_path / "tiny-srtf-v0"
    ds = minari.load_dataset("tiny-srtf-v0")
    assert ds.total_episodes == 2
    meta = ds.storage.metadata["gpusched"]
    assert meta["env_id"] == "gpusched/JobSelect-v1"
    assert meta["env_kwargs"]["preemption"] is True
    assert meta["information"] == "clairvoyant"  # SRTF reads durations: recorded in a clairvoyant env
    assert meta["agent"]["name"] == "srtf+closest" and meta["seeds"] == [3, 4]
    assert meta["command"] == "gpusched dataset ..." and meta["package_version"]
    kwargs = meta["env_kwargs"]
    for ep, seed, epmeta in zip(
        ds.iterate_episodes(), [3, 4], ds.storage.get_episode_metadata([0, 1]), strict=True
    ):
        actions, total, metrics = fresh_run(kwargs, "srtf", seed)
        assert ep.actions.tolist() == actions
        assert float(ep.rewards.sum()) == pytest.approx(total, rel=1e-6)
        assert len(ep.observations["obs"]) == len(actions) + 1
        # the action mask is part of the observation, and every recorded action was valid
        mask = ep.observations["action_mask"][:-1]
        assert mask[np.arange(len(actions)), ep.actions].all()
        assert ep.terminations[-1] and not ep.terminations[:-1].any()
        assert ep.infos["metrics/avg_jct"][-1] == pytest.approx(metrics["avg_jct"], rel=1e-12)
        assert epmeta["seed"] == seed
        assert epmeta["metrics"]["avg_jct"] == pytest.approx(metrics["avg_jct"], rel=1e-12)
        assert epmeta["metrics"]["episode_return"] == pytest.approx(total, rel=1e-9)
    # the env the dataset names is the one it was recorded in
    env = ds.recover_environment()
    assert env.unwrapped.preemption and env.unwrapped.clairvoyant
    env.close()


def test_graph_observations_and_a_random_agent(tmp_path):
    path = datasets.record("tiny-random", "random", TINY, [0], root=tmp_path, obs_mode="graph")
    from minari.dataset.minari_dataset import MinariDataset

    ds = MinariDataset(path / "data")
    ep = next(ds.iterate_episodes())
    assert {"node_features", "edge_index", "action_mask"} <= set(ep.observations)
    assert ds.storage.metadata["gpusched"]["obs_mode"] == "graph"
    # the same seeded random choice again
    again = datasets.record("tiny-random-2", "random", TINY, [0], root=tmp_path, obs_mode="graph")
    ep2 = next(MinariDataset(again / "data").iterate_episodes())
    assert ep.actions.tolist() == ep2.actions.tolist()


def test_existing_name_is_refused_unless_forced(tmp_path):
    datasets.record("dup", "fifo", TINY, [0], root=tmp_path)
    with pytest.raises(datasets.DatasetError, match="already exists"):
        datasets.record("dup", "fifo", TINY, [0], root=tmp_path)
    datasets.record("dup", "sjf", TINY, [1], root=tmp_path, force=True)
    from minari.dataset.minari_dataset import MinariDataset

    assert MinariDataset(tmp_path / "dup-v0" / "data").storage.metadata["gpusched"]["seeds"] == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup-v0"]


def test_a_write_failure_leaves_nothing(tmp_path, monkeypatch):
    real = datasets.record_episode
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(datasets, "record_episode", failing)
    with pytest.raises(datasets.DatasetError, match="No space left"):
        datasets.record("full", "fifo", TINY, [0, 1], root=tmp_path)
    assert list(tmp_path.iterdir()) == []
    # an existing dataset survives a failed --force
    monkeypatch.setattr(datasets, "record_episode", real)
    datasets.record("full", "fifo", TINY, [0], root=tmp_path)
    calls.clear()
    monkeypatch.setattr(datasets, "record_episode", failing)
    with pytest.raises(datasets.DatasetError):
        datasets.record("full", "sjf", TINY, [0, 1], root=tmp_path, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full-v0"]


def _run(argv, capsys):
    app = typer.Typer()
    app.command(name="dataset")(datasets.dataset_cmd)
    app.command(name="other")(lambda: None)
    with pytest.raises(SystemExit) as exc:
        run_command(typer.main.get_command(app), ["dataset", *argv], prog_name="gpusched")
    out, err = capsys.readouterr()
    return exc.value.code, [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["--agent", "nosuch", "--scenario", "quick/topdrl-synthetic", "--name", "x"],
            "unknown agent 'nosuch'",
        ),
        (["--agent", "fifo", "--scenario", "nosuch", "--name", "x"], "no bundled scenario 'nosuch'"),
        (["--agent", "fifo", "--scenario", "quick/topdrl-synthetic", "--name", "a.b"], "not a dataset name"),
        (["--agent", "fifo", "--scenario", "quick/topdrl-placement", "--name", "x"], "JobSelect-v1"),
        (["--agent", "fifo", "--scenario", "standard/dc4-multi-agent", "--name", "x"], "multi-agent"),
        (["--recipe", "nosuch"], "unknown recipe"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, argv, needle):
    code, lines = _run([*argv, "--root", str(tmp_path), "--no-progress"], capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert needle in lines[0], lines
    assert list(tmp_path.iterdir()) == []


def test_existing_name_on_the_command_line(tmp_path, capsys):
    datasets.record("taken", "fifo", TINY, [0], root=tmp_path)
    code, lines = _run(
        [
            "--agent",
            "fifo",
            "--scenario",
            "quick/topdrl-synthetic",
            "--name",
            "taken",
            "--root",
            str(tmp_path),
        ],
        capsys,
    )
    assert code == 2 and len(lines) == 1 and "already exists" in lines[0] and "--force" in lines[0]


def test_recipe_lists_the_expert_sets(tmp_path):
    jobs = datasets.recipe_jobs(
        "standard", checkpoints=tmp_path
    )  # no checkpoints: the heuristics and DAG agents
    names = [j[0] for j in jobs]
    assert len(names) == len(set(names))
    for name in names:
        datasets.dataset_id(name)  # every name is a valid Minari id
    specs = {(j[1], j[2].name) for j in jobs}
    assert ("srtf", "topdrl-synthetic-0.8") in specs and ("tiresias", "hetero64-philly") in specs
    assert ("dag-cpsat", "dag-tpch-q9") in specs and ("dag-worl-rtgs", "dag-random-50-ccr1") in specs
    srtf = next(j for j in jobs if j[1] == "srtf")
    assert srtf[3] == {
        "information": "clairvoyant",
        "preemption": True,
        "decision_interval": 900.0,
        "min_run": 900.0,
    }
    assert not any(j[2].env_id == "gpusched_envs.multi_agent.multi_scheduler_v1" for j in jobs)
    assert ("dag-cpsat", "dag-random-50-ccr1") not in specs  # 50 tasks: beyond CP-SAT's reach


@pytest.mark.slow
def test_recipe_adds_the_best_shipped_checkpoint_of_each_env():
    jobs = datasets.recipe_jobs("standard")
    ckpts = {(j[1].rsplit("/", 1)[-1], j[2].name) for j in jobs if "/" in j[1]}
    assert ("ppo_jobselect_gnn_clairvoyant", "topdrl-philly-oct") in ckpts
    assert ("ddqn_workerplacement_gnn", "topdrl-worker-placement") in ckpts
    assert ("ppo_delaytuning_mlp", "congested-16x-delay-tuning") in ckpts


@pytest.mark.slow
def test_dag_agents_record_their_plans(tmp_path):
    from gpusched_lab.evaluate.scenarios import find_scenario
    from minari.dataset.minari_dataset import MinariDataset

    scenario = find_scenario("standard/dag-tpch-q9")
    path = datasets.record("q9-cpsat", "dag-cpsat", scenario, [0], root=tmp_path)
    ds = MinariDataset(path / "data")
    (meta,) = ds.storage.get_episode_metadata([0])
    # CP-SAT's proven optimum, placed task by task in the env's order, gives the env the same makespan
    assert meta["metrics"]["makespan"] == pytest.approx(meta["plan_makespan"], rel=1e-9)
    assert ds.storage.metadata["gpusched"]["skipped"] == []
    big = find_scenario("standard/dag-random-50-ccr1")
    with pytest.raises(datasets.DatasetError, match="no episode recorded"):
        datasets.record("r50-cpsat", "dag-cpsat", big, [0], root=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q9-cpsat-v0"]
