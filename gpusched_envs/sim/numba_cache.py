"""numba's on-disk cache, keyed on every kernel source of the package at once.

numba keys a cached function on its own file's contents, but a kernel compiled with another file's kernels inlined
(``loop_kernels`` calls ``engine_kernels`` and ``place_kernels``; the structs of ``stepper`` and ``encode_state``
call both) keeps their old code when only that other file changes: a stale cache that gives wrong results or
crashes. The locators below give every cached function of this package one stamp, a hash of all its files that
hold cached kernels, so that a change to any of them recompiles them all. Each kernel module imports this module
before its first ``@njit(cache=True)``; functions of other packages keep numba's own locators.
"""

from __future__ import annotations

import hashlib
import os

from numba.core import caching

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the gpusched_envs package
_stamp: str | None = None


def kernel_sources_stamp() -> str:
    """sha256 of the package's files that hold cached kernels (their paths and contents), computed once."""
    global _stamp
    if _stamp is None:
        h = hashlib.sha256()
        for folder, dirs, files in os.walk(_ROOT):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    data = f.read()
                if b"cache=True" in data:
                    h.update(os.path.relpath(path, _ROOT).encode())
                    h.update(data)
        _stamp = h.hexdigest()
    return _stamp


class _PackageStamp:
    """A locator of this package's functions whose source stamp covers every kernel file of the package."""

    def get_source_stamp(self):
        return kernel_sources_stamp()

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.abspath(py_file).startswith(_ROOT + os.sep):
            return None
        return super().from_function(py_func, py_file)


class PackageUserProvidedLocator(_PackageStamp, caching.UserProvidedCacheLocator):
    """``NUMBA_CACHE_DIR``, when set."""


class PackageInTreeLocator(_PackageStamp, caching.InTreeCacheLocator):
    """``__pycache__`` beside the sources, when writable."""


class PackageUserWideLocator(_PackageStamp, caching.UserWideCacheLocator):
    """numba's user-wide cache directory (a read-only install)."""


_LOCATORS = [PackageUserProvidedLocator, PackageInTreeLocator, PackageUserWideLocator]


def install() -> None:
    """Put the package's locators first (idempotent)."""
    classes = caching.CacheImpl._locator_classes
    if classes[: len(_LOCATORS)] != _LOCATORS:
        classes[:0] = _LOCATORS


install()
