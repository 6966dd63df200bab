"""Memory of a long vector-env run: resident set size after a warm-up and after 10^6 env steps.

    python scripts/studies/vector_memory.py [--steps 1000000] [--num-envs 64] [--tracemalloc] [--json out.json]

Steps ``gymnasium.make_vec("gpusched/JobSelect-v1", num_envs=N, cluster="hetero64", obs_mode="flat")`` with masked
random actions (episodes end and reset automatically) and samples, every 5% of the run:

- the RSS (``/proc/self/status``);
- the C heap in use (glibc's ``mallinfo2``: bytes handed out by ``malloc`` and not yet freed, Python objects and
  numpy arrays alike; absent off glibc): when the RSS grows but this does not, the growth is the allocator's
  pools (fragmentation), not live memory;
- the objects Python's cycle collector has freed so far, and its full (generation 2) collections: memory that
  only the cycle collector frees (objects in reference cycles) piles up between full collections, which run
  when the long-lived objects have grown by a quarter, so it shows in the RSS as a rise that stops at that level;
- with ``--tracemalloc``, the memory Python's allocations hold (``tracemalloc``, which slows the steps and whose
  own bookkeeping counts in the RSS); at the end, the source lines whose allocations grew most since the warm-up.

The growth is measured from the first sample taken after every copy has finished one episode (the warm-up:
numba's compiled code, each copy's episode-sized arrays and the allocator's pools are in place by then).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import time


def rss_mib() -> float:
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap_reader():
    """A function returning the C heap in use in MiB (glibc's ``mallinfo2``: ``uordblks`` + ``hblkhd``), or None
    where the C library has no ``mallinfo2``."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2

    def heap_mib() -> float:
        info = fn()
        return (info.uordblks + info.hblkhd) / 2**20

    return heap_mib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=1_000_000, help="env steps in all (summed over the copies)"
    )
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="also trace Python's allocations (slower; tracemalloc's own memory counts in the RSS)",
    )
    parser.add_argument("--json", help="write the samples here")
    ns = parser.parse_args()
    if ns.steps < 1 or ns.num_envs < 1:
        parser.error("--steps and --num-envs must be positive")
    import gymnasium as gym
    import numpy as np

    import gpusched_envs.envs  # noqa: F401

    if ns.tracemalloc:
        import tracemalloc

        tracemalloc.start(1)
    heap_mib = heap_reader()
    venv = gym.make_vec("gpusched/JobSelect-v1", num_envs=ns.num_envs, cluster="hetero64", obs_mode="flat")
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    rounds = ns.steps // ns.num_envs
    every = max(1, rounds // 20)
    samples = []
    finished = np.zeros(ns.num_envs, dtype=bool)
    warm_at = None
    warm_snapshot = None
    print(
        f"{'steps':>10} {'RSS MiB':>8} {'heap MiB':>8} {'traced MiB':>10} {'cycle-freed':>11} {'full GCs':>8} {'s':>5}"
    )
    t0 = time.perf_counter()
    for i in range(rounds):
        masks = venv.action_masks()
        k = (rng.random(ns.num_envs) * masks.sum(axis=1)).astype(np.int64)
        _, _, terminated, truncated, _ = venv.step(np.argmax(np.cumsum(masks, axis=1) > k[:, None], axis=1))
        finished |= terminated | truncated
        if (i + 1) % every == 0:
            stats = gc.get_stats()
            sample = {
                "steps": (i + 1) * ns.num_envs,
                "rss_mib": rss_mib(),
                "heap_mib": heap_mib() if heap_mib else None,
                "traced_mib": tracemalloc.get_traced_memory()[0] / 2**20 if ns.tracemalloc else None,
                "gc_collected": sum(s["collected"] for s in stats),
                "gc_full_collections": stats[2]["collections"],
                "s": time.perf_counter() - t0,
            }
            samples.append(sample)
            print(
                f"{sample['steps']:>10,} {sample['rss_mib']:>8.1f} "
                + (f"{sample['heap_mib']:>8.1f} " if heap_mib else f"{'-':>8} ")
                + (f"{sample['traced_mib']:>10.1f} " if ns.tracemalloc else f"{'-':>10} ")
                + f"{sample['gc_collected']:>11,} {sample['gc_full_collections']:>8} {sample['s']:>5.0f}",
                flush=True,
            )
            if warm_at is None and finished.all():
                warm_at = len(samples) - 1
                if ns.tracemalloc:
                    warm_snapshot = tracemalloc.take_snapshot()
    if warm_at is None or warm_at == len(samples) - 1:
        raise SystemExit("the copies did not all finish an episode before the last sample: give more --steps")
    base, last = samples[warm_at], samples[-1]
    out = {
        "num_envs": ns.num_envs,
        "steps": rounds * ns.num_envs,
        "warmup_steps": base["steps"],
        "rss_after_warmup_mib": base["rss_mib"],
        "rss_end_mib": last["rss_mib"],
        "growth": last["rss_mib"] / base["rss_mib"] - 1,
        "rss_max_mib": max(s["rss_mib"] for s in samples[warm_at:]),
        "heap_after_warmup_mib": base["heap_mib"],
        "heap_end_mib": last["heap_mib"],
        "heap_max_mib": max(s["heap_mib"] for s in samples[warm_at:]) if heap_mib else None,
        "gc_collected_after_warmup": last["gc_collected"] - base["gc_collected"],
        "seconds": time.perf_counter() - t0,
        "samples": samples,
    }
    print(
        f"{out['steps']:,} steps with {ns.num_envs} copies in {out['seconds']:.0f} s: RSS {base['rss_mib']:.1f} MiB "
        f"after the warm-up (every copy finished an episode by step {out['warmup_steps']:,}), "
        f"{last['rss_mib']:.1f} MiB at the end ({100 * out['growth']:+.2f}%; at most {out['rss_max_mib']:.1f})"
    )
    if heap_mib:
        print(
            f"C heap in use: {base['heap_mib']:.1f} MiB after the warm-up, {last['heap_mib']:.1f} MiB at the end, "
            f"at most {out['heap_max_mib']:.1f} MiB in the samples"
        )
    print(
        f"objects freed by the cycle collector after the warm-up: {out['gc_collected_after_warmup']:,} "
        f"({last['gc_full_collections'] - base['gc_full_collections']} full collections)"
    )
    if ns.tracemalloc:
        print("Python allocations that grew most since the warm-up (tracemalloc):")
        for stat in tracemalloc.take_snapshot().compare_to(warm_snapshot, "lineno")[:10]:
            print(f"  {stat}")
    if ns.json:
        with open(ns.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
