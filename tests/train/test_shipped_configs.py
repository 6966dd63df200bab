"""Every training config of ``train/configs`` for the single-agent commands (``ppo_*``, ``ddqn_*``, ``topdrl*``,
``smoke_*``) resolves and validates as ``gpusched train`` would build it, and every trace window it names (the
curriculum's and the warm start's choices, the held-in evaluation windows) loads with the number of jobs it asks
for, so a long run cannot stop at a stage boundary or an evaluation on a bad window."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gpusched_lab.train.cli import build_config

CONFIGS = Path(__file__).resolve().parents[2] / "train" / "configs"
SINGLE = sorted(
    p
    for p in CONFIGS.glob("*.yaml")
    if re.match(r"(ppo|ddqn|topdrl|smoke)", p.name) and "hmarl" not in p.name
)


def _algorithm(path: Path) -> str:
    if path.name.startswith("smoke_"):
        return path.stem.split("_")[1]
    return path.stem.split("_")[0]


def _choices(cfg) -> list[dict]:
    out = list(cfg.eval_choices) + list((cfg.bc or {}).get("choices") or [])
    for stage in cfg.curriculum or []:
        out.extend(stage.get("choices") or [])
        if stage.get("env_kwargs"):
            out.append(stage["env_kwargs"])
    return out


def test_the_single_agent_configs_are_found():
    names = {p.stem for p in SINGLE}
    assert {"ppo_jobselect_gnn_nc_scale", "ppo_jobselect_gnn_nc_wide", "topdrl", "smoke_ppo"} <= names


@pytest.mark.parametrize("path", SINGLE, ids=lambda p: p.stem)
def test_config_validates_and_names_loadable_windows(path):
    from gpusched_envs.workloads import load_workload

    cfg = build_config(_algorithm(path), None, None, None, None, None, None, str(path), [], False)
    for choice in _choices(cfg):
        spec = {**cfg.env_kwargs, **choice}.get("workload")
        if not isinstance(spec, str) or not spec.startswith("philly:"):
            continue
        wl = load_workload(spec, seed=0)
        asked = re.search(r"jobs=(\d+)", spec)
        if asked:
            assert len(wl.duration) == int(asked.group(1)), spec


@pytest.mark.parametrize("name", ["ppo_jobselect_gnn_nc_wide", "ppo_jobselect_gnn_clairvoyant_wide"])
def test_the_wide_config_holds_its_validation_windows_out_of_training(name):
    """No job of a held-in evaluation window of a wide config is in a training window (the curriculum's or the
    warm start's), and every window starts before the held-out period (2017-11-01)."""
    import numpy as np

    from gpusched_envs.workloads import load_workload
    from gpusched_envs.workloads.select import resolve_time

    path = CONFIGS / f"{name}.yaml"
    cfg = build_config("ppo", None, None, None, None, None, None, str(path), [], False)
    trace = load_workload("philly", seed=0)
    submit = np.sort(np.asarray(trace.submit_time))
    november = resolve_time(trace, "2017-11-01")

    def jobs(spec: str) -> set[int]:
        start = float(re.search(r"start=([0-9.]+)", spec).group(1))
        n = int(re.search(r"jobs=(\d+)", spec).group(1))
        first = int(np.searchsorted(submit, start))
        assert submit[first + n - 1] < november, spec
        return set(range(first, first + n))

    held_in = set().union(*(jobs(c["workload"]) for c in cfg.eval_choices))
    training = [c for c in _choices(cfg) if c not in cfg.eval_choices and "workload" in c]
    assert len(training) > 40
    for c in training:
        assert not jobs(c["workload"]) & held_in, c


def test_the_clairvoyant_wide_config_differs_from_the_non_clairvoyant_one_only_in_information_and_teacher():
    """The two wide configs are a controlled pair: same windows, curriculum, network and hyperparameters; the
    clairvoyant one shows durations and imitates SRTF instead of LAS."""
    nc, cl = (
        build_config("ppo", None, None, None, None, None, None, str(CONFIGS / f"{n}.yaml"), [], False)
        for n in ("ppo_jobselect_gnn_nc_wide", "ppo_jobselect_gnn_clairvoyant_wide")
    )
    assert nc.env_kwargs["information"] == "non-clairvoyant" and cl.env_kwargs["information"] == "clairvoyant"
    assert {k: v for k, v in nc.env_kwargs.items() if k != "information"} == {
        k: v for k, v in cl.env_kwargs.items() if k != "information"
    }
    assert (nc.bc["policy"], cl.bc["policy"]) == ("las", "srtf")
    assert {k: v for k, v in nc.bc.items() if k != "policy"} == {
        k: v for k, v in cl.bc.items() if k != "policy"
    }
    for field in (
        "curriculum",
        "eval_choices",
        "args",
        "steps",
        "num_envs",
        "eval_every",
        "checkpoint_every",
    ):
        assert getattr(nc, field) == getattr(cl, field), field
