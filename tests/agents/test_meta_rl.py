"""MetaPlace: the Reptile / first-order MAML outer updates on a toy quadratic (by hand), the performance model's
uncertainty on unseen placements, checkpoints, and adaptation end to end on ``tiny``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.meta_rl import (
    HeuristicExpert,
    MetaArgs,
    fomaml_update,
    load_meta,
    make_env,
    make_policy,
    meta_train,
    reptile_update,
    rollout,
)
from agents.perf_model import PerformanceModel, placement_features
from gpusched_envs.envs.placement_tasks import SizedTask

# two tasks f_i(θ) = ½‖θ − c_i‖²; one inner SGD step of size α from θ = (1, −2)
THETA, C, ALPHA, EPS = [1.0, -2.0], ([3.0, 0.0], [-1.0, 2.0]), 0.1, 0.5


def _inner(theta: torch.Tensor, c) -> torch.Tensor:
    phi = theta.detach().clone().requires_grad_(True)
    opt = torch.optim.SGD([phi], lr=ALPHA)
    (0.5 * ((phi - torch.tensor(c)) ** 2).sum()).backward()
    opt.step()
    return phi.detach()


def test_reptile_update_on_a_toy_quadratic_matches_the_hand_computation():
    theta = torch.tensor(THETA)
    adapted = [[_inner(theta, c)] for c in C]  # φ1 = (1.2, −1.8), φ2 = (0.8, −1.6)
    torch.testing.assert_close(adapted[0][0], torch.tensor([1.2, -1.8]))
    torch.testing.assert_close(adapted[1][0], torch.tensor([0.8, -1.6]))
    reptile_update([theta], adapted, EPS)  # θ + ε·mean(φ − θ) = (1, −2) + 0.5·(0, 0.3)
    torch.testing.assert_close(theta, torch.tensor([1.0, -1.85]))


def test_fomaml_update_on_a_toy_quadratic_matches_the_hand_computation():
    theta = torch.tensor(THETA)
    grads = []
    for c in C:
        phi = _inner(theta, c).requires_grad_(True)
        (0.5 * ((phi - torch.tensor(c)) ** 2).sum()).backward()  # ∇f_i(φ_i) = φ_i − c_i
        grads.append([phi.grad])
    torch.testing.assert_close(grads[0][0], torch.tensor([-1.8, -1.8]))
    torch.testing.assert_close(grads[1][0], torch.tensor([1.8, -3.6]))
    fomaml_update([theta], grads, EPS)  # θ − ε·mean ∇ = (1, −2) − 0.5·(0, −2.7)
    torch.testing.assert_close(theta, torch.tensor([1.0, -0.65]))


def _consolidated_data(seed: int = 0):
    """Performance-model samples from consolidated placements on ``tiny`` (no job larger than a server)."""
    args = MetaArgs(cluster="tiny", num_jobs=20)
    env = make_env(args)
    perf = PerformanceModel(len(env.unwrapped.cluster.catalog.model_names), seed=seed)
    policy = make_policy(env, args)
    for i, mix in enumerate(("vgg16+bert", "resnet50+lm", "transformer+ncf")):
        env.unwrapped.set_task(SizedTask(cluster="tiny", num_jobs=20, load=1.0, models=mix, max_gpus=4))
        rollout(policy, env, i, greedy=True, perf=perf, expert=HeuristicExpert("consolidate"))
    return env, perf


def test_performance_model_is_more_uncertain_on_unseen_placements():
    env, perf = _consolidated_data()
    x = np.stack(perf.x)
    assert len(perf) > 30 and x[:, -4].max() == 0  # no training placement crosses racks
    perf.fit(400)
    mean, std_seen = perf.predict(x)
    assert np.sqrt(np.mean((mean - np.asarray(perf.y)) ** 2)) < 0.1  # it fits what it saw
    # the same jobs spread over all four servers of both racks: a placement never seen
    sim = env.unwrapped.sim
    unseen = np.stack([placement_features(sim, 0, np.array([0, 4, 8, 12])) for _ in range(1)])
    unseen[:, : sim.cluster.catalog.model_names.__len__()] = x[:1, : len(sim.cluster.catalog.model_names)]
    _, std_unseen = perf.predict(unseen)
    assert std_unseen.min() > 3 * np.median(std_seen)


def test_candidate_uncertainty_covers_valid_servers_only():
    env, perf = _consolidated_data()
    perf.fit(50)
    obs, _ = env.reset(seed=3)
    u = perf.candidate_uncertainty(env)
    mask = obs["action_mask"].astype(bool)
    assert u.shape == mask.shape and np.all(u[~mask] == 0) and u[-1] == 0
    assert np.all(u[:-1][mask[:-1]] > 0)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("meta")
    args = MetaArgs(
        cluster="tiny", num_jobs=8, train_tasks=3, meta_batch=2, inner_episodes=1, iterations=2,
        imitation_episodes=2, perf_fit_steps=10,
    )  # fmt: skip
    meta_train(args, out / "meta", mode="meta", log=lambda m: None)
    meta_train(args, out / "multitask", mode="multitask", log=lambda m: None)
    return out


def test_checkpoint_round_trip_and_agents_load(tiny_checkpoint):
    import agents

    policy, perf, meta = load_meta(tiny_checkpoint / "meta")
    assert meta["meta_rl"]["iteration"] == 2 and meta["algorithm"] == "metaplace"
    agent = agents.load(tiny_checkpoint / "meta")  # the greedy policy, through the project's loader
    env = agent.make_env()
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        logits, _ = policy({k: torch.as_tensor(v).unsqueeze(0).float() for k, v in obs.items()})
        torch.testing.assert_close(torch.as_tensor(agent.scores(obs)), logits, rtol=1e-5, atol=1e-5)
        obs, _, term, trunc, _ = env.step(agent.act(obs))
        if term or trunc:
            break


def test_meta_training_resumes_where_it_stopped(tiny_checkpoint, tmp_path):
    import shutil

    shutil.copytree(tiny_checkpoint / "meta", tmp_path / "m")
    args = MetaArgs(**{**load_meta(tmp_path / "m")[2]["args"], "iterations": 3})
    logs = []
    meta_train(args, tmp_path / "m", log=logs.append)
    assert logs[0].startswith("resuming") and len(logs) == 2
    assert load_meta(tmp_path / "m")[2]["meta_rl"]["iteration"] == 3


def test_adaptation_runs_end_to_end_on_tiny(tiny_checkpoint):
    from evaluate.adapt import markdown, run_adaptation

    agents = ["metaplace", "metaplace-nobonus", "multitask", "scratch", "consolidate", "random"]
    results, table = run_adaptation(
        tiny_checkpoint / "meta", tiny_checkpoint / "multitask", agents, 2, [0, 1, 2], 1, log=lambda m: None
    )
    assert [r["seed"] for r in results] == [0, 1]
    for a in agents:
        for k in ("0", "1", "2"):
            assert table[a][k]["n"] == 2 and np.isfinite(table[a][k]["mean"]) and table[a][k]["mean"] > 0
    # heuristics do not adapt; the paired difference of metaplace with itself is absent
    assert table["consolidate"]["0"]["mean"] == table["consolidate"]["2"]["mean"]
    assert "paired_diff" not in table["metaplace"]["0"] and "paired_diff" in table["scratch"]["0"]
    # same seeds, same numbers
    again, _ = run_adaptation(
        tiny_checkpoint / "meta", None, ["metaplace"], 1, [0, 1, 2], 1, log=lambda m: None
    )
    assert again[0]["agents"]["metaplace"] == results[0]["agents"]["metaplace"]
    assert "| metaplace |" in markdown(table, [0, 1, 2], "t")


def test_adaptation_on_drift_tasks(tiny_checkpoint):
    from evaluate.adapt import run_adaptation

    results, table = run_adaptation(
        tiny_checkpoint / "meta", None, ["metaplace", "pack"], 1, [0, 1], 1, drift=True, log=lambda m: None
    )
    assert "DriftTask" in results[0]["task"] and table["pack"]["1"]["mean"] > 0


def test_adapt_command_reports_bad_input_in_one_line(tmp_path):
    import typer
    from typer.testing import CliRunner

    from evaluate.adapt import adapt_cmd

    app = typer.Typer()
    app.command()(adapt_cmd)
    app.command("other")(lambda: None)  # a group, so the command is named
    runner = CliRunner()
    r = runner.invoke(app, ["adapt-cmd", "--adapt-episodes", "0,x"])
    assert r.exit_code == 2 and "--adapt-episodes: expected a comma list of integers" in r.output
    r = runner.invoke(app, ["adapt-cmd", "--agents", "metaplace,bogus"])
    assert r.exit_code == 2 and "unknown bogus" in r.output
    r = runner.invoke(app, ["adapt-cmd", "--checkpoint", str(tmp_path)])
    assert r.exit_code == 2 and "no MetaPlace checkpoint there" in r.output
