"""Imports point one way only. The library never imports agents, train or evaluate; the simulator never
imports gymnasium; agents never import train or evaluate; plotting is imported only inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _root(module: str) -> str:
    """The layer a module belongs to: its top-level name, or ``agents`` / ``train`` / ``evaluate`` for the three
    upper packages mapped under ``gpusched_lab``."""
    parts = module.split(".")
    if parts[0] == "gpusched_lab" and len(parts) > 1:
        return parts[1]
    return parts[0]


def imported_modules(path: Path, top_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = tree.body if top_level_only else ast.walk(tree)
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(_root(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gpusched_lab":
                names.update(alias.name for alias in node.names)
            else:
                names.add(_root(node.module))
    return names


def files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("gpusched_envs", {"agents", "train", "evaluate"}),
        ("gpusched_envs/sim", {"gymnasium", "pettingzoo", "torch", "agents", "train", "evaluate"}),
        ("gpusched_envs/workloads", {"gymnasium", "torch", "agents", "train", "evaluate"}),
        ("gpusched_envs/policies", {"gymnasium", "torch", "agents", "train", "evaluate"}),
        ("agents", {"train", "evaluate"}),
        ("train", {"evaluate"}),
    ],
)
def test_imports_point_one_way(package, forbidden):
    offenders = {
        str(p.relative_to(ROOT)): sorted(imported_modules(p) & forbidden)
        for p in files(package)
        if imported_modules(p) & forbidden
    }
    assert not offenders, f"{package} must not import {sorted(forbidden)}: {offenders}"


def test_heavy_libraries_are_imported_only_where_used():
    """matplotlib anywhere, and torch / torch_geometric in the library, only inside functions (module import stays
    cheap); gpusched_envs/graph.py is the library's one torch helper."""
    offenders = []
    for package in ("gpusched_envs", "evaluate"):
        for p in files(package):
            top = imported_modules(p, top_level_only=True)
            if "matplotlib" in top or (package == "gpusched_envs" and top & {"torch", "torch_geometric"}):
                offenders.append(str(p.relative_to(ROOT)))
    assert not offenders, offenders
