"""The statistical tests of the battery, and the constructors of check results.

* sign test: wins against losses, ties dropped (exact binomial test, ``p = 1/2``);
* one-sample t-test of a mean against zero (real-valued outcomes: expected outcome,
  credit difference), with a degenerate sample (zero variance) handled exactly;
* chi-square test of homogeneity of two samples of categories (categories seen fewer
  than :data:`RARE_CATEGORY` times pooled);
* goodness of fit of one sample of categories to exact probabilities
  (:func:`goodness_of_fit`: a category of probability 0 observed gives p = 0; cells of expected
  count below :data:`MIN_EXPECTED` merged; two cells: exact binomial test, more: Pearson chi-square);
* goodness of fit of one sample whose every draw has its own exact distribution
  (:func:`pooled_goodness_of_fit`, ``--log``: the rows of a log have their own input lists): the
  counts against the summed probabilities, with the covariance of a sum of independent categorical
  draws (Pearson's statistic when every row has the same distribution);
* Bonferroni combination ``min(1, m * min p)`` of ``m`` p-values;
* :func:`partition_key`: which homogeneity tests are one test (two columns that split the
  pooled impressions into the same groups give the same table up to relabelling, hence the
  same p-value), so a family counts each distinct test once; :func:`gof_key` is its one-sample
  counterpart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from onlineeval.interleaving.validation.report import FAIL, PASS, CheckResult

__all__ = ["MIN_EXPECTED", "RARE_CATEGORY", "bonferroni", "exact_check", "gof_key", "goodness_of_fit", "homogeneity",
           "partition_key", "pooled_gof_key", "pooled_goodness_of_fit", "reference_statistic", "sign_test", "t_test"]

#: categories seen fewer times than this in both samples together are pooled into one
#: before the chi-square test (expected counts of about 5 per sample and cell)
RARE_CATEGORY = 10
#: cells of :func:`goodness_of_fit` with a smaller expected count are merged (Cochran's rule: every cell >= 5)
MIN_EXPECTED = 5.0


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


def goodness_of_fit(sample: NDArray[np.integer], probs: dict[int, float]) -> float:
    """Test that ``sample`` (integer categories) was drawn from the exact distribution ``probs``.

    * a category with probability 0 (absent from ``probs``) observed at least once: p = 0 (impossible
      under the null, an exact rejection);
    * otherwise the cells are sorted by expected count and the smallest merged until every cell
      expects at least :data:`MIN_EXPECTED` (one cell left: p = 1, nothing to test);
    * two cells: the exact two-sided binomial test (``scipy.stats.binomtest``); three or more:
      Pearson's chi-square goodness-of-fit test with ``cells - 1`` degrees of freedom.
    """
    x = np.asarray(sample, dtype=np.int64).ravel()
    n = x.size
    if not n:
        return 1.0
    cats, counts = np.unique(x, return_counts=True)
    if any(probs.get(int(c), 0.0) <= 0.0 for c in cats):
        return 0.0
    obs_of = dict(zip(cats.tolist(), counts.tolist()))
    support = [c for c, p in probs.items() if p > 0]
    _, exp, obs = _merged_cells([n * probs[c] for c in support], [obs_of.get(c, 0) for c in support])
    if len(exp) < 2:
        return 1.0
    e = np.asarray(exp) * (n / sum(exp))       # the merged probabilities sum to one up to rounding
    if len(exp) == 2:
        return float(stats.binomtest(int(obs[0]), n, float(e[0] / n)).pvalue)
    return float(stats.chisquare(np.asarray(obs, dtype=np.float64), e).pvalue)


def reference_statistic(kinds: Collection[str]) -> str:
    """The statistic's name for a family of tests against the reference: ``kinds`` the references they used,
    ``"exact"`` (exact probabilities: :func:`goodness_of_fit`, :func:`pooled_goodness_of_fit`) and / or
    ``"sampled"`` (a sample of the reference: :func:`homogeneity`); both, or none, name both."""
    used = frozenset(kinds)
    if used == {"exact"}:
        return "goodness-of-fit p-value (exact reference)"
    if used == {"sampled"}:
        return "chi-square p-value (sampled reference)"
    return "goodness-of-fit / chi-square p-value (exact / sampled reference)"


def gof_key(sample: NDArray[np.integer], probs: dict[int, float]) -> bytes | None:
    """Which :func:`goodness_of_fit` tests are one test; ``None`` for one that cannot reject.

    Two columns whose samples split the impressions into the same groups (labels numbered in
    order of first appearance), with the same probability for corresponding groups and the same
    probabilities of unobserved categories, give the same cells, hence exactly the same p-value.
    ``None``: a distribution with one category, observed alone (p = 1).
    """
    x = np.asarray(sample, dtype=np.int64).ravel()
    cats, first, inv = np.unique(x, return_index=True, return_inverse=True)
    support = [c for c, p in probs.items() if p > 0]
    if len(support) < 2 and cats.size == 1 and int(cats[0]) in support:
        return None
    order = np.argsort(first)
    rank = np.empty(cats.size, dtype=np.int64)
    rank[order] = np.arange(cats.size)
    seen_p = [round(probs.get(int(cats[i]), 0.0), 12) for i in order]
    unseen = sorted(round(p, 12) for c, p in probs.items() if p > 0 and c not in set(cats.tolist()))
    head = repr((x.size, seen_p, unseen)).encode()
    return hashlib.blake2b(head + rank[inv].tobytes(), digest_size=20).digest()


def _merged_cells(exp: Sequence[float], obs: Sequence[int]) -> tuple[list[list[int]], list[float], list[int]]:
    """The cells of :func:`goodness_of_fit` and :func:`pooled_goodness_of_fit`: sorted by (expected, observed)
    count, the smallest merged into the next (its expected and observed counts added to the next one's) and the
    cells sorted again, until every cell expects at least :data:`MIN_EXPECTED` or one is left. Returns the merged
    cells as groups of indices into ``exp`` / ``obs``, with their expected and observed counts, in that order."""
    groups = sorted(([c] for c in range(len(exp))), key=lambda g: (exp[g[0]], obs[g[0]]))
    e = [exp[g[0]] for g in groups]
    o = [obs[g[0]] for g in groups]
    while len(e) > 1 and e[0] < MIN_EXPECTED:
        groups[1], e[1], o[1] = groups[0] + groups[1], e[1] + e[0], o[1] + o[0]
        groups, e, o = groups[1:], e[1:], o[1:]
        order = sorted(range(len(e)), key=lambda i: (e[i], o[i]))
        groups, e, o = [groups[i] for i in order], [e[i] for i in order], [o[i] for i in order]
    return groups, e, o


def pooled_goodness_of_fit(labels: NDArray[np.integer], rows: NDArray[np.integer],
                           table: NDArray[np.floating]) -> float:
    """Test that draw ``r`` (category ``labels[r]``) came from its own exact distribution ``table[rows[r]]``.

    ``table`` is ``(G, C)``: the distinct distributions over categories ``0..C-1`` (rows sum to one).

    * a draw of a category its distribution gives probability 0: p = 0 (an exact rejection);
    * one distinct distribution: :func:`goodness_of_fit` itself (exact binomial test for two cells);
    * else the counts ``O`` are compared with ``E = sum_r p_r`` through the covariance of a sum of
      independent categorical draws, ``diag(E) - sum_r p_r p_r^T``: ``(O - E)' S^+ (O - E)`` on all cells
      but one, chi-square with the covariance's rank as degrees of freedom (Pearson's statistic when
      every ``p_r`` is the same). Cells are merged as :func:`goodness_of_fit` merges them (expected
      count below :data:`MIN_EXPECTED`).
    """
    x = np.asarray(labels, dtype=np.int64).ravel()
    g = np.asarray(rows, dtype=np.int64).ravel()
    p = np.asarray(table, dtype=np.float64)
    if not x.size:
        return 1.0
    if (p[g, x] <= 0.0).any():
        return 0.0
    used = np.unique(g)
    if used.size == 1 or np.all(p[used] == p[used[0]]):
        return goodness_of_fit(x, {c: float(q) for c, q in enumerate(p[used[0]]) if q > 0})
    w = np.bincount(g, minlength=p.shape[0]).astype(np.float64)
    exp_all = w @ p
    obs_all = np.bincount(x, minlength=p.shape[1])
    cells = np.flatnonzero(exp_all > 0)
    groups = _merged_cells(exp_all[cells].tolist(), obs_all[cells].tolist())[0]
    if len(groups) < 2:
        return 1.0
    merge = np.zeros((p.shape[1], len(groups)))
    for k, grp in enumerate(groups):
        merge[cells[grp], k] = 1.0
    pm = p @ merge                                            # (G, K): each distribution over the merged cells
    e = w @ pm
    d = (obs_all @ merge - e)[:-1]
    cov = (np.diag(e) - (pm * w[:, None]).T @ pm)[:-1, :-1]
    lam, vec = np.linalg.eigh(cov)
    keep = lam > 1e-9 * max(float(lam.max()), 1.0)
    if not keep.any():
        return 1.0
    stat = float(np.sum((vec[:, keep].T @ d) ** 2 / lam[keep]))
    return float(stats.chi2.sf(stat, int(keep.sum())))


def pooled_gof_key(labels: NDArray[np.integer], rows: NDArray[np.integer],
                   table: NDArray[np.floating]) -> bytes | None:
    """Which :func:`pooled_goodness_of_fit` tests are one test; ``None`` for one that cannot reject.

    Categories are numbered in order of first appearance among the labels (categories never drawn
    after them, by their probabilities), distributions in order of first use: two columns that split
    the draws into the same groups with the same probabilities (a team-draft round's second pick against
    its first) give the same key, and the same p-value. ``None``: every draw certain and drawn.
    """
    x = np.asarray(labels, dtype=np.int64).ravel()
    g = np.asarray(rows, dtype=np.int64).ravel()
    p = np.round(np.asarray(table, dtype=np.float64), 12)
    if not x.size or np.all(p[g, x] == 1.0):
        return None
    ids, first_g, inv_g = np.unique(g, return_index=True, return_inverse=True)
    id_order = ids[np.argsort(first_g)]
    id_rank = np.empty(ids.size, dtype=np.int64)
    id_rank[np.argsort(first_g)] = np.arange(ids.size)
    cats, first_x = np.unique(x, return_index=True)
    seen = cats[np.argsort(first_x)].tolist()
    unseen = sorted((c for c in range(p.shape[1]) if c not in set(seen) and (p[id_order, c] > 0).any()),
                    key=lambda c: tuple(p[id_order, c].tolist()))
    order = seen + unseen
    rank = np.full(p.shape[1], -1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    head = repr((x.size, p[id_order][:, order].tolist())).encode()
    return hashlib.blake2b(head + rank[x].tobytes() + id_rank[inv_g].tobytes(), digest_size=20).digest()


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
