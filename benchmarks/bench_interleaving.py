"""Throughput of interleave + credit, against plain per-impression Python in the same run.

Run with ``python benchmarks/bench_interleaving.py [--n N]``. Prints impressions per
second for the vectorised batch API and for a straightforward per-impression Python
implementation of the same method, and their ratio.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import numpy as np

from onlineeval.interleaving import get_interleaver


# --------------------------------------------------------------- baselines (plain Python, one impression)
def py_team_draft(a: list[int], b: list[int], k: int, rnd: random.Random) -> tuple[list[int], list[int]]:
    shown: list[int] = []
    team: list[int] = []
    seen: set[int] = set()
    ia = ib = na = nb = 0
    while len(shown) < k:
        while ia < len(a) and a[ia] in seen:
            ia += 1
        while ib < len(b) and b[ib] in seen:
            ib += 1
        if ia >= len(a) and ib >= len(b):
            break
        if ib >= len(b) or (ia < len(a) and (na < nb or (na == nb and rnd.random() < 0.5))):
            shown.append(a[ia])
            team.append(0)
            seen.add(a[ia])
            na += 1
        else:
            shown.append(b[ib])
            team.append(1)
            seen.add(b[ib])
            nb += 1
    return shown, team


def py_team_draft_credit(team: list[int], clicks: list[bool]) -> int:
    ca = sum(1 for t, c in zip(team, clicks) if c and t == 0)
    cb = sum(1 for t, c in zip(team, clicks) if c and t == 1)
    return (cb > ca) - (cb < ca)


def py_probabilistic(a: list[int], b: list[int], k: int, clicks: list[bool], rnd: random.Random,
                     tau: float = 3.0) -> float:
    """Probabilistic interleave + marginalised outcome, per impression, plain Python (DP over clicks)."""
    docs = list(dict.fromkeys(a + b))
    ra = {d: i + 1 for i, d in enumerate(a)}
    rb = {d: i + 1 for i, d in enumerate(b)}
    wa = {d: ra.get(d, len(a) + 1) ** -tau for d in docs}
    wb = {d: rb.get(d, len(b) + 1) ** -tau for d in docs}
    remaining = list(docs)
    shown: list[int] = []
    q: list[float] = []
    while remaining and len(shown) < k:
        w = wa if rnd.random() < 0.5 else wb
        tot = sum(w[d] for d in remaining)
        u = rnd.random() * tot
        acc = 0.0
        pick = remaining[-1]
        for d in remaining:
            acc += w[d]
            if acc > u:
                pick = d
                break
        ta = sum(wa[d] for d in remaining)
        tb = sum(wb[d] for d in remaining)
        pa, pb = wa[pick] / ta, wb[pick] / tb
        q.append(pb / (pa + pb))
        shown.append(pick)
        remaining.remove(pick)
    dist = [1.0]
    c = 0
    for j, qj in enumerate(q):
        if clicks[j]:
            c += 1
            new = [0.0] * (len(dist) + 1)
            for x, p in enumerate(dist):
                new[x] += p * (1 - qj)
                new[x + 1] += p * qj
            dist = new
    return sum(p for x, p in enumerate(dist) if 2 * x > c) - sum(p for x, p in enumerate(dist) if 2 * x < c)


# --------------------------------------------------------------- harness
def rate(fn: Callable[[], object], n: int, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def make_lists(rng: np.random.Generator, n: int, k: int, pool: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.argsort(rng.random((n, pool)), axis=1)[:, :k].astype(np.int32)
    b = np.argsort(rng.random((n, pool)), axis=1)[:, :k].astype(np.int32)
    return a, b


def bench_team_draft(n: int, n_py: int) -> None:
    rng = np.random.default_rng(0)
    k = 10
    a, b = make_lists(rng, n, k, 20)
    clicks = rng.random((n, k)) < 0.1
    il = get_interleaver("team_draft")

    def vec() -> None:
        res = il.interleave([a, b], rng)
        il.credit(res, clicks)

    la, lb, lc = a[:n_py].tolist(), b[:n_py].tolist(), clicks[:n_py].tolist()
    rnd = random.Random(0)

    def plain() -> None:
        for x, y, c in zip(la, lb, lc):
            _, team = py_team_draft(x, y, k, rnd)
            py_team_draft_credit(team, c)

    v = rate(vec, n)
    p = rate(plain, n_py)
    print(f"team_draft interleave+credit, k={k}: {v:>12,.0f} impressions/s  (plain Python {p:,.0f}/s, "
          f"ratio {v / p:,.1f}x; target >= 1,000,000/s)")


def bench_probabilistic(n: int, n_py: int) -> None:
    rng = np.random.default_rng(1)
    k = 10
    a, b = make_lists(rng, n, k, 20)
    clicks = rng.random((n, k)) < 0.1
    il = get_interleaver("probabilistic")

    def vec() -> None:
        res = il.interleave([a, b], rng)
        il.outcome(res, clicks)

    la, lb, lc = a[:n_py].tolist(), b[:n_py].tolist(), clicks[:n_py].tolist()
    rnd = random.Random(0)

    def plain() -> None:
        for x, y, c in zip(la, lb, lc):
            py_probabilistic(x, y, k, c, rnd)

    v = rate(vec, n)
    p = rate(plain, n_py)
    print(f"probabilistic interleave+exact outcome, k={k}: {v:>12,.0f} impressions/s  (plain Python {p:,.0f}/s, "
          f"ratio {v / p:,.1f}x; target >= 50,000/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000, help="impressions per vectorised batch")
    parser.add_argument("--n-py", type=int, default=20_000, help="impressions for the plain-Python baseline")
    args = parser.parse_args()
    bench_team_draft(args.n, args.n_py)
    from onlineeval.interleaving import available_interleavers

    if "probabilistic" in available_interleavers():
        bench_probabilistic(min(args.n, 200_000), min(args.n_py, 5_000))


if __name__ == "__main__":
    main()
