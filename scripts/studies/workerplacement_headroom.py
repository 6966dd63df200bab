"""How much room does a learned WorkerPlacement-v1 agent (MetaPlace) have over the placement heuristics?

A WorkerPlacement-v1 agent chooses where the workers of a job go (server by server, or defers the job); which job
comes next is the env's head rule, FIFO with backfill (the oldest waiting job that fits), and co-location
interference is on. Its heuristics are that head rule under each placement rule (``consolidate``, ``closest``,
``pack``, ``first-fit``, ``spread``, ``random``: :data:`PLACEMENTS`), run as ``train compare`` and the leaderboard run
them (``heuristic_jct`` of ``gpusched_lab.evaluate.compare``): ``Simulator.run(FIFO(rule, backfill=True))`` on a
fresh simulator holding the workload and settings of the env reset with the seed. Preemptive Tiresias (closest
placement), outside the agent's class since it reorders and preempts jobs, is shown for reference. Settings
(:func:`setting_cases`):

- ``topdrl-placement`` and ``topdrl-worker-placement``: the WorkerPlacement scenarios of the ``quick`` suite (100
  jobs, offered load 0.9) and of the ``standard`` suite (1,000 jobs, load 0.9) on the TopDRL cluster (32 GPUs);
  the held-in cases are the same scenario with the seeds of ``--heldin-seeds``;
- ``drift-N``: tasks drifting in arrival process, offered load and interference (``sample_tasks`` of the env with
  ``num_jobs=N``: load in [0.6, 1.2], interference factor in [1.0, 1.5], Poisson or diurnal arrivals, TopDRL),
  the held-in tasks drawn with the env seeded by :data:`HELDIN_TASK_SEED`, the held-out ones by
  :data:`HELDOUT_TASK_SEED` (a meta-learned agent meets tasks it was not tuned on; so does a heuristic).

Per setting this measures

- ``best heuristic``: the placement rule with the lowest geometric mean of average JCT over the held-in (case,
  seed) pairs, then FIXED for the held-out pairs; the best rule in hindsight per held-out pair is shown beside it;
- ``rollout``: one step of policy improvement over the best rule (Bertsekas' rollout), at the agent's own
  granularity: at every decision point the jobs are taken in the head rule's order, and for each job that fits,
  each placement rule of the portfolio (:func:`portfolio`: the base first, then the other placement rules) proposes
  its GPUs for it (or to defer it, where the rule would not place it now); where the proposals differ, each distinct
  proposal is applied on a copy of the simulator, the copy finishes the decision point and runs to the end with the
  base, and the proposal whose copy ends with the lowest average JCT is taken for real (every K-th such choice with
  ``--stride``; the base decides the others). Proposals that coincide share one copy, and the base's proposal is
  the copy chosen at the choice before, so it is never run twice. Achievable (every proposal is a placement the
  agent can make worker by worker), found by search with the future known, and never worse than its base on its
  (case, seed): the base is in the portfolio and the simulator is deterministic (checked on every run);
- ``search``: the better of the rollout and the best rule in hindsight on each (case, seed) (:func:`search_jct`):
  the best achievable schedule found with the future known;
- ``bound``: the mean of the jobs' ideal runtimes (``lower_bound_avg_jct`` of the simulator's metrics: no queueing,
  no interference, fastest placement);
- ``room`` = 1 − search / best heuristic (average JCT) per setting and per case, with a paired 95% bootstrap
  interval over the (case, seed) pairs (:func:`gpusched_lab.evaluate.stats.paired_relative_change`); the
  rollout's own room (1 − rollout / best heuristic) beside it.

    nice -n 10 python scripts/studies/workerplacement_headroom.py --out docs/data/workerplacement_headroom.json
    python scripts/studies/workerplacement_headroom.py --quick        # seconds: one 20-job drifting task

The default run is the one of ``docs/headroom.md`` (section WorkerPlacement): held-out seeds 0-9 (the standard
suite's), held-in seeds 100-102, eight held-out and four held-in tasks per drifting setting, the rollouts on the
seeds of the ``--rollout`` default, searching every choice. Finished (case, seed) results are kept in ``OUT.partial.json``
as they come (the result file itself is rewritten after every rollout), and a rerun resumes from them: the same run
cut short, or one with more seeds.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from gpusched_envs.policies.placement import get_placement
from gpusched_envs.policies.schedulers import FIFO
from gpusched_envs.sim.engine import FULL_GPU

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobselect_headroom import choose_best, clone, parse_stride  # noqa: E402  (the sibling JobSelect study)

ENV_ID = "gpusched/WorkerPlacement-v1"
# the placement rules of WorkerPlacement-v1's heuristic class (gpusched_lab.evaluate.compare.PLACEMENT_HEURISTICS)
PLACEMENTS = ("consolidate", "closest", "pack", "first-fit", "spread", "random")
REFERENCE = "tiresias"  # outside the agent's class (reorders and preempts), shown for reference
SUITE_SETTINGS = {"topdrl-placement": "quick", "topdrl-worker-placement": "standard"}
HELDIN_TASK_SEED, HELDOUT_TASK_SEED = 1, 2  # env.reset(seed=...) before sample_tasks, per drifting setting
DRIFT = re.compile(r"drift-(\d+)")
DEFAULTS = {
    "settings": "topdrl-placement,topdrl-worker-placement,drift-100,drift-300",
    "seeds": "0-9",
    "heldin_seeds": "100-102",
    "rollout": "topdrl-placement=0-9,topdrl-worker-placement=0-4,drift-100=0-4,drift-300=0-4",
    "stride": "",
}
QUICK = [
    "--settings", "drift-20", "--seeds", "0", "--heldin-seeds", "100", "--tasks", "2", "--heldin-tasks", "1",
    "--rollout", "drift-20=0", "--stride", "",
]  # fmt: skip


def fifo(rule: str) -> FIFO:
    """The env's head rule (FIFO with backfill) under placement ``rule``: WorkerPlacement-v1's heuristic."""
    return FIFO(rule, backfill=True)


def portfolio(base: str) -> list[str]:
    """The placement rules the rollout over ``base`` chooses among for each job: the base first, then the others."""
    if base not in PLACEMENTS:
        raise ValueError(f"unknown placement rule {base!r}; choose one of: {', '.join(PLACEMENTS)}")
    return [base, *(p for p in PLACEMENTS if p != base)]


def propose(sim, job: int, place) -> tuple[np.ndarray | None, dict | None]:
    """``place``'s GPUs for ``job`` now (None: it would not place it now, the job is deferred) and the state of the
    simulator's generator after it when the rule drew from it (the ``random`` rule), else None; ``sim`` unchanged."""
    before = sim.rng.bit_generator.state
    gpus = place(sim, job)
    after = sim.rng.bit_generator.state
    drew = after != before
    if drew:
        sim.rng.bit_generator.state = before
    return (None if gpus is None else np.asarray(gpus, dtype=np.int64)), (after if drew else None)


def apply(sim, job: int, proposal) -> None:
    """Carry out a proposal of :func:`propose` on ``sim``: start ``job`` on its GPUs (or leave it waiting)."""
    gpus, rng_state = proposal
    if rng_state is not None:
        sim.rng.bit_generator.state = rng_state
    if gpus is not None:
        sim.start(job, gpus)


def finish_decision(sim, place, jobs) -> None:
    """The head rule with placement ``place`` over the rest of this decision point's ``jobs`` (in order), as
    ``FIFO(rule, backfill=True).schedule`` goes on after a job."""
    for job in jobs:
        gpus = place(sim, job)
        if gpus is not None:
            sim.start(job, gpus)


def rollout(sim, base: str, stride: int = 1, share: bool = True, rules=None, progress=None) -> dict:
    """One-step rollout over placement rule ``base`` (under the head rule) on ``sim`` (fresh), run to the end.

    At each decision point the queued jobs are taken in the head rule's order (oldest first) and each rule of
    ``rules`` (default :func:`portfolio`; the base first) proposes a placement for the job; where the proposals
    differ (a *choice*), at every ``stride``-th choice each distinct proposal is applied on a copy that finishes the
    decision point and runs to the end with the base, and the best copy's proposal is taken for real; at the other
    choices the base's proposal is taken (the copy chosen before goes on with the base there, so the rollout is still
    never worse than the base). Returns ``avg_jct`` (the rollout's), ``base_jct`` (the base alone from the same
    start), the simulator's ``metrics``, ``rule_choices`` (how often each rule's proposal was taken at a searched
    choice, the first rule proposing it counted, in the order of ``rules``), ``decisions`` (decision points),
    ``choices``, ``searched``, ``simulated`` (copies run to the end), ``seconds`` and ``cpu_seconds``. With ``share``
    (the default) coinciding proposals share one copy and the base's proposal reuses the copy chosen before; without
    it every rule's proposal is run (the reference the sharing is tested against). Proposals coincide when they give
    the job the same GPUs (and, when the base is ``random``, leave the simulator's generator in the same state: only
    the random rule draws from it)."""
    if not isinstance(stride, int) or isinstance(stride, bool) or stride < 1:
        raise ValueError(f"rollout: stride must be an integer >= 1, got {stride!r}")
    names = portfolio(base) if rules is None else list(rules)
    if not names or names[0] != base or len(set(names)) != len(names):
        raise ValueError(f"rollout: rules must list distinct placement rules with the base {base!r} first")
    placers = [get_placement(n) for n in names]
    t0, c0 = time.perf_counter(), time.process_time()
    chosen = [0] * len(names)
    incumbent = float(clone(sim).run(fifo(base))["avg_jct"])  # the base alone: the first promise
    base_jct, simulated, decisions, choices, searched, last = incumbent, 1, 0, 0, 0, t0
    with_rng = base == "random"
    while sim.next_decision():
        decisions += 1
        if not sim.free_gpus() and not (sim.job_milli < FULL_GPU).any():
            continue  # as QueuePolicy.schedule: nothing can start
        order = sorted(sim.queue)  # the head rule's order: oldest (lowest job index) first
        for pos, job in enumerate(order):
            props = [propose(sim, job, place) for place in placers]
            keys = [
                (
                    None if g is None else g.tobytes(),
                    json.dumps(r, sort_keys=True) if with_rng and r is not None else None,
                )
                for g, r in props
            ]
            if all(k == keys[0] for k in keys):
                apply(sim, job, props[0])
                continue
            choices += 1
            if (choices - 1) % stride:
                apply(sim, job, props[0])
                continue
            searched += 1
            values: list[float] = []
            seen: dict = {}
            for i, (prop, key) in enumerate(zip(props, keys, strict=True)):
                if share and i == 0:
                    seen[key] = incumbent  # the base's proposal here continues the copy chosen before
                if share and key in seen:
                    values.append(seen[key])
                    continue
                trial = clone(sim)
                apply(trial, job, prop)
                finish_decision(trial, placers[0], order[pos + 1 :])
                value = float(trial.run(fifo(base))["avg_jct"])  # the rest of the run with the base
                simulated += 1
                if share:
                    seen[key] = value
                values.append(value)
            best = 0
            for i, v in enumerate(values):
                if v < values[best] - 1e-6:  # ties: the earlier rule (the base first)
                    best = i
            apply(sim, job, props[best])
            chosen[best] += 1
            incumbent = values[best]
        if progress is not None and time.perf_counter() - last > 30:
            last = time.perf_counter()
            progress(
                f"    {decisions} decisions, {sim.finished}/{sim.to_finish} jobs done, {simulated} copies run"
            )
    metrics = sim.metrics()
    jct = float(metrics["avg_jct"])
    if share and abs(jct - incumbent) > 1e-6 * max(1.0, jct):
        raise RuntimeError(
            f"rollout over {base}: the run ended at average JCT {jct:.6f} but its chosen copy promised "
            f"{incumbent:.6f} (the simulator is not deterministic under copying)"
        )
    if jct > base_jct + 1e-6 * max(1.0, base_jct):
        raise RuntimeError(
            f"rollout over {base}: average JCT {jct:.6f} worse than the base's {base_jct:.6f} "
            "(the base rule is in the portfolio; this cannot happen with a deterministic simulator)"
        )
    return {
        "avg_jct": jct,
        "base_jct": base_jct,
        "metrics": metrics,
        "rule_choices": chosen,
        "decisions": decisions,
        "choices": choices,
        "searched": searched,
        "simulated": simulated,
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
    }


def heuristic_row(sim) -> dict:
    """Average JCT of each placement rule under the head rule and of Tiresias from the fresh ``sim`` (left
    untouched), and the lower bound."""
    from gpusched_envs.policies.schedulers import make_policy

    row: dict = {}
    for name in PLACEMENTS:
        m = copy.deepcopy(sim).run(fifo(name))  # a copy of a fresh simulator is fresh
        row[name] = float(m["avg_jct"])
        row["bound"] = float(m["lower_bound_avg_jct"])
    row[REFERENCE] = float(copy.deepcopy(sim).run(make_policy(REFERENCE, "closest"))["avg_jct"])
    return row


def parse_setting(name: str) -> str:
    """A setting name, checked: a key of :data:`SUITE_SETTINGS` or ``drift-N`` (N >= 2 jobs per task)."""
    m = DRIFT.fullmatch(name)
    if name in SUITE_SETTINGS or (m and int(m.group(1)) >= 2):
        return name
    raise ValueError(
        f"--settings: unknown setting {name!r}; choose among {', '.join(SUITE_SETTINGS)} and drift-N "
        "(N >= 2 jobs per drifting task, e.g. drift-100)"
    )


def setting_cases(setting: str, phase: str, tasks: int) -> list[tuple[str, dict, dict | None]]:
    """``(case name, env kwargs, task or None)`` of ``setting`` for ``phase`` (``heldin`` / ``heldout``): the suite
    scenario itself, or ``tasks`` tasks drawn by the env seeded with the phase's task seed."""
    if setting in SUITE_SETTINGS:
        from gpusched_lab.evaluate.compare import suite_scenarios

        suite = SUITE_SETTINGS[setting]
        for name, env_id, kw in suite_scenarios(suite):
            if name == setting and env_id == ENV_ID:
                return [(name, {**kw, "obs_mode": "flat"}, None)]
        raise ValueError(f"the {suite} suite has no {ENV_ID} scenario {setting!r}")
    import dataclasses

    from gpusched_lab.agents.common import make_env

    kw = {"cluster": "topdrl", "num_jobs": int(DRIFT.fullmatch(setting).group(1)), "obs_mode": "flat"}
    env = make_env(ENV_ID, kw)
    env.reset(seed=HELDIN_TASK_SEED if phase == "heldin" else HELDOUT_TASK_SEED)
    drawn = env.unwrapped.sample_tasks(tasks)
    env.close()
    return [
        (
            f"{phase}-task{i}:{t.arrival},load={t.load},interference={t.interference}",
            kw,
            dataclasses.asdict(t),
        )
        for i, t in enumerate(drawn)
    ]


def case_simulator(env, task: dict | None, seed: int):
    """A fresh simulator of the env (switched to ``task`` when given) reset with ``seed``."""
    from gpusched_lab.agents.common import fresh_simulator

    from gpusched_envs.envs.worker_placement import PlacementTask

    if task is not None:
        env.unwrapped.set_task(PlacementTask(**task))
    return fresh_simulator(env, seed)


def parse_per_setting(text: str, settings, what: str, parse) -> dict:
    """``SETTING=VALUE`` items separated by commas (``drift-100=0-2,topdrl-placement=0``); ``parse`` reads each
    VALUE (seed lists take ``+`` between seeds: ``0+3``). Items of settings that do not run are ignored."""
    out: dict = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"{what}: {item!r} is not SETTING=VALUE (e.g. drift-100=...)")
        name = parse_setting(name.strip())
        if name in settings:
            out[name] = parse(value.strip())
    return out


class Partial:
    """Finished results by key, written atomically after each one, valid for one digest: read back from the partial
    file of a run cut short and from the result file of a finished run (:func:`keyed_results`)."""

    def __init__(self, path: Path | None, digest: str, report: Path | None = None):
        self.path, self.digest, self.rows = path, digest, {}
        for file, read in ((report, keyed_results), (path, lambda doc: doc.get("rows", {}))):
            if file is None or not file.is_file():
                continue
            try:
                doc = json.loads(file.read_text())
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{file}: not a result of this script ({exc}); delete it") from None
            if isinstance(doc, dict) and doc.get("digest") == digest:
                self.rows.update(read(doc))

    def get(self, key: str):
        return self.rows.get(key)

    def put(self, key: str, row: dict) -> None:
        self.rows[key] = row
        if self.path is not None:
            from gpusched_envs.io import atomic_write_text

            atomic_write_text(self.path, json.dumps({"digest": self.digest, "rows": self.rows}) + "\n")


def keyed_results(report: dict) -> dict:
    """The results of a finished run's report under the keys :class:`Partial` keeps them by."""
    out = {}
    for name, s in report.get("settings_results", {}).items():
        for phase in ("heldin", "heldout"):
            for r in s.get(f"{phase}_rows", []):
                out[f"{phase}/{name}/{r['case']}/{r['seed']}"] = {
                    k: v for k, v in r.items() if k != "rollout"
                }
                if r.get("rollout"):
                    ro = r["rollout"]
                    out[f"rollout/{name}/{r['case']}/{r['seed']}/{ro['base']}/stride={ro['stride']}"] = ro
    return out


def search_jct(row: dict) -> float:
    """The best schedule found with the future known on a (case, seed): the lower of the rollout's average JCT and
    the best placement rule's in hindsight (both are placements the agent can make)."""
    return min(row["rollout"]["avg_jct"], *(row[p] for p in PLACEMENTS))


def summarize(rows: list[dict], best: str) -> dict:
    """Over the (case, seed) pairs with a rollout: the best heuristic's, the best rule's in hindsight, the
    rollout's, the search's (:func:`search_jct`) and the bound's mean average JCT; the room 1 − search/best with its
    paired bootstrap interval (over the setting and per case), the rollout's alone, and the room left over the best
    rule in hindsight."""
    from gpusched_lab.evaluate.stats import bootstrap_ci, paired_relative_change

    pairs = [r for r in rows if r.get("rollout")]
    if not pairs:
        return {}
    b = np.array([r[best] for r in pairs])
    hind = np.array([min(r[p] for p in PLACEMENTS) for r in pairs])
    roll = np.array([r["rollout"]["avg_jct"] for r in pairs])
    ro = np.array([search_jct(r) for r in pairs])
    change, lo, hi = paired_relative_change(ro, b)
    hchange, hlo, hhi = paired_relative_change(ro, hind)
    rchange, rlo, rhi = paired_relative_change(roll, b)
    per_pair = 1.0 - ro / b
    out = {
        "best_heuristic": best,
        "pairs": len(pairs),
        "best_mean": float(b.mean()),
        "hindsight_mean": float(hind.mean()),
        "rollout_mean": float(roll.mean()),
        "search_mean": float(ro.mean()),
        "bound_mean": float(np.mean([r["bound"] for r in pairs])),
        "tiresias_mean": float(np.mean([r[REFERENCE] for r in pairs])),
        "room": {"mean": -change, "ci95": [-hi, -lo]},
        "rollout_room": {"mean": -rchange, "ci95": [-rhi, -rlo]},
        "rollout_better_than_hindsight": int((roll < hind - 1e-6).sum()),
        "room_over_hindsight": {"mean": -hchange, "ci95": [-hhi, -hlo]},
        "room_per_pair": dict(zip(("mean", "lo", "hi"), bootstrap_ci(per_pair), strict=True)),
        "room_min": float(per_pair.min()),
        "room_max": float(per_pair.max()),
        "per_case": {},
    }
    for case in dict.fromkeys(r["case"] for r in pairs):
        idx = [i for i, r in enumerate(pairs) if r["case"] == case]
        c, clo, chi = paired_relative_change(ro[idx], b[idx])
        out["per_case"][case] = {
            "seeds": [pairs[i]["seed"] for i in idx],
            "best_mean": float(b[idx].mean()),
            "hindsight_mean": float(hind[idx].mean()),
            "rollout_mean": float(roll[idx].mean()),
            "search_mean": float(ro[idx].mean()),
            "bound_mean": float(np.mean([pairs[i]["bound"] for i in idx])),
            "room": {"mean": -c, "ci95": [-chi, -clo]},
            "other_rules": int(sum(sum(pairs[i]["rollout"]["rule_choices"][1:]) for i in idx)),
            "searched": int(sum(pairs[i]["rollout"]["searched"] for i in idx)),
        }
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--settings",
        default=DEFAULTS["settings"],
        help="comma list of topdrl-placement, topdrl-worker-placement and drift-N (N jobs per drifting task)",
    )
    ap.add_argument("--seeds", default=DEFAULTS["seeds"], help="held-out seeds (A-B or A,B)")
    ap.add_argument(
        "--heldin-seeds",
        default=DEFAULTS["heldin_seeds"],
        help="seeds of the held-in pairs the best rule is chosen on (A-B or A,B)",
    )
    ap.add_argument("--tasks", type=int, default=8, help="held-out tasks per drifting setting (>= 1)")
    ap.add_argument("--heldin-tasks", type=int, default=4, help="held-in tasks per drifting setting (>= 1)")
    ap.add_argument(
        "--rollout",
        default=DEFAULTS["rollout"],
        help="SETTING=SEEDS: held-out seeds the rollouts run on, per setting (seeds A-B or A+B; '' for none)",
    )
    ap.add_argument(
        "--stride",
        default=DEFAULTS["stride"],
        help="SETTING=K: search every K-th choice (the base decides the others), per setting (default 1)",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a run of seconds (one 20-job drifting setting, two tasks, one seed); replaces the options above",
    )
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON here (atomically)")
    a = ap.parse_args(argv)
    if a.quick:
        q = ap.parse_args(QUICK)
        for k in ("settings", "seeds", "heldin_seeds", "tasks", "heldin_tasks", "rollout", "stride"):
            setattr(a, k, getattr(q, k))
    return a


def main(argv=None) -> dict:
    import gpusched_lab.evaluate.stats  # noqa: F401 - fail early when the lab packages are missing

    import gpusched_envs
    from gpusched_envs.io import atomic_write_text

    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse_args(argv)
    from gpusched_lab.agents.common import make_env
    from gpusched_lab.evaluate.marl import parse_seeds

    try:
        settings = list(dict.fromkeys(parse_setting(x.strip()) for x in a.settings.split(",") if x.strip()))
        if not settings:
            raise ValueError(f"--settings: expected a comma list of settings, got {a.settings!r}")
        seeds = parse_seeds(a.seeds)
        heldin_seeds = parse_seeds(a.heldin_seeds)
        rollout_seeds = parse_per_setting(
            a.rollout, settings, "--rollout", lambda v: parse_seeds(v.replace("+", ",")) if v else []
        )
        strides = {s: 1 for s in settings} | parse_per_setting(a.stride, settings, "--stride", parse_stride)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    for name, rs in rollout_seeds.items():
        if not set(rs) <= set(seeds):
            raise SystemExit(f"--rollout: seeds {rs} of {name} are not all in --seeds {a.seeds}")
    for opt, n in (("--tasks", a.tasks), ("--heldin-tasks", a.heldin_tasks)):
        if n < 1:
            raise SystemExit(f"{opt} must be >= 1, got {n}")
    if set(seeds) & set(heldin_seeds) and any(s in SUITE_SETTINGS for s in settings):
        raise SystemExit(
            f"--seeds {a.seeds} and --heldin-seeds {a.heldin_seeds} overlap: the suite settings' held-in "
            "pairs are the same scenario with other seeds"
        )
    run_settings = {
        "settings": settings,
        "seeds": seeds,
        "heldin_seeds": heldin_seeds,
        "tasks": a.tasks,
        "heldin_tasks": a.heldin_tasks,
        "rollout": rollout_seeds,
        "stride": strides,
        "task_seeds": {"heldin": HELDIN_TASK_SEED, "heldout": HELDOUT_TASK_SEED},
        "version": gpusched_envs.__version__,
    }
    partial_path = a.out.with_suffix(".partial.json") if a.out is not None else None
    # what a kept result depends on besides its key (phase, setting, case, seed; a rollout also its base and stride)
    digest = hashlib.sha256(
        json.dumps(
            {"version": gpusched_envs.__version__, "placements": PLACEMENTS, "reference": REFERENCE},
            sort_keys=True,
        ).encode()
    ).hexdigest()[:16]
    partial = Partial(partial_path, digest, a.out)
    t0, c0 = time.perf_counter(), time.process_time()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:6.0f} s] {msg}", file=sys.stderr, flush=True)

    report: dict = {
        "env_id": ENV_ID,
        "placements": list(PLACEMENTS),
        "reference": REFERENCE,
        "settings": run_settings,
        "version": gpusched_envs.__version__,
        "command": "python scripts/studies/workerplacement_headroom.py " + " ".join(argv),
        "complete": False,
        "digest": digest,
        "settings_results": {},
    }

    def heuristic_rows(phase: str, name: str, cases, seed_list) -> list[dict]:
        rows = []
        for case, kw, task in cases:
            env = None
            for seed in seed_list:
                key = f"{phase}/{name}/{case}/{seed}"
                row = partial.get(key)
                if row is None:
                    if env is None:
                        env = make_env(ENV_ID, kw)
                    row = {"case": case, "seed": seed, **heuristic_row(case_simulator(env, task, seed))}
                    partial.put(key, row)
                rows.append(dict(row))  # the rollout joins the copy, not the kept row
            if env is not None:
                env.close()
        say(f"{name}: {phase} heuristics done ({len(rows)} pairs)")
        return rows

    state: dict = {}
    for name in settings:  # 1. choose on the held-in pairs; 2. every heuristic on every held-out pair
        heldin = setting_cases(name, "heldin", a.heldin_tasks)
        heldin_rows = heuristic_rows("heldin", name, heldin, heldin_seeds)
        best = choose_best(heldin_rows, PLACEMENTS)
        say(f"{name}: chosen on the held-in pairs: {best}")
        cases = setting_cases(name, "heldout", a.tasks)
        state[name] = {
            "cases": cases,
            "heldin_cases": heldin,
            "best": best,
            "heldin_rows": heldin_rows,
            "heldout_rows": heuristic_rows("heldout", name, cases, seeds),
        }

    def write(complete: bool) -> None:
        for name, st in state.items():
            rows, heldin_rows = st["heldout_rows"], st["heldin_rows"]
            report["settings_results"][name] = {
                "heldin_cases": [{"case": c, "env_kwargs": kw, "task": t} for c, kw, t in st["heldin_cases"]],
                "heldout_cases": [{"case": c, "env_kwargs": kw, "task": t} for c, kw, t in st["cases"]],
                "best": st["best"],
                "heldin_geomean_avg_jct": {
                    n: float(np.exp(np.mean(np.log([r[n] for r in heldin_rows]))))
                    for n in (*PLACEMENTS, REFERENCE)
                },
                "heldout_geomean_avg_jct": {
                    n: float(np.exp(np.mean(np.log([r[n] for r in rows])))) for n in (*PLACEMENTS, REFERENCE)
                },
                "heldout_mean_avg_jct": {
                    n: float(np.mean([r[n] for r in rows])) for n in (*PLACEMENTS, REFERENCE, "bound")
                },
                "summary": summarize(rows, st["best"]),
                "heldin_rows": heldin_rows,
                "heldout_rows": rows,
            }
        report["complete"] = complete
        report["seconds"] = time.perf_counter() - t0
        report["cpu_seconds"] = time.process_time() - c0
        if a.out is not None:
            atomic_write_text(a.out, json.dumps(report, indent=1) + "\n")

    # 3. the rollouts, one case of each setting in turn (a run cut short still covers every setting)
    jobs = []
    for ci in range(max(len(st["cases"]) for st in state.values())):
        for name, st in state.items():
            if ci < len(st["cases"]):
                jobs += [(name, ci, seed) for seed in rollout_seeds.get(name, [])]
    for k, (name, ci, seed) in enumerate(jobs):
        st = state[name]
        case, kw, task = st["cases"][ci]
        row = st["heldout_rows"][ci * len(seeds) + seeds.index(seed)]
        base, stride = st["best"], strides[name]
        key = f"rollout/{name}/{case}/{seed}/{base}/stride={stride}"
        done = partial.get(key)
        if done is None:
            say(f"rollout {k + 1}/{len(jobs)}: {name} {case} seed {seed} over {base}, stride {stride}")
            env = make_env(ENV_ID, kw)
            r = rollout(case_simulator(env, task, seed), base, stride=stride, progress=say)
            env.close()
            if abs(r["base_jct"] - row[base]) > 1e-6 * row[base]:
                raise RuntimeError(
                    f"{name} {case} seed {seed}: {base} gave {row[base]:.3f} in Simulator.run but "
                    f"{r['base_jct']:.3f} on the rollout's copy"
                )
            done = {
                "base": base,
                "stride": stride,
                "avg_jct": r["avg_jct"],
                "rules": portfolio(base),
                **{k2: r[k2] for k2 in ("rule_choices", "decisions", "choices", "searched", "simulated")},
                "seconds": round(r["seconds"], 1),
                "cpu_seconds": round(r["cpu_seconds"], 1),
            }
            say(
                f"    rollout {r['avg_jct']:,.0f} vs {base} {row[base]:,.0f} "
                f"({1 - r['avg_jct'] / row[base]:.2%} room), bound {row['bound']:,.0f}; {r['choices']} choices, "
                f"{r['simulated']} copies, {r['seconds']:.0f} s ({r['cpu_seconds']:.0f} s CPU)"
            )
            partial.put(key, done)
        row["rollout"] = done
        write(False)
    write(True)
    print(markdown(report))
    if partial_path is not None and partial_path.is_file():
        partial_path.unlink()
    return report


def markdown(report: dict) -> str:
    """The per-setting table: the held-in choice, the best rule in hindsight, rollout, search, bound, room."""
    lines = [
        "| setting | best rule (held-in choice) | its avg JCT (s) | best in hindsight (s) | rollout (s) | search (s) "
        "| bound (s) | Tiresias (s) | room [95% CI] | rollout's room [95% CI] | pairs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for name, s in report["settings_results"].items():
        m = s["summary"]
        if not m:
            continue
        r, rr = m["room"], m["rollout_room"]
        lines.append(
            f"| {name} | {m['best_heuristic']} | {m['best_mean']:,.0f} | {m['hindsight_mean']:,.0f} "
            f"| {m['rollout_mean']:,.0f} | {m['search_mean']:,.0f} | {m['bound_mean']:,.0f} "
            f"| {m['tiresias_mean']:,.0f} | {r['mean']:.1%} [{r['ci95'][0]:.1%}, {r['ci95'][1]:.1%}] "
            f"| {rr['mean']:.1%} [{rr['ci95'][0]:.1%}, {rr['ci95'][1]:.1%}] | {m['pairs']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
