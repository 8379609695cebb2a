"""Benchmark: the sweep's client, writing the points' folders itself or in writer processes.

Runs the same sweep (default ``configs/sweep.yaml`` with 2 replicates per point, where the
client's work is largest against the tasks') into fresh folders with ``writers=0`` (each
point's folder written in the client's main thread, as before :mod:`simulations.sweep_writers`)
and with writer processes (``--writers``, default 2), the order alternating from one repeat
to the next, on the same backend (local processes, or ``--scheduler local:N``). Per run: the
wall time; the tail (how long the sweep ran on after the task workers' last CPU use, sampled
every 0.2 s); CPU seconds of the client's main thread (``time.thread_time``), of the writer
processes (``RUSAGE_CHILDREN``: they are the only children that end during the sweep), of the
task workers (every thread of every other child process, from ``/proc`` through psutil) and of
every other process on the machine meanwhile (the load the benchmark does not control); and
the load average. Each repeat prints the ratios writers / no writers of the same repeat.
Checks that every file of the two sweep folders is byte-identical (PNG and HTML included).

    python benchmarks/bench_sweep_client.py [--config configs/sweep.yaml] [--replicates 2] [--workers 2]
        [--writers 2] [--scheduler local:2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from simulations.executors import Executor, LocalExecutor, make_executor
from simulations.sweep import SweepConfig, load_sweep, run_sweep

REPO = Path(__file__).resolve().parents[1]


def _busy_seconds() -> float:
    """CPU time the whole machine has spent busy (every process, user + system + interrupts)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def _children_cpu(exclude: set[int]) -> dict[int, float]:
    """CPU s (user + system) of each live child process (recursively), except ``exclude``."""
    out = {}
    for p in psutil.Process().children(recursive=True):
        if p.pid in exclude:
            continue
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        out[p.pid] = t.user + t.system
    return out


def _reaped_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class _Sampler(threading.Thread):
    """Records when the task workers (the live child processes that existed before the sweep
    started, and those that appear and are not writers) last used CPU."""

    def __init__(self, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.every, self.last_busy, self._halt = every, time.perf_counter(), threading.Event()
        self.writers: set[int] = set()

    def run(self) -> None:
        seen: dict[int, float] = {}
        while not self._halt.wait(self.every):
            now = _children_cpu(self.writers)
            if any(now[p] > seen.get(p, 0.0) + 1e-9 for p in now):
                self.last_busy = time.perf_counter()
            seen = now

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _timed(ex: Executor, sweep: SweepConfig, out: Path, writers: int) -> dict[str, float]:
    kids0 = _children_cpu(set())
    reaped0, busy0, main0 = _reaped_cpu(), _busy_seconds(), time.thread_time()
    sampler = _Sampler()
    sampler.start()
    t0 = time.perf_counter()
    writer_pids: set[int] = set()

    def spot_writers() -> None:  # the writers are the children that appear and end within the sweep
        import simulations.sweep_writers as sw

        real = sw.PointWriters.__init__

        def init(self: Any, processes: int, *args: Any, **kw: Any) -> None:
            real(self, processes, *args, **kw)
            if self.processes:
                writer_pids.update(self.pids)
                sampler.writers = set(writer_pids)

        sw.PointWriters.__init__ = init  # type: ignore[method-assign]
        return real

    real = spot_writers()
    try:
        run_sweep(replace(sweep, output=out), executor=ex, writers=writers)
    finally:
        import simulations.sweep_writers as sw

        sw.PointWriters.__init__ = real  # type: ignore[method-assign]
    wall = time.perf_counter() - t0
    main = time.thread_time() - main0
    sampler.stop()
    kids1 = _children_cpu(writer_pids)
    tasks = sum(sec - kids0.get(pid, 0.0) for pid, sec in kids1.items())
    writers_cpu = _reaped_cpu() - reaped0
    busy = _busy_seconds() - busy0
    return {"wall": wall, "tail": max(0.0, t0 + wall - sampler.last_busy), "main": main, "writers": writers_cpu,
            "tasks": tasks, "others": max(0.0, busy - main - writers_cpu - tasks)}


def _same_tree(a: Path, b: Path) -> list[str]:
    """Relative paths of files that differ between two sweep folders (lock files aside)."""
    names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} | {p.relative_to(b) for p in b.rglob("*")
                                                                       if p.is_file()}
    return sorted(str(n) for n in names if n.name != ".onlineeval.lock"
                  and (not (a / n).is_file() or not (b / n).is_file() or (a / n).read_bytes() != (b / n).read_bytes()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(REPO / "configs" / "sweep.yaml"))
    ap.add_argument("--replicates", type=int, default=2, help="replicates per point (default 2)")
    ap.add_argument("--workers", type=int, default=2, help="local task processes (default 2)")
    ap.add_argument("--writers", type=int, default=2, help="writer processes of the new path (default 2)")
    ap.add_argument("--scheduler", default=None, help="local:N for a Dask LocalCluster (default: local processes)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    sweep = load_sweep(args.config)
    sweep = replace(sweep, points=[replace(p, config=p.config.model_copy(update={"replicates": args.replicates}))
                                   for p in sweep.points])
    backend = args.scheduler or f"local processes ({args.workers})"
    print(f"{args.config}: {len(sweep.points)} points x {args.replicates} replicates on {backend}; writers 0 "
          f"(client's main thread) against {args.writers}; {os.cpu_count()} cores", flush=True)
    settings = [0, args.writers]
    runs: dict[int, list[dict[str, float]]] = {w: [] for w in settings}
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    identical = True
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeat):
            order = settings if rep % 2 == 0 else settings[::-1]
            load0 = os.getloadavg()
            this: dict[int, dict[str, float]] = {}
            for w in order:
                ex = make_executor(args.scheduler) if args.scheduler else LocalExecutor(args.workers)
                try:  # the same folder for both (the points' configs name it), then kept aside
                    this[w] = _timed(ex, sweep, Path(tmp) / "sweep", w)
                finally:
                    ex.close()
                (Path(tmp) / "sweep").rename(Path(tmp) / f"w{w}-{rep}")
            diff = _same_tree(Path(tmp) / f"w0-{rep}", Path(tmp) / f"w{args.writers}-{rep}")
            identical &= not diff
            print(f"repeat {rep + 1} (order writers {' -> '.join(map(str, order))}; load average "
                  f"{load0[0]:.1f} -> {os.getloadavg()[0]:.1f}):", flush=True)
            for w in settings:
                r = this[w]
                runs[w].append(r)
                print(f"  writers {w}: wall {r['wall']:6.1f} s (tail after the last task {r['tail']:5.1f} s); CPU s: "
                      f"client main thread {r['main']:5.1f}, writers {r['writers']:5.1f}, tasks {r['tasks']:5.1f}; "
                      f"other processes {r['others']:5.1f}", flush=True)
            new, old = this[args.writers], this[0]
            ratios.append(new["wall"] / old["wall"])
            cpu_ratios.append((new["main"] + new["writers"]) / (old["main"] + old["writers"]))
            print(f"  ratio writers {args.writers} / 0: wall {ratios[-1]:.3f}, client CPU (main + writers) "
                  f"{cpu_ratios[-1]:.3f}; files identical: {not diff}" + (f" (differ: {diff[:5]})" if diff else ""),
                  flush=True)
    geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
    print(f"wall ratio writers {args.writers} / 0: geometric mean {geo:.3f} (per repeat "
          f"{', '.join(f'{r:.2f}' for r in ratios)}); client CPU ratio geometric mean "
          f"{math.exp(statistics.fmean(math.log(r) for r in cpu_ratios)):.3f}")
    for w in settings:
        med = {k: statistics.median(r[k] for r in runs[w]) for k in runs[w][0]}
        print(f"  writers {w} (medians): wall {med['wall']:.1f} s, tail {med['tail']:.1f} s, main thread "
              f"{med['main']:.1f} s, writers {med['writers']:.1f} s, tasks {med['tasks']:.1f} s")
    print(f"every file identical: {identical}")
    if not identical:
        sys.exit("the sweep folders differ between writers 0 and writers > 0")


if __name__ == "__main__":
    main()
