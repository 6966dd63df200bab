"""HMARL: the hierarchical encoder's invariances, GAE on hand-built numbers, the trainer reaching the known optimum of
a two-agent cooperative case, checkpoints (round trip, layout transfer, resume) and the interference model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpusched_lab.agents.methods.hmarl.agent import (
    HMARLActor,
    HMARLArgs,
    HMARLConfig,
    HMARLPolicy,
    Trainer,
    gae,
    load,
    make_env,
    network_config,
    obs_dims,
    run_episode,
    stack_agents,
    to_tensors,
    train,
)
from gpusched_lab.agents.methods.hmarl.interference import (
    FEATURES,
    InterferenceModel,
    collect_samples,
    evaluate_model,
    placement_features,
)

from gpusched_envs.envs.encoding import GPU_FEATURES, KINDS
from tests.toy import make_workload

DC = "datacenter:racks=2,servers=3,gpus=4"


def busy_observation(seed: int = 0):
    """An env a few random steps into an episode (some GPUs busy) and the agents' observations."""
    env = make_env(dict(num_agents=2, cluster=DC, num_jobs=40, load=2.0, heads=2))
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(6):
        obs, *_ = env.step({a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()})
    assert env.sim.running
    return env, obs


def permute_nodes(batch: dict, perm: np.ndarray) -> dict:
    """The same graph with node i moved to position perm[i] (edges relabelled)."""
    out = dict(batch)
    nf = batch["node_features"].copy()
    nf[:, perm] = batch["node_features"]
    nm = batch["node_mask"].copy()
    nm[:, perm] = batch["node_mask"]
    out["node_features"], out["node_mask"] = nf, nm
    out["edge_index"] = perm[batch["edge_index"]]
    return out


def hierarchy_permutation(cluster, rng) -> np.ndarray:
    """Shuffle GPU nodes within each server and server nodes within each rack (node order: GPUs, servers, racks,
    cluster)."""
    g, s = cluster.num_gpus, cluster.num_servers
    perm = np.arange(g + s + cluster.num_racks + 1)
    groups = [np.flatnonzero(cluster.gpu_server == k) for k in range(s)]
    groups += [g + np.flatnonzero(cluster.server_rack == r) for r in range(cluster.num_racks)]
    for idx in groups:
        perm[idx] = rng.permutation(idx)
    return perm


def test_encoder_is_invariant_to_gpu_order_in_a_server_and_server_order_in_a_rack():
    env, obs = busy_observation()
    torch.manual_seed(0)
    actor = HMARLActor(network_config(env, 16, 2), obs_dims(env)).eval()
    batch = stack_agents(obs, env.possible_agents, np.zeros((2, env.num_choices)))
    with torch.no_grad():
        ref_logits, ref_emb = actor(to_tensors(batch, "cpu"))
        rng = np.random.default_rng(1)
        for _ in range(3):
            perm = hierarchy_permutation(env.cluster, rng)
            assert not np.array_equal(perm, np.arange(len(perm)))
            logits, emb = actor(to_tensors(permute_nodes(batch, perm), "cpu"))
            torch.testing.assert_close(emb, ref_emb, atol=1e-6, rtol=0)
            torch.testing.assert_close(logits, ref_logits, atol=1e-6, rtol=0)
        # control: the GPU states of a server in rack 0 and one in rack 1 swapped (edges kept): another state
        col = KINDS + env.encoder.layout.num_gpu_types + GPU_FEATURES.index("busy")
        busy = batch["node_features"][0, : env.cluster.num_gpus, col] > 0
        counts = np.bincount(env.cluster.gpu_server[busy], minlength=6)
        a, b = next((a, b) for a in range(3) for b in range(3, 6) if counts[a] != counts[b])
        order = np.arange(env.cluster.num_gpus)
        order[4 * a : 4 * a + 4], order[4 * b : 4 * b + 4] = (
            np.arange(4 * b, 4 * b + 4),
            np.arange(4 * a, 4 * a + 4),
        )
        moved = dict(batch)
        moved["node_features"] = batch["node_features"].copy()
        moved["node_features"][:, : env.cluster.num_gpus] = batch["node_features"][:, order]
        _, emb = actor(to_tensors(moved, "cpu"))
        assert (emb - ref_emb).abs().max() > 1e-5  # invariance above holds to 1e-6


def test_gae_on_hand_built_numbers():
    rewards = np.array([[1.0], [1.0], [1.0]], np.float32)
    values = np.array([[0.5], [0.5], [0.5]], np.float32)
    dones = np.array([[0.0], [1.0], [0.0]], np.float32)
    adv, ret = gae(rewards, values, dones, np.array([2.0], np.float32), gamma=0.9, lam=0.5)
    # t=2: 1 + 0.9·2 − 0.5 = 2.3; t=1 (episode ends): 1 − 0.5 = 0.5; t=0: δ = 1 + 0.45 − 0.5 = 0.95, + 0.45·0.5
    np.testing.assert_allclose(adv[:, 0], [0.95 + 0.45 * 0.5, 0.5, 2.3], rtol=1e-6)
    np.testing.assert_allclose(ret, adv + values)


def cooperative_case() -> dict:
    """Two agents, each with three 8-GPU jobs (vgg16, 1,000 s ideal) at t=0 on 'tiny' (2 racks × 8 GPUs). Optimum:
    two jobs at a time, each inside one rack, never waiting: JCTs 1,000, 2,000, 3,000 s twice, return −12,000/3,600.
    A spread placement crosses racks (much slower); waiting idles GPUs."""
    workload = make_workload([(0, 1000, 8)] * 6, model_names=("vgg16",))
    return dict(num_agents=2, cluster="tiny", workload=workload, routing="round_robin", interference=False)


def test_trainer_reaches_the_known_optimum_of_a_cooperative_case():
    kw = cooperative_case()
    optimum = -12_000 / 3600
    args = HMARLArgs(
        num_envs=4,
        n_steps=16,
        batch_size=64,
        hidden=16,
        learning_rate=3e-3,
        ent_coef=0.0,
        wait_logit_init=0.0,
        seed=0,
    )
    trainer = Trainer(kw, args)
    env = make_env(kw)

    def sampled_return():
        torch.manual_seed(123)
        return np.mean(
            [run_episode(env, trainer.policy, s, deterministic=False)["return"] for s in range(12)]
        )

    before = sampled_return()
    assert before < optimum - 0.3  # the untrained stochastic policy spreads and waits
    for _ in range(14):
        trainer.update(trainer.collect())
    after = sampled_return()
    assert after > before + 0.3
    assert run_episode(env, trainer.policy, 0)["return"] == pytest.approx(optimum, rel=1e-6)


@pytest.mark.parametrize("critic", ["central", "local"])
def test_train_writes_checkpoints_that_load_and_transfer(tmp_path, critic):
    kw = dict(num_agents=2, cluster="tiny", num_jobs=12, heads=2)
    cfg = HMARLConfig(
        env_kwargs=kw,
        steps=64,
        eval_seeds=[5],
        args=dict(critic=critic, hidden=8, num_envs=2, n_steps=16, batch_size=32, n_epochs=1),
    )
    result = train(cfg, tmp_path, log=lambda *_: None)
    assert result["steps"] == 64
    for sub in ("checkpoint", "best"):
        assert (tmp_path / sub / "model.pt").exists() and (tmp_path / sub / "meta.json").exists()
    assert list((tmp_path / "tb").iterdir())
    policy = load(tmp_path / "checkpoint")
    assert policy.meta["algorithm"] == ("hmarl" if critic == "central" else "hmarl-independent")
    env = make_env(kw)
    trained = result["trainer"].policy
    obs, _ = env.reset(seed=3)
    assert policy(env, obs) == trained(env, obs)
    # the same weights act on a larger data centre with more agents (another layout and candidate count)
    big = make_env(dict(num_agents=4, cluster="datacenter:racks=6,servers=2,gpus=4", num_jobs=12, heads=2))
    ep = run_episode(big, policy, 0)
    assert ep["metrics"]["jobs"] == 12
    # resume continues the step counter
    cfg.steps = 96
    again = train(cfg, tmp_path, resume=True, log=lambda *_: None)
    assert again["steps"] == 96


def test_load_rejects_other_checkpoints(tmp_path):
    (tmp_path / "meta.json").write_text(
        '{"format": 1, "algorithm": "ppo", "env_id": "gpusched/JobSelect-v1"}'
    )
    with pytest.raises(ValueError, match="expected one of hmarl"):
        load(tmp_path)


def test_interference_features_and_fit():
    # hand-built: a 4-GPU job spread over both racks next to another rack-crossing job
    from gpusched_envs.sim import SimConfig, Simulator
    from tests.toy import make_workload as toy_workload

    wl = toy_workload([(0, 100, 8), (0, 100, 4)], model_names=("vgg16",))
    env = make_env(dict(num_agents=1, cluster="tiny", workload=wl, interference=True))
    env.reset(seed=0)
    sim = Simulator(env.cluster, wl, SimConfig(seed=0))
    sim.next_decision()
    sim.start(0, np.array([0, 1, 2, 3, 8, 9, 10, 11]))  # servers 0 and 2: racks 0 and 1
    f = placement_features(sim, 1, np.array([4, 12, 5, 13]))  # job 1 on servers 1 and 3, across the racks
    d = dict(zip(FEATURES, f.tolist(), strict=True))
    assert d["crosses_racks"] == 1 and d["servers"] == 2 and d["racks"] == 2
    assert d["server_neighbours"] == 0 and d["uplink_neighbours"] == 1
    assert d["log_gpus"] == pytest.approx(np.log(4))
    f = placement_features(sim, 1, np.array([4, 5, 6, 7]))  # server 1, alone
    assert dict(zip(FEATURES, f.tolist(), strict=True))["uplink_neighbours"] == 0
    # fit on a few random episodes, check on other seeds: better than "no slowdown"
    kw = dict(num_agents=2, cluster="datacenter:racks=3,servers=2,gpus=4", num_jobs=40, load=2.0)
    X, y = collect_samples(kw, range(3))
    Xt, yt = collect_samples(kw, range(50, 52))
    assert X.shape[1] == len(FEATURES) and len(X) > 100 and (y > 0.01).any()
    model = InterferenceModel.fit(X, y)
    ev = evaluate_model(model, Xt, yt)
    assert ev["mae_slowdown"] < ev["mae_slowdown_no_model"]
    scores = model.candidate_scores(env)
    assert scores.shape == (1, env.num_choices)


def test_policy_with_interference_model_round_trips(tmp_path):
    kw = dict(num_agents=2, cluster="tiny", num_jobs=30, load=2.0)
    X, y = collect_samples(kw, range(2))
    model = InterferenceModel.fit(X, y)
    model.save(tmp_path / "inter")
    again = InterferenceModel.load(tmp_path / "inter")
    np.testing.assert_allclose(again.predict(X[:20]), model.predict(X[:20]), rtol=1e-6)
    env = make_env(kw)
    obs, _ = env.reset(seed=0)
    actor = HMARLActor(network_config(env, 8, 1), obs_dims(env))
    policy = HMARLPolicy(actor, again)
    batch = policy.batch(env, obs)
    assert batch["candidate_interference"].shape == (2, env.num_choices, 1)
