"""A rule-choice JobSelect policy learned from search: label every decision with what each rule leads to, then fit.

The rule-choice env (``JobSelect-v1(rules=[...])``) asks at every decision point of the simulator which rule
schedules. Policy gradients see one sampled episode per window and little of what each choice changed; the
rollout search of ``jobselect_headroom.py`` sees it exactly: at a decision point each rule decides on a copy of the
simulator, the copy runs to the end with the first rule (the base), and its average JCT is that rule's value
there. This script

- ``label``: runs that search through the env on training windows (Philly jobs before 2017-11-01, the windows of
  the config's curriculum at its evaluation load) and keeps, at every decision where the rules' values differ,
  the observation and the values; the episode goes on with the best rule (the rollout's own trajectory);
- ``fit``: trains the PPO network of the env (``slots="rules"``, the checkpoint format PPO writes) to pick the rule
  of least value, each decision weighted by how much the worst rule there loses (regret, relative to the base's
  value; with ``--min-gain`` another rule only where it saves more than that share), and keeps the epoch whose
  greedy policy has the lowest geometric mean of average JCT ÷ the base rule's over the config's held-in
  evaluation windows (``--select-on heldin+train``: and its training windows; never the held-out ones).

The search reads the future of the window (arrivals to come); the policy reads only its observation, which for a
clairvoyant env holds the durations of the jobs that have arrived.

    nice -n 5 python scripts/studies/rule_imitation.py label \\
        --config train/configs/ppo_jobselect_gnn_clairvoyant_rules.yaml --seeds 0-1 --out runs/rule_labels
    nice -n 5 python scripts/studies/rule_imitation.py fit runs/rule_labels \\
        --config train/configs/ppo_jobselect_gnn_clairvoyant_rules.yaml --epochs 30 --out runs/rule_imitation

``label`` writes one ``.npz`` per (window, seed) and skips those already written (a rerun resumes); ``fit`` writes
``OUT/best`` (the chosen epoch's checkpoint), ``OUT/checkpoint`` (the last epoch's) and ``OUT/fit.json`` (every
epoch's loss and held-in result).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

ENV_ID = "gpusched/JobSelect-v1"


def read_config(path: str | Path) -> dict:
    """The training config (safe YAML): its env kwargs, the training windows and the held-in windows."""
    import yaml

    cfg = yaml.safe_load(Path(path).read_text())
    kw = dict(cfg["env_kwargs"])
    if not kw.get("rules"):
        raise SystemExit(f"{path}: env_kwargs has no rules (this script trains a rule-choice env's policy)")
    load, jobs = kw.get("load", 0.9), kw.get("num_jobs", 300)
    train: list[str] = []
    for stage in cfg.get("curriculum") or []:
        for choice in stage["choices"]:
            w = choice.get("workload")
            if isinstance(w, str) and f"load={load}" in w and f"jobs={jobs}" in w and w not in train:
                train.append(w)
    heldin = [c["workload"] for c in cfg.get("eval_choices") or [] if "workload" in c]
    return {"env_kwargs": kw, "train": train, "heldin": heldin, "path": str(path)}


def make_env(env_kwargs: dict, workload: str | None = None):
    """The config's env (graph observations) on ``workload``, sized to its ``jobs=``."""
    from gpusched_lab.agents.common import make_env as make

    kw = dict(env_kwargs)
    if workload is not None:
        kw["workload"] = workload
        jobs = [p for p in workload.split(",") if p.startswith("jobs=")]
        if jobs:
            kw["num_jobs"] = int(jobs[0][5:])
    return make(ENV_ID, kw, "graph")


def label_episode(env, seed: int, act=None) -> dict:
    """Search every decision of ``env``'s episode seeded by ``seed``: per decision where the rules' values differ,
    the observation and the values (average JCT of the rule now, then the base rule to the end). Returns
    ``obs`` (a dict of stacked arrays), ``values (T, K)``, ``steps (T,)`` (the step of each kept decision),
    ``actions`` (the rule taken at every step: the best, ties to the earlier), ``decisions``, ``avg_jct`` (the search's),
    ``base_jct`` (the base rule alone), ``promise`` (the value of the rule chosen at the last decision: equal to
    ``avg_jct`` when the env's rules act as fresh copies of them do) and ``seconds``. With ``act`` (a callable
    ``env -> action``, e.g. a loaded checkpoint) the episode goes on with its actions instead of the best rule's
    (DAgger: the states a learned policy visits), and ``promise`` is None."""
    import jobselect_headroom as hr

    from gpusched_envs.policies.portfolio import make_rule

    t0 = time.perf_counter()
    u = env.unwrapped
    rules, placement = list(u.rules), u.placement
    obs, _ = env.reset(seed=seed)
    base_jct = None  # the base rule's value at the first decision: the base alone
    kept: list[dict] = []
    values_kept: list[np.ndarray] = []
    steps_kept: list[int] = []
    actions: list[int] = []
    decisions = 0
    while True:
        decisions += 1
        fresh = [make_rule(name, placement) for name in rules]
        values = np.array(hr.rule_values(u.sim, fresh, lambda: make_rule(rules[0], placement))[0])
        if base_jct is None:
            base_jct = float(values[0])
        if values.max() - values.min() > 1e-9 * max(1.0, values.min()):
            kept.append({k: np.array(v, copy=True) for k, v in obs.items()})
            values_kept.append(values)
            steps_kept.append(decisions - 1)
        best = int(np.argmin(values))  # ties: the earlier rule (the base first)
        promise = float(values[best]) if act is None else None
        action = best if act is None else int(act(env))
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    stacked = {k: np.stack([o[k] for o in kept]) for k in kept[0]} if kept else {}
    return {
        "obs": stacked,
        "values": np.array(values_kept).reshape(-1, len(rules)),
        "steps": np.array(steps_kept, dtype=np.int64),
        "actions": np.array(actions, dtype=np.int64),
        "decisions": decisions,
        "avg_jct": float(info["metrics"]["avg_jct"]),
        "base_jct": float(base_jct),
        "promise": promise,
        "seconds": time.perf_counter() - t0,
    }


def window_file(out: Path, workload: str, seed: int) -> Path:
    tag = workload.split(":", 1)[1].split(",")[0].replace("=", "")
    return out / f"{tag}-s{seed}.npz"


def cmd_label(args) -> None:
    from gpusched_envs.validation import parse_seeds

    cfg = read_config(args.config)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    windows = cfg["train"][: args.windows] if args.windows else cfg["train"]
    jobs = [(w, s) for w in windows for s in parse_seeds(args.seeds)]
    k, _, parts = args.part.partition("/")
    jobs = jobs[int(k) - 1 :: int(parts)]
    print(f"{len(jobs)} (window, seed) episodes to label, rules {cfg['env_kwargs']['rules']}", flush=True)
    act = None
    if args.policy:
        from gpusched_lab.agents.checkpoint import load

        act = load(args.policy)
        print(f"following {args.policy}'s greedy actions", flush=True)
    for i, (w, s) in enumerate(jobs, 1):
        path = window_file(out, w, s)
        if path.exists():
            continue
        r = label_episode(make_env(cfg["env_kwargs"], w), s, act)
        arrays = {f"obs_{k}": v for k, v in r["obs"].items()}
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(
            tmp,
            values=r["values"],
            steps=r["steps"],
            actions=r["actions"],
            meta=np.array(
                json.dumps(
                    {k: r[k] for k in ("decisions", "avg_jct", "base_jct", "promise", "seconds")}
                    | {"workload": w}
                )
            ),
            **arrays,
        )
        tmp.replace(path)
        print(
            f"[{i}/{len(jobs)}] {w} seed {s}: {len(r['values'])}/{r['decisions']} decisions differ, "
            f"{'search' if act is None else 'policy'} "
            f"{r['avg_jct']:,.0f} s vs base {r['base_jct']:,.0f} s ({r['seconds']:.0f} s)"
            + (
                ""
                if r["promise"] is None or abs(r["promise"] - r["avg_jct"]) <= 1e-6 * r["avg_jct"]
                else f"; promised {r['promise']:,.0f}"
            ),
            flush=True,
        )


def load_labels(folders: list[Path]) -> tuple[dict, np.ndarray]:
    obs: dict[str, list] = {}
    values = []
    for path in sorted(p for folder in folders for p in Path(folder).glob("*.npz")):
        if path.name.endswith(".tmp.npz"):
            continue
        with np.load(path) as z:
            if len(z["values"]) == 0:
                continue
            values.append(z["values"])
            for k in z.files:
                if k.startswith("obs_"):
                    obs.setdefault(k[4:], []).append(z[k])
    if not values:
        raise SystemExit(
            f"{', '.join(map(str, folders))}: no labelled decisions (run the label command first)"
        )
    return {k: np.concatenate(v) for k, v in obs.items()}, np.concatenate(values)


def greedy_jct(policy, env, seed: int) -> tuple[float, list[int]]:
    """Average JCT of ``policy``'s greedy episode (every action is valid in a rule-choice env) and how often it
    chose each rule."""
    import torch
    from gpusched_lab.agents.common import run_episode
    from gpusched_lab.agents.nets.common import obs_to_tensors

    counts = [0] * env.action_space.n

    def act(obs: dict) -> int:
        with torch.no_grad():
            a = int(policy(obs_to_tensors(obs))[0].argmax())
        counts[a] += 1
        return a

    return float(run_episode(act, env, seed)["metrics"]["avg_jct"]), counts


def base_jct(env, seed: int) -> float:
    from gpusched_lab.agents.common import fresh_simulator

    from gpusched_envs.policies.portfolio import make_rule

    u = env.unwrapped
    return float(fresh_simulator(env, seed).run(make_rule(u.rules[0], u.placement))["avg_jct"])


def cmd_fit(args) -> None:
    import torch
    from gpusched_lab.agents.algos.ppo import identity_action_net
    from gpusched_lab.agents.checkpoint import PPOPolicy, save
    from gpusched_lab.agents.nets.networks import config_for_env

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    cfg = read_config(args.config)
    obs, values = load_labels([Path(f) for f in args.labels])
    regret = (values - values.min(1, keepdims=True)) / values[:, :1]
    weight = regret.max(1)
    weight = weight / weight.mean()
    target = values.argmin(1)
    gain = (values[:, 0] - values.min(1)) / values[:, 0]  # what the best rule saves over the first, relative
    target[gain <= args.min_gain] = 0  # depart from the first rule only where it pays more than min_gain
    env = make_env(cfg["env_kwargs"])
    net = config_for_env(env, "gnn", hidden=args.hidden, layers=args.layers)
    policy = PPOPolicy(net, env.observation_space)
    # the action net starts as the identity on the scores, the first rule ahead by the prior (as PPO's does)
    identity_action_net(policy.action_net, net.num_actions)
    with torch.no_grad():
        policy.action_net.bias[0] = args.prior
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    data = {k: torch.from_numpy(v) for k, v in obs.items()}
    t_target, t_weight = torch.from_numpy(target), torch.from_numpy(weight).float()
    n = len(target)
    windows = cfg["heldin"] + (cfg["train"] if args.select_on == "heldin+train" else [])
    heldin = [(make_env(cfg["env_kwargs"], w), w) for w in windows]
    bases = [base_jct(e, 0) for e, _ in heldin]
    out = Path(args.out)
    log: list[dict] = []
    best = math.inf
    rng = np.random.default_rng(args.seed)
    print(
        f"{n} labelled decisions ({np.bincount(target, minlength=net.num_actions).tolist()} by best rule); "
        f"held-in base rule avg JCT {[round(b) for b in bases]}",
        flush=True,
    )

    def write(folder: Path, epoch: int, evaluation: dict) -> None:
        save(
            folder,
            policy,
            algorithm="rule-imitation",
            policy="logits",
            env_id=ENV_ID,
            env_kwargs=cfg["env_kwargs"],
            obs_mode="graph",
            network=net,
            steps=int(n * epoch),
            seed=args.seed,
            command=" ".join(sys.argv),
            evaluation=evaluation,
            args={k: v for k, v in vars(args).items() if k != "func"},
        )

    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        policy.train()
        order = rng.permutation(n)
        total = 0.0
        for i in range(0, n, args.batch_size):
            idx = torch.from_numpy(order[i : i + args.batch_size])
            logits = policy({k: v[idx] for k, v in data.items()})
            ce = torch.nn.functional.cross_entropy(logits, t_target[idx], reduction="none")
            loss = (ce * t_weight[idx]).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            total += loss.item() * len(idx)
        policy.eval()
        if epoch % args.eval_every and epoch != args.epochs:
            print(f"epoch {epoch}: loss {total / n:.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)
            continue
        results = [greedy_jct(policy, e, 0) for e, _ in heldin]
        ratios = [r[0] / b for r, b in zip(results, bases, strict=True)]
        geo = float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")
        row = {
            "epoch": epoch,
            "loss": total / n,
            "heldin_geo_ratio": geo,
            "heldin_ratios": ratios,
            "heldin_rule_counts": [r[1] for r in results],
            "seconds": time.perf_counter() - t0,
        }
        log.append(row)
        evaluation = {"heldin_geo_ratio_to_first_rule": geo, "epoch": epoch, "windows": windows}
        write(out / "checkpoint", epoch, evaluation)
        if geo < best:
            best = geo
            write(out / "best", epoch, evaluation)
        tmp = out / "fit.json.tmp"
        tmp.write_text(
            json.dumps({"labels": [str(f) for f in args.labels], "decisions": n, "epochs": log}, indent=1)
        )
        tmp.replace(out / "fit.json")
        print(
            f"epoch {epoch}: loss {row['loss']:.4f}, held-in {geo:.3f}x the first rule "
            f"{[round(r, 3) for r in ratios[:8]]}{' ...' if len(ratios) > 8 else ''} ({row['seconds']:.0f} s)",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    lab = sub.add_parser(
        "label", help="search the training windows and keep the decisions where rules differ"
    )
    lab.add_argument("--config", required=True, help="a rule-choice training config (train/configs/*.yaml)")
    lab.add_argument("--seeds", default="0", help="simulator seeds per window, e.g. 0-1")
    lab.add_argument("--windows", type=int, default=0, help="only the first N training windows (0: all)")
    lab.add_argument(
        "--policy",
        help="a rule-choice checkpoint: follow its greedy actions instead of the best rule's (DAgger)",
    )
    lab.add_argument("--part", default="1/1", help="K/N: the K-th of N interleaved shares of the episodes")
    lab.add_argument("--out", required=True, help="folder for the .npz files")
    lab.set_defaults(func=cmd_label)
    fit = sub.add_parser(
        "fit", help="train the env's PPO network on the labels; choose the epoch on held-in windows"
    )
    fit.add_argument("labels", nargs="+", help="the label command's folder(s)")
    fit.add_argument("--config", required=True)
    fit.add_argument("--epochs", type=int, default=30)
    fit.add_argument("--batch-size", type=int, default=256)
    fit.add_argument("--lr", type=float, default=1e-3)
    fit.add_argument("--hidden", type=int, default=64)
    fit.add_argument("--layers", type=int, default=1)
    fit.add_argument(
        "--prior", type=float, default=2.0, help="starting logit of the first rule over the others"
    )
    fit.add_argument(
        "--min-gain",
        type=float,
        default=0.0,
        help="label a decision with another rule only where it beats the first by more than this share of the "
        "first's value (0: wherever it is best)",
    )
    fit.add_argument(
        "--select-on",
        choices=("heldin", "heldin+train"),
        default="heldin",
        help="windows the epoch is chosen on: the config's held-in windows, or those and its training windows",
    )
    fit.add_argument("--eval-every", type=int, default=1, help="evaluate every K epochs (and the last)")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--out", required=True)
    fit.set_defaults(func=cmd_fit)
    args = p.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
