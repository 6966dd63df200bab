"""``scripts/studies/jobselect_feature_importance.py``: a job group is shuffled among valid rows only, a context
group is replaced by its episode mean, groups map to the env's own feature names, and the summary pairs runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "studies" / "jobselect_feature_importance.py"


@pytest.fixture(scope="module")
def mod():
    spec = importlib.util.spec_from_file_location("jobselect_feature_importance", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


class Seen:
    def __init__(self):
        self.obs = []

    def act(self, obs):
        self.obs.append(obs)
        return 0


def test_job_group_is_shuffled_among_valid_rows_only(mod):
    jf = np.arange(12, dtype=np.float32).reshape(4, 3)
    obs = {"job_features": jf, "job_mask": np.array([1, 1, 1, 0], dtype=np.int8), "context": np.zeros(2)}
    agent = Seen()
    mod.Perturbed(agent, "job", [1], np.random.default_rng(3))(obs)
    got = agent.obs[0]["job_features"]
    assert np.array_equal(got[:, [0, 2]], jf[:, [0, 2]])  # other columns untouched
    assert sorted(got[:3, 1]) == sorted(jf[:3, 1]) and got[3, 1] == jf[3, 1]  # padding row untouched
    assert not np.array_equal(got[:3, 1], jf[:3, 1])  # this seed moves them
    assert np.array_equal(obs["job_features"], jf)  # the env's observation is not modified


def test_context_group_takes_the_episode_mean(mod):
    agent = Seen()
    rec = mod.Recording(agent)
    for v in ([1.0, 10.0, 5.0], [3.0, 30.0, 5.0]):
        rec({"context": np.array(v, dtype=np.float32)})
    assert np.allclose(rec.mean(), [2.0, 20.0, 5.0])
    obs = {"context": np.array([7.0, 70.0, 9.0], dtype=np.float32)}
    mod.Perturbed(agent, "context", [0, 1], None, rec.mean())(obs)
    assert np.allclose(agent.obs[-1]["context"], [2.0, 20.0, 9.0])


def test_jitter_control_keeps_every_feature_within_its_noise(mod):
    jf = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    ctx = np.array([2.0, -4.0, 0.0], dtype=np.float32)
    obs = {"job_features": jf, "job_mask": np.array([1, 1, 1, 0], dtype=np.int8), "context": ctx}
    agent = Seen()
    mod.Perturbed(agent, "jitter", [], np.random.default_rng(0))(obs)
    got = agent.obs[0]
    for key, orig in (("job_features", jf), ("context", ctx)):
        assert got[key].dtype == orig.dtype and got[key].shape == orig.shape
        rel = np.abs(got[key] - orig) / np.maximum(np.abs(orig), 1e-12)
        assert rel.max() <= 6 * mod.JITTER  # a relative perturbation of the order of JITTER
        assert not np.array_equal(got[key][orig != 0], orig[orig != 0])  # and it does perturb
    assert got["context"][2] == 0.0  # zero stays zero
    assert np.array_equal(obs["job_features"], jf)  # the env's observation is not modified
    assert mod.group_columns(None, "jitter") == ("jitter", [])


def test_groups_map_to_the_env_feature_names(mod):
    kw = dict(cluster="tiny", num_jobs=8, information="non-clairvoyant", preemption=True, obs_mode="graph")
    plain = gym.make("gpusched/JobSelect-v1", **kw)
    hist = gym.make("gpusched/JobSelect-v1", history_features=True, **kw)
    names = list(hist.unwrapped.encoder.job_feature_names)
    kind, cols = mod.group_columns(hist, "history")
    assert kind == "job" and [names[c] for c in cols] == list(mod.GROUPS["history"][1])
    assert mod.group_columns(plain, "history") is None  # not in that env: skipped
    assert mod.group_columns(hist, "fragmentation")[0] == "context"
    for g in ("size", "age", "attained", "fits", "running", "queue_mix", "arrivals"):
        assert mod.group_columns(hist, g) is not None, g


def test_summary_pairs_runs(mod):
    rows = [{"base": 100.0, "fits": 120.0, "age": 100.0}, {"base": 50.0, "fits": 60.0}]
    s = mod.summarize(rows, ["fits", "age", "history"])
    assert s["fits"]["ratio"] == pytest.approx(1.2) and s["fits"]["pairs"] == 2
    assert s["age"]["ratio"] == pytest.approx(1.0) and s["age"]["pairs"] == 1
    assert "history" not in s


def test_bad_input(mod, tmp_path):
    ck = str(ROOT / "checkpoints" / "ppo_jobselect_gnn_nc")
    out = ["--out", str(tmp_path / "f.json")]
    for argv in (["--windows", "2017-11-05"], ["--groups", "nope"], ["--seeds", "x"], ["--jobs", "0"]):
        with pytest.raises(SystemExit):
            mod.main([ck, *argv, *out])
    with pytest.raises(SystemExit):
        mod.main([str(ROOT / "checkpoints" / "ddqn_workerplacement_gnn"), *out])  # not JobSelect
