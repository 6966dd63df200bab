"""Fixtures shared by every test folder."""

from __future__ import annotations

import pytest

from tests import toy


@pytest.fixture
def toy_catalog():
    return toy.toy_catalog()


@pytest.fixture
def toy_cluster():
    return toy.toy_cluster()


@pytest.fixture(autouse=True, scope="session")
def _resume_key(tmp_path_factory):
    """Resume-file signatures use a key of the test session, not the user's (~/.config/gpusched/resume.key)."""
    import os

    path = tmp_path_factory.mktemp("resume_key") / "resume.key"
    old = os.environ.get("GPUSCHED_RESUME_KEY")
    os.environ["GPUSCHED_RESUME_KEY"] = str(path)
    yield path
    if old is None:
        os.environ.pop("GPUSCHED_RESUME_KEY", None)
    else:
        os.environ["GPUSCHED_RESUME_KEY"] = old


class _NumbaCompileClock:
    """Wall time this test process spends compiling numba kernels (numba's ``numba:compile`` events: cache misses
    only, loads from numba's on-disk cache are not counted; a callee compiled inside its caller's compile counts
    once), for the summary line at the end of the run."""

    def __init__(self):
        import time

        self.clock, self.depth, self.started, self.total, self.count = time.perf_counter, 0, 0.0, 0.0, 0
        self.name, self.by_kernel = "", {}

    def on_start(self, event) -> None:
        if self.depth == 0:
            self.started = self.clock()
            func = getattr((event.data or {}).get("dispatcher"), "py_func", None)
            self.name = f"{func.__module__}.{func.__qualname__}" if func is not None else "?"
        self.depth += 1

    def on_end(self, event) -> None:
        self.depth -= 1
        if self.depth == 0:
            took = self.clock() - self.started
            self.total += took
            self.count += 1
            self.by_kernel[self.name] = self.by_kernel.get(self.name, 0.0) + took

    def slowest(self, k: int = 5) -> str:
        """The ``k`` kernels that took longest to compile (their callees' compiles included), with seconds."""
        top = sorted(self.by_kernel.items(), key=lambda item: -item[1])[:k]
        return ", ".join(f"{name.rsplit('.', 2)[-2]}.{name.rsplit('.', 1)[-1]} {t:.1f}" for name, t in top)


_NUMBA_CLOCK = _NumbaCompileClock()


def pytest_configure(config):
    from numba.core import event

    class _Listener(event.Listener):
        def on_start(self, ev):
            _NUMBA_CLOCK.on_start(ev)

        def on_end(self, ev):
            _NUMBA_CLOCK.on_end(ev)

    event.register("numba:compile", _Listener())


def pytest_terminal_summary(terminalreporter):
    c = _NUMBA_CLOCK
    terminalreporter.write_line(
        f"numba: {c.total:.1f} s compiling {c.count} kernels in the test process (cache misses; on a fresh clone "
        "the cache is cold, and a kernel first used in a test's subprocess compiles there, uncounted)"
    )
    if c.by_kernel:
        terminalreporter.write_line(f"numba: slowest compiles (s, callees included): {c.slowest()}")
