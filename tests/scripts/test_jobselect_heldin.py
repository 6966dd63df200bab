"""The held-in reading of a checkpoint: every row's numbers are the agent's and the in-env heuristics' episodes on
the config's windows, the ratios are those of the means, and a config without held-in windows says so."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "studies"))
import jobselect_heldin as jh  # noqa: E402

CKPT = str(ROOT / "checkpoints" / "ppo_jobselect_gnn_nc")
WINDOW = "philly:start=2017-10-13,jobs=12,load=0.9,gpus=32"


def test_rows_and_ratios(tmp_path):
    from gpusched_lab import agents
    from gpusched_lab.agents.common import run_episode
    from gpusched_lab.evaluate.compare import heuristic_in_env_jct

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f'eval_choices:\n  - {{workload: "{WINDOW}"}}\n')
    windows = jh.windows_of(str(cfg))
    assert windows == [{"workload": WINDOW, "num_jobs": 12}]
    result = jh.run([CKPT], windows, [0, 1])
    assert [(r["window"], r["seed"]) for r in result["rows"]] == [(WINDOW, 0), (WINDOW, 1)]
    agent = agents.load(CKPT)
    env = agent.make_env(**windows[0])
    for r in result["rows"]:
        assert r[CKPT] == run_episode(agent.act, env, r["seed"])["metrics"]["avg_jct"]
        assert r["las@env"] == heuristic_in_env_jct(env, "las", "closest", r["seed"])
    want = np.mean([r[CKPT] for r in result["rows"]]) / np.mean([r["gittins@env"] for r in result["rows"]])
    assert result["mean_ratio"][CKPT]["gittins"] == pytest.approx(want, rel=1e-12)
    assert "| 0 |" in jh.markdown(result, [CKPT])


def test_a_config_without_held_in_windows_says_so(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("steps: 10\n")
    with pytest.raises(SystemExit, match="eval_choices"):
        jh.windows_of(str(cfg))


def test_a_folder_without_meta_says_so(tmp_path):
    with pytest.raises(SystemExit, match="not a checkpoint folder"):
        jh.main([str(tmp_path), "--config", "ppo_jobselect_gnn_nc_scale"])


def test_chosen_heuristics_act_through_the_env_and_an_unknown_one_says_so(tmp_path):
    """``--heuristics`` picks the in-env references; a clairvoyant one is hosted by a clairvoyant checkpoint's env
    and refused with one line when no checkpoint sees durations."""
    from gpusched_lab import agents
    from gpusched_lab.evaluate.compare import heuristic_in_env_jct

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f'eval_choices:\n  - {{workload: "{WINDOW}"}}\n')
    windows = jh.windows_of(str(cfg))
    result = jh.run([CKPT], windows, [0], heuristics=("tiresias", "las"))
    row = result["rows"][0]
    assert {k for k in row if k.endswith("@env")} == {"tiresias@env", "las@env"}
    env = agents.load(CKPT).make_env(**windows[0])
    assert row["tiresias@env"] == heuristic_in_env_jct(env, "tiresias", "closest", 0)
    assert set(result["mean_ratio"][CKPT]) == {"tiresias", "las"} and result["heuristics"] == [
        "tiresias",
        "las",
    ]
    assert "tiresias@env" in jh.markdown(result, [CKPT])
    clairvoyant = str(ROOT / "checkpoints" / "ppo_jobselect_gnn_clairvoyant")
    both = jh.run([clairvoyant, CKPT], windows, [0], heuristics=("srtf",))
    host = agents.load(clairvoyant).make_env(**windows[0])
    assert both["rows"][0]["srtf@env"] == heuristic_in_env_jct(host, "srtf", "closest", 0)
    with pytest.raises(SystemExit, match="srtf read traced durations; give a clairvoyant checkpoint"):
        jh.run([CKPT], windows, [0], heuristics=("srtf",))
    with pytest.raises(SystemExit, match="--heuristics: unknown foo"):
        jh.main([CKPT, "--config", str(cfg), "--heuristics", "tiresias,foo"])
