"""Benchmark: Dask's overhead on one machine against local processes, for a whole sweep.

Runs the same sweep (default ``configs/sweep.yaml``, optionally fewer replicates) into
fresh folders: local processes (``--workers N``) and a Dask LocalCluster of N
single-threaded worker processes (``local:N``, with
:data:`simulations.executors.LOCAL_CLUSTER_CONFIG`), timed on the running cluster, its
start-up (which includes importing the package on the workers) reported separately; with
``--dask-defaults`` also the same cluster with Dask's default configuration (what
``local:N`` used before). The backends get the same tasks and the same number of workers;
their order alternates from one repeat to the next. Per backend: the best wall time over
the repeats and the CPU time of every process involved (this process, which also hosts
the LocalCluster's scheduler and nannies, and its child processes: the local pool or the
Dask workers), which the machine's other load blurs less than wall time. Each repeat's
ratio is printed too (the ratios within one repeat are what count on a shared machine),
with the load average. Checks every ``points.csv`` is byte-identical (target: Dask on a
running cluster within 10% of local processes).

    python benchmarks/bench_sweep_dask.py [--config configs/sweep.yaml] [--workers 2] [--replicates 30] [--repeat 3]
        [--dask-defaults]
"""

from __future__ import annotations

import argparse
import os
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


def _cpu_seconds() -> float:
    """CPU time (user + system) of this process and its live children, recursively."""
    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += t.user + t.system
    return total


def _timed_run(make: Callable[[], Executor], sweep: SweepConfig, out: Path) -> tuple[float, float, float]:
    """(start-up s, sweep wall s, CPU s of every process during the sweep) for one backend."""
    t = time.perf_counter()
    with make() as ex:
        start = time.perf_counter() - t
        c0, t0 = _cpu_seconds(), time.perf_counter()
        run_sweep(replace(sweep, output=out), executor=ex)
        wall = time.perf_counter() - t0
        cpu = _cpu_seconds() - c0  # before close(): the local pool's processes are still alive
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
        this: dict[str, tuple[float, float, float]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for k, name in enumerate(names):
                out = Path(tmp) / f"out{k}"
                this[name] = _timed_run(backends[name], sweep, out)
                data = (out / "points.csv").read_bytes()
                same &= csv.setdefault("ref", data) == data
        for name, (start, wall, cpu) in this.items():
            b = best.setdefault(name, {})
            for key, val in (("start", start), ("wall", wall), ("cpu", cpu)):
                b[key] = min(val, b.get(key, float("inf")))
        ratios = ", ".join(f"{n} {this[n][1] / this[LOCAL][1]:.3f} (CPU {this[n][2] / this[LOCAL][2]:.3f})"
                           for n in backends if n != LOCAL)
        print(f"repeat {rep + 1} (order: {' -> '.join(names)}; load average {load0:.1f} -> "
              f"{os.getloadavg()[0]:.1f}): " + ", ".join(f"{n} {this[n][1]:.1f} s" for n in backends)
              + f"; ratio to local: {ratios}", flush=True)
    print("best of the repeats:")
    for name, b in best.items():
        start = f", start-up {b['start']:.1f} s" if name != LOCAL else ""
        print(f"  {name:<22s} sweep {b['wall']:7.1f} s, CPU of all processes {b['cpu']:7.1f} s{start}")
    base = best[LOCAL]
    for name in backends:
        if name == LOCAL:
            continue
        b: dict[str, Any] = best[name]
        print(f"ratio {name} / local processes: running cluster {b['wall'] / base['wall']:.3f}, "
              f"incl. start-up {(b['wall'] + b['start']) / base['wall']:.3f}, CPU {b['cpu'] / base['cpu']:.3f}")
    print(f"points.csv identical: {same}")
    if not same:
        raise SystemExit("points.csv differs between backends")


if __name__ == "__main__":
    main()
