"""Small numpy helpers shared by the metric kernels (padded ``(q, d)`` arrays)."""

from __future__ import annotations

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
