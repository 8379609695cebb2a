"""Write the log and runs of the README's ``onlineeval estimate`` example, and print their exact values.

    python examples/make_logged_example.py [OUTDIR]     # writes OUTDIR/logged.jsonl, A.run, B.run (default: .)
    cd OUTDIR && onlineeval estimate --log logged.jsonl --target B.run --baseline A.run \\
        --estimator ips,snips,rips,iips,pbm_ips

The set-up (the README's): 50 queries of 20 candidates each; the production ranker A orders them
and an epsilon-greedy logging policy shows, for 20,000 impressions (a query drawn uniformly, a
user among 3,000), A's top 4 with probability 0.7 and otherwise a uniformly random ordered 4 of
A's top 8. Clicks follow a position-based model: P(click at slot j) = theta_j * a_qd with
examination theta = (1, 0.6, 0.4, 0.3) and each document's attractiveness a_qd. The candidate B
ranks A's top 8 by attractiveness (so every list B shows can be logged); A puts the most
attractive of them low. Each line carries all three propensity forms of what was shown, exactly:

- list:   0.7 * [shown == A's top 4] + 0.3 / (8 * 7 * 6 * 5)
- prefix: 0.7 * [top j+1 == A's top j+1] + 0.3 / (8 * 7 * ... * (8 - j))
- item:   0.7 * [slot j shows A's j-th] + 0.3 / 8

so the largest list weight is 1 / (0.3 / 1680) = 5600 and the largest item weight 1 / (0.3 / 8) = 26.67.
The exact values V(R) = mean over queries of sum_j theta_j a_{q, R_j} (queries uniform, as logged)
are printed; everything is drawn from numpy's ``default_rng(SEED)``, so the files are the same on
every run (tests/test_estimate_cli.py runs this and compares the command's output with the README).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

SEED = 20261202
QUERIES, CANDIDATES, TOP, SLOTS = 50, 20, 8, 4
IMPRESSIONS, USERS, EPSILON = 20_000, 3_000, 0.3
THETA = np.array([1.0, 0.6, 0.4, 0.3])


def make(outdir: Path) -> dict[str, float]:
    """Write ``logged.jsonl``, ``A.run`` and ``B.run`` into ``outdir``; return the exact values of A and B."""
    rng = np.random.default_rng(SEED)
    outdir.mkdir(parents=True, exist_ok=True)
    attract = rng.uniform(0.02, 0.6, size=(QUERIES, CANDIDATES))
    docs = [[f"q{q:02d}d{c:02d}" for c in range(CANDIDATES)] for q in range(QUERIES)]
    a_order, b_order = [], []
    for q in range(QUERIES):
        top8 = rng.choice(CANDIDATES, size=TOP, replace=False)  # A's top 8 (the logger's candidates)
        by_attr = top8[np.argsort(-attract[q, top8], kind="stable")]
        # A: the 4 least attractive of them first, then the 4 most attractive, each in a random order
        a_top = np.concatenate([by_attr[4:][rng.permutation(4)], by_attr[:4][rng.permutation(4)]])
        rest = np.setdiff1d(np.arange(CANDIDATES), top8)
        rest = rest[rng.permutation(rest.size)]
        a_order.append(np.concatenate([a_top, rest]))
        b_order.append(np.concatenate([by_attr, rest]))
    for name, orders in (("A", a_order), ("B", b_order)):
        lines = [f"q{q:02d} Q0 {docs[q][c]} {r + 1} {CANDIDATES - r} {name}"
                 for q in range(QUERIES) for r, c in enumerate(orders[q])]
        (outdir / f"{name}.run").write_text("\n".join(lines) + "\n", encoding="utf-8")

    perms = [math.perm(TOP, j + 1) for j in range(SLOTS)]
    out = []
    for _ in range(IMPRESSIONS):
        q = int(rng.integers(QUERIES))
        det = a_order[q][:SLOTS]
        shown = det if rng.random() >= EPSILON else rng.permutation(a_order[q][:TOP])[:SLOTS]
        same = shown == det
        prefix_same = np.logical_and.accumulate(same)
        prefix = [(1 - EPSILON) * bool(prefix_same[j]) + EPSILON / perms[j] for j in range(SLOTS)]
        item = [(1 - EPSILON) * bool(same[j]) + EPSILON / TOP for j in range(SLOTS)]
        clicks = (rng.random(SLOTS) < THETA * attract[q, shown]).astype(int).tolist()
        out.append(json.dumps({
            "query": f"q{q:02d}", "user": f"u{int(rng.integers(USERS)):04d}",
            "shown": [docs[q][c] for c in shown], "clicks": clicks,
            "propensities": {"list": prefix[-1], "prefix": prefix, "item": item},
        }))
    (outdir / "logged.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
    return {name: float(np.mean([THETA @ attract[q, orders[q][:SLOTS]] for q in range(QUERIES)]))
            for name, orders in (("A", a_order), ("B", b_order))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", nargs="?", type=Path, default=Path("."),
                        help="folder to write logged.jsonl, A.run and B.run into (default: the current folder)")
    outdir = parser.parse_args(argv).outdir
    truth = make(outdir)
    print(f"wrote {outdir / 'logged.jsonl'}, {outdir / 'A.run'}, {outdir / 'B.run'}; exact clicks per query: "
          f"A {truth['A']:.4f}, B {truth['B']:.4f}, B - A {truth['B'] - truth['A']:+.4f}")


if __name__ == "__main__":
    main()
