"""HMARL (Zhao & Wu, IEEE TNSM 2022): cooperative multi-agent schedulers (:mod:`.agent`) and their interference model (:mod:`.interference`)."""
