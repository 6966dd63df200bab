"""JobSelect-v1 on a hand-built instance: exact masks, observations (both information settings) and rewards; FIFO,
and with preemption Tiresias and SRTF, through the env equal the simulator's own run of the same heuristic."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from gpusched_envs.envs.adapters import HeuristicAgent
from gpusched_envs.envs.base import InvalidActionError
from gpusched_envs.envs.encoding import GPU_FEATURES, JOB_FEATURES, KINDS
from gpusched_envs.envs.job_select import JobSelectEnv
from gpusched_envs.policies import make_policy
from gpusched_envs.sim import SimConfig, Simulator
from tests.toy import make_workload, toy_cluster

# toy cluster: 2 racks x 2 servers x 4 "fast" GPUs (0.1 s/iteration, 1 GB gradients), bus 100 GB/s in a server,
# NIC 10 GB/s, rack uplinks 5 GB/s, no latency; model "additive": iteration = compute + all-reduce.
# A: t=0, 100 s, 2 GPUs   B: t=0, 200 s, 4 GPUs   C: t=10, 50 s, 12 GPUs
ROWS = [(0, 100, 2), (0, 200, 4), (10, 50, 12)]
# C cannot be consolidated: ideal = NIC 10 GB/s; closest spreads it over both racks: the 5 GB/s uplink
C_IDEAL = 0.1 + 2 * 11 / 12 * 1e9 / 10e9
C_ACTUAL = 0.1 + 2 * 11 / 12 * 1e9 / 5e9
# its 50 traced seconds were measured on the typical placement for 12 GPUs (three servers over both
# racks, i.e. C_ACTUAL), so it runs them exactly; C_IDEAL still normalises its slowdown
C_RUNTIME = 50 * C_ACTUAL / C_ACTUAL


def toy_env(**kw):
    kw = {"window": 2, "time_scale": 1.0, "interference": False, "reward": "jct", **kw}
    return JobSelectEnv(toy_cluster(), make_workload(ROWS), **kw)


def gpu_col(name):
    return KINDS + 2 + GPU_FEATURES.index(name)  # toy catalogue: 2 GPU types


def test_exact_masks_observations_and_jct_rewards():
    env = toy_env(information="clairvoyant")
    obs, _ = env.reset(seed=0)
    assert env.sim.now == 0.0
    assert obs["action_mask"].tolist() == [1, 1, 1]  # A, B fit; waiting is fine (C still to arrive)
    jf = obs["job_features"]
    sens_a = (0.1 + 1e9 / 5e9) / (0.1 + 1e9 / 100e9)  # 2 GPUs: one server (bus) vs two racks (uplink)
    assert jf[0].tolist() == pytest.approx(
        [2 / 16, 1, 0, math.log1p(100), math.log1p(100), math.log(sens_a), 0, 1]
    )
    # B's sensitivity: 4 GPUs on one server (bus) vs dealt over both racks (5 GB/s uplink)
    sens_b = (0.1 + 1.5 * 1e9 / 5e9) / (0.1 + 1.5 * 1e9 / 100e9)
    assert jf[1, JOB_FEATURES.index("sensitivity")] == pytest.approx(math.log(sens_b), rel=1e-6)
    assert obs["job_mask"].tolist() == [1, 1]
    assert obs["node_features"][:16, gpu_col("busy")].sum() == 0

    obs, reward, terminated, truncated, _ = env.step(0)  # A -> best-fit server 0, GPUs 0, 1
    assert (reward, terminated, truncated, env.sim.now) == (0.0, False, False, 0.0)
    assert env.sim.job_gpus[0].tolist() == [0, 1]
    assert obs["action_mask"].tolist() == [1, 0, 1]  # window is now [B]
    busy = obs["node_features"][:16, gpu_col("busy")]
    assert busy.tolist() == [1, 1] + [0] * 14
    assert obs["node_features"][:2, gpu_col("remaining_time")] == pytest.approx([math.log1p(100)] * 2)

    obs, reward, terminated, _, _ = env.step(
        0
    )  # B -> server 1; C arrives at 10 but fits only when A ends at 100
    assert env.sim.job_gpus[1].tolist() == [4, 5, 6, 7]
    assert env.sim.now == 100.0
    assert reward == pytest.approx(-(2 * 10 + 3 * 90))
    assert obs["action_mask"].tolist() == [1, 0, 1]
    assert obs["job_features"][0, JOB_FEATURES.index("age")] == pytest.approx(math.log1p(90))

    obs, reward, terminated, _, info = env.step(0)  # C spreads over both racks and runs slower than ideal
    assert terminated
    assert env.sim.finish_time[2] == pytest.approx(100 + C_RUNTIME)
    assert reward == pytest.approx(-(2 * C_RUNTIME + (200 - 100 - C_RUNTIME)))
    assert info["metrics"]["avg_jct"] == pytest.approx((100 + 200 + 90 + C_RUNTIME) / 3)
    assert obs["action_mask"].tolist() == [0, 0, 1]


def test_return_is_minus_total_jct_and_throughput_return_closed_form():
    for reward_kind in ("jct", "throughput", "slowdown"):
        env = toy_env(reward=reward_kind)
        env.reset(seed=0)
        total = sum(env.step(0)[1] for _ in range(3))
        m = env.sim.metrics()
        if reward_kind == "jct":
            assert total == pytest.approx(-3 * m["avg_jct"])
        elif reward_kind == "slowdown":
            assert total == pytest.approx(-3 * m["avg_slowdown"])
        else:  # (ideal GPU-work − GPUs × elapsed) / GPUs
            # C's ideal runtime is its 50 traced seconds at ideal speed (traced on C_ACTUAL)
            assert total == pytest.approx((100 * 2 + 200 * 4 + 50 * C_IDEAL / C_ACTUAL * 12 - 16 * 200) / 16)


def test_wait_then_invalid_and_deadlock_guard():
    env = toy_env()
    env.reset(seed=0)
    obs, reward, *_ = env.step(2)  # wait: next decision is C's arrival at t=10? C does not fit -> skipped
    # nothing runs and nothing changes until... the agent waited with A, B startable: next event is C's arrival
    assert env.sim.now == 10.0 and reward == pytest.approx(-20.0)
    assert obs["action_mask"].tolist() == [
        1,
        1,
        0,
    ]  # nothing runs and nothing is to arrive: waiting would deadlock
    obs2, reward, *_ = env.step(2)
    assert reward == -1.0 and np.array_equal(obs2["action_mask"], obs["action_mask"])


@pytest.mark.parametrize("placement", ["closest", "consolidate"])
def test_fifo_through_the_env_equals_simulator_fifo(placement):
    env = gym.make(
        "gpusched/JobSelect-v1",
        cluster="topdrl",
        workload="synthetic:jobs=80,load=1.2,gpus=32,max_gpus=16",
        placement=placement,
        workload_seed=4,
    )
    agent = HeuristicAgent(make_policy("fifo", placement))
    env.reset(seed=2)
    steps = 0
    while True:
        _, _, terminated, truncated, info = env.step(agent(env))
        steps += 1
        if terminated or truncated:
            break
    u = env.unwrapped
    reference = Simulator(u.cluster, u.sim.workload, SimConfig(seed=u.sim.config.seed))
    expected = reference.run(make_policy("fifo", placement))
    assert info["metrics"] == expected
    assert u.sim.decisions == reference.decisions
    assert steps >= 80  # one start per job, plus the waits where the head blocks


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="obs_mode"):
        JobSelectEnv("tiny", obs_mode="pixels")
    with pytest.raises(ValueError, match="reward"):
        JobSelectEnv("tiny", reward="makespan")
    with pytest.raises(ValueError, match="placement"):
        JobSelectEnv("tiny", placement="nearest")


def test_truncation_and_metrics_in_info():
    env = gym.make("gpusched/JobSelect-v1", cluster="tiny", num_jobs=30, max_steps=5)
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        obs, _, terminated, truncated, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    assert truncated and not terminated and "metrics" in info


def test_heuristic_agent_sees_only_the_window_and_always_ends():
    """SJF's shortest job can sit beyond the window; the adapter must still pick a valid action every step."""
    import gymnasium as gym
    import numpy as np

    from gpusched_envs.envs.adapters import HeuristicAgent
    from gpusched_envs.policies import make_policy

    env = gym.make(
        "gpusched/JobSelect-v1", cluster="tiny", num_jobs=80, load=2.0, window=2, information="clairvoyant"
    )
    agent = HeuristicAgent(make_policy("sjf", "closest"))
    obs, _ = env.reset(seed=0)
    for _ in range(5000):
        action = agent(env)
        assert obs["action_mask"][action], "the adapter chose a masked action"
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    else:
        raise AssertionError("episode did not end")
    assert info["metrics"]["jobs"] == 80 and not np.isnan(info["metrics"]["avg_jct"])


def test_non_clairvoyant_features_exact():
    """The same toy run, non-clairvoyant: attained service, time in state and GPU time in use instead of durations."""
    env = toy_env()  # information="non-clairvoyant" is the default
    assert env.information == "non-clairvoyant" and not env.clairvoyant
    obs, _ = env.reset(seed=0)
    sens_a = (0.1 + 1e9 / 5e9) / (0.1 + 1e9 / 100e9)
    assert obs["job_features"][0].tolist() == pytest.approx([2 / 16, 1, 0, 0, 0, math.log(sens_a), 0, 1])
    assert obs["context"].tolist() == pytest.approx([0.0, math.log1p(2)])  # 2 arrivals, elapsed < time_scale
    env.step(0)  # A on GPUs 0, 1
    obs, *_ = env.step(0)  # B on GPUs 4..7; at t=100 A ends and C (arrived at t=10) is the window
    names = env.encoder.job_feature_names
    c = obs["job_features"][0]
    assert c[names.index("age")] == pytest.approx(math.log1p(90))
    assert c[names.index("attained_service")] == 0.0
    assert c[names.index("time_in_state")] == pytest.approx(math.log1p(90))
    in_use = obs["node_features"][:16, gpu_col("remaining_time")]  # the same column, "time_in_use" here
    assert env.encoder.gpu_feature_names[2] == "time_in_use"
    assert in_use.tolist() == pytest.approx([0] * 4 + [math.log1p(100)] * 4 + [0] * 8)
    # context: one job finished; 3 arrivals over the 100 s since the first one (time scale 1 s)
    assert obs["context"].tolist() == pytest.approx([math.log1p(1), math.log1p(3 / 100)])


def test_preemption_action_space_and_running_rows():
    env = toy_env(preemption=True, window=3, preempt_window=2)
    assert env.action_space.n == 3 + 2 + 1 and env.wait_action == 5
    assert env.observation_space["job_features"].shape == (5, 10)
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"].tolist() == [1, 1, 0, 0, 0, 1]
    obs, *_ = env.step(0)  # A starts; it cannot be preempted at the instant it started
    assert env.running_window().tolist() == [0]
    assert obs["action_mask"].tolist() == [1, 0, 0, 0, 0, 1]
    names = env.encoder.job_feature_names
    assert names[-2:] == ("running", "speed")
    running_row = obs["job_features"][3]
    assert running_row[names.index("running")] == 1 and running_row[names.index("speed")] == pytest.approx(
        1.0
    )
    assert obs["job_mask"].tolist() == [1, 0, 0, 1, 0]
    obs, reward, *_ = env.step(5)  # wait: C arrives at t=10, a decision point
    assert env.sim.now == 10.0 and reward == pytest.approx(-(2 * 10))
    assert obs["action_mask"].tolist() == [1, 1, 0, 1, 0, 1]  # start B or C, preempt A, or wait
    obs, reward, *_ = env.step(3)  # preempt A: back of the queue, progress kept
    assert reward == 0.0 and env.sim.preemptions[0] == 1 and list(env.sim.queue) == [1, 2, 0]
    # nothing runs and nothing is to arrive: waiting would deadlock, so A may restart at once
    assert obs["action_mask"].tolist() == [1, 1, 1, 0, 0, 0]
    obs, *_ = env.step(
        0
    )  # B starts; now waiting is possible, and A (preempted at this instant) may not restart
    assert list(env.sim.queue) == [2, 0]
    assert obs["action_mask"].tolist() == [1, 0, 0, 0, 0, 1]
    strict = toy_env(preemption=True, invalid_action="raise")
    strict.reset(seed=0)
    with pytest.raises(InvalidActionError, match="running slot 0 cannot be preempted"):
        strict.step(2)  # nothing runs yet


def contended_tiny(**kw):
    """60 jobs at offered load 3 on tiny with preemption, the window holding every job (Tiresias preempts here)."""
    return gym.make(
        "gpusched/JobSelect-v1",
        cluster="tiny",
        workload="synthetic:jobs=60,load=3.0,gpus=16,max_gpus=8",
        workload_seed=4,
        preemption=True,
        window=60,
        preempt_window=16,
        **kw,
    )


@pytest.mark.parametrize(
    ("name", "information"),
    [
        ("tiresias", "non-clairvoyant"),
        ("las", "non-clairvoyant"),
        ("gittins", "non-clairvoyant"),
        ("srtf", "clairvoyant"),
        ("fifo", "non-clairvoyant"),
    ],
)
def test_preemptive_heuristics_through_the_env_equal_simulator_run(name, information):
    """With preemption=True and windows holding every job, Tiresias (with its demotion timers) and SRTF acting
    through the env reproduce Simulator.run exactly, preemptions included."""
    env = contended_tiny(information=information)
    agent = HeuristicAgent(make_policy(name, "closest"))
    env.reset(seed=2)
    while True:
        _, _, terminated, truncated, info = env.step(agent(env))
        if terminated or truncated:
            break
    u = env.unwrapped
    reference = Simulator(u.cluster, u.sim.workload, SimConfig(seed=u.sim.config.seed))
    expected = reference.run(make_policy(name, "closest"))
    assert info["metrics"] == expected
    assert u.sim.decisions == reference.decisions
    if name != "fifo":
        assert expected["preemptions"] > 0  # the instance exercises preemption


def test_preemptive_heuristic_refused_without_preemption_and_clairvoyant_refused():
    from gpusched_envs.envs.adapters import ClairvoyanceError

    env = gym.make("gpusched/JobSelect-v1", cluster="tiny", num_jobs=60, load=3.0, information="clairvoyant")
    env.reset(seed=0)
    agent = HeuristicAgent(make_policy("srtf", "closest"))
    with pytest.raises(ValueError, match="preemption=True"):
        for _ in range(200):
            env.step(agent(env))
    nc = gym.make("gpusched/JobSelect-v1", cluster="tiny", num_jobs=20)
    nc.reset(seed=0)
    with pytest.raises(ClairvoyanceError, match="allow_clairvoyant"):
        HeuristicAgent(make_policy("sjf", "closest"))(nc)
    assert nc.action_space.contains(HeuristicAgent(make_policy("sjf"), allow_clairvoyant=True)(nc))

    class Peeks(FIFOLike):
        def key(self, sim, job):
            return sim.workload.duration[job]

    with pytest.raises(ClairvoyanceError, match="durations"):
        HeuristicAgent(Peeks())(nc)


class FIFOLike:
    """A custom heuristic that does not declare itself clairvoyant."""

    name = "custom"

    def key(self, sim, job):
        return job

    def schedule(self, sim):
        for job in sorted(sim.queue, key=lambda j: self.key(sim, j)):
            gpus = sim.free_mask(job).nonzero()[0][: sim.job_gpus_n[job]]
            if len(gpus) == sim.job_gpus_n[job]:
                sim.start(job, gpus)


def test_comparable_policies():
    from gpusched_envs.policies import comparable_policies, is_clairvoyant

    assert comparable_policies("non-clairvoyant") == ("fifo", "gandiva", "tiresias", "las")
    assert comparable_policies("clairvoyant") == ("fifo", "gandiva", "tiresias", "las", "sjf", "srtf")
    assert comparable_policies("clairvoyant", preemption=False) == ("fifo", "gandiva", "sjf")
    assert is_clairvoyant("srtf") and not is_clairvoyant(make_policy("tiresias"))
    assert not is_clairvoyant("las") and not is_clairvoyant(make_policy("gittins"))
    with pytest.raises(ValueError, match="information"):
        comparable_policies("oracle")


def test_default_reward_is_jct_and_ranks_like_average_jct():
    """Default reward: the full-episode return is exactly −Σ JCT / time_scale, so it orders FIFO and SJF as their
    average JCT does (the throughput reward did not)."""
    returns, jct = {}, {}
    for name in ("fifo", "sjf"):
        env = gym.make(
            "gpusched/JobSelect-v1", cluster="tiny", num_jobs=60, load=2.0, information="clairvoyant"
        )
        assert env.unwrapped.reward_kind == "jct"
        agent = HeuristicAgent(make_policy(name, "closest"))
        env.reset(seed=1)
        total = 0.0
        while True:
            _, r, terminated, truncated, info = env.step(agent(env))
            total += r
            if terminated or truncated:
                break
        m = info["metrics"]
        assert total == pytest.approx(-m["avg_jct"] * m["jobs"] / 3600.0, rel=1e-9)
        returns[name], jct[name] = total, m["avg_jct"]
    assert (returns["sjf"] > returns["fifo"]) == (jct["sjf"] < jct["fifo"])
    assert jct["sjf"] != jct["fifo"]


@pytest.mark.parametrize(("name", "information"), [("tiresias", "non-clairvoyant"), ("srtf", "clairvoyant")])
def test_decision_interval_adds_rounds_and_keeps_the_heuristics_schedule(name, information):
    """decision_interval asks the agent again at most that many seconds after it waited while jobs ran; the extra
    rounds change nothing a priority heuristic does (its order only changes at events and its own timers), so the
    metrics still equal Simulator.run, with more decisions."""
    interval = 600.0
    env = contended_tiny(information=information, decision_interval=interval)
    agent = HeuristicAgent(make_policy(name, "closest"))
    env.reset(seed=2)
    u = env.unwrapped
    gaps_ok, waits = True, 0
    while True:
        action = agent(env)
        waited_with_running = action == u.wait_action and len(u.sim.running) > 0
        before = u.sim.now
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
        if waited_with_running:
            waits += 1
            gaps_ok &= u.sim.now - before <= interval + 1e-6
    assert waits > 0 and gaps_ok
    reference = Simulator(u.cluster, u.sim.workload, SimConfig(seed=u.sim.config.seed))
    expected = reference.run(make_policy(name, "closest"))
    # the same schedule; the integrals (e.g. finish-time fairness) are summed over more, shorter pieces
    assert info["metrics"].keys() == expected.keys()
    for key, value in expected.items():
        assert info["metrics"][key] == pytest.approx(value, rel=1e-9, abs=1e-9), key
    assert info["metrics"]["preemptions"] == expected["preemptions"]
    assert u.sim.decisions > reference.decisions


@pytest.mark.parametrize("bad", [0, -5.0, float("nan"), "10"])
def test_decision_interval_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="decision_interval"):
        gym.make("gpusched/JobSelect-v1", cluster="tiny", num_jobs=10, preemption=True, decision_interval=bad)


def test_min_run_leases_a_started_job_before_it_may_be_preempted():
    """The toy case above with min_run: at t=10 A has held its GPUs 10 s, so a 20 s lease masks its preemption,
    a 10 s lease does not; a 5 s decision_interval asks again every 5 s until the lease is up at t=20."""
    env = toy_env(preemption=True, window=3, preempt_window=2, min_run=20.0, decision_interval=5.0)
    env.reset(seed=0)
    env.step(0)  # A starts at t=0
    obs, *_ = env.step(5)  # wait: the round at t=5
    assert env.sim.now == 5.0
    obs, *_ = env.step(5)  # wait: C arrives at t=10
    assert env.sim.now == 10.0
    assert obs["action_mask"].tolist() == [1, 1, 0, 0, 0, 1]  # A leased until t=20
    obs, *_ = env.step(5)
    assert env.sim.now == 15.0 and obs["action_mask"][3] == 0
    obs, *_ = env.step(5)
    assert env.sim.now == 20.0 and obs["action_mask"][3] == 1  # the lease is up
    short = toy_env(preemption=True, window=3, preempt_window=2, min_run=10.0)
    short.reset(seed=0)
    short.step(0)
    assert short.step(5)[0]["action_mask"].tolist() == [1, 1, 0, 1, 0, 1]
    with pytest.raises(ValueError, match="min_run is only used with preemption=True"):
        toy_env(min_run=10.0)
    with pytest.raises(ValueError, match="min_run"):
        toy_env(preemption=True, min_run=0)


def test_tiresias_through_a_leased_env_preempts_only_after_the_lease():
    """HeuristicAgent on an env with min_run: every action it takes is valid (a leased victim makes it wait for a
    later round), it still preempts, only jobs whose allocation held min_run, and every job finishes."""
    lease = 3600.0
    env = contended_tiny(min_run=lease, decision_interval=600.0)
    agent = HeuristicAgent(make_policy("tiresias", "closest"))
    env.reset(seed=2)
    u, held = env.unwrapped, []
    while True:
        action = agent(env)
        assert u.action_masks()[action]
        if u.first_preempt_action <= action < u.wait_action:
            job = int(u.running_window()[action - u.first_preempt_action])
            held.append(u.sim.now - u.sim.run_start[job])
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert terminated and u.sim.finished == 60
    assert held and min(held) >= lease
    assert info["metrics"]["preemptions"] == len(held)
