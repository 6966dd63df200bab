"""What makes a training run cheaper must not change what it learns or reports: a resumed PPO run runs torch with
the configured thread count, as a new run does (two threads fighting over a shared CPU made resumed runs several
times slower per sample); the periodic evaluation plays its episodes in lockstep, with batched forward passes, and
reports exactly what playing them one after the other reports; a curriculum's later vector-env copies build their
envs when they first draw them and play the episodes envs built up front play."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpusched_lab.agents.algos.ppo import FlatMaskablePPO
from gpusched_lab.agents.checkpoint import PPOPolicy
from gpusched_lab.agents.common import evaluate, make_env, run_episode
from gpusched_lab.agents.nets.config import config_for_env
from gpusched_lab.agents.nets.networks import masked, obs_to_tensors
from gpusched_lab.train import curriculum, runner
from gpusched_lab.train.config import RunConfig

from gpusched_envs.policies.placement import get_placement


def _cfg(steps: int) -> RunConfig:
    return RunConfig(
        algorithm="ppo",
        env="gpusched/JobSelect-v1",
        env_kwargs={"cluster": "tiny", "reward": "jct", "num_jobs": 8, "load": 0.9},
        steps=steps,
        seed=3,
        eval_seeds=[10_000],
        progress=False,
        args={
            "encoder": "mlp",
            "hidden": 8,
            "n_steps": 32,
            "batch_size": 16,
            "n_epochs": 1,
            "torch_threads": 1,
        },
    )


def test_a_resumed_ppo_run_runs_torch_with_the_configured_threads(tmp_path, monkeypatch):
    threads_before = torch.get_num_threads()
    seen: list[int] = []
    learn = FlatMaskablePPO.learn

    def recording_learn(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return learn(self, *args, **kwargs)

    monkeypatch.setattr(FlatMaskablePPO, "learn", recording_learn)
    out = tmp_path / "ppo"
    try:
        runner.run_ppo(_cfg(32), out, "test")
        torch.set_num_threads(2)  # a new process starts with torch's default (every core)
        runner.run_ppo(_cfg(64), out, "test", resume=True)
    finally:
        torch.set_num_threads(threads_before)
    assert seen == [1, 1]


# ------------------------------------------------------------------------------------------------ evaluation
class _Writer:
    def __init__(self):
        self.logged: list[tuple] = []

    def scalar(self, tag, value, step):
        self.logged.append((tag, value, step))


class _Saver:
    def __init__(self, out):
        self.out, self.saved = out, []

    def save(self, module, step, evaluation, folder):
        self.saved.append((step, evaluation["objective"], folder))


def _sequential(module, env_id: str, settings: list[dict], seeds: list[int]) -> dict:
    """The evaluation played the plain way: each setting's seeds one after the other on one env, one forward pass
    (``no_grad``) per decision."""

    @torch.no_grad()
    def act(obs):
        t = obs_to_tensors(obs, "cpu", batched=False)
        return int(masked(module(t), t["action_mask"]).argmax(dim=-1)[0])

    parts = [runner.summarize(evaluate(act, make_env(env_id, kw, "graph"), seeds)) for kw in settings]
    return parts[0] if len(parts) == 1 else runner.merge_summaries(parts)


SMALL = {"cluster": "tiny", "reward": "jct", "num_jobs": 10, "load": 0.9, "window": 4, "obs_mode": "graph"}


def _policy(kwargs: dict, seed: int) -> PPOPolicy:
    env = make_env("gpusched/JobSelect-v1", kwargs, "graph")
    torch.manual_seed(seed)
    return PPOPolicy(config_for_env(env, "gnn", 16, 1), env.observation_space)


def test_the_lockstep_evaluation_plays_the_episodes_one_after_the_other_would(tmp_path):
    settings = [
        SMALL,
        {**SMALL, "num_jobs": 14, "load": 1.1},
        {**SMALL, "cluster": "topdrl", "num_jobs": 12},  # other shapes (a larger tree): a batch of its own
    ]
    seeds = [3, 4, 5]
    for policy_seed in (0, 1):
        module = _policy(SMALL, policy_seed)
        expected = _sequential(module, "gpusched/JobSelect-v1", settings, seeds)
        writer, saver = _Writer(), _Saver(tmp_path)
        evaluator = runner.Evaluator("gpusched/JobSelect-v1", settings, "graph", seeds, writer, saver)
        assert evaluator(module, 7, "cpu") == expected
        assert module.training  # left in the mode it came in
        assert writer.logged == [
            ("eval/avg_jct", expected["objective"], 7),
            ("eval/return", expected["return"], 7),
        ]
        assert saver.saved == [(7, expected["objective"], runner.BEST_DIR)]
        assert evaluator(module, 8, "cpu") == expected  # the envs, built once, replay the same episodes
    assert len(evaluator.envs) == len(settings) * len(seeds)
    assert expected["seeds"] == seeds * len(settings) and len(set(expected["avg_jct_per_seed"])) > 3


def test_run_episodes_matches_run_episode_on_each_env_and_seed():
    module = _policy(SMALL, 2)
    act = runner.GreedyAct(module, "cpu")
    envs = [make_env("gpusched/JobSelect-v1", SMALL, "graph") for _ in range(4)]
    seeds = [11, 12, 11, 13]
    got = runner.run_episodes(act, envs, seeds)
    want = [run_episode(act, make_env("gpusched/JobSelect-v1", SMALL, "graph"), s) for s in seeds]
    assert got == want
    assert got[0] == got[2] and got[0] != got[1]  # one seed, one episode; another seed, another
    assert runner.run_episodes(act, [], []) == []


# ------------------------------------------------------------------------------------------------ curriculum
CURRICULUM_BASE = {"cluster": "tiny", "num_jobs": 5, "load": 0.9}
CURRICULUM = [
    {"until": 12, "choices": [{"load": 0.5}, {"load": 1.5}, {"num_jobs": 7}]},
    {"until": 30, "choices": [{"load": 2.0}, {"load": 0.7, "num_jobs": 6}]},
]


def _trajectory(env, steps: int) -> tuple[list, list]:
    """The (load, num_jobs) of each episode started while taking ``steps`` steps, and every reward and observation."""
    obs, _ = env.reset(seed=5)
    settings, out = [(env.unwrapped.load, env.unwrapped.num_jobs)], [obs["obs"].tobytes()]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(int(np.flatnonzero(env.action_masks())[0]))
        out.append((reward, obs["obs"].tobytes()))
        if terminated or truncated:
            obs, _ = env.reset()
            settings.append((env.unwrapped.load, env.unwrapped.num_jobs))
            out.append(obs["obs"].tobytes())
    return settings, out


def test_later_curriculum_copies_build_their_envs_when_drawn_and_play_the_same_episodes(monkeypatch):
    monkeypatch.setattr(curriculum, "_SAME_SPACES", set())
    first = curriculum.CurriculumEnv("gpusched/JobSelect-v1", CURRICULUM_BASE, CURRICULUM, "flat", num_envs=1)
    assert all(env is not None for group in first.envs for env in group)  # built and checked up front
    later = curriculum.CurriculumEnv("gpusched/JobSelect-v1", CURRICULUM_BASE, CURRICULUM, "flat", num_envs=1)
    assert [[env is None for env in group] for group in later.envs] == [[True] * 3, [True] * 2]
    expected = _trajectory(first, 60)
    assert _trajectory(later, 60) == expected
    settings = expected[0]
    assert len(settings) >= 4 and settings[-1] == (0.9, 5)  # through both stages to the config's env
    assert settings[0] in {(0.5, 5), (1.5, 5), (0.9, 7)} and {(2.0, 5), (0.7, 6)} & set(settings)
    built = [[env is not None for env in group] for group in later.envs]
    assert any(built[0]) and not all(all(b) for b in built)  # only the drawn ones exist
    drawn = [env for group in later.envs for env in group if env is not None]
    assert len({id(env) for env in drawn}) == len(drawn)  # every copy and choice its own env
    assert not any(env is e for env in drawn for group in first.envs for e in group)


def test_a_curriculum_stage_with_other_spaces_is_refused_in_every_copy(monkeypatch):
    monkeypatch.setattr(curriculum, "_SAME_SPACES", set())
    bad = [{"until": 5, "choices": [{"load": 0.5}, {"window": 3}]}]
    for _ in range(2):  # the good choice is remembered, the bad one never
        with pytest.raises(ValueError, match=r"curriculum\[0\].*keep the cluster layout"):
            curriculum.CurriculumEnv("gpusched/JobSelect-v1", CURRICULUM_BASE, bad, "flat")
    assert len(curriculum._SAME_SPACES) == 1


def test_curriculum_kwargs_without_a_hashable_form_are_built_and_checked_in_every_copy(monkeypatch):
    monkeypatch.setattr(curriculum, "_SAME_SPACES", set())
    assert curriculum._frozen({"a": [1, 2.0, "x", None, True]}) == curriculum._frozen(
        {"a": [1, 2.0, "x", None, True]}
    )
    assert curriculum._frozen({"a": 1}) != curriculum._frozen({"a": True}) != curriculum._frozen({"a": 1.0})
    assert curriculum._frozen({"a": np.zeros(2)}) is None and curriculum._frozen({"f": len}) is None
    stages = [{"until": 5, "choices": [{"placement": get_placement("closest")}]}]
    for _ in range(2):
        env = curriculum.CurriculumEnv("gpusched/JobSelect-v1", CURRICULUM_BASE, stages, "flat")
        assert env.envs[0][0] is not None
    assert not curriculum._SAME_SPACES


@pytest.mark.parametrize("num_envs", [1, 2])
def test_a_resumed_ppo_run_goes_on_with_its_curriculum_stage(tmp_path, monkeypatch, num_envs):
    seen: list[list[tuple[int, int]]] = []
    learn = FlatMaskablePPO.learn

    def recording_learn(self, *args, **kwargs):
        inner = self.env.venv  # VecMonitor over the SB3 vector env (or DummyVecEnv)
        copies = inner.vec_env.envs if hasattr(inner, "vec_env") else inner.envs
        found = []
        for env in copies:
            while not isinstance(env, curriculum.CurriculumEnv):
                env = env.env
            found.append((env.steps, env.stage()))
        seen.append(found)
        return learn(self, *args, **kwargs)

    monkeypatch.setattr(FlatMaskablePPO, "learn", recording_learn)
    cfg = _cfg(64)
    cfg.num_envs = num_envs
    cfg.curriculum = [{"until": 64, "env_kwargs": {"load": 0.5}}, {"until": 128, "env_kwargs": {"load": 1.5}}]
    out = tmp_path / "ppo"
    runner.run_ppo(cfg, out, "test")
    resumed = _cfg(128)  # the run's own configuration (with its curriculum) holds on --resume
    runner.run_ppo(resumed, out, "test", resume=True)
    assert seen == [[(0, 0)] * num_envs, [(64 // num_envs, 1)] * num_envs]
    assert curriculum.resume_at([object()], 10) == 0
