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
