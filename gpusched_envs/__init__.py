"""gpusched_envs: GPU-cluster scheduling simulator and RL environments."""
