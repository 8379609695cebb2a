"""The statistical tests of the battery, and the constructors of check results.

* sign test: wins against losses, ties dropped (exact binomial test, ``p = 1/2``);
* one-sample t-test of a mean against zero (real-valued outcomes: expected outcome,
  credit difference), with a degenerate sample (zero variance) handled exactly;
* chi-square test of homogeneity of two samples of categories (categories seen fewer
  than :data:`RARE_CATEGORY` times pooled);
* Bonferroni combination ``min(1, m * min p)`` of ``m`` p-values;
* :func:`partition_key`: which homogeneity tests are one test (two columns that split the
  pooled impressions into the same groups give the same table up to relabelling, hence the
  same p-value), so a family counts each distinct test once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from onlineeval.interleaving.validation.report import FAIL, PASS, CheckResult

__all__ = ["RARE_CATEGORY", "bonferroni", "exact_check", "homogeneity", "partition_key", "sign_test", "t_test"]

#: categories seen fewer times than this in both samples together are pooled into one
#: before the chi-square test (expected counts of about 5 per sample and cell)
RARE_CATEGORY = 10


def sign_test(outcomes: NDArray[np.floating] | NDArray[np.integer],
              alternative: str = "two-sided") -> tuple[float, dict[str, int]]:
    """Exact binomial test of wins (``> 0``) against losses (``< 0``); ``p = 1`` without decided impressions."""
    o = np.asarray(outcomes)
    wins, losses = int((o > 0).sum()), int((o < 0).sum())
    counts = {"wins": wins, "losses": losses, "ties": int(o.size - wins - losses)}
    if wins + losses == 0:
        return 1.0, counts
    return float(stats.binomtest(wins, wins + losses, 0.5, alternative=alternative).pvalue), counts


def t_test(values: NDArray[np.floating], alternative: str = "two-sided") -> float:
    """One-sample t-test of ``mean(values) = 0``; a constant sample gives 1 (mean 0) or 0 (mean != 0)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2 or float(v.std()) == 0.0:
        mean = float(v.mean()) if v.size else 0.0
        if alternative == "greater":
            return 0.0 if mean > 0 else 1.0
        return 1.0 if mean == 0 else 0.0
    return float(stats.ttest_1samp(v, 0.0, alternative=alternative).pvalue)


def homogeneity(a: NDArray[np.integer], b: NDArray[np.integer]) -> float:
    """Chi-square test that two samples of integer categories come from one distribution (1.0 if degenerate)."""
    a = np.asarray(a, dtype=np.int64).ravel()
    b = np.asarray(b, dtype=np.int64).ravel()
    if not a.size or not b.size:
        return 1.0
    cats, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    if cats.size < 2:
        return 1.0
    table = np.zeros((2, cats.size))
    table[0] = np.bincount(inv[: a.size], minlength=cats.size)
    table[1] = np.bincount(inv[a.size:], minlength=cats.size)
    rare = table.sum(axis=0) < RARE_CATEGORY
    if rare.sum() > 1:        # pool sparse categories so the chi-square approximation holds
        table = np.column_stack([table[:, ~rare], table[:, rare].sum(axis=1)])
    if table.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(table, correction=False)[1])


def partition_key(a: NDArray[np.integer], b: NDArray[np.integer]) -> bytes | None:
    """The partition of the pooled sample (``a`` then ``b``) into categories, up to relabelling; ``None`` for one.

    Two pairs of columns with the same key give :func:`homogeneity` the same table up to a
    permutation of its categories, hence exactly the same p-value; ``None`` (a single
    category) is a test that cannot reject (p = 1). The key is a digest of the labels
    numbered in order of first appearance.
    """
    x = np.concatenate([np.asarray(a, dtype=np.int64).ravel(), np.asarray(b, dtype=np.int64).ravel()])
    cats, first, inv = np.unique(x, return_index=True, return_inverse=True)
    if cats.size < 2:
        return None
    rank = np.empty(cats.size, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(cats.size)
    head = np.asarray([np.asarray(a).size], dtype=np.int64).tobytes()
    return hashlib.blake2b(head + rank[inv].tobytes(), digest_size=20).digest()


def bonferroni(pvals: Sequence[float]) -> float:
    """``min(1, m * min p)`` over ``m`` p-values (1 for none)."""
    return 1.0 if not len(pvals) else float(min(1.0, min(pvals) * len(pvals)))


def exact_check(name: str, violations: int, total: int, what: str, example: str = "") -> CheckResult:
    """An exact check: passes with zero violations; prints ``violations/total``."""
    counts = {"violations": violations, "total": total}
    if violations:
        return CheckResult(name, FAIL, "violations/total", float(violations),
                           f"{violations}/{total} {what}" + (f"; e.g. {example}" if example else ""),
                           exact=True, counts=counts)
    return CheckResult(name, PASS, "violations/total", 0.0, f"0/{total} {what}", exact=True, counts=counts)
