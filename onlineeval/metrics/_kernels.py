"""Small numpy helpers shared by the metric kernels (padded ``(q, d)`` arrays)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from onlineeval.metrics.base import CWL, EMPTY


def cut(a: np.ndarray, k: int | None, fill: float | int = 0) -> np.ndarray:
    """The first ``k`` columns of ``a``, padded with ``fill`` when ``a`` is narrower."""
    if k is None:
        return a
    q, d = a.shape
    if k <= d:
        return a[:, :k]
    out = np.full((q, k), fill, dtype=a.dtype)
    out[:, :d] = a
    return out


def cut_codes(codes: np.ndarray, k: int | None) -> np.ndarray:
    """Cut a code array at ``k``, padding with :data:`EMPTY`."""
    return cut(codes, k, EMPTY)


def log2_discount(n: int) -> np.ndarray:
    """``(n,)`` discounts :math:`1/\\log_2(i+1)` for ranks ``i = 1..n``."""
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def ranks(n: int) -> np.ndarray:
    """``(n,)`` float ranks ``1..n``."""
    return np.arange(1, n + 1, dtype=np.float64)


def safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` with 0 where ``den == 0``."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den != 0)
    return out


def tie_average(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Replace each value by the mean over its tie group (row-wise group ids).

    For a metric :math:`\\sum_i w_i f(d_{\\pi(i)})`, a uniformly random order of each
    tie group puts every tied document at every position of the group with equal
    probability, so :math:`E[f(d_{\\pi(i)})]` is the group mean of :math:`f`.
    """
    q, d = values.shape
    if q == 0 or d == 0:
        return values.astype(np.float64)
    g = groups.astype(np.int64)
    # negative ids (padding) become singleton groups
    g = np.where(g < 0, g.max(initial=0) + 1 + np.arange(d)[None, :], g)
    g = g - g.min(axis=1, keepdims=True)
    width = int(g.max()) + 1
    flat = (np.arange(q, dtype=np.int64)[:, None] * width + g).ravel()
    sums = np.bincount(flat, weights=values.astype(np.float64).ravel(), minlength=q * width)
    counts = np.bincount(flat, minlength=q * width)
    means = safe_div(sums, counts)
    return means[flat].reshape(q, d)


def gather_rows(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``a[i, idx[i]]`` for each row ``i``."""
    return np.take_along_axis(a, idx[:, None].astype(np.int64), axis=1)[:, 0]


def cwl_profile(cont: np.ndarray, tail: np.ndarray) -> CWL:
    """C/W/L arrays from continuation probabilities over a window of ``d`` ranks.

    Parameters
    ----------
    cont:
        ``(q, d)`` continuation probabilities :math:`C(i)` for ranks ``1..d``.
    tail:
        ``(q,)`` :math:`\\sum_{i > d} \\prod_{j<i} C(j)`, the reach mass beyond the window
        (``inf`` when the user never stops, which makes every weight 0).
    """
    q, d = cont.shape
    reach = np.cumprod(np.concatenate([np.ones((q, 1)), cont[:, :-1]], axis=1), axis=1)
    total = reach.sum(axis=1) + tail
    finite = np.isfinite(total) & (total > 0)
    weight = np.zeros_like(reach)
    np.divide(reach, np.where(finite, total, 1.0)[:, None], out=weight, where=finite[:, None])
    last = (1.0 - cont) * reach
    return CWL(cont, weight, last)


def reach_after(cont: np.ndarray) -> np.ndarray:
    """``(q,)`` :math:`\\prod_{j \\le d} C(j)`: probability of going past the window."""
    return np.prod(cont, axis=1)


class TieStats(NamedTuple):
    """Per-slot statistics of the score-tie group holding the slot (``(q, d)`` arrays).

    ``size`` n and ``relevant`` r of the group, ``before`` the relevant documents in
    earlier groups, ``offset`` the 1-based position of the slot inside its group.
    """

    size: np.ndarray
    relevant: np.ndarray
    before: np.ndarray
    offset: np.ndarray


def tie_stats(rel: np.ndarray, groups: np.ndarray) -> TieStats:
    """:class:`TieStats` of a binary relevance array under row-wise contiguous tie groups."""
    q, d = rel.shape
    relf = rel.astype(np.float64)
    g = groups.astype(np.int64)
    g = np.where(g < 0, g.max(initial=0) + 1 + np.arange(d)[None, :], g)
    g = g - g.min(axis=1, keepdims=True) if d else g
    width = int(g.max(initial=0)) + 1
    flat = (np.arange(q, dtype=np.int64)[:, None] * width + g).ravel()
    size = np.bincount(flat, minlength=q * width)[flat].reshape(q, d).astype(np.float64)
    relevant = np.bincount(flat, weights=relf.ravel(), minlength=q * width)[flat].reshape(q, d)
    col = np.arange(d)[None, :]
    start = np.ones((q, d), dtype=bool)
    start[:, 1:] = g[:, 1:] != g[:, :-1]
    first = np.maximum.accumulate(np.where(start, col, 0), axis=1)
    excl = np.concatenate([np.zeros((q, 1)), np.cumsum(relf, axis=1)], axis=1)
    before = np.take_along_axis(excl, first, axis=1)
    return TieStats(size, relevant, before, (col - first + 1).astype(np.float64))


def first_relevant_probability(stats: TieStats) -> np.ndarray:
    """``(q, d)`` probability that the first relevant document sits at each slot.

    Over uniformly random orders inside tie groups: 0 after a group with a relevant
    document; inside the first such group (n documents, r relevant), offset j:

    .. math::

        P = \\frac{\\binom{n-j+1}{r}}{\\binom{n}{r}} \\cdot \\frac{r}{n-j+1}
    """
    from scipy.special import gammaln

    n, r, j = stats.size, stats.relevant, stats.offset
    a = n - j + 1

    def log_comb(top: np.ndarray, k: np.ndarray) -> np.ndarray:
        return gammaln(top + 1) - gammaln(k + 1) - gammaln(np.maximum(top - k, 0) + 1)

    ok = (stats.before == 0) & (r > 0) & (a >= r)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.exp(log_comb(a, r) - log_comb(n, r)) * r / a
    return np.where(ok, p, 0.0)
