"""Benchmark: replicate throughput, the cost of SimPy, and the ratio against the kernels.

Runs the same replicates of ``configs/ab.yaml`` twice in this process: once driven by
SimPy (:func:`simulations.runner.run_replicate`, one event per batch plus a daily
monitor) and once by a plain Python loop over the same batches, per-batch looks
(:class:`simulations.sequential.BatchLooks`, ``analysis.monitoring: batch``) and daily
checkpoints. Both give identical rows (checked); the ratio of their times is the SimPy
overhead (target: < 5%).

Throughput is counted in *impression-designs*: one impression processed by one design
(A/A variants and null variants included), per second on one core (everything here runs
in this one process and is timed in CPU time of this process, ``time.process_time``, so other
load on a shared machine does not count). In the same run it measures the two kernels a replicate is made of,
on the world's own lists and the config's users, so the ratios are machine-independent:

- click sampling alone (:meth:`simulations.users.UserModels.sample` on shown grades);
- team-draft interleave + outcome alone (``onlineeval.interleaving``).

Target (issue 12, "Speed of one point"): at least 3M impression-designs/s per core. The development machine's speed
varies by 30% and more between minutes (its click kernel at 8 or 12 M/s in the same run): compare with
``--rounds 12`` (best of 12 alternating rounds), as the README's table does.

    python benchmarks/bench_simulation.py [--replicates 4] [--config configs/ab.yaml] [--rounds 3] [--breakdown]
        [--compile-cost] [--stat-kernels]

``--compile-cost`` also measures the one-off cost of the compiled kernels (:mod:`simulations.kernels`, numba) in
fresh processes: with an empty cache (compilation) and with the cache that run wrote (loading). ``--stat-kernels``
compares the compiled checkpoint statistics (:mod:`simulations.stat_kernels`) with their NumPy path in the same
process (alternating rounds).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

import onlineeval.stats  # noqa: F401  (import cost outside the timings)
from simulations.config import load_config
from simulations.runner import (
    build_replicate,
    design_specs,
    no_cyclic_gc,
    replicate_rows,
    replicate_seeds,
    run_replicate,
    world_seed,
)
from simulations.sequential import batch_looks
from simulations.traffic import TrafficModel, run_traffic
from simulations.users import UserModels
from simulations.world import build_world, shown_labels

REPO = Path(__file__).resolve().parents[1]


def plain_loop_replicate(config, world, users, seq, index):
    """The work of :func:`run_replicate` without SimPy: a for-loop over batches, then the
    per-batch looks, then (at the end of a day) the daily checkpoints, in SimPy's order (with the cyclic
    garbage collector paused, as there)."""
    with no_cyclic_gc():
        traffic, designs = build_replicate(config, world, users, seq)
        consumers = [*designs, *batch_looks(designs)]
        step = traffic.batch_hours
        for hour in range(0, traffic.days * 24, step):
            batch = traffic.batch(hour, step)
            for c in consumers:
                c.process(batch)
            if (hour + step) % 24 == 0:
                for d in designs:
                    d.checkpoint((hour + step) // 24)
        return replicate_rows(designs, index)


def breakdown(config, world, users, seqs) -> dict[str, float]:
    """CPU seconds per replicate of each part of :func:`plain_loop_replicate` (the replicate's set-up, traffic,
    each design's batch step, the per-batch looks, the daily checkpoints by design kind): the profile of what
    remains."""
    from collections import Counter

    spent: Counter[str] = Counter()
    clock = time.process_time
    with no_cyclic_gc():  # as in run_replicate
        for seq in seqs:
            t0 = clock()
            traffic, designs = build_replicate(config, world, users, seq)
            spent["set-up (designs, CUPED pre-period)"] += clock() - t0
            looks = batch_looks(designs)
            names = [f"{d.name}{' (A/A)' if d.aa else ''}"
                     f"{' (null)' if getattr(d, 'null_labels', None) is not None else ''}" for d in designs]
            step = traffic.batch_hours
            for hour in range(0, traffic.days * 24, step):
                t0 = clock()
                batch = traffic.batch(hour, step)
                spent["traffic (batches of users, queries)"] += clock() - t0
                for name, d in zip(names, designs, strict=True):
                    t0 = clock()
                    d.process(batch)
                    spent[f"batch step: {name}"] += clock() - t0
                for c in looks:
                    t0 = clock()
                    c.process(batch)
                    spent["per-batch looks"] += clock() - t0
                if (hour + step) % 24 == 0:
                    for d in designs:
                        t0 = clock()
                        d.checkpoint((hour + step) // 24)
                        spent[f"daily checkpoints: {d.kind}"] += clock() - t0
    return {k: v / len(seqs) for k, v in spent.items()}


def best_time(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def kernel_rates(world, users, batch: int, repeat: int) -> tuple[float, float]:
    """Impressions/s of click sampling alone and of team-draft interleave + outcome alone,
    on ``batch`` impressions of the world's queries (by frequency) and the config's users."""
    from onlineeval.interleaving import get_interleaver

    rng = np.random.default_rng(1)
    q = np.minimum(np.searchsorted(np.cumsum(world.frequency), rng.random(batch), side="right"), world.n_queries - 1)
    types = users.draw_types(batch, rng)
    labels = shown_labels(world.labels, q, world.rankings["A"][q])
    t_clicks = best_time(lambda: users.sample(labels, types, rng), repeat)
    td = get_interleaver("team_draft")
    lists = [world.rankings["A"][q], world.rankings["B"][q]]
    clicks = users.sample(labels, types, rng)

    def team_draft() -> None:
        shown = td.interleave(lists, rng, length=world.depth)
        td.outcome(shown, clicks)

    t_td = best_time(team_draft, repeat)
    return batch / t_clicks, batch / t_td


_COMPILE_CHILD = """
import sys, time
clock = time.process_time
from simulations.config import load_config
from simulations.runner import replicate_seeds, run_replicate, world_seed
from simulations.users import UserModels
from simulations.world import build_world
cfg = load_config(sys.argv[1])
world = build_world(cfg, world_seed(cfg.seed))
users = UserModels.from_config(cfg.users)
seqs = replicate_seeds(cfg.seed, 3)
t0 = clock()
import simulations.kernels  # numba
t_import = clock() - t0
from simulations.executors import import_task_modules
import_task_modules()  # what the tasks import lazily: not counted in the first replicate
times = []
for i, seq in enumerate(seqs):
    t0 = clock()
    run_replicate(cfg, world, users, seq, i)
    times.append(clock() - t0)
print(t_import, times[0] - min(times[1:]))
"""


def compile_cost(config: str, rounds: int) -> list[tuple[float, float, float, float]]:
    """CPU seconds of the compiled kernels' one-off costs in fresh processes, each against an empty numba cache
    (``NUMBA_CACHE_DIR``, a new temporary directory) and then again on the cache that run wrote: ``(import of
    simulations.kernels, the first replicate's extra time over the later ones)`` for the cold and the warm cache.
    The first replicate's extra time also holds the process's other one-off work (the interleaving draw tables,
    about 0.1 s on configs/ab.yaml), the same with either cache."""
    import os
    import subprocess
    import sys
    import tempfile

    out = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            runs = []
            for _ in ("cold", "warm"):
                proc = subprocess.run([sys.executable, "-c", _COMPILE_CHILD, config], env=env, check=True,
                                      capture_output=True, text=True)
                runs.append(tuple(float(v) for v in proc.stdout.split()))
            out.append((*runs[0], *runs[1]))
    return out


def stat_kernels_lines(config, world, users, seqs, rounds: int) -> None:
    """The compiled checkpoint statistics against their NumPy path (``simulations.stat_kernels.COMPILED`` off) in
    this process: alternating rounds of :func:`breakdown` and of the plain loop, best of ``rounds`` per part (the
    same machine state for both, so the ratios hold on a noisy machine)."""
    from simulations import stat_kernels

    keys = ("daily checkpoints: ab", "per-batch looks", "daily checkpoints: interleaving")
    best: dict[bool, dict[str, float]] = {True: {}, False: {}}
    try:
        for _ in range(rounds):
            for compiled in (False, True):
                stat_kernels.COMPILED = compiled
                parts = breakdown(config, world, users, seqs)
                t0 = time.process_time()
                for i, s in enumerate(seqs):
                    plain_loop_replicate(config, world, users, s, i)
                parts["whole replicate (plain loop)"] = (time.process_time() - t0) / len(seqs)
                parts["these three parts"] = sum(parts[k] for k in keys)
                for k, v in parts.items():
                    best[compiled][k] = min(best[compiled].get(k, float("inf")), v)
    finally:
        stat_kernels.COMPILED = True
    print(f"checkpoint statistics, compiled (simulations.stat_kernels) vs NumPy path, same process, CPU ms per "
          f"replicate, best of {rounds} alternating rounds:")
    for k in (*keys, "these three parts", "whole replicate (plain loop)"):
        new, old = best[True][k], best[False][k]
        print(f"  {k:36s} NumPy {1e3 * old:7.1f}   compiled {1e3 * new:7.1f}   ratio {new / old:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "ab.yaml"))
    parser.add_argument("--replicates", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds (best of)")
    parser.add_argument("--breakdown", action="store_true", help="also print CPU time per part of a replicate")
    parser.add_argument("--compile-cost", action="store_true",
                        help="also measure the numba kernels' compile and cache-load cost in fresh processes")
    parser.add_argument("--stat-kernels", action="store_true",
                        help="also compare the compiled checkpoint statistics (simulations.stat_kernels) with their "
                             "NumPy path in this process, alternating rounds")
    args = parser.parse_args()
    cfg = load_config(args.config)
    world = build_world(cfg, world_seed(cfg.seed))
    users = UserModels.from_config(cfg.users)
    seqs = replicate_seeds(cfg.seed, args.replicates)

    def timed(fn):
        t0 = time.process_time()
        rows = [r for i, s in enumerate(seqs) for r in fn(cfg, world, users, s, i)]
        return time.process_time() - t0, rows

    timed(run_replicate)  # warm up
    best_simpy = best_plain = float("inf")
    for _ in range(args.rounds):
        t_simpy, rows_simpy = timed(run_replicate)
        t_plain, rows_plain = timed(plain_loop_replicate)
        best_simpy, best_plain = min(best_simpy, t_simpy), min(best_plain, t_plain)
    pd.testing.assert_frame_equal(pd.DataFrame(rows_simpy), pd.DataFrame(rows_plain))
    # SimPy's own cost: the same schedule of events with nothing to do in them
    empty = TrafficModel(cfg.traffic, cfg.users, world.frequency, np.random.default_rng(0))
    empty.batch = lambda hour, hours=1: None  # type: ignore[method-assign]
    t0 = time.process_time()
    for _ in range(50):
        run_traffic(empty, [], lambda day: None)
    t_events = (time.process_time() - t0) / 50
    n_designs = len(design_specs(cfg))
    batch = cfg.traffic.queries_per_day * cfg.traffic.batch_hours // 24  # expected impressions per batch
    clicks_rate, td_rate = kernel_rates(world, users, max(batch, 1000), repeat=5 * args.rounds)
    big_clicks, big_td = kernel_rates(world, users, 200_000, repeat=args.rounds)
    impressions = cfg.traffic.days * cfg.traffic.queries_per_day * n_designs  # expected, per replicate
    rate = impressions * args.replicates / best_simpy
    overhead = best_simpy / best_plain - 1
    print(f"config: {args.config} ({cfg.traffic.days} days, {cfg.traffic.queries_per_day} queries/day, "
          f"batch every {cfg.traffic.batch_hours} h = ~{batch} impressions, {n_designs} designs incl. A/A and null)")
    print(f"replicates timed: {args.replicates}, best of {args.rounds} rounds, one process (one core)")
    print("convention: impression-designs = expected impressions x designs (days x queries/day x designs)")
    print(f"SimPy-driven : {best_simpy / args.replicates:8.3f} s per replicate "
          f"= {rate / 1e6:6.2f} M impression-designs/s per core (target >= 3)")
    print(f"plain loop   : {best_plain / args.replicates:8.3f} s per replicate")
    print(f"ratio SimPy / plain loop: {best_simpy / best_plain:.3f}  (overhead {100 * overhead:+.1f}%; target < 5%)")
    print(f"SimPy events alone: {1e3 * t_events:.2f} ms per replicate = "
          f"{100 * t_events / (best_simpy / args.replicates):.2f}% of a replicate (target < 5%)")
    print(f"kernels on batches of {max(batch, 1000)} impressions of this world (same run):")
    print(f"  click sampling alone      : {clicks_rate / 1e6:6.2f} M impressions/s; "
          f"replicate / clicks = {rate / clicks_rate:.3f}")
    print(f"  team-draft interleave+outcome: {td_rate / 1e6:6.2f} M impressions/s; "
          f"replicate / team-draft = {rate / td_rate:.3f}")
    print(f"  on batches of 200000 (the kernels' large-batch rates): clicks {big_clicks / 1e6:.2f} M/s "
          f"(replicate / clicks = {rate / big_clicks:.3f}), team-draft {big_td / 1e6:.2f} M/s "
          f"(replicate / team-draft = {rate / big_td:.3f})")
    print("identical results (SimPy vs plain loop): yes")
    if args.compile_cost:
        costs = compile_cost(args.config, args.rounds)
        print(f"compiled kernels (numba), fresh processes, CPU s, best of {args.rounds}: import of simulations.kernels "
              f"{min(c[0] for c in costs):.2f} (cold cache) / {min(c[2] for c in costs):.2f} (warm); first replicate's "
              f"extra time (compiling, or loading from the cache) {min(c[1] for c in costs):.2f} (cold) / "
              f"{min(c[3] for c in costs):.2f} (warm)")
    if args.stat_kernels:
        stat_kernels_lines(cfg, world, users, seqs, args.rounds)
    if args.breakdown:
        parts = breakdown(cfg, world, users, seqs)
        total = sum(parts.values())
        print(f"breakdown (plain loop, CPU time per replicate, total {total:.3f} s):")
        for name, sec in sorted(parts.items(), key=lambda kv: -kv[1]):
            print(f"  {name:48s} {1e3 * sec:8.1f} ms  {100 * sec / total:5.1f}%")


if __name__ == "__main__":
    main()
