import gzip
from pathlib import Path

import pytest

from gpusched_envs.workloads import load_philly


@pytest.fixture(scope="session")
def philly():
    return load_philly()


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> path; a name ending in .gz is gzip-compressed."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        data = text.encode()
        if name.endswith(".gz"):
            data = gzip.compress(data, mtime=0)
        path.write_bytes(data)
        return path

    return _write
