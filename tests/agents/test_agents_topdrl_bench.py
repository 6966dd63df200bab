"""TopDRL's setting is enforced; the training-speed benchmark returns gpusched bench records."""

from __future__ import annotations

import pytest
from gpusched_lab.agents.algos.ddqn import DDQNArgs
from gpusched_lab.agents.bench import training_samples_per_second
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.methods.topdrl.agent import TopDRL, topdrl_env_kwargs

TINY = {"cluster": "tiny", "num_jobs": 10, "load": 0.9}


def test_topdrl_env_kwargs_fix_placement_and_images():
    kw = topdrl_env_kwargs(num_jobs=50)
    assert kw["placement"] == "closest" and kw["obs_mode"] == "image" and kw["cluster"] == "topdrl"
    with pytest.raises(ValueError, match="placement"):
        topdrl_env_kwargs(placement="pack")


def test_topdrl_refuses_other_observations():
    with pytest.raises(ValueError, match="obs_mode='image'"):
        TopDRL(DDQNArgs(encoder="cnn", device="cpu"), [make_env("gpusched/JobSelect-v1", TINY, "graph")])
    algo = TopDRL(
        DDQNArgs(encoder="cnn", hidden=16, buffer_size=200, batch_size=8, learning_starts=20, device="cpu"),
        [make_env("gpusched/JobSelect-v1", {**TINY, "placement": "closest"}, "image")],
    )
    algo.learn(60)
    assert algo.updates > 0


@pytest.mark.parametrize("algorithm", ["ddqn", "ppo"])
def test_training_samples_per_second_record(algorithm):
    r = training_samples_per_second(algorithm, "mlp", steps=64, env_kwargs=TINY)
    assert r["name"] == f"train_{algorithm}_mlp" and r["unit"] == "samples/s" and r["value"] > 0
    assert r["detail"]["samples_per_cpu_second"] > 0 and r["detail"]["gnn_impl"] is None


def test_gnn_speedup_is_measured_alternately_with_medians(monkeypatch):
    """The GNN's before (pyg), scatter and after (dense) figures alternate round by round, PPO also with vectorised
    envs; records hold the medians, speed-up records their ratios (wall clock and CPU time)."""
    import gpusched_lab.agents.bench as bench

    calls = []
    figures = {
        ("pyg", 1): iter([10.0, 30.0, 20.0]),
        ("scatter", 1): iter([50.0, 70.0, 60.0]),
        ("dense", 1): iter([90.0, 70.0, 80.0]),
        ("pyg", 4): iter([40.0, 30.0, 50.0]),
        ("dense", 4): iter([200.0, 100.0, 150.0]),
    }

    def fake(alg, enc, steps, gnn_impl="dense", num_envs=1):
        calls.append((alg, gnn_impl, num_envs))
        v = next(figures[gnn_impl, num_envs]) if alg == "ppo" else 1.0
        return {
            "name": f"train_{alg}_gnn_{gnn_impl}" + (f"_{num_envs}envs" if num_envs > 1 else ""),
            "value": v,
            "detail": {"samples_per_cpu_second": 2 * v},
        }

    monkeypatch.setattr(bench, "training_samples_per_second", fake)
    timed = []
    monkeypatch.setattr(bench, "encoder_timings", lambda impls, rounds: timed.append((impls, rounds)) or [])
    records = {
        r["name"]: r
        for r in bench.training_benchmarks(quick=True, encoders=("gnn",), rounds=3, vector_envs=4)
    }
    one_round = [
        ("ppo", "pyg", 1),
        ("ppo", "scatter", 1),
        ("ppo", "dense", 1),
        ("ppo", "pyg", 4),
        ("ppo", "dense", 4),
    ]
    assert [c for c in calls if c[0] == "ppo"] == one_round * 3
    assert [c for c in calls if c[0] == "ddqn"] == [("ddqn", i, 1) for i in ("pyg", "scatter", "dense")] * 3
    assert records["train_ppo_gnn_pyg"]["value"] == 20.0 and records["train_ppo_gnn_dense"]["value"] == 80.0
    assert records["train_ppo_gnn_dense"]["meets"] is False  # the goal: 1,000 samples/s
    s = records["train_ppo_gnn_speedup"]
    assert s["value"] == 4.0 and s["detail"]["cpu_time_ratio"] == 4.0 and s["meets"] is False
    assert s["detail"]["scatter"] == 60.0
    v = records["train_ppo_gnn_speedup_4envs"]
    assert v["value"] == 150.0 / 40.0 and v["detail"]["num_envs"] == 4
    assert records["train_ddqn_gnn_speedup"]["value"] == 1.0
    assert timed == [(("pyg", "scatter", "dense"), 3)]  # the encoder alone, every implementation


def test_encoder_timings_give_forward_and_update_ms_per_implementation():
    from gpusched_lab.agents.bench import encoder_timings

    records = encoder_timings(("scatter", "dense"), rounds=1, env_kwargs=TINY, batch=4)
    assert [r["name"] for r in records] == [
        "gnn_forward_1_scatter",
        "gnn_forward_backward_4_scatter",
        "gnn_forward_1_dense",
        "gnn_forward_backward_4_dense",
    ]
    assert all(r["value"] > 0 and r["unit"] == "ms CPU" for r in records)
