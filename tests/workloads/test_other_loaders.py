import numpy as np
import pytest

from gpusched_envs.workloads import (
    WorkloadError,
    load_helios,
    load_openb,
    load_pai2020,
    load_sia,
    load_workload,
    openb_nodes,
    pai2020_machines,
)

# ---------------------------------------------------------------- openb (bundled)


def test_openb_bundled():
    wl = load_openb()
    assert len(wl) == 7_063  # 8,152 pods - 1,088 CPU-only - 1 zero-length pod
    assert wl.meta["dropped"] == {"cpu_only": 1_088, "zero_duration": 1}
    sizes, counts = np.unique(wl.num_gpus, return_counts=True)
    assert dict(zip(sizes.tolist(), counts.tolist(), strict=True)) == {1: 6_988, 2: 16, 4: 15, 8: 44}
    assert int(np.sum(wl.gpu_milli < 1000)) == 3_077
    j0, j1 = wl.job(0), wl.job(1)
    assert (j0.name, j0.submit_time, j0.duration, j0.gpu_milli) == ("openb-pod-0000", 0.0, 12_537_496.0, 1000)
    assert (j1.name, j1.submit_time, j1.duration, j1.gpu_milli) == (
        "openb-pod-0001",
        427_061.0,
        12_475_899.0,
        460,
    )
    assert len(wl.meta["qos"]) == len(wl) and wl.meta["qos"][0] == "LS"
    assert load_workload("openb").fingerprint() == wl.fingerprint()


def test_openb_nodes_and_pai_machines():
    nodes = openb_nodes()
    assert len(nodes["sn"]) == 1_213 and int(nodes["gpu"].sum()) == 6_212
    assert nodes["model"][0] == "P100" and nodes["gpu"][0] == 2
    m = pai2020_machines()
    assert len(m["machine"]) == 1_897 and int(m["cap_gpu"].sum()) == 6_742
    assert int(np.sum(m["gpu_type"] == "CPU")) == 83


OPENB_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def test_openb_user_file(write):
    text = OPENB_HEADER + (
        "p0,1000,1024,1,500,V100M16|V100M32,LS,Running,10,110,20\n"
        "p1,1000,1024,0,0,,BE,Running,0,50,0\n"
        "p2,1000,1024,2,1000,,LS,Pending,5,65,\n"
    )
    wl = load_openb(write("pods.csv.gz", text))
    assert len(wl) == 2
    assert wl.job(0).name == "p2" and wl.job(0).duration == 60.0  # never scheduled: its requested lifetime
    assert (
        wl.job(1).gpu_type == "V100M16|V100M32" and wl.job(1).gpu_milli == 500 and wl.job(1).duration == 90.0
    )


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("p0,1,1,1,500,,LS,Running,100,50,100", "row 1, field 'deletion_time'"),
        ("p0,1,1,x,500,,LS,Running,0,50,0", "row 1, field 'num_gpu': 'x' is not a number"),
        ("p0,1,1,1,5000,,LS,Running,0,50,0", "row 1, field 'gpu_milli'"),
        ("p0,1,1,-1,500,,LS,Running,0,50,0", "row 1, field 'num_gpu': -1 is negative"),
    ],
)
def test_openb_malformed(write, row, expected):
    with pytest.raises(WorkloadError) as err:
        load_openb(write("pods.csv", OPENB_HEADER + row + "\n"))
    assert str(err.value).startswith("pods.csv: ") and expected in str(err.value)


def test_openb_max_gpus():
    with pytest.raises(
        WorkloadError, match=r"^openb_pod_list_default.csv.gz: row \d+, field 'num_gpu': job asks for 8"
    ):
        load_openb(max_gpus=4)


# ---------------------------------------------------------------- PAI 2020 (official headerless layouts)

TASKS = (
    "4f057009a5d481acec67b088,tensorflow,1.0,Terminated,1739162.0,1739200.0,600.0,29.296875,50.0,MISC\n"
    "aa0000000000000000000001,worker,2.0,Terminated,1000.0,5000.0,400.0,10.0,100.0,V100\n"
    "aa0000000000000000000001,ps,1.0,Terminated,900.0,5100.0,600.0,10.0,,\n"
    "bb0000000000000000000002,worker,1.0,Failed,2000.0,2600.0,400.0,10.0,800.0,V100M32\n"
    "cc0000000000000000000003,worker,1.0,Waiting,,,400.0,10.0,100.0,\n"
    "dd0000000000000000000004,worker,1.0,Terminated,3000.0,3500.0,400.0,10.0,0.0,\n"
)
JOBS = (
    "4f057009a5d481acec67b088,8cb3be,58540f191766,Terminated,1739100.0,1739200.0\n"
    "aa0000000000000000000001,11aa,user1,Terminated,800.0,5100.0\n"
    "bb0000000000000000000002,22bb,user2,Failed,1990.0,2600.0\n"
)


def test_pai2020(write, tmp_path):
    write("pai_task_table.csv", TASKS)
    write("pai_job_table.csv", JOBS)
    wl = load_pai2020(tmp_path)
    assert len(wl) == 3 and wl.meta["time_offset_s"] == 800.0
    a, b, c = (wl.job(i) for i in range(3))
    assert (a.name, a.submit_time, a.duration, a.num_gpus, a.gpu_milli, a.gpu_type) == (
        "aa0000000000000000000001",
        0.0,
        4000.0,
        2,
        1000,
        "V100",
    )
    assert (b.submit_time, b.duration, b.num_gpus, b.gpu_type) == (1190.0, 600.0, 8, "V100M32")
    assert (c.duration, c.num_gpus, c.gpu_milli, c.gpu_type) == (38.0, 1, 500, "MISC")
    assert wl.meta["dropped"]["untimed_gpu_tasks"] == 1
    only_tasks = load_pai2020(tmp_path / "pai_task_table.csv")
    assert only_tasks.job(0).submit_time == 0.0 and only_tasks.job(1).submit_time == 1000.0
    spec = load_workload(f"pai2020:path={tmp_path}")
    assert spec.fingerprint() == wl.fingerprint()
    assert load_pai2020(tmp_path, statuses=("Terminated",)).meta["dropped"]["status_gpu_tasks"] == 1


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("x1,worker,1.0,Terminated,100.0,50.0,400.0,10.0,100.0,V100", "row 2, field 'end_time'"),
        (
            "x1,worker,1.0,Terminated,abc,50.0,400.0,10.0,100.0,V100",
            "row 2, field 'start_time': 'abc' is not a number",
        ),
        (
            "x1,worker,1.0,Terminated,10.0,50.0,400.0,10.0,-100.0,V100",
            "row 2, field 'plan_gpu': -100.0 is negative",
        ),
        ("x1,worker,1.0,Terminated,10.0", "row 2, field 'end_time'"),
    ],
)
def test_pai2020_malformed(write, row, expected):
    path = write("pai_task_table.csv", TASKS.splitlines()[0] + "\n" + row + "\n")
    with pytest.raises(WorkloadError) as err:
        load_pai2020(path)
    assert str(err.value).startswith("pai_task_table.csv: ") and expected in str(err.value)


def test_pai2020_max_gpus(write):
    with pytest.raises(
        WorkloadError, match=r"^pai_task_table.csv: row 4, field 'plan_gpu': job asks for 8 GPUs"
    ):
        load_pai2020(write("pai_task_table.csv", TASKS), max_gpus=4)


# ---------------------------------------------------------------- Helios cluster_log.csv

HELIOS = (
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
    "1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0\n"
    "1425512,uVMrF,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0\n"
    "1425513,uzqls,vcpDC,1,1,1,CANCELLED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-17 14:15:21,675233,0\n"
    "1425514,uzqls,vcpDC,0,4,1,COMPLETED,2020-06-09 18:42:00,2020-06-09 18:42:00,2020-06-09 18:43:00,60,0\n"
    "1425515,uzqls,vcpDC,8,4,1,CANCELLED,2020-06-09 18:43:00,,2020-06-09 18:44:00,0,60\n"
)


def test_helios(write):
    path = write("cluster_log.csv", HELIOS)
    wl = load_helios(path)
    assert len(wl) == 3 and wl.time_origin == "2020-06-09T18:41:01"
    assert wl.meta["dropped"] == {"cpu_only": 1, "no_run": 1}
    j = wl.job(1)
    assert (j.name, j.submit_time, j.duration, j.num_gpus, j.vc) == ("1425512", 26.0, 249.0, 4, "vchbv")
    assert len(load_helios(path, states=("COMPLETED",))) == 1
    w2 = load_workload(f"helios:path={path},start=2020-06-09 18:41:20,vc=vcpDC")
    assert len(w2) == 1 and w2.job(0).duration == 675_233.0


def test_helios_with_jobname_column(write):
    text = "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration\n"
    text += "1,u,vc1,train,2,8,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:05,2020-06-09 19:41:05,3600\n"
    wl = load_helios(write("cluster_log.csv.gz", text))
    assert len(wl) == 1 and wl.job(0).num_gpus == 2


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("7,u,vc1,1,1,1,COMPLETED,2020-06-09 18:41:01,,,-4,0", "row 2, field 'duration': -4 is negative"),
        (
            "7,u,vc1,one,1,1,COMPLETED,2020-06-09 18:41:01,,,4,0",
            "row 2, field 'gpu_num': 'one' is not a number",
        ),
        ("7,u,vc1,1,1,1,COMPLETED,09/06/2020,,,4,0", "row 2, field 'submit_time'"),
    ],
)
def test_helios_malformed(write, line, expected):
    path = write(
        "cluster_log.csv", HELIOS.splitlines(keepends=True)[0] + HELIOS.splitlines(keepends=True)[1] + line
    )
    with pytest.raises(WorkloadError) as err:
        load_helios(path)
    assert str(err.value).startswith("cluster_log.csv: ") and expected in str(err.value)


def test_helios_missing_column(write):
    with pytest.raises(WorkloadError, match=r"^cluster_log.csv: header, field 'gpu_num': missing column"):
        load_helios(write("cluster_log.csv", "job_id,submit_time,duration\n1,2020-06-09 18:41:01,5\n"))


# ---------------------------------------------------------------- Sia / Pollux workload CSV

SIA = (
    "name,time,application,num_replicas,batch_size\n"
    "cifar10-0,107,cifar10,6,2048\n"
    "deepspeech2-1,110,deepspeech2,6,320\n"
    "imagenet-2,90,imagenet,16,4096\n"
)


def test_sia(write):
    wl = load_sia(write("workload-1.csv", SIA))
    assert wl.model_names == ("cifar10", "deepspeech2", "bert", "yolov3", "imagenet")
    assert [wl.job(i).name for i in range(3)] == ["imagenet-2", "cifar10-0", "deepspeech2-1"]
    assert [wl.job(i).model for i in range(3)] == ["imagenet", "cifar10", "deepspeech2"]
    assert wl.job(1).duration == round(0.316 * 3600 / 6) and wl.job(0).num_gpus == 16
    assert list(wl.meta["batch_size"]) == [4096, 2048, 320]
    assert (
        load_workload(f"sia:path={write('w.csv', SIA)}").fingerprint()
        == load_sia(write("w.csv", SIA)).fingerprint()
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("gan-3,5,cyclegan,1,64", "row 4, field 'application': unknown application 'cyclegan'"),
        ("bert-3,-5,bert,1,64", "row 4, field 'time': -5 is negative"),
        ("bert-3,5,bert,0,64", "row 4, field 'num_replicas'"),
        ("bert-3,soon,bert,1,64", "row 4, field 'time': 'soon' is not a number"),
    ],
)
def test_sia_malformed(write, line, expected):
    with pytest.raises(WorkloadError) as err:
        load_sia(write("workload-1.csv", SIA + line + "\n"))
    assert str(err.value).startswith("workload-1.csv: ") and expected in str(err.value)
