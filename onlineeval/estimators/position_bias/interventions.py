"""Examination from randomisation experiments: swap interventions and RandTop-n."""

from __future__ import annotations

import numpy as np

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators.base import LoggedData
from onlineeval.estimators.position_bias._core import (
    FloatArray,
    PositionBiasEstimate,
    _finish,
    _groups,
    _positive_int,
)

__all__ = ["estimate_randtop", "estimate_swap"]


def estimate_swap(data: LoggedData) -> PositionBiasEstimate:
    r"""Relative examination from swap interventions (Joachims et al., WSDM 2017).

    Finds, for every query, pairs of distinct logged lists that are equal except that the
    documents at slots 0 and ``j`` are exchanged, and returns

    .. math::

        \frac{\hat\theta_j}{\hat\theta_0} =
            \frac{\sum_{(A,B)\,\text{swap at }j} \bar c^A_j + \bar c^B_j}
                 {\sum_{(A,B)\,\text{swap at }j} \bar c^A_0 + \bar c^B_0},

    with :math:`\bar c^L_s` the click-through rate of list ``L`` at slot ``s`` (so
    unequal numbers of impressions of ``A`` and ``B`` do not bias it). Consistent under
    PBM whenever the choice between ``A`` and ``B`` does not depend on the user.

    Raises :class:`InputError` when the log holds no swap pair, or none for some slot.
    """
    k = data.k
    lists, g = _groups(np.concatenate([data.query[:, None], data.shown], axis=1))
    n_g = np.bincount(g, minlength=lists.shape[0]).astype(np.float64)
    ctr = np.stack([np.bincount(g, data.clicks[:, j], lists.shape[0]) for j in range(k)], axis=1) / n_g[:, None]
    num = np.zeros(k)
    den = np.zeros(k)
    used = np.zeros(lists.shape[0], dtype=bool)
    in_pair = np.zeros((lists.shape[0], k), dtype=bool)  # list L is in a swap pair at slot j
    n_pairs = 0
    n_lists = lists.shape[0]
    # every distinct list with slots 0 and j exchanged, looked up among the distinct lists
    swapped = []
    for j in range(1, k):  # loop over slots
        sw = lists.copy()
        sw[:, 1], sw[:, 1 + j] = lists[:, 1 + j], lists[:, 1]
        swapped.append(sw)
    _, code = _groups(np.concatenate([lists, *swapped], axis=0))
    list_of_code = np.full(int(code.max()) + 1, -1, dtype=np.int64)
    list_of_code[code[:n_lists]] = np.arange(n_lists)
    for j in range(1, k):
        partner = list_of_code[code[j * n_lists:(j + 1) * n_lists]]
        a = np.flatnonzero((partner > np.arange(n_lists)) & (lists[:, 1 + j] >= 0) & (lists[:, 1] != lists[:, 1 + j]))
        b = partner[a]
        num[j] += float((ctr[a, j] + ctr[b, j]).sum())
        den[j] += float((ctr[a, 0] + ctr[b, 0]).sum())
        used[a] = used[b] = True
        in_pair[a, j] = in_pair[b, j] = True
        n_pairs += int(a.size)
    if n_pairs == 0:
        raise InputError(
            "position bias (swap): the log holds no swap intervention (two lists of one query that differ "
            "only by exchanging the documents at slot 1 and one other slot)",
            data.source,
        )
    num[0] = den[0] = 1.0  # slot 0 is the reference: theta_0 / theta_0 = 1
    theta = _finish(num, np.where(np.arange(k) == 0, 1.0, den), "swap", "swap intervention with clicks", data.source)
    rows = used[g]
    # influence of theta_j = num_j / den_j: (num_j - theta_j den_j) / den_j, the list CTRs being means
    # over their impressions: impression i of list L in a pair at slot j adds
    # ((c_ij - ctr_Lj) - theta_j (c_i0 - ctr_L0)) / (n_L den_j)
    scale = np.where(in_pair, 1.0 / np.where(den > 0, den, 1.0)[None, :], 0.0) / n_g[:, None]  # (lists, k)
    clicks = data.clicks.astype(np.float64)
    centred = clicks - ctr[g]
    resid = centred - theta[None, :] * centred[:, :1]
    n = data.n

    def linearisation(grad: FloatArray) -> FloatArray:
        return n * (resid * scale[g] * np.asarray(grad, dtype=np.float64)[None, :]).sum(axis=1)

    return PositionBiasEstimate(theta, "swap", n_pairs, int(rows.sum()), clicks[rows].sum(axis=0),
                                linearisation=linearisation)


def estimate_randtop(data: LoggedData, n_top: int | None = None) -> PositionBiasEstimate:
    r"""Relative examination from RandTop-n logs (uniform shuffles of the top ``n``).

    .. math:: \frac{\hat\theta_j}{\hat\theta_0} = \frac{\sum_i c_{ij}}{\sum_i c_{i0}},
        \qquad j < n,

    over the impressions of the queries whose top ``n`` is one fixed set of documents in
    varying order. Unbiased numerator and denominator (each document is equally likely at
    every slot, so :math:`E[c_{ij}] = \theta_j \bar\alpha_q`); the method trusts that the
    orders were drawn uniformly (a swap log also shows one set in several orders, but
    not uniformly, and would give a biased answer).

    Parameters
    ----------
    data:
        The log; only its top ``n_top`` slots are used.
    n_top:
        The shuffled depth ``n`` (default: all ``k`` slots). Slots below it are not
        identified and come back as NaN.

    Raises :class:`InputError` when some query shows different document sets in its top
    ``n`` or no query was shown in two orders.
    """
    n = data.k if n_top is None else _positive_int(n_top, "n_top")
    if n > data.k:
        raise ConfigError(("n_top",), f"must be at most the list length {data.k}, got {n}")
    top = data.shown[:, :n]
    if (top < 0).any():
        raise InputError(f"position bias (randtop): some lists have fewer than {n} documents", data.source)
    sets, _ = _groups(np.concatenate([data.query[:, None], np.sort(top, axis=1)], axis=1))
    sets_per_q = np.bincount(np.unique(sets[:, 0], return_inverse=True)[1].reshape(-1))
    if (sets_per_q > 1).any():
        raise InputError(
            f"position bias (randtop): some queries show different document sets in their top {n}; RandTop-n "
            "needs every list of a query to be a shuffle of one fixed set",
            data.source,
        )
    orders, _ = _groups(np.concatenate([data.query[:, None], top], axis=1))
    uq, per_q = np.unique(orders[:, 0], return_counts=True)
    shuffled_q = uq[per_q >= 2]
    if shuffled_q.size == 0:
        raise InputError(
            "position bias (randtop): no query was shown in two different orders; the log holds no randomisation",
            data.source,
        )
    rows = np.isin(data.query, shuffled_q)
    clicks = data.clicks[rows, :n].sum(axis=0).astype(np.float64)
    theta_top = _finish(clicks, np.ones(n), "randtop", "click", data.source)
    theta = np.full(data.k, np.nan)
    theta[:n] = theta_top
    # influence of theta_j = C_j / C_0: n (c_ij - theta_j c_i0) / C_0 on the rows used (slots < n)
    c = data.clicks[:, :n].astype(np.float64)
    resid = np.where(rows[:, None], c - theta_top[None, :] * c[:, :1], 0.0) / clicks[0]
    n_all = data.n

    def linearisation(grad: FloatArray) -> FloatArray:
        return n_all * resid @ np.asarray(grad, dtype=np.float64)[:n]

    return PositionBiasEstimate(theta, "randtop", int(shuffled_q.size), int(rows.sum()), clicks,
                                linearisation=linearisation)
