r"""Throughput of every registered off-policy estimator on a synthetic top-10 log.

Run with ``python benchmarks/bench_estimators.py [--n 1000000] [--reward clicks_per_query]``.

The log: ``--queries`` queries with 20 candidates each, 10 slots, PBM clicks
(examination :math:`1/(j+1)`, attraction uniform on [0, 0.6] per (query, document)),
logged by a production ranker randomised half the time:

.. math::

    \mu(\mathbf s \mid q) = \tfrac12\,\mathbb 1[\mathbf s = \mathbf a_q]
        + \tfrac12\,\frac{(m-k)!}{m!},

so every propensity (list, prefix, item at position, pair marginals, shown anywhere) is
exact in closed form. The target swaps the top two documents of the production list on
every other query. Each estimator is timed on the whole log (best of ``--repeat``
runs, one run when it takes over a second; ``estimate`` = terms + clustered CLT interval + diagnostics, ``terms`` = the hook
alone), and reported as slates per second and as a ratio to a baseline measured in the
same run: a plain numpy weighted mean of ``n`` impressions
(``(w * r).sum() / n``, with ``w`` and ``r`` precomputed), i.e. the memory-bound floor of
any estimator that reads one weight and one reward per impression. A second reference
line times whole-list IPS written inline in numpy from the log's arrays (no validation,
intervals or diagnostics): the cost of the estimator framework is the difference.
"""

from __future__ import annotations

import os

# one core, as the target is stated (BLAS threads would otherwise compete with other work)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onlineeval.errors import OnlineEvalError
from onlineeval.estimators import (
    DeterministicTarget,
    Propensities,
    available_estimators,
    estimator_class,
    get_reward,
)
from onlineeval.estimators.checks import CheckWorld, sample_log

#: estimators that fit a click model on the log (the rest only reweight)
MODEL_BASED = ("dm", "dr", "dr_list", "cascade_dr")


@dataclass(frozen=True, eq=False)
class HalfRandomisedLogger:
    """With probability 1/2 the production list ``lists[q]``, else a uniformly random
    ordered ``k``-subset of the candidates ``0..m-1`` (exact propensities in closed form)."""

    lists: np.ndarray
    m: int

    @property
    def k(self) -> int:
        return int(self.lists.shape[1])

    def _uniform_prefix(self, kk: int) -> np.ndarray:
        return np.cumprod(1.0 / (self.m - np.arange(kk)))

    def propensities(self, query: np.ndarray, rankings: np.ndarray) -> Propensities:
        r = np.asarray(rankings, dtype=np.int64)
        t = self.lists[np.asarray(query, dtype=np.int64)][:, : r.shape[1]]
        inside = (r >= 0) & (r < self.m)
        # a repeated document makes the prefix from its second occurrence impossible
        dup = np.zeros(r.shape, dtype=bool)
        for j in range(1, r.shape[1]):
            dup[:, j] = (r[:, :j] == r[:, j : j + 1]).any(axis=1)
        distinct = np.cumprod(~dup & inside, axis=1).astype(bool)
        match = np.cumprod(r == t, axis=1).astype(np.float64)
        prefix = 0.5 * match + 0.5 * np.where(distinct, self._uniform_prefix(r.shape[1])[None, :], 0.0)
        item = np.where(inside, 0.5 * (r == t) + 0.5 / self.m, 0.0)
        return Propensities(prefix[:, -1].copy(), prefix, item)

    def shown_probability(self, query: np.ndarray, docs: np.ndarray) -> np.ndarray:
        d = np.asarray(docs, dtype=np.int64)
        t = self.lists[np.asarray(query, dtype=np.int64)]
        in_list = (d[:, :, None] == t[:, None, :]).any(axis=2)
        return np.where((d >= 0) & (d < self.m), 0.5 * in_list + 0.5 * self.k / self.m, 0.0)

    def item_position_marginals(self, query: np.ndarray) -> np.ndarray:
        q = np.asarray(query, dtype=np.int64)
        out = np.full((q.size, self.m, self.k), 0.5 / self.m)
        out[np.arange(q.size)[:, None], self.lists[q], np.arange(self.k)[None, :]] += 0.5
        return out

    def pair_marginals(self, query_index: int) -> np.ndarray:
        k, m = self.k, self.m
        same_slot = np.eye(k)[:, None, :, None]
        same_doc = np.eye(m)[None, :, None, :]
        uniform = same_slot * same_doc / m + (1 - same_slot) * (1 - same_doc) / (m * (m - 1))
        onehot = np.zeros((k, m))
        onehot[np.arange(k), self.lists[query_index]] = 1.0
        return 0.5 * onehot[:, :, None, None] * onehot[None, None, :, :] + 0.5 * uniform

    def sample(self, query: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        q = np.asarray(query, dtype=np.int64)
        out = self.lists[q].copy()
        rand = rng.random(q.size) < 0.5
        out[rand] = np.argsort(rng.random((int(rand.sum()), self.m)), axis=1)[:, : self.k]
        return out


def build_world(queries: int, m: int = 20, k: int = 10, seed: int = 0) -> CheckWorld:
    rng = np.random.default_rng(seed)
    production = np.argsort(rng.random((queries, m)), axis=1)[:, :k]
    target = production.copy()
    target[::2, [0, 1]] = target[::2, [1, 0]]
    return CheckWorld(
        "pbm", rng.uniform(0.0, 0.6, size=(queries, m)), k, 1.0 / np.arange(1, k + 1), None,
        HalfRandomisedLogger(production, m), (DeterministicTarget(target, "B"),),
        np.full(queries, 1.0 / queries), ("pbm",), np.ones(1), "bench",
    )


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best wall time of up to ``repeat`` calls (one call when it takes over a second) and a result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        if best > 1.0:
            break
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reward", default="clicks_per_query")
    ap.add_argument("--only", default="", help="comma-separated estimator names (default: all registered)")
    args = ap.parse_args()

    world = build_world(args.queries)
    t0 = time.perf_counter()
    log = sample_log(world, args.n, np.random.default_rng(1))
    print(f"log: {log.n:,} impressions x {log.k} slots, {args.queries} queries, {world.m} candidates "
          f"(sampled with exact propensities in {time.perf_counter() - t0:.2f} s); reward {args.reward}")
    target = world.targets[0]
    # warm-up: the first estimate imports the statistics stack (scipy); keep that out of the timings
    estimator_class("ips")().estimate(log.take(np.arange(1000)), target, args.reward)

    w = np.asarray(target.propensities(log.query, log.shown).list / log.p_list)
    r = log.clicks.sum(axis=1).astype(np.float64)
    base, _ = best_of(lambda: float((w * r).sum()) / log.n, max(args.repeat, 5))
    print(f"baseline: numpy weighted mean of {log.n:,} values: {base * 1e3:.2f} ms ({log.n / base:,.0f} slates/s)")
    lists = target.lists

    def inline_ips() -> float:
        hit = (log.shown == lists[log.query]).all(axis=1)
        return float((hit / log.p_list * log.clicks.sum(axis=1)).mean())

    t_inline, _ = best_of(inline_ips, max(args.repeat, 3))
    print(f"reference: whole-list IPS inline in numpy from the log's arrays: {t_inline:.3f} s "
          f"({log.n / t_inline:,.0f} slates/s, {t_inline / base:.0f} x baseline)")
    print(f"{'estimator':<14}{'estimate s':>12}{'terms s':>10}{'slates/s':>14}{'x baseline':>12}  value")
    names = [x for x in args.only.split(",") if x] or list(available_estimators())
    totals = {"weighting": 0.0, "model": 0.0}
    for name in names:
        cls = estimator_class(name)
        est = cls.check_instances(world)[0]
        reward = args.reward
        if get_reward(reward, log.k).kind not in cls.rewards:
            reward = "reciprocal_rank" if "first_click" in cls.rewards else "clicks_per_query"
        try:
            t_est, res = best_of(lambda e=est, rw=reward: e.estimate(log, target, rw), args.repeat)
            t_terms, _ = best_of(lambda e=est, rw=reward: e.terms(log, target, rw), args.repeat)
            value = res.value
        except (OnlineEvalError, ValueError, MemoryError) as exc:  # report and go on: a benchmark, not a test
            print(f"{name:<14} failed: {type(exc).__name__}: {exc}")
            continue
        totals["model" if name in MODEL_BASED else "weighting"] += t_est
        note = "" if reward == args.reward else f" ({reward}: the estimator supports no other)"
        print(f"{name:<14}{t_est:>12.3f}{t_terms:>10.3f}{log.n / t_est:>14,.0f}{t_est / base:>12.0f}  {value:.4f}{note}")
    print(f"total, reweighting estimators: {totals['weighting']:.2f} s; model-based ({', '.join(MODEL_BASED)}): "
          f"{totals['model']:.2f} s")


if __name__ == "__main__":
    main()
