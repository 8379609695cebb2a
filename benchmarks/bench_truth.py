"""The interleaving designs' Monte Carlo truth: the design's draw table and compiled batch step against the
interleaver's own draw and the click models' sampler, in the same run.

Run: ``python benchmarks/bench_truth.py [--config configs/ab.yaml] [--impressions 2000000] [--rounds 3]``. For every
two-ranker team-draft or balanced design of the config (whose batch step is compiled), its truth and its null user's
truth (:func:`simulations.truth_interleaving.interleaving_truth`) are computed with the table path
(``_table_step``) and with it declined (the interleaver's path), alternating round by round in this process (best
of the rounds); prints each time, their ratio, and checks that both give the same truth and SE to the bit. The first
round loads the compiled kernels; ``--rounds`` of 2 or more leaves that out of the best. Then each design's exact
truth (:func:`simulations.truth_interleaving_exact.exact_interleaving_truth`, what the simulator takes for its
preferences) and exact null-user Delta (:func:`simulations.truth_null_exact.exact_null_truth`) against the table
path's Monte Carlo: times (the exact parts' per-process cache cleared every round), ratio, and the Monte Carlo's
distance from it in its SEs.
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
    # the preferences' exact truth (what compute_truth takes for these designs under grade-chain click models)
    # against the table path's Monte Carlo of the same impressions as above
    import time

    import simulations.truth_interleaving_exact as tie
    from simulations.truth_null_exact import exact_null_truth

    print(f"\n{'exact truth':32s} {'exact (s)':>10s} {'Monte Carlo (s)':>16s} {'ratio':>7s}  "
          "exact, Monte Carlo +- SE (z)")
    for design in designs:
        for null in (False, True):
            label = f"{design.name} (null user)" if null else design.name
            times: dict[str, list[float]] = {"exact": [], "mc": []}
            for _ in range(args.rounds):
                tie._PARTS.clear()  # the parts are cached per process: every round computes them
                t0 = time.perf_counter()
                exact = (exact_null_truth if null else tie.exact_interleaving_truth)(config, design, world, users)
                t1 = time.perf_counter()
                (mc,) = ti.interleaving_truth(config, design, world, users, null)
                times["exact"].append(t1 - t0)
                times["mc"].append(time.perf_counter() - t1)
            if exact is None:
                print(f"{label:32s} (no exact truth: a click model without grade chains or UBM, no prefix credit, or a "
                      "list too long for the null's patterns)")
                continue
            (ex,) = exact
            z = (mc.value - ex.value) / mc.se if mc.se > 0 else float("nan")
            print(f"{label:32s} {min(times['exact']):10.2f} {min(times['mc']):16.2f} "
                  f"{min(times['exact']) / min(times['mc']):7.2f}  {ex.value:+.6g}, {mc.value:+.6g} +- {mc.se:.2g} "
                  f"({z:+.1f})")

if __name__ == "__main__":
    main()
