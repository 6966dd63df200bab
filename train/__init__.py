"""Training entry points (``python -m gpusched_lab.train`` / ``gpusched train``): configs, TensorBoard logging, checkpoints,
resume. Imports ``agents`` and ``gpusched_envs``."""
