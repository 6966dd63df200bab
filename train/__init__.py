"""Training entry points (``python -m train`` / ``gpusched train``): configs, TensorBoard logging, checkpoints,
resume. Imports ``agents`` and ``gpusched_envs``."""
