"""Benchmark: EM for PBM and UBM on the Yandex train sample.

Prints the time of a full fit (to convergence, default options) and the time per
iteration of a straightforward per-session Python EM (dicts and loops, measured in the
same run on the same log, for ``--naive-iters`` iterations); the ratio compares the full
vectorised fit with the per-session EM for the same number of iterations. Both are also
run for the same few iterations from the same start and their parameters compared, so
the work is identical.

Run: ``python benchmarks/bench_fit.py [--naive-iters 3] [--data DIR]``.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path


from clickmodels.estimation import EMOptions
from clickmodels.estimation.pbm import fit_pbm
from clickmodels.estimation.ubm import fit_ubm
from clickmodels.logs import ClickLog, read_yandex

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "clicklogs" / "yandex_wscd_pyclick_sample"


def naive_em(log: ClickLog, model: str, iters: int
             ) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    """Per-session Python EM (PBM: examination by rank; UBM: by (rank, previous click)).

    Same start (0.5), same Beta(1, 1) pseudo-counts as the vectorised estimator.
    """
    sessions = [
        (int(log.query[i]), [int(d) for d in log.docs[i] if d >= 0], [bool(c) for c in log.clicks[i]])
        for i in range(log.n_sessions)
    ]
    alpha: dict[tuple[int, int], float] = defaultdict(lambda: 0.5)
    gamma: dict[tuple[int, int], float] = defaultdict(lambda: 0.5)
    for _ in range(iters):
        a_num: dict[tuple[int, int], float] = defaultdict(float)
        a_den: dict[tuple[int, int], float] = defaultdict(float)
        g_num: dict[tuple[int, int], float] = defaultdict(float)
        g_den: dict[tuple[int, int], float] = defaultdict(float)
        for q, docs, clicks in sessions:
            prev = 0
            for r, d in enumerate(docs):
                key = (r, prev if model == "ubm" else 0)
                a, g = alpha[(q, d)], gamma[key]
                if clicks[r]:
                    pa = pe = 1.0
                    prev = r + 1
                else:
                    z = 1.0 - a * g
                    pa, pe = a * (1.0 - g) / z, g * (1.0 - a) / z
                a_num[(q, d)] += pa
                a_den[(q, d)] += 1.0
                g_num[key] += pe
                g_den[key] += 1.0
        alpha = defaultdict(lambda: 0.5, {k: (a_num[k] + 1.0) / (a_den[k] + 2.0) for k in a_den})
        gamma = defaultdict(lambda: 0.5, {k: (g_num[k] + 1.0) / (g_den[k] + 2.0) for k in g_den})
    return dict(alpha), dict(gamma)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--naive-iters", type=int, default=3)
    args = parser.parse_args()
    log = read_yandex(args.data / "trainSample")
    slots = int(log.shown.sum())
    print(f"Yandex trainSample: {log.n_sessions} sessions, {slots} slots, {log.pairs.n_pairs} (query, doc) pairs")
    fits = {"pbm": fit_pbm, "ubm": fit_ubm}
    for name, fit in fits.items():
        t0 = time.perf_counter()
        full = fit(log)
        t_full = time.perf_counter() - t0
        print(
            f"\n{name.upper()} full fit: {t_full:.2f} s, {full.trace.iterations} iterations "
            f"(converged={full.trace.converged}), "
            f"{slots * full.trace.iterations / t_full / 1e6:.2f} M slot-iterations/s"
        )
        n_it = args.naive_iters
        t0 = time.perf_counter()
        vec = fit(log, EMOptions(max_iter=n_it, tol=0.0))
        t_vec = (time.perf_counter() - t0) / n_it
        t0 = time.perf_counter()
        alpha, gamma = naive_em(log, name, n_it)
        t_naive = (time.perf_counter() - t0) / n_it
        # same work: compare the parameters after n_it iterations
        table = vec.attractiveness
        qcode = {q: i for i, q in enumerate(log.query_vocab)}
        dcode = {d: i for i, d in enumerate(log.doc_vocab)}
        diff_a = max(abs(v - alpha[(qcode[q], dcode[d])]) for q, d, v in zip(table.query, table.doc, table.value))
        exam = vec.examination
        diff_g = max(abs((exam[r] if name == "pbm" else exam[r, j]) - g) for (r, j), g in gamma.items())
        per_it = t_full / full.trace.iterations  # includes the one-off setup: conservative
        print(
            f"  same {n_it} iterations from the same start: vectorised {t_vec * 1e3:.0f} ms/iteration "
            f"(setup included), per-session Python {t_naive * 1e3:.0f} ms/iteration; "
            f"max |param diff| {max(diff_a, diff_g):.1e}"
        )
        print(
            f"  full fit: vectorised {t_full:.2f} s vs per-session Python ~{t_naive * full.trace.iterations:.0f} s "
            f"for {full.trace.iterations} iterations -> ratio {t_naive / per_it:.0f}x"
        )


if __name__ == "__main__":
    main()
