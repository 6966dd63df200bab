"""NetSens (network-sensitive delay scheduling): the timer auto-tuner as a ``DelayTuning`` agent (:mod:`.agent`)."""
