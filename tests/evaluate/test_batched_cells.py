"""Checkpoint cells whose seeds run together (one batched forward pass per step) give exactly the metrics of the
cells run one by one; a failing seed fails alone; the grid still writes, caches and resumes each cell."""

from __future__ import annotations

import numpy as np
import pytest
from gpusched_lab.agents import checkpoint
from gpusched_lab.evaluate.agents import default_checkpoint_dir, resolve_agent
from gpusched_lab.evaluate.episodes import run_act_episode, run_act_episodes
from gpusched_lab.evaluate.runner import _tasks, plan, run_cell, run_cells, run_grid
from gpusched_lab.evaluate.scenarios import suite_from_dict

CKPT = default_checkpoint_dir()
GNN = str(CKPT / "ppo_jobselect_gnn_nc")  # graph observations, periodic rounds with preemption
MLP = str(CKPT / "cql_srtf_topdrl")  # flat observations
CNN = str(CKPT / "topdrl_jobselect_cnn")  # image observations

SUITE = suite_from_dict(
    {
        "name": "small",
        "description": "one small contended scenario on the TopDRL cluster",
        "defaults": {"env_id": "gpusched/JobSelect-v1", "seeds": "0-2", "env_kwargs": {"obs_mode": "flat"}},
        "scenarios": [
            {
                "name": "topdrl-small",
                "offered_load": 0.9,
                "env_kwargs": {
                    "cluster": "topdrl",
                    "workload": "synthetic:jobs=40,load=0.9,gpus=32,max_gpus=32",
                },
            }
        ],
    },
    "test suite",
)
SCENARIO = SUITE.scenarios[0]


@pytest.mark.parametrize("spec", [GNN, MLP, CNN], ids=["gnn", "mlp", "cnn"])
def test_seeds_stepped_together_give_the_metrics_of_one_cell_at_a_time(spec):
    agent = resolve_agent(spec)
    assert agent.batches_seeds and agent.applies_to(SCENARIO) is None
    doc = SCENARIO.to_dict()
    together = run_cells(doc, spec, [0, 1, 2])
    alone = [run_cell(doc, spec, seed) for seed in (0, 1, 2)]
    assert [r["metrics"] for r in together] == [r["metrics"] for r in alone]
    assert [r["jct_quantiles"] for r in together] == [r["jct_quantiles"] for r in alone]
    assert all(r["metrics"]["steps"] >= 40 for r in together)  # real episodes: a decision per job at least
    assert len({r["metrics"]["avg_jct"] for r in together}) == 3  # three different episodes


@pytest.mark.parametrize("margin", [0.0, 1e30])
def test_act_many_is_act_of_each_observation_whichever_rows_it_decides_itself(monkeypatch, margin):
    """margin 0: every row from the batched pass; a huge margin: every row decided by act() again."""
    monkeypatch.setattr(checkpoint, "ACT_MANY_MARGIN", margin)
    agent = resolve_agent(GNN)
    policy = agent.policy()
    envs = [SCENARIO.make_env(**agent.env_overrides()) for _ in range(3)]
    obs = [env.reset(seed=seed)[0] for seed, env in enumerate(envs)]
    calls = []
    single = policy.act

    def counted(o):
        calls.append(1)
        return single(o)

    for _ in range(25):
        expected = [single(o) for o in obs]
        monkeypatch.setattr(policy, "act", counted)
        got = policy.act_many(obs)
        monkeypatch.setattr(policy, "act", single)
        assert got == expected
        obs = [env.step(a)[0] for env, a in zip(envs, got, strict=True)]
    assert (len(calls) == 0) if margin == 0.0 else (len(calls) == 25 * 3)


def test_an_exact_tie_is_decided_as_act_decides_it():
    """Equal best scores: the first index wins, as in act(), whatever the batched pass rounds."""
    agent = resolve_agent(MLP)
    policy = agent.policy()
    env = SCENARIO.make_env(**agent.env_overrides())
    obs, _ = env.reset(seed=0)

    class Tied(checkpoint.torch.nn.Module):
        def forward(self, t):
            out = checkpoint.torch.zeros(t["action_mask"].shape)
            out[:, 3] = 1.0
            out[:, 5] = 1.0
            return out

    saved = policy.module
    policy.module = Tied()
    try:
        o = {**obs, "action_mask": np.ones_like(obs["action_mask"])}
        assert policy.act(o) == 3
        assert policy.act_many([o, o]) == [3, 3]
    finally:
        policy.module = saved


def test_a_seed_that_fails_fails_alone():
    agent = resolve_agent(MLP)
    policy = agent.policy()
    envs = [SCENARIO.make_env(**agent.env_overrides()) for _ in range(3)]
    broken = envs[1]
    real_step = broken.step
    count = [0]

    def step(action):
        count[0] += 1
        if count[0] == 7:
            raise ValueError("broken env")
        return real_step(action)

    broken.step = step
    out = run_act_episodes(policy.act_many, envs, [0, 1, 2])
    assert isinstance(out[1], ValueError) and str(out[1]) == "broken env"
    for seed in (0, 2):
        assert out[seed] == run_act_episode(policy.act, SCENARIO.make_env(**agent.env_overrides()), seed)


def test_checkpoint_seeds_are_one_task_and_the_grid_resumes_cell_by_cell(tmp_path):
    specs = ["fifo", MLP]
    _, cells, _ = plan([SCENARIO], specs, tmp_path)
    tasks = _tasks(cells)
    assert [len(t) for t in tasks] == [3, 1, 1, 1]  # the checkpoint's seeds first, together
    assert {c.agent.spec for c in tasks[0]} == {MLP}

    first = run_grid([SCENARIO], specs, tmp_path, progress=False)
    assert first.computed == 6 and not first.failed
    files = sorted((tmp_path / "cells").rglob("seed-*.json"))
    assert len(files) == 6
    victim = next(p for p in files if "ckpt" in str(p) and p.name == "seed-1.json")
    victim.unlink()
    again = run_grid([SCENARIO], specs, tmp_path, progress=False)
    assert again.computed == 1 and again.cached == 5
    assert [c["metrics"] for c in again.cells] == [c["metrics"] for c in first.cells]


def test_a_pool_of_workers_gives_the_cells_computed_in_process(tmp_path):
    """Two spawned workers (started before planning, torch imported there): the same metrics, every cell."""
    specs = ["sjf", MLP, "definitely-not-an-agent.py:nothing"]
    with pytest.raises(Exception, match="definitely-not-an-agent"):
        run_grid([SCENARIO], specs, tmp_path / "bad", workers=2, progress=False)
    pooled = run_grid([SCENARIO], specs[:2], tmp_path / "pool", workers=2, progress=False)
    alone = run_grid([SCENARIO], specs[:2], tmp_path / "alone", workers=1, progress=False)
    assert pooled.computed == alone.computed == 6 and not pooled.failed
    assert [c["metrics"] for c in pooled.cells] == [c["metrics"] for c in alone.cells]
    assert [c["key"] for c in pooled.cells] == [c["key"] for c in alone.cells]


def test_act_many_feeds_the_network_the_tensors_obs_to_tensors_gives():
    """The batch act_many stacks straight into the network's dtypes holds the values obs_to_tensors gives."""
    from gpusched_lab.agents.nets.common import obs_to_tensors

    for spec in (GNN, MLP, CNN):
        agent = resolve_agent(spec)
        envs = [SCENARIO.make_env(**agent.env_overrides()) for _ in range(3)]
        obs = [env.reset(seed=seed)[0] for seed, env in enumerate(envs)]
        expected = obs_to_tensors({k: np.stack([o[k] for o in obs]) for k in obs[0]}, batched=True)
        got = checkpoint._stacked(obs)
        assert list(got) == list(expected)
        for k, t in expected.items():
            assert got[k].dtype == t.numpy().dtype and np.array_equal(got[k], t.numpy()), (spec, k)


def _flat_suite(scenarios: list[dict]):
    """A JobSelect-v1 suite of ``scenarios`` with flat observations and seeds 0-1."""
    return suite_from_dict(
        {
            "name": "test",
            "defaults": {
                "env_id": "gpusched/JobSelect-v1",
                "seeds": "0-1",
                "env_kwargs": {"obs_mode": "flat"},
            },
            "scenarios": scenarios,
        },
        "test suite",
    )


def test_the_costliest_group_starts_first(tmp_path):
    """A periodic agent on a long trace makes many more decisions than on short jobs: its group goes first; the
    cost is weight x (jobs + GPU time / GPUs / decision interval) of the scenario's first-seed workload, the rounds
    counted twice for a non-clairvoyant agent."""
    from gpusched_lab.evaluate.runner import _busy_seconds, _cost

    long = _flat_suite(
        [
            {"name": "short", "env_kwargs": SCENARIO.env_kwargs},
            {
                "name": "trace",
                "env_kwargs": {"cluster": "topdrl", "workload": "philly:jobs=40,load=0.9,gpus=32"},
            },
        ]
    )
    short, trace = long.scenarios
    _, cells, _ = plan([short, trace], ["fifo", CNN, GNN], tmp_path)
    tasks = _tasks(cells)
    firsts = [(t[0].agent.spec, t[0].scenario.name, len(t)) for t in tasks[:4]]
    assert firsts == [
        (GNN, "trace", 2),
        (GNN, "short", 2),
        (CNN, "short", 2),
        (CNN, "trace", 2),
    ]  # CNN: a tie
    assert all(len(t) == 1 and t[0].agent.spec == "fifo" for t in tasks[4:])

    env = trace.make_env()
    workload = env.unwrapped.episode.workload(0)
    busy = float(np.sum(workload.duration * workload.num_gpus)) / 32
    assert _busy_seconds(trace) == (40, busy)
    interval = resolve_agent(GNN).meta["env_kwargs"]["decision_interval"]
    assert _cost(trace, resolve_agent(GNN)) == 4 * (
        40 + 2 * busy / interval
    )  # non-clairvoyant: rounds count twice
    assert _cost(trace, resolve_agent(CNN)) == 40  # asked per decision, not in rounds: one per job


def test_a_non_clairvoyant_periodic_agent_is_estimated_to_ask_twice_as_many_rounds():
    """The same periodic checkpoint kind with and without the jobs' durations: the non-clairvoyant one (its queue
    drains slower) counts its rounds twice and starts first; an agent asked per decision is unaffected; the
    checkpoint's own information setting wins over the scenario's."""
    from gpusched_lab.evaluate.runner import _busy_seconds, _cost, _information

    trace = _flat_suite(
        [
            {
                "name": "trace",
                "env_kwargs": {
                    "cluster": "topdrl",
                    "workload": "philly:jobs=40,load=0.9,gpus=32",
                    "information": "clairvoyant",
                },
            }
        ]
    ).scenarios[0]
    las, srtf = resolve_agent(str(CKPT / "cql_las_topdrl")), resolve_agent(MLP)  # no setting / clairvoyant
    assert las.meta["env_kwargs"].get("information") is None
    assert srtf.meta["env_kwargs"]["information"] == "clairvoyant"
    assert _information(SCENARIO, las) == "non-clairvoyant"  # the env's default
    assert _information(trace, las) == "clairvoyant"  # the scenario's
    assert _information(SCENARIO, resolve_agent(GNN)) == "non-clairvoyant"  # the checkpoint's own
    _, busy = _busy_seconds(SCENARIO)
    interval = las.meta["env_kwargs"]["decision_interval"]
    assert srtf.meta["env_kwargs"]["decision_interval"] == interval
    assert _cost(SCENARIO, las) == 40 + 2 * busy / interval
    assert _cost(SCENARIO, srtf) == 40 + busy / interval
    assert _cost(SCENARIO, resolve_agent(CNN)) == 40
    _, cells, _ = plan([SCENARIO], [MLP, str(CKPT / "cql_las_topdrl")], "unused")
    assert [t[0].agent.name for t in _tasks(cells)] == ["ckpt:cql_las_topdrl", "ckpt:cql_srtf_topdrl"]
