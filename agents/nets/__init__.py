"""Policy / Q-networks over the envs' padded Dict observations: the hierarchical GNN (``graph``), TopDRL's
multi-branch CNN (``image``) and the MLP (``flat``) in :mod:`.networks` (one factory, :func:`build_network`, picks by
config), and the DAG scorer of ``DAGSchedule`` in :mod:`.dag`."""
