"""Hardening: untrusted input cannot run code, replace special files or exhaust memory; every bad input is
one clear line (exit 2, no traceback); the newcomer paths of the README work. Each class of the issue has a case of
its own; they fail on the code before the fix."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from gpusched_envs import cli
from gpusched_envs.io import OutputPathError, atomic_write_text, check_output_path, dumps_json
from gpusched_envs.safety import MAX_SEEDS, LimitError, load_yaml
from gpusched_envs.sim import load_cluster
from gpusched_envs.sim.topology import ClusterConfigError
from gpusched_envs.workloads import (
    WorkloadError,
    load_helios,
    load_openb,
    load_pai2020,
    load_philly,
    load_sia,
    load_workload,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.parent for p in (ROOT / "checkpoints").rglob("meta.json"))


@pytest.fixture
def gpusched(monkeypatch, capsys):
    """Run ``gpusched ARGS`` in-process (the library's own commands): ``(exit code, stdout, stderr)``."""
    monkeypatch.setattr(cli, "_add_plugin_commands", lambda: None)

    def run(*args: str) -> tuple[int, str, str]:
        code = 0
        try:
            cli.main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return run


def assert_one_line(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# ====================================================================================== security: checkpoints


def copy_checkpoint(tmp_path: Path, name: str = "ppo_jobselect_gnn") -> Path:
    dst = tmp_path / "ckpt"
    shutil.copytree(ROOT / "checkpoints" / name, dst)
    return dst


def edit_meta(folder: Path, **changes) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    for key, value in changes.items():
        if value is ...:
            meta.pop(key, None)
        else:
            meta[key] = value
    (folder / "meta.json").write_text(json.dumps(meta))


def test_checkpoint_env_id_naming_a_module_is_refused_before_import(tmp_path, monkeypatch):
    from gpusched_lab import agents
    from gpusched_lab.agents.checkpoint import CheckpointError

    folder = copy_checkpoint(tmp_path)
    marker = tmp_path / "ran"
    (tmp_path / "evil_ckpt_mod.py").write_text(f"open({str(marker)!r}, 'w').write('pwned')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    edit_meta(folder, env_id="evil_ckpt_mod:Evil-v0")
    with pytest.raises(CheckpointError, match=r"env_id 'evil_ckpt_mod:Evil-v0' is not an env"):
        agents.load(folder)
    assert not marker.exists() and "evil_ckpt_mod" not in sys.modules


def test_leaderboard_resolves_every_shipped_checkpoint(tmp_path):
    """Policy checkpoints are validated; HMARL actors become multi-agent leaderboard agents; other kinds (interference
    models) are skipped, not errors."""
    from gpusched_lab.evaluate.agents import resolve_agent, shipped_checkpoints
    from gpusched_lab.evaluate.scenarios import MARL_ENV_ID

    from gpusched_envs.envs import ENTRY_POINTS

    scenario = None  # another kind of checkpoint is refused before any scenario is looked at
    for spec in shipped_checkpoints():
        agent = resolve_agent(spec)
        meta = json.loads((Path(spec) / "meta.json").read_text())
        if meta.get("env_id") in ENTRY_POINTS:
            assert agent._other_kind is None
        elif meta.get("env_id") == MARL_ENV_ID:  # HMARL actors: multi-agent scenarios only
            assert agent.kind == "marl-checkpoint"
        else:
            assert "not a policy of a gym env" in agent.applies_to(scenario)


def test_checkpoint_evaluate_agent_refuses_the_same(tmp_path, monkeypatch):
    from gpusched_lab.evaluate.agents import AgentSpecError, resolve_agent

    folder = copy_checkpoint(tmp_path)
    marker = tmp_path / "ran"
    (tmp_path / "evil_ckpt_mod2.py").write_text(f"open({str(marker)!r}, 'w').write('pwned')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    edit_meta(folder, env_id="evil_ckpt_mod2:Evil-v0")
    with pytest.raises(AgentSpecError, match="is not an env of this package"):
        resolve_agent(str(folder))
    assert not marker.exists()


def test_train_config_env_naming_a_module_is_refused_before_import(tmp_path, monkeypatch):
    from gpusched_lab.agents.common import make_env

    marker = tmp_path / "ran"
    (tmp_path / "evil_cfg_mod.py").write_text(f"open({str(marker)!r}, 'w').write('pwned')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="env id 'evil_cfg_mod:Evil-v0' is not registered"):
        make_env("evil_cfg_mod:Evil-v0", {})
    assert not marker.exists() and "evil_cfg_mod" not in sys.modules


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cluster": "/etc/passwd"}, "env_kwargs['cluster'] = '/etc/passwd' is not a bundled preset"),
        ({"cluster": "topdrl", "workload": "philly:path=/etc/passwd"}, "names a file (path=/etc/passwd)"),
        (
            {"cluster": "topdrl", "workload": "synthetic:fit=../../evil.yaml"},
            "names a file (fit=../../evil.yaml)",
        ),
        ({"cluster": "topdrl", "obs_mode": {"nested": 1}}, "env_kwargs['obs_mode'] must be"),
    ],
)
def test_checkpoint_env_kwargs_may_not_name_files(tmp_path, kwargs, message):
    from gpusched_lab import agents
    from gpusched_lab.agents.checkpoint import CheckpointError

    folder = copy_checkpoint(tmp_path)
    meta = json.loads((folder / "meta.json").read_text())
    edit_meta(folder, env_kwargs={**meta["env_kwargs"], **kwargs})
    with pytest.raises(CheckpointError) as err:
        agents.load(folder)
    assert message in str(err.value) and "meta.json" in str(err.value)


def test_checkpoint_allowed_env_ids_is_the_callers_choice(tmp_path):
    from gpusched_lab.agents.checkpoint import CheckpointError, read_policy_meta

    folder = copy_checkpoint(tmp_path)
    edit_meta(folder, env_id="other/Env-v0")
    with pytest.raises(CheckpointError):
        read_policy_meta(folder)
    assert read_policy_meta(folder, allowed_env_ids=["other/Env-v0"])["env_id"] == "other/Env-v0"


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_shipped_checkpoints_record_and_verify_model_sha256(folder, tmp_path):
    from gpusched_lab import agents
    from gpusched_lab.agents.checkpoint import CheckpointCorruptError, read_meta

    from gpusched_envs.envs import ENTRY_POINTS

    meta = json.loads((folder / "meta.json").read_text())
    assert meta["model_sha256"] == hashlib.sha256((folder / "model.pt").read_bytes()).hexdigest()
    assert read_meta(folder) == meta  # every kind of checkpoint (HMARL actors, interference models too)
    if meta.get("env_id") not in ENTRY_POINTS:
        return  # loaded by agents.methods.hmarl.agent / agents.methods.hmarl.interference, which verify the hash through read_model_bytes
    agents.load(folder, require_sha256=True)
    tampered = tmp_path / "ckpt"
    shutil.copytree(folder, tampered)
    data = bytearray((tampered / "model.pt").read_bytes())
    data[-100] ^= 0xFF
    (tampered / "model.pt").write_bytes(bytes(data))
    with pytest.raises(CheckpointCorruptError, match="does not match meta.json"):
        agents.load(tampered)
    edit_meta(tampered, model_sha256=...)
    with pytest.raises(CheckpointCorruptError, match="no model_sha256"):
        agents.load(tampered, require_sha256=True)


# ====================================================================================== security: output paths


def test_writer_refuses_fifo_directory_and_device(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputPathError, match="is a FIFO"):
        atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # not replaced
    link = tmp_path / "link"
    link.symlink_to(fifo)
    with pytest.raises(OutputPathError, match="is a FIFO"):
        atomic_write_text(link, "x")
    assert link.is_symlink()
    with pytest.raises(OutputPathError, match="is a directory"):
        atomic_write_text(tmp_path, "x")
    with pytest.raises(OutputPathError, match="is a device"):
        check_output_path("/dev/null")
    atomic_write_text(tmp_path / "ok.json", "{}")  # regular files (and absent ones) are fine
    atomic_write_text(tmp_path / "ok.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link", "ok.json"]


def test_simulate_json_to_a_fifo_is_one_line_and_the_fifo_stays(tmp_path, gpusched):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    code, out, err = gpusched("simulate", "--workload", "synthetic:jobs=5", "--json", str(fifo))
    assert_one_line(code, out, err, "is a FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_leaderboard_output_fifo_is_refused_before_the_grid_runs(tmp_path, capsys):
    from gpusched_lab.evaluate import cli as ecli

    (tmp_path / "lb").mkdir()
    os.mkfifo(tmp_path / "lb" / "leaderboard.json")
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as exc:
        ecli.main(["leaderboard", "--suite", "quick", "--agents", "fifo", "--out", str(tmp_path / "lb")])
    out, err = capsys.readouterr()
    assert_one_line(exc.value.code, out, err, "leaderboard.json: is a FIFO")
    assert time.perf_counter() - t0 < 10 and sorted(p.name for p in (tmp_path / "lb").iterdir()) == [
        "leaderboard.json"
    ]


def test_checkpoint_save_and_leaderboard_writers_share_the_check(tmp_path):
    import importlib
    import inspect

    from gpusched_lab.agents import checkpoint
    from gpusched_lab.evaluate import cache

    # the modules themselves (the package's __init__ re-exports functions of the same names, e.g. plots)
    files, html, leaderboard, plots = (
        importlib.import_module(f"gpusched_lab.evaluate.report.{name}")
        for name in ("files", "html", "leaderboard", "plots")
    )

    # every writer goes through gpusched_envs.io (so through check_output_path); none opens files for writing itself
    for module in (checkpoint, files, cache):
        src = inspect.getsource(module)
        assert "atomic_write" in src and "open(" not in src.replace("fdopen(", "")
    # the report's page, tables and plots are written by report.files' writers
    for module in (leaderboard, html, plots):
        src = inspect.getsource(module)
        assert "from gpusched_lab.evaluate.report.files import" in src, module.__name__
        assert "open(" not in src and "atomic_write" not in src, module.__name__
        assert ".write_text(" not in src and ".write_bytes(" not in src, module.__name__


# ====================================================================================== security: resource bombs

BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)


def test_billion_laughs_in_a_scalar_field_is_refused_fast(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BILLION_LAUGHS + "name: *i\nracks: [{servers: [{gpus: 4, gpu_type: V100}]}]\n")
    t0 = time.perf_counter()
    with pytest.raises(ClusterConfigError, match=r"bomb.yaml: YAML expands past the limit"):
        load_cluster(str(path))
    assert time.perf_counter() - t0 < 5


def test_anchor_expansion_to_1e8_servers_is_refused_before_allocating(tmp_path):
    servers = "s0: &s0 [" + ",".join(["{gpus: 8, gpu_type: V100}"] * 10) + "]\n"
    levels = "".join(f"s{i}: &s{i} [" + ",".join([f"*s{i - 1}"] * 10) + "]\n" for i in range(1, 8))
    path = tmp_path / "big.yaml"
    path.write_text(servers + levels + "name: big\nracks: [{servers: *s7}]\n")
    with pytest.raises(ClusterConfigError, match="expands past the limit"):
        load_cluster(str(path))
    # the same with a plain count: refused by the server limit, not built
    path.write_text(
        "name: big\nracks: [{count: 100000, servers: [{count: 1000, gpus: 8, gpu_type: V100}]}]\n"
    )
    with pytest.raises(ClusterConfigError, match=r"racks\[0\]\.count: the cluster would have more than"):
        load_cluster(str(path))


def test_yaml_loader_refuses_recursion_and_keeps_small_aliases():
    assert load_yaml("a: &x [1, 2]\nb: *x\n", "f.yaml") == {"a": [1, 2], "b": [1, 2]}
    assert load_yaml(b"\xef\xbb\xbfa: 1\n", "bom.yaml") == {"a": 1}
    with pytest.raises(LimitError, match="recursive YAML alias"):
        load_yaml("&a [*a]", "r.yaml")


def test_suite_and_train_config_and_fit_use_the_safe_loader(tmp_path):
    from gpusched_lab.evaluate.scenarios import SuiteError, load_suite
    from gpusched_lab.train.config import load_yaml as load_train_config

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BILLION_LAUGHS + "name: *i\n")
    with pytest.raises(SuiteError, match="expands past the limit"):
        load_suite(str(bomb))
    with pytest.raises(LimitError, match="expands past the limit"):
        load_train_config(bomb)
    with pytest.raises(WorkloadError, match=r"^bomb.yaml: YAML expands past the limit"):
        load_workload(f"synthetic:jobs=5,fit={bomb}")


def test_huge_seed_range_is_refused_before_allocating():
    from gpusched_lab.evaluate.scenarios import SuiteError, parse_seeds

    t0 = time.perf_counter()
    with pytest.raises(SuiteError, match=f"999,999,999 seeds, more than the limit of {MAX_SEEDS:,}"):
        parse_seeds("0-999999998")
    assert time.perf_counter() - t0 < 1
    assert parse_seeds("0-3,7") == (0, 1, 2, 3, 7)


# ====================================================================================== one clear line


def test_rich_markup_in_error_text_is_printed_verbatim(gpusched):
    code, out, err = gpusched("simulate", "--cluster", "[/]oops[bold]")
    assert_one_line(code, out, err, "unknown cluster '[/]oops[bold]'")


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ("{gpus: 4, gpu_type: V100, nic: [eth25]}", "servers[0].nic: unknown link ['eth25']"),
        ("{gpus: 4, gpu_type: [V100]}", "servers[0].gpu_type: unknown GPU type ['V100']"),
        ("{gpus: 4e9, gpu_type: V100}", "servers[0].gpus: must be an integer >= 1, got '4e9'"),
        (
            "{gpus: 4000000000, gpu_type: V100}",
            "servers[0].gpus: must be at most 1,024, got 4000000000",
        ),
        (
            "{count: 3000000000, gpus: 4, gpu_type: V100}",
            "servers[0].count: must be at most 1,000,000",
        ),
    ],
)
def test_wrong_yaml_types_and_huge_counts_are_one_line(tmp_path, gpusched, server, message):
    path = tmp_path / "c.yaml"
    path.write_text(f"name: c\nracks: [{{servers: [{server}]}}]\n")
    with pytest.raises(ClusterConfigError) as err:
        load_cluster(str(path))
    assert message in str(err.value)
    code, out, e = gpusched("simulate", "--cluster", str(path), "--workload", "synthetic:jobs=5")
    assert_one_line(code, out, e, message)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d["gpu_sizes"].update(sizes="many"), "gpu_sizes.sizes"),
        (lambda d: d["gpu_sizes"].update(probs=[1.0]), "gpu_sizes.probs"),
        (lambda d: d["duration"]["classes"][0].update(quantiles_s=[1, 2]), "duration.classes[0].quantiles_s"),
        (lambda d: d["duration"].update(classes=7), "duration.classes"),
        (lambda d: d["arrivals"].update(rate_per_hour=".inf"), "arrivals.rate_per_hour"),
        (lambda d: d.update(duration=5), "duration"),
    ],
)
def test_malformed_fit_file_is_one_line(tmp_path, gpusched, edit, field):
    import yaml

    doc = yaml.safe_load((ROOT / "gpusched_envs/data/fits/philly_fit.yaml").read_text())
    edit(doc)
    path = tmp_path / "my_fit.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(WorkloadError) as err:
        load_workload(f"synthetic:jobs=5,fit={path}")
    assert str(err.value).startswith(f"my_fit.yaml: field {field!r}")
    code, out, e = gpusched("simulate", "--workload", f"synthetic:jobs=5,fit={path}")
    assert_one_line(code, out, e, f"field {field!r}")


PHILLY_HEAD = "timestamp,duration,num_gpus,gpu_time,cluster\n"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            ["2017-10-01 00:00:00,1e308,1,0,vc"],
            "row 1, field 'duration': 1e308 is out of range (|value| > 1e+15)",
        ),
        (
            ["2017-10-01 00:00:00,60,1,0,vc", "2017-10-01 00:00:00,2e9,1,0,vc"],
            "row 2, field 'duration': 2e9 s is more",
        ),
        (
            ["2017-10-01 00:00:00,60,1,0,vc", "2017-10-01 00:01:00,inf,1,0,vc"],
            "row 2, field 'duration': 'inf'",
        ),
        (["2017-10-01 00:00:00,0,1,0,vc", "2017-10-01 00:01:00,0,2,0,vc"], "every duration is zero"),
        (["2017-10-01 00:00:00,60,1e20,0,vc"], "row 1, field 'num_gpus': 1e20 is out of range"),
    ],
)
def test_absurd_trace_numbers_are_one_line(write_file, gpusched, rows, message):
    path = write_file("jobs.csv", PHILLY_HEAD + "\n".join(rows) + "\n")
    with pytest.raises(WorkloadError) as err:
        load_philly(path)
    assert str(err.value).startswith("jobs.csv: ") and message in str(err.value)
    code, out, e = gpusched("simulate", "--workload", f"philly:path={path}")
    assert_one_line(code, out, e, message)


def test_inf_batch_size_is_not_int64_min(write_file):
    text = "name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,6,inf\n"
    with pytest.raises(WorkloadError, match=r"row 1, field 'batch_size': 'inf' is not a finite number"):
        load_sia(write_file("w.csv", text))
    ok = load_sia(write_file("w2.csv", "name,time,application,num_replicas,batch_size\nc-0,1,cifar10,6,\n"))
    assert list(ok.meta["batch_size"]) == [0]


# one valid minimal file per loader: (file name, text, loader)
LOADERS = {
    "philly": ("jobs.csv", PHILLY_HEAD + "2017-10-01 00:00:00,60,1,60,vc\n", load_philly),
    "openb": (
        "pods.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\np0,1000,1024,1,500,,LS,Running,10,110,20\n",
        load_openb,
    ),
    "helios": (
        "cluster_log.csv",
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "1,u,vc1,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:42:01,60,0\n",
        load_helios,
    ),
    "sia": ("w.csv", "name,time,application,num_replicas,batch_size\nc-0,1,cifar10,2,64\n", load_sia),
    "pai2020": (
        "pai_task_table.csv",
        "aa0000000000000000000001,worker,1.0,Terminated,1000.0,5000.0,400.0,10.0,100.0,V100\n",
        load_pai2020,
    ),
}


def _load_alibaba2018(path):
    from gpusched_envs.workloads.dag import load_alibaba2018

    class Digest:  # a list of DAGs, compared by its structure
        def __init__(self, dags):
            self.key = repr([(d.name, d.summary()) for d in dags])

        def fingerprint(self):
            return self.key

    return Digest(load_alibaba2018(path))


LOADERS["alibaba2018"] = (
    "batch_task.csv",
    "M1,10,j_1,1,Terminated,100,110,100,0.5\nR2_1,5,j_1,1,Terminated,110,120,50,0.3\n",
    _load_alibaba2018,
)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_every_loader_names_compression_and_encoding_problems(tmp_path, loader):
    name, text, load = LOADERS[loader]
    base = tmp_path / name
    data = text.encode()
    reference = load(_put(base, data)).fingerprint()
    # accepted: a UTF-8 BOM, gzip without .gz, a plain file named .gz (read by content, not by name)
    assert load(_put(base, b"\xef\xbb\xbf" + data)).fingerprint() == reference
    assert load(_put(base, gzip.compress(data, mtime=0))).fingerprint() == reference
    assert load(_put(tmp_path / (name + ".gz"), data)).fingerprint() == reference
    # named: truncated gzip, invalid UTF-8 (plain and compressed), an empty gzip stream
    cases = {
        "truncated or not valid gzip": gzip.compress(data * 50, mtime=0)[:40],
        "not UTF-8 text": data[:-2] + b"\xff\xfe\n",
    }
    for message, blob in cases.items():
        for blob_i in (blob, gzip.compress(blob, mtime=0)) if message == "not UTF-8 text" else (blob,):
            with pytest.raises(WorkloadError) as err:
                load(_put(base, blob_i))
            assert str(err.value).startswith(f"{name}: ") and message in str(err.value)


def _put(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.fixture
def write_file(tmp_path):
    def write(name: str, text: str) -> Path:
        return _put(tmp_path / name, text.encode())

    return write


def test_empty_window_says_so_and_exits_2(gpusched):
    with pytest.raises(WorkloadError, match=r"field 'start': the window start=2030-01-01 leaves no jobs"):
        load_workload("philly:start=2030-01-01")
    code, out, err = gpusched("simulate", "--workload", "philly:start=2030-01-01", "--cluster", "philly")
    assert_one_line(code, out, err, "leaves no jobs")


def test_json_output_never_holds_bare_nan(tmp_path):
    text = dumps_json({"a": float("nan"), "b": [float("inf"), 1.5], "c": np.float64("nan"), "d": np.int64(3)})
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [None, 1.5], "c": None, "d": 3}


def test_unknown_gpu_spec_in_openb_pods_is_named(write_file, gpusched):
    name, text, _ = LOADERS["openb"]
    path = write_file(name, text + "p1,1000,1024,1,500,V100M16|H200X,LS,Running,10,110,20\n")
    with pytest.raises(WorkloadError, match=r"^pods.csv: row 2, field 'gpu_spec': unknown GPU model 'H200X'"):
        load_openb(path)
    code, out, err = gpusched("simulate", "--cluster", "openb", "--workload", f"openb:path={path}")
    assert_one_line(code, out, err, "'H200X'")


def test_negative_seed_names_the_flag(gpusched):
    code, out, err = gpusched("simulate", "--seed", "-1", "--workload", "synthetic:jobs=5")
    assert_one_line(code, out, err, "--seed must be >= 0")
    code, out, err = gpusched("workloads", "synthetic:jobs=5", "--seed", "-3")
    assert_one_line(code, out, err, "--seed must be >= 0")
    code, out, err = gpusched("simulate", "--restart-delay", "nan", "--workload", "synthetic:jobs=5")
    assert_one_line(code, out, err, "--restart-delay must be a finite number")


def test_workload_spec_integers_have_limits():
    with pytest.raises(WorkloadError, match=r"field 'jobs': jobs=1000000000000 is more than the limit"):
        load_workload("synthetic:jobs=1000000000000")


@pytest.fixture
def evaluate_cli(capsys):
    from gpusched_lab.evaluate import cli as ecli

    def run(*args: str) -> tuple[int, str, str]:
        code = 0
        try:
            ecli.main(["evaluate", *args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "gpusched/JobSelect-v1", "--env-kwargs", '{"window": "five"}'], "window"),
        (["--env", "gpusched/JobSelect-v1", "--env-kwargs", "[1]"], "--env-kwargs must be a JSON object"),
        (["--env", "evil_mod:Evil-v0"], "env id 'evil_mod:Evil-v0' is not registered"),
        (["--env", "gpusched/JobSelect-v1", "--seeds", "0-999999999"], "more than the limit"),
    ],
)
def test_evaluate_bad_env_is_one_line_before_any_table(evaluate_cli, args, message):
    seeds = [] if "--seeds" in args else ["--seeds", "0"]
    code, out, err = evaluate_cli("--agent", "fifo", *args, *seeds)
    assert_one_line(code, out, err, message)
    assert out == ""  # no table


def test_evaluate_markup_in_error_text_is_verbatim(evaluate_cli):
    code, out, err = evaluate_cli(
        "--agent", "[/]nosuch[bold]", "--env", "gpusched/JobSelect-v1", "--seeds", "0"
    )
    assert_one_line(code, out, err, "[/]nosuch[bold]")


# ====================================================================================== checkpoints: one line


def _weights_only_refused_pickle() -> bytes:
    import io

    import torch

    buf = io.BytesIO()
    torch.save({"w": torch.zeros(2), "when": np.random.default_rng(0)}, buf)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("empty", "model.pt: empty file"),
        ("truncated", "model.pt: truncated or not a torch weights file"),
        ("pickle", "model.pt: holds Python objects other than tensors; refused"),
        ("no_meta", "meta.json: no checkpoint metadata"),
        ("meta_json", "meta.json: invalid JSON"),
        ("meta_types", "meta.json: field 'network' must be dict, got list"),
        ("meta_format", "meta.json: field 'format' must be int, got str"),
        ("network_field", "meta.json: network.hidden must be a int"),
    ],
)
def test_bad_checkpoint_files_are_one_line_naming_the_file(tmp_path, case, message):
    from gpusched_lab import agents
    from gpusched_lab.agents.checkpoint import CheckpointError

    folder = copy_checkpoint(tmp_path)
    model = folder / "model.pt"
    if case == "empty":
        model.write_bytes(b"")
    elif case == "truncated":
        model.write_bytes(model.read_bytes()[:300])
    elif case == "pickle":
        model.write_bytes(_weights_only_refused_pickle())
    elif case == "no_meta":
        (folder / "meta.json").unlink()
    elif case == "meta_json":
        (folder / "meta.json").write_text("{not json")
    elif case == "meta_types":
        edit_meta(folder, network=[1, 2])
    elif case == "meta_format":
        edit_meta(folder, format="1")
    elif case == "network_field":
        meta = json.loads((folder / "meta.json").read_text())
        edit_meta(folder, network={**meta["network"], "hidden": "64"})
    if case in ("empty", "truncated", "pickle"):
        edit_meta(folder, model_sha256=...)  # a hand-made file without the hash: the loader itself must cope
    with pytest.raises((CheckpointError, FileNotFoundError)) as err:
        agents.load(folder)
    text = str(err.value)
    assert "\n" not in text and message in text and str(folder) in text
    assert "weights_only=False" not in text


# ====================================================================================== newcomer paths


def test_simulate_tiny_with_plain_synthetic_works(gpusched, tmp_path):
    out_json = tmp_path / "m.json"
    code, out, err = gpusched(
        "simulate", "--cluster", "tiny", "--workload", "synthetic:jobs=100", "--json", str(out_json)
    )
    assert code == 0, err
    doc = json.loads(out_json.read_text())
    assert doc["jobs"] == 100 and doc["cluster_gpus"] == 16
    # sized to the cluster: job sizes capped and the offered load computed on its 16 GPUs (0.9 by default)
    assert (
        cli.fit_workload_to_cluster("synthetic", load_cluster("tiny"))
        == "synthetic:load=0.9,gpus=16,max_gpus=16"
    )
    assert (
        cli.fit_workload_to_cluster("synthetic:max_gpus=4", load_cluster("tiny"))
        == "synthetic:max_gpus=4,load=0.9,gpus=16"
    )
    assert cli.fit_workload_to_cluster("philly", load_cluster("tiny")) == "philly"


def test_philly_oversize_drop_counts_and_error_names_file_and_row():
    wl = load_workload("philly:start=2017-10-01,end=2017-10-02,max_gpus=16,oversize=drop")
    assert int(wl.num_gpus.max()) <= 16 and wl.meta["dropped"]["oversize"] == 3
    whole = load_workload("philly:start=2017-10-01,end=2017-10-02")
    assert len(whole) == len(wl) + 3
    with pytest.raises(
        WorkloadError,
        match=r"^philly_jobs_sia.csv.gz: row 29691, field 'num_gpus': job asks for 32 GPUs, more than max_gpus=16",
    ):
        load_workload("philly:start=2017-10-01,end=2017-10-02,max_gpus=16")
    # oversize jobs outside the window do not matter
    assert len(load_workload("philly:jobs=50,max_gpus=16")) == 50


def test_gpu_box_install_target_is_documented():
    makefile = (ROOT / "Makefile").read_text()
    assert "venv-cuda:" in makefile and "TORCH_INDEX" in makefile
    assert "make venv-cuda" in (ROOT / "README.md").read_text()


# ====================================================================================== paths from file contents


@pytest.mark.parametrize("name", ["../../../x", "/tmp/abs", "a/b", "..", "x\\y", "", "a b"])
def test_a_suite_name_from_a_file_stays_a_single_name(tmp_path, monkeypatch, name):
    """A suite whose ``name`` is a path is refused before anything runs, so no output can land outside the results
    folder (the default --out is results/leaderboard/<name>)."""
    from gpusched_lab.evaluate.scenarios import SuiteError, load_suite

    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "s.yaml"
    suite.write_text(
        yaml.safe_dump(
            {"name": name, "scenarios": [{"name": "a", "env_id": "gpusched/JobSelect-v1", "seeds": [0]}]}
        )
    )
    with pytest.raises(SuiteError, match="not a valid name"):
        load_suite(suite)
    import subprocess

    gpusched = Path(sys.executable).with_name("gpusched")
    proc = subprocess.run(
        [str(gpusched), "leaderboard", "--suite", str(suite), "--agents", "fifo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "not a valid name" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["s.yaml"]


def test_a_scenario_name_from_a_file_stays_a_single_name(tmp_path):
    from gpusched_lab.evaluate.scenarios import SuiteError, load_suite

    suite = tmp_path / "s.yaml"
    suite.write_text(
        yaml.safe_dump({"name": "ok", "scenarios": [{"name": "../up", "env_id": "gpusched/JobSelect-v1"}]})
    )
    with pytest.raises(SuiteError, match=r"scenarios\[0\]: name: '../up' is not a valid name"):
        load_suite(suite)


# ====================================================================================== the library's commands


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["simulate", "--seed", "nan"], "--seed"),
        (["simulate", "--seed", "99999999999999999999999"], "--seed must be >= 0"),
        (["simulate", "--restart-delay", "inf"], "--restart-delay must be a finite number"),
        (["simulate", "--bogus"], "No such option: --bogus"),
        (["simulate", "--cluster", "[/]"], "--cluster: unknown cluster '[/]'"),
        (["simulate", "--workload", "[/]"], "--workload: "),
        (["simulate", "--placement", "fist-fit"], "did you mean first-fit?"),
        (["workloads", "--seed", "-1e3"], "--seed"),
    ],
)
def test_library_commands_refuse_bad_flags_in_one_line_naming_the_flag(gpusched, args, needle):
    code, out, err = gpusched(*args)
    assert_one_line(code, out, err, needle)


def test_clusters_never_wraps_a_word_per_line_and_envs_is_a_table(gpusched, monkeypatch):
    monkeypatch.setattr(cli.console, "width", 100)
    monkeypatch.setattr(cli.console, "_width", 100, raising=False)
    code, out, _ = gpusched("clusters")
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == len(__import__("gpusched_envs.sim", fromlist=["x"]).list_presets())  # one line each
    assert all(len(line) <= 100 for line in out.splitlines())
    code, out, _ = gpusched("envs")
    assert code == 0 and "JobSelect-v" in out and "DelayTuning-v" in out and "observation:" not in out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 5 and "125" in out  # DelayTuning's 5^3 timer combinations
    code, out, _ = gpusched("envs", "--details")
    assert code == 0 and "observation:" in out


def test_checkpoint_metadata_with_an_unknown_field_is_a_mismatch_naming_it(tmp_path):
    from gpusched_lab import agents
    from gpusched_lab.agents.checkpoint import CheckpointMismatchError

    folder = copy_checkpoint(tmp_path)
    meta = json.loads((folder / "meta.json").read_text())
    edit_meta(folder, network={**meta["network"], "hiddn": 64})
    with pytest.raises(
        CheckpointMismatchError, match=r"network has unknown field\(s\) 'hiddn' \(did you mean"
    ):
        agents.load(folder)


def test_hmarl_checkpoint_with_an_unknown_network_field_is_a_mismatch(tmp_path):
    from gpusched_lab.agents.checkpoint import CheckpointMismatchError
    from gpusched_lab.agents.methods.hmarl.checkpoint import load

    folder = copy_checkpoint(tmp_path, "hmarl_dc4")
    meta = json.loads((folder / "meta.json").read_text())
    edit_meta(folder, network={**meta["network"], "__class__": "x"})
    with pytest.raises(
        CheckpointMismatchError, match=r"meta.json: network has unknown field\(s\) '__class__'"
    ):
        load(folder, interference=False)


def test_metaplace_checkpoint_whose_weights_hold_objects_is_one_line(tmp_path):
    import hashlib

    from gpusched_lab.agents.checkpoint import CheckpointError
    from gpusched_lab.agents.methods.metaplace.checkpoint import load_meta

    folder = copy_checkpoint(tmp_path, "workerplacement_gnn")
    data = _weights_only_refused_pickle()
    (folder / "value.pt").write_bytes(data)
    meta = json.loads((folder / "meta.json").read_text())
    meta["meta_rl"]["sha256"]["value.pt"] = hashlib.sha256(data).hexdigest()
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError) as err:
        load_meta(folder)
    text = str(err.value)
    assert "\n" not in text and "value.pt: holds Python objects other than tensors; refused" in text
