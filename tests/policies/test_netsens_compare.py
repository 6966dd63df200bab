"""``gpusched netsens-compare`` (evaluate/netsens_compare.py): the scenario family agrees with the standard suite,
every variant meets the same workload, the paired changes are computed against the right baseline, bad options
give one clear line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from gpusched_lab.evaluate import netsens_compare as nc
from gpusched_lab.evaluate.scenarios import load_suite


def test_standard_suite_holds_the_netsens_family():
    suite = load_suite("standard")
    for level, cluster in nc.LEVELS.items():
        sc = suite.scenario(f"{cluster}-delay-tuning")
        assert sc.env_id == "gpusched/DelayTuning-v1"
        assert sc.env_kwargs == nc.env_kwargs(cluster), level
        assert len(sc.seeds) >= 10


def test_a_small_comparison_runs_every_variant_on_the_same_workload(tmp_path):
    rows = nc.run_comparison({"16:1": "congested-16x"}, seeds=[0, 1], jobs=12, load=0.6)
    variants = {r["variant"] for r in rows}
    assert variants == set(nc.BASELINES) | set(nc.NETSENS)
    for seed in (0, 1):
        at = [r for r in rows if r["seed"] == seed]
        assert {r["jobs"] for r in at} == {12} and all(r["unfinished"] == 0 for r in at)
        by = {r["variant"]: r for r in at}
        # preemption is the only way to preempt among the NetSens variants; FIFO never preempts
        assert by["delay (fixed timers)"]["preemptions_per_job"] == 0.0
        assert by["fifo+closest"]["preemptions_per_job"] == 0.0
        assert 0.0 <= by["fifo+closest"]["communication_overhead"] < 1.0
    summary = nc.summarise(rows)
    head = summary["headline"]["16:1"]["+ auto-tuner"]["avg_jct"]
    best = min(nc.BASELINES, key=lambda b: summary["means"]["16:1"][b]["avg_jct"])
    assert head[0]["vs"] == best and head[0]["best_baseline"]
    assert [h["vs"] for h in head[1:]] == [nc.AGNOSTIC, nc.FIXED]
    x = np.array([r["avg_jct"] for r in rows if r["variant"] == "+ auto-tuner"])
    b = np.array([r["avg_jct"] for r in rows if r["variant"] == best])
    assert head[0]["change"] == pytest.approx(x.mean() / b.mean() - 1)
    lo, hi = head[0]["ci95"]
    assert lo <= head[0]["change"] <= hi
    paths = nc.write_outputs(rows, summary, tmp_path)
    assert json.loads(paths[1].read_text())["levels"] == ["16:1"]
    assert "| 16:1 | + auto-tuner |" in paths[2].read_text()


def test_bad_options_fail_with_one_line(capsys):
    with pytest.raises(typer.Exit):
        nc.netsens_compare(seeds="0-1", levels="3:1")
    assert "--levels: unknown level '3:1'" in capsys.readouterr().err
    with pytest.raises(typer.Exit):
        nc.netsens_compare(seeds="x", levels="1:1")
    assert "--seeds" in capsys.readouterr().err


def test_congested_presets_differ_only_in_their_uplinks():
    from gpusched_envs.sim import load_cluster

    one, four, sixteen, nic = (load_cluster(c) for c in nc.LEVELS.values())
    nic_sum = 2 * one.server_nic_bandwidth[0]  # two servers per rack, oversubscription 1:1
    assert one.rack_uplink_bandwidth == pytest.approx([nic_sum] * 4)
    assert four.rack_uplink_bandwidth == pytest.approx(one.rack_uplink_bandwidth / 4)
    assert sixteen.rack_uplink_bandwidth == pytest.approx(one.rack_uplink_bandwidth / 16)
    for c in (four, sixteen):
        assert c.num_gpus == one.num_gpus == 32
        assert (c.server_rack == one.server_rack).all()
        assert (c.server_nic_bandwidth == one.server_nic_bandwidth).all()
    # 1:1 uplinks over slower NICs
    assert nic.rack_uplink_bandwidth == pytest.approx([2 * nic.server_nic_bandwidth[0]] * 4)
    assert nic.server_nic_bandwidth[0] < one.server_nic_bandwidth[0]
