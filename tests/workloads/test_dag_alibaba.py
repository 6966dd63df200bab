"""Alibaba 2018 batch_task loader on hand-written rows in the official headerless 9-column layout."""

from __future__ import annotations

import gzip

import pytest

from gpusched_envs.workloads.dag import load_alibaba2018, load_dag, parse_task_name
from gpusched_envs.workloads.dag.alibaba2018 import NAME_LIMIT, load_alibaba2018_job
from gpusched_envs.workloads.errors import WorkloadError

# task_name, instance_num, job_name, task_type, status, start_time, end_time, plan_cpu, plan_mem
ROWS = [
    "M1,10,j_1,1,Terminated,100,110,100,0.5",
    "M2,5,j_1,1,Terminated,100,104,50,0.3",
    "J3_1_2,1,j_1,1,Terminated,110,130,100,0.2",
    "R4_3,1,j_1,1,Terminated,130,131,100,0.2",
    "task_Nzg3ODAwNjgzODc2MTE3ODE5Mw==,1,j_2,1,Terminated,5,9,100,0.1",
    "M1,1,j_3,1,Running,200,0,100,0.1",
    "R2_1,1,j_3,1,Terminated,210,230,100,0.1",
]


def truncated_job() -> tuple[list[str], str]:
    """A job whose task 5 lists 17 parents; its name is cut at 50 characters so that the last parent 100 reads
    as 1 -- and task 1 depends on 5, so keeping the cut id makes a spurious 1 <-> 5 cycle (as in the trace)."""
    ids = [2, 3, *range(10, 24)]
    full = "M5_" + "_".join(map(str, ids)) + "_100"
    cut = full[:NAME_LIMIT]
    assert len(cut) == 50 and cut.endswith("_1")
    rows = [f"M{i},1,j_9,1,Terminated,0,0,100,0.1" for i in ids]
    rows += [f"{cut},1,j_9,1,Terminated,10,20,100,0.1", "R1_5,1,j_9,1,Terminated,20,25,100,0.1"]
    return rows, cut


def write(tmp_path, rows, name="batch_task.csv", gz=False):
    p = tmp_path / (name + (".gz" if gz else ""))
    text = "\n".join(rows) + "\n"
    if gz:
        with gzip.open(p, "wt") as fh:
            fh.write(text)
    else:
        p.write_text(text)
    return p


def test_parse_task_name():
    t = parse_task_name("J3_1_2")
    assert (t.task_id, t.parents, t.truncated) == (3, (1, 2), False)
    assert parse_task_name("M1").parents == ()
    assert parse_task_name("MergeTask").task_id is None
    assert not parse_task_name("task_Nzg3ODAwNjgzODc2MTE3ODE5Mw==").is_dag
    assert parse_task_name("R12_3_4_").parents == (3, 4)


def test_loads_jobs_as_dags(tmp_path):
    dags = load_alibaba2018(write(tmp_path, ROWS, gz=True))
    assert [d.name for d in dags] == ["j_1", "j_2", "j_3"]
    j1 = dags[0]
    assert j1.task_names == ("M1", "M2", "J3_1_2", "R4_3")
    assert sorted(map(tuple, j1.edges.tolist())) == [(0, 2), (1, 2), (2, 3)]
    assert j1.work.tolist() == [10.0, 4.0, 20.0, 1.0]
    assert j1.meta["instance_num"] == [10.0, 5.0, 1.0, 1.0]
    assert j1.depth == 3 and not j1.meta["truncated"]
    assert dags[1].num_tasks == 1 and dags[1].num_edges == 0  # independent task
    j3 = dags[2]
    assert j3.work.tolist() == [20.0, 20.0]  # M1 never ended: the job's median duration is imputed
    assert j3.meta["imputed_work"] == ["M1"]
    assert load_alibaba2018(write(tmp_path, ROWS), min_tasks=2, dag_only=True)[0].name == "j_1"


def test_header_line_accepted(tmp_path):
    header = "task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem"
    p = write(tmp_path, [header] + ROWS)
    assert [d.name for d in load_alibaba2018(p, jobs=["j_1", "j_3"])] == ["j_1", "j_3"]
    d = load_dag(f"dag:alibaba2018:path={p},job=j_1")
    assert d.num_tasks == 4


def test_truncated_names_flagged_and_cut_parent_dropped(tmp_path):
    rows, cut = truncated_job()
    p = write(tmp_path, rows)
    d = load_alibaba2018_job(p, "j_9")
    assert d.meta["truncated"] and d.meta["truncated_tasks"] == [cut]
    assert d.meta["dropped_parents"] == [f"{cut}: parent 1"]
    five = d.task_names.index(cut)
    one = d.task_names.index("R1_5")
    assert d.parents(five).size == 16 and one not in d.parents(five)
    assert five in d.parents(one)
    with pytest.raises(WorkloadError, match="not acyclic.*truncated"):
        load_alibaba2018(p, truncated="keep")
    assert load_alibaba2018(p, truncated="skip_job") == []


def test_bad_rows_name_file_row_field(tmp_path):
    p = write(tmp_path, [ROWS[0], "M2,1,j_1,1,Terminated,abc,10,100,0.1"])
    with pytest.raises(
        WorkloadError, match=r"batch_task.csv: row 2, field 'start_time': 'abc' is not a number"
    ):
        load_alibaba2018(p)
    p = write(tmp_path, [ROWS[0], "M2,1,j_1,1,Terminated,10"], name="short.csv")
    with pytest.raises(WorkloadError, match=r"short.csv: row 2: expected 9 columns"):
        load_alibaba2018(p)
    p = write(tmp_path, ["M1,1,j_1,1,T,0,1,1,1", "M1_1,1,j_1,1,T,0,1,1,1"], name="dup.csv")
    with pytest.raises(WorkloadError, match="task id 1 appears twice"):
        load_alibaba2018(p)
    with pytest.raises(WorkloadError, match="not found"):
        load_alibaba2018(tmp_path / "missing.csv")
    with pytest.raises(WorkloadError, match="not found"):
        load_alibaba2018(write(tmp_path, ROWS), jobs="j_404")
