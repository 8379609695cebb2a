r"""Multiple comparisons across metrics or pairs: Holm (FWER) and Benjamini-Hochberg (FDR).

Several A/B metrics, or the pairs of a multileaving experiment, are several tests; reading
each at ``alpha`` inflates the chance of some false positive. Adjusted p-values are compared
with ``alpha`` as usual:

* Holm (1979, *Scand. J. Statist.* 6:65-70), step-down, controls the family-wise error rate
  under any dependence (the same adjustment as :func:`onlineeval.stats.paired.holm`, here
  vectorised over leading axes);
* Benjamini and Hochberg (1995, *JRSS B* 57:289-300), step-up, controls the false discovery
  rate for independent or positively dependent tests.

With :math:`p_{(1)} \le \dots \le p_{(m)}` the sorted finite p-values of one family,

.. math::

    \tilde p^{Holm}_{(j)} = \min\Bigl(1, \max_{i \le j} (m - i + 1)\,p_{(i)}\Bigr),\qquad
    \tilde p^{BH}_{(j)} = \min\Bigl(1, \min_{i \ge j} \frac{m}{i}\,p_{(i)}\Bigr).

Families lie on the last axis (any leading shape: replicates x days); NaN p-values (undefined
tests) stay NaN and do not count in :math:`m`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError, must_be_one_of
from onlineeval.stats._checks import check_alpha

__all__ = ["MULTIPLE_METHODS", "adjust_pvalues", "reject_adjusted"]

MULTIPLE_METHODS = ("holm", "bh")


def adjust_pvalues(pvalues: ArrayLike, method: str = "holm") -> NDArray[np.float64]:
    """Adjusted p-values of each family (last axis), in the input order.

    Parameters
    ----------
    pvalues:
        Shape ``(..., m)``: one family of ``m`` tests per leading index; values in [0, 1] or NaN.
    method:
        ``"holm"`` (default) or ``"bh"`` (Benjamini-Hochberg).
    """
    if method not in MULTIPLE_METHODS:
        raise InputError(must_be_one_of(MULTIPLE_METHODS, method, "method"))
    try:
        p = np.array(pvalues, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise InputError("pvalues: expected an array of p-values") from None
    if p.ndim == 0:
        raise InputError("pvalues: expected the tests of a family on the last axis, got a scalar")
    ok = ~np.isnan(p)
    if ((p[ok] < 0) | (p[ok] > 1)).any():
        raise InputError("pvalues: p-values must lie in [0, 1]")
    if p.shape[-1] == 0:
        return p
    order = np.argsort(p, axis=-1, kind="stable")  # NaN sort last
    ps = np.take_along_axis(p, order, axis=-1)
    m = ok.sum(axis=-1, keepdims=True).astype(np.float64)
    i = np.arange(1, p.shape[-1] + 1, dtype=np.float64)
    if method == "holm":
        adj = np.fmax.accumulate((m - i + 1.0) * ps, axis=-1)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = m / i * ps
        adj = np.flip(np.fmin.accumulate(np.flip(scaled, axis=-1), axis=-1), axis=-1)
    adj = np.minimum(adj, 1.0)
    adj = np.where(np.isnan(ps), np.nan, adj)
    out = np.empty_like(adj)
    np.put_along_axis(out, order, adj, axis=-1)
    return out


def reject_adjusted(pvalues: ArrayLike, alpha: float = 0.05, method: str = "holm") -> NDArray[np.bool_]:
    """Decisions of the procedure: ``adjusted p <= alpha`` (False for NaN), same shape as ``pvalues``.

    Holm's and Benjamini-Hochberg's rejections are exactly the tests whose adjusted p-value
    is at most ``alpha``. Default ``alpha`` 0.05, ``method`` ``"holm"``.
    """
    a = check_alpha(alpha)
    adj = adjust_pvalues(pvalues, method)
    with np.errstate(invalid="ignore"):
        return np.asarray(adj <= a)
