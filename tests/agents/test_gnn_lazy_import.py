"""The dense and scatter GNN paths never load torch_geometric (a few CPU-seconds per process); the pyg path does."""

import subprocess
import sys

PROBE = """
import sys
import gymnasium as gym
import gpusched_envs  # noqa: F401
from gpusched_lab.agents.nets.common import config_for_env, obs_to_tensors
from gpusched_lab.agents.nets.networks import build_network
env = gym.make("gpusched/JobSelect-v1", cluster="tiny", obs_mode="graph", num_jobs=8)
obs, _ = env.reset(seed=0)
net = build_network(config_for_env(env, "gnn", 16, 1), env.observation_space, gnn_impl="{impl}")
net(obs_to_tensors(obs, "cpu", batched=False))
print("torch_geometric" in sys.modules)
"""


def _loads_pyg(impl: str) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.replace("{impl}", impl)], capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1] == "True"


def test_dense_and_scatter_do_not_import_torch_geometric():
    assert not _loads_pyg("dense")
    assert not _loads_pyg("scatter")


def test_pyg_imports_torch_geometric():
    assert _loads_pyg("pyg")
