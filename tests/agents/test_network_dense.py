"""The dense GNN (the default ``gnn_impl``): the same function as the ``torch_geometric`` reference
and the scatter implementation, with the same parameters, on every cluster env's graph observation; its caches
(tree operators, detached parameter views, link terms) follow parameter updates; shipped checkpoints act the same."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets.networks import (
    GraphEncoder,
    build_network,
    config_for_env,
    masked,
    obs_to_tensors,
)

GRAPH_ENVS = ["gpusched/JobSelect-v1", "gpusched/WorkerPlacement-v1", "gpusched/DelayTuning-v1"]
CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"


def rollout(env, steps: int, seed: int = 0) -> list[dict]:
    """Observations of a short rollout taking varied valid actions (resets on episode end)."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    while len(seen) < steps:
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if terminated or truncated:
            obs, _ = env.reset(seed=seed + len(seen))
        seen.append(obs)
    return seen


def stack(observations: list[dict]) -> dict:
    return obs_to_tensors({k: np.stack([o[k] for o in observations]) for k in observations[0]}, batched=True)


def three_impls(env, hidden: int = 16, layers: int = 2) -> dict:
    cfg = config_for_env(env, "gnn", hidden=hidden, layers=layers)
    torch.manual_seed(0)
    nets = {impl: build_network(cfg, env.observation_space, impl) for impl in ("dense", "scatter", "pyg")}
    for net in nets.values():
        net.load_state_dict(nets["dense"].state_dict())
    return nets


def randomise(net: torch.nn.Module, seed: int) -> None:
    """Parameters far from their init (LayerNorm affine included), so every term of the function matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)


@pytest.mark.parametrize("env_id", GRAPH_ENVS)
def test_dense_equals_scatter_and_pyg_forward_and_gradients(env_id):
    """hetero64 (mixed server sizes, padding in the blocks), two sweeps, random parameters: scores and gradients
    of the dense GNN equal the torch_geometric reference's and the scatter one's."""
    env = make_env(env_id, {"cluster": "hetero64", "num_jobs": 40, "load": 1.2}, "graph")
    nets = three_impls(env)
    randomise(nets["dense"], 1)
    for net in nets.values():
        net.load_state_dict(nets["dense"].state_dict())
    batch = stack(rollout(env, 10))
    batch["edge_index"] = batch["edge_index"].float()  # as SB3 hands it over
    out = {k: net(batch) for k, net in nets.items()}
    for ref in ("scatter", "pyg"):
        torch.testing.assert_close(out["dense"], out[ref], rtol=1e-5, atol=1e-5)
    for k in out:
        out[k].square().sum().backward()
    named = dict(nets["dense"].named_parameters())
    for ref in ("scatter", "pyg"):
        for name, q in nets[ref].named_parameters():
            if q.grad is None:  # a part the env's head does not read (DelayTuning has no slots)
                assert named[name].grad is None, name
                continue
            scale = float(q.grad.abs().max()) + 1.0  # float32 rounding grows with the gradient's size
            torch.testing.assert_close(named[name].grad, q.grad, rtol=1e-4, atol=1e-5 * scale)


def test_dense_single_observation_equals_its_row_of_a_batch_and_the_reference():
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 30, "load": 1.0}, "graph")
    nets = three_impls(env, hidden=32, layers=1)
    seen = rollout(env, 6, seed=3)
    batch = nets["dense"](stack(seen))
    with torch.no_grad():
        for i, o in enumerate(seen):
            one = nets["dense"](obs_to_tensors(o))
            torch.testing.assert_close(one, batch[i : i + 1].detach(), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(one, nets["pyg"](obs_to_tensors(o)), rtol=1e-5, atol=1e-5)


def test_a_batch_of_different_clusters_takes_the_scatter_path_and_stays_exact():
    """WorkerPlacement's tasks run on several clusters (tiny, topdrl, hetero64 padded to one layout): a batch mixing
    them has no single tree; the dense network falls back to the scatter path and still equals the reference."""
    env = make_env(
        "gpusched/WorkerPlacement-v1",
        {"cluster": "tiny", "task_clusters": ["tiny", "topdrl", "hetero64"], "num_jobs": 6},
        "graph",
    )
    env.reset(seed=0)
    seen = []
    for k, task in enumerate(env.unwrapped.sample_tasks(8)):  # a cluster per task
        env.unwrapped.set_task(task)
        seen += rollout(env, 2, seed=k)
    trees = {o["edge_index"].tobytes() for o in seen}
    assert len(trees) > 1
    nets = three_impls(env)
    batch = stack(seen)
    torch.testing.assert_close(nets["dense"](batch), nets["pyg"](batch), rtol=1e-5, atol=1e-5)
    encoder = nets["dense"].encoder
    assert isinstance(encoder, GraphEncoder) and len(encoder._trees) == 0  # no tree built for a mixed batch
    for o in seen[:4]:  # one cluster at a time: each tree is built once and kept
        nets["dense"](obs_to_tensors(o))
    assert 1 <= len(encoder._trees) <= len({o["edge_index"].tobytes() for o in seen[:4]})


def test_no_grad_forwards_follow_optimizer_steps_load_state_dict_and_dtype_moves():
    """The dense network's caches outside autograd (detached parameter views, the link terms) never serve stale
    parameters: after an optimizer step, a load_state_dict and a move to float64 the scores equal a fresh
    reference network's with the same weights."""
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 30, "load": 1.0}, "graph")
    nets = three_impls(env, layers=1)
    net, ref = nets["dense"], nets["pyg"]
    batch = stack(rollout(env, 4))
    one = {k: v[:1] for k, v in batch.items()}

    def check():
        ref.load_state_dict(net.state_dict())
        with torch.no_grad():
            for obs in (one, batch):
                torch.testing.assert_close(net(obs), ref(obs), rtol=1e-5, atol=1e-5)

    check()
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        net(batch).square().mean().backward()
        opt.step()
        check()
    randomise(ref, 7)
    net.load_state_dict(ref.state_dict())
    check()
    scatter = nets["scatter"]  # (to_pyg works in float32: the scatter network is the float64 reference)
    scatter.load_state_dict(net.state_dict())
    net.double()
    scatter.double()
    with torch.no_grad():
        wide = {k: (v.double() if v.is_floating_point() else v) for k, v in one.items()}
        assert net(wide).dtype == torch.float64
        torch.testing.assert_close(net(wide), scatter(wide), rtol=1e-9, atol=1e-9)


def test_a_tree_first_seen_in_inference_mode_trains():
    """A rollout in torch.inference_mode builds the tree's operators; the training forward after it saves them
    for backward (inference tensors could not be)."""
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 30, "load": 1.0}, "graph")
    nets = three_impls(env, layers=1)
    batch = stack(rollout(env, 3))
    with torch.inference_mode():
        nets["dense"](obs_to_tensors({k: v[0].numpy() for k, v in batch.items()}))
    nets["dense"](batch).square().sum().backward()
    nets["pyg"](batch).square().sum().backward()
    for (name, p), q in zip(nets["dense"].named_parameters(), nets["pyg"].parameters(), strict=True):
        if q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=name)


def gnn_checkpoints() -> list[Path]:
    out = []
    for meta_path in sorted(CHECKPOINTS.glob("*/meta.json")):
        meta = json.loads(meta_path.read_text())
        if (
            "meta_rl" in meta or meta.get("env_id") == "gpusched/DAGSchedule-v1"
        ):  # networks and loaders of their own
            continue
        if meta.get("obs_mode") == "graph" and str(meta.get("env_id", "")).startswith("gpusched/"):
            out.append(meta_path.parent)
    return out


@pytest.mark.parametrize("path", gnn_checkpoints(), ids=lambda p: p.name)
def test_shipped_gnn_checkpoint_acts_the_same_with_the_reference_encoder(path):
    """Every shipped GNN checkpoint, one short episode of its own env: the dense encoder's scores equal the
    torch_geometric reference's (same weights) at every step, and so do the actions taken."""
    from gpusched_lab import agents

    agent = agents.load(path)
    reference = copy.deepcopy(agent.module)
    impls = [m for m in reference.modules() if isinstance(m, GraphEncoder)]
    assert impls and all(m.impl == "dense" for m in agent.module.modules() if isinstance(m, GraphEncoder))
    for m in impls:
        m.impl = "pyg"
    env = agent.make_env(num_jobs=12)
    obs, _ = env.reset(seed=0)
    steps = 0
    while True:
        t = obs_to_tensors(obs)
        with torch.no_grad():
            fast, slow = agent.module(t), reference(t)
        torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
        a = agent.act(obs)
        assert a == int(masked(slow, t["action_mask"]).argmax(dim=-1)[0])
        obs, _, terminated, truncated, _ = env.step(a)
        steps += 1
        if terminated or truncated or steps >= 60:
            break
    assert steps >= 5
