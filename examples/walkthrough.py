"""Walkthrough of the Python API: evaluate two TREC runs offline, simulate the same two runs online,
read the shrinkage, plot power versus days.

    python examples/walkthrough.py                       # configs/trec.yaml with 20 replicates
    python examples/walkthrough.py --config my_trec.yaml --replicates 100 --out results/walk --set traffic.days=7

The config must be a ``collection: {type: trec}`` one: its qrels and runs A and B are what step 1
evaluates and step 2 simulates. With the default config, the files are written first if missing
(``python examples/make_trec_example.py``: 200 queries, grades 0..3, pooled qrels). Step 1 evaluates
the runs offline under trec_eval's conventions and compares them paired per query, then once more
under the conventions of ``simulate``'s offline metric: ``evaluate --preset trec_eval`` uses
trec_eval's linear gain g, ``simulate`` the metric's default exponential gain 2^g - 1 (and shows each
run's top ``rankers.depth``; a judged query a run does not answer scores 0), so their "offline deltas"
differ for the same runs until evaluate is given ``--gain exponential --depth 10 --missing zero``;
then they are equal. Step 2 simulates the online experiment of the config in memory (nothing is written
but the plots). Step 3 reads how much of the offline gain survives online (the shrinkage), step 4 draws
power versus days and the shrinkage. Every number comes from the same code as the CLI
(``onlineeval evaluate``, ``onlineeval simulate``).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import yaml

import onlineeval
from simulations.config import TrecCollection, load_config

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "configs" / "trec.yaml"
EXAMPLE = REPO / "examples" / "trec_example"


def make_example_files(outdir: Path = EXAMPLE) -> None:
    """Write the default config's qrels and runs (examples/make_trec_example.py)."""
    spec = importlib.util.spec_from_file_location("make_trec_example", REPO / "examples" / "make_trec_example.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main([str(outdir)])


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="simulation config with a trec collection")
    parser.add_argument("--replicates", type=int, default=20, help="simulated experiments")
    parser.add_argument("--out", default="walkthrough", help="folder of the plots")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, as onlineeval simulate --set (repeatable)")
    args = parser.parse_args(argv)
    if Path(args.config).resolve() == DEFAULT_CONFIG and not (EXAMPLE / "qrels.txt").is_file():
        make_example_files()
    sets = {key: yaml.safe_load(value) for key, value in (s.split("=", 1) for s in args.set)}
    config = load_config(args.config, {**sets, "replicates": args.replicates})
    coll = config.collection
    if not isinstance(coll, TrecCollection):
        parser.error(f"{args.config}: the walkthrough simulates the runs it evaluates: it needs collection.type trec")
    runs = {name: coll.runs[name] for name in ("A", "B")}
    metric = config.offline_metric

    # 1. offline: the two runs, nDCG@10 and AP under trec_eval's conventions, paired comparison
    offline = onlineeval.evaluate(coll.qrels, runs, f"{metric},AP", preset="trec_eval", baseline="A",
                                  permutations=2000, bootstrap=2000)
    print("conventions:", offline.conventions.describe())
    print(offline.aggregate[["system", "metric", "value", "n"]].to_string(index=False))
    diff = offline.comparison("B", metric)
    print(f"B - A {metric}: {diff.mean_diff:+.4f} (BCa CI [{diff.ci_bca_low:+.4f}, {diff.ci_bca_high:+.4f}], "
          f"randomisation p = {diff.p_randomization:.4f}, wins/losses/ties {diff.wins}/{diff.losses}/{diff.ties})")
    # the same runs under the conventions of simulate's offline metric (exponential gain, the shown top
    # rankers.depth, the collection's tie rule, a judged query missing from a run scores 0)
    as_simulated = onlineeval.evaluate(coll.qrels, runs, metric, preset="trec_eval", gain="exponential",
                                       ties=coll.ties, depth=config.rankers.depth, missing="zero", baseline="A",
                                       permutations=2000, bootstrap=2000)
    delta_sim_conv = as_simulated.mean("B", metric) - as_simulated.mean("A", metric)

    # 2. online: the same runs simulated, in memory, fewer replicates than the config asks for
    sim = onlineeval.simulate(config)
    off = sim.summary["offline"]
    print(f"simulate's offline {off['metric']} (gain: {off['conventions']['gain']}): A {off['A']['uniform']:.4f}, "
          f"B {off['B']['uniform']:.4f}, B - A {off['delta']['uniform']:+.4f} uniform over queries, "
          f"{off['delta']['weighted']:+.4f} weighted by query frequency")
    print(f"offline delta of the same runs: evaluate --preset trec_eval (gain {offline.conventions.gain}) "
          f"{diff.mean_diff:+.4f}; with --gain exponential --depth {config.rankers.depth} --missing zero "
          f"(simulate's conventions) {delta_sim_conv:+.4f}, simulate's uniform delta {off['delta']['uniform']:+.4f}")
    designs = sim.designs()
    print(designs[["design", "metric", "true_effect", "power", "analytic_power", "aa_false_positive_rate"]]
          .to_string(index=False))

    # 3. the shrinkage: online relative improvement / offline relative gain (A/B metrics)
    print(sim.shrinkage.to_string(index=False))

    # 4. power versus days, simulated and analytic
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sim.power_figure().savefig(out / "power_vs_days.png", dpi=100)
    sim.shrinkage_figure().savefig(out / "shrinkage.png", dpi=100)  # offline gain next to the online effects
    print(f"plots: {out / 'power_vs_days.png'}, {out / 'shrinkage.png'}")
    return {"offline": offline, "as_simulated": as_simulated, "simulation": sim,
            "plot": out / "power_vs_days.png", "shrinkage": out / "shrinkage.png"}


if __name__ == "__main__":
    main()
