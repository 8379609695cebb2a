"""Reading a LETOR file (``onlineeval.io.read_letor``): lines decided on whole-line string operations
(``onlineeval.io.letor._fast_tokens``) against the per-token loop (``_tokens``, the reference) in the same run.

Writes a synthetic MSLR-like file (``--lines`` lines of ``--features`` dense features, ``qid:`` and a docid comment)
into a temporary folder and reads it alternately with the fast path on and off, ``--repeat`` times each (best kept),
without and with a score feature (``--score-feature 7``); both reads are checked to give the same tables.

    python benchmarks/bench_letor.py [--lines 200000] [--features 136] [--repeat 3]

Measured 2026-12-04 (2 cores; 200,000 lines of 136 features, 280 MB; --repeat 1): whole-line 4.2 s against the
per-token loop's 13.2 s (0.31); with a score feature 4.3 s against 16.5 s (0.26). The tree before (every line by a
per-token loop of its own, one pass per score feature) read that file in 10.4 s, 12.3 s with a score feature.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from _timing import fast_against_reference  # benchmarks/_timing.py (run as scripts from this folder)


def write(path: Path, lines: int, features: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    query = np.sort(rng.integers(0, max(1, lines // 100), lines))
    label = rng.integers(0, 5, lines)
    values = np.round(rng.random((lines, features)), 4)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(lines):
            feats = " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(values[i].tolist()))
            fh.write(f"{label[i]} qid:{query[i]} {feats} # docid = d{i}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=136)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import onlineeval.io.letor as letor

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "letor.txt"
        write(path, args.lines, args.features)
        size = path.stat().st_size / 1e6
        print(f"{args.lines:,} lines x {args.features} features ({size:.0f} MB), best of {args.repeat}:")
        for feature in (None, 7):
            best, got = fast_against_reference(
                letor, ["_fast_tokens"], lambda feature=feature: letor.read_letor(path, score_feature=feature),
                args.repeat, ("fast", "loop"))
            assert got["fast"].qrels.equals(got["loop"].qrels)
            assert (got["fast"].run is None) == (got["loop"].run is None)
            if got["fast"].run is not None:
                assert got["fast"].run.equals(got["loop"].run)
            what = "labels and qids" if feature is None else f"with score feature {feature}"
            print(f"  {what:<26} whole-line {best['fast']:.2f} s   per-token loop {best['loop']:.2f} s   "
                  f"ratio {best['fast'] / best['loop']:.2f}")


if __name__ == "__main__":
    main()
