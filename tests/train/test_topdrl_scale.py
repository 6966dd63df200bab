"""TopDRL's research-scale run: the runner trains it on the native vector env through a curriculum and resumes it
bit for bit, refuses a curriculum or held-in window that changes its placer or observations with one clear line,
and ``topdrl_scale`` is TopDRL's setting with the wide config's training windows, curriculum and held-in windows,
a replay memory that fits in RAM, and a resume file written without in-memory copies of the buffer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs, is_vector_env
from gpusched_lab.agents.methods.topdrl.agent import TopDRL
from gpusched_lab.train import runner
from gpusched_lab.train.cli import app, build_config
from gpusched_lab.train.config import RunConfig
from typer.testing import CliRunner

CONFIGS = Path(__file__).resolve().parents[2] / "train" / "configs"
TINY = {"cluster": "tiny", "reward": "jct", "num_jobs": 10, "load": 0.9}
CURRICULUM = [
    {"until": 64, "choices": [{"load": 0.7}, {"load": 1.1}]},
    {"until": 160, "choices": [{"num_jobs": 6}, {"num_jobs": 14, "load": 1.0}]},
]


def _cfg(**over) -> RunConfig:
    fields = dict(
        algorithm="topdrl",
        env="gpusched/JobSelect-v1",
        env_kwargs=dict(TINY),
        steps=256,
        seed=3,
        num_envs=4,
        eval_every=128,
        eval_seeds=[10_000],
        eval_choices=[{"load": 0.8}, {"num_jobs": 12}],
        checkpoint_every=64,
        progress=False,
        curriculum=CURRICULUM,
        args={
            "hidden": 16,
            "buffer_size": 300,
            "batch_size": 16,
            "learning_starts": 40,
            "target_update_interval": 48,
            "n_step": 3,
            "train_frequency": 4,
            "exploration_fraction": 0.1,
            "device": "cpu",
        },
    )
    return RunConfig(**{**fields, **over})


class Interrupt(Exception):
    pass


def test_topdrl_runs_on_the_vector_env_with_a_curriculum_and_resumes_bit_for_bit(tmp_path, monkeypatch):
    given = []
    original_init = TopDRL.__init__

    def recording(self, args, envs, total_steps=None):
        given.append(is_vector_env(envs))
        original_init(self, args, envs, total_steps)

    monkeypatch.setattr(TopDRL, "__init__", recording)
    result = runner.run_ddqn(_cfg(), tmp_path / "straight", "test")
    assert given == [True] and result["steps"] == 256
    meta = json.loads((tmp_path / "straight/checkpoint/meta.json").read_text())
    assert meta["algorithm"] == "topdrl" and meta["obs_mode"] == "image"
    assert meta["network"]["encoder"] == "cnn"
    assert meta["env_kwargs"]["placement"] == "closest" and meta["steps"] == 256
    assert (tmp_path / "straight/best/model.pt").is_file()  # chosen on the held-in choices

    original_step = DDQN.train_step

    def crashing(self):
        if self.global_step >= 160:  # after the checkpoint at step 128, mid-episode
            raise Interrupt
        original_step(self)

    monkeypatch.setattr(DDQN, "train_step", crashing)
    with pytest.raises(Interrupt):
        runner.run_ddqn(_cfg(), tmp_path / "resumed", "test")
    monkeypatch.setattr(DDQN, "train_step", original_step)
    assert json.loads((tmp_path / "resumed/checkpoint/meta.json").read_text())["steps"] == 128
    runner.run_ddqn(_cfg(), tmp_path / "resumed", "test", resume=True)
    a = torch.load(tmp_path / "straight/checkpoint/model.pt", weights_only=True)
    b = torch.load(tmp_path / "resumed/checkpoint/model.pt", weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert given == [True, True, True]


def test_one_env_keeps_the_list_of_envs(tmp_path, monkeypatch):
    given = []
    original_init = TopDRL.__init__

    def recording(self, args, envs, total_steps=None):
        given.append(type(envs))
        original_init(self, args, envs, total_steps)

    monkeypatch.setattr(TopDRL, "__init__", recording)
    runner.run_ddqn(_cfg(num_envs=1, steps=64, eval_every=0, checkpoint_every=0), tmp_path / "one", "test")
    assert given == [list]


def test_the_resume_file_holds_the_buffer_as_tensors_and_loads_back_the_same(tmp_path):
    from gpusched_lab.agents.common import make_env

    def algo():
        env = make_env("gpusched/JobSelect-v1", {**TINY, "placement": "closest"}, "image")
        return TopDRL(DDQNArgs(encoder="cnn", hidden=16, buffer_size=50, batch_size=8, device="cpu"), [env])

    first = algo().learn(70)  # the ring buffer has wrapped
    path = tmp_path / "checkpoint" / "resume.pt"
    runner.save_training_state(first.training_state(), path)
    assert not list(path.parent.glob(".*.tmp"))  # the temporary file was renamed into place
    state = torch.load(path, weights_only=False)
    assert isinstance(state["buffer"]["obs"]["cluster_image"], torch.Tensor)
    assert isinstance(first.training_state()["buffer"]["obs"]["cluster_image"], np.ndarray)  # untouched
    second = algo()
    second.load_training_state(state)
    for k in first.buffer.obs:
        assert np.array_equal(first.buffer.obs[k], second.buffer.obs[k])
        assert np.array_equal(first.buffer.next_obs[k], second.buffer.next_obs[k])
    assert np.array_equal(first.buffer.returns, second.buffer.returns)
    assert (second.buffer.pos, second.buffer.size) == (first.buffer.pos, 50) and first.buffer.pos == 20
    first.learn(110), second.learn(110)
    assert all(torch.equal(v, second.q.state_dict()[k]) for k, v in first.q.state_dict().items())


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        (
            {"curriculum": [{"until": 50, "choices": [{"load": 0.8}, {"placement": "pack"}]}]},
            "error: curriculum[0].choices[1]: TopDRL uses placement='closest', got 'pack'",
        ),
        (
            {"curriculum": [{"until": 50, "env_kwargs": {"obs_mode": "graph"}}]},
            "error: curriculum[0].env_kwargs: TopDRL uses obs_mode='image', got 'graph'",
        ),
        (
            {"eval_choices": [{"load": 0.8}, {"placement": "first-fit"}]},
            "error: eval_choices[1]: TopDRL uses placement='closest', got 'first-fit'",
        ),
        ({"args": {"encoder": "mlp"}}, "error: encoder (TopDRL): 'mlp' is not one of cnn"),
    ],
    ids=["curriculum-placement", "curriculum-obs-mode", "held-in-placement", "encoder"],
)
def test_settings_outside_topdrl_are_one_clear_line(tmp_path, over, expected):
    doc = {
        "env": "gpusched/JobSelect-v1",
        "env_kwargs": TINY,
        "steps": 100,
        "num_envs": 2,
        "args": {"hidden": 16, "buffer_size": 100, "learning_starts": 10},
        **over,
    }
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(doc))
    out = tmp_path / "x"
    result = CliRunner().invoke(app, ["topdrl", "--config", str(config), "--out", str(out), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not out.exists()


def _scale():
    return build_config(
        "topdrl", None, None, None, None, None, None, str(CONFIGS / "topdrl_scale.yaml"), [], False
    )


def test_topdrl_scale_is_topdrls_setting_on_the_wide_configs_windows():
    cfg = _scale()
    wide = build_config(
        "ppo", None, None, None, None, None, None, str(CONFIGS / "ppo_jobselect_gnn_nc_wide.yaml"), [], False
    )
    assert cfg.steps == 2_000_000 and cfg.num_envs == 16 and cfg.env == "gpusched/JobSelect-v1"
    kw = cfg.env_kwargs
    assert kw["cluster"] == "topdrl" and kw["placement"] == "closest" and kw.get("preemption", False) is False
    assert "information" not in kw and "obs_mode" not in kw  # JobSelect-v1's default; the CNN's images
    assert cfg.args["encoder"] == "cnn"
    assert cfg.eval_choices == wide.eval_choices and cfg.curriculum == wide.curriculum
    assert cfg.curriculum[-1]["until"] == cfg.steps
    for stage in cfg.curriculum:  # no stage changes the cluster the CNN's image is shaped on, nor the setting
        for choice in stage["choices"]:
            assert not {"cluster", "placement", "obs_mode", "preemption", "information"} & set(choice), choice
    assert cfg.checkpoint_every % cfg.num_envs == 0 and cfg.eval_every % cfg.num_envs == 0


def test_topdrl_scale_replay_fits_in_memory():
    """200,000 transitions of TopDRL's image observations (state and next state) stay under 1 GiB."""
    from gpusched_lab.agents.common import make_env
    from gpusched_lab.agents.methods.topdrl.agent import topdrl_env_kwargs

    cfg = _scale()
    env = make_env(cfg.env, topdrl_env_kwargs(**cfg.env_kwargs), "image")
    per_obs = sum(int(np.prod(s.shape)) * s.dtype.itemsize for s in env.observation_space.spaces.values())
    assert per_obs == 1937
    # state and next state, + action (8 bytes), return, discount (4 each), demonstration flag (1)
    replay = (2 * per_obs + 17) * cfg.args["buffer_size"]
    assert cfg.args["buffer_size"] == 200_000 and replay < 2**30
