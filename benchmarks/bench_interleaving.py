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

from onlineeval.interleaving import Interleaver, get_interleaver


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


def py_balanced(a: list[int], b: list[int], k: int, clicks: list[bool], rnd: random.Random) -> int:
    """Balanced interleave (Joachims 2003) + its outcome, per impression, plain Python."""
    lead, follow = (a, b) if rnd.random() < 0.5 else (b, a)
    shown: list[int] = []
    seen: set[int] = set()
    for i in range(max(len(a), len(b))):
        for lst in (lead, follow):
            if i < len(lst) and lst[i] not in seen and len(shown) < k:
                shown.append(lst[i])
                seen.add(lst[i])
    clicked = [d for d, c in zip(shown, clicks) if c]
    if not clicked:
        return 0
    last = clicked[-1]
    kappa = min(a.index(last) if last in a else len(a), b.index(last) if last in b else len(b))
    ha = sum(1 for d in clicked if d in a[: kappa + 1])
    hb = sum(1 for d in clicked if d in b[: kappa + 1])
    return (hb > ha) - (hb < ha)


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


def bench(label: str, method: str, n: int, n_py: int, plain_one: Callable[..., object], target: str,
          seed: int) -> None:
    """Batch API (interleave + outcome) against ``plain_one(a, b, k, clicks, rnd)`` per impression."""
    rng = np.random.default_rng(seed)
    k = 10
    a, b = make_lists(rng, n, k, 20)
    clicks = rng.random((n, k)) < 0.1
    il = get_interleaver(method)

    def vec() -> None:
        res = il.interleave([a, b], rng)
        il.outcome(res, clicks)

    la, lb, lc = a[:n_py].tolist(), b[:n_py].tolist(), clicks[:n_py].tolist()
    rnd = random.Random(0)

    def plain() -> None:
        for x, y, c in zip(la, lb, lc):
            plain_one(x, y, k, c, rnd)

    v = rate(vec, n)
    p = rate(plain, n_py)
    print(f"{label}, k={k}: {v:>12,.0f} impressions/s  (plain Python {p:,.0f}/s, ratio {v / p:,.1f}x; "
          f"target {target})")


def plain_team_draft(a: list[int], b: list[int], k: int, clicks: list[bool], rnd: random.Random) -> int:
    _, team = py_team_draft(a, b, k, rnd)
    return py_team_draft_credit(team, clicks)


def bench_per_call(methods: tuple[str, ...], batch: int = 1000, calls: int = 200) -> None:
    """Cost of one interleave + outcome call on a batch of ``batch`` impressions (the simulator's call size),
    against the same work done in one call of ``batch * calls`` impressions."""
    rng = np.random.default_rng(2)
    k = 10
    a, b = make_lists(rng, batch * calls, k, 30)
    clicks = rng.random((batch * calls, k)) < 0.1
    for method in methods:
        il = get_interleaver(method)

        def small(il: Interleaver = il) -> None:
            for s in range(0, batch * calls, batch):
                res = il.interleave([a[s: s + batch], b[s: s + batch]], rng)
                il.outcome(res, clicks[s: s + batch])

        def large(il: Interleaver = il) -> None:
            il.outcome(il.interleave([a, b], rng), clicks)

        per_call = batch * calls / rate(small, batch * calls) / calls
        per_imp_large = 1.0 / rate(large, batch * calls)
        print(f"{method} interleave+outcome per call of {batch}: {per_call * 1e3:.2f} ms "
              f"(one batch of {batch * calls:,}: {per_imp_large * batch * 1e3:.2f} ms per {batch}; "
              f"ratio {per_call / (per_imp_large * batch):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000, help="impressions per vectorised batch")
    parser.add_argument("--n-py", type=int, default=20_000, help="impressions for the plain-Python baseline")
    args = parser.parse_args()
    bench("team_draft interleave+outcome (click credit per team, its sign)", "team_draft", args.n, args.n_py,
          plain_team_draft, ">= 1,000,000/s", 0)
    bench("balanced interleave+outcome (Joachims 2003)", "balanced", args.n, args.n_py, py_balanced,
          "team_draft's rate", 3)
    bench("probabilistic interleave+exact outcome", "probabilistic", min(args.n, 200_000), min(args.n_py, 5_000),
          py_probabilistic, ">= 50,000/s", 1)
    bench_per_call(("team_draft", "balanced"))


if __name__ == "__main__":
    main()
