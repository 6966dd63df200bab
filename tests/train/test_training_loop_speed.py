"""What makes a training run cheaper must not change what it learns or reports: a resumed PPO run runs torch with
the configured thread count, as a new run does (two threads fighting over a shared CPU made resumed runs several
times slower per sample); the periodic evaluation plays its episodes in lockstep, with batched forward passes, and
reports exactly what playing them one after the other reports."""

from __future__ import annotations

import torch
from gpusched_lab.agents.algos.ppo import FlatMaskablePPO
from gpusched_lab.agents.checkpoint import PPOPolicy
from gpusched_lab.agents.common import evaluate, make_env, run_episode
from gpusched_lab.agents.nets.config import config_for_env
from gpusched_lab.agents.nets.networks import masked, obs_to_tensors
from gpusched_lab.train import runner
from gpusched_lab.train.config import RunConfig


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
