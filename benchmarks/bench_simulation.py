"""Benchmark: the cost of SimPy in a simulation run, and replicate throughput.

Runs the same replicates of ``configs/ab.yaml`` twice in this process: once driven by
SimPy (:func:`simulations.traffic.run_traffic`, one event per batch plus a daily
monitor) and once by a plain Python loop over the same batches and checkpoints. Both
give identical numbers; the ratio of their times is the SimPy overhead (target: < 5%).

    python benchmarks/bench_simulation.py [--replicates 4] [--config configs/ab.yaml]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

import onlineeval.stats  # noqa: F401  (import cost outside the timings)
from simulations.config import load_config
from simulations.runner import (
    build_replicate,
    design_specs,
    replicate_rows,
    replicate_seeds,
    run_replicate,
    world_seed,
)
from simulations.traffic import TrafficModel, run_traffic
from simulations.users import UserModels
from simulations.world import build_world

REPO = Path(__file__).resolve().parents[1]


def plain_loop_replicate(config, world, users, seq, index):
    """The work of :func:`run_replicate` without SimPy: a for-loop over batches."""
    traffic, designs = build_replicate(config, world, users, seq)
    step = traffic.batch_hours
    for hour in range(0, traffic.days * 24, step):
        batch = traffic.batch(hour, step)
        for d in designs:
            d.process(batch)
        if (hour + step) % 24 == 0:
            for d in designs:
                d.checkpoint((hour + step) // 24)
    return replicate_rows(designs, index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "ab.yaml"))
    parser.add_argument("--replicates", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds (best of)")
    args = parser.parse_args()
    cfg = load_config(args.config)
    world = build_world(cfg, world_seed(cfg.seed))
    users = UserModels.from_config(cfg.users)
    seqs = replicate_seeds(cfg.seed, args.replicates)

    def timed(fn):
        t0 = time.perf_counter()
        rows = [r for i, s in enumerate(seqs) for r in fn(cfg, world, users, s, i)]
        return time.perf_counter() - t0, rows

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
    t0 = time.perf_counter()
    for _ in range(50):
        run_traffic(empty, [], lambda day: None)
    t_events = (time.perf_counter() - t0) / 50
    impressions = cfg.traffic.days * cfg.traffic.queries_per_day * len(design_specs(cfg))
    overhead = best_simpy / best_plain - 1
    print(f"config: {args.config} ({cfg.traffic.days} days, {cfg.traffic.queries_per_day} queries/day, "
          f"batch every {cfg.traffic.batch_hours} h, {len(design_specs(cfg))} designs incl. A/A)")
    print(f"replicates timed: {args.replicates}, best of {args.rounds} rounds")
    print(f"SimPy-driven : {best_simpy / args.replicates:8.3f} s per replicate "
          f"({impressions * args.replicates / best_simpy:,.0f} impression-designs/s)")
    print(f"plain loop   : {best_plain / args.replicates:8.3f} s per replicate")
    print(f"ratio SimPy / plain loop: {best_simpy / best_plain:.3f}  (overhead {100 * overhead:+.1f}%; target < 5%)")
    print(f"SimPy events alone: {1e3 * t_events:.2f} ms per replicate = "
          f"{100 * t_events / (best_simpy / args.replicates):.2f}% of a replicate (target < 5%)")
    print("identical results: yes")


if __name__ == "__main__":
    main()
