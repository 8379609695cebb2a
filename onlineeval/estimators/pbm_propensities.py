r"""PBM-IPS (:mod:`onlineeval.estimators.pbm_ips`): the click propensities :math:`\rho` (``"empirical"``,
``"logger"``, ``"logged"``), per logged slot and per (query, document) pair."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import ConfigError, InputError, must_be_one_of
from onlineeval.estimators.base import LoggedData
from onlineeval.estimators.pbm_pairs import _Pairs
from onlineeval.estimators.position_bias import _groups

FloatArray = NDArray[np.float64]

CLICK_PROPENSITIES = ("auto", "empirical", "logger", "logged")


def resolve_click_propensity(data: LoggedData, kind: str) -> str:
    """``"auto"``: ``"logger"`` when ``data.logger`` gives item-position marginals, else
    ``"empirical"``; any other kind is returned as is."""
    if kind != "auto":
        return kind
    return "logger" if callable(getattr(data.logger, "item_position_marginals", None)) else "empirical"


def click_propensities(data: LoggedData, theta: FloatArray, kind: str = "empirical") -> FloatArray:
    r"""``(n, k)`` examination propensity :math:`\rho` of each shown slot (1 on empty slots).

    ``"auto"``: ``"logger"`` when ``data.logger`` has item-position marginals, else
    ``"empirical"``; ``"empirical"``: :math:`\hat\rho_{qd} = \frac1{n_q}\sum_{i:q_i=q}\theta_{\mathrm{slot}_i(d)}`;
    ``"logger"``: :math:`\rho_{qd} = \sum_j M_{qdj}\theta_j` from ``data.logger``'s
    item-position marginals; ``"logged"``: :math:`\theta_j` of the slot itself (see the
    :mod:`~onlineeval.estimators.pbm_ips` docstring).
    """
    kind = resolve_click_propensity(data, kind)
    valid = data.valid
    slot_theta = np.where(valid, np.asarray(theta, dtype=np.float64)[None, : data.k], 1.0)
    if kind == "logged":
        return slot_theta
    if kind == "logger":
        return _logger_propensities(data, np.asarray(theta, dtype=np.float64)[: data.k])
    if kind != "empirical":
        raise ConfigError(("click_propensity",), must_be_one_of(CLICK_PROPENSITIES, kind))
    _, qinv, n_q = np.unique(data.query, return_inverse=True, return_counts=True)
    qinv = qinv.reshape(-1)
    rows, cols = np.nonzero(valid)
    _, pair = _groups(np.stack([qinv[rows], data.shown[rows, cols]], axis=1))
    total = np.bincount(pair, slot_theta[rows, cols])
    out = np.ones(data.shown.shape)
    out[rows, cols] = total[pair] / n_q[qinv[rows]]
    return out


def _rho_pairs(data: LoggedData, theta: FloatArray, pairs: _Pairs) -> FloatArray:
    r"""``(n_codes,)`` the ``"empirical"`` propensity of every pair:
    :math:`\frac1{n_q}\sum_j N_{qdj}\theta_j` (0 for pairs the log never shows)."""
    n_q = np.bincount(pairs.inv, minlength=int(pairs.t.shape[0])).astype(np.float64)
    total = np.einsum("cj,j->c", pairs.slot_counts(data), np.asarray(theta, dtype=np.float64)[: data.k])
    return total / n_q[pairs.pair_query]


def _empirical_rho(data: LoggedData, theta: FloatArray, pairs: _Pairs) -> FloatArray:
    """The ``"empirical"`` propensities of :func:`click_propensities` from the pair codes of
    :func:`~onlineeval.estimators.pbm_pairs._target_pairs` (no second grouping of the log)."""
    return pairs.per_position(data, _rho_pairs(data, theta, pairs), 1.0)


def _logger_rho_pairs(data: LoggedData, theta: FloatArray, pairs: _Pairs) -> FloatArray:
    """``(n_codes,)`` the ``"logger"`` propensity :math:`\\sum_j M_{qdj}\\theta_j` of every pair
    (errors as :func:`click_propensities`)."""
    marginals = getattr(data.logger, "item_position_marginals", None)
    if marginals is None:
        raise InputError("pbm_ips with click_propensity 'logger' needs the logging policy (data.logger) with "
                         "item_position_marginals(query); use 'empirical' for a log without one", data.source)
    uq, _ = data.query_groups
    m_all = np.asarray(marginals(uq), dtype=np.float64)
    if m_all.ndim != 3 or m_all.shape[0] != uq.size or m_all.shape[2] < data.k:
        raise InputError(f"item_position_marginals: expected ({uq.size}, m, >= {data.k}), got {m_all.shape}",
                         data.source)
    rho_qd = np.einsum("qmj,j->qm", m_all[:, :, : data.k], np.asarray(theta, dtype=np.float64)[: data.k])
    inside = (pairs.pair_doc >= 0) & (pairs.pair_doc < rho_qd.shape[1])
    rho = np.where(inside, rho_qd[pairs.pair_query, np.where(inside, pairs.pair_doc, 0)], 0.0)
    bad = (pairs.slot_counts(data).sum(axis=1) > 0) & ~(rho > 0)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(pairs.per_position(data, bad, False))[0])
        raise InputError(f"pbm_ips: the logger's marginals give logged document {int(data.shown[i, j])} of query "
                         f"{int(data.query[i])} probability 0 of being shown (impression {i})", data.source)
    return rho


def _logger_propensities(data: LoggedData, theta: FloatArray) -> FloatArray:
    marginals = getattr(data.logger, "item_position_marginals", None)
    if marginals is None:
        raise InputError("pbm_ips with click_propensity 'logger' needs the logging policy (data.logger) with "
                         "item_position_marginals(query); use 'empirical' for a log without one", data.source)
    uq, inv = np.unique(data.query, return_inverse=True)
    m_all = np.asarray(marginals(uq), dtype=np.float64)
    if m_all.ndim != 3 or m_all.shape[0] != uq.size or m_all.shape[2] < data.k:
        raise InputError(f"item_position_marginals: expected ({uq.size}, m, >= {data.k}), got {m_all.shape}",
                         data.source)
    rho_qd = m_all[:, :, : data.k] @ theta  # (queries, m)
    valid = data.valid
    inside = valid & (data.shown < rho_qd.shape[1])
    rho = np.where(inside, rho_qd[inv.reshape(-1)[:, None], np.where(inside, data.shown, 0)], 0.0)
    bad = valid & ~(rho > 0)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise InputError(f"pbm_ips: the logger's marginals give logged document {int(data.shown[i, j])} of query "
                         f"{int(data.query[i])} probability 0 of being shown (impression {i})", data.source)
    return np.where(valid, rho, 1.0)
