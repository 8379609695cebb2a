"""Whole-process time of ``onlineeval evaluate`` vs pytrec_eval's whole process, in one run.

The user feels the whole command: interpreter start, imports, parsing and evaluation.
This benchmark writes synthetic TREC files (``--queries`` x ``--docs``, 30% of the
retrieved documents judged with grades 0-3, scores rounded to 4 decimals so that ties
occur) into a temporary folder and times, as separate processes alternating A B A B ...:

* ours: ``python -m onlineeval.cli evaluate --qrels Q --run R --preset trec_eval
  --metrics ndcg_cut_10,map,recip_rank,P_10`` (the table goes to a pipe);
* pytrec_eval: a Python process that parses the same files with ``pytrec_eval.parse_qrel``
  / ``parse_run``, evaluates ``ndcg_cut.10, map, recip_rank, P.10`` and prints the means.

It prints the median wall time of each side and the medians of the pair-by-pair ratios
ours / pytrec_eval of wall time and of CPU time (user + system of the child process):
pairing keeps a ratio meaningful when the machine's speed drifts, and the CPU ratio is
the steadier one on a shared machine.
Targets (issue 9): at most 0.5 at 10k x 100 and at most 0.2 at 100k x 100.

    python benchmarks/bench_evaluate_process.py [--sizes 10000x100,100000x100] [--repeats 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PYTREC = """
import sys
import pytrec_eval
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map", "recip_rank", "P.10"})
res = ev.evaluate(run)
for m in ("ndcg_cut_10", "map", "recip_rank", "P_10"):
    print(m, sum(v[m] for v in res.values()) / len(res))
"""


def write_files(folder: Path, n_queries: int, n_docs: int, seed: int = 0) -> tuple[Path, Path]:
    """Synthetic qrels and run files (pandas' writer: 10M lines in about 10 s)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    qrels_path, run_path = folder / f"qrels_{n_queries}.txt", folder / f"run_{n_queries}.txt"
    q = pd.Series(np.repeat(np.arange(n_queries), n_docs)).astype(str).radd("q")
    d = pd.Series(np.tile(np.arange(n_docs), n_queries)).astype(str).radd("doc")
    judged = rng.random(len(q)) < 0.3
    grades = rng.integers(0, 4, size=len(q))
    pd.DataFrame({"q": q[judged], "it": 0, "d": d[judged], "g": grades[judged]}).to_csv(
        qrels_path, sep=" ", header=False, index=False
    )
    scores = rng.normal(size=len(q))
    pd.DataFrame({"q": q, "it": "Q0", "d": d, "r": 0, "s": scores, "t": "bench"}).to_csv(
        run_path, sep=" ", header=False, index=False, float_format="%.4f"
    )
    return qrels_path, run_path


def _time(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def bench(qrels: Path, run: Path, folder: Path, repeats: int) -> tuple[float, float, float, float]:
    """Median wall seconds of ours, of pytrec_eval, and the median pairwise wall and CPU ratios."""
    script = folder / "pytrec_whole.py"
    script.write_text(PYTREC)
    ours = [sys.executable, "-m", "onlineeval.cli", "evaluate", "--qrels", str(qrels), "--run", str(run),
            "--preset", "trec_eval", "--metrics", "ndcg_cut_10,map,recip_rank,P_10"]
    theirs = [sys.executable, str(script), str(qrels), str(run)]
    _time(ours), _time(theirs)  # warm-up: file cache, bytecode
    a, b = [], []
    for _ in range(repeats):
        a.append(_time(ours))
        b.append(_time(theirs))
    wall = [x[0] / y[0] for x, y in zip(a, b)]
    cpu = [x[1] / y[1] for x, y in zip(a, b)]
    return (statistics.median(x[0] for x in a), statistics.median(y[0] for y in b), statistics.median(wall),
            statistics.median(cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000x100,100000x100", help="queries x docs, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"{'size':>12}  {'ours s':>8}  {'pytrec_eval s':>13}  {'wall ratio':>10}  {'cpu ratio':>9}  target")
        for size in args.sizes.split(","):
            n_q, n_d = (int(x) for x in size.split("x"))
            qrels, run = write_files(folder, n_q, n_d)
            t_ours, t_theirs, wall, cpu = bench(qrels, run, folder, args.repeats)
            target = 0.5 if n_q <= 10_000 else 0.2
            print(f"{size:>12}  {t_ours:8.2f}  {t_theirs:13.2f}  {wall:10.2f}  {cpu:9.2f}  <= {target}")


if __name__ == "__main__":
    main()
