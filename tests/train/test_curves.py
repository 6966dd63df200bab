"""Learning-curve summaries from TensorBoard events: samples, best evaluation, the plateau test, the PNG."""

import json

import pytest
from gpusched_lab.train import curves


def _run(tmp_path, name, evals, episodes=()):
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / name
    w = SummaryWriter(log_dir=str(run / "tb"))
    for step, value in evals:
        w.add_scalar("eval/avg_jct", value, step)
    for step, value in episodes:
        w.add_scalar("episode/avg_jct", value, step)
    w.close()
    return run


def test_plateaued_when_the_last_third_gains_nothing(tmp_path):
    run = _run(
        tmp_path, "flat", [(0, 100.0), (100, 80.0), (200, 70.0), (300, 70.5), (400, 70.2)], [(450, 5.0)]
    )
    s = curves.run_summary(run)
    assert s["samples"] == 450 and s["evaluations"] == 5
    assert s["best"] == pytest.approx(70.0) and s["best_step"] == 200
    assert s["plateaued"] is True  # last third (steps >= 266.7): 70.5, 70.2, not below 0.99 * 70


def test_still_improving_when_the_last_third_gains_more_than_the_tolerance(tmp_path):
    run = _run(tmp_path, "rising", [(0, 100.0), (100, 90.0), (200, 80.0), (300, 70.0)])
    s = curves.run_summary(run)
    assert s["plateaued"] is False and s["best_step"] == 300
    assert curves.run_summary(run, tolerance=0.5)["plateaued"] is True  # 70 >= 0.5 * 80


def test_too_few_evaluations_and_no_evaluation(tmp_path):
    assert curves.run_summary(_run(tmp_path, "two", [(0, 1.0), (10, 0.5)]))["plateaued"] is None
    s = curves.run_summary(_run(tmp_path, "none", [], [(5, 3.0)]))
    assert s["best"] is None and s["evaluations"] == 0 and s["samples"] == 5


def test_cli_writes_png_and_json(tmp_path, capsys):
    a = _run(tmp_path, "s0", [(0, 100.0), (100, 80.0), (200, 80.0)], [(i, 100.0 - i) for i in range(20)])
    b = _run(tmp_path, "s1", [(0, 90.0), (100, 60.0), (200, 40.0)])
    curves.main([str(a), str(b), "--out", str(tmp_path / "c.png"), "--json", str(tmp_path / "c.json")])
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads((tmp_path / "c.json").read_text())
    assert [r["plateaued"] for r in rows] == [True, False]
    out = capsys.readouterr().out
    assert "s0: 200 samples" in out and "plateaued" in out and "still improving" in out


def test_cli_rejects_a_folder_without_events(tmp_path):
    with pytest.raises(SystemExit):
        curves.main([str(tmp_path), "--out", str(tmp_path / "c.png")])


def _process(run, evals, t0):
    """One process's event file of a run (a fresh writer in the same tb/ folder), its events at wall time t0 + i."""
    import time

    from torch.utils.tensorboard import SummaryWriter

    time.sleep(0.01)  # a distinct file name
    w = SummaryWriter(log_dir=str(run / "tb"))
    for i, (step, value) in enumerate(evals):
        w.add_scalar("eval/avg_jct", value, step, walltime=t0 + i)
    w.close()


def test_a_resumed_run_keeps_its_surviving_history_the_best_of_every_branch_and_its_running_time(tmp_path):
    """A first process logs steps 0-300 and stops; a second resumes from the checkpoint at step 200 an hour
    later and logs 200-500. The curve is 0, 100 (first) then 200-500 (second); the first process's 200 and 300 are
    a discarded branch, whose 300 holds the best value (the run's best/ checkpoint came from it); the wall time is
    the two spans (3 s + 3 s), not the hour between them."""
    run = tmp_path / "resumed"
    _process(run, [(0, 100.0), (100, 90.0), (200, 80.0), (300, 60.0)], t0=1000.0)
    _process(run, [(200, 85.0), (300, 75.0), (400, 70.0), (500, 72.0)], t0=5000.0)
    steps, values = curves.read_scalars(run, "eval/avg_jct")
    assert steps.tolist() == [0, 100, 200, 300, 400, 500]
    assert values.tolist() == [100.0, 90.0, 85.0, 75.0, 70.0, 72.0]
    steps, values = curves.read_scalars(run, "eval/avg_jct", discarded=True)
    assert sorted(zip(steps.tolist(), values.tolist(), strict=True)) == [
        (0, 100.0),
        (100, 90.0),
        (200, 80.0),
        (200, 85.0),
        (300, 60.0),
        (300, 75.0),
        (400, 70.0),
        (500, 72.0),
    ]
    s = curves.run_summary(run)
    assert s["samples"] == 500 and s["evaluations"] == 6 and s["discarded_evaluations"] == 2
    assert (s["best"], s["best_step"]) == (60.0, 300)
    assert s["wall_s"] == pytest.approx(6.0)
    assert s["plateaued"] is True  # the last third (steps >= 333.3) reaches 70, not below 0.99 * 60
