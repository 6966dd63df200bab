"""One cache stamp for every kernel file of the package (``gpusched_envs.sim.numba_cache``): a change to any file
holding cached kernels invalidates them all, since kernels inline each other across files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import gpusched_envs
from gpusched_envs.sim import numba_cache
from gpusched_envs.sim.engine_kernels import pairwise_sum

ROOT = Path(gpusched_envs.__file__).parent


def test_every_kernel_module_installs_the_package_locators_first():
    """A module with cached kernels imports numba_cache before numba decorates them (else its kernels would be
    keyed on their own file only)."""
    missing = []
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        if "cache=True" in text and path.name != "numba_cache.py":
            first_kernel = text.index("cache=True")
            if "import numba_cache" not in text[:first_kernel]:
                missing.append(str(path.relative_to(ROOT)))
    assert missing == []


def test_the_stamp_covers_every_kernel_file(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("@njit(cache=True)\ndef f(): pass\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("@njit(cache=True)\ndef g(): pass\n")
    (tmp_path / "plain.py").write_text("x = 1\n")
    monkeypatch.setattr(numba_cache, "_ROOT", str(tmp_path))

    def stamp():
        monkeypatch.setattr(numba_cache, "_stamp", None)
        return numba_cache.kernel_sources_stamp()

    first = stamp()
    assert stamp() == first  # deterministic
    (tmp_path / "plain.py").write_text("x = 2\n")
    assert stamp() == first  # a file without cached kernels does not count
    (tmp_path / "sub" / "b.py").write_text("@njit(cache=True)\ndef g(): return 1\n")
    changed = stamp()
    assert changed != first  # another file's kernel changed: every kernel's stamp changes


def test_the_package_locators_serve_its_own_functions_only():
    from numba.core import caching

    assert caching.CacheImpl._locator_classes[:3] == numba_cache._LOCATORS
    own = numba_cache.PackageInTreeLocator.from_function(
        pairwise_sum.py_func, pairwise_sum.py_func.__code__.co_filename
    )
    assert own is not None and own.get_source_stamp() == numba_cache.kernel_sources_stamp()
    foreign = np.__file__
    assert numba_cache.PackageInTreeLocator.from_function(pairwise_sum.py_func, foreign) is None
    assert os.path.isabs(numba_cache._ROOT)
