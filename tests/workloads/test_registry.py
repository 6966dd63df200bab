import json

import pytest

from gpusched_envs.workloads import WorkloadError, describe, list_workloads, load_workload, parse_spec


def test_list_workloads():
    names = [n for n, _, _ in list_workloads()]
    assert names[:6] == ["philly", "openb", "pai2020", "helios", "sia", "synthetic"]
    for _name, desc, keys in list_workloads():
        assert isinstance(desc, str) and "\n" not in desc and isinstance(keys, tuple)
    assert "start" in dict((n, k) for n, _, k in list_workloads())["philly"]


def test_parse_spec():
    assert parse_spec("philly") == ("philly", {})
    assert parse_spec("philly:start=2017-10-01 08:00:00,vc=a+b") == (
        "philly",
        {"start": "2017-10-01 08:00:00", "vc": "a+b"},
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("nope", "unknown workload 'nope'; valid: philly, openb, pai2020, helios, sia, synthetic"),
        ("philly:foo=1", "unknown key 'foo' for philly; valid: start, end, vc, jobs"),
        ("philly:jobs", "is not key=value"),
        ("philly:jobs=x", "jobs='x' is not an integer"),
        ("philly:jobs=1,jobs=2", "given twice"),
        ("philly:load=1.0", "load and gpus go together"),
        ("synthetic:arrival=bursty", "unknown arrival process 'bursty'; valid: poisson, diurnal"),
        ("synthetic:fit=nope", "unknown fit 'nope'; valid: netsens, philly"),
        ("openb:pods=gpushare20", "pod list 'gpushare20' is not bundled; valid: default"),
        ("helios", "give path="),
        ("pai2020", "give path="),
        ("sia", "give path="),
        ("dag:tpch", "gpusched_envs.workloads.dag"),
        ("", "empty workload spec"),
    ],
)
def test_bad_specs(spec, expected):
    with pytest.raises(WorkloadError) as err:
        load_workload(spec)
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "spec",
    [
        "philly:start=2017-10-01,end=2017-11-30,load=0.8,gpus=256",
        "openb:jobs=500",
        "synthetic:jobs=3000,arrival=diurnal,models=resnet50+resnet18@3,load=0.9,gpus=64",
    ],
)
def test_same_seed_same_fingerprint(spec):
    a = load_workload(spec, seed=7)
    b = load_workload(spec, seed=7)
    assert a.fingerprint() == b.fingerprint()


def test_seed_changes_synthetic():
    assert (
        load_workload("synthetic:jobs=100", seed=1).fingerprint()
        != load_workload("synthetic:jobs=100", seed=2).fingerprint()
    )


def test_describe_is_json(philly):
    d = describe(load_workload("philly:start=2017-10-01,end=2017-11-30"), num_gpus=2_490)
    json.dumps(d)
    assert d["jobs"] == 68_510
    assert d["gpu_hist"][1] == 64_078
    assert d["duration_s"]["p50"] == 1415.0
    assert set(d["duration_s"]) >= {"p50", "p90", "p99", "mean"}
    assert d["offered_load"] == pytest.approx(2_487_155_585.0 / (2_490 * d["span_s"]))
