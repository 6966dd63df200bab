"""What a non-clairvoyant scheduler can learn from the jobs that already finished: the runtimes of earlier jobs of
the same kind, and the shape of the queue and of the free GPUs.

A job's *runtime* here is the seconds it held GPUs over the whole episode (``Simulator.allocated_time`` once it is
done: every allocation, restart delays included); a job's *attained time* is the same count so far (its current
allocation included). Both are known to a real scheduler; the traced duration of a job that has not finished is
never read.

:class:`RuntimeHistory` records the runtime of each job when it finishes (incrementally: once some job finished since
its previous scan, it looks only at the jobs that were in the system at that scan and the jobs that arrived since),
grouped by *kind* at three levels: same virtual cluster and same GPU count, same GPU count, all jobs.
:meth:`RuntimeHistory.write_rows` fills the columns :data:`HISTORY_JOB_FEATURES` of a job block;
:func:`write_context` fills :data:`HISTORY_CONTEXT_FEATURES`. JobSelect's ``history_features=True`` shows both.
"""

from __future__ import annotations

import bisect
import itertools

import numpy as np

from gpusched_envs.sim.engine import DONE

# job columns (appended after the env's other job columns):
#   history_level      the kind level the statistics come from: 0 same VC and GPU count, 1 same GPU count,
#                      2 all jobs, 3 none (no job finished yet: every history column is 0)
#   history_samples    log1p(finished jobs of that kind)
#   history_median     log1p(median runtime of that kind / time_scale)
#   history_survival   share of that kind's runtimes longer than this job's attained time (empirical P(R > a))
#   history_remaining  log1p(E[R - a | R > a] / time_scale) under that empirical distribution (0 when no past
#                      runtime exceeds a)
HISTORY_JOB_FEATURES = (
    "history_level",
    "history_samples",
    "history_median",
    "history_survival",
    "history_remaining",
)
# context entries (appended after the env's own): share of the queued jobs asking 1, 2-4, 5-8, more than 8 GPUs
# (0 with an empty queue); share of the wholly free GPUs that lie on servers with some busy GPU
# (``free_fragmented``, 0 with no free GPU); the most wholly free GPUs on one server ÷ the largest server's GPUs
HISTORY_CONTEXT_FEATURES = (
    "queued_gpus_1",
    "queued_gpus_2_4",
    "queued_gpus_5_8",
    "queued_gpus_9_plus",
    "free_fragmented",
    "largest_free_server",
)
HISTORY_LEVELS = ("vc_and_gpus", "gpus", "all", "none")
# Box bounds of the new columns
HISTORY_BOUNDS: dict[str, tuple[float, float]] = {
    "history_level": (0.0, float(len(HISTORY_LEVELS) - 1)),
    "history_samples": (0.0, 1e30),
    "history_median": (0.0, 1e30),
    "history_survival": (0.0, 1.0),
    "history_remaining": (0.0, 1e30),
}
# a level is used when it holds at least this many finished jobs (else the next, coarser one)
MIN_SAMPLES = 1
_MEDIAN, _SURVIVAL, _REMAINING = 2, 3, 4


class _Runtimes:
    """Sorted runtimes of one kind, with suffix sums and median (rebuilt lazily after additions)."""

    __slots__ = ("values", "_suffix", "_median")

    def __init__(self):
        self.values: list[float] = []
        self._suffix: list[float] | None = None
        self._median = 0.0

    def add(self, runtime: float) -> None:
        bisect.insort(self.values, runtime)
        self._suffix = None

    def summary(self) -> tuple[list[float], list[float], float]:
        """The sorted runtimes ``v``, their suffix sums (``suffix[i]`` = sum of ``v[i:]``, ``suffix[n]`` = 0) and
        their median (the mean of the two middle values for an even count)."""
        if self._suffix is None:
            v = self.values
            self._suffix = [*itertools.accumulate(reversed(v)), 0.0][-2::-1] + [0.0]
            n = len(v)
            self._median = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0
        return self.values, self._suffix, self._median


class RuntimeHistory:
    """Runtimes of the finished jobs of one simulator's episode, by kind (see the module docstring)."""

    def __init__(self, sim):
        self.sim = sim
        self.vc = np.asarray(sim.workload.vc, dtype=np.int64).tolist()  # known at submission
        self.gpus = np.asarray(sim.job_gpus_n, dtype=np.int64).tolist()
        self.by_vc_gpus: dict[tuple[int, int], _Runtimes] = {}
        self.by_gpus: dict[int, _Runtimes] = {}
        self.all = _Runtimes()
        self.recorded = 0  # finished jobs recorded
        self._live = np.zeros(0, dtype=np.int64)  # jobs in the system at the last scan
        self._arrived = 0  # jobs arrived by the last scan
        self._finished = -1  # the simulator's count of finished jobs at the last scan
        # job -> (jobs recorded, attained time, statistics) when last computed: a queued job's row is reused until
        # a job finishes or it runs again
        self._cache: dict[int, tuple[int, float, tuple]] = {}
        self.sync()

    def sync(self) -> None:
        """Record the jobs that finished since the last sync (in finish-time order, ties by id). While no job
        finishes (the simulator's ``finished`` count stays) there is nothing to record and nothing is scanned: the
        next scan looks at the jobs in the system at the last one and every job that arrived since, which hold every
        job in the system then."""
        sim = self.sim
        if sim.finished == self._finished:
            return
        self._finished = sim.finished
        arrived = int(sim.next_arrival)
        if self._arrived < arrived:
            candidates = np.concatenate([self._live, np.arange(self._arrived, arrived, dtype=np.int64)])
        else:
            candidates = self._live
        if len(candidates):
            done = candidates[sim.status[candidates] == DONE]
            if len(done):
                done = done[np.lexsort((done, sim.finish_time[done]))]
                runtime = sim.allocated_time[done]
                for j, r in zip(done.tolist(), runtime.tolist(), strict=True):
                    self._add(j, r)
                    self._cache.pop(j, None)
        self._arrived = arrived
        self._live = sim.jobs_in_system()  # only its jobs matter: the next scan orders what finished itself

    def _add(self, job: int, runtime: float) -> None:
        g, v = self.gpus[job], self.vc[job]
        for table, key in ((self.by_vc_gpus, (v, g)), (self.by_gpus, g)):
            runs = table.get(key)
            if runs is None:
                runs = table[key] = _Runtimes()
            runs.add(runtime)
        self.all.add(runtime)
        self.recorded += 1

    def kind_of(self, job: int) -> tuple[int, _Runtimes | None]:
        """The level used for ``job`` (an index of :data:`HISTORY_LEVELS`) and its runtimes (None at "none")."""
        g = self.gpus[job]
        runs = self.by_vc_gpus.get((self.vc[job], g))
        if runs is not None and len(runs.values) >= MIN_SAMPLES:
            return 0, runs
        runs = self.by_gpus.get(g)
        if runs is not None and len(runs.values) >= MIN_SAMPLES:
            return 1, runs
        if len(self.all.values) >= MIN_SAMPLES:
            return 2, self.all
        return len(HISTORY_LEVELS) - 1, None

    def statistics(self, job: int, attained: float) -> tuple[int, int, float, float, float]:
        """(level, samples, median runtime, P(runtime > attained), E[runtime − attained | runtime > attained])
        of ``job``'s kind, in seconds (zeros at level "none"; the last is 0 when no runtime exceeds
        ``attained``)."""
        level, runs = self.kind_of(job)
        if runs is None:
            return level, 0, 0.0, 0.0, 0.0
        v, suffix, median = runs.summary()
        n = len(v)
        first_longer = bisect.bisect_right(v, attained)
        longer = n - first_longer
        if not longer:
            return level, n, median, 0.0, 0.0
        return level, n, median, longer / n, suffix[first_longer] / longer - attained

    def write_rows(
        self,
        block: np.ndarray,
        first: int,
        jobs: np.ndarray,
        row0: int,
        running: bool,
        time_scale: float,
    ) -> None:
        """Write the :data:`HISTORY_JOB_FEATURES` columns (``block[:, first:first + 5]``) of ``jobs`` from row
        ``row0``; ``running``: the jobs hold GPUs now (their current allocation counts in the attained time)."""
        k = len(jobs)
        if not k:
            return
        sim = self.sim
        attained = sim.allocated_time[jobs]
        if running:
            attained = attained + (float(sim.now) - sim.run_start[jobs])
        stats, cache, stamp = self.statistics, self._cache, self.recorded
        rows = []
        for j, a in zip(jobs.tolist(), attained.tolist(), strict=True):
            hit = cache.get(j)
            if hit is None or hit[0] != stamp or hit[1] != a:
                hit = cache[j] = (stamp, a, stats(j, a))
            rows.append(hit[2])
        # the (k, 5) float64 array np.array(rows) gives, filled without a per-row conversion
        values = np.fromiter(itertools.chain.from_iterable(rows), np.float64, count=5 * k).reshape(k, 5)
        np.log1p(values[:, 1], out=values[:, 1])
        inv = 1.0 / time_scale
        for c in (_MEDIAN, _REMAINING):
            np.log1p(values[:, c] * inv, out=values[:, c])
        block[row0 : row0 + k, first : first + len(HISTORY_JOB_FEATURES)] = values


def gpu_buckets(gpus: np.ndarray) -> np.ndarray:
    """(J,) bucket of each job's GPU count: 0 for 1 GPU, 1 for 2-4, 2 for 5-8, 3 for more than 8."""
    g = np.asarray(gpus, dtype=np.int64)
    return ((g > 1).astype(np.int64) + (g > 4) + (g > 8)).astype(np.int64)


def write_context(out: np.ndarray, sim, buckets: np.ndarray, max_server_gpus: int) -> None:
    """Write the :data:`HISTORY_CONTEXT_FEATURES` into ``out`` (length 6) from the simulator's queue and free
    GPUs."""
    ids = sim.queued_jobs()
    q = len(ids)
    if q:
        out[:4] = np.bincount(buckets[ids], minlength=4) / q
    else:
        out[:4] = 0.0
    free = sim.server_free
    total = int(free.sum())
    if total:
        partial = free < sim.cluster.server_num_gpus
        out[4] = float(free[partial].sum()) / total
        out[5] = float(free.max()) / max_server_gpus
    else:
        out[4] = 0.0
        out[5] = 0.0
