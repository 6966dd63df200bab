"""Choose between non-clairvoyant JobSelect checkpoints on HELD-IN Philly windows (submitted before
2017-11-01, not trained on by any candidate), never on the held-out suite. Prints each candidate's average JCT per
window (simulator seed 0) next to Tiresias and LAS on the same workload, and writes them as JSON.

    python scripts/studies/nc_select.py CKPT [CKPT ...] --out runs/nc_select.json
"""

from __future__ import annotations

import argparse
import json

import numpy as np

# odd October days: none is a training window of ppo_jobselect_gnn_nc_bc (Oct 2, 6, 10, 14, 18, 22, 26) or of
# ppo_jobselect_gnn_nc_las (Oct 2, 10, 15, 18, 26); Oct 7, 13, 21 are also the latter's in-run validation windows
SELECTION_DAYS = [f"2017-10-{d:02d}" for d in (1, 3, 5, 7, 9, 11, 13, 17, 19, 21, 23, 25, 27, 29)]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="+")
    p.add_argument("--jobs", type=int, default=300)
    p.add_argument("--days", default=",".join(SELECTION_DAYS))
    p.add_argument("--out", default="")
    a = p.parse_args(argv)
    from gpusched_lab import agents
    from gpusched_lab.agents.common import fresh_simulator, make_env, run_episode, set_torch_threads
    from gpusched_lab.evaluate.compare import scenario_kwargs

    from gpusched_envs.policies import make_policy

    set_torch_threads(1)
    rows = []
    loaded = {c: agents.load(c) for c in a.checkpoints}
    for day in a.days.split(","):
        row = {"window": day}
        for c, ag in loaded.items():
            kw = {"workload": f"philly:start={day},jobs={a.jobs},load=0.9,gpus=32"}
            env = make_env(ag.env_id, scenario_kwargs(ag.meta, kw), ag.obs_mode)
            row[c] = float(run_episode(ag.act, env, 0)["metrics"]["avg_jct"])
            for h in ("tiresias", "las"):
                row.setdefault(h, float(fresh_simulator(env, 0).run(make_policy(h))["avg_jct"]))
            env.close()
        rows.append(row)
        print(json.dumps(row), flush=True)
    names = [*a.checkpoints, "tiresias", "las"]
    for n in names:
        v = np.array([r[n] for r in rows])
        t = np.array([r["tiresias"] for r in rows])
        print(f"{n}: mean {v.mean():,.0f} s, geo-mean ratio to tiresias {np.exp(np.log(v / t).mean()):.3f}")
    if a.out:
        from gpusched_envs.io import atomic_write_text

        atomic_write_text(a.out, json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
