"""Run metrics and the two lower bounds printed beside them.

Keys of the returned dict (also the documented ``--json`` schema of ``gpusched simulate``):

- ``jobs``: jobs that finished; ``unfinished``: jobs still in the system at the end; ``dropped``: jobs never admitted
- ``avg_jct``, ``p50_jct``, ``p95_jct``, ``p99_jct``: job completion time (finish − submit), seconds
- ``makespan``: last finish − first submit, seconds
- ``avg_queueing_delay``, ``p95_queueing_delay``: first start − submit, seconds
- ``avg_slowdown``, ``p95_slowdown``: JCT ÷ ideal runtime
- ``avg_trace_slowdown``: mean JCT ÷ traced duration (a trace replayed on its own cluster should give about 1;
  equals ``avg_slowdown`` under the ``duration`` speed model)
- ``gpu_utilisation``: allocated GPU-time ÷ (GPUs × elapsed time from the first submission to the end of the run,
  which is the makespan when the run drains)
- ``communication_overhead``: share of running time that all-reduce adds beyond compute (interference and GPU
  sharing excluded; 0 for single-GPU jobs)
- ``fragmentation``: time-averaged share of the cluster's GPUs that were wholly free in the oldest waiting job's
  pool while that job, which had enough free GPUs there in number, still waited
- ``ftf_mean``, ``ftf_max``: finish-time fairness ρ = JCT ÷ (ideal runtime × max(1, mean GPU demand in the system
  during the job's life ÷ cluster GPUs)), Themis-style; ρ ≤ 1 is fair
- ``preemptions``: total preemptions
- ``offered_load``: GPU-time of finished jobs at their typical speed ÷ (GPUs × arrival span of admitted jobs). The
  typical speed is the ``trace_speed="typical"`` rule (``engine.typical_iteration_time``: the iteration time on a
  packed placement in the best-fit servers for the job's size, averaged over their GPU types by GPU count), so under
  the default simulator a job's typical GPU-time is its traced duration × GPUs and this equals
  :meth:`Workload.offered_load`, the quantity ``load=`` sets; a run that drains with no job dropped measures exactly
  the stated load. It is not the ideal GPU-time: on a mixed cluster the fastest type understates the load
  (hetero64, 300 synthetic jobs of up to 64 GPUs: 0.35 of it)
- ``lower_bound_avg_jct`` = mean ideal runtime; ``lower_bound_makespan`` = max(last arrival + its ideal runtime,
  total ideal GPU-work ÷ GPUs), both measured like the metrics they bound
"""

from __future__ import annotations

import numpy as np

from gpusched_envs.sim.status import DONE, DROPPED

METRIC_KEYS = (
    "jobs",
    "unfinished",
    "dropped",
    "avg_jct",
    "p50_jct",
    "p95_jct",
    "p99_jct",
    "makespan",
    "avg_queueing_delay",
    "p95_queueing_delay",
    "avg_slowdown",
    "p95_slowdown",
    "avg_trace_slowdown",
    "gpu_utilisation",
    "communication_overhead",
    "fragmentation",
    "ftf_mean",
    "ftf_max",
    "preemptions",
    "offered_load",
    "lower_bound_avg_jct",
    "lower_bound_makespan",
    "sim_time",
)


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else float("nan")


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def compute_metrics(sim) -> dict:
    w = sim.workload
    g = sim.cluster.num_gpus
    done = sim.status == DONE
    admitted = sim.status != DROPPED
    submit = w.submit_time
    ideal = sim.job_work * sim.job_ideal_iter  # <= traced duration (== under trace_speed="ideal")
    share = sim.job_gpus_n * np.minimum(sim.job_milli, 1000) / 1000.0
    jct = (sim.finish_time - submit)[done]
    queueing = (sim.first_start - submit)[done]
    slowdown = jct / ideal[done]
    if done.any():
        first_submit = float(submit[admitted].min())
        makespan = float(np.nanmax(sim.finish_time[done]) - first_submit)
    else:
        first_submit, makespan = float("nan"), float("nan")
    running = sim.running_time[done].sum()
    comm = float(sim.comm_time[done].sum() / running) if running > 0 else 0.0
    lifetime_demand = np.zeros(int(done.sum()))
    if done.any():
        # demand integral at finish is stored implicitly: integral(t_finish) - integral(t_arrival) over JCT
        lifetime_demand = sim._demand_at_finish[done] - sim.demand_at_arrival[done]
    mean_demand = np.divide(lifetime_demand, jct, out=np.zeros_like(jct), where=jct > 0)
    ftf = jct / (ideal[done] * np.maximum(1.0, mean_demand / g))
    span = float(submit[admitted].max() - submit[admitted].min()) if admitted.sum() > 1 else 0.0
    total_work = float((ideal * share)[done].sum())
    # offered load's GPU-time: at the typical speed (== traced duration × GPUs under the default trace_speed)
    typical_work = float((sim.job_work * sim.job_typical_iter * share)[done].sum())
    last = int(np.flatnonzero(admitted)[-1]) if admitted.any() else -1
    lb_makespan = (
        max(float(submit[last] - first_submit + ideal[last]), total_work / g) if done.any() else float("nan")
    )
    elapsed = sim.now - first_submit if done.any() else 0.0
    return {
        "jobs": int(done.sum()),
        "unfinished": int((admitted & ~done).sum()),
        "dropped": int((~admitted).sum()),
        "avg_jct": _mean(jct),
        "p50_jct": _pct(jct, 50),
        "p95_jct": _pct(jct, 95),
        "p99_jct": _pct(jct, 99),
        "makespan": makespan,
        "avg_queueing_delay": _mean(queueing),
        "p95_queueing_delay": _pct(queueing, 95),
        "avg_slowdown": _mean(slowdown),
        "p95_slowdown": _pct(slowdown, 95),
        "avg_trace_slowdown": _mean(jct / w.duration[done]),
        "gpu_utilisation": float(sim._utilisation_integral / (g * elapsed)) if elapsed > 0 else 0.0,
        "communication_overhead": comm,
        "fragmentation": float(sim._fragmentation_integral / (g * elapsed)) if elapsed > 0 else 0.0,
        "ftf_mean": _mean(ftf),
        "ftf_max": float(ftf.max()) if len(ftf) else float("nan"),
        "preemptions": int(sim.preemptions.sum()),
        "offered_load": typical_work / (g * span) if span > 0 else float("nan"),
        "lower_bound_avg_jct": _mean(ideal[done]),
        "lower_bound_makespan": lb_makespan,
        "sim_time": float(sim.now),
    }
