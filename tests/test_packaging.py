"""What installing the project claims: two import roots of its own (``gpusched_envs``, ``gpusched_lab``), every
package folder of the repository listed in the build, and no clash with well-known distributions that use the
generic names of the repository's folders (Hugging Face's ``evaluate``, ``agents``, ``train``)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def test_only_the_project_s_own_import_roots_are_installed():
    roots = {name.split(".")[0] for name in SETUPTOOLS["packages"]}
    assert roots == {"gpusched_envs", "gpusched_lab"}


def test_every_package_folder_is_in_the_build():
    """A new subpackage that is not listed would be missing from a wheel (the editable install hides that)."""
    where = {"gpusched_envs": "gpusched_envs", **SETUPTOOLS["package-dir"]}
    listed = set(SETUPTOOLS["packages"])
    found = set()
    for package, folder in where.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]))
    assert found == listed, (
        f"not listed: {sorted(found - listed)}; listed but absent: {sorted(listed - found)}"
    )


def test_core_dependencies_are_the_env_library_s_only():
    """The core install brings what ``gpusched_envs`` imports; learning and plotting come with extras."""
    core = {
        dep.split(">")[0].split("<")[0].split("=")[0].strip() for dep in PYPROJECT["project"]["dependencies"]
    }
    assert core == {"numpy", "numba", "pyyaml", "typer", "rich", "gymnasium", "pettingzoo", "pillow"}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {"agents", "eval", "solver", "ray", "all", "dev"} <= set(extras)


@pytest.mark.parametrize("name", ["evaluate", "agents", "train"])
def test_a_distribution_with_a_generic_name_imports_beside_the_project(tmp_path, name):
    """A stand-in for Hugging Face's ``evaluate`` (and for ``agents`` / ``train``) on the path: both it and the
    project's packages import, each its own, whatever the path order."""
    standin = tmp_path / "site" / name
    standin.mkdir(parents=True)
    (standin / "__init__.py").write_text("WHO = 'stand-in'\n")
    code = (
        f"import {name}\n"
        f"from gpusched_lab import {name} as ours\n"
        f"import gpusched_envs\n"
        f"assert {name}.WHO == 'stand-in', {name}.__file__\n"
        f"assert not hasattr(ours, 'WHO') and ours.__name__ == 'gpusched_lab.{name}'\n"
        f"assert ours.__file__ != {name}.__file__\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,  # not the repository: its folders are not on the path
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_a_command_of_an_absent_extra_names_the_extra(monkeypatch):
    """Which distributions an extra lacks, following ``gpusched-envs[agents]`` inside ``[eval]`` (the CLI's stand-in
    command prints them with the extra to install; .ci/core_install.sh runs that for real in a core-only venv)."""
    from importlib.metadata import distribution

    from gpusched_envs import extras

    dist = distribution("gpusched-envs")
    assert extras.missing_requirements(dist, "agents") == []
    import importlib.metadata as md

    def fake_version(name):
        if name == "torch":
            raise md.PackageNotFoundError(name)
        return "1"

    monkeypatch.setattr(md, "version", fake_version)
    assert extras.missing_requirements(dist, "agents") == ["torch"]
    assert extras.missing_requirements(dist, "eval") == ["torch"]  # through gpusched-envs[agents]
    assert extras.missing_requirements(dist, "solver") == []
