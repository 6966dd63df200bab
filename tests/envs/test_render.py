"""The rgb_array frames explain themselves: a GPU cell has its job's colour (a free one the free colour), the
picture is large enough to read, neighbouring job ids never share a colour, and the DAG Gantt chart puts each task's
bar on its GPU's lane between its start and finish."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs  # noqa: F401
from gpusched_envs.envs.render import FREE, PALETTE, duration, render_gantt


def test_neighbouring_job_ids_never_share_a_colour():
    assert len({tuple(c) for c in PALETTE}) == len(PALETTE) == 20


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(7.25, "7.2s"), (42, "42s"), (95, "1m35s"), (3725, "1h02m"), (49 * 3600 + 60, "2d01h")],
)
def test_durations_read_as_a_person_writes_them(seconds, text):
    assert duration(seconds) == text


def test_frame_shows_each_gpu_in_its_job_s_colour():
    env = gym.make("gpusched/JobSelect-v1", cluster="tiny", render_mode="rgb_array")
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(6):
        obs, *_ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.shape[0] >= 360 and frame.shape[1] >= 500
    sim = env.unwrapped.sim
    colours = {tuple(int(v) for v in px) for px in frame.reshape(-1, 3)}
    running = [int(j) for j in sim.running]
    assert running, "the episode should have running jobs after six steps"
    for j in running:
        assert tuple(int(v) for v in PALETTE[j % len(PALETTE)]) in colours
    if sim.free_gpus() > 0:
        assert FREE in colours


def test_gantt_bar_sits_on_its_lane_between_start_and_finish():
    start = np.array([0.0, 5.0])
    finish = np.array([5.0, 10.0])
    assignment = np.array([1, 0])
    img = render_gantt(start, finish, assignment, ["GPU 0", "GPU 1"], 10.0, "two tasks")
    # geometry of render_gantt: label column 120 px after a 10 px margin, 720 px of plot, 26 px header, 22 px lanes
    x_of = lambda t: int(130 + 719 * t / 10.0)  # noqa: E731
    lane_mid = lambda q: 26 + q * 22 + 11  # noqa: E731
    assert tuple(img[lane_mid(1), x_of(2.0)]) == tuple(PALETTE[0])  # task 0 on GPU 1 over [0, 5]
    assert tuple(img[lane_mid(0), x_of(7.0)]) == tuple(PALETTE[1])  # task 1 on GPU 0 over [5, 10]
    assert tuple(img[lane_mid(0), x_of(2.0)]) != tuple(PALETTE[0])  # nothing of task 0 on GPU 0
