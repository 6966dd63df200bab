"""DAGSchedule-v1's per-episode state equals its definitions at every step: the upward ranks of the policies'
public function, each task's in-edges and parents left, the ready set and the task it offers next."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.envs.dag_schedule import DAGScheduleEnv
from gpusched_envs.policies.dag import upward_rank
from gpusched_envs.workloads.dag import DAG


@pytest.mark.parametrize(
    ("dag", "obs_mode"),
    [
        ("dag:random:n=20", "graph"),
        ("dag:random:n=35,alpha=0.5,out_degree=5", "flat"),
        ("dag:tpch:q=3", "flat"),
    ],
)
def test_construct_bookkeeping_follows_the_definitions(dag, obs_mode):
    env = DAGScheduleEnv(dag=dag, obs_mode=obs_mode)
    rng = np.random.default_rng(0)
    for episode in range(3):
        obs, _ = env.reset(seed=episode)
        d = env.dag
        n = d.num_tasks
        assert (
            env.rank.tobytes() == upward_rank(d, env.speed, env.bandwidth, gpu_types=env.gpu_types).tobytes()
        )
        for i in range(n):
            assert env.parent_edges[i].tolist() == d.in_edges(i).tolist()
        while True:
            placed = env.assignment >= 0
            left = np.array([int((~placed[d.parents(i)]).sum()) for i in range(n)], dtype=np.int64)
            got = env.remaining_parents
            assert got.dtype == np.int64 and got.tolist() == left.tolist()
            ready = {i for i in range(n) if not placed[i] and left[i] == 0}
            assert env.ready == ready
            best = max(ready, key=lambda k: (env.rank[k], -k)) if ready else -1
            assert env.current == best
            if best < 0:
                break
            obs, _, terminated, _, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
            assert terminated == (len(ready) == 1 and placed.sum() == n - 1)


def test_an_equal_rank_goes_to_the_lower_task_index():
    # three roots of the same work and no edges: the same upward rank, offered in index order
    dag = DAG(work=np.ones(3), edges=np.zeros((0, 2), dtype=np.int64), edge_bytes=np.zeros(0))
    env = DAGScheduleEnv(dag=dag, gpus=2, obs_mode="flat")
    env.reset(seed=0)
    offered = []
    while env.current >= 0:
        offered.append(env.current)
        env.step(0)
    assert offered == [0, 1, 2]
    assert env.remaining_parents.tolist() == [0, 0, 0]
