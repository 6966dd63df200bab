"""WorkerPlacement-v1 on a hand-built instance (exact masks, placement features, interference and rewards) and its
meta-RL task interface."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.envs.encoding import GPU_FEATURES, IMAGE_CHANNELS, KINDS
from gpusched_envs.envs.worker_placement import PlacementTask, WorkerPlacementEnv
from tests.toy import make_workload, toy_cluster

# toy cluster (see tests/toy.py): 4 servers x 4 GPUs, co-location slowdown 1.5 for every pair of jobs
# A: t=0, 100 s, 2 GPUs (ideal: one server, 0.1 + 1e9/100e9 = 0.11 s/iteration)   B: t=0, 10 s, 1 GPU
ROWS = [(0, 100, 2), (0, 10, 1)]


def toy_env(**kw):
    return WorkerPlacementEnv(toy_cluster(), make_workload(ROWS), time_scale=1.0, window=2, **kw)


def test_workers_one_server_at_a_time_with_interference():
    env = toy_env(obs_mode="graph")
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"].tolist() == [1, 1, 1, 1, 1]  # 4 servers + defer (B is another candidate)
    assert obs["context"].tolist() == [1.0, 0.0, 2 / 16, 0.0]
    col = KINDS + 2 + GPU_FEATURES.index("in_placement")

    obs, reward, terminated, *_ = env.step(2)  # first worker: server 2's first GPU (8)
    assert (reward, terminated) == (0.0, False)
    assert obs["node_features"][:16, col].tolist() == [0] * 8 + [1] + [0] * 7
    assert obs["context"].tolist() == [0.5, 0.5, 2 / 16, 0.0]

    obs, reward, *_ = env.step(3)  # second worker on server 3: A starts on GPUs 8, 12 (NIC: 0.2 s/iteration)
    assert env.sim.job_gpus[0].tolist() == [8, 12]
    assert reward == 0.0 and env.sim.now == 0.0
    assert obs["node_features"][:16, col].sum() == 0  # B is the head now, nothing placed yet
    assert obs["context"].tolist() == [1.0, 0.0, 1 / 16, 0.0]

    obs, reward, terminated, _, info = env.step(2)  # B next to A on server 2: both slowed by 1.5 until B ends
    b_end = 10 * 1.5
    a_work = 100 / 0.11
    a_end = b_end + (a_work - b_end / (0.2 * 1.5)) * 0.2
    assert terminated
    assert env.sim.finish_time.tolist() == pytest.approx([a_end, b_end])
    assert reward == pytest.approx(-(a_end + b_end))
    assert info["metrics"]["avg_jct"] == pytest.approx((a_end + b_end) / 2)


def test_defer_moves_to_the_next_candidate_and_masks():
    env = toy_env(obs_mode="image")
    obs, _ = env.reset(seed=0)
    obs, reward, *_ = env.step(0)
    channel = obs["cluster_image"][IMAGE_CHANNELS.index("in_placement")]
    assert channel[0].tolist() == [1, 0, 0, 0] and channel[1:].sum() == 0
    obs, reward, *_ = env.step(4)  # defer A: its partial placement is dropped, B becomes the head
    assert reward == 0.0 and env._head == 1 and obs["cluster_image"][4].sum() == 0
    assert obs["context"][3] == pytest.approx(np.log1p(1))
    # B is the last candidate, nothing runs, nothing is to arrive: deferring it would deadlock
    assert obs["action_mask"].tolist() == [1, 1, 1, 1, 0]
    obs, reward, *_ = env.step(
        1
    )  # B starts alone on server 1; A, deferred, waits for the next decision: B's end
    assert env.sim.finish_time[1] == 10.0 and env.sim.now == 10.0
    assert reward == pytest.approx(-(10 + 10)) and env._head == 0 and obs["context"][3] == 0.0


def test_sample_and_set_task_keep_spaces():
    env = WorkerPlacementEnv("tiny", task_clusters=("tiny", "topdrl"), num_jobs=10, obs_mode="flat")
    env.reset(seed=0)
    space = env.observation_space
    tasks = env.sample_tasks(4)
    assert len(tasks) == 4 and all(isinstance(t, PlacementTask) for t in tasks)
    assert env.action_space.n == 9  # topdrl has 8 servers
    env.set_task(PlacementTask(cluster="topdrl", load=1.1, num_jobs=10, interference=1.3))
    obs, _ = env.reset(seed=1)
    assert space.contains(obs) and env.cluster.num_servers == 8
    assert env.cluster.catalog.colocation_slowdown.min() >= 1.3 * 1.0
    env.set_task(PlacementTask(cluster="tiny", num_jobs=10))
    obs, _ = env.reset(seed=1)
    assert obs["action_mask"][4:8].sum() == 0  # tiny has 4 servers: padded servers are masked
    with pytest.raises(ValueError, match="larger"):
        env.set_task(PlacementTask(cluster="hetero64"))


def test_a_tasks_env_kwargs_make_the_env_set_task_makes():
    task = PlacementTask(cluster="topdrl", load=1.1, num_jobs=12, interference=1.4, arrival="diurnal")
    episodes = []
    for env in (WorkerPlacementEnv(**task.env_kwargs(32)), WorkerPlacementEnv("topdrl", num_jobs=5)):
        if env.task is None:
            env.set_task(task)
        env.reset(seed=3)
        done, steps = False, 0
        while not done:
            _, _, done, _, info = env.step(env.heuristic_action("consolidate"))
            steps += 1
        episodes.append((steps, env.cluster.catalog.colocation_slowdown.tolist(), info["metrics"]))
    assert episodes[0] == episodes[1]


# ---------------------------------------------------------------------------------- heuristic actions (the expert)
@pytest.mark.parametrize("cluster", ["topdrl", "hetero64"])
@pytest.mark.parametrize("rule", ["consolidate", "closest", "pack", "first-fit", "spread", "random"])
def test_heuristic_action_replays_fifo_with_backfill_exactly(cluster, rule):
    """Played through the env's actions, each placement rule gives the simulator's FIFO-with-backfill run of that
    rule to the bit (the env's head rule is FIFO with backfill; ``consolidate`` defers where it would wait)."""
    from gpusched_lab.agents.common import fresh_simulator

    from gpusched_envs.policies.schedulers import FIFO

    env = WorkerPlacementEnv(cluster, num_jobs=40, load=1.0, obs_mode="flat")
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        steps = 0
        while True:
            a = env.heuristic_action(rule)
            assert obs["action_mask"][a]
            obs, _, terminated, truncated, info = env.step(a)
            steps += 1
            if terminated or truncated:
                break
        expected = fresh_simulator(env, seed).run(FIFO(rule, backfill=True))
        assert info["metrics"]["avg_jct"] == expected["avg_jct"]
        assert steps >= 40  # at least one step per job


def test_heuristic_action_defers_where_consolidate_waits():
    # consolidate never spreads a job that fits one server: with one free GPU left on each of the 4 servers, the
    # 4-GPU job is deferred (jobs are running, so waiting is allowed); closest spreads it, one worker per server
    env = WorkerPlacementEnv(toy_cluster(), make_workload([(0, 100, 1)] * 12 + [(1, 10, 4)]), window=2)
    env.reset(seed=0)
    # place the twelve 1-GPU jobs three per server: every server keeps exactly one free GPU
    for _ in range(12):
        server = int(np.argmax(env._server_mask() & (env.sim.server_free == env.sim.server_free.max())))
        env.step(server)
    assert env.head_job == 12 and env.sim.server_free.tolist() == [1, 1, 1, 1]
    assert env.action_masks()[env.defer_action]
    assert env.heuristic_action("consolidate") == env.defer_action
    assert env.heuristic_action("closest") == 0  # then servers 1, 2, 3 (lowest index on ties)
    env.step(0)
    assert env.heuristic_action("closest") == 1


# ---------------------------------------------------------------------------------- speed changes keep trajectories
class _NoteEveryStep(WorkerPlacementEnv):
    """The reference of the iteration-time notes before the speed-up: note at every step, concatenate always."""

    def _collect_iteration_times(self) -> None:
        self._noted_epoch = -1  # never skip: note at every step
        super()._collect_iteration_times()

    def iteration_times(self):
        return tuple(np.concatenate([t]) for t in super().iteration_times())


@pytest.mark.parametrize(
    "cluster,kw", [("topdrl", {}), ("hetero64", {"information": "clairvoyant"}), ("philly", {"load": 1.2})]
)
def test_same_seed_trajectories_match_the_reference(cluster, kw):
    fast = WorkerPlacementEnv(cluster, num_jobs=30, obs_mode="flat", **kw)
    ref = _NoteEveryStep(cluster, num_jobs=30, obs_mode="flat", **kw)
    rng = np.random.default_rng(0)
    (o1, _), (o2, _) = fast.reset(seed=5), ref.reset(seed=5)
    for _ in range(400):
        assert all(np.array_equal(o1[k], o2[k]) for k in o1)
        for a, b in zip(fast.iteration_times(), ref.iteration_times(), strict=True):
            assert np.array_equal(a, b) and a.dtype == b.dtype
        valid = np.flatnonzero(o1["action_mask"])
        action = int(rng.choice(valid)) if rng.random() > 0.1 else int(rng.integers(len(o1["action_mask"])))
        o1, r1, t1, u1, _ = fast.step(action)
        o2, r2, t2, u2, _ = ref.step(action)
        assert (r1, t1, u1) == (r2, t2, u2)
        if t1 or u1:
            (o1, _), (o2, _) = fast.reset(), ref.reset()
