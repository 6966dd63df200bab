"""The baselines a learnt single-agent cluster policy is compared with, on the same episodes.

For each seed, the policy plays one episode of its env; on the same cluster, workload and simulator seed
(``Simulator(sim.cluster, sim.workload, sim.config)`` after ``env.reset(seed=seed)``) run:

- the heuristics of the env's information class (:func:`gpusched_envs.policies.comparable_policies`: FIFO,
  Gandiva, Tiresias, LAS; clairvoyant adds SJF and SRTF), each through ``Simulator.run``;
- ``fifo+backfill``: FIFO order where a job that does not fit lets later jobs start;
- ``random``: uniformly random valid actions through the env (masked sampling).

The figure is the episode's average job completion time (``avg_jct``, seconds; lower is better).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["compare", "format_table", "masked_random_policy", "play"]


def _avg_jct(info: dict) -> float:
    metrics = info.get("metrics") or {}
    value = metrics.get("avg_jct", info.get("avg_jct"))
    if value is None:
        raise KeyError("the episode's last info has no 'avg_jct' (in info['metrics'] or info)")
    return float(value)


def masked_random_policy(seed: int = 0) -> Callable:
    """A policy ``(obs, env) -> action`` drawing uniformly among the valid actions (``env``'s ``action_masks``)."""
    rng = np.random.default_rng(seed)

    def act(obs, env) -> int:
        return int(rng.choice(np.flatnonzero(env.get_wrapper_attr("action_masks")())))

    return act


def play(env, policy: Callable, seed: int, max_steps: int = 1_000_000) -> float:
    """Average JCT of one episode of ``env`` (reset with ``seed``) under ``policy(obs, env) -> action``."""
    obs, _ = env.reset(seed=int(seed))
    for _ in range(max_steps):
        obs, _, terminated, truncated, info = env.step(policy(obs, env))
        if terminated or truncated:
            return _avg_jct(info)
    raise RuntimeError(f"the episode did not end within {max_steps} steps")


def compare(
    make_env: Callable,
    policy: Callable | None,
    seeds: Sequence[int],
    *,
    name: str = "agent",
    heuristics: Sequence[str] | None = None,
    random_seed: int = 0,
) -> dict[str, float]:
    """Mean average JCT over ``seeds`` of ``policy`` (under ``name``; skipped when None), the heuristics of the
    env's information class that its setting plays (preemptive ones only with ``preemption=True``; or
    ``heuristics``), ``fifo+backfill`` and ``random``.

    ``make_env()`` builds the env the policy acts on (any wrappers; its unwrapped env is a cluster env of the
    suite); ``policy(obs, env) -> action``."""
    from gpusched_envs.policies import FIFO, comparable_policies, make_policy
    from gpusched_envs.sim import Simulator

    env = make_env()
    base = env.unwrapped
    if not hasattr(base, "sim") or not hasattr(base, "information"):
        raise TypeError(f"compare needs a cluster env of the suite, got {type(base).__name__}")
    # the heuristics the agent's own setting plays: the preemptive ones only when the env lets the agent preempt
    playable = comparable_policies(base.information, preemption=bool(getattr(base, "preemption", False)))
    names = tuple(heuristics) if heuristics is not None else playable
    runs: dict[str, list[float]] = {}
    if policy is not None:
        runs[name] = [play(env, policy, s) for s in seeds]
    rand = masked_random_policy(random_seed)
    runs["random"] = [play(env, rand, s) for s in seeds]
    for h in (*names, "fifo+backfill"):
        runs[h] = []
        for s in seeds:
            env.reset(seed=int(s))
            sim = base.sim
            fresh = Simulator(sim.cluster, sim.workload, sim.config)
            rule = FIFO(backfill=True) if h == "fifo+backfill" else make_policy(h)
            runs[h].append(float(fresh.run(rule)["avg_jct"]))
    env.close()
    return {k: float(np.mean(v)) for k, v in runs.items()}


def format_table(results: dict[str, float], title: str = "") -> str:
    """The comparison as text: one line per policy, best (lowest) first."""
    lines = [title] if title else []
    lines.append(f"{'policy':16s} {'mean avg JCT (s)':>18s}")
    for k, v in sorted(results.items(), key=lambda kv: kv[1]):
        lines.append(f"{k:16s} {v:18,.1f}")
    return "\n".join(lines)
