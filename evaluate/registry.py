"""Agent kinds that other evaluation modules add to the leaderboard's agent specs.

:func:`gpusched_lab.evaluate.agents.resolve_agent` knows the heuristics, checkpoints and ``module:callable`` agents
itself; a bench module with agents of its own (the DAG agents of ``gpusched dag-bench``, the multi-agent schedulers
of ``gpusched marl``) registers them here when it is imported::

    register_agent_kind("dag", dag_eval_agent, prefix="dag-", group_agents=LEADERBOARD_AGENTS)

This module imports none of them: :data:`PLUGIN_MODULES` names the bench modules, imported on the first look-up,
so the agent resolver and the benches do not import each other.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PLUGIN_MODULES = (
    "gpusched_lab.evaluate.dag_bench",
    "gpusched_lab.evaluate.marl",
)
"""Modules that register agent kinds when imported, in the order their kinds are tried and their group agents
listed."""


@dataclass(frozen=True)
class AgentKind:
    """A kind of leaderboard agent: ``factory(spec)`` builds the agent of a spec the kind claims.

    A spec is claimed when it starts with ``prefix`` and names no existing path, or when ``matches(spec)`` is true.
    ``group_agents`` join the ``heuristics`` group (and ``all``); ``component_checkpoints`` are the names of shipped
    checkpoint folders the kind uses as parts, left out of the ``checkpoints`` group."""

    name: str
    factory: Callable
    prefix: str | None = None
    matches: Callable[[str], bool] | None = None
    group_agents: tuple[str, ...] = ()
    component_checkpoints: tuple[str, ...] = ()

    def claims(self, spec: str) -> bool:
        if self.prefix is not None and spec.startswith(self.prefix) and not Path(spec).exists():
            return True
        return self.matches is not None and bool(self.matches(spec))


_KINDS: dict[str, AgentKind] = {}
_COMPONENTS: list[str] = []
_loaded = False


def register_agent_kind(
    name: str,
    factory: Callable,
    *,
    prefix: str | None = None,
    matches: Callable[[str], bool] | None = None,
    group_agents: tuple[str, ...] = (),
    component_checkpoints: tuple[str, ...] = (),
) -> AgentKind:
    """Add (or replace) the agent kind ``name``; returns it."""
    if prefix is None and matches is None:
        raise ValueError(f"agent kind {name!r}: give a prefix or a matches(spec) function")
    kind = AgentKind(name, factory, prefix, matches, tuple(group_agents), tuple(component_checkpoints))
    _KINDS[name] = kind
    return kind


def register_component_checkpoints(*names: str) -> None:
    """Shipped checkpoint folders (by name) that another agent uses as parts: not ranked on their own."""
    _COMPONENTS.extend(n for n in names if n not in _COMPONENTS)


def _load_plugins() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in PLUGIN_MODULES:
            importlib.import_module(module)


def agent_kinds() -> tuple[AgentKind, ...]:
    """Every registered kind, in registration order (the bench modules imported first)."""
    _load_plugins()
    return tuple(_KINDS.values())


def kind_of(spec: str) -> AgentKind | None:
    """The first registered kind that claims ``spec``, or ``None``."""
    return next((k for k in agent_kinds() if k.claims(spec)), None)


def group_agents() -> list[str]:
    """The specs the kinds add to the ``heuristics`` group, in registration order."""
    return [a for k in agent_kinds() for a in k.group_agents]


def component_checkpoints() -> frozenset[str]:
    """Names of shipped checkpoint folders that are parts of other agents."""
    return frozenset(_COMPONENTS).union(*(k.component_checkpoints for k in agent_kinds()))
