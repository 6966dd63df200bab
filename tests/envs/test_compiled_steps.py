"""JobSelect's compiled stepper (``Simulator.start_stepping`` / ``step_compiled``, on by default where it applies)
against the Python engine it stands in for: the same observations, masks, rewards, ends and infos bit for bit, and
the same simulator state when the Python side takes the run back (mid-episode or at its end)."""

from __future__ import annotations

import hashlib
import pickle

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.sim import load_cluster
from gpusched_envs.sim import loop_kernels as lk
from gpusched_envs.sim.engine import QUEUED, SimulationError, Simulator
from tests.sim.test_compiled_loop import _assert_same, _jobs, _state

ENV = "gpusched/JobSelect-v1"


def _env(compiled: bool, **kwargs):
    env = gym.make(ENV, **kwargs)
    env.unwrapped.compiled_steps = compiled
    return env


def _digest(obs, reward, terminated, truncated, info, h) -> None:
    for k in sorted(obs):
        h.update(np.ascontiguousarray(obs[k]).tobytes())
    h.update(np.float64(reward).tobytes())
    h.update(repr((terminated, truncated)).encode())
    for k in sorted(info):
        v = info[k]
        h.update(repr((k, sorted(v.items()) if isinstance(v, dict) else v)).encode())


def _play(compiled: bool, steps: int, seed: int, hand_back_at=(), **kwargs):
    """Random valid actions; returns the trajectory's hash, the episodes ended and whether the stepper ran.
    ``hand_back_at``: steps after which the Python side reads the queue (the stepper hands the run back)."""
    env = _env(compiled, **kwargs)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    stepped = env.unwrapped.sim.stepper is not None
    h = hashlib.sha256()
    ends = 0
    for i in range(steps):
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        out = env.step(a)
        _digest(*out, h)
        obs = out[0]
        if i in hand_back_at:
            assert isinstance(env.unwrapped.sim.queue, dict)
            assert env.unwrapped.sim.stepper is None
        if out[2] or out[3]:
            ends += 1
            obs, info = env.reset()
    env.close()
    return h.hexdigest(), ends, stepped


CASES = [
    ("hetero64", "flat", {}),
    ("hetero64", "graph", {}),
    ("topdrl", "image", {"max_steps": 150}),
    ("tiny", "flat", {"information": "clairvoyant", "reward": "slowdown"}),
    ("hetero64", "graph", {"placement": "pack", "window": 4}),
    ("hetero64", "flat", {"interference": False, "speed_model": "duration"}),
    ("hetero64", "flat", {"work_conserving": True, "reward": "throughput"}),
    ("hetero64", "flat", {"decision_interval": 600.0}),
    ("openb", "flat", {"workload": "openb:jobs=200,load=4.0,gpus=64", "placement": "pack"}),
    ("philly-vc", "graph", {"workload": "philly:start=2017-10-01,jobs=200"}),
]


@pytest.mark.parametrize("cluster,mode,kwargs", CASES)
def test_compiled_steps_equal_the_python_engine(cluster, mode, kwargs):
    kw = {"cluster": cluster, "obs_mode": mode, **kwargs}
    python = _play(False, 900, 1, **kw)
    compiled = _play(True, 900, 1, **kw)
    assert compiled[2] and not python[2]  # the stepper ran, and only where asked
    assert python[1] >= 1  # an episode ended on the way (its metrics are in the hash)
    assert compiled[:2] == python[:2]


def test_a_read_of_the_queue_hands_the_run_back_mid_episode():
    kw = {"cluster": "hetero64", "obs_mode": "flat"}
    assert _play(True, 600, 2, hand_back_at=(5, 250), **kw)[:2] == _play(False, 600, 2, **kw)[:2]


@pytest.mark.parametrize("ties", [False, True])
def test_the_simulator_state_handed_back_is_the_python_engines(ties, monkeypatch):
    """Per-job arrays, scalars, queue, running jobs, job dicts and pending events, after 120 steps of the same
    actions; the tie-heavy workload's batches of equal completion times are ordered by the engine on the way."""
    c = load_cluster("hetero64")
    w = _jobs(c, np.random.default_rng(4), 160, fractional=False, ties=ties, spacing=5.0)
    orders = []
    real = Simulator._order_ties
    monkeypatch.setattr(Simulator, "_order_ties", staticmethod(lambda *a: (orders.append(1), real(*a))[1]))
    states = []
    for compiled in (True, False):
        env = _env(compiled, cluster=c, workload=w, obs_mode="flat")
        obs, _ = env.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(120):
            obs, *_ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        sim = env.unwrapped.sim
        assert (sim.stepper is not None) == compiled
        sim.stop_stepping()
        states.append({k: v for k, v in _state(sim).items() if k != "changed"})
    assert bool(orders) == ties
    _assert_same(*states)


def test_a_simulator_pickled_mid_episode_carries_its_state():
    env = _env(True, cluster="hetero64", obs_mode="flat")
    obs, _ = env.reset(seed=0)
    for _ in range(40):
        obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    sim = env.unwrapped.sim
    copy = pickle.loads(pickle.dumps(sim))
    assert copy.stepper is None and sim.stepper is None  # pickling handed the run back first
    assert list(copy.queue) == list(sim.queue) and list(copy.running) == list(sim.running)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"placement": "consolidate"},
        {"placement": "first-fit"},
        {"hint": "fifo"},
        {"rules": ["fifo", "las-nopreempt"]},
    ],
)
def test_the_python_engine_runs_what_the_stepper_does_not_cover(kwargs):
    env = gym.make(ENV, cluster="hetero64", obs_mode="flat", **kwargs)
    env.reset(seed=0)
    assert env.unwrapped.sim.stepper is None


def test_a_job_that_cannot_start_is_refused_with_the_engines_error():
    env = _env(True, cluster="tiny", obs_mode="flat")
    env.reset(seed=0)
    sim = env.unwrapped.sim
    other = next(j for j in range(sim.num_jobs) if sim.status[j] != QUEUED)  # arrives later, runs or is done
    with pytest.raises(SimulationError, match=f"job {other} cannot be placed now"):
        sim.step_compiled(other)
    assert sim.stepper is None  # the state went back to the Python engine


@settings(max_examples=16, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    window=st.integers(1, 12),
    load=st.sampled_from([0.5, 1.0, 2.0]),
    cluster=st.sampled_from(["tiny", "topdrl", "hetero64", "openb", "philly-vc"]),
    placement=st.sampled_from(["closest", "pack"]),
)
def test_compiled_steps_equal_the_python_engine_on_random_episodes(seed, window, load, cluster, placement):
    """Random sizes, loads and placements; GPU shares (openb's pods) and VC pools (philly-vc) included."""
    kw = {"cluster": cluster, "obs_mode": "flat", "window": window, "placement": placement}
    if cluster == "openb":
        kw["workload"] = f"openb:jobs=60,load={2 * load},gpus=64"
    elif cluster == "philly-vc":
        kw["workload"] = "philly:start=2017-10-01,jobs=60"
    else:
        kw.update(num_jobs=40, load=load)
    assert _play(True, 150, seed, **kw)[:2] == _play(False, 150, seed, **kw)[:2]


def test_the_stepper_constants_are_distinct():
    """The actions and codes of the kernel do not collide (a job row is >= 0)."""
    assert len({lk.ACT_WAIT, lk.ACT_SETTLE, lk.ACT_RESUME}) == 3 and max(lk.ACT_WAIT, lk.ACT_SETTLE) < 0
    codes = (lk.STEP_DECIDE, lk.STEP_DRAINED, lk.STEP_TIES, lk.STEP_DEADLOCK, lk.STEP_UNPLACED)
    assert len(set(codes)) == len(codes)


PREEMPTIVE = [
    ("topdrl", "graph", {"preemption": True, "num_jobs": 24}),
    ("hetero64", "flat", {"preemption": True, "decision_interval": 900.0, "num_jobs": 24}),
    (
        "tiny",
        "flat",
        {"preemption": True, "decision_interval": 900.0, "num_jobs": 30, "load": 1.0, "window": 8},
    ),
    (
        "topdrl",
        "flat",
        {
            "preemption": True,
            "decision_interval": 600.0,
            "min_run": 900.0,
            "preempt_window": 4,
            "num_jobs": 24,
        },
    ),
    (
        "hetero64",
        "flat",
        {"preemption": True, "information": "clairvoyant", "placement": "pack", "num_jobs": 24},
    ),
    (
        "topdrl",
        "graph",
        {
            "preemption": True,
            "decision_interval": 900.0,
            "min_run": 900.0,
            "history_features": True,
            "num_jobs": 24,
        },
    ),
    (
        "philly-vc",
        "flat",
        {"preemption": True, "history_features": True, "workload": "philly:start=2017-10-01,jobs=12"},
    ),
    ("openb", "flat", {"preemption": True, "workload": "openb:jobs=12,load=4.0,gpus=64"}),
    ("philly-vc", "flat", {"preemption": True, "workload": "philly:start=2017-10-01,jobs=12"}),
]


@pytest.mark.parametrize("cluster,mode,kwargs", PREEMPTIVE)
def test_preemptive_compiled_steps_equal_the_python_engine(cluster, mode, kwargs):
    """Preemption (restarts after the delay, the jobs started or preempted at an instant kept out of the windows),
    scheduling rounds (a wait's timer), min_run and the runtime-history features; whole episodes, their metrics
    included."""
    kw = {"cluster": cluster, "obs_mode": mode, **kwargs}
    python = _play(False, 3000, 3, **kw)
    compiled = _play(True, 3000, 3, **kw)
    assert compiled[2] and not python[2]
    assert python[1] >= 1
    assert compiled[:2] == python[:2]


def test_a_preemptive_run_handed_back_mid_instant_keeps_its_marks():
    """A read of the queue right after a preemption: the Python engine goes on with the jobs started and preempted
    at that instant as the stepper marked them."""
    kw = {
        "cluster": "topdrl",
        "obs_mode": "flat",
        "preemption": True,
        "decision_interval": 900.0,
        "num_jobs": 24,
    }
    marks = tuple(range(3, 700, 37))
    python = _play(False, 700, 5, **kw)
    assert python[1] >= 1
    assert _play(True, 700, 5, hand_back_at=marks, **kw)[:2] == python[:2]
