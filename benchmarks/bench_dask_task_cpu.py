"""Benchmark: the CPU time of the same sweep tasks in a local worker process and a Dask worker, side by side.

One local worker process (forked from this one, as :class:`simulations.executors.LocalExecutor`
starts them) and a Dask LocalCluster of one worker (``local:1``, as
:class:`simulations.executors.DaskExecutor` starts it) run the same tasks (each point's ground
truth and its chunks of replicates of ``configs/sweep.yaml``) at the same time, so that both
see the same load from the rest of the machine; each task measures the CPU time of its own
thread (``time.thread_time``) and its page faults around :func:`simulations.executors.run_task`
only (a local worker builds the point's world before, a Dask worker gets it scattered). Prints,
per kind of task, the sum over tasks and the ratio Dask / local, and the geometric mean of the
per-task ratios with its standard error; checks that both return the same results.
``--cold`` skips :func:`simulations.executors.import_task_modules` on the Dask worker (what
``local:N`` did before it existed: its first truth task imported scipy, pandas and the
package's metrics and statistics).

    python benchmarks/bench_dask_task_cpu.py [--replicates 10] [--points 20] [--repeat 2] [--cold]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import math
import os
import pickle
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import dask

import simulations.executors as executors
from simulations.executors import TRUTH, Task
from simulations.world import World

REPO = Path(__file__).resolve().parents[1]
_WORLDS: dict[str, World] = {}


def measured_task(point: str, config: Any, world: World | None, indices: tuple[int, ...], kind: str) -> dict[str, Any]:
    """Run one task; its thread's CPU time and page faults, and a digest of its result."""
    if world is None:  # local worker: build (and keep) the point's world first, outside the measurement
        if point not in _WORLDS:
            from simulations.runner import world_seed
            from simulations.world import build_world

            _WORLDS.clear()
            _WORLDS[point] = build_world(config, world_seed(config.seed))
        world = _WORLDS[point]
    ru0, t0 = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
    result = executors.run_task(config, world, indices, kind)
    t1, ru1 = time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD)
    return {"kind": kind, "cpu": t1 - t0, "faults": ru1.ru_minflt - ru0.ru_minflt,
            "digest": hashlib.sha1(pickle.dumps(result)).hexdigest()}


def _tasks(replicates: int, points: int) -> tuple[list[Task], dict[str, World]]:
    from simulations.job import config_fingerprint, prepare_world
    from simulations.sweep import load_sweep

    sweep = load_sweep(REPO / "configs" / "sweep.yaml")
    tasks: list[Task] = []
    worlds: dict[str, World] = {}
    size = sweep.chunk or max(1, math.ceil(replicates / 4))
    for p in sweep.points[:points]:
        config = p.config.model_copy(update={"replicates": replicates})
        fp = config_fingerprint(config)
        worlds[fp] = prepare_world(config)[0]
        tasks.append(Task(fp, config, (), TRUTH))
        tasks += [Task(fp, config, tuple(range(k, min(k + size, replicates)))) for k in range(0, replicates, size)]
    return tasks, worlds


def _one_repeat(tasks: list[Task], worlds: dict[str, World], cold: bool) -> tuple[list[dict[str, Any]], ...]:
    from distributed import Client, LocalCluster

    environ = dict(os.environ)
    with dask.config.set(executors.LOCAL_CLUSTER_CONFIG):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=40)
    executors._restore_environ(environ)
    client = Client(cluster)
    pool = ProcessPoolExecutor(max_workers=1, initializer=executors._init_local_worker)
    try:
        client.run(importlib.import_module, "simulations.executors")
        if not cold:
            client.run(executors.import_task_modules)
        pool.submit(int).result()  # the local worker is started (forked) now
        shipped: dict[str, Any] = {}
        local, remote = [], []
        for t in tasks:
            if t.point not in shipped:
                shipped[t.point] = client.scatter(worlds[t.point], broadcast=True, hash=False)
            local.append(pool.submit(measured_task, t.point, t.config, None, t.indices, t.kind))
            remote.append(client.submit(measured_task, t.point, t.config, shipped[t.point], t.indices, t.kind,
                                        pure=False))
        return [f.result() for f in local], [f.result() for f in remote]
    finally:
        pool.shutdown()
        client.close()
        cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=10, help="replicates per point")
    ap.add_argument("--points", type=int, default=20, help="the first N points of configs/sweep.yaml")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cold", action="store_true", help="the Dask worker without import_task_modules()")
    args = ap.parse_args()
    tasks, worlds = _tasks(args.replicates, args.points)
    print(f"{len(tasks)} tasks of {len(worlds)} points; 1 local worker and 1 Dask worker at the same time on "
          f"{os.cpu_count()} cores{' (Dask worker cold)' if args.cold else ''}")
    for rep in range(args.repeat):
        load0 = os.getloadavg()[0]
        local, remote = _one_repeat(tasks, worlds, args.cold)
        if [m["digest"] for m in local] != [m["digest"] for m in remote]:
            raise SystemExit("the backends' results differ")
        print(f"repeat {rep + 1} (load average {load0:.1f} -> {os.getloadavg()[0]:.1f}):")
        for kind in (TRUTH, executors.REPLICATES, None):
            a = [m for m in local if kind in (None, m["kind"])]
            b = [m for m in remote if kind in (None, m["kind"])]
            logs = [math.log(y["cpu"] / x["cpu"]) for x, y in zip(a, b)]
            mean = sum(logs) / len(logs)
            se = (sum((v - mean) ** 2 for v in logs) / (len(logs) - 1) / len(logs)) ** 0.5 if len(logs) > 1 else 0
            sa, sb = sum(m["cpu"] for m in a), sum(m["cpu"] for m in b)
            print(f"  {kind or 'all':<10s} {len(a):3d} tasks: task-thread CPU local {sa:6.2f} s, dask {sb:6.2f} s, "
                  f"ratio {sb / sa:.3f}; per task geometric mean {math.exp(mean):.3f} (se of log {se:.3f}); "
                  f"page faults {sum(m['faults'] for m in a)} vs {sum(m['faults'] for m in b)}", flush=True)


if __name__ == "__main__":
    main()
