"""The gpusched command as a user runs it: tables, --json, errors as one line, determinism."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpusched_envs.sim.metrics import METRIC_KEYS


def gpusched(*args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "gpusched_envs.cli", *args], capture_output=True, text=True, timeout=300
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


SMALL = ["--cluster", "tiny", "--workload", "synthetic:jobs=60,load=0.9,gpus=16", "--policy", "tiresias"]


def test_simulate_json_is_documented_and_byte_identical(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    out = gpusched("simulate", *SMALL, "--seed", "3", "--json", str(a))
    gpusched("simulate", *SMALL, "--seed", "3", "--json", str(b))
    assert a.read_bytes() == b.read_bytes()
    doc = json.loads(a.read_text())
    for key in ("jobs", "avg_jct", "p95_jct", "makespan", "avg_queueing_delay"):
        assert key in doc
    assert set(doc["metrics"]) == set(METRIC_KEYS)
    assert doc["jobs"] == 60 and doc["cluster"] == "tiny" and doc["policy"] == "tiresias"
    assert "avg_jct" in out.stdout and "lower bound" in out.stdout
    c = tmp_path / "c.json"
    gpusched("simulate", *SMALL, "--seed", "4", "--json", str(c))
    assert json.loads(c.read_text())["avg_jct"] != doc["avg_jct"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["simulate", "--policy", "lottery"], "unknown policy 'lottery'"),
        (["simulate", "--placement", "anywhere"], "unknown placement 'anywhere'"),
        (["simulate", "--cluster", "moon-base"], "unknown cluster 'moon-base'"),
        (["simulate", "--workload", "nosuch"], "nosuch"),
        (["simulate", "--cluster", "tiny", "--workload", "philly:jobs=20000"], "asks for"),
        (["simulate", "--speed-model", "warp"], "speed_model"),
    ],
)
def test_bad_input_is_one_line_without_traceback(args, message):
    proc = gpusched(*args, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert message in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.startswith("error:")]) == 1


def test_impossible_cluster_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("racks:\n  - servers: [{gpus: 0, gpu_type: V100}]\n")
    proc = gpusched("simulate", "--cluster", str(path), check=False)
    assert proc.returncode == 2 and "gpus: must be an integer >= 1" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_clusters_and_workloads_listings():
    assert "philly-vc" in gpusched("clusters").stdout
    assert "synthetic" in gpusched("workloads").stdout
    out = gpusched("workloads", "philly:start=2017-10-01,end=2017-10-01", "--cluster", "philly").stdout
    assert "271" in out


def test_bench_quick(tmp_path):
    out = tmp_path / "bench.json"
    gpusched("bench", "--quick", "--out", str(out))
    doc = json.loads(out.read_text())
    names = [b["name"] for b in doc["benchmarks"]]
    assert any(n.startswith("philly replay") for n in names)
    assert all(b["value"] > 0 for b in doc["benchmarks"])


def test_malformed_trace_file_fails_with_file_row_and_field(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,abc,1,1,vc1\n")
    proc = gpusched("simulate", "--workload", f"philly:path={path}", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "jobs.csv" in proc.stderr and "row 1" in proc.stderr and "duration" in proc.stderr


def test_simulate_plain_synthetic_on_tiny_runs_at_the_default_load():
    # without sizing, "synthetic" arrives at the traced cluster's rate: offered load ~23 on tiny's 16 GPUs and an
    # average JCT of millions of seconds; sized, it is load 0.9 over the cluster's GPUs
    from gpusched_envs.cli import run_simulation
    from gpusched_envs.sim import load_cluster
    from gpusched_envs.workloads import load_workload
    from gpusched_envs.workloads.sizing import fit_workload_to_cluster

    doc = run_simulation("tiny", "synthetic:jobs=100", "fifo", "closest", seed=0)
    sized = load_workload(fit_workload_to_cluster("synthetic:jobs=100", load_cluster("tiny")), seed=0)
    assert doc["workload_fingerprint"] == sized.fingerprint()
    assert sized.offered_load(16) == pytest.approx(0.9, rel=1e-6)
    assert doc["jobs"] == 100 and doc["avg_jct"] < 1e5
