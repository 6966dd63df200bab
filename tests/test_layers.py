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


# --------------------------------------------------------------------------------------------------- import cycles

PACKAGES = {
    "gpusched_envs": ROOT / "gpusched_envs",
    **{f"gpusched_lab.{n}": ROOT / n for n in ("agents", "train", "evaluate")},
}


def module_files() -> dict[str, Path]:
    """Every module of the installed packages by dotted name (``pkg/__init__.py`` is ``pkg``)."""
    out = {}
    for package, folder in PACKAGES.items():
        for p in folder.rglob("*.py"):
            parts = list(p.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = p
    return out


def import_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports, at any level (functions included: a lazy import still ties two
    modules together). ``from a.b import c`` points at ``a.b.c`` when that is a module, else at ``a.b``; importing a
    module does not count as importing its parent packages."""
    mods = module_files()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base for alias in node.names
                ]
            for t in targets:
                while t and t not in mods:  # a name inside a module: the module
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_cycle_finder_finds_a_cycle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


# Cycles being taken apart (each entry removed with the change that breaks it; the list must end empty).
KNOWN_CYCLES: list[list[str]] = []


def test_no_import_cycles():
    found = import_cycles(import_graph())
    gone = [c for c in KNOWN_CYCLES if c not in found]
    assert not gone, f"remove from KNOWN_CYCLES (no longer a cycle): {gone}"
    cycles = [c for c in found if c not in KNOWN_CYCLES]
    assert not cycles, (
        "import cycles (modules that import each other, directly or through others): "
        + "; ".join(" <-> ".join(c) for c in cycles)
    )
