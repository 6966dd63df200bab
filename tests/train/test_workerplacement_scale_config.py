"""``ppo_workerplacement_gnn_scale``: a valid PPO + GNN config on WorkerPlacement-v1 whose tasks are the env's own
``sample_tasks`` draws written as env kwargs (each builds the simulator ``set_task`` builds), trained on the tasks
drawn with the env seeded 3 for the whole run, warm-started towards consolidate, and evaluated (the checkpoint
choice) only on the held-in tasks of the WorkerPlacement headroom study (seeded 1), never on its held-out tasks
(seeded 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusched_lab.agents.common import fresh_simulator, make_env
from gpusched_lab.train.cli import build_config

from gpusched_envs.envs.worker_placement import PlacementTask
from gpusched_envs.policies.schedulers import FIFO

ENV_ID = "gpusched/WorkerPlacement-v1"
CONFIG = Path(__file__).resolve().parents[2] / "train" / "configs" / "ppo_workerplacement_gnn_scale.yaml"
HELDIN_SEED, HELDOUT_SEED, TRAIN_SEED = 1, 2, 3  # scripts/studies/workerplacement_headroom.py: 1 and 2


@pytest.fixture(scope="module")
def cfg():
    return build_config("ppo", None, None, None, None, None, None, str(CONFIG), [], False)


def drawn(seed: int, n: int) -> list[PlacementTask]:
    env = make_env(ENV_ID, {"cluster": "topdrl", "num_jobs": 300, "obs_mode": "flat"})
    env.reset(seed=seed)
    tasks = env.unwrapped.sample_tasks(n)
    env.close()
    return tasks


def as_kwargs(task: PlacementTask) -> dict:
    # the config's choices set what varies per task (cluster and size are the config's)
    kw = task.env_kwargs(32)
    return {k: kw[k] for k in ("load", "interference_scale", "workload")}


def test_the_config_is_ppo_gnn_on_worker_placement_with_a_consolidate_warm_start(cfg):
    assert cfg.env == ENV_ID and cfg.env_kwargs["cluster"] == "topdrl" and cfg.env_kwargs["num_jobs"] == 300
    assert cfg.args["encoder"] == "gnn" and cfg.steps >= 2_000_000 and cfg.eval_every > 0
    assert cfg.bc["policy"] == "consolidate"
    assert (
        len(cfg.curriculum) == 1 and cfg.curriculum[0]["until"] > cfg.steps
    )  # the tasks hold for the whole run


def test_it_trains_on_seed_3_draws_and_evaluates_on_the_held_in_tasks_only(cfg):
    heldin = [as_kwargs(t) for t in drawn(HELDIN_SEED, 4)]
    heldout = [as_kwargs(t) for t in drawn(HELDOUT_SEED, 8)]
    train = [as_kwargs(t) for t in drawn(TRAIN_SEED, 32)]
    assert cfg.eval_choices == heldin
    assert cfg.curriculum[0]["choices"] == train
    assert all(c in train for c in cfg.bc["choices"])
    every = cfg.eval_choices + cfg.curriculum[0]["choices"] + cfg.bc["choices"]
    assert not any(c in heldout for c in every)
    assert not any(c in heldin for c in train)
    assert not set(cfg.eval_seeds) & set(range(10))  # the held-out seeds of the study are 0-9


def test_a_task_written_as_kwargs_builds_the_simulator_of_set_task(cfg):
    task = drawn(HELDIN_SEED, 1)[0]
    by_task = make_env(ENV_ID, {"cluster": "topdrl", "num_jobs": 300, "obs_mode": "flat"})
    by_task.unwrapped.set_task(task)
    by_kwargs = make_env(ENV_ID, {**cfg.env_kwargs, **cfg.eval_choices[0]}, "flat")
    for env in (by_task, by_kwargs):
        env.reset(seed=100)
    a, b = (fresh_simulator(e, 100) for e in (by_task, by_kwargs))
    assert a.run(FIFO("consolidate", backfill=True)) == b.run(FIFO("consolidate", backfill=True))
