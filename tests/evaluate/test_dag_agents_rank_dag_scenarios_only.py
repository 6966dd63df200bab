"""The DAG agents in the leaderboard: ``dag-*`` specs run on the standard suite's DAGSchedule scenarios,
the cluster heuristics skip them, and the DAG agents skip cluster scenarios."""

from __future__ import annotations

import pytest
from gpusched_lab.evaluate.agents import AgentSpecError, expand_agent_specs, resolve_agent
from gpusched_lab.evaluate.scenarios import load_suite

from gpusched_envs.policies.dag import heft_schedule


def test_dag_agents_rank_dag_scenarios_only():
    suite = load_suite("standard")
    dag_sc = next(s for s in suite.scenarios if s.name == "dag-tpch-q9")
    cluster_sc = next(s for s in suite.scenarios if s.env_id != "gpusched/DAGSchedule-v1")
    assert "dag-worl-rtgs" in expand_agent_specs("all") and "dag-heft" in expand_agent_specs("heuristics")
    heft_agent = resolve_agent("dag-heft")
    assert heft_agent.applies_to(dag_sc) is None and heft_agent.applies_to(cluster_sc) is not None
    assert resolve_agent("fifo").applies_to(dag_sc) is not None
    metrics = heft_agent.run_episode(dag_sc, 0)
    env = dag_sc.make_env()
    env.reset(seed=0)
    u = env.unwrapped
    assert metrics["makespan"] == pytest.approx(heft_schedule(u.dag, u.speed, u.bandwidth).makespan)
    assert 0 < metrics["lower_bound_makespan"] <= metrics["makespan"]
    rnd = resolve_agent("dag-random").run_episode(dag_sc, 0)
    assert rnd["makespan"] >= metrics["lower_bound_makespan"]
    with pytest.raises(AgentSpecError, match="unknown DAG agent"):
        resolve_agent("dag-nope")
