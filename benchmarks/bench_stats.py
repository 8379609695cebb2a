"""Throughput of onlineeval.stats against straightforward baselines measured in the same run.

Run: ``python benchmarks/bench_stats.py``. Baselines are the obvious implementations
(one numpy call per resample / per data set in a Python loop); their rate is measured on
a smaller number of resamples and reported per resample.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from onlineeval.stats import (
    cluster_bootstrap_ratio,
    paired_bootstrap,
    randomization_test,
    ratio_diff,
    ratio_diff_batch,
)


def _timed(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _report(name: str, unit: str, n_ours: int, t_ours: float, n_base: int, t_base: float) -> None:
    ours, base = n_ours / t_ours, n_base / t_base
    print(f"{name:<44s} {ours:>14,.0f} {unit}/s   baseline {base:>12,.0f} {unit}/s   ratio {ours / base:6.1f}x")


def bench_randomization(n: int = 10_000, b: int = 10_000, b_base: int = 1_000) -> None:
    d = np.random.default_rng(0).normal(0.01, 0.2, n)

    def baseline() -> None:
        rng = np.random.default_rng(1)
        obs = abs(d.sum())
        hits = 0
        for _ in range(b_base):
            signs = rng.choice(np.array([-1.0, 1.0]), size=n)
            hits += abs(signs @ d) >= obs
        _ = (hits + 1) / (b_base + 1)

    t_ours = _timed(lambda: randomization_test(d, np.random.default_rng(1), b))
    t_base = _timed(baseline, 1)
    _report(f"randomisation test, {n:,} queries", "perms", b, t_ours, b_base, t_base)


def bench_paired_bootstrap(n: int = 10_000, b: int = 10_000, b_base: int = 1_000) -> None:
    d = np.random.default_rng(0).normal(0.01, 0.2, n)

    def baseline() -> None:
        rng = np.random.default_rng(1)
        reps = np.array([d[rng.integers(0, n, n)].mean() for _ in range(b_base)])
        np.quantile(reps, [0.025, 0.975])

    t_ours = _timed(lambda: paired_bootstrap(d, np.random.default_rng(1), b))
    t_base = _timed(baseline, 1)
    _report(f"paired bootstrap (pct + BCa), {n:,} queries", "reps", b, t_ours, b_base, t_base)


def bench_cluster_bootstrap(n: int = 50_000, b: int = 2_000, b_base: int = 200) -> None:
    rng = np.random.default_rng(2)
    den = 1.0 + rng.geometric(0.2, n)
    num = rng.binomial(den.astype(int), 0.3).astype(float)

    def baseline() -> None:
        g = np.random.default_rng(1)
        reps = []
        for _ in range(b_base):
            idx = g.integers(0, n, n)
            reps.append(num[idx].sum() / den[idx].sum())
        np.quantile(reps, [0.025, 0.975])

    t_ours = _timed(lambda: cluster_bootstrap_ratio(num, den, b, np.random.default_rng(1)))
    t_base = _timed(baseline, 1)
    _report(f"cluster bootstrap ratio, {n:,} users", "reps", b, t_ours, b_base, t_base)


def bench_delta_batch(reps: int = 500, checkpoints: int = 14, users: int = 2_000) -> None:
    rng = np.random.default_rng(3)
    shape = (reps, checkpoints, users)
    den_a = rng.poisson(3.0, shape).astype(float)
    num_a = rng.binomial(den_a.astype(int), 0.3).astype(float)
    den_b = rng.poisson(3.0, shape).astype(float)
    num_b = rng.binomial(den_b.astype(int), 0.31).astype(float)
    n_sets = reps * checkpoints
    n_base = 500

    def baseline() -> None:
        for k in range(n_base):
            i, j = divmod(k, checkpoints)
            ratio_diff(num_a[i, j], den_a[i, j], num_b[i, j], den_b[i, j])

    t_ours = _timed(lambda: ratio_diff_batch(num_a, den_a, num_b, den_b), 2)
    t_base = _timed(baseline, 1)
    _report(f"delta-method A/B, {users:,} users/arm, batched", "tests", n_sets, t_ours, n_base, t_base)


if __name__ == "__main__":
    bench_randomization()
    bench_paired_bootstrap()
    bench_cluster_bootstrap()
    bench_delta_batch()
