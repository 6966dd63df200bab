"""A learned WorkerPlacement-v1 checkpoint on the held-out pairs of the WorkerPlacement headroom study, read as a ratio
to the best placement heuristic and as a share of the room the study's search found (docs/headroom.md).

For each setting of ``scripts/studies/workerplacement_headroom.py`` (``drift-N``: tasks drawn by the env's
``sample_tasks``, the held-out ones with the env seeded 2 and the held-in ones seeded 1; ``topdrl-placement`` /
``topdrl-worker-placement``: the suites' scenarios), this plays the checkpoint's deterministic policy on every
(case, seed) through ``train compare`` (``gpusched_lab.evaluate.compare.compare``: the checkpoint's env with the
case's kwargs, the policy-defining kwargs kept from the checkpoint) and, paired on the same (case, seed), the six
placement rules under the env's head rule (FIFO with backfill). A drifting task is handed to the env as the kwargs
``set_task`` amounts to (``load``, ``interference_scale`` and the task's synthetic workload spec, arrival process
included); every held-out pair's ``consolidate`` figure must equal the headroom study's for that pair, or the run
stops (the pairs would not be the study's). Per setting it reports

- ``ratio`` = mean agent ÷ mean of the study's best heuristic (chosen on the held-in pairs, read from the study's
  file: ``best``) over the held-out pairs, with a paired 95% bootstrap interval (pairs resampled together,
  :func:`gpusched_lab.evaluate.stats.paired_relative_change`); the same against the best rule in hindsight per pair;
- ``room share`` = Σ(heuristic − agent) ÷ Σ(heuristic − search) over the pairs where the study ran its search (its
  ``search_jct``: the better of its rollout and the best rule in hindsight), with a 95% bootstrap interval (the
  pairs resampled together, 10,000 resamples, seed 0): 1 = the agent gains all the search gained, 0 = no gain, < 0
  worse than the heuristic; per case beside it;
- on the held-in pairs (``drift-N`` only: the study's held-in tasks and seeds, those a run may choose its
  checkpoint on) the ratio to the best heuristic, for reference.

    nice -n 10 python scripts/studies/workerplacement_learned.py --checkpoint runs/wp_scale_s0_best \\
        --out docs/data/workerplacement_learned_scale.json                          # docs/headroom.md
    python scripts/studies/workerplacement_learned.py --checkpoint CKPT --settings drift-300 --seeds 0 \\
        --tasks 2 --out /tmp/learned.json                                           # seconds

Finished cases are kept in the output file as they come (atomically), and a rerun resumes from them (a checkpoint
whose files changed, or other seeds, start over).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobselect_learned import checkpoint_digest, paired_ratio  # noqa: E402  (the JobSelect study's readers)
from workerplacement_headroom import (  # noqa: E402  (the sibling study: its settings, cases and search figure)
    ENV_ID,
    PLACEMENTS,
    SUITE_SETTINGS,
    parse_setting,
    search_jct,
    setting_cases,
)

HEADROOM = Path(__file__).resolve().parents[2] / "docs" / "data" / "workerplacement_headroom.json"
DEFAULTS = {"settings": "drift-300,topdrl-worker-placement", "seeds": "0-4", "heldin_seeds": "100-102"}
RESAMPLES, SEED = 10_000, 0


def task_kwargs(task: dict, num_gpus: int) -> dict:
    """The env kwargs that make WorkerPlacement-v1 run ``task`` (a :class:`PlacementTask` as a dict) as
    ``set_task`` does: its offered load, interference factor and synthetic workload (arrival process included)."""
    from gpusched_envs.envs.worker_placement import PlacementTask

    return PlacementTask(**task).env_kwargs(num_gpus)


def cases(setting: str, phase: str, tasks: int) -> list[tuple[str, dict | None, str | None]]:
    """``(case name, env kwargs over the checkpoint's or None, suite or None)`` of ``setting`` for ``phase``: the
    study's cases (:func:`workerplacement_headroom.setting_cases`), a drifting task as its kwargs."""
    if setting in SUITE_SETTINGS:
        return [(setting, None, SUITE_SETTINGS[setting])]
    from gpusched_envs.sim.topology import load_cluster

    out = []
    for name, _, task in setting_cases(setting, phase, tasks):
        out.append((name, task_kwargs(task, load_cluster(task["cluster"]).num_gpus), None))
    return out


def run_case(
    checkpoint: Path, name: str, kwargs: dict | None, suite: str | None, seeds: list[int]
) -> list[dict]:
    """The agent and the six placement rules on each seed of one case: ``compare``'s rows (``agent`` and one column
    per rule), named by the case."""
    from gpusched_lab.evaluate.compare import compare

    if suite is not None:
        r = compare(
            checkpoint, seeds, heuristics=PLACEMENTS, suite=suite, only=[name], in_env_references=False
        )
    else:
        r = compare(checkpoint, seeds, heuristics=PLACEMENTS, env_kwargs=kwargs, in_env_references=False)
    return [{**row, "scenario": name} for row in r["rows"]]


def study_rows(headroom: dict, setting: str, phase: str) -> dict:
    """``{(case, seed): row}`` of the headroom study's ``phase`` pairs of ``setting``."""
    res = headroom["settings_results"][setting]
    return {(r["case"], r["seed"]): r for r in res.get(f"{phase}_rows", [])}


def check_pairs(rows: list[dict], study: dict, best: str) -> None:
    """Every row's ``best`` figure equals the study's on the same (case, seed): the pairs are the study's."""
    for r in rows:
        s = study.get((r["scenario"], r["seed"]))
        if s is None:
            continue
        if not np.isclose(r[best], s[best], rtol=1e-9, atol=0.0):
            raise SystemExit(
                f"{r['scenario']} seed {r['seed']}: {best} gives {r[best]:,.3f} s here and {s[best]:,.3f} s in the "
                "headroom study: not the study's pair (another version of the simulator or of the study?)"
            )


def room_share(agent, base, search) -> dict | None:
    """Σ(base − agent) ÷ Σ(base − search) over the pairs, with a 95% bootstrap interval (pairs resampled together;
    a resample whose search gained nothing is left out); None without room (the search gained nothing)."""
    agent, base, search = (np.asarray(x, dtype=np.float64) for x in (agent, base, search))
    gain, room = base - agent, base - search
    if not len(room) or room.sum() <= 0:
        return None
    rng = np.random.default_rng(SEED)
    idx = rng.integers(0, len(room), size=(RESAMPLES, len(room)))
    g, r = gain[idx].sum(1), room[idx].sum(1)
    ok = r > 0
    lo, hi = np.quantile(g[ok] / r[ok], [0.025, 0.975])
    return {"share": float(gain.sum() / room.sum()), "ci95": [float(lo), float(hi)], "pairs": len(room)}


def summarize(rows: list[dict], study: dict, best: str) -> dict:
    """Held-out figures of one setting (module docstring): ratios to ``best`` and to the best rule in hindsight, the
    room share over the pairs with the study's search, and per case."""
    agent = [r["agent"] for r in rows]
    hind = [min(r[p] for p in PLACEMENTS) for r in rows]
    searched = [(r, search_jct(study[(r["scenario"], r["seed"])])) for r in rows if _searched(study, r)]
    out = {
        "best_heuristic": best,
        "pairs": len(rows),
        "agent_mean": float(np.mean(agent)),
        "best_mean": float(np.mean([r[best] for r in rows])),
        "hindsight_mean": float(np.mean(hind)),
        "vs_best": paired_ratio(agent, [r[best] for r in rows]),
        "vs_hindsight": paired_ratio(agent, hind),
        "agent_better_than_best": int(sum(r["agent"] < r[best] for r in rows)),
        "rule_means": {p: float(np.mean([r[p] for r in rows])) for p in PLACEMENTS},
        "per_case": {},
    }
    if searched:
        s_rows = [r for r, _ in searched]
        s_agent = [r["agent"] for r in s_rows]
        s_best = [r[best] for r in s_rows]
        s_search = [s for _, s in searched]
        out["searched"] = {
            "pairs": len(s_rows),
            "agent_mean": float(np.mean(s_agent)),
            "best_mean": float(np.mean(s_best)),
            "search_mean": float(np.mean(s_search)),
            "bound_mean": float(np.mean([study[(r["scenario"], r["seed"])]["bound"] for r in s_rows])),
            "vs_best": paired_ratio(s_agent, s_best),
            "search_vs_best": paired_ratio(s_search, s_best),
            "room_share": room_share(s_agent, s_best, s_search),
            "agent_better_than_search": int(sum(a < s for a, s in zip(s_agent, s_search, strict=True))),
        }
    for case in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == case]
        entry = {
            "seeds": [r["seed"] for r in mine],
            "agent_mean": float(np.mean([r["agent"] for r in mine])),
            "best_mean": float(np.mean([r[best] for r in mine])),
            "ratio": float(np.mean([r["agent"] for r in mine]) / np.mean([r[best] for r in mine])),
        }
        pairs = [(r, search_jct(study[(r["scenario"], r["seed"])])) for r in mine if _searched(study, r)]
        if pairs:
            entry["search_mean"] = float(np.mean([s for _, s in pairs]))
            share = room_share(
                [r["agent"] for r, _ in pairs], [r[best] for r, _ in pairs], [s for _, s in pairs]
            )
            entry["room_share"] = None if share is None else share["share"]
        out["per_case"][case] = entry
    return out


def _searched(study: dict, row: dict) -> bool:
    s = study.get((row["scenario"], row["seed"]))
    return s is not None and bool(s.get("rollout"))


def summarize_heldin(rows: list[dict], best: str) -> dict:
    agent = [r["agent"] for r in rows]
    return {
        "best_heuristic": best,
        "pairs": len(rows),
        "agent_mean": float(np.mean(agent)),
        "best_mean": float(np.mean([r[best] for r in rows])),
        "vs_best": paired_ratio(agent, [r[best] for r in rows]),
    }


def markdown(result: dict) -> str:
    lines = [
        "| setting | pairs | agent (s) | best rule (s) | agent ÷ best [95% CI] | search (s) | search ÷ best | "
        "room share [95% CI] | agent better than best |",
        "|---|---:|---:|---:|---|---:|---:|---|---:|",
    ]
    for name, s in result.get("summary", {}).items():
        h = s.get("heldout")
        if not h:
            continue
        v = h["vs_best"]
        se = h.get("searched") or {}
        share = se.get("room_share")
        lines.append(
            f"| {name} | {h['pairs']} | {h['agent_mean']:,.0f} | {h['best_mean']:,.0f} ({h['best_heuristic']}) | "
            f"{v['ratio']:.3f}× [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}] | "
            + (f"{se['search_mean']:,.0f} | {se['search_vs_best']['ratio']:.3f}× | " if se else "— | — | ")
            + (
                f"{share['share']:.0%} [{share['ci95'][0]:.0%}, {share['ci95'][1]:.0%}] ({share['pairs']} pairs) | "
                if share
                else "— | "
            )
            + f"{h['agent_better_than_best']}/{h['pairs']} |"
        )
    return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder (model.pt + meta.json)")
    ap.add_argument(
        "--settings",
        default=DEFAULTS["settings"],
        help="comma list of the study's settings (drift-N, suites')",
    )
    ap.add_argument("--seeds", default=DEFAULTS["seeds"], help="held-out seeds (A-B or A,B)")
    ap.add_argument(
        "--heldin-seeds", default=DEFAULTS["heldin_seeds"], help="held-in seeds, drift-N only ('' for none)"
    )
    ap.add_argument(
        "--tasks", type=int, default=8, help="held-out tasks per drifting setting (the study's: 8)"
    )
    ap.add_argument(
        "--heldin-tasks", type=int, default=4, help="held-in tasks per drifting setting (the study's: 4)"
    )
    ap.add_argument("--headroom", type=Path, default=HEADROOM, help="the headroom study's result file")
    ap.add_argument("--out", type=Path, required=True, help="result JSON (resumed when it exists)")
    return ap, ap.parse_args(argv)


def main(argv=None) -> dict:
    from gpusched_lab.evaluate.marl import parse_seeds

    from gpusched_envs.io import atomic_write_text

    argv = list(sys.argv[1:] if argv is None else argv)
    ap, a = parse_args(argv)
    try:
        settings = list(dict.fromkeys(parse_setting(x.strip()) for x in a.settings.split(",") if x.strip()))
        seeds = parse_seeds(a.seeds)
        heldin_seeds = parse_seeds(a.heldin_seeds) if a.heldin_seeds.strip() else []
    except ValueError as exc:
        ap.error(str(exc))
    if not settings:
        ap.error("--settings: no setting given")
    if a.tasks < 1 or a.heldin_tasks < 1:
        ap.error("--tasks and --heldin-tasks: expected >= 1")
    ck = a.checkpoint
    if not (ck / "model.pt").is_file() or not (ck / "meta.json").is_file():
        ap.error(f"--checkpoint: {ck} is not a checkpoint folder (model.pt and meta.json expected)")
    meta = json.loads((ck / "meta.json").read_text())
    if meta.get("env_id") != ENV_ID:
        ap.error(f"--checkpoint: {ck} was trained on {meta.get('env_id')}, not {ENV_ID}")
    if not a.headroom.is_file():
        ap.error(
            f"--headroom: {a.headroom} does not exist (scripts/studies/workerplacement_headroom.py writes it)"
        )
    headroom = json.loads(a.headroom.read_text())
    missing = [s for s in settings if s not in headroom.get("settings_results", {})]
    if missing:
        ap.error(f"--settings: {', '.join(missing)} not in {a.headroom}")

    key = {"digest": checkpoint_digest(ck), "seeds": seeds, "heldin_seeds": heldin_seeds}
    result = json.loads(a.out.read_text()) if a.out.is_file() else {}
    if {k: result.get(k) for k in key} != key:
        result = dict(key)
    result.setdefault("done", {})
    result.update(
        checkpoint=str(ck),
        steps=meta.get("steps"),
        command="python scripts/studies/workerplacement_learned.py " + " ".join(argv),
        headroom=str(a.headroom),
        settings=settings,
    )

    def save() -> None:
        result["summary"] = {}
        for setting in settings:
            best = headroom["settings_results"][setting]["best"]
            entry = {}
            for phase in ("heldout", "heldin"):
                rows = [
                    r for k, v in result["done"].items() if k.startswith(f"{phase}/{setting}/") for r in v
                ]
                if rows:
                    entry[phase] = (
                        summarize(rows, study_rows(headroom, setting, phase), best)
                        if phase == "heldout"
                        else summarize_heldin(rows, best)
                    )
            result["summary"][setting] = entry
        atomic_write_text(a.out, json.dumps(result, indent=2) + "\n")

    todo = []
    for setting in settings:
        todo += [("heldout", setting, c, seeds) for c in cases(setting, "heldout", a.tasks)]
        if heldin_seeds and setting not in SUITE_SETTINGS:
            todo += [("heldin", setting, c, heldin_seeds) for c in cases(setting, "heldin", a.heldin_tasks)]
    t0 = time.perf_counter()
    for i, (phase, setting, (name, kwargs, suite), phase_seeds) in enumerate(todo, 1):
        k = f"{phase}/{setting}/{name}"
        if k in result["done"]:
            continue
        rows = run_case(ck, name, kwargs, suite, phase_seeds)
        best = headroom["settings_results"][setting]["best"]
        check_pairs(rows, study_rows(headroom, setting, phase), best)
        result["done"][k] = rows
        save()
        print(f"[{i}/{len(todo)}] {k} ({time.perf_counter() - t0:.0f} s)", flush=True)
    save()
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
