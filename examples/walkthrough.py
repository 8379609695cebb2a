"""Walkthrough of the Python API: evaluate two runs offline, simulate them online, read the
shrinkage, plot power versus days.

    python examples/walkthrough.py                       # configs/ab.yaml with 20 replicates
    python examples/walkthrough.py --config my.yaml --replicates 100 --out results/walk

Step 1 evaluates two rankers offline on qrels given as pandas DataFrames (ir_measures'
columns; a dict of dicts or TREC files work the same way) and compares them paired per
query. Step 2 simulates the online experiment of a config in memory (nothing is written
but the plot). Step 3 reads how much of the offline gain survives online (the shrinkage),
step 4 draws power versus days and the shrinkage. Every number comes from the same code as the CLI
(``onlineeval evaluate``, ``onlineeval simulate``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

import onlineeval

REPO = Path(__file__).resolve().parents[1]


def offline_data(seed: int = 7, n_queries: int = 60, n_docs: int = 20) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Qrels and two runs as ir_measures-style frames: B's scores are less noisy than A's."""
    rng = np.random.default_rng(seed)
    q = np.repeat([f"q{i}" for i in range(n_queries)], n_docs)
    d = np.tile([f"d{j}" for j in range(n_docs)], n_queries)
    grade = rng.choice(5, size=q.size, p=[0.6, 0.22, 0.11, 0.05, 0.02])
    qrels = pd.DataFrame({"query_id": q, "doc_id": d, "relevance": grade})
    shared = rng.standard_normal(q.size)
    runs = {name: pd.DataFrame({"query_id": q, "doc_id": d, "score": grade + noise * shared
                                + 0.5 * rng.standard_normal(q.size)})
            for name, noise in (("A", 1.2), ("B", 0.9))}
    return qrels, runs


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "configs" / "ab.yaml"), help="simulation config (YAML)")
    parser.add_argument("--replicates", type=int, default=20, help="simulated experiments")
    parser.add_argument("--out", default="walkthrough", help="folder of the plot")
    args = parser.parse_args(argv)

    # 1. offline: two runs, nDCG@10 and AP under trec_eval's conventions, paired comparison
    qrels, runs = offline_data()
    offline = onlineeval.evaluate(qrels, runs, "nDCG@10,AP", preset="trec_eval", baseline="A",
                                  permutations=2000, bootstrap=2000)
    print("conventions:", offline.conventions.describe())
    print(offline.aggregate[["system", "metric", "value", "n"]].to_string(index=False))
    diff = offline.comparison("B", "nDCG@10")
    print(f"B - A nDCG@10: {diff.mean_diff:+.4f} (BCa CI [{diff.ci_bca_low:+.4f}, {diff.ci_bca_high:+.4f}], "
          f"randomisation p = {diff.p_randomization:.4f}, wins/losses/ties {diff.wins}/{diff.losses}/{diff.ties})")

    # 2. online: the config's simulation, in memory, fewer replicates than the config asks for
    sim = onlineeval.simulate(args.config, replicates=args.replicates)
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
    return {"offline": offline, "simulation": sim, "plot": out / "power_vs_days.png", "shrinkage": out / "shrinkage.png"}


if __name__ == "__main__":
    main()
