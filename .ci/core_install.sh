#!/usr/bin/env bash
# The core install, as a user without the extras gets it: build the wheel, install it alone into a fresh venv (its
# dependencies from the package index), check that it claims only the project's own import names, make every env,
# run `gpusched simulate`, and check that a command of an absent extra says which extra to install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --upgrade pip
mkdir "$WORK/src"  # a copy, so the build leaves nothing in the checkout
tar --exclude=./.venv --exclude=./.git --exclude=./build --exclude=./runs --exclude=./results -cf - . | tar -xf - -C "$WORK/src"
"$WORK/venv/bin/pip" wheel -q --no-deps -w "$WORK/wheel" "$WORK/src"
"$WORK/venv/bin/pip" install -q "$WORK"/wheel/*.whl
cd "$WORK"  # away from the repository, so nothing is imported from its folders
"$WORK/venv/bin/python" - "$WORK"/wheel/*.whl <<'PY'
import sys
import zipfile
from importlib.metadata import version, PackageNotFoundError

tops = {name.split("/")[0] for name in zipfile.ZipFile(sys.argv[1]).namelist()}
tops = {t for t in tops if not t.endswith((".dist-info", ".data"))}
assert tops == {"gpusched_envs", "gpusched_lab"}, f"installed top-level names: {sorted(tops)}"
for heavy in ("torch", "torch-geometric", "stable-baselines3", "matplotlib", "pandas", "rliable", "tensorboard"):
    try:
        version(heavy)
    except PackageNotFoundError:
        continue
    raise SystemExit(f"the core install pulled {heavy}")

import gymnasium as gym
import numpy as np

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.multi_agent import multi_scheduler_v1

from gpusched_envs.envs import CURRENT_IDS

ids = sorted(CURRENT_IDS)  # the refused -v0 ids are registered only to name their -v1
assert ids, "no gpusched env registered"
for env_id in ids:
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    for _ in range(5):
        mask = obs["action_mask"] if isinstance(obs, dict) and "action_mask" in obs else None
        action = int(np.flatnonzero(mask)[0]) if mask is not None else env.action_space.sample()
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    env.close()
penv = multi_scheduler_v1.parallel_env(num_agents=2, cluster="tiny", num_jobs=8)
obs, infos = penv.reset(seed=0)
penv.step({a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in obs.items()})
print(f"core install: top-level names {sorted(tops)}; made and stepped {len(ids)} envs and the multi-agent env")
PY
"$WORK/venv/bin/gpusched" simulate --cluster tiny --workload synthetic:jobs=20 --policy fifo > "$WORK/sim.txt"
grep -q "avg" "$WORK/sim.txt" || { cat "$WORK/sim.txt"; echo "gpusched simulate printed no metrics"; exit 1; }
set +e
"$WORK/venv/bin/gpusched" train ppo --config smoke_ppo 2> "$WORK/train.err"
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "pip install 'gpusched-envs\[agents\]'" "$WORK/train.err" || {
    cat "$WORK/train.err"; echo "gpusched train without the agents extra: exit $rc, expected 2 and the extra named"; exit 1; }
echo "core install: gpusched simulate runs; gpusched train names the [agents] extra"
