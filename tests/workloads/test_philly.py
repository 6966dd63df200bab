import numpy as np
import pytest

from gpusched_envs.workloads import (
    WorkloadError,
    describe,
    load_philly,
    load_workload,
    philly_machines,
    philly_vc_nodes,
)
from gpusched_envs.workloads.philly import PHILLY_JOBS

HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def test_bundled_counts(philly):
    assert len(philly) == 82_247
    assert philly.time_origin == "2017-09-04T10:30:41"
    assert len(philly.vc_names) == 15
    sizes, counts = np.unique(philly.num_gpus, return_counts=True)
    hist = dict(zip(sizes.tolist(), counts.tolist(), strict=True))
    assert hist == {1: 76_627, 2: 1_818, 4: 1_870, 8: 1_643, 12: 7, 16: 199, 24: 7, 32: 67, 64: 6, 128: 3}
    assert np.median(philly.duration) == 1144.0
    assert philly.gpu_seconds() == 3_521_082_502.0
    assert np.all(np.diff(philly.submit_time) >= 0)
    assert np.all(philly.model == -1)


def test_bundled_rows(philly):
    first = philly.job(0)  # earliest submission: 2017-09-04 10:30:41
    assert (first.submit_time, first.duration, first.num_gpus, first.vc) == (0.0, 2240194.0, 8, "7f04ca")
    last = philly.job(82246)
    assert (last.submit_time, last.duration, last.num_gpus, last.vc) == (9408690.0, 64.0, 1, "11cb48")
    # file row 2: 2017-09-29 07:58:32,860662.0,1,860662.0,6c71a0
    t = (np.datetime64("2017-09-29T07:58:32") - np.datetime64("2017-09-04T10:30:41")) / np.timedelta64(1, "s")
    row = np.flatnonzero((philly.submit_time == t) & (philly.duration == 860662.0))
    assert len(row) == 1 and philly.job(int(row[0])).vc == "6c71a0"


def test_vc_counts(philly):
    counts = describe(philly)["vcs"]
    assert counts["6214e9"] == 41_226 and counts["11cb48"] == 16_091 and counts["6c71a0"] == 9_953
    assert counts["b436b2"] == 7_423 and counts["23dbec"] == 8


def test_same_fingerprint(philly):
    assert load_philly().fingerprint() == philly.fingerprint()
    assert load_workload("philly", seed=1).fingerprint() == philly.fingerprint()


def test_machines_and_vcs():
    machines = philly_machines()
    assert len(machines) == 552
    assert sum(1 for _, g, _ in machines if g == 2) == 321 and sum(1 for _, g, _ in machines if g == 8) == 231
    assert machines[0] == ("m0", 2, 12)
    vcs = philly_vc_nodes()
    assert len(vcs) == 11 and vcs["6214e9"] == 64 and sum(vcs.values()) == 352


def test_plain_and_gzip_user_file(write):
    text = HEADER + "2017-10-01 00:00:10,100.0,2,200.0,vcA\n2017-10-01 00:00:00,50,1,50,vcB\n\n"
    for name in ("mine.csv", "mine.csv.gz"):
        wl = load_philly(write(name, text))
        assert len(wl) == 2 and wl.time_origin == "2017-10-01T00:00:00"
        assert wl.job(0).vc == "vcB" and wl.job(1).submit_time == 10.0 and wl.job(1).num_gpus == 2
    wl = load_workload(f"philly:path={write('w.csv', text)}")
    assert len(wl) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            HEADER + "2017-10-01 00:00:00,100,1,100,a\n2017-10-01 00:00:05,-5,1,-5,a\n",
            "row 2, field 'duration': -5 is negative",
        ),
        (HEADER + "2017-10-01 00:00:00,abc,1,100,a\n", "row 1, field 'duration': 'abc' is not a number"),
        (
            HEADER + "2017-10-01 00:00:00,100,1.5,100,a\n",
            "row 1, field 'num_gpus': '1.5' is not a whole number",
        ),
        (HEADER + "2017-10-01 00:00:00,100,0,0,a\n", "row 1, field 'num_gpus'"),
        (HEADER + "2017-10-01 00:00:00,100,1,100,a\nyesterday,100,1,100,a\n", "row 2, field 'timestamp'"),
        (HEADER + "2017-10-01 00:00:00,100,1,100,a\n2017-10-01 00:00:00,100\n", "row 2, field 'num_gpus'"),
        (
            "timestamp,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,1,100,a\n",
            "header, field 'duration': missing column",
        ),
        ("", "empty file"),
        (HEADER, "row 1: no data rows"),
    ],
)
def test_malformed(write, text, expected):
    path = write("philly_jobs.csv", text)
    with pytest.raises(WorkloadError) as err:
        load_philly(path)
    msg = str(err.value)
    assert msg.startswith("philly_jobs.csv: ") and expected in msg
    assert "\n" not in msg


def test_max_gpus(write):
    path = write(
        "philly_jobs.csv", HEADER + "2017-10-01 00:00:00,100,1,100,a\n2017-10-01 00:01:00,100,16,1600,a\n"
    )
    with pytest.raises(
        WorkloadError, match=r"^philly_jobs.csv: row 2, field 'num_gpus': job asks for 16 GPUs"
    ):
        load_philly(path, max_gpus=8)
    assert len(load_philly(path, max_gpus=16)) == 2
    with pytest.raises(WorkloadError, match="row 2, field 'num_gpus'"):
        load_workload(f"philly:path={path},max_gpus=8")


def test_bundled_max_gpus_error():
    with pytest.raises(
        WorkloadError, match=r"^philly_jobs_sia.csv.gz: row \d+, field 'num_gpus': job asks for 128"
    ):
        load_philly(max_gpus=64)


def test_truncated_gzip(tmp_path):
    data = PHILLY_JOBS.read_bytes()
    path = tmp_path / "philly_cut.csv.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(WorkloadError) as err:
        load_philly(path)
    msg = str(err.value)
    assert msg.startswith("philly_cut.csv.gz: row ") and "truncated" in msg and "\n" not in msg


def test_zero_duration_dropped(write):
    wl = load_philly(write("p.csv", HEADER + "2017-10-01 00:00:00,0,1,0,a\n2017-10-01 00:00:01,5,1,5,a\n"))
    assert len(wl) == 1 and wl.meta["dropped"]["zero_duration"] == 1


def test_a_file_is_parsed_once_per_version(tmp_path):
    """Loads of the same file share one parse; a changed file is read again; callers get their own arrays."""
    import os

    from gpusched_envs.workloads import philly as philly_module

    f = tmp_path / "p.csv"
    f.write_text(HEADER + "2017-10-01 00:00:00,100,1,100,a\n2017-10-01 00:01:00,50,2,100,b\n")
    philly_module._parse_philly.cache_clear()
    first = load_philly(f)
    first.duration[0] = -1.0  # a caller's change stays its own
    second = load_philly(f)
    assert philly_module._parse_philly.cache_info().hits == 1
    assert second.duration.tolist() == [100.0, 50.0]
    f.write_text(HEADER + "2017-10-01 00:00:00,70,4,280,a\n")
    os.utime(f, ns=(1, 1))  # a new version even on a coarse clock
    third = load_philly(f)
    assert third.duration.tolist() == [70.0] and third.num_gpus.tolist() == [4]
