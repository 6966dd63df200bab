"""MetaPlace (Yang, Bao et al., IEEE TCC 2023): the meta-trained worker-placement policy (:mod:`.agent`) and its learned performance model (:mod:`.perf_model`)."""
