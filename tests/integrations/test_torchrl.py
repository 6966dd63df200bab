"""TorchRL: check_env_specs on every registered id (single and batched, with the ActionMask transform) and on
multi_scheduler_v1 through PettingZooWrapper; masked random rollouts take valid actions only."""

from __future__ import annotations

import pytest

pytest.importorskip("torchrl", reason="torchrl (extra [integrations]) is not installed")

import torch  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

from gpusched_envs.integrations.common import gpusched_env_ids  # noqa: E402
from gpusched_envs.integrations.torchrl import make_env, make_multi_agent_env  # noqa: E402
from gpusched_envs.wrappers import FlattenFeatures  # noqa: E402

SMALL = {"cluster": "tiny", "num_jobs": 10}


def small_kwargs(env_id: str) -> dict:
    return {} if "DAGSchedule" in env_id else dict(SMALL)


def assert_masked(td):
    """Every action taken (one-hot) is one the mask of its step allowed."""
    action, mask = td["action"].bool(), td["action_mask"].bool()
    assert action.sum(-1).eq(1).all()
    assert (action & mask).any(-1).all()


def test_every_id_is_covered():
    ids = gpusched_env_ids()
    assert ids == [
        "gpusched/JobSelect-v1",
        "gpusched/WorkerPlacement-v1",
        "gpusched/DelayTuning-v1",
        "gpusched/DAGSchedule-v1",
    ]


@pytest.mark.parametrize("env_id", gpusched_env_ids())
def test_check_env_specs_every_id(env_id):
    env = make_env(env_id, **small_kwargs(env_id))
    check_env_specs(env, seed=0)
    td = env.rollout(25, break_when_any_done=False)
    assert_masked(td)
    assert "avg_jct" in td["next"].keys()


@pytest.mark.parametrize("env_id", ["gpusched/JobSelect-v1", "gpusched/DAGSchedule-v1"])
def test_batched_env_with_action_mask(env_id):
    env = make_env(env_id, num_envs=2, **small_kwargs(env_id))
    assert env.batch_size == torch.Size([2])
    check_env_specs(env, seed=0)
    td = env.rollout(30, break_when_any_done=False)
    assert td.batch_size == torch.Size([2, 30])
    assert_masked(td)
    done = td["next", "done"].squeeze(-1)
    assert done.any()  # episodes of 10 jobs end within 30 steps, and the sub-envs reset themselves
    # the episode's avg JCT is read at its last step, NaN before
    jct = td["next", "avg_jct"]
    if env_id != "gpusched/DAGSchedule-v1":
        assert torch.isfinite(jct[done]).all() and (jct[done] > 0).all() and torch.isnan(jct[~done]).all()


def test_flattened_features_through_torchrl():
    env = make_env("gpusched/JobSelect-v1", wrappers=[FlattenFeatures], obs_mode="flat", **SMALL)
    check_env_specs(env, seed=0)
    td = env.reset()
    assert td["obs"].dtype == torch.float32 and td["obs"].shape == (246,)


def test_bad_arguments():
    with pytest.raises(ValueError, match="vectorization"):
        make_env("gpusched/JobSelect-v1", num_envs=2, vectorization="threads")
    with pytest.raises(ValueError, match="num_envs"):
        make_env("gpusched/JobSelect-v1", num_envs=-1)
    with pytest.raises(ValueError, match="group_map"):
        make_multi_agent_env(group_map="teams")


@pytest.mark.parametrize("group_map", ["one_group", "per_agent"])
def test_multi_agent_pettingzoo_wrapper(group_map):
    env = make_multi_agent_env(group_map=group_map, cluster="tiny", num_agents=2, num_jobs=10, seed=0)
    check_env_specs(env, seed=0)
    td = env.rollout(20, break_when_any_done=False)
    groups = ["agents"] if group_map == "one_group" else ["scheduler_0", "scheduler_1"]
    for g in groups:
        assert (g, "action_mask") in td.keys(True)
        assert td[g, "observation", "node_features"].dtype == torch.float32
        assert not td["next", g, "info", "invalid_action"].bool().any()  # the mask was respected
