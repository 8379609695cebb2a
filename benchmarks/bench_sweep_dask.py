"""Benchmark: Dask's overhead on one machine against local processes, for a whole sweep.

Runs the same sweep (default ``configs/sweep.yaml``, optionally fewer replicates) into
fresh folders: local processes (``--workers N``) and a Dask LocalCluster of N
single-threaded worker processes (``local:N``, with
:data:`simulations.executors.LOCAL_CLUSTER_CONFIG`), timed on the running cluster, its
start-up (which includes importing the package on the workers) reported separately; with
``--dask-defaults`` also the same cluster with Dask's default configuration (what
``local:N`` used before). The backends get the same tasks and the same number of workers;
their order alternates from one repeat to the next. Per backend: the best wall time over
the repeats and the CPU time of every process involved, split by process and thread (from
``/proc`` through psutil): this process (the client; it also hosts the LocalCluster's
scheduler and nannies), of which its main thread (the sweep's own work: building worlds,
handing finished points to the writers, the sweep's own tables and plots) and the sweep's
writer processes (each point's folder; from ``RUSAGE_CHILDREN``, as they end with the
sweep; counted in the client); the worker processes (the local pool or the Dask workers), of
which their task threads (a local worker's main thread, a Dask worker's task pool). CPU
time is blurred less than wall time by the machine's other load, and the task threads'
CPU time least. Each repeat's ratios are printed too (the ratios within one repeat are
what count on a shared machine), with the load average. Checks every ``points.csv`` is
byte-identical (target: Dask on a running cluster within 10% of local processes).

    python benchmarks/bench_sweep_dask.py [--config configs/sweep.yaml] [--workers 2] [--replicates 30] [--repeat 3]
        [--dask-defaults]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

import simulations.executors as executors
from simulations.executors import DaskExecutor, Executor, LocalExecutor
from simulations.sweep import SweepConfig, load_sweep, run_sweep

REPO = Path(__file__).resolve().parents[1]
LOCAL, DASK, DASK_DEFAULTS = "local processes", "dask", "dask, Dask defaults"


def _thread_seconds(pid: int) -> dict[int, float]:
    """CPU time (user + system) of each thread of process ``pid`` (empty if it has ended)."""
    try:
        return {t.id: t.user_time + t.system_time for t in psutil.Process(pid).threads()}
    except psutil.Error:
        return {}


def _cpu_snapshot() -> tuple[dict[int, float], dict[int, dict[int, float]]]:
    """({thread id: CPU s} of this process, {child pid: {thread id: CPU s}}) for the live child processes,
    recursively."""
    me = psutil.Process()
    return _thread_seconds(me.pid), {p.pid: _thread_seconds(p.pid) for p in me.children(recursive=True)}


def _busy_seconds() -> float:
    """CPU time the whole machine has spent busy (every process, user + system + interrupts)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def _task_threads(ex: Executor) -> dict[int, set[int]]:
    """{worker pid: ids of the threads that run tasks}: a local worker runs its tasks in its
    main thread; a Dask worker in the threads of its task pool (``dask_worker.executor``)."""
    if isinstance(ex, DaskExecutor):
        def ids(dask_worker: Any) -> tuple[int, list[int]]:
            pool = dask_worker.executor  # the worker's task pool, a ThreadPoolExecutor (its threads: private)
            return os.getpid(), [t.native_id for t in pool._threads]

        return {pid: set(tids) for pid, tids in ex._client.run(ids).values()}
    return {p.pid: {p.pid} for p in psutil.Process().children(recursive=True)}


#: CPU seconds of one sweep: "client" (this process: the sweep's client, and the LocalCluster's
#: scheduler and nannies), "main" (its main thread: the sweep's own work; the other threads
#: are the event loop of the Dask client, scheduler and nannies, or the local pool's queue
#: threads), "workers" (the worker processes, every thread), "tasks" (the workers' task
#: threads), "all" (client + workers), "others" (every other process on the machine meanwhile: the
#: load that the benchmark does not control)
CpuSplit = dict[str, float]


def _reaped_seconds() -> float:
    """CPU time of this process's children that have ended and been waited for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed_run(make: Callable[[], Executor], sweep: SweepConfig, out: Path) -> tuple[float, float, CpuSplit]:
    """(start-up s, sweep wall s, CPU s split by process and thread during the sweep) for one backend."""
    t = time.perf_counter()
    with make() as ex:
        start = time.perf_counter() - t
        (me0, kids0), busy0, t0 = _cpu_snapshot(), _busy_seconds(), time.perf_counter()
        reaped0 = _reaped_seconds()
        run_sweep(replace(sweep, output=out), executor=ex)
        wall = time.perf_counter() - t0
        me1, kids1 = _cpu_snapshot()  # before close(): the local pool's processes are still alive
        writers = _reaped_seconds() - reaped0  # the sweep's writer processes, the only children ended by now
        busy = _busy_seconds() - busy0
        tasks = _task_threads(ex)
    workers = task = 0.0
    for pid, threads in kids1.items():
        before = kids0.get(pid, {})
        for tid, sec in threads.items():
            used = sec - before.get(tid, 0.0)
            workers += used
            task += used if tid in tasks.get(pid, ()) else 0.0
    client = sum(sec - me0.get(tid, 0.0) for tid, sec in me1.items()) + writers
    main = me1.get(os.getpid(), 0.0) - me0.get(os.getpid(), 0.0)  # the main thread's id is the process id
    cpu = {"client": client, "main": main, "writers": writers, "workers": workers, "tasks": task,
           "all": client + workers, "others": max(0.0, busy - client - workers)}
    return start, wall, cpu


def _dask_defaults(workers: int) -> Executor:
    saved = executors.LOCAL_CLUSTER_CONFIG
    executors.LOCAL_CLUSTER_CONFIG = {}
    try:
        return DaskExecutor(f"local:{workers}")
    finally:
        executors.LOCAL_CLUSTER_CONFIG = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(REPO / "configs" / "sweep.yaml"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--replicates", type=int, default=None, help="replicates per point (default: the config's)")
    ap.add_argument("--repeat", type=int, default=1, help="alternate the backends this many times; best time kept")
    ap.add_argument("--dask-defaults", action="store_true",
                    help="also time the LocalCluster with Dask's default configuration")
    args = ap.parse_args()

    sweep = load_sweep(args.config)
    if args.replicates is not None:
        sweep = replace(sweep, points=[replace(p, config=p.config.model_copy(update={"replicates": args.replicates}))
                                       for p in sweep.points])
    n_reps = sum(p.config.replicates for p in sweep.points)
    print(f"{args.config}: {len(sweep.points)} points, {n_reps} replicates, {args.workers} workers, "
          f"{os.cpu_count()} cores")
    backends: dict[str, Callable[[], Executor]] = {
        LOCAL: lambda: LocalExecutor(args.workers),
        DASK: lambda: DaskExecutor(f"local:{args.workers}"),
    }
    if args.dask_defaults:
        backends[DASK_DEFAULTS] = lambda: _dask_defaults(args.workers)
    best: dict[str, dict[str, float]] = {}
    csv: dict[str, bytes] = {}
    same = True
    for rep in range(args.repeat):
        names = list(backends) if rep % 2 == 0 else list(reversed(backends))
        load0 = os.getloadavg()[0]
        this: dict[str, tuple[float, float, CpuSplit]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for k, name in enumerate(names):
                out = Path(tmp) / f"out{k}"
                this[name] = _timed_run(backends[name], sweep, out)
                data = (out / "points.csv").read_bytes()
                same &= csv.setdefault("ref", data) == data
        for name, (start, wall, cpu) in this.items():
            b = best.setdefault(name, {})
            for key, val in (("start", start), ("wall", wall), *cpu.items()):
                b[key] = min(val, b.get(key, float("inf")))
        print(f"repeat {rep + 1} (order: {' -> '.join(names)}; load average {load0:.1f} -> "
              f"{os.getloadavg()[0]:.1f}):", flush=True)
        for n in backends:
            start, wall, cpu = this[n]
            print(f"  {n:<22s} wall {wall:6.1f} s; CPU s: all {cpu['all']:6.1f}, client {cpu['client']:6.1f} "
                  f"(main thread {cpu['main']:6.1f}, writers {cpu['writers']:6.1f}), workers {cpu['workers']:6.1f} "
                  f"(task threads {cpu['tasks']:6.1f}); other processes {cpu['others']:6.1f}", flush=True)
        base = this[LOCAL]
        for n in backends:
            if n != LOCAL:
                wall, cpu = this[n][1], this[n][2]
                ratio = {key: cpu[key] / base[2][key] for key in cpu if key != "others" and base[2][key] > 0}
                print(f"  ratio {n} / local: wall {wall / base[1]:.3f}; CPU: all {ratio['all']:.3f}, client "
                      f"{ratio['client']:.3f} (main thread {ratio['main']:.3f}), task threads {ratio['tasks']:.3f}",
                      flush=True)
    print("best of the repeats (each figure's minimum over the repeats):")
    for name, b in best.items():
        start = f", start-up {b['start']:.1f} s" if name != LOCAL else ""
        print(f"  {name:<22s} sweep {b['wall']:7.1f} s, CPU s: all {b['all']:6.1f}, client {b['client']:6.1f} (main "
              f"{b['main']:6.1f}), workers {b['workers']:6.1f} (task threads {b['tasks']:6.1f}){start}")
    base = best[LOCAL]
    for name in backends:
        if name == LOCAL:
            continue
        b = best[name]
        print(f"ratio {name} / local processes: running cluster {b['wall'] / base['wall']:.3f}, "
              f"incl. start-up {(b['wall'] + b['start']) / base['wall']:.3f}, CPU {b['all'] / base['all']:.3f} "
              f"(task threads {b['tasks'] / base['tasks']:.3f})")
    print(f"points.csv identical: {same}")
    if not same:
        raise SystemExit("points.csv differs between backends")


if __name__ == "__main__":
    main()
