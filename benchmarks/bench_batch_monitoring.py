"""Cost of per-batch monitoring: configs/ab.yaml's designs with daily looks vs a look after every batch.

Run: ``python benchmarks/bench_batch_monitoring.py [--replicates 6] [--rounds 2]``. Runs the
bundled config's replicates in one process with every design (and its A/A variant) monitored
daily, then with ``analysis.monitoring: batch`` on the A/B and interleaving designs (a look after
every ``traffic.batch_hours``-hour batch: 56 looks instead of 14), alternating the two so both
see the same machine load, and prints the time of each and their ratio (best of the rounds).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from simulations.config import config_from_mapping, load_config
from simulations.job import simulate

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "ab.yaml"


def config(monitoring: str, replicates: int):
    eff = load_config(CONFIG).effective()
    eff["replicates"] = replicates
    for d in eff["designs"]:
        if d["type"] in ("ab", "interleaving"):
            an = dict(d.get("analysis") or {})
            an["monitoring"] = monitoring
            an.setdefault("sequential", "msprt")
            d["analysis"] = an
    return config_from_mapping(eff)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    best = {"daily": float("inf"), "batch": float("inf")}
    for _ in range(args.rounds):
        for monitoring in ("daily", "batch"):
            cfg = config(monitoring, args.replicates)
            t0 = time.perf_counter()
            simulate(cfg, workers=1)
            best[monitoring] = min(best[monitoring], time.perf_counter() - t0)
    print(f"configs/ab.yaml, {args.replicates} replicates, 1 worker, best of {args.rounds}:")
    print(f"  daily looks      {best['daily']:8.2f} s")
    print(f"  per-batch looks  {best['batch']:8.2f} s   ratio {best['batch'] / best['daily']:.2f}x")


if __name__ == "__main__":
    main()
