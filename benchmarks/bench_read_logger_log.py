"""Reading a log that names its logging policy (``logger`` lines) against the same log with written propensities.

``onlineeval estimate`` computes a ``logger`` log's propensities itself (and checks every target's support against
the policy); both are read by pyarrow's column reader (the logger log with its loggers blanked and decoded once per
query). Both logs hold the same
impressions: ``--lines`` top-10 lists drawn from a Plackett-Luce logger (temperature 1) over ``--candidates``
scored candidates of ``--queries`` queries, clicks at random; the written log carries the propensities read from
the logger log (``repr`` round-trips them, so both reads give the same arrays: checked; all three forms: above
``dp_max_states`` the item marginals are the exponential race's quadrature, exact, where before 09b96b9 they were
Monte Carlo estimates, withheld at the default sizes here because one of a shown document was 0). Each read runs in
its own subprocess
(``read_logged(path, policies=simulations.policies)`` after the imports), so one's peak cannot hide the other's;
printed per log: the read's wall seconds (median of ``--repeat``) and the process's peak resident set size
(``VmHWM``: ``ru_maxrss`` would keep this process's own peak across fork and exec), and the ratios logger /
written, measured in the same run.

    python benchmarks/bench_read_logger_log.py [--lines 100000] [--candidates 20] [--queries 200] [--repeat 3]

Measured 2026-12-04 (2 cores, idle; defaults; 19c5ad0): logger 4.5 s and 601 MB, written 0.61 s and 357 MB
(list and prefix forms only). After 09b96b9 (the item form in both): logger 4.99 s and 600 MB, written 1.20 s and
415 MB (4.15x, 1.45x). After the logger's text is decoded once per query (LoggerTexts): logger 3.61 s and 603 MB,
written 1.13 s and 419 MB (3.18x). After the fast reader takes logger logs too (each line's logger blanked for
pyarrow and decoded once per query, onlineeval.io.logged_scan): logger 1.53-1.72 s and 575-581 MB, written
0.71-0.77 s (2.2x); with ``--candidates 100 --queries 1000`` logger 7.95 s and 1,048 MB, written 0.81 s, most of
the difference the logger's item marginals (Plackett-Luce quadrature, 4.1 s for the 1,000 queries). With the
loggers cut out for pyarrow instead of blanked with spaces: logger 1.59-1.81 s and 536-539 MB, written 0.82-1.02 s
(1.8-1.9x; the machine slower than in the line before).
A logger log's whole ``estimate`` of ips, snips, rips took 9.96 s and 813 MB before a593f08 / 6fc06ab / 19c5ad0,
5.8 s and 628 MB after.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = """
import json, sys, time
import simulations.policies as policies
from onlineeval.io.logged import read_logged
import numpy as np
t = time.perf_counter()
lg = read_logged(sys.argv[1], policies=policies)
wall = time.perf_counter() - t
d = lg.data
item = -1.0 if d.p_item is None else float(np.sum(d.p_item))
digest = [float(np.sum(d.p_list)), float(np.sum(d.p_prefix)), item, int(d.n)]
# VmHWM, not ru_maxrss: the latter keeps the parent's peak across fork and exec
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps({"wall": wall, "rss_mb": hwm / 1024,
                  "digest": digest}))
"""


def write_logs(folder: Path, lines: int, candidates: int, queries: int, seed: int = 1) -> tuple[Path, Path]:
    """The logger log and the same impressions with the propensities the reader computes from it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import simulations.policies as policies
    from onlineeval.io.logged import read_logged

    rng = np.random.default_rng(seed)
    loggers = [{"policy": "plackett_luce", "temperature": 1.0,
                "scores": {f"d{j}": float(s) for j, s in enumerate(rng.normal(size=candidates))}}
               for _ in range(queries)]
    scores = np.array([list(lg["scores"].values()) for lg in loggers])
    records = []
    for _ in range(lines):
        q = int(rng.integers(queries))
        # a Plackett-Luce draw (Gumbel top-k), so the shown lists are the logger's typical ones
        shown = [f"d{j}" for j in np.argsort(-(scores[q] + rng.gumbel(size=candidates)))[:10]]
        clicks = [d for d in shown if rng.random() < 0.1]
        records.append({"query": f"q{q}", "user": f"u{int(rng.integers(lines // 20))}", "shown": shown,
                        "clicks": clicks, "logger": loggers[q]})
    logger_path = folder / "logger.jsonl"
    logger_path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    d = read_logged(logger_path, policies=policies).data
    written_path = folder / "written.jsonl"
    with written_path.open("w", encoding="utf-8") as fh:
        for i, r in enumerate(records):
            props = {"list": float(d.p_list[i]), "prefix": d.p_prefix[i].tolist()}
            if d.p_item is not None:  # withheld where a Monte Carlo item marginal of a shown document is 0
                props["item"] = d.p_item[i].tolist()
            fh.write(json.dumps({k: v for k, v in r.items() if k != "logger"} | {"propensities": props}) + "\n")
    return logger_path, written_path


def measure(path: Path, repeat: int) -> dict[str, object]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"wall": statistics.median(r["wall"] for r in runs), "rss_mb": max(r["rss_mb"] for r in runs),
            "digest": runs[0]["digest"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        logger_path, written_path = write_logs(Path(tmp), args.lines, args.candidates, args.queries)
        sizes = {p.name: p.stat().st_size / 2 ** 20 for p in (logger_path, written_path)}
        got = {"logger": measure(logger_path, args.repeat), "written": measure(written_path, args.repeat)}
    same = np.allclose(got["logger"]["digest"], got["written"]["digest"], rtol=1e-12, atol=0)
    print(f"{args.lines} lines, {args.candidates} candidates, {args.queries} queries, top 10; read_logged in a "
          f"subprocess, median of {args.repeat}")
    for name, r in got.items():
        print(f"  {name:8s} {sizes[name + '.jsonl']:7.1f} MB  read {r['wall']:6.2f} s  peak RSS {r['rss_mb']:8.1f} MB")
    lg, wr = got["logger"], got["written"]
    print(f"  ratio logger / written: time {lg['wall'] / wr['wall']:.2f}x, peak RSS {lg['rss_mb'] / wr['rss_mb']:.2f}x"
          f"; same propensities: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
