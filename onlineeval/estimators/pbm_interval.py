r"""PBM-IPS (:mod:`onlineeval.estimators.pbm_ips`): the interval's terms: the value's gradient in the
examination (for the sandwich with estimated examination) and the ``"empirical"`` terms linearised in
:math:`\hat\rho` (the module docstring of :mod:`~onlineeval.estimators.pbm_ips`, "Interval of the empirical
propensity" and "Interval with estimated examination")."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from onlineeval.estimators.base import LoggedData
from onlineeval.estimators.pbm_pairs import _clicked_positions, _Pairs

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def value_gradient(data: LoggedData, theta: FloatArray, kind: str, w: FloatArray, pairs: _Pairs,
                   rho_pair: FloatArray | None = None) -> FloatArray:
    r"""``(k,)`` :math:`\partial\hat V/\partial\theta_l` of the PBM-IPS value at ``theta``.

    With :math:`\rho = F^\top\theta` linear in :math:`\theta` (``"empirical"``:
    :math:`F_l` = share of the query's impressions showing the document at slot ``l``;
    ``"logger"``: the marginals :math:`M_{qdl}`; ``"logged"``: the indicator of the
    logged slot),

    .. math::

        \frac{\partial\hat V}{\partial\theta_l} = \frac1n\sum_{i, j:\,c_{ij}=1}
            w_s\Big(\frac{[s = l]}{\rho_{ij}} - \frac{\theta_s F_{ij,l}}{\rho_{ij}^2}\Big),

    which satisfies :math:`\nabla\hat V\cdot\theta = 0` (the value depends on ratios only).
    ``pairs``: the codes of :func:`~onlineeval.estimators.pbm_pairs._target_pairs`; ``rho_pair``: the per-pair
    propensities (``"empirical"``, ``"logger"``). Reads only the clicked slots."""
    k = data.k
    theta = np.asarray(theta, dtype=np.float64)[:k]
    rows, cols = _clicked_positions(data)
    code = pairs.codes_at(data, rows, cols)
    s = pairs.slot_of(k)[code]
    keep = s >= 0
    rows, cols, code, s = rows[keep], cols[keep], code[keep], s[keep]
    if kind == "logged":
        r = theta[cols]
    else:
        if rho_pair is None:
            raise ValueError(f"value_gradient: kind {kind!r} needs rho_pair")
        r = rho_pair[code]
    # float64 whatever the clicks: np.bincount of no values returns int64 zeros, even with (empty) float weights,
    # and the in-place subtractions below then failed on a log without a click on a target's pair
    grad = np.bincount(s, w[s] / r, k).astype(np.float64, copy=False)
    coef = w[s] * theta[s] / (r * r)
    if kind == "logged":
        grad -= np.bincount(cols, coef, k)
    elif kind == "logger":
        uq, inv = data.query_groups
        m_all = np.asarray(data.logger.item_position_marginals(uq), dtype=np.float64)  # type: ignore[union-attr]
        grad -= coef @ m_all[inv[rows], data.shown[rows, cols], :k]
    else:
        n_q = np.bincount(pairs.inv, minlength=int(pairs.t.shape[0])).astype(np.float64)
        grad -= (coef / n_q[pairs.inv[rows]]) @ pairs.slot_counts(data)[code]
    return grad / data.n


def _empirical_influence(data: LoggedData, theta: FloatArray, w: FloatArray, pairs: _Pairs, r_pair: FloatArray,
                         c_codes: IntArray, num: FloatArray) -> FloatArray:
    r"""``(n,)`` the ``"empirical"`` PBM-IPS terms linearised in :math:`\hat\rho` (:mod:`~onlineeval.estimators.pbm_ips`
    docstring, "Interval of the empirical propensity"): ``num`` (the plug-in terms) minus
    :math:`\sum_{j\,\text{shown}} r_{qd}\hat\alpha_{qd}\theta_j` plus :math:`a_q`, with
    ``r_pair`` :math:`= w_s\theta_s/\hat\rho_{qd}` (0 off the target), ``c_codes`` the pair codes
    of the clicked slots (:func:`_clicked_positions` order). Their sum per query equals the
    plug-in terms' exactly."""
    k = data.k
    e_pair = pairs.slot_counts(data) @ theta[:k]  # E_qd = sum_i theta_slot_i(d)
    c_pair = np.bincount(c_codes, minlength=pairs.n_codes).astype(np.float64)
    shown = e_pair > 0
    alpha = np.where(shown, c_pair / np.where(shown, e_pair, 1.0), 0.0)  # C_qd / E_qd
    b_pair = r_pair * alpha  # 0 off the target's pairs and on pairs never shown
    expected = pairs.per_position(data, b_pair, 0.0) @ theta[:k]
    # a_q = sum over the target's shown pairs of w_s theta_s alpha_hat = (1/n_q) sum_d r_qd C_qd
    n_q = np.bincount(pairs.inv, minlength=int(pairs.t.shape[0])).astype(np.float64)
    a_q = np.bincount(pairs.pair_query, r_pair * c_pair, int(pairs.t.shape[0])) / np.maximum(n_q, 1.0)
    return num - expected + a_q[pairs.inv]
