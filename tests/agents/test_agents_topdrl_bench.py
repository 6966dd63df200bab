"""TopDRL's setting is enforced; the training-speed benchmark returns gpusched bench records."""

from __future__ import annotations

import pytest

from agents.bench import training_samples_per_second
from agents.common import make_env
from agents.ddqn import DDQNArgs
from agents.topdrl import TopDRL, topdrl_env_kwargs

TINY = {"cluster": "tiny", "num_jobs": 10, "load": 0.9}


def test_topdrl_env_kwargs_fix_placement_and_images():
    kw = topdrl_env_kwargs(num_jobs=50)
    assert kw["placement"] == "closest" and kw["obs_mode"] == "image" and kw["cluster"] == "topdrl"
    with pytest.raises(ValueError, match="placement"):
        topdrl_env_kwargs(placement="pack")


def test_topdrl_refuses_other_observations():
    with pytest.raises(ValueError, match="obs_mode='image'"):
        TopDRL(DDQNArgs(encoder="cnn", device="cpu"), [make_env("gpusched/JobSelect-v0", TINY, "graph")])
    algo = TopDRL(
        DDQNArgs(encoder="cnn", hidden=16, buffer_size=200, batch_size=8, learning_starts=20, device="cpu"),
        [make_env("gpusched/JobSelect-v0", {**TINY, "placement": "closest"}, "image")],
    )
    algo.learn(60)
    assert algo.updates > 0


@pytest.mark.parametrize("algorithm", ["ddqn", "ppo"])
def test_training_samples_per_second_record(algorithm):
    r = training_samples_per_second(algorithm, "mlp", steps=64, env_kwargs=TINY)
    assert r["name"] == f"train_{algorithm}_mlp" and r["unit"] == "samples/s" and r["value"] > 0
