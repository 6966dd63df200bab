"""Memory of a long vector-env run: resident set size after a warm-up and after 10^6 env steps.

    python scripts/studies/vector_memory.py [--steps 1000000] [--num-envs 64] [--json out.json]

Steps ``gymnasium.make_vec("gpusched/JobSelect-v1", num_envs=N, cluster="hetero64", obs_mode="flat")`` with masked
random actions (episodes end and reset automatically) and reads the RSS from ``/proc/self/status`` every 5% of the
run; the growth is measured from the first sample taken after every copy has finished one episode (the warm-up:
numba's compiled code, each copy's episode-sized arrays and the allocator's pools are in place by then).
"""

from __future__ import annotations

import argparse
import json
import time


def rss_mib() -> float:
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=1_000_000, help="env steps in all (summed over the copies)"
    )
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--json", help="write the samples here")
    ns = parser.parse_args()
    import gymnasium as gym
    import numpy as np

    import gpusched_envs.envs  # noqa: F401

    venv = gym.make_vec("gpusched/JobSelect-v1", num_envs=ns.num_envs, cluster="hetero64", obs_mode="flat")
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    rounds = ns.steps // ns.num_envs
    every = max(1, rounds // 20)
    samples = []
    finished = np.zeros(ns.num_envs, dtype=bool)
    warm_at = None
    t0 = time.perf_counter()
    for i in range(rounds):
        masks = venv.action_masks()
        k = (rng.random(ns.num_envs) * masks.sum(axis=1)).astype(np.int64)
        _, _, terminated, truncated, _ = venv.step(np.argmax(np.cumsum(masks, axis=1) > k[:, None], axis=1))
        finished |= terminated | truncated
        if (i + 1) % every == 0:
            samples.append(
                {"steps": (i + 1) * ns.num_envs, "rss_mib": rss_mib(), "s": time.perf_counter() - t0}
            )
            if warm_at is None and finished.all():
                warm_at = len(samples) - 1
    if warm_at is None or warm_at == len(samples) - 1:
        raise SystemExit("the copies did not all finish an episode before the last sample: give more --steps")
    base, last = samples[warm_at]["rss_mib"], samples[-1]["rss_mib"]
    out = {
        "num_envs": ns.num_envs,
        "steps": rounds * ns.num_envs,
        "warmup_steps": samples[warm_at]["steps"],
        "rss_after_warmup_mib": base,
        "rss_end_mib": last,
        "growth": last / base - 1,
        "seconds": time.perf_counter() - t0,
        "samples": samples,
    }
    print(
        f"{out['steps']:,} steps with {ns.num_envs} copies in {out['seconds']:.0f} s: RSS {base:.1f} MiB after the "
        f"warm-up (every copy finished an episode by step {out['warmup_steps']:,}), {last:.1f} MiB at the end ({100 * out['growth']:+.2f}%)"
    )
    if ns.json:
        with open(ns.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
