"""The bundled suites are package data of ``gpusched_lab.evaluate``: they load from any working directory (the
``gpusched`` command does not have the repository on its import path)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_bundled_suites_load_from_another_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = (
        "from gpusched_lab.evaluate.scenarios import list_suites, load_suite\n"
        "print(sorted(list_suites()), load_suite('quick').name)"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "quick" in r.stdout.split("]")[0] and r.stdout.strip().endswith("quick")
