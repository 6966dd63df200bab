"""The simulator's and the classical policies' default parameters, read once from ``data/sim_defaults.yaml``, where
each value stands with its source."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml


@lru_cache(maxsize=1)
def sim_defaults() -> dict:
    """The parsed ``data/sim_defaults.yaml`` (entries are ``{value: ..., source: ...}``)."""
    return yaml.safe_load(resources.files("gpusched_envs").joinpath("data/sim_defaults.yaml").read_text())
