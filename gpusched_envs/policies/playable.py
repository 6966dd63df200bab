"""Which heuristics an env's setting can play: a heuristic compared with an agent should act in the agent's own MDP
(through :class:`~gpusched_envs.envs.adapters.HeuristicAgent`), and some cannot in some settings (Tiresias, LAS,
SRTF and Gittins preempt: JobSelect without ``preemption`` cannot carry their preemptions out)."""

from __future__ import annotations

from gpusched_envs.policies.schedulers import CLAIRVOYANT_POLICIES, POLICIES, PREEMPTIVE_POLICIES


class NotPlayableError(ValueError):
    """A heuristic the env's setting cannot play; the message names the env arguments that play it."""


def _name(policy) -> str:
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of: {', '.join(POLICIES)}")
        return policy
    name = getattr(policy, "name", None)
    return name if isinstance(name, str) else type(policy).__name__.lower()


def check_playable(policy, env, allow_clairvoyant: bool = False) -> None:
    """Raise :class:`NotPlayableError` when heuristic ``policy`` (a name of :data:`POLICIES` or a policy object)
    cannot act in ``env`` (a single-agent env, wrapped or not) as it would in ``Simulator.run``; the message says
    which env arguments play it. JobSelect plays every named heuristic with the right arguments: a preemptive one
    (``srtf``, ``tiresias``, ``las``, ``gittins``) needs ``preemption=True``, a clairvoyant one (``sjf``, ``srtf``)
    ``information="clairvoyant"`` (or ``allow_clairvoyant``). The other envs play only their own heuristics:
    WorkerPlacement FIFO with backfill and a placement rule (``heuristic_action``), DelayTuning NetSens."""
    name = _name(policy)
    u = getattr(env, "unwrapped", env)
    kind = type(u).__name__
    # each env class names the heuristics' setting it offers (read by name: the envs import this module)
    setting = getattr(u, "heuristic_setting", None)
    preemptive = name in PREEMPTIVE_POLICIES or bool(getattr(policy, "preemptive", False))
    clairvoyant = name in CLAIRVOYANT_POLICIES or bool(getattr(policy, "clairvoyant", False))
    if setting == "queue":  # JobSelect
        rules = getattr(u, "rules", None)
        if rules is not None:
            where = (
                f"action {list(rules).index(name)}"
                if name in rules
                else f"none of its actions ({list(rules)})"
            )
            raise NotPlayableError(
                f"this JobSelect env chooses among rules (rules={list(rules)}): an action picks a rule, not a job, "
                f"so {name} does not act through it as on a job-level env; {name} is {where}"
            )
        problems = []
        if preemptive and not getattr(u, "preemption", False):
            problems.append(f"{name} preempts: use JobSelect with preemption=True")
        if clairvoyant and not allow_clairvoyant and not getattr(u, "clairvoyant", False):
            problems.append(f"{name} reads traced durations: use JobSelect with information='clairvoyant'")
        if problems:
            raise NotPlayableError(
                "; ".join(problems) + " (this env cannot play it; gpusched_envs.policies.comparable_policies("
                "information, preemption) lists the heuristics a setting plays)"
            )
        return
    if setting == "placement":  # WorkerPlacement
        raise NotPlayableError(
            f"{name}: WorkerPlacement plays FIFO with backfill and a placement rule only "
            "(env.unwrapped.heuristic_action(rule)); use JobSelect for scheduling heuristics"
        )
    if setting == "delay":  # DelayTuning
        if name in ("netsens", "netsens-auto"):
            return
        raise NotPlayableError(f"{name}: DelayTuning plays NetSens's delay scheduling only; use JobSelect")
    raise NotPlayableError(f"{name}: {kind} does not play the scheduling heuristics; use JobSelect")


__all__ = ["NotPlayableError", "check_playable"]
