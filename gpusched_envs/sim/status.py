"""Job states and event kinds of the discrete-event engine (shared by the engine, its metrics and its compiled core)."""

# job status
FUTURE, QUEUED, RUNNING, RESTARTING, DONE, DROPPED = 0, 1, 2, 3, 4, 5
STATUS_NAMES = ("future", "queued", "running", "restarting", "done", "dropped")
# event kinds (the dispatch order of simultaneous events is their seq, i.e. the order they were pushed)
COMPLETION, RESTART_DONE, TIMER = 0, 1, 2
FULL_GPU = 1000  # milli-GPUs
