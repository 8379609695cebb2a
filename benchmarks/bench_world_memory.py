"""Peak memory of building a synthetic world (``simulations.world.build_world``).

Each measurement runs in its own subprocess (so one's peak cannot hide the other's) on the
bundled ``configs/ab.yaml`` with the collection enlarged to ``--queries`` x ``--candidates``
(default 200k x 100, the size issue 12 quotes: 1.4 GB before). Two paths, in the same run:

- ``current``: :func:`simulations.world.build_world` as it is (noise, scores and sorts, and
  the offline metrics, made a chunk of queries at a time; float32 scores kept);
- ``dense``: the former set-up, kept here as the baseline: every ranker's ``(Q, m)`` float64
  noise, shared noise and scores at once, then :func:`simulations.world._finish` with the
  offline metric of all queries in one call per ranker.

Both must give bit-identical grades, rankings, scores, frequencies and per-query offline
metrics (a SHA-256 digest of the arrays is compared). Printed per path: the peak of
numpy/Python allocations during the set-up (``tracemalloc``, which numpy reports to), and
the process's peak resident set size (``resource.getrusage``, ``ru_maxrss``: includes the
interpreter and imports, measured before the set-up too), and the set-up's wall and CPU
seconds (slowed by tracemalloc; noisy on a shared machine). Target: current peak at most a
third of the dense one.

    python benchmarks/bench_world_memory.py [--queries 200000] [--candidates 100]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def dense_offline(metric, labels, rankings, judged):
    """The former offline metrics of ``_finish``: one call over all queries per ranker."""
    from simulations.world import shown_labels

    all_q = np.arange(labels.shape[0])
    return {name: np.asarray(metric.evaluate_labels(shown_labels(labels, all_q, r), judged), dtype=np.float64)
            for name, r in rankings.items()}


def dense_world(config, seq):
    """The former set-up: whole ``(Q, m)`` float64 arrays per ranker, then ``_finish`` with the
    offline metrics of all queries in one call."""
    import simulations.world as W
    from simulations.sampling import child_seed
    from simulations.world import _finish, zipf_frequencies

    W._offline_per_query = dense_offline  # this subprocess only measures the former set-up

    coll = config.collection
    q, m = coll.n_queries, coll.candidates
    depth = min(config.rankers.depth, m)
    dist = np.asarray(coll.label_distribution, dtype=np.float64)
    labels_rng, freq_rng, shared_rng = (np.random.default_rng(child_seed(seq, k)) for k in ("labels", "freq", "shared"))
    labels = labels_rng.choice(len(dist), size=(q, m), p=dist / dist.sum()).astype(np.int8)
    rho = config.rankers.noise_correlation
    shared = shared_rng.standard_normal((q, m))
    rankings, scores = {}, {}
    specs = {"A": config.rankers.A, "B": config.rankers.B, **config.rankers.others}
    for name, spec in specs.items():
        own = np.random.default_rng(child_seed(seq, "ranker:" + name)).standard_normal((q, m))
        score = labels + spec.noise * (np.sqrt(rho) * shared + np.sqrt(1.0 - rho) * own)
        rankings[name] = np.argsort(-score, axis=1, kind="stable")[:, :depth].astype(np.int32)
        scores[name] = score.astype(np.float32)
    frequency = zipf_frequencies(q, coll.zipf_exponent)[freq_rng.permutation(q)]
    query_ids = tuple(f"q{i}" for i in range(q))
    notes = {"collection": "synthetic", "candidates_per_query": m}
    return _finish(config, labels, rankings, frequency, query_ids, len(dist), notes, scores=scores)


def child(path: str, queries: int, candidates: int) -> None:
    from simulations.config import load_config
    from simulations.runner import world_seed
    from simulations.world import build_world

    cfg = load_config(REPO / "configs" / "ab.yaml", {"collection.n_queries": queries,
                                                     "collection.candidates": candidates})
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    world = (build_world if path == "current" else dense_world)(cfg, world_seed(cfg.seed))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    digest = hashlib.sha256(world.labels.tobytes())
    for name in sorted(world.rankings):
        digest.update(world.rankings[name].tobytes())
        digest.update(world.scores[name].tobytes())
        digest.update(world.offline.per_query[name].tobytes())
    digest.update(world.frequency.tobytes())
    print(json.dumps({"tracemalloc_peak": peak, "rss_before_kb": rss_before, "rss_peak_kb": rss_peak,
                      "seconds": seconds, "cpu": cpu, "digest": digest.hexdigest()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200_000)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--child", choices=("current", "dense"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.queries, args.candidates)
        return
    out = {}
    for path in ("dense", "current"):
        res = subprocess.run([sys.executable, __file__, "--child", path, "--queries", str(args.queries),
                              "--candidates", str(args.candidates)], capture_output=True, text=True, check=True)
        out[path] = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"world set-up: configs/ab.yaml with {args.queries} queries x {args.candidates} candidates, "
          f"rankers A and B; one subprocess per path")
    print("convention: MB = 2**20 bytes; tracemalloc peak = numpy/Python allocations during the set-up; "
          "RSS = process peak resident set (ru_maxrss), incl. interpreter and imports")
    for path in ("dense", "current"):
        r = out[path]
        print(f"  {path:8s}: tracemalloc peak {r['tracemalloc_peak'] / 2**20:8.1f} MB; peak RSS "
              f"{r['rss_peak_kb'] / 1024:8.1f} MB (before set-up {r['rss_before_kb'] / 1024:.1f} MB); "
              f"{r['seconds']:.2f} s wall, {r['cpu']:.2f} s CPU (under tracemalloc)")
    ratio = out["current"]["tracemalloc_peak"] / out["dense"]["tracemalloc_peak"]
    rss = ((out["current"]["rss_peak_kb"] - out["current"]["rss_before_kb"])
           / (out["dense"]["rss_peak_kb"] - out["dense"]["rss_before_kb"]))
    print(f"current / dense: tracemalloc peak {ratio:.3f}, RSS growth during set-up {rss:.3f} (target <= 0.333)")
    same = out["current"]["digest"] == out["dense"]["digest"]
    print(f"bit-identical grades, rankings, scores, frequencies and offline metrics: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
