"""Cached cells are keyed by the code that computed them: an edit to any module of the learning agents (sub-packages
included) or of the HMARL package changes the key, a compiled-bytecode file does not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from gpusched_lab.evaluate import agents as eval_agents
from gpusched_lab.evaluate.marl import HMARLEvalAgent
from gpusched_lab.evaluate.scenarios import python_sources_digest


def _tree(root: Path) -> Path:
    for rel, text in {
        "__init__.py": "",
        "common.py": "A = 1\n",
        "nets/__init__.py": "",
        "nets/gnn.py": "B = 2\n",
        "methods/hmarl/policy.py": "C = 3\n",
        "README.md": "not code\n",
    }.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_digest_covers_nested_modules_and_ignores_bytecode_and_other_files(tmp_path):
    root = _tree(tmp_path / "agents")
    first = python_sources_digest(root)
    assert python_sources_digest(root) == first and len(first) == 16
    (root / "nets" / "__pycache__").mkdir()
    (root / "nets" / "__pycache__" / "gnn.cpython-312.pyc").write_bytes(b"\0\1")
    (root / "README.md").write_text("changed\n")
    assert python_sources_digest(root) == first
    (root / "methods" / "hmarl" / "policy.py").write_text("C = 4\n")
    second = python_sources_digest(root)
    assert second != first
    # a file moved to another folder is other code, even with the same bytes
    shutil.move(root / "nets" / "gnn.py", root / "gnn.py")
    assert python_sources_digest(root) not in (first, second)


def test_agents_code_digest_includes_the_sub_packages(tmp_path, monkeypatch):
    _tree(tmp_path / "agents")
    monkeypatch.setattr(eval_agents, "repo_root", lambda: tmp_path)
    eval_agents._agents_code_digest.cache_clear()
    try:
        before = eval_agents._agents_code_digest()
        (tmp_path / "agents" / "nets" / "gnn.py").write_text("B = 3\n")
        eval_agents._agents_code_digest.cache_clear()
        assert eval_agents._agents_code_digest() != before
    finally:
        eval_agents._agents_code_digest.cache_clear()


def test_hmarl_checkpoint_key_hashes_every_module_of_the_package(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from gpusched_lab.agents.methods import hmarl

    package = Path(hmarl.__file__).parent
    copy = tmp_path / "hmarl"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert {p.name for p in copy.glob("*.py")} >= {"agent.py", "interference.py", "mappo.py", "policy.py"}
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "meta.json").write_text("{}")
    monkeypatch.setattr(hmarl, "__file__", str(copy / "__init__.py"))
    agent = HMARLEvalAgent(str(ckpt))
    before = agent.identity()
    assert before["code"] == python_sources_digest(package)
    (copy / "mappo.py").write_text((copy / "mappo.py").read_text() + "\n# edited\n")
    after = agent.identity()
    assert after["code"] != before["code"] and after["files"] == before["files"]
