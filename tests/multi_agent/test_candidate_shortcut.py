"""multi_scheduler_v1 skips a head job's candidate placements when fewer GPUs are free than it asks for: at every
such state each candidate placement finds none, and a job that may fit is not skipped."""

from __future__ import annotations

import numpy as np

from gpusched_envs.multi_agent import multi_scheduler_v1
from gpusched_envs.policies.multi_agent import BASE_CANDIDATES
from gpusched_envs.policies.placement import closest_in_rack, get_placement


def test_a_head_that_cannot_fit_has_no_candidate_placement():
    env = multi_scheduler_v1.parallel_env(num_agents=4, cluster="hetero64", num_jobs=400, load=2.0)
    obs, _ = env.reset(seed=0)
    e = env.unwrapped if hasattr(env, "unwrapped") else env
    placers = [get_placement(n) for n in BASE_CANDIDATES]
    rng = np.random.default_rng(0)
    skipped = kept = 0
    for _ in range(300):
        sim = e.sim
        for job in {int(j) for j in e._head_jobs.ravel() if j >= 0}:
            found = [p(sim, job) is not None for p in placers]
            found += [closest_in_rack(sim, job, r) is not None for r in range(sim.cluster.num_racks)]
            if e._may_fit(job):
                kept += 1
            else:
                skipped += 1
                assert not any(found), job
        acts = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
        obs, *_ = env.step(acts)
        if not env.agents:
            obs, _ = env.reset()
    assert skipped > 0 and kept > 0  # both kinds of state were met
