"""Write the qrels and the two TREC runs of ``configs/trec.yaml`` (a team's own production run A and candidate B).

    python examples/make_trec_example.py [OUTDIR]     # writes OUTDIR/qrels.txt, A.run, B.run
                                                      # (default: examples/trec_example, which git ignores)
    onlineeval evaluate --qrels OUTDIR/qrels.txt --run OUTDIR/A.run --run OUTDIR/B.run --preset trec_eval
    onlineeval simulate --config configs/trec.yaml

The set-up: 200 queries, each with 80 candidate documents whose true grades 0..3 are drawn with a
per-query share of relevant documents (a Beta(1, 6) draw, so a few queries have no relevant
candidate at all). Each run scores a candidate ``grade + noise * (0.7 * shared + 0.71 * own)`` Gaussian
noise, the shared part common to A and B (they make mostly the same errors), with noise 1.0 for A
and 0.9 for B, rounds the scores to two decimals (so runs have score ties, broken by trec_eval's
docno rule) and retrieves its top 50. The qrels are a pool, as at TREC: the top 25 of A and of an
older system C (noise 1.3; not shipped) are judged, and nothing else; B did not contribute, so
some of B's top 10 are unjudged (an evaluation counts them non-relevant). Everything is drawn
from numpy's ``default_rng(SEED)``, so the files are the same on every run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

SEED = 20261202
QUERIES, CANDIDATES, RETRIEVED, POOL_DEPTH = 200, 80, 50, 25
GRADE_SHARES = np.array([0.55, 0.3, 0.15])  # grades 1, 2, 3 among the relevant candidates
NOISE = {"A": 1.0, "B": 0.9, "C": 1.3}  # C: an older system that contributed to the pool only
SHARED = 0.7  # weight of the noise common to every system; own noise weight sqrt(1 - 0.7^2)
DEFAULT_OUT = Path(__file__).resolve().parent / "trec_example"


def _ranked(scores: np.ndarray, docnos: list[str]) -> list[int]:
    """Candidates by descending score, ties by descending docno (trec_eval's order)."""
    return sorted(range(len(docnos)), key=lambda c: (-scores[c], tuple(-ord(ch) for ch in docnos[c])))


def make(outdir: Path) -> dict[str, int]:
    """Write ``qrels.txt``, ``A.run`` and ``B.run`` into ``outdir``; return counts of what was written."""
    rng = np.random.default_rng(SEED)
    outdir.mkdir(parents=True, exist_ok=True)
    qrels_lines: list[str] = []
    run_lines: dict[str, list[str]] = {"A": [], "B": []}
    counts = {"queries": QUERIES, "judged": 0, "relevant": 0, "no_relevant_queries": 0,
              "unjudged_top10_A": 0, "unjudged_top10_B": 0, "tied_pairs_A": 0, "tied_pairs_B": 0}
    own = float(np.sqrt(1.0 - SHARED**2))
    for q in range(QUERIES):
        qid = f"q{q + 1:03d}"
        docnos = [f"D{q + 1:03d}-{c:03d}" for c in range(CANDIDATES)]
        share = rng.beta(1.0, 6.0)
        relevant = rng.random(CANDIDATES) < share
        grades = np.where(relevant, 1 + rng.choice(3, size=CANDIDATES, p=GRADE_SHARES), 0)
        shared = rng.standard_normal(CANDIDATES)
        order = {}
        for name, noise in NOISE.items():
            scores = np.round(grades + noise * (SHARED * shared + own * rng.standard_normal(CANDIDATES)), 2)
            order[name] = _ranked(scores, docnos)[:RETRIEVED]
            if name in run_lines:
                top = scores[order[name]]
                counts[f"tied_pairs_{name}"] += int(np.sum(top[1:] == top[:-1]))
                run_lines[name] += [f"{qid} Q0 {docnos[c]} {r + 1} {scores[c]:.2f} {name}"
                                    for r, c in enumerate(order[name])]
        pool = sorted(set(order["A"][:POOL_DEPTH]) | set(order["C"][:POOL_DEPTH]))
        qrels_lines += [f"{qid} 0 {docnos[c]} {grades[c]}" for c in pool]
        counts["judged"] += len(pool)
        counts["relevant"] += int(np.sum(grades[pool] > 0))
        counts["no_relevant_queries"] += int(not np.any(grades[pool] > 0))
        for name in run_lines:
            counts[f"unjudged_top10_{name}"] += len(set(order[name][:10]) - set(pool))
    (outdir / "qrels.txt").write_text("\n".join(qrels_lines) + "\n", encoding="utf-8")
    for name, lines in run_lines.items():
        (outdir / f"{name}.run").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", nargs="?", type=Path, default=DEFAULT_OUT,
                        help="folder to write qrels.txt, A.run and B.run into (default: examples/trec_example)")
    outdir = parser.parse_args(argv).outdir
    c = make(outdir)
    print(f"wrote {outdir / 'qrels.txt'}, {outdir / 'A.run'}, {outdir / 'B.run'}: {c['queries']} queries, "
          f"{c['judged']} judged documents ({c['relevant']} relevant; {c['no_relevant_queries']} queries "
          f"without one), unjudged in the top 10: A {c['unjudged_top10_A']}, B {c['unjudged_top10_B']}; "
          f"score ties between neighbours: A {c['tied_pairs_A']}, B {c['tied_pairs_B']}")


if __name__ == "__main__":
    main()
