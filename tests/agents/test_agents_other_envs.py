"""DDQN and MaskablePPO also train on the NetSens and WORL-RTGS envs: DelayTuning-v1 (cluster observations, every
encoder that reads them) and DAGSchedule-v1 (MLP only; the cluster encoders refuse it with one clear message)."""

from __future__ import annotations

import numpy as np
import pytest
from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs
from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets.networks import OBS_MODE_OF_ENCODER, config_for_env

SMALL_ARGS = dict(
    hidden=16,
    buffer_size=400,
    batch_size=16,
    learning_starts=40,
    target_update_interval=30,
    train_frequency=2,
)
CASES = [
    ("gpusched/DelayTuning-v1", {"cluster": "tiny", "num_jobs": 10, "interval": 300.0}, "mlp"),
    ("gpusched/DelayTuning-v1", {"cluster": "tiny", "num_jobs": 10, "interval": 300.0}, "gnn"),
    ("gpusched/DAGSchedule-v1", {"cluster": "tiny", "dag": "dag:random:n=8"}, "mlp"),
]


@pytest.mark.parametrize(("env_id", "kwargs", "encoder"), CASES)
def test_ddqn_trains_a_few_hundred_steps(env_id, kwargs, encoder):
    envs = [make_env(env_id, kwargs, OBS_MODE_OF_ENCODER[encoder])]
    algo = DDQN(DDQNArgs(encoder=encoder, device="cpu", **SMALL_ARGS), envs).learn(200)
    assert algo.global_step == 200 and algo.updates > 0 and np.isfinite(algo.last_loss)


@pytest.mark.parametrize(("env_id", "kwargs", "encoder"), CASES)
def test_ppo_trains_a_few_hundred_steps(env_id, kwargs, encoder):
    env = make_env(env_id, kwargs, OBS_MODE_OF_ENCODER[encoder])
    cfg = config_for_env(env, encoder, hidden=16)
    model = make_ppo(
        env, cfg, PPOArgs(encoder=encoder, hidden=16, n_steps=64, batch_size=32, n_epochs=1, device="cpu")
    )
    model.learn(200)
    assert model.num_timesteps >= 200


@pytest.mark.parametrize("encoder", ["gnn", "cnn"])
def test_cluster_encoders_refuse_the_dag_env_clearly(encoder):
    env = make_env("gpusched/DAGSchedule-v1", {"cluster": "tiny", "dag": "dag:random:n=8"}, "flat")
    with pytest.raises(ValueError, match="DAGSchedule-v1 has none: use encoder=mlp"):
        config_for_env(env, encoder)
