"""The non-clairvoyant priority rules: many-queue LAS and 2D-Gittins (gpusched_envs/policies/gittins.py).

Exact outcomes on a hand-built instance (toy cluster: 16 GPUs), the Gittins index on hand-computed distributions, and
the bundled table's provenance (fitted on Philly jobs submitted before the held-out cut-off only)."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.policies import make_policy
from gpusched_envs.policies.gittins import Gittins, gittins_index, gpu_class_of, load_gittins_table
from gpusched_envs.sim import SimConfig, Simulator
from tests.toy import make_workload

DURATION = SimConfig(speed_model="duration", restart_delay=30.0)
# job0: 16 GPUs for 100 s from t=0; job1: 1 GPU for 50 s from t=10 (17 GPUs asked on 16: one must wait)
ROWS = [(0, 100, 16), (10, 50, 1)]


def run(cluster, policy):
    sim = Simulator(cluster, make_workload(ROWS), DURATION)
    return sim, sim.run(policy)


def test_las_demotes_a_big_job_that_tiresias_keeps(toy_cluster):
    # at t=10 job0 has 160 GPU-s: above LAS's first threshold (100), below Tiresias' 3600. LAS preempts it for job1
    # (queue 0); job0 restarts when job1 ends at 60, pays the 30 s restart, and has 90 s left -> 180
    sim, m = run(toy_cluster, make_policy("las", "closest", first=100.0, factor=4.0, levels=2))
    assert sim.finish_time.tolist() == pytest.approx([180.0, 60.0])
    assert m["preemptions"] == 1
    # Tiresias: both in queue 0, FIFO by submit time, so job1 waits for job0 (ends 100) and ends at 150
    sim, m = run(toy_cluster, make_policy("tiresias", "closest"))
    assert sim.finish_time.tolist() == pytest.approx([100.0, 150.0])
    assert m["preemptions"] == 0


def test_las_default_thresholds_and_bad_arguments():
    assert make_policy("las").thresholds.tolist() == [900.0 * 4**k for k in range(7)]
    with pytest.raises(ValueError, match="factor > 1"):
        make_policy("las", factor=1.0)


def test_gittins_index_on_hand_computed_distributions():
    # S in {1, 1, 10}: at a=0 the quantum 1 finishes 2/3 of the jobs for 1 unit of expected service (index 2/3;
    # quantum 10: 1 / 4); at a=1 only the 10 survives: 1/9; at a=5: 1/5; beyond every sample: 0
    assert gittins_index([1.0, 1.0, 10.0], [0.0, 1.0, 5.0, 10.0]).tolist() == pytest.approx(
        [2 / 3, 1 / 9, 1 / 5, 0.0]
    )
    with pytest.raises(ValueError, match="> 0"):
        gittins_index([0.0, 1.0], [0.0])


def test_gittins_orders_by_the_table_of_the_job_s_gpu_class(toy_cluster):
    grid = np.array([0.0, 100.0])
    assert gpu_class_of(1, [1, 16]) == 0 and gpu_class_of(16, [1, 16]) == 1 and gpu_class_of(99, [1, 16]) == 1
    # small jobs finish soon per GPU-second: job1 preempts job0 at once (as LAS above)
    small_first = {
        "grid": grid,
        "bounds": np.array([1, 16]),
        "index": np.array([[0.5, 0.01], [0.001, 0.002]]),
    }
    sim, m = run(toy_cluster, Gittins(table=small_first))
    assert sim.finish_time.tolist() == pytest.approx([180.0, 60.0]) and m["preemptions"] == 1
    # the same instance with a table that favours big jobs: no preemption, job1 waits for job0
    big_first = {**small_first, "index": np.array([[0.001, 0.001], [0.5, 0.5]])}
    sim, m = run(toy_cluster, Gittins(table=big_first))
    assert sim.finish_time.tolist() == pytest.approx([100.0, 150.0]) and m["preemptions"] == 0


def test_bundled_gittins_table_is_fitted_on_held_in_philly_jobs_only():
    from importlib import resources

    import yaml

    from gpusched_envs.workloads.philly import load_philly
    from gpusched_envs.workloads.select import resolve_time

    doc = yaml.safe_load(
        resources.files("gpusched_envs").joinpath("data/fits/philly_gittins.yaml").read_text()
    )
    assert (
        doc["source"]["submitted_before"] == "2017-11-01"
    )  # evaluate/suites/philly_heldout.yaml starts there
    wl = load_philly()
    held_in = wl.submit_time < resolve_time(wl, "2017-11-01")
    assert doc["source"]["jobs_used"] == int(held_in.sum()) < len(wl)
    table = load_gittins_table()
    one_gpu = held_in & (wl.num_gpus == 1)
    expected = gittins_index(wl.duration[one_gpu] * 1.0, table["grid"])
    assert table["index"][0] == pytest.approx(expected, rel=1e-5)
    assert table["bounds"].tolist() == [1, 4, 8, 1_000_000]
