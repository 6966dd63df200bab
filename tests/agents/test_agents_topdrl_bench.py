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
    assert r["detail"]["samples_per_cpu_second"] > 0 and r["detail"]["gnn_impl"] is None


def test_gnn_speedup_is_measured_alternately_with_medians(monkeypatch):
    """The GNN's before (pyg) and after (scatter) figures alternate round by round; records hold the medians."""
    import agents.bench as bench

    calls = []
    figures = {"pyg": iter([10.0, 30.0, 20.0]), "scatter": iter([50.0, 70.0, 60.0])}

    def fake(alg, enc, steps, gnn_impl="scatter"):
        calls.append((alg, gnn_impl))
        v = next(figures[gnn_impl]) if alg == "ppo" else 1.0
        return {
            "name": f"train_{alg}_gnn_{gnn_impl}",
            "value": v,
            "detail": {"samples_per_cpu_second": 2 * v},
        }

    monkeypatch.setattr(bench, "training_samples_per_second", fake)
    records = {r["name"]: r for r in bench.training_benchmarks(quick=True, encoders=("gnn",), rounds=3)}
    assert [c for c in calls if c[0] == "ppo"] == [("ppo", "pyg"), ("ppo", "scatter")] * 3
    assert records["train_ppo_gnn_pyg"]["value"] == 20.0 and records["train_ppo_gnn_scatter"]["value"] == 60.0
    s = records["train_ppo_gnn_speedup"]
    assert s["value"] == 3.0 and s["detail"]["cpu_time_ratio"] == 3.0 and s["meets"] is False
