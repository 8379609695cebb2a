"""Execution backends for sweeps: where the tasks (ground truths, chunks of replicates) run.

A task is one chunk of replicates of one sweep point, :class:`Task` ``(point, config,
indices)``, or the point's ground truth (``kind="truth"``: the exact A/B effects and the
Monte Carlo interleaving preferences, seconds of work per point that would otherwise run
serially in the client). A backend runs tasks and hands each result (a finished chunk,
``[(replicate, rows), ...]``, or the truths) to a callback in the calling thread. Two
backends share that interface:

- :class:`LocalExecutor` (the default): ``workers`` local processes
  (:class:`concurrent.futures.ProcessPoolExecutor`); ``workers=1`` runs in-process. No
  server, no port.
- :class:`DaskExecutor`: a Dask distributed cluster, given by a scheduler address
  (``tcp://host:8786``) or ``local:N`` (a :class:`distributed.LocalCluster` of ``N``
  single-threaded worker processes on this machine). Scheduling, transport and retries
  are Dask's; this module only submits tasks.

:func:`simulations.executor_check.check_executor` refuses, before a sweep creates anything, a backend that cannot
start (a malformed ``local:N``, Dask not importable, a TCP scheduler address that refuses connections); an error in a
scheduler given as an argument (``--scheduler``) points at :data:`simulations.executor_check.SCHEDULER`, not at the
sweep file's ``executor`` keys. The backends read the scheduler spec with that module's functions.

Numbers never depend on the backend, the number of workers or the chunking: replicate
``r`` of a point always runs :func:`simulations.runner.run_replicate` with
``SeedSequence(point seed).spawn(R)[r]`` on the point's world, built from
``SeedSequence((point seed, WORLD))``, and the truth's Monte Carlo part is seeded from the
point's seed and the design's name; a task's position in a queue plays no part.

Worlds travel once per worker, not once per task: the local backend keeps a per-process
cache keyed by the point's fingerprint (a worker builds a point's world, which is a pure
function of the config, the first time it gets one of its chunks); the Dask backend
scatters the world built by the client to every worker (``broadcast=True``) and passes
the resulting future to the point's tasks, so workers need the installed package but not
the collection files.

A ``local:N`` cluster is started with :data:`LOCAL_CLUSTER_CONFIG` (Dask configuration
keys, set only for that cluster): with Dask's defaults the same sweep took 1.29 times the
local processes' time on 2 cores, mostly because Dask's nannies start workers with
``MALLOC_TRIM_THRESHOLD_=65536`` (any explicit value turns glibc's dynamic mmap threshold
off, so every numpy temporary above 128 KiB is a fresh ``mmap``, faulted in page by page:
a point's truth task cost 2.3 times the CPU time of the same task in a local process) and
because periodic event-loop work (a 20 ms health tick in the scheduler, each nanny and
each worker, the workers' 10 ms statistical profiler, 500 ms system monitors, 100 ms
memory monitors) took 12 to 14% of one core on an idle cluster of 2 workers
(``benchmarks/bench_sweep_dask.py``; README, "Running a sweep on a Dask cluster"). A local
worker process is forked from the client and inherits its imported modules; a Dask worker
is a fresh interpreter, so the executor imports the task code with :data:`TASK_MODULES`
(what the tasks import lazily) on every worker when it starts: otherwise each worker's
first truth task paid 1.1 to 1.7 s of CPU for scipy, pandas and the package's metrics
and statistics.
"""

from __future__ import annotations

import contextlib
import os
import signal
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Self

from onlineeval.errors import ConfigError
from simulations.config import Config
from simulations.executor_check import ADDRESS, _dask_missing, _resolve, parse_scheduler
from simulations.runner import (
    Truth,
    compute_truth,
    die_with_parent,
    one_blas_thread,
    replicate_seeds,
    resolve_workers,
    run_replicate,
)
from simulations.users import UserModels
from simulations.world import World, build_world

__all__ = [
    "LOCAL_CLUSTER_CONFIG",
    "REPLICATES",
    "TASK_MODULES",
    "TRUTH",
    "ChunkRows",
    "DaskExecutor",
    "Executor",
    "LocalExecutor",
    "Task",
    "TaskResult",
    "import_task_modules",
    "interrupts_deferred",
    "make_executor",
    "run_chunk",
    "run_task",
    "run_truth",
    "worker_stream_version",
]

#: a finished chunk: ``[(replicate index, rows of that replicate), ...]``
ChunkRows = list[tuple[int, list[dict[str, Any]]]]
#: what a task returns: a chunk's rows, or the point's truths
TaskResult = ChunkRows | list[Truth]


#: the kinds of task: a chunk of replicates, or a point's ground truth
REPLICATES, TRUTH = "replicates", "truth"


@dataclass(frozen=True)
class Task:
    """One chunk of replicates of one sweep point, or the point's ground truth.

    ``point`` is the point's fingerprint (:func:`simulations.job.config_fingerprint`),
    which keys the point's world on the workers. ``kind`` is ``"replicates"`` (run
    replicates ``indices``) or ``"truth"`` (the exact and Monte Carlo true effects of
    :func:`simulations.runner.compute_truth`; ``indices`` empty)."""

    point: str
    config: Config
    indices: tuple[int, ...]
    kind: str = REPLICATES


def run_chunk(config: Config, world: World, indices: Sequence[int]) -> ChunkRows:
    """Run replicates ``indices`` of ``config`` on ``world`` (seeded by replicate index only)."""
    users = UserModels.from_config(config.users)
    seqs = replicate_seeds(config.seed, max(indices) + 1) if indices else []
    return [(i, run_replicate(config, world, users, seqs[i], i)) for i in indices]


def run_truth(config: Config, world: World) -> list[Truth]:
    """The point's ground truth on ``world`` (its Monte Carlo parts seeded from the config's
    seed and the design's name, so it is the same wherever it runs)."""
    return compute_truth(config, world, UserModels.from_config(config.users))


def run_task(config: Config, world: World, indices: tuple[int, ...], kind: str = REPLICATES,
             stream_version: int | None = None) -> TaskResult:
    """Run one task: :func:`run_chunk` or :func:`run_truth`. ``stream_version``: the caller's
    :data:`simulations.job.STREAM_VERSION` (a Dask client sends it with every task); a worker of another version
    refuses the task with a :class:`~onlineeval.errors.ConfigError` instead of returning numbers of another
    stream (the check at the executor's start does not see workers that join the cluster later)."""
    if stream_version is not None:
        _check_task_version(stream_version)
    if kind == TRUTH:
        return run_truth(config, world)
    if kind == REPLICATES:
        return run_chunk(config, world, indices)
    raise ValueError(f"unknown task kind {kind!r}; allowed: {REPLICATES}, {TRUTH}")


def _check_task_version(expected: int) -> None:
    from simulations.job import STREAM_VERSION

    if expected != STREAM_VERSION:
        where = "a Dask worker"
        try:
            from distributed import get_worker

            where = f"the Dask worker at {get_worker().address}"
        except (ImportError, ValueError):  # not inside a Dask worker
            pass
        raise ConfigError(("executor", "address"), f"{where} runs an onlineeval whose numbers for a seed differ "
                          f"from the client's (stream version {STREAM_VERSION} there, {expected} on the client); "
                          "install the same onlineeval version on every worker")


class Executor(ABC):
    """Runs tasks; ``on_done(task, result)`` is called in the caller's thread as each finishes."""

    name: str = "executor"

    @abstractmethod
    def run(
        self,
        tasks: Sequence[Task],
        worlds: Mapping[str, World],
        on_done: Callable[[Task, TaskResult], None],
    ) -> None:
        """Run every task (in the given order of priority); ``worlds`` maps a point's
        fingerprint to its world (built by the caller)."""

    @property
    @abstractmethod
    def workers(self) -> int:
        """How many tasks can run at once."""

    def close(self) -> None:
        """Release workers and connections (idempotent)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------ local processes
_WORLDS: dict[str, World] = {}
_WORLD_CACHE_SIZE = 2  # points whose worlds a worker process keeps


def _init_local_worker() -> None:
    # the parent handles Ctrl-C / SIGTERM (it cancels the queue and ends the workers); the parent's
    # inherited SIGTERM handler raises, so its terminate() would print a worker's traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()  # a killed client's workers end (review 15, F1)
    one_blas_thread()


def _local_task(point: str, config: Config, indices: tuple[int, ...], kind: str) -> TaskResult:
    world = _WORLDS.get(point)
    if world is None:
        from simulations.runner import world_seed

        world = build_world(config, world_seed(config.seed))
        while len(_WORLDS) >= _WORLD_CACHE_SIZE:
            _WORLDS.pop(next(iter(_WORLDS)))
        _WORLDS[point] = world
    return run_task(config, world, indices, kind)


class LocalExecutor(Executor):
    """``workers`` local processes (0 = all cores; 1 = in this process)."""

    name = "local"

    def __init__(self, workers: int = 0) -> None:
        self._workers = resolve_workers(workers)
        self._pool: ProcessPoolExecutor | None = None

    @property
    def workers(self) -> int:
        return self._workers

    def run(
        self,
        tasks: Sequence[Task],
        worlds: Mapping[str, World],
        on_done: Callable[[Task, TaskResult], None],
    ) -> None:
        if self._workers <= 1 or len(tasks) <= 1:
            for task in tasks:
                on_done(task, run_task(task.config, worlds[task.point], task.indices, task.kind))
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self._workers, initializer=_init_local_worker)
        pool = self._pool
        try:
            futures = {pool.submit(_local_task, t.point, t.config, t.indices, t.kind): t for t in tasks}
            for fut in as_completed(futures):
                on_done(futures[fut], fut.result())
        except BaseException:
            from simulations.runner import _stop_pool

            self._pool = None
            _stop_pool(pool)  # cancel the queue, end the worker processes now
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


# ------------------------------------------------------------------------------ Dask distributed
#: Dask configuration of the LocalCluster that ``local:N`` starts (a cluster given by its
#: address keeps its own; see the README for the workers' side). Measured on 2 cores with
#: 2 workers (CPU time, so that the machine's other load does not blur it): each entry
#: costs CPU that the local processes do not spend.
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    # None = not set in the workers' environment (Dask's default, 65536, made a truth task
    # fault in 10-20 times more pages and take 2.3 times the CPU time; a chunk of
    # replicates 1.1-1.25 times)
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    # the statistical profiler samples the running task's stack every 10 ms (3-4% of a core
    # per worker, plus the task thread's lost GIL time)
    "distributed.worker.profile.enabled": False,
    # event-loop health checks every 20 ms in the scheduler, each nanny and each worker (the
    # largest idle cost: 2.5% of a core in the client process, 2% in the workers); only the
    # blocked-loop warnings use them
    "distributed.admin.tick.interval": "1s",
    # the servers' CPU / memory / network samples (dashboard and heartbeat metrics)
    "distributed.admin.system-monitor.interval": "5s",
    # the nannies' and workers' memory checks (limits still enforced, within 1 s)
    "distributed.worker.memory.monitor-interval": "1s",
}


#: modules that the tasks import lazily, inside functions (the click models, the designs'
#: metrics and statistics, and through them scipy and pandas). A local worker process is
#: forked from the client, which has imported them; a Dask worker is a fresh interpreter
#: and, without :func:`import_task_modules`, paid for them in its first truth task (1.1 to
#: 1.7 s of CPU per worker: that task took 1.5 to 2.2 s instead of 0.4 to 0.5 s).
#: ``tests/test_executors_imports.py`` checks, in a fresh interpreter, that after these
#: imports the tasks of every example config import nothing more.
TASK_MODULES: tuple[str, ...] = (
    "clickmodels",
    "onlineeval.interleaving",
    "onlineeval.io",
    "onlineeval.metrics",
    "onlineeval.stats",
    "onlineeval.stats.cuped",
    "onlineeval.stats.online",
    "onlineeval.stats.srm",
    "simulations.cuped",
    "simulations.designs.counterfactual.checkpoint",
    "simulations.designs.counterfactual.metric",
    "simulations.designs.counterfactual.step",
    "simulations.kernels",
    "simulations.policies.kernels",
    "simulations.sequential",
    "simulations.srm",
    "simulations.stat_kernels",
)


def import_task_modules() -> int:
    """Import :data:`TASK_MODULES` in this process (what a Dask worker runs when the
    executor starts; about 1.5 s of CPU in a fresh interpreter); returns how many modules
    are then loaded."""
    import importlib
    import sys

    for name in TASK_MODULES:
        importlib.import_module(name)
    return len(sys.modules)


def worker_stream_version() -> int:
    """This process's :data:`simulations.job.STREAM_VERSION` (what :class:`DaskExecutor` asks each worker)."""
    from simulations.job import STREAM_VERSION

    return STREAM_VERSION


def _worker_version(answer: Any) -> str:
    """A worker's answer to :func:`worker_stream_version` as the refusal names it: the version, or for an error
    (a worker whose onlineeval has no stream version to report) that it has none."""
    if isinstance(answer, BaseException):
        return f"none: an onlineeval from before the stream version, which cannot report one ({answer})"
    return repr(answer)


def _restore_environ(saved: Mapping[str, str]) -> None:
    """Undo what Dask's nannies put into this process's environment before spawning their
    workers (``OMP_NUM_THREADS=1``, ``PYTHONHASHSEED``, and with Dask's defaults
    ``MALLOC_TRIM_THRESHOLD_=65536``, which every process started from this one later,
    including the next cluster's workers, would inherit). A nanny that restarts its worker
    sets them again first."""
    for key in [k for k in os.environ if k not in saved]:
        del os.environ[key]
    for key, value in saved.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


#: the likely cause when the worker processes of ``local:N`` fail to start (review 2, E.3: 495 lines of
#: tracebacks from a script that called ``onlineeval.sweep(..., scheduler="local:2")`` at its top level)
UNGUARDED_SCRIPT = ("local:N starts worker processes that re-import the main script (multiprocessing's spawn): "
                    "a script that starts the sweep at its top level must put the call under "
                    "`if __name__ == \"__main__\":` (workers=N, local processes, does not need it)")


def _refuse_in_bootstrapping_child() -> None:
    """Stop a spawned process that is still importing the main script (a Dask worker re-importing a script without
    a ``__main__`` guard) from starting a LocalCluster of its own: it would fail with multiprocessing's bootstrapping
    error and a page of Dask tracebacks per worker. It exits quietly with status 1; the worker's nanny then fails in
    the parent, which raises the one error that says what to do (:data:`UNGUARDED_SCRIPT`)."""
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(1)


class DaskExecutor(Executor):
    """Tasks on a Dask distributed cluster: ``address`` is a scheduler (``tcp://host:8786``)
    or ``local:N`` (a LocalCluster of N single-threaded worker processes, no dashboard,
    with :data:`LOCAL_CLUSTER_CONFIG`). The workers import the package when the executor
    starts (a clear error if they cannot), not during the first tasks of a sweep. Its errors point at ``where``
    (:data:`~simulations.executor_check.ADDRESS`, the sweep file's key read from ``source``, or
    :data:`~simulations.executor_check.SCHEDULER` for ``--scheduler``)."""

    name = "dask"
    #: where its errors point (:data:`~simulations.executor_check.SCHEDULER` for ``--scheduler``) and the file that
    #: gave the address
    _where: tuple[str | int, ...] = ADDRESS
    _source: str | None = None

    def __init__(self, address: str, where: Sequence[str | int] = ADDRESS, source: str | None = None) -> None:
        self._where, self._source = tuple(where), source
        target, n = parse_scheduler(address, where, source)  # a malformed local:N first, Dask installed or not
        missing = _dask_missing(where, source, address)
        if missing is not None:
            raise missing
        from distributed import Client, LocalCluster

        self.address = address
        self._cluster: Any = None
        if n is not None:
            import dask

            _refuse_in_bootstrapping_child()
            environ = dict(os.environ)
            error: Exception | None = None
            with interrupts_deferred() as stopped:
                try:
                    with dask.config.set(LOCAL_CLUSTER_CONFIG):  # read when the scheduler and nannies are created
                        self._cluster = LocalCluster(
                            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
                        )
                except Exception as exc:  # noqa: BLE001 (re-raised below, unless the start was interrupted)
                    error = exc
                finally:
                    _restore_environ(environ)
            if stopped:  # Ctrl-C or SIGTERM while the cluster started: it closes now, quietly, and the run stops
                self.close()
                from simulations.job import Interrupted

                raise Interrupted(stopped[0])
            if error is not None:
                if not isinstance(error, RuntimeError) or "failed to start" not in str(error):
                    raise error
                raise ConfigError(self._where, f"{address}: {error} {UNGUARDED_SCRIPT}", self._source) from None
            try:
                self._client = Client(self._cluster)
                self._warm_workers()
            except BaseException:  # Ctrl-C during the start: close the cluster now, quietly (not at exit, noisily)
                self.close()
                raise
            return
        try:
            self._client = Client(target, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise ConfigError(self._where, f"cannot reach the Dask scheduler {target}: {exc}", self._source) \
                from None
        self._warm_workers()

    def _warm_workers(self) -> None:
        """Import the task code on every worker now, with the modules that the tasks import
        lazily (:data:`TASK_MODULES`), so that it is part of the cluster's start, not of the
        first tasks (see :func:`import_task_modules`)."""
        import importlib

        try:
            self._client.run(importlib.import_module, __name__)  # a clear error if the package is missing
            self._client.run(import_task_modules)
            # on_error="return": a worker of an onlineeval from before the stream version has no
            # worker_stream_version to run (its error, not a version, is its answer)
            versions = self._client.run(worker_stream_version, on_error="return")
        except ImportError as exc:
            self.close()
            raise ConfigError(self._where, f"the Dask workers at {self.address} cannot import "
                              f"{__name__} ({exc}); install the same onlineeval version on every worker",
                              self._source) from None
        self._check_stream_versions(versions)

    def _check_stream_versions(self, versions: Mapping[str, Any]) -> None:
        """Refuse workers whose onlineeval gives other numbers for a seed than this process's (another
        :data:`simulations.job.STREAM_VERSION`): a sweep on them would mix two versions' replicates in one
        result, and the fingerprints that keep resumed runs apart are the client's."""
        from simulations.job import STREAM_VERSION

        other = {address: v for address, v in versions.items() if v != STREAM_VERSION}
        if other:
            self.close()
            named = ", ".join(f"{address} ({_worker_version(v)})"
                              for address, v in sorted(other.items(), key=lambda kv: str(kv[0])))
            raise ConfigError(self._where, f"the Dask workers at {self.address} run an onlineeval whose "
                              f"numbers for a seed differ from this one's (stream version {STREAM_VERSION} here; "
                              f"workers: {named}); install the same onlineeval version on every worker", self._source)

    @property
    def workers(self) -> int:
        info = self._client.scheduler_info()
        return max(1, sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()))

    def run(
        self,
        tasks: Sequence[Task],
        worlds: Mapping[str, World],
        on_done: Callable[[Task, TaskResult], None],
    ) -> None:
        from distributed import as_completed as dask_completed

        from simulations.job import STREAM_VERSION

        client = self._client
        stream_version = STREAM_VERSION  # every task carries it: a worker that joined after the start check refuses
        rank = {p: k for k, p in enumerate(dict.fromkeys(t.point for t in tasks))}
        remaining = Counter(t.point for t in tasks)
        shipped: dict[str, Any] = {}
        futures = {}
        try:
            for task in tasks:
                if task.point not in shipped:
                    # one copy of each point's world per worker, however many tasks use it; scattered
                    # just before the point's tasks, so the first tasks run while later worlds travel
                    shipped[task.point] = client.scatter(worlds[task.point], broadcast=True, hash=False)
                fut = client.submit(
                    run_task, task.config, shipped[task.point], task.indices, task.kind, stream_version,
                    pure=False, priority=-rank[task.point],  # earlier points finish first
                )
                futures[fut] = task
            for fut in dask_completed(list(futures)):
                task = futures.pop(fut)
                on_done(task, fut.result())
                remaining[task.point] -= 1
                if remaining[task.point] == 0:
                    shipped.pop(task.point).release()  # the workers may drop this world now
        except BaseException:
            client.cancel(list(futures))
            raise

    def close(self) -> None:
        """Close the client and a cluster this executor started; while that cluster closes, Dask's loggers say
        nothing (review 2, C.2: a Ctrl-C left ``distributed.scheduler - ERROR - broadcast to ... failed:
        CommClosedError`` lines after "interrupted ...; finished work is kept": harmless, but read as a failure)."""
        client, self._client = getattr(self, "_client", None), None
        cluster, self._cluster = getattr(self, "_cluster", None), None
        with _quiet_dask_logs(cluster is not None):
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.close()


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[list[int]]:
    """SIGINT and SIGTERM recorded, not raised, inside the block (the list it yields gets their numbers), so that
    a Ctrl-C while Dask starts a LocalCluster does not leave a half-started cluster that Dask's exit hook then
    fails to close with a page of tracebacks (``AssertionError: Status.init``, "Nanny failed to start"); the
    caller closes the started cluster and stops. A second signal in the block raises at once (a way out of a
    start that hangs). SIGINT is also blocked in this thread inside the block, so the threads Dask starts meanwhile
    and the worker processes they spawn inherit the block: a terminal's Ctrl-C, sent to every process of the
    foreground group, leaves the workers alone (it used to stop them in their first imports, each printing a
    ``KeyboardInterrupt`` traceback) and reaches this process, which ends them, as the local backend's workers
    ignore it. Outside the main thread (no signal handlers there) the block does nothing."""
    import threading

    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def record(signum: int, _frame: Any) -> None:
        if got:
            from simulations.job import Interrupted

            raise Interrupted(signum)
        got.append(signum)

    from multiprocessing import resource_tracker

    # started now, if it is not yet: starting it unblocks SIGINT in the thread that starts it (this one, inside
    # Dask's start), and every thread started after that would then let the signal reach the workers again
    resource_tracker.ensure_running()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, record) for s in signals}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield got
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending SIGINT is handled (recorded) here
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


@contextlib.contextmanager
def _quiet_dask_logs(quiet: bool) -> Iterator[None]:
    """Every ``distributed`` logger at CRITICAL inside the block (when ``quiet``), its own level restored after."""
    if not quiet:
        yield
        return
    import logging

    names = ["distributed"] + [n for n in list(logging.root.manager.loggerDict) if n.startswith("distributed.")]
    saved = {name: logging.getLogger(name).level for name in names}
    try:
        for name in names:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def make_executor(scheduler: str | None = None, workers: int | None = None,
                  spec: Mapping[str, Any] | None = None, source: str | None = None) -> Executor:
    """The backend for a sweep: ``scheduler`` (``--scheduler``) wins, then the sweep
    config's ``executor: {type: local|dask, workers: N, address: ...}`` (read from ``source``);
    the default is :class:`LocalExecutor` with ``workers`` processes (0 = all cores).
    :func:`~simulations.executor_check.check_executor` refuses, without starting anything, what this would fail
    to start."""
    kind, value, where, src = _resolve(scheduler, workers, spec, source)
    if kind == "dask":
        return DaskExecutor(value, where=where, source=src)
    return LocalExecutor(value)
