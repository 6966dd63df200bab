"""JobSelect's ``history_features=True``: runtimes of finished jobs by kind, queue composition and free-GPU
fragmentation; exact values on a hand-built workload, no peeking at unfinished jobs, spaces, determinism."""

from __future__ import annotations

import dataclasses
import pickle
import types
from types import SimpleNamespace

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from gpusched_envs.envs.history import HISTORY_CONTEXT_FEATURES, HISTORY_JOB_FEATURES, RuntimeHistory
from gpusched_envs.envs.job_select import JobSelectEnv
from gpusched_envs.sim.workload import Workload
from tests.toy import toy_cluster

HOUR = 3600.0
LEVEL, SAMPLES, MEDIAN, SURVIVAL, REMAINING = range(5)


def hand_workload(durations=(100.0, 300.0, 1000.0, 1000.0, 500.0, 50.0)) -> Workload:
    """Six jobs on the 16-GPU toy cluster: jobs 0-3 (4 GPUs, VC "a") fill it at t=0; job 4 (4 GPUs, VC "a") and
    job 5 (2 GPUs, VC "b") arrive at t=1."""
    return Workload.from_columns(
        "history",
        [0.0, 0.0, 0.0, 0.0, 1.0, 1.0],
        list(durations),
        [4, 4, 4, 4, 4, 2],
        model=[0] * 6,
        vc=[0, 0, 0, 0, 0, 1],
        model_names=("additive",),
        vc_names=("a", "b"),
    )


def make_env(workload=None, **kw) -> JobSelectEnv:
    kw = {"window": 4, "speed_model": "duration", "interference": False, "history_features": True, **kw}
    return JobSelectEnv(toy_cluster(), hand_workload() if workload is None else workload, **kw)


def history_cols(env, obs, row):
    jf = obs["job_features"][row]
    return jf[env.encoder.extra_job_column :]


def expected(level, n, median, survival, remaining):
    return np.array(
        [level, np.log1p(n), np.log1p(median / HOUR), survival, np.log1p(remaining / HOUR)], dtype=np.float32
    )


def start(env, job):
    slot = env.slot_of(job)
    assert slot >= 0, f"job {job} not in the window"
    return env.step(slot)


def run_to_300(env):
    """Start jobs 0-3 at t=0, job 4 when job 0 ends (t=100); the next decision is job 1's end (t=300)."""
    obs, _ = env.reset(seed=0)
    for j in range(4):
        obs, *_ = start(env, j)
    while env.sim.now < 100.0:  # with preemption the agent is also asked at the arrivals (t=1)
        obs, *_ = env.step(env.wait_action)
    assert env.sim.now == 100.0
    at_100 = obs
    obs, *_ = start(env, 4)
    while env.sim.now < 300.0:  # with preemption the agent is asked again at t=100 (job 5 waits)
        obs, *_ = env.step(env.wait_action)
    assert env.sim.now == 300.0
    return at_100, obs


def test_names_and_layout():
    env = make_env()
    assert env.encoder.job_feature_names[-5:] == HISTORY_JOB_FEATURES
    assert env.context_names == ("finished", "arrival_rate", *HISTORY_CONTEXT_FEATURES)
    assert env.observation_space["job_features"].shape == (4, 8 + 5)
    assert env.observation_space["context"].shape == (8,)
    flat = make_env(obs_mode="flat")
    names = flat.flat_feature_names()
    assert names[-6:] == [f"context.{c}" for c in HISTORY_CONTEXT_FEATURES]
    assert "job0.history_survival" in names and len(names) == flat.observation_space["obs"].shape[0]
    with pytest.raises(ValueError, match="history_features must be True or False"):
        make_env(history_features="yes")


def test_exact_values_queue_rows():
    env = make_env()
    at_100, at_300 = run_to_300(env)
    # t=100: job 0 (VC a, 4 GPUs) finished after 100 s; queued job 4 (same kind, attained 0) and job 5 (VC b,
    # 2 GPUs: no job of its VC+GPUs or GPU count finished, falls back to all jobs)
    assert list(env.job_at(i) for i in range(2)) == [5, -1]
    np.testing.assert_array_equal(history_cols(env, at_100, 0), expected(0, 1, 100.0, 1.0, 100.0))
    np.testing.assert_array_equal(history_cols(env, at_100, 1), expected(2, 1, 100.0, 1.0, 100.0))
    # context at t=100: queue = jobs 4 (4 GPUs) and 5 (2 GPUs): all in the 2-4 bucket; the 4 free GPUs are one
    # wholly free server
    np.testing.assert_array_equal(at_100["context"][2:], np.float32([0, 1, 0, 0, 0, 1]))
    # t=300: jobs 0 and 1 (runtimes 100, 300) finished; job 5 (all-jobs level): median 200, survival 1
    np.testing.assert_array_equal(history_cols(env, at_300, 0), expected(2, 2, 200.0, 1.0, 200.0))
    np.testing.assert_array_equal(at_300["context"][2:], np.float32([0, 1, 0, 0, 0, 1]))


def test_exact_values_running_and_preempted_rows():
    env = make_env(preemption=True, preempt_window=4)
    _, obs = run_to_300(env)
    q = env.encoder.queue_rows
    assert env.running_window().tolist() == [2, 3, 4]
    # running rows at t=300 with history (VC a, 4 GPUs) = [100, 300]: jobs 2 and 3 have held their GPUs 300 s
    # (no runtime exceeds it), job 4 200 s: P(R > 200) = 1/2, E[R - 200 | R > 200] = 100
    np.testing.assert_array_equal(history_cols(env, obs, q), expected(0, 2, 200.0, 0.0, 0.0))
    np.testing.assert_array_equal(history_cols(env, obs, q + 1), expected(0, 2, 200.0, 0.0, 0.0))
    np.testing.assert_array_equal(history_cols(env, obs, q + 2), expected(0, 2, 200.0, 0.5, 100.0))
    # preempt job 4: back in the queue with its 200 s of allocation
    obs, *_ = env.step(env.preempt_action_of(4))
    assert env.slot_of(4) == 1
    np.testing.assert_array_equal(history_cols(env, obs, 1), expected(0, 2, 200.0, 0.5, 100.0))
    # the free GPUs: 8 on two wholly free servers
    np.testing.assert_array_equal(obs["context"][2:], np.float32([0, 1, 0, 0, 0, 1]))


def test_fragmentation_context():
    # jobs of 2 and 1 GPUs packed on one server, then a 12-GPU job waits in the window
    env = make_env(
        Workload.from_columns(
            "frag",
            [0.0, 0.0, 0.0, 5.0],
            [50, 60, 70, 10],
            [2, 1, 12, 16],
            model=[0] * 4,
            model_names=("additive",),
        ),
        placement="pack",
    )
    obs, _ = env.reset(seed=0)
    obs, *_ = start(env, 0)
    obs, *_ = start(env, 1)
    # 3 GPUs busy on one server: 13 free, 1 of them on a partly busy server; largest wholly free server: 4 of 4
    # queue: job 2 (12 GPUs): the >8 bucket
    np.testing.assert_allclose(obs["context"][2:], np.float32([0, 0, 0, 1, 1 / 13, 1]), rtol=1e-6)


def _policy(env, obs):
    """The first startable window job, else wait, else the first valid action (never preempts when it can wait)."""
    mask = obs["action_mask"]
    if mask[: env.window].any():
        return int(np.flatnonzero(mask[: env.window])[0])
    return env.wait_action if mask[env.wait_action] else int(np.flatnonzero(mask)[0])


def _trajectory(env, seed, steps=None):
    obs, _ = env.reset(seed=seed)
    out = [(env.sim.now, obs)]
    done = False
    while not done and (steps is None or len(out) < steps):
        obs, _, term, trunc, _ = env.step(_policy(env, obs))
        out.append((env.sim.now, obs))
        done = term or trunc
    return out


@pytest.mark.parametrize("preemption", [False, True])
def test_no_peeking_at_unfinished_durations(preemption):
    """Lengthening the jobs that have not finished by time T changes no observation up to T."""
    base = JobSelectEnv("tiny", num_jobs=40, load=1.2, history_features=True, preemption=preemption)
    base.reset(seed=3)
    workload = base.sim.workload
    env = JobSelectEnv("tiny", workload, history_features=True, preemption=preemption)
    first = _trajectory(env, 0)
    finish = env.sim.finish_time.copy()
    T = float(np.median(finish))
    longer = np.where(finish > T, workload.duration * 3.0, workload.duration)
    changed = dataclasses.replace(workload, duration=longer)
    env2 = JobSelectEnv("tiny", changed, history_features=True, preemption=preemption)
    second = _trajectory(env2, 0)
    compared = 0
    for (t1, o1), (t2, o2) in zip(first, second, strict=False):
        if t1 > T:
            break
        assert t1 == t2
        for key in o1:
            np.testing.assert_array_equal(o1[key], o2[key], err_msg=key)
        compared += 1
    assert compared > 5
    # and the history does see the finished jobs: some queued row has samples before T
    assert any(o["job_features"][:, env.encoder.extra_job_column + SAMPLES].any() for t, o in first if t <= T)


def test_history_never_reads_unfinished_durations():
    """A RuntimeHistory built on a simulator whose unfinished jobs' durations and work are NaN gives the exact
    statistics of the finished ones."""
    env = make_env()
    run_to_300(env)
    sim = env.sim
    unfinished = np.isnan(sim.finish_time)
    assert unfinished.sum() == 4
    w = sim.workload  # a stand-in: the VCs, and NaN as the duration of every unfinished job
    sim.workload = SimpleNamespace(vc=w.vc, duration=np.where(unfinished, np.nan, w.duration))
    sim.job_work[unfinished] = np.nan
    hist = RuntimeHistory(sim)
    assert hist.recorded == 2
    level, n, median, survival, remaining = hist.statistics(4, 200.0)
    assert (level, n, median, survival, remaining) == (0, 2, 200.0, 0.5, 100.0)


@pytest.mark.parametrize("mode", ["graph", "image", "flat"])
@pytest.mark.parametrize("preemption", [False, True])
def test_check_env_and_spaces(mode, preemption):
    env = JobSelectEnv("tiny", num_jobs=30, history_features=True, obs_mode=mode, preemption=preemption)
    check_env(env, skip_render_check=True)
    for _, obs in _trajectory(env, 5):
        assert env.observation_space.contains(obs)


@pytest.mark.parametrize("mode", ["graph", "image", "flat"])
@pytest.mark.parametrize("information", ["non-clairvoyant", "clairvoyant"])
def test_default_columns_unchanged(mode, information):
    """With the kwarg the other columns and contexts are those of the default env, the new ones appended."""
    kw = {"num_jobs": 30, "obs_mode": mode, "information": information, "preemption": True}
    plain, hist = JobSelectEnv("tiny", **kw), JobSelectEnv("tiny", history_features=True, **kw)
    a, b = _trajectory(plain, 7), _trajectory(hist, 7)
    assert len(a) == len(b)
    nj, nc = len(HISTORY_JOB_FEATURES), len(HISTORY_CONTEXT_FEATURES)
    W, F = plain.encoder.job_features.shape
    for (_, oa), (_, ob) in zip(a, b, strict=True):
        for key in oa:
            if key in ("job_features", "queue"):
                np.testing.assert_array_equal(oa[key], ob[key][:, :-nj])
            elif key == "context":
                np.testing.assert_array_equal(oa[key], ob[key][:-nc])
            elif key == "obs":
                n_cluster = len(oa[key]) - W * F - W - 2
                np.testing.assert_array_equal(oa[key][:n_cluster], ob[key][:n_cluster])
                jobs = ob[key][n_cluster : n_cluster + W * (F + nj)].reshape(W, F + nj)
                np.testing.assert_array_equal(
                    oa[key][n_cluster : n_cluster + W * F].reshape(W, F), jobs[:, :F]
                )
                np.testing.assert_array_equal(oa[key][-W - 2 :], ob[key][-W - 2 - nc : -nc])
            else:
                np.testing.assert_array_equal(oa[key], ob[key], err_msg=key)
    assert plain.observation_space != hist.observation_space


def test_same_seed_determinism():
    a = _trajectory(JobSelectEnv("tiny", num_jobs=40, history_features=True, preemption=True), 11)
    b = _trajectory(JobSelectEnv("tiny", num_jobs=40, history_features=True, preemption=True), 11)
    assert len(a) == len(b)
    for (ta, oa), (tb, ob) in zip(a, b, strict=True):
        assert ta == tb
        for key in oa:
            np.testing.assert_array_equal(oa[key], ob[key])


def test_encoder_pickles_with_its_history_columns():
    env = make_env(obs_mode="flat", preemption=True)
    obs, _ = env.reset(seed=0)
    enc = pickle.loads(pickle.dumps(env.encoder))
    assert enc.job_feature_names == env.encoder.job_feature_names
    assert enc.extra_job_column == env.encoder.extra_job_column == 10
    np.testing.assert_array_equal(enc.observation()["obs"], obs["obs"])
    assert enc.observation_space() == env.observation_space


def _scan_everything(sim) -> RuntimeHistory:
    """A history that scans every job now (a new one records each finished job at its first sync)."""
    return RuntimeHistory(sim)


def _tables(hist: RuntimeHistory) -> tuple:
    return (
        hist.recorded,
        hist.all.values,
        {k: r.values for k, r in hist.by_gpus.items()},
        {k: r.values for k, r in hist.by_vc_gpus.items()},
    )


def _reference_rows(self, block, first, jobs, row0, running, time_scale):
    """``write_rows`` spelled out: every row from :meth:`RuntimeHistory.statistics`, no cache, ``np.array``."""
    k = len(jobs)
    if not k:
        return
    attained = self.sim.allocated_time[jobs]
    if running:
        attained = attained + (float(self.sim.now) - self.sim.run_start[jobs])
    pairs = zip(jobs.tolist(), attained.tolist(), strict=True)
    values = np.array([self.statistics(j, a) for j, a in pairs], np.float64)
    np.log1p(values[:, 1], out=values[:, 1])
    for c in (MEDIAN, REMAINING):
        np.log1p(values[:, c] * (1.0 / time_scale), out=values[:, c])
    block[row0 : row0 + k, first : first + len(HISTORY_JOB_FEATURES)] = values


def test_incremental_history_holds_what_a_full_scan_finds_at_every_step():
    """The history synced step by step (scanning only once some job finished since its last scan) holds at every
    step the runtimes a history scanning every job finds, and its rows are those of the plain computation."""
    kw = {
        "num_jobs": 60,
        "load": 1.3,
        "history_features": True,
        "preemption": True,
        "decision_interval": 600.0,
    }
    env, plain = JobSelectEnv("tiny", **kw), JobSelectEnv("tiny", **kw)
    rng = np.random.default_rng(5)
    obs, _ = env.reset(seed=4)
    ref, _ = plain.reset(seed=4)
    plain.history.write_rows = types.MethodType(_reference_rows, plain.history)
    steps, finished_seen, skipped, done = 0, set(), 0, False
    while not done:
        assert _tables(env.history) == _tables(_scan_everything(env.sim))
        np.testing.assert_array_equal(obs["job_features"], ref["job_features"])
        np.testing.assert_array_equal(obs["context"], ref["context"])
        finished_seen.add(env.sim.finished)
        action = int(rng.choice(np.flatnonzero(env.action_masks())))
        live_before = env.history._live
        obs, _, term, trunc, _ = env.step(action)
        skipped += env.history._live is live_before  # no job finished: nothing scanned
        ref, *_ = plain.step(action)
        done = term or trunc
        steps += 1
    assert env.history.recorded == env.sim.num_jobs == 60
    assert len(finished_seen) > 30 and skipped > steps // 4 and steps > 200


def test_rows_of_every_job_match_the_plain_computation():
    """``write_rows`` writes, row for row, what computing every row from :meth:`RuntimeHistory.statistics` writes
    (queued and running rows, several levels), and nothing outside its rows and columns."""
    env = make_env(preemption=True)
    run_to_300(env)
    hist = env.history
    jobs = np.arange(env.sim.num_jobs, dtype=np.int64)
    for running in (False, True, False):  # the second queued pass reads the row cache
        block, want = np.full((8, 9), -1.0), np.full((8, 9), -1.0)
        hist.write_rows(block, 2, jobs, 1, running, HOUR)
        _reference_rows(hist, want, 2, jobs, 1, running, HOUR)
        np.testing.assert_array_equal(block, want)
        assert (block[1:7, 2:7] != -1).all()
    assert len({hist.kind_of(j)[0] for j in jobs.tolist()}) >= 2
