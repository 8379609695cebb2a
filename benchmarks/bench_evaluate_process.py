"""Whole-process time of ``onlineeval evaluate`` vs pytrec_eval's whole process, in one run.

The user feels the whole command: interpreter start, imports, parsing and evaluation.
This benchmark writes synthetic TREC files (``--queries`` x ``--docs``, 30% of the
retrieved documents judged with grades 0-3, scores rounded to 4 decimals so that ties
occur) into a temporary folder and times, as separate processes alternating A B A B ...:

* ours: ``python -m onlineeval.cli evaluate --qrels Q --run R --preset trec_eval
  --metrics ndcg_cut_10,map,recip_rank,P_10`` (the table goes to a pipe);
* pytrec_eval: a Python process that parses the same files with ``pytrec_eval.parse_qrel``
  / ``parse_run``, evaluates ``ndcg_cut.10, map, recip_rank, P.10`` and prints the means.

Both commands' standard output goes to a pipe that is read to its end. Both children run
with Python's bytecode cache in a temporary folder (``PYTHONPYCACHEPREFIX``, filled by one
warm-up run of each side; ``PYTHONDONTWRITEBYTECODE`` removed from their environment), as
on an installed package, whose modules are compiled once at install time; without it
(``--no-bytecode-cache``) a process compiles every module of the package it imports,
about 0.2 s for ``evaluate``'s 27 modules. It prints the median and best (smallest) wall
time of each side and the median and best of the pair-by-pair ratios ours / pytrec_eval
of wall time and of CPU time (user + system of the child process): pairing keeps a ratio
meaningful when the machine's speed drifts, and the CPU ratio is the steadier one on a
shared machine. Below the table: each side's median CPU seconds and peak resident memory
(the files are written by a child process, so that this process stays small: Linux counts
a child's size before its ``exec``, this process's copy, in its peak).
The load average before and after is printed with the table.
Targets (issue 9): at most 0.5 at 10k x 100 and at most 0.2 at 100k x 100.

    python benchmarks/bench_evaluate_process.py [--sizes 10000x100,100000x100] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
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


def paths(folder: Path, n_queries: int) -> tuple[Path, Path]:
    """Where :func:`write_files` writes the qrels and the run."""
    return folder / f"qrels_{n_queries}.txt", folder / f"run_{n_queries}.txt"


def write_files(folder: Path, n_queries: int, n_docs: int, seed: int = 0) -> tuple[Path, Path]:
    """Synthetic qrels and run files (pandas' writer: 10M lines in about 10 s)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    qrels_path, run_path = paths(folder, n_queries)
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


def _time(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Wall and CPU (user + system) seconds and peak memory (MB, resident) of one run of
    ``cmd``, whose standard output is read to its end through a pipe."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
        assert child.stdout is not None
        while child.stdout.read(1 << 16):
            pass
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)  # (reaped here: Popen must not wait again)
        child.stdout.close()
        if child.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)} failed:\n{err.read().decode()[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # (Linux: kB)


def bench(qrels: Path, run: Path, folder: Path, repeats: int, env: dict[str, str] | None) -> dict[str, list[float]]:
    """Wall seconds of ours and of pytrec_eval, and the pairwise wall and CPU ratios, per repeat."""
    script = folder / "pytrec_whole.py"
    script.write_text(PYTREC)
    ours = [sys.executable, "-m", "onlineeval.cli", "evaluate", "--qrels", str(qrels), "--run", str(run),
            "--preset", "trec_eval", "--metrics", "ndcg_cut_10,map,recip_rank,P_10"]
    theirs = [sys.executable, str(script), str(qrels), str(run)]
    _time(ours, env), _time(theirs, env)  # warm-up: file cache, bytecode
    a, b = [], []
    for _ in range(repeats):
        a.append(_time(ours, env))
        b.append(_time(theirs, env))
    return {
        "ours": [x[0] for x in a],
        "theirs": [y[0] for y in b],
        "wall": [x[0] / y[0] for x, y in zip(a, b)],
        "cpu": [x[1] / y[1] for x, y in zip(a, b)],
        "ours_cpu": [x[1] for x in a],
        "theirs_cpu": [y[1] for y in b],
        "ours_mb": [x[2] for x in a],
        "theirs_mb": [y[2] for y in b],
    }


def main() -> None:
    if sys.argv[1:2] == ["--write"]:  # (internal: write_files in a process of its own)
        write_files(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000x100,100000x100", help="queries x docs, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-bytecode-cache", action="store_true", help="children compile every module they import")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = None
        if not args.no_bytecode_cache:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        print(f"bytecode cache: {'no' if env is None else 'yes'}; repeats: {args.repeats}; "
              f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'size':>12}  {'ours s':>13}  {'pytrec_eval s':>13}  {'wall ratio':>11}  {'cpu ratio':>11}  target")
        print(f"{'':>12}  {'median best':>13}  {'median best':>13}  {'median best':>11}  {'median best':>11}")
        extra: list[str] = []
        for size in args.sizes.split(","):
            n_q, n_d = (int(x) for x in size.split("x"))
            # written by a child process: this one stays small, so that the children's peak
            # memory (which on Linux includes this process's size when it forked them) is theirs
            subprocess.run([sys.executable, __file__, "--write", str(folder), str(n_q), str(n_d)], check=True)
            qrels, run = paths(folder, n_q)
            got = bench(qrels, run, folder, args.repeats, env)
            cells = [f"{statistics.median(got[k]):{w}.2f} {min(got[k]):{w}.2f}" for k, w in
                     (("ours", 6), ("theirs", 6), ("wall", 5), ("cpu", 5))]
            target = 0.5 if n_q <= 10_000 else 0.2
            print(f"{size:>12}  {cells[0]:>13}  {cells[1]:>13}  {cells[2]:>11}  {cells[3]:>11}  <= {target}")
            extra.append(
                f"{size:>12}  CPU s (median) ours {statistics.median(got['ours_cpu']):.2f}, pytrec_eval "
                f"{statistics.median(got['theirs_cpu']):.2f}; peak memory MB (median) ours "
                f"{statistics.median(got['ours_mb']):.0f}, pytrec_eval {statistics.median(got['theirs_mb']):.0f}"
            )
        print("\n".join(extra))
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
