"""One episode's metrics as the leaderboard records them, shared by every kind of evaluation agent: the run of an
``act(obs) -> action`` agent in an env, and the finishing touch of any metrics dict (plain floats, the JCT
percentiles of the simulator's finished jobs)."""

from __future__ import annotations

import numpy as np

# consecutive invalid actions after which an episode is abandoned (the env would otherwise never end)
MAX_CONSECUTIVE_INVALID = 10_000
JCT_QUANTILES = np.linspace(0.0, 100.0, 101)


def jct_quantiles(sim) -> list[float]:
    """JCT percentiles 0, 1, ..., 100 of the finished jobs (for the CDF plots)."""
    done = np.isfinite(sim.finish_time)
    jct = (sim.finish_time - sim.workload.submit_time)[done]
    if not len(jct):
        return []
    return [float(x) for x in np.percentile(jct, JCT_QUANTILES)]


def finish_metrics(metrics: dict, sim) -> dict:
    """``metrics`` with numpy floats as floats, plus ``jct_quantiles`` of ``sim`` when it is a simulator."""
    out = {k: (float(v) if isinstance(v, float | np.floating) else v) for k, v in metrics.items()}
    if sim is not None and hasattr(sim, "finish_time"):
        out["jct_quantiles"] = jct_quantiles(sim)
    return out


def masked_random(seed: int):
    """A policy ``act(obs) -> action`` that picks uniformly among the valid actions (``obs["action_mask"]``),
    seeded: the floor a learned agent is measured against (the leaderboard's ``random``, ``train compare``'s
    ``random-masked``)."""
    rng = np.random.default_rng(int(seed))

    def act(obs) -> int:
        return int(rng.choice(np.flatnonzero(obs["action_mask"])))

    return act


def run_act_episode(act, env, seed: int, reset=None) -> dict:
    """One episode of ``act(obs) -> action``; adds ``episode_return``, ``steps`` and ``invalid_actions``."""
    obs, info = env.reset(seed=int(seed))
    if reset is not None:
        reset()
    total, steps, invalid, streak = 0.0, 0, 0, 0
    while True:
        obs, reward, terminated, truncated, info = env.step(act(obs))
        total += float(reward)
        steps += 1
        if info.get("invalid_action"):
            invalid += 1
            streak += 1
            if streak >= MAX_CONSECUTIVE_INVALID:
                raise RuntimeError(f"{streak} invalid actions in a row (last: {info.get('reason', '?')})")
        else:
            streak = 0
        if terminated or truncated:
            break
    metrics = dict(info.get("metrics") or {})
    metrics.update(episode_return=total, steps=steps, invalid_actions=invalid)
    return finish_metrics(metrics, getattr(env.unwrapped, "sim", None))


def run_act_episodes(act_many, envs: list, seeds: list[int]) -> list[dict | Exception]:
    """:func:`run_act_episode` of one policy on several envs at once (one seed each), stepped in lockstep:
    ``act_many(observations) -> actions`` decides every unfinished env's step in one call, and a finished env drops
    out. Returns each env's metrics, or the exception its own episode raised (the others go on); ``act_many`` must
    give the actions the policy's ``act`` gives one observation at a time, so the metrics are those of
    :func:`run_act_episode`. An exception of ``act_many`` itself is raised."""
    out: list[dict | Exception] = [RuntimeError("not run")] * len(envs)
    live: list[int] = []
    obs: dict[int, dict] = {}
    tally: dict[int, list] = {}  # index -> [total, steps, invalid, streak]
    for i, (env, seed) in enumerate(zip(envs, seeds, strict=True)):
        try:
            obs[i], _ = env.reset(seed=int(seed))
        except Exception as exc:  # noqa: BLE001 - one env's failure is that episode's result
            out[i] = exc
            continue
        live.append(i)
        tally[i] = [0.0, 0, 0, 0]
    while live:
        actions = act_many([obs[i] for i in live])
        still = []
        for i, action in zip(live, actions, strict=True):
            env, t = envs[i], tally[i]
            try:
                obs[i], reward, terminated, truncated, info = env.step(action)
                t[0] += float(reward)
                t[1] += 1
                if info.get("invalid_action"):
                    t[2] += 1
                    t[3] += 1
                    if t[3] >= MAX_CONSECUTIVE_INVALID:
                        raise RuntimeError(
                            f"{t[3]} invalid actions in a row (last: {info.get('reason', '?')})"
                        )
                else:
                    t[3] = 0
                if terminated or truncated:
                    metrics = dict(info.get("metrics") or {})
                    metrics.update(episode_return=t[0], steps=t[1], invalid_actions=t[2])
                    out[i] = finish_metrics(metrics, getattr(env.unwrapped, "sim", None))
                else:
                    still.append(i)
            except Exception as exc:  # noqa: BLE001
                out[i] = exc
        live = still
    return out
