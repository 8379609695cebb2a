"""Benchmark: Dask's overhead on one machine against local processes, for a whole sweep.

Runs the same sweep (default ``configs/sweep.yaml``, optionally fewer replicates) into
fresh folders three ways: local processes (``--workers N``), a Dask LocalCluster of N
single-threaded worker processes started inside the timing, and the same cluster already
running (its start-up outside the timing: what a long-lived cluster costs). Checks the
three ``points.csv`` are byte-identical and prints the time ratios (target: Dask on a
running cluster within 10% of local processes).

    python benchmarks/bench_sweep_dask.py [--config configs/sweep.yaml] [--workers 2] [--replicates 30] [--repeat 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from simulations.executors import DaskExecutor, LocalExecutor
from simulations.sweep import load_sweep, run_sweep

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(REPO / "configs" / "sweep.yaml"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--replicates", type=int, default=None, help="replicates per point (default: the config's)")
    ap.add_argument("--repeat", type=int, default=1, help="alternate the backends this many times; best time kept")
    args = ap.parse_args()

    sweep = load_sweep(args.config)
    if args.replicates is not None:
        sweep = replace(sweep, points=[replace(p, config=p.config.model_copy(update={"replicates": args.replicates}))
                                       for p in sweep.points])
    n_reps = sum(p.config.replicates for p in sweep.points)
    print(f"{args.config}: {len(sweep.points)} points, {n_reps} replicates, {args.workers} workers")
    times: dict[str, float] = {}

    def keep(name: str, sec: float) -> None:
        times[name] = min(sec, times.get(name, float("inf")))

    same = True
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)

            t = time.perf_counter()
            with LocalExecutor(args.workers) as ex:
                run_sweep(replace(sweep, output=root / "local"), executor=ex)
            keep("local processes", time.perf_counter() - t)

            t = time.perf_counter()
            with DaskExecutor(f"local:{args.workers}") as ex:
                keep("dask cluster start", time.perf_counter() - t)
                t2 = time.perf_counter()
                run_sweep(replace(sweep, output=root / "dask"), executor=ex)
                keep("dask, running cluster", time.perf_counter() - t2)
            keep("dask incl. start-up", time.perf_counter() - t)

            same &= (root / "local" / "points.csv").read_bytes() == (root / "dask" / "points.csv").read_bytes()
    for name, sec in times.items():
        print(f"  {name:<24s} {sec:8.1f} s")
    base = times["local processes"]
    print(f"ratio dask (running cluster) / local processes: {times['dask, running cluster'] / base:.3f}")
    print(f"ratio dask (incl. start-up)  / local processes: {times['dask incl. start-up'] / base:.3f}")
    print(f"points.csv identical: {same}")
    if not same:
        raise SystemExit("points.csv differs between backends")


if __name__ == "__main__":
    main()
