r"""PBM-IPS: the counterfactual learning-to-rank estimator under the position-based model
(Wang, Bendersky, Metzler and Najork, SIGIR 2016; Joachims, Swaminathan and Schnabel,
WSDM 2017), in its policy-aware form for top-``k`` lists (Oosterhuis and de Rijke,
CIKM 2020).

Estimand and assumption
-----------------------
Clicks follow the position-based model: a document ``d`` shown at slot ``j`` for query
``q`` is clicked with probability :math:`\theta_j\alpha_{qd}`, independently of the other
slots. The target (a deterministic ranker with list :math:`t_q`) then has the value of an
*additive* reward :math:`R = c_0 + \sum_s w_s c_s`

.. math::

    V = c_0 + \mathbb E_q \sum_{s<k} w_s\,\theta_s\,\alpha_{q,t_q(s)}.

A click on ``d`` is evidence of :math:`\alpha_{qd}` discounted by how often ``d`` was
examined under the logger, :math:`\rho_{qd} = \sum_j \mu(d \text{ at } j \mid q)\,\theta_j`,
so each click on a document the target shows at slot :math:`s = t^{-1}(d)` counts

.. math::

    \hat V = c_0 + \frac1n \sum_{i=1}^n \sum_{j:\,c_{ij}=1,\ d_{ij}\in t_{q_i}}
        \frac{w_{s}\,\theta_{s}}{\rho_{q_i d_{ij}}}, \qquad s = t_{q_i}^{-1}(d_{ij}),

and 0 for clicked documents the target does not show in its top ``k``. Three choices of
:math:`\rho` (option ``click_propensity``):

``"empirical"`` (default)
    :math:`\hat\rho_{qd} = \frac1{n_q}\sum_{i: q_i = q}\theta_{\mathrm{slot}_i(d)}` (0
    where ``d`` was not shown): the logger's position distribution replaced by its
    frequency in the log. With a deterministic logger it is exactly :math:`\theta_j` of
    the slot ``d`` always has, so the estimate is the classic
    :math:`\sum w_s\theta_s/\theta_j`, exactly unbiased for the documents the logger
    shows (a target document it never shows is a support violation and adds nothing); with a randomised logger it
    is a ratio of averages, consistent (bias :math:`O(1/n_q)`) whenever every document
    the target shows has a positive probability of being shown somewhere in the logger's
    top ``k`` (support level ``"any"``).
``"logger"``
    The exact :math:`\rho_{qd} = \sum_j M_{qdj}\theta_j` from the logging policy's
    item-position marginals :math:`M_{qdj} = P(\text{slot } j \text{ shows } d \mid q)`
    (``data.logger.item_position_marginals(query) -> (n, m, k)``, document ids
    ``0..m-1``, as the policies of :mod:`simulations.policies` give): exactly unbiased
    under support level ``"any"`` (Oosterhuis and de Rijke 2020).
``"logged"``
    :math:`\rho = \theta_j` of the slot the click was logged at (Joachims et al. 2017's
    weight :math:`\theta_s/\theta_j`): exactly unbiased when the logger shows every
    document of the target's top ``k`` on *every* impression (in any order); when it
    shows one only sometimes, the estimate is scaled down by that probability.

Not defined for first-click rewards (the reciprocal rank or abandonment depend on the
documents above, which PBM-IPS does not reweight). Under cascade clicks the examination
of a slot depends on the documents above it, so the estimate is biased (declared).

The examination probabilities :math:`\theta` are given (option ``examination``, only
their ratios matter) or estimated from the log itself
(:mod:`onlineeval.estimators.position_bias`, option ``estimate_with``); an estimated
:math:`\hat\theta` makes the estimate consistent, not unbiased, and its error is not in
the plug-in interval (use :func:`~onlineeval.estimators.position_bias.pipeline_bootstrap`).
``Terms.notes`` records the examination used and whether it was estimated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators.base import (
    Estimator,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)
from onlineeval.estimators.position_bias import METHODS, _groups, estimate_examination

__all__ = ["PBMIPS", "click_propensities", "target_slots"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

CLICK_PROPENSITIES = ("empirical", "logger", "logged")


def target_slots(data: LoggedData, target: Target) -> IntArray:
    """``(n, k)`` the slot at which ``target`` shows each logged document in its top ``k``
    for the impression's query (``-1``: not in the target's top ``k``, or an empty slot)."""
    rankings = getattr(target, "rankings", None)
    if rankings is None:
        raise InputError(f"pbm_ips needs a deterministic target with rankings(query); "
                         f"{getattr(target, 'name', 'target')!r} has none", data.source)
    uq, inv = np.unique(data.query, return_inverse=True)
    inv = inv.reshape(-1)
    k = data.k
    t = np.asarray(rankings(uq), dtype=np.int64)
    if t.ndim != 2 or t.shape[0] != uq.size:
        raise InputError(f"target {getattr(target, 'name', 'target')!r}: rankings must be a (queries, k) matrix",
                         data.source)
    t = t[:, :k]
    if t.shape[1] < k:
        t = np.concatenate([t, np.full((t.shape[0], k - t.shape[1]), -1, dtype=np.int64)], axis=1)
    tq, ts = np.nonzero(t >= 0)
    rows, cols = np.nonzero(data.valid)
    # codes of (query, document) over the target's and the log's pairs together
    _, code = _groups(np.stack([np.concatenate([tq, inv[rows]]),
                                np.concatenate([t[tq, ts], data.shown[rows, cols]])], axis=1))
    slot_of = np.full(int(code.max()) + 1 if code.size else 0, k, dtype=np.int64)
    np.minimum.at(slot_of, code[: tq.size], ts)  # a repeated target document keeps its first slot
    slot_of[slot_of == k] = -1
    out = np.full(data.shown.shape, -1, dtype=np.int64)
    out[rows, cols] = slot_of[code[tq.size:]]
    return out


def click_propensities(data: LoggedData, theta: FloatArray, kind: str = "empirical") -> FloatArray:
    r"""``(n, k)`` examination propensity :math:`\rho` of each shown slot (1 on empty slots).

    ``"empirical"``: :math:`\hat\rho_{qd} = \frac1{n_q}\sum_{i:q_i=q}\theta_{\mathrm{slot}_i(d)}`;
    ``"logger"``: :math:`\rho_{qd} = \sum_j M_{qdj}\theta_j` from ``data.logger``'s
    item-position marginals; ``"logged"``: :math:`\theta_j` of the slot itself (see the
    module docstring).
    """
    valid = data.valid
    slot_theta = np.where(valid, np.asarray(theta, dtype=np.float64)[None, : data.k], 1.0)
    if kind == "logged":
        return slot_theta
    if kind == "logger":
        return _logger_propensities(data, np.asarray(theta, dtype=np.float64)[: data.k])
    if kind != "empirical":
        raise ConfigError(("click_propensity",), f"must be one of {', '.join(CLICK_PROPENSITIES)}, got {kind!r}")
    _, qinv, n_q = np.unique(data.query, return_inverse=True, return_counts=True)
    qinv = qinv.reshape(-1)
    rows, cols = np.nonzero(valid)
    _, pair = _groups(np.stack([qinv[rows], data.shown[rows, cols]], axis=1))
    total = np.bincount(pair, slot_theta[rows, cols])
    out = np.ones(data.shown.shape)
    out[rows, cols] = total[pair] / n_q[qinv[rows]]
    return out


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


@register_estimator
@dataclass(frozen=True)
class PBMIPS(Estimator):
    """PBM-IPS (see the module docstring).

    Parameters
    ----------
    examination:
        ``k`` examination probabilities :math:`\\theta_0, \\dots, \\theta_{k-1}` (any
        positive multiple: only ratios matter; longer tuples are cut to the log's ``k``),
        or ``None`` (default) to estimate them from the log being evaluated.
    estimate_with:
        How to estimate them when ``examination`` is ``None``: ``"swap"``, ``"randtop"``,
        ``"harvest"`` (each distinct list of a query as its own ranker), ``"em"`` or
        ``"auto"`` (default; see
        :func:`~onlineeval.estimators.position_bias.estimate_examination`).
    click_propensity:
        ``"empirical"`` (default), ``"logger"`` or ``"logged"`` (see the module docstring).
    """

    name = "pbm_ips"
    assumption = (
        "position-based clicks (examination depends on the slot only), additive rewards; support: every document "
        "the target shows in its top k can be shown somewhere in the logger's top k"
    )
    needs = ()
    rewards = ("additive",)
    support_level = "any"
    unbiased_under = (("pbm", "additive"),)
    biased_under = (("cascade", "additive"),)

    examination: tuple[float, ...] | None = None
    estimate_with: str = "auto"
    click_propensity: str = "empirical"

    def __post_init__(self) -> None:
        if self.examination is not None:
            try:
                theta = tuple(float(x) for x in np.asarray(self.examination, dtype=np.float64).reshape(-1))
            except (TypeError, ValueError):
                raise ConfigError(("estimator", "examination"), "must be a list of positive numbers") from None
            if not theta or not all(math.isfinite(x) and x > 0 for x in theta):
                raise ConfigError(("estimator", "examination"),
                                  f"must be positive finite examination probabilities, got {list(theta)}")
            object.__setattr__(self, "examination", theta)
        if self.estimate_with not in ("auto", *METHODS):
            raise ConfigError(("estimator", "estimate_with"),
                              f"must be one of auto, {', '.join(METHODS)}; got {self.estimate_with!r}")
        if self.click_propensity not in CLICK_PROPENSITIES:
            raise ConfigError(("estimator", "click_propensity"),
                              f"must be one of {', '.join(CLICK_PROPENSITIES)}; got {self.click_propensity!r}")

    @classmethod
    def check_instances(cls, world: Any) -> list[Estimator]:
        """In a world with known examination probabilities (PBM): one instance with them,
        one that estimates them from the log by ``harvest`` (consistent, not unbiased; at
        the suite's size, 24 logs of 2,500 impressions, its bias is far below 4 SE) and,
        when the world's logger gives item-position marginals, one with the exact
        ``"logger"`` propensities. Otherwise one instance estimating them (``"auto"``)."""
        exam = getattr(world, "examination", None)
        if exam is not None:
            k = int(getattr(world, "k", len(exam)))
            theta = tuple(float(x) for x in np.asarray(exam, dtype=np.float64)[:k])
            out: list[Estimator] = [cls(examination=theta), cls(estimate_with="harvest")]
            if hasattr(getattr(world, "logger", None), "item_position_marginals"):
                out.append(cls(examination=theta, click_propensity="logger"))
            return out
        return [cls()]

    def resolve_examination(self, data: LoggedData) -> tuple[FloatArray, dict[str, Any]]:
        """The ``(k,)`` examination used on ``data`` and the notes describing it."""
        if self.examination is not None:
            if len(self.examination) < data.k:
                raise InputError(f"pbm_ips: {len(self.examination)} examination probabilities given, "
                                 f"lists have {data.k} slots", data.source)
            theta = np.asarray(self.examination[: data.k], dtype=np.float64)
            return theta, {"examination": [float(x) for x in theta], "examination_estimated": False}
        est = estimate_examination(data, self.estimate_with)
        theta = np.asarray(est.examination, dtype=np.float64)
        if not (np.isfinite(theta).all() and (theta > 0).all()):
            raise InputError(
                f"pbm_ips: the examination estimated by {est.method} is not positive at every slot "
                f"({[float(x) for x in theta]}); pass known examination probabilities", data.source)
        info = est.to_dict()
        info.pop("examination")
        return theta, {"examination": [float(x) for x in theta], "examination_estimated": True,
                       "examination_method": est.method, "estimation": info}

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        theta, notes = self.resolve_examination(data)
        slots = target_slots(data, target)
        rho = click_propensities(data, theta, self.click_propensity)
        in_target = slots >= 0
        s = np.maximum(slots, 0)
        w = reward.position_weights(data.k)
        ratio = np.where(in_target, theta[s] / rho, 0.0)
        num = (data.clicks * ratio * w[s]).sum(axis=1)
        notes["click_propensity"] = self.click_propensity
        return Terms(num=num, weights=ratio, notes=notes)
