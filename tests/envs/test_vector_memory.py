"""Long vector-env runs free each finished episode as it ends: stepping the vector envs (every env id, both
autoreset modes, and the multi-agent vector env) through many episodes leaves no objects in reference cycles, which
only Python's cycle collector would free (at its full collections, long after the episodes ended; between them
they hold the episodes' memory and raise the resident set size)."""

from __future__ import annotations

import collections
import gc

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.envs.vector import GpuschedVectorEnv
from gpusched_envs.multi_agent.vector import MultiSchedulerVectorEnv

N = 3
TINY = {"cluster": "tiny", "num_jobs": 6, "obs_mode": "flat"}
# the engine's Simulator keeps ``sim._shape``, a ``_Shapes`` that holds the Simulator: every finished episode's
# simulator (its workload, arrays and lists) is left in a reference cycle
CASES = [
    pytest.param("gpusched/JobSelect-v1", TINY, id="JobSelect"),
    pytest.param("gpusched/WorkerPlacement-v1", TINY, id="WorkerPlacement"),
    pytest.param("gpusched/DelayTuning-v1", {**TINY, "interval": 300.0}, id="DelayTuning"),
    pytest.param(
        "gpusched/DAGSchedule-v1", {"dag": "dag:random:n=6", "gpus": 4, "obs_mode": "flat"}, id="DAGSchedule"
    ),
]
MODES = pytest.mark.parametrize(
    "autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.name
)


def random_actions(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    flat = masks.reshape(-1, masks.shape[-1])
    actions = np.array([rng.choice(np.flatnonzero(row)) for row in flat], dtype=np.int64)
    return actions.reshape(masks.shape[:-1])


def cyclic_garbage(step, rounds: int) -> dict[str, int]:
    """The objects (count by type name) that ``rounds`` calls of ``step`` leave in reference cycles: the cycle
    collector is off meanwhile, and a full collection afterwards finds them."""
    enabled, debug = gc.isenabled(), gc.get_debug()
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            step()
        gc.set_debug(debug | gc.DEBUG_SAVEALL)
        gc.collect()
        found = collections.Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(debug)
        if enabled:
            gc.enable()
    return dict(found)


def test_cyclic_garbage_finds_a_cycle():
    class Node:
        pass

    def step():
        a, b = Node(), Node()
        a.other, b.other = b, a

    found = cyclic_garbage(step, 5)
    assert found["Node"] == 10 and gc.isenabled()
    assert cyclic_garbage(lambda: Node(), 5) == {}


@MODES
@pytest.mark.parametrize(("env_id", "kw"), CASES)
def test_finished_episodes_leave_no_reference_cycles(env_id, kw, autoreset):
    vec = GpuschedVectorEnv(env_id, N, autoreset_mode=autoreset, **kw)
    vec.reset(seed=3)
    rng = np.random.default_rng(3)
    ended = [0]

    def step():
        _, _, terms, truncs, _ = vec.step(random_actions(vec.action_masks(), rng))
        ended[0] += int((terms | truncs).sum())

    for _ in range(30):  # warm-up: some episodes end, everything imported and compiled
        step()
    ended[0] = 0
    found = cyclic_garbage(step, 60)
    vec.close()
    assert ended[0] >= 2 * N
    assert found == {}, f"{ended[0]} finished episodes left in reference cycles: {found}"


@MODES
def test_multi_agent_finished_episodes_leave_no_reference_cycles(autoreset):
    vec = MultiSchedulerVectorEnv(N, autoreset_mode=autoreset, num_agents=2, cluster="tiny", num_jobs=8)
    vec.reset(seed=3)
    rng = np.random.default_rng(3)
    first = vec.possible_agents[0]
    ended = [0]

    def step():
        _, _, terms, truncs, _ = vec.step(random_actions(vec.action_masks(), rng))
        ended[0] += int((terms[first] | truncs[first]).sum())

    for _ in range(30):
        step()
    ended[0] = 0
    found = cyclic_garbage(step, 60)
    vec.close()
    assert ended[0] >= 2 * N
    assert found == {}, f"{ended[0]} finished episodes left in reference cycles: {found}"
