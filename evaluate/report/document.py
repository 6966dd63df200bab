"""What identifies the leaderboard's document (``leaderboard.json``): its schema name, the columns of its
per-scenario tables and the normalised score it ranks by. The page (:mod:`.html`) and the tables
(:mod:`.leaderboard`) both read these."""

from __future__ import annotations

REPORT_SCHEMA = "gpusched.leaderboard/1"
# (metric key, column title, unit): the table columns, all "lower is better" except utilisation
TABLE_METRICS = (
    ("avg_jct", "avg JCT (h)", "h"),
    ("p95_jct", "p95 JCT (h)", "h"),
    ("makespan", "makespan (h)", "h"),
    ("gpu_utilisation", "GPU util.", "%"),
    ("communication_overhead", "comm. overhead", "%"),
)
NORMALISATION = (
    "score = lower-bound average JCT ÷ average JCT, per scenario and seed (1 = the bound, higher is better); "
    "the bound is the mean ideal runtime of the same jobs"
)
