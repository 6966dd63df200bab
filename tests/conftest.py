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
