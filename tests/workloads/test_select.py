import numpy as np
import pytest

from gpusched_envs.workloads import WorkloadError, describe, load_workload, scale_to_load, select


def test_oct_nov_window(philly):
    wl = load_workload("philly:start=2017-10-01,end=2017-11-30")
    assert (
        len(wl) == 68_510
    )  # submissions 2017-10-01 00:00:00 <= t < 2017-12-01 00:00:00 (end date inclusive)
    assert wl.time_origin == "2017-10-01T00:00:00"
    assert wl.submit_time[0] == 45.0 and wl.submit_time[-1] < 61 * 86400
    vcs = describe(wl)["vcs"]
    assert (
        vcs["6214e9"] == 33_950
        and vcs["11cb48"] == 11_897
        and vcs["6c71a0"] == 9_383
        and vcs["b436b2"] == 7_222
    )
    # same window through the function API
    assert select(philly, start="2017-10-01", end="2017-11-30").fingerprint() == wl.fingerprint()


def test_end_date_inclusive_vs_datetime(philly):
    day = select(philly, start="2017-10-01", end="2017-10-01")
    same = select(philly, start="2017-10-01", end="2017-10-02T00:00:00")
    assert len(day) == len(same) > 0


def test_window_counts_exact(philly):
    assert len(select(philly, start="2017-10-01", end="2017-10-31")) == 47_192
    assert len(select(philly, start="2017-10-01", end="2017-10-01")) == 271
    assert len(select(philly, start="2017-10-01", end="2017-10-31")) == int(
        np.sum(
            (philly.submit_time >= _s(philly, "2017-10-01T00:00:00"))
            & (philly.submit_time < _s(philly, "2017-11-01T00:00:00"))
        )
    )


def _s(wl, iso):
    return (np.datetime64(iso) - np.datetime64(wl.time_origin)) / np.timedelta64(1, "s")


def test_vc_jobs_and_load():
    wl = load_workload("philly:start=2017-10-01,end=2017-11-30,vc=6214e9")
    assert len(wl) == 33_950 and set(wl.vc.tolist()) == {wl.vc_names.index("6214e9")}
    two = load_workload("philly:vc=6214e9+11cb48")
    assert len(two) == 41_226 + 16_091
    first = load_workload("philly:vc=6214e9,jobs=2000,load=1.2,gpus=64")
    assert len(first) == 2000
    assert first.offered_load(64) == pytest.approx(1.2, rel=1e-12)
    assert first.time_origin is None and first.meta["arrival_scale"] > 0
    # durations and sizes are not touched by the scaling
    raw = load_workload("philly:vc=6214e9,jobs=2000")
    assert np.array_equal(raw.duration, first.duration) and np.array_equal(raw.num_gpus, first.num_gpus)


def test_scale_to_load(philly):
    wl = select(philly, start="2017-11-01", end="2017-11-07")
    for target in (0.5, 2.0):
        out = scale_to_load(wl, target, 128)
        assert out.offered_load(128) == pytest.approx(target, rel=1e-12)
        assert out.submit_time[0] == wl.submit_time[0]


def test_bad_selections(philly):
    with pytest.raises(WorkloadError, match="unknown VC 'nope'; valid: 0e4a51"):
        select(philly, vc="nope")
    with pytest.raises(WorkloadError, match="field 'start'"):
        select(philly, start="October")
    with pytest.raises(WorkloadError, match="field 'load'"):
        scale_to_load(philly, -1, 64)
    with pytest.raises(WorkloadError, match="field 'gpus'"):
        scale_to_load(philly, 1.0, 0)
