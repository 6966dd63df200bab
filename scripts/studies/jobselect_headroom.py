"""How much room does a learned JobSelect scheduler have over the heuristics on the held-out Philly windows?

The setting is the ``philly_heldout`` suite's (``evaluate/suites/philly_heldout.yaml``): cluster ``topdrl``
(32 GPUs), Philly jobs submitted after 2017-11-01 rescaled to offered load 0.9, two families of windows (300 and
1,000 jobs), seeds changing the simulator's seeded choices. Heuristics run as ``train compare`` and the leaderboard
run them: ``Simulator.run`` on a fresh simulator holding the workload and settings of the env reset with the seed,
each with the leaderboard's placement (``closest``; Gandiva ``pack``); the preemptive ones decide at every decision
point of the simulator (arrivals, completions, their own demotion timers). Per family this measures

- ``best heuristic`` of each information class: non-clairvoyant (FIFO, Gandiva, Tiresias, LAS, Gittins) and
  clairvoyant (those and SJF, SRTF), CHOSEN by the geometric mean of average JCT on held-in windows (Philly jobs
  before 2017-11-01, same sizes and load: :data:`HELD_IN`) and then FIXED for the held-out windows;
- ``rollout``: one step of policy improvement over the best clairvoyant heuristic (Bertsekas' rollout): at every
  decision point (every K-th with ``--stride``; the base decides the others) each rule of a small portfolio
  (:func:`portfolio`: the base; its order without preemption; SRSF; SRTF, or LAS when the base is SRTF) decides on
  a copy of the simulator, the copy runs to the end with the base, and the rule whose copy ends with the lowest
  average JCT decides for real. Rules whose decision leaves the same state share one copy, and the base rule's
  copy is the one chosen at the decision before, so it is never run twice. An achievable schedule, found by search
  with the future known; never worse than its base on its (window, seed) (the base is in the portfolio and the
  simulator is deterministic; checked on every run). With ``--nc-rollout`` the best non-clairvoyant heuristic is
  rolled out over too, and the search's schedule is the better of the two;
- ``bound``: the mean of the jobs' ideal runtimes (``lower_bound_avg_jct`` of the simulator's metrics);
- ``room`` = 1 − search / best heuristic (average JCT) for each class, per window and per family, with paired 95%
  bootstrap intervals over the (window, seed) pairs (:func:`gpusched_lab.evaluate.stats.paired_relative_change`).

    nice -n 10 python scripts/studies/jobselect_headroom.py --seeds 0-4 --heldin-seeds 0-2 \
        --rollout 300=0-1,1000=0-1 --stride 300=1,1000=16 --out docs/data/jobselect_headroom.json   # docs/headroom.md
    python scripts/studies/jobselect_headroom.py --families 300 --windows 1 --seeds 0 --rollout 300=0  # a minute

The heuristics run on every held-out (window, seed) of ``--seeds``; the rollouts, which are slower (a Python
simulation per distinct rule decision), on the seeds ``--rollout`` gives per family. Finished (window, seed)
results are kept in ``OUT.partial.json`` as they come (the result file itself is rewritten after every rollout),
and a rerun resumes from them: the same run cut short, or one with more seeds or windows.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from gpusched_envs.policies import make_policy
from gpusched_envs.policies.portfolio import SRSF, NoPreempt
from gpusched_envs.policies.schedulers import PreemptivePolicy

ENV_ID = "gpusched/JobSelect-v1"
CLUSTER, LOAD, GPUS = "topdrl", 0.9, 32
# held-in windows (every job submitted before 2017-11-01), where the best heuristic of each class is chosen
HELD_IN = {
    300: ("2017-09-20", "2017-09-28", "2017-10-06", "2017-10-12", "2017-10-18", "2017-10-24"),
    1000: ("2017-09-24", "2017-10-08", "2017-10-20"),
}
NON_CLAIRVOYANT = ("fifo", "gandiva", "tiresias", "las", "gittins")
CLASSES = {"non-clairvoyant": NON_CLAIRVOYANT, "clairvoyant": (*NON_CLAIRVOYANT, "sjf", "srtf")}
PLACEMENT = {
    "gandiva": "pack"
}  # the leaderboard's placements (evaluate/agents.py HEURISTICS); the others closest


def heuristic(name: str):
    """A fresh instance of heuristic ``name`` with the leaderboard's placement."""
    return make_policy(name, PLACEMENT.get(name, "closest"))


def portfolio(base: str) -> list:
    """The rules the rollout over ``base`` chooses among at each decision, the base first: the base; its order
    without preemption; SRSF; SRTF (LAS when the base is SRTF). Fresh instances: the policies keep per-run state."""
    rules = [heuristic(base)]
    if isinstance(rules[0], PreemptivePolicy):
        rules.append(NoPreempt(heuristic(base)))
    rules.append(SRSF("closest"))
    rules.append(heuristic("las" if base == "srtf" else "srtf"))
    return rules


def rule_names(base: str) -> list[str]:
    return [r.name for r in portfolio(base)]


# simulator attributes that stay the same through a run: copies share them instead of copying them
SHARED = ("cluster", "workload", "config", "_share", "_submit", "_milli_list", "_n_list", "_allowed_list")


def clone(sim):
    """A deep copy of ``sim`` that shares its run-constant parts (:data:`SHARED`) with it."""
    memo = {id(v): v for v in (getattr(sim, k, None) for k in SHARED) if v is not None}
    return copy.deepcopy(sim, memo)


def state_key(sim) -> bytes:
    """What decides the rest of a run once a rule has acted: which jobs run where, who waits, how often each was
    preempted, and the pending policy timer (two decisions with the same key lead to the same future)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(sim.status.tobytes())
    h.update(sim.preemptions.tobytes())
    h.update(sim.needs_restart.tobytes())
    for job in sorted(sim.running):
        h.update(np.int64(job).tobytes())
        h.update(np.asarray(sim.job_gpus[job], dtype=np.int64).tobytes())
    h.update(np.float64(sim.timer_at).tobytes())
    return h.digest()


def rule_values(
    sim, rules, finish, known: float | None = None, share: bool = True
) -> tuple[list[float], int]:
    """Each rule of ``rules`` (fresh policies) decides at ``sim``'s current decision point on a copy that then runs
    to the end with ``finish()`` (a fresh policy); returns each rule's average JCT and how many copies were run. With
    ``share`` rules whose decision leaves the same state (:func:`state_key`) share one copy, and ``known`` is the
    value of the first rule's state when the caller has it already (the copy chosen at the decision before)."""
    values: list[float] = []
    seen: dict[bytes, float] = {}
    simulated = 0
    for i, rule in enumerate(rules):
        trial = clone(sim)
        rule.reset(trial)
        rule.schedule(trial)
        key = state_key(trial) if share else None
        if share and i == 0 and known is not None:
            seen[key] = known
        if share and key in seen:
            values.append(seen[key])
            continue
        value = float(trial.run(finish())["avg_jct"])
        simulated += 1
        if share:
            seen[key] = value
        values.append(value)
    return values, simulated


def rollout(sim, base: str, stride: int = 1, share: bool = True, progress=None) -> dict:
    """One-step rollout over heuristic ``base`` on ``sim`` (fresh), run to the end.

    At every ``stride``-th decision point each rule of :func:`portfolio` decides on a copy that then runs to the
    end with the base, and the best copy's rule decides for real; at the other decision points the base decides
    (the copy chosen before goes on with the base there, so the rollout is still never worse than the base).
    Returns ``avg_jct`` (the rollout's), ``base_jct`` (the base alone from the same start), the simulator's
    ``metrics``, ``rule_choices`` (how often each rule of :func:`portfolio` decided at a searched decision, in its
    order), ``decisions``, ``searched`` (decisions searched), ``simulated`` (copies run to the end), ``seconds``
    and ``cpu_seconds``. With ``share`` (the default) rules whose decision leaves the same state
    (:func:`state_key`) share one copy and the base rule reuses the copy chosen before; without it every rule's
    copy is run (the reference the sharing is tested against)."""
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"rollout: stride must be an integer >= 1, got {stride!r}")
    t0, c0 = time.perf_counter(), time.process_time()
    names = rule_names(base)
    chosen = [0] * len(names)
    incumbent = float(clone(sim).run(heuristic(base))["avg_jct"])  # the base alone: the first promise
    base_jct, simulated, decisions, searched, last = incumbent, 1, 0, 0, t0
    while sim.next_decision():
        decisions += 1
        if (decisions - 1) % stride:
            rule = heuristic(base)
            rule.reset(sim)
            rule.schedule(sim)
            continue
        searched += 1
        # the base's decision here continues the copy chosen before; the rest of each run is the base's
        values, n = rule_values(sim, portfolio(base), lambda: heuristic(base), incumbent, share)
        simulated += n
        best = 0
        for i, v in enumerate(values):
            if v < values[best] - 1e-6:  # ties: the earlier rule (the base first)
                best = i
        rule = portfolio(base)[best]
        rule.reset(sim)
        rule.schedule(sim)
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
            f"{incumbent:.6f} (the simulator is not deterministic under copying, or state_key misses state)"
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
        "searched": searched,
        "simulated": simulated,
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
    }


def choose_best(rows: list[dict], candidates) -> str:
    """The candidate with the lowest geometric mean of average JCT over ``rows`` (each maps names to average JCT):
    scale-free, so every window counts alike whatever its JCT scale and no single overloaded window decides;
    ties: the earlier candidate."""
    if not rows:
        raise ValueError("choose_best: no rows to choose on")
    candidates = list(candidates)
    log_mean = {c: float(np.mean([np.log(r[c]) for r in rows])) for c in candidates}
    return min(candidates, key=lambda c: (log_mean[c], candidates.index(c)))


def window_kwargs(start: str, jobs: int) -> dict:
    return {"cluster": CLUSTER, "workload": f"philly:start={start},jobs={jobs},load={LOAD},gpus={GPUS}"}


def heldout_windows(family: int) -> list[tuple[str, dict]]:
    """``(name, env_kwargs)`` of the ``philly_heldout`` suite's windows of ``family`` jobs."""
    from gpusched_lab.evaluate.compare import suite_scenarios

    out = [
        (name, kw)
        for name, env_id, kw in suite_scenarios("philly_heldout")
        if env_id == ENV_ID and f"jobs={family}," in kw.get("workload", "")
    ]
    if not out:
        raise ValueError(f"the philly_heldout suite has no {family}-job window")
    return out


def parse_per_family(text: str, families, what: str, parse) -> dict:
    """``FAMILY=VALUE`` items separated by commas (``300=0-1,1000=0``); ``parse`` reads each VALUE."""
    out: dict = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        fam, eq, value = item.partition("=")
        if not eq or not fam.strip().isdigit() or int(fam) not in HELD_IN:
            raise ValueError(
                f"{what}: {item!r} is not FAMILY=VALUE with FAMILY one of {sorted(HELD_IN)} (e.g. 300=...)"
            )
        if int(fam) in families:  # the other family's items are ignored when it does not run
            out[int(fam)] = parse(value.strip())
    return out


def parse_stride(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"--stride: expected an integer >= 1, got {value!r}")
    return int(value)


def settings_digest(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


class Partial:
    """Finished (phase, window, seed) results, written atomically after each one, valid for one digest: read back
    from the partial file of a run cut short and from the result file of a finished run (:func:`keyed_results`)."""

    def __init__(self, path: Path | None, digest: str, report: Path | None = None):
        self.path, self.digest, self.rows = path, digest, {}
        for file, read in ((report, keyed_results), (path, lambda doc: doc.get("rows", {}))):
            if file is None or not file.is_file():
                continue
            try:
                doc = json.loads(file.read_text())
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{file}: not a result of this script ({exc}); delete it") from None
            if doc.get("digest") == digest:
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
    for fam, f in report.get("families", {}).items():
        for r in f.get("heldin_rows", []):
            out[f"heldin/{fam}/{r['window']}/{r['seed']}"] = r
        for r in f.get("rows", []):
            out[f"heldout/{fam}/{r['window']}/{r['seed']}"] = {k: v for k, v in r.items() if k != "rollout"}
            if r.get("rollout"):
                stride = next(iter(r["rollout"].values()))["stride"]
                key = f"rollout/{fam}/{r['window']}/{r['seed']}/stride={stride}/{'+'.join(r['rollout'])}"
                out[key] = r["rollout"]
    return out


def heuristic_row(env, seed: int, names) -> dict:
    """Average JCT of each heuristic on the (window, seed), and the lower bound."""
    from gpusched_lab.agents.common import fresh_simulator

    start = fresh_simulator(env, seed)
    row: dict = {}
    for name in names:
        m = copy.deepcopy(start).run(heuristic(name))  # a copy of a fresh simulator is fresh
        row[name] = float(m["avg_jct"])
        row["bound"] = float(m["lower_bound_avg_jct"])
    return row


def search_jct(row: dict) -> float:
    """The best schedule the search found on a (window, seed): the lowest average JCT of its rollouts."""
    return min(r["avg_jct"] for r in row["rollout"].values())


def summarize_family(rows: list[dict], best: dict) -> dict:
    """Per class, over the (window, seed) pairs with a rollout: the best heuristic's and the search's mean average
    JCT, the bound, and the room 1 − search/best with its paired bootstrap interval, over the family and per
    window."""
    from gpusched_lab.evaluate.stats import bootstrap_ci, paired_relative_change

    pairs = [r for r in rows if r.get("rollout")]
    out: dict = {}
    if not pairs:
        return out
    ro = np.array([search_jct(r) for r in pairs])
    for cls, name in best.items():
        b = np.array([r[name] for r in pairs])
        change, lo, hi = paired_relative_change(ro, b)
        per_pair = 1.0 - ro / b
        entry = {
            "best_heuristic": name,
            "pairs": len(pairs),
            "best_mean": float(b.mean()),
            "rollout_mean": float(ro.mean()),
            "bound_mean": float(np.mean([r["bound"] for r in pairs])),
            "room": {"mean": -change, "ci95": [-hi, -lo]},
            "room_per_pair": dict(zip(("mean", "lo", "hi"), bootstrap_ci(per_pair), strict=True)),
            "room_min": float(per_pair.min()),
            "room_max": float(per_pair.max()),
            "per_window": {},
        }
        for w in dict.fromkeys(r["window"] for r in pairs):
            idx = [i for i, r in enumerate(pairs) if r["window"] == w]
            c, wlo, whi = paired_relative_change(ro[idx], b[idx])
            entry["per_window"][w] = {
                "seeds": [pairs[i]["seed"] for i in idx],
                "best_mean": float(b[idx].mean()),
                "rollout_mean": float(ro[idx].mean()),
                "bound_mean": float(np.mean([pairs[i]["bound"] for i in idx])),
                "room": {"mean": -c, "ci95": [-whi, -wlo]},
            }
        out[cls] = entry
    return out


def main(argv=None) -> dict:
    import gpusched_lab.evaluate.marl  # noqa: F401 - fail early when the lab packages are missing

    import gpusched_envs
    from gpusched_envs.io import atomic_write_text

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="300,1000", help="window sizes, comma list of 300 and 1000")
    ap.add_argument("--seeds", default="0-9", help="held-out seeds the heuristics run on (A-B or A,B)")
    ap.add_argument(
        "--heldin-seeds", default="0-2", help="seeds of the held-in windows the choice is made on"
    )
    ap.add_argument(
        "--rollout",
        default="300=0,1000=0",
        help="FAMILY=SEEDS: held-out seeds the rollouts run on, per family (seeds A-B or A+B; '' for none)",
    )
    ap.add_argument(
        "--stride",
        default="300=1,1000=16",
        help="FAMILY=K: search every K-th decision point (the base decides the others), per family",
    )
    ap.add_argument(
        "--nc-rollout",
        action="store_true",
        help="also roll out over the best non-clairvoyant heuristic (by default only over the best clairvoyant "
        "one, whose rollout is the search's schedule for both classes)",
    )
    ap.add_argument("--windows", type=int, default=None, help="only the first N held-out windows per family")
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON here (atomically)")
    a = ap.parse_args(argv)
    from gpusched_lab.agents.common import fresh_simulator, make_env
    from gpusched_lab.evaluate.marl import parse_seeds

    try:
        families = [int(x) for x in a.families.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--families: expected a comma list of 300 and 1000, got {a.families!r}") from None
    if not families or any(f not in HELD_IN for f in families):
        raise SystemExit(f"--families: expected a comma list of 300 and 1000, got {a.families!r}")
    try:
        seeds = parse_seeds(a.seeds)
        heldin_seeds = parse_seeds(a.heldin_seeds)
        rollout_seeds = parse_per_family(
            a.rollout, families, "--rollout", lambda v: parse_seeds(v.replace("+", ","))
        )
        strides = {f: 1 for f in families} | parse_per_family(a.stride, families, "--stride", parse_stride)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    for fam, rs in rollout_seeds.items():
        if not set(rs) <= set(seeds):
            raise SystemExit(
                f"--rollout: seeds {rs} of the {fam}-job family are not all in --seeds {a.seeds}"
            )
    if a.windows is not None and a.windows < 1:
        raise SystemExit(f"--windows must be >= 1, got {a.windows}")
    settings = {
        "families": families,
        "seeds": seeds,
        "heldin_seeds": heldin_seeds,
        "rollout": {str(k): v for k, v in rollout_seeds.items()},
        "stride": {str(k): v for k, v in strides.items()},
        "nc_rollout": a.nc_rollout,
        "windows": a.windows,
        "version": gpusched_envs.__version__,
    }
    partial_path = a.out.with_suffix(".partial.json") if a.out is not None else None
    # what a kept result depends on besides its key (phase, family, window, seed; for a rollout also the stride and
    # the bases): more seeds or windows in a rerun reuse everything already done
    digest = settings_digest({"version": gpusched_envs.__version__, "held_in": HELD_IN, "classes": CLASSES})
    partial = Partial(partial_path, digest, a.out)
    t0, c0 = time.perf_counter(), time.process_time()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:6.0f} s] {msg}", file=sys.stderr, flush=True)

    names = CLASSES["clairvoyant"]
    report: dict = {
        "setting": {
            "env_id": ENV_ID,
            "cluster": CLUSTER,
            "load": LOAD,
            "gpus": GPUS,
            "suite": "philly_heldout",
        },
        "settings": settings,
        "version": gpusched_envs.__version__,
        "command": "python scripts/studies/jobselect_headroom.py " + " ".join(argv or sys.argv[1:]),
        "classes": {k: list(v) for k, v in CLASSES.items()},
        "complete": False,
        "digest": digest,
        "families": {},
    }

    def heuristic_rows(phase: str, fam: int, windows, seed_list) -> list[dict]:
        rows = []
        for wi, (wname, kw) in enumerate(windows):
            env = make_env(ENV_ID, kw, "flat")
            for seed in seed_list:
                key = f"{phase}/{fam}/{wname}/{seed}"
                row = partial.get(key)
                if row is None:
                    row = {"window": wname, "seed": seed, **heuristic_row(env, seed, names)}
                    partial.put(key, row)
                rows.append(dict(row))  # the rollout joins the copy, not the kept row
            env.close()
            say(f"{fam} jobs, {phase} window {wi + 1}/{len(windows)} {wname}: heuristics done")
        return rows

    fams: dict = {}
    for (
        fam
    ) in families:  # 1. choose on the held-in windows; 2. every heuristic on every held-out (window, seed)
        heldin = [(start, window_kwargs(start, fam)) for start in HELD_IN[fam]]
        heldin_rows = heuristic_rows("heldin", fam, heldin, heldin_seeds)
        best = {cls: choose_best(heldin_rows, cands) for cls, cands in CLASSES.items()}
        say(f"{fam} jobs: chosen on the held-in windows: " + ", ".join(f"{c} {n}" for c, n in best.items()))
        windows = heldout_windows(fam)[: a.windows]
        fams[fam] = {
            "windows": windows,
            "best": best,
            "heldin_rows": heldin_rows,
            "rows": heuristic_rows("heldout", fam, windows, seeds),
        }

    def write(complete: bool) -> None:
        for fam, f in fams.items():
            rows, heldin_rows = f["rows"], f["heldin_rows"]
            report["families"][str(fam)] = {
                "heldin_windows": list(HELD_IN[fam]),
                "heldout_windows": [w for w, _ in f["windows"]],
                "best": f["best"],
                "heldin_mean_avg_jct": {n: float(np.mean([r[n] for r in heldin_rows])) for n in names},
                "heldin_geomean_avg_jct": {
                    n: float(np.exp(np.mean(np.log([r[n] for r in heldin_rows])))) for n in names
                },
                "heldout_mean_avg_jct": {n: float(np.mean([r[n] for r in rows])) for n in (*names, "bound")},
                "summary": summarize_family(rows, f["best"]),
                "heldin_rows": heldin_rows,
                "rows": rows,
            }
        report["complete"] = complete
        report["seconds"] = time.perf_counter() - t0
        report["cpu_seconds"] = time.process_time() - c0
        if a.out is not None:
            atomic_write_text(a.out, json.dumps(report, indent=1) + "\n")

    # 3. the rollouts, one window of each family in turn (a run cut short still covers both families)
    jobs = []
    for wi in range(max(len(f["windows"]) for f in fams.values())):
        for fam, f in fams.items():
            if wi < len(f["windows"]):
                jobs += [(fam, wi, seed) for seed in rollout_seeds.get(fam, [])]
    for k, (fam, wi, seed) in enumerate(jobs):
        f = fams[fam]
        wname, kw = f["windows"][wi]
        row = f["rows"][wi * len(seeds) + seeds.index(seed)]
        bases = [f["best"]["clairvoyant"]]
        if a.nc_rollout and f["best"]["non-clairvoyant"] not in bases:
            bases.append(f["best"]["non-clairvoyant"])
        key = f"rollout/{fam}/{wname}/{seed}/stride={strides[fam]}/{'+'.join(bases)}"
        done = partial.get(key)
        if done is None:
            env = make_env(ENV_ID, kw, "flat")
            done = {}
            for base in bases:
                say(f"rollout {k + 1}/{len(jobs)}: {wname} seed {seed} over {base}, stride {strides[fam]}")
                r = rollout(fresh_simulator(env, seed), base, stride=strides[fam], progress=say)
                if abs(r["base_jct"] - row[base]) > 1e-6 * row[base]:
                    raise RuntimeError(
                        f"{wname} seed {seed}: {base} gave {row[base]:.3f} in Simulator.run but "
                        f"{r['base_jct']:.3f} on the rollout's copy"
                    )
                done[base] = {
                    "avg_jct": r["avg_jct"],
                    "stride": strides[fam],
                    "rules": rule_names(base),
                    **{k2: r[k2] for k2 in ("rule_choices", "decisions", "searched", "simulated")},
                    "seconds": round(r["seconds"], 1),
                    "cpu_seconds": round(r["cpu_seconds"], 1),
                }
                say(
                    f"    rollout {r['avg_jct']:,.0f} vs {base} {row[base]:,.0f} "
                    f"({1 - r['avg_jct'] / row[base]:.2%} room), bound {row['bound']:,.0f}; {r['decisions']} "
                    f"decisions, {r['simulated']} copies, {r['seconds']:.0f} s ({r['cpu_seconds']:.0f} s CPU)"
                )
            env.close()
            partial.put(key, done)
        row["rollout"] = done
        write(False)
    write(True)
    print(markdown(report))
    if partial_path is not None and partial_path.is_file():
        partial_path.unlink()
    return report


def markdown(report: dict) -> str:
    """The per-family table: best heuristic per class (chosen on held-in windows), rollout, bound, room."""
    lines = [
        "| family | class | best heuristic (held-in choice) | its avg JCT (s) | rollout (s) | bound (s) | "
        "room [95% CI] | pairs |",
        "|---|---|---|---:|---:|---:|---|---:|",
    ]
    for fam, f in report["families"].items():
        for cls, s in f["summary"].items():
            r = s["room"]
            lines.append(
                f"| {fam} jobs | {cls} | {s['best_heuristic']} | {s['best_mean']:,.0f} | {s['rollout_mean']:,.0f} "
                f"| {s['bound_mean']:,.0f} | {r['mean']:.1%} [{r['ci95'][0]:.1%}, {r['ci95'][1]:.1%}] "
                f"| {s['pairs']} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
