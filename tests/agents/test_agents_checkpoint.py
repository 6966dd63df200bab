"""Checkpoints: model.pt loads with weights_only=True, agents.load acts deterministically, wrong env fails clearly,
and the device choice."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from gpusched_lab import agents
from gpusched_lab.agents import checkpoint as ckpt
from gpusched_lab.agents.common import make_env, resolve_device
from gpusched_lab.agents.nets.networks import build_network, config_for_env

TINY = {"cluster": "tiny", "num_jobs": 10, "load": 0.9}


@pytest.fixture
def saved(tmp_path):
    env = make_env("gpusched/JobSelect-v1", TINY, "image")
    cfg = config_for_env(env, "cnn", hidden=16)
    net = build_network(cfg, env.observation_space)
    ckpt.save(
        tmp_path / "c",
        net,
        algorithm="ddqn",
        policy="q",
        env_id="gpusched/JobSelect-v1",
        env_kwargs={**TINY, "obs_mode": "image"},
        obs_mode="image",
        network=cfg,
        steps=7,
        seed=1,
        command="python -m gpusched_lab.train ddqn ...",
        evaluation={"avg_jct": 1.0},
    )
    return tmp_path / "c", net, env


def test_round_trip_and_metadata(saved):
    path, net, env = saved
    state = torch.load(path / "model.pt", weights_only=True)
    assert set(state) == set(net.state_dict())
    meta = json.loads((path / "meta.json").read_text())
    for key in (
        "env_id",
        "env_kwargs",
        "obs_mode",
        "algorithm",
        "network",
        "steps",
        "seed",
        "command",
        "evaluation",
    ):
        assert key in meta
    agent = agents.load(path)
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        a = agent.act(obs)
        assert obs["action_mask"][a]
        with torch.no_grad():
            q = net(ckpt.obs_to_tensors(obs))[0].numpy()
        assert a == int(np.argmax(np.where(obs["action_mask"] > 0, q, -np.inf)))
        assert agent(env) == a  # acting on the env reads the same observation
        obs, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            break


def test_wrong_env_id_or_obs_mode_names_both(saved):
    path, *_ = saved
    with pytest.raises(ckpt.CheckpointMismatchError) as err:
        agents.load(path, env_id="gpusched/WorkerPlacement-v1")
    msg = str(err.value)
    assert "gpusched/JobSelect-v1" in msg and "gpusched/WorkerPlacement-v1" in msg
    with pytest.raises(ckpt.CheckpointMismatchError, match="obs_mode='image'.*obs_mode='graph'"):
        agents.load(path, obs_mode="graph")
    with pytest.raises(ckpt.CheckpointMismatchError, match="WorkerPlacement"):
        agents.load(path, env=make_env("gpusched/WorkerPlacement-v1", TINY, "image"))
    agent = agents.load(path)
    with pytest.raises(ckpt.CheckpointMismatchError, match="obs_mode='flat'"):
        agent(make_env("gpusched/JobSelect-v1", TINY, "flat"))
    assert isinstance(ckpt.CheckpointMismatchError("x"), ValueError)  # printed as one line by the CLI


def test_cuda_without_cuda_falls_back_to_cpu_with_a_warning(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(RuntimeWarning, match="CUDA is not available"):
        assert resolve_device("cuda") == torch.device("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_device("auto") == torch.device("cpu")
        assert resolve_device("cpu") == torch.device("cpu")


def test_auto_picks_cuda_when_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cuda:1") == torch.device("cuda:1")


def test_missing_checkpoint_names_the_given_path(tmp_path):
    nope = tmp_path / "nope"
    for path in (nope, nope / "model.pt"):
        with pytest.raises(FileNotFoundError, match=r"nope(/model\.pt)?: no such checkpoint$") as info:
            agents.load(path)
        assert str(path) in str(info.value) and "meta.json" not in str(info.value)
        with pytest.raises(FileNotFoundError, match="no such checkpoint"):
            ckpt.read_meta(path)


def test_meta_holds_the_model_hash_and_a_mismatch_is_one_clear_error(saved):
    import hashlib

    path, net, env = saved
    meta = json.loads((path / "meta.json").read_text())
    assert meta["model_sha256"] == hashlib.sha256((path / "model.pt").read_bytes()).hexdigest()
    # an interrupted save: new model.pt, old meta.json
    state = {k: v + 1 for k, v in torch.load(path / "model.pt", weights_only=True).items()}
    torch.save(state, path / "model.pt")
    with pytest.raises(
        ckpt.CheckpointCorruptError, match=r"model\.pt does not match meta\.json \(interrupted save\?\)"
    ):
        agents.load(path)


def test_checkpoint_without_hash_still_loads(saved):
    path, net, env = saved
    meta = json.loads((path / "meta.json").read_text())
    del meta["model_sha256"]
    (path / "meta.json").write_text(json.dumps(meta))
    agent = agents.load(path)
    obs, _ = env.reset(seed=0)
    assert isinstance(agent.act(obs), int)
