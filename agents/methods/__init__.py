"""The reproduced systems, one package each: ``topdrl``, ``worl_rtgs`` (with its plan search), ``metaplace`` (with
its performance model), ``hmarl`` (with its interference model) and ``netsens`` (the timer auto-tuner)."""
