"""The interleaving designs' Monte Carlo truth: the design's draw table and compiled batch step against the
interleaver's own draw and the click models' sampler, in the same run.

Run: ``python benchmarks/bench_truth.py [--config configs/ab.yaml] [--impressions 2000000] [--rounds 3]``. For every
two-ranker team-draft or balanced design of the config (whose batch step is compiled), its truth and its null user's
truth (:func:`simulations.truth_interleaving.interleaving_truth`) are computed with the table path
(``_table_step``) and with it declined (the interleaver's path), alternating round by round in this process (best
of the rounds); prints each time, their ratio, and checks that both give the same truth and SE to the bit. The first
round loads the compiled kernels; ``--rounds`` of 2 or more leaves that out of the best.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _timing import fast_against_reference

import simulations.truth_interleaving as ti
from simulations.config import config_from_mapping, load_config
from simulations.runner import world_seed
from simulations.users import UserModels
from simulations.world import build_world

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(REPO / "configs" / "ab.yaml"))
    ap.add_argument("--impressions", type=int, default=2_000_000, help="analysis.truth_impressions of each run")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    eff = load_config(args.config).effective()
    eff.setdefault("analysis", {})["truth_impressions"] = args.impressions
    config = config_from_mapping(eff, args.config)
    world = build_world(config, world_seed(config.seed))
    users = UserModels.from_config(config.users)
    designs = [d for d in config.designs if d.type == "interleaving" and d.method in ("team_draft", "balanced")
               and len(d.rankers) == 2]
    if not designs:
        raise SystemExit(f"{args.config}: no two-ranker team-draft or balanced design")
    print(f"config: {args.config}; {args.impressions:,} impressions per run, best of {args.rounds} rounds "
          "(wall clock, this process)")
    print(f"{'run':32s} {'table (s)':>10s} {'interleaver (s)':>16s} {'ratio':>7s}  same truth")
    for design in designs:
        for null in (False, True):
            def call() -> list:
                return ti.interleaving_truth(config, design, world, users, null)  # noqa: B023

            best, results = fast_against_reference(ti, ["_table_step"], call, args.rounds,
                                                    labels=("table", "interleaver"))
            same = [(t.value, t.se) for t in results["table"]] == [(t.value, t.se) for t in results["interleaver"]]
            label = f"{design.name} (null user)" if null else design.name
            print(f"{label:32s} {best['table']:10.2f} {best['interleaver']:16.2f} "
                  f"{best['table'] / best['interleaver']:7.2f}  {'yes' if same else 'NO'}")
            if not same:
                raise SystemExit("the two paths gave different truths")


if __name__ == "__main__":
    main()
