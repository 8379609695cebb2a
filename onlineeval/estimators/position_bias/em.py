r"""Examination by maximum likelihood under the PBM: harvested interventions (AllPairs)
and regression EM, both run on sufficient statistics.

Every EM here works on the log aggregated by distinct (query, document, slot) cells
:math:`c = (m, j)` with :math:`N_c` impressions and :math:`C_c` clicks: the E-step of an
impression depends only on its cell and click, so EM on the cell counts has exactly the
iterates of EM on the impressions (:func:`clickmodels.estimation.fit_pbm`) at a cost of
O(distinct cells) per iteration instead of O(impressions x slots).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from onlineeval.errors import ConfigError, InputError, must_be_one_of
from onlineeval.estimators.base import LoggedData
from onlineeval.estimators.position_bias._core import (
    Cells,
    FloatArray,
    IntArray,
    LazyLinearisation,
    Linearisation,
    PositionBiasEstimate,
    _cells,
    _groups,
    _multi_slot_pairs,
    _pair_positions,
    _require_identified,
    log_cache,
)
from onlineeval.estimators.position_bias.influence import (
    features_linearisation,
    pair_linearisation,
)

__all__ = ["RELEVANCE_MODELS", "estimate_em", "estimate_harvest", "pair_features"]

#: relevance models of :func:`estimate_em` (``"auto"``: ``"features"`` when the log has features)
RELEVANCE_MODELS = ("pair", "features")


def _pbm_e_step(a: FloatArray, g: FloatArray, clicks: FloatArray, skips: FloatArray) -> tuple[float, FloatArray]:
    """The E-step shared by the PBM EMs: the log-likelihood of the cells' clicks and skips under
    ``P(click) = a g`` (probabilities clipped to [PROB_EPS, 1 - PROB_EPS] in the logs only) and
    ``skips / (1 - a g)`` (0 where ``a g = 1``), the weight of a skip's posterior."""
    from clickmodels.estimation.base import PROB_EPS

    p = a * g
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_skip = np.where(p < 1.0, 1.0 / np.where(p < 1.0, 1.0 - p, 1.0), 0.0)
    pc = np.clip(p, PROB_EPS, 1.0 - PROB_EPS)
    ll = float(np.sum(clicks * np.log(pc)) + np.sum(skips * np.log1p(-pc)))
    return ll, skips * inv_skip


def _pbm_em(cells: Cells, n_pairs: int, k: int, n_sessions: int, *, pseudo: float, max_iter: int,
            tol: float) -> tuple[FloatArray, FloatArray, Any]:
    """EM for :math:`P(C=1) = \\theta_j\\alpha_m` on cell counts, from :math:`(1/2, 1/2)`.

    The E-step of :func:`clickmodels.estimation._em.examination_posteriors` [CMR15, Sec.
    4.3] once per cell (a click implies :math:`A = E = 1`; a skip has
    :math:`P(A=1\\mid C=0) = \\alpha(1-\\theta)/(1-\\alpha\\theta)` and
    :math:`P(E=1\\mid C=0) = \\theta(1-\\alpha)/(1-\\alpha\\theta)`), the M-step of
    :func:`clickmodels.estimation.fit_pbm` (with its pseudo-counts) and its driver
    :func:`clickmodels.estimation._em.run_em`. Returns ``(alpha, theta, trace)``."""
    from clickmodels.estimation._em import run_em
    from clickmodels.estimation.base import EMOptions, smoothed

    cp, cs, views, clicks = cells.pair, cells.slot, cells.views, cells.clicks
    skips = views - clicks
    pair_views = np.bincount(cp, views, n_pairs)
    slot_views = np.bincount(cs, views, k)

    def step(state: tuple[FloatArray, FloatArray]) -> tuple[tuple[FloatArray, FloatArray], float]:
        alpha, theta = state
        a, g = alpha[cp], theta[cs]
        ll, s = _pbm_e_step(a, g, clicks, skips)
        new_alpha = smoothed(np.bincount(cp, clicks + s * a * (1.0 - g), n_pairs), pair_views, pseudo)
        new_theta = smoothed(np.bincount(cs, clicks + s * g * (1.0 - a), k), slot_views, pseudo)
        return (new_alpha, new_theta), ll

    (alpha, theta), trace = run_em(n_sessions, EMOptions(max_iter=max_iter, tol=tol, pseudo=pseudo),
                                   (np.full(n_pairs, 0.5), np.full(k, 0.5)), step)
    return alpha, theta, trace


def _log_cells(data: LoggedData) -> tuple[IntArray, IntArray, IntArray, int, Cells]:
    """The log's flattened positions (pair, slot, row, number of pairs) and its cells,
    computed once per log."""
    cache = log_cache(data, "position_bias")
    pair, slot, rows, m = _pair_positions(data)
    if "cells" not in cache:
        clicked = data.clicks.reshape(-1) if pair.size == data.clicks.size else data.clicks[rows, slot]
        cache["cells"] = _cells(pair, slot, clicked, data.k)
    return pair, slot, rows, m, cache["cells"]


# ------------------------------------------------------------------------------ harvest
def estimate_harvest(
    data: LoggedData,
    ranker: ArrayLike | None = None,
    *,
    max_iter: int = 10000,
    tol: float = 1e-9,
) -> PositionBiasEstimate:
    r"""Relative examination from harvested interventions (Agarwal et al., WSDM 2019).

    The interventional set is every (query, document) pair that was shown at two or more
    different slots by two or more different rankers. With :math:`N_{mj}` impressions and
    :math:`C_{mj}` clicks of pair ``m`` at slot ``j``, the estimate maximises the AllPairs
    likelihood with one relevance per pair

    .. math::

        \ell(\theta, \alpha) = \sum_{m, j} C_{mj}\log(\theta_j\alpha_m)
            + (N_{mj} - C_{mj})\log(1 - \theta_j\alpha_m),

    by EM over the aggregated ``(pair, slot)`` counts (see the module docstring; stop
    when the relative change of :math:`\ell` is at most ``tol``; log-probabilities
    clipped as in :mod:`clickmodels.estimation`). The estimate carries the
    linearisation of the maximum likelihood (see
    :func:`~onlineeval.estimators.position_bias.influence.pair_linearisation`).

    Parameters
    ----------
    data:
        The log (all loggers' impressions together).
    ranker:
        ``(n,)`` int, which ranker/logger produced each impression. ``None``: every
        distinct list of a query counts as its own ranker.
    max_iter, tol:
        EM stopping rule (defaults 10000 and 1e-9). The likelihood keeps creeping up
        along the scale ridge :math:`(c\theta, \alpha/c)` while some relevance nears 1,
        long after the ratios :math:`\theta_j/\theta_0` have settled (on a 20,000-impression
        log the ratios at 1e-9 and 1e-12 agree to 1e-5).

    Raises :class:`InputError` when no pair was shown at two slots by two rankers, or some
    slot is not linked to slot 0 through such pairs.
    """
    k = data.k
    if ranker is None:
        cache = log_cache(data, "position_bias")
        if "list_ranker" not in cache:
            cache["list_ranker"] = _groups(np.concatenate([data.query[:, None], data.shown], axis=1))[1]
        rk = cache["list_ranker"]
    else:
        rk = np.asarray(ranker)
        if rk.shape != (data.n,) or not np.issubdtype(rk.dtype, np.integer):
            raise InputError(f"ranker: expected ({data.n},) integers (one ranker id per impression), got "
                             f"shape {rk.shape} dtype {rk.dtype}", data.source)
        rk = rk.astype(np.int64)
    pair, slot, rows, m, cells = _log_cells(data)
    multi = _multi_slot_pairs(cells.pair, cells.slot, m, k)
    # two or more rankers per pair: the smallest and largest ranker id differ
    rk_pos = rk[rows]
    r_min = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    r_max = np.full(m, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(r_min, pair, rk_pos)
    np.maximum.at(r_max, pair, rk_pos)
    multi &= r_min < r_max
    _require_identified("harvest", k, cells.pair, cells.slot, multi, data.source,
                        "harvesting needs documents that different rankers put at different slots")
    keep = multi[cells.pair]
    code = np.cumsum(multi) - 1  # interventional pairs renumbered 0..
    sub = Cells(code[cells.pair[keep]], cells.slot[keep], cells.views[keep], cells.clicks[keep])
    n_keep = int(multi.sum())
    alpha, theta, trace = _pbm_em(sub, n_keep, k, int(sub.views.sum()), pseudo=0.0, max_iter=max_iter, tol=tol)
    if not theta[0] > 0:
        raise InputError("position bias (harvest): no click at slot 1 on any interventional pair", data.source)
    def build() -> Linearisation:
        # positions of interventional pairs, mapped to the kept cells
        kept_cell = np.cumsum(keep) - 1
        pos = keep[cells.of_position]
        return pair_linearisation(sub, alpha * theta[0], theta / theta[0], rows[pos],
                                  data.clicks[rows[pos], slot[pos]], kept_cell[cells.of_position[pos]], data.n)

    lin = LazyLinearisation(build)
    n_used = int(np.count_nonzero(np.bincount(rows[multi[pair]], minlength=data.n)))
    return PositionBiasEstimate(
        theta / theta[0], "harvest", n_keep, n_used, np.bincount(sub.slot, sub.clicks, k),
        trace.iterations, trace.converged, trace.log_likelihood[-1], linearisation=lin,
    )


# ----------------------------------------------------------------------------------- em
def pair_features(data: LoggedData) -> tuple[FloatArray, IntArray]:
    """``(m, p)`` the feature vector of each (query, document) pair of the log (pair codes
    of its flattened valid positions) and the ``(v,)`` pair code of every position.

    Raises :class:`InputError` when the log carries no features, or one pair has two
    different feature vectors (naming the impression and slot)."""
    feats = getattr(data, "features", None)
    if feats is None:
        raise InputError("position bias (em, features): the log carries no features (LoggedData.features, "
                         "(n, k, p) per shown document); use relevance 'pair'", data.source)
    pair, slot, rows, m = _pair_positions(data)
    first = np.zeros(m, dtype=np.int64)
    first[pair[::-1]] = np.arange(pair.size - 1, -1, -1)
    x = np.asarray(feats[rows[first], slot[first]], dtype=np.float64)
    at_pos = feats[rows, slot]
    diff = ~np.isclose(at_pos, x[pair], rtol=1e-9, atol=1e-12).all(axis=1)
    if diff.any():
        v = int(np.flatnonzero(diff)[0])
        raise InputError(
            f"position bias (em, features): document {int(data.shown[rows[v], slot[v]])} of query "
            f"{int(data.query[rows[v]])} has other features at impression {int(rows[v])}, slot {int(slot[v]) + 1} "
            "than where it was first shown; regression EM needs one feature vector per (query, document)",
            data.source)
    return x, pair


def _xb(x: FloatArray, beta: FloatArray) -> FloatArray:
    """``x @ beta`` without BLAS (its threads stall on a busy machine for these small products)."""
    return np.einsum("ij,j->i", x, beta)


def _fit_logistic(x: FloatArray, target: FloatArray, weight: FloatArray, beta: FloatArray,
                  max_newton: int = 50) -> FloatArray:
    r"""Weighted logistic regression with soft labels by Newton's method (IRLS) from
    ``beta``: maximises :math:`\sum_m w_m[y_m\log\sigma(x_m\beta) + (1-y_m)\log(1-\sigma(x_m\beta))]`
    (a ridge of :math:`10^{-10}\sum w` on the Hessian keeps it invertible when a column is
    constant zero). Step-halving keeps the objective from decreasing."""
    def objective(b: FloatArray) -> float:
        z = _xb(x, b)
        return float(np.sum(weight * (target * z - np.logaddexp(0.0, z))))

    obj = objective(beta)
    ridge = 1e-10 * float(weight.sum()) * np.eye(x.shape[1])
    for _ in range(max_newton):
        z = _xb(x, beta)
        s = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid without overflow
        grad = np.einsum("ij,i->j", x, weight * (target - s))
        hess = np.einsum("ij,i,ik->jk", x, weight * s * (1.0 - s), x) + ridge
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while True:
            cand = beta + t * step
            new = objective(cand)
            if new >= obj - 1e-12 * abs(obj) or t < 1e-6:
                break
            t *= 0.5
        beta, gain, obj = cand, new - obj, new
        if np.max(np.abs(t * step)) < 1e-10 or gain <= 1e-14 * abs(obj):
            break
    return beta


def _regression_em(cells: Cells, x: FloatArray, k: int, n_sessions: int, *, max_iter: int,
                   tol: float, newton_steps: int = 1) -> tuple[FloatArray, FloatArray, Any]:
    r"""Regression EM (Wang et al. 2018, Alg. 1 with the exact M-step) on cell counts:
    :math:`P(C=1) = \theta_j\,\sigma(x_m^\top\beta)`. E-step as in :func:`_pbm_em`; M-step
    :math:`\theta_j` = mean posterior examination of slot ``j``, :math:`\beta` = the
    weighted logistic regression of the pairs' posterior relevance (weights
    :math:`N_m`), improved by ``newton_steps`` Newton steps from the previous
    :math:`\beta` (a generalised EM: each step raises the expected complete-data
    log-likelihood, step-halving guarantees it; the fixed point is the same maximum
    likelihood, and one step per iteration is the fastest way there). Returns
    ``(beta, theta, trace)``."""
    from clickmodels.estimation._em import run_em
    from clickmodels.estimation.base import EMOptions, smoothed

    cp, cs, views, clicks = cells.pair, cells.slot, cells.views, cells.clicks
    m = x.shape[0]
    skips = views - clicks
    pair_views = np.bincount(cp, views, m)
    slot_views = np.bincount(cs, views, k)
    seen = pair_views > 0
    xs, ws = x[seen], pair_views[seen]

    def step(state: tuple[FloatArray, FloatArray]) -> tuple[tuple[FloatArray, FloatArray], float]:
        beta, theta = state
        alpha = 0.5 * (1.0 + np.tanh(0.5 * _xb(x, beta)))
        a, g = alpha[cp], theta[cs]
        ll, s = _pbm_e_step(a, g, clicks, skips)
        rel = np.bincount(cp, clicks + s * a * (1.0 - g), m)[seen] / ws
        new_beta = _fit_logistic(xs, rel, ws, beta, max_newton=newton_steps)
        new_theta = smoothed(np.bincount(cs, clicks + s * g * (1.0 - a), k), slot_views, 0.0)
        return (new_beta, new_theta), ll

    # plain EM: beta is a regression's coefficients, not probabilities (run_em's acceleration extrapolates within
    # [0, 1]), and each step is a generalised one (Newton steps)
    (beta, theta), trace = run_em(n_sessions, EMOptions(max_iter=max_iter, tol=tol, pseudo=0.0, accelerate=False),
                                  (np.zeros(x.shape[1]), np.full(k, 0.5)), step)
    return beta, theta, trace


def estimate_em(
    data: LoggedData,
    *,
    relevance: str = "auto",
    intercept: bool = True,
    max_iter: int = 500,
    tol: float = 1e-8,
    pseudo: float = 0.0,
) -> PositionBiasEstimate:
    r"""Relative examination by regression EM on a regular log (Wang, Golbandi, Bendersky,
    Metzler and Najork, WSDM 2018, "Position bias estimation for unbiased learning to
    rank in personal search").

    Fits :math:`P(C = 1 \mid q, d, j) = \theta_j\,\alpha_{qd}` by EM on the log's
    (query, document, slot) counts and returns :math:`\hat\theta_j/\hat\theta_0`. The
    relevance :math:`\alpha_{qd}`:

    ``"features"``
        The paper's regression: :math:`\alpha_{qd} = \sigma(x_{qd}^\top\beta)` with the
        feature vectors :math:`x_{qd}` of ``data.features`` (plus an intercept column when
        ``intercept``). Each M-step sets :math:`\theta_j` to the mean posterior examination
        of slot ``j`` and fits :math:`\beta` by a weighted logistic regression (Newton /
        IRLS) of the posterior relevance :math:`P(R = 1 \mid c, q, d, j)` of every pair,
        weighted by its impressions: the exact M-step of which the paper's sampled labels
        and gradient-boosted trees are a stochastic version. Relevance is pooled across
        pairs through :math:`\beta`, so documents shown once still inform
        :math:`\theta`; identification comes from the features (no pair needs to be shown
        at two slots). :math:`\theta_0` itself is identified here (the sigmoid is not
        scale-equivariant); only the ratios are returned.
    ``"pair"``
        One free relevance per (query, document) (the M-step of
        :func:`clickmodels.estimation.fit_pbm`, same iterates, same stopping rule):
        identified only through pairs the log shows at several slots, and with few
        impressions per pair the incidental relevances bias :math:`\hat\theta`.
    ``"auto"`` (default)
        ``"features"`` when the log carries features, else ``"pair"``.

    Parameters
    ----------
    data:
        The log; empty slots must trail.
    relevance:
        ``"auto"``, ``"features"`` or ``"pair"`` (above).
    intercept:
        ``"features"`` only: add a constant column to the features (default True).
    max_iter, tol:
        EM stopping rule (defaults 500 and 1e-8, relative change of the log-likelihood;
        the ratios settle well before it, see :func:`estimate_harvest`).
    pseudo:
        ``"pair"`` only: Beta pseudo-count of every M-step (default 0: the maximum
        likelihood; a positive value shrinks rarely seen pairs' relevance towards 1/2 and
        biases :math:`\hat\theta`).

    Raises :class:`InputError` when (``"pair"``) no (query, document) pair was shown at
    two slots, or some slot is not linked to slot 0 through such pairs, or
    (``"features"``) the log has no features or some slot was never shown or never
    clicked.
    """
    if relevance not in ("auto", *RELEVANCE_MODELS):
        raise ConfigError(("relevance",), must_be_one_of(("auto", *RELEVANCE_MODELS), relevance))
    if relevance == "auto":
        relevance = "features" if getattr(data, "features", None) is not None else "pair"
    k = data.k
    _, slot, rows, m, cells = _log_cells(data)
    clicked = data.clicks.reshape(-1) if rows.size == data.clicks.size else data.clicks[rows, slot]
    if relevance == "pair":
        multi = _multi_slot_pairs(cells.pair, cells.slot, m, k)
        _require_identified("em", k, cells.pair, cells.slot, multi, data.source,
                            "a deterministic logger shows each document at one slot per query")
        alpha, gamma, trace = _pbm_em(cells, m, k, data.n, pseudo=float(pseudo), max_iter=max_iter, tol=tol)
        if not gamma[0] > 0:
            raise InputError("position bias (em): the fitted examination of slot 1 is 0 (no clicks there)",
                             data.source)
        lin = LazyLinearisation(lambda: pair_linearisation(cells, alpha * gamma[0], gamma / gamma[0], rows, clicked,
                                                           cells.of_position, data.n))
        return PositionBiasEstimate(
            gamma / gamma[0], "em", int(multi.sum()), data.n, data.clicks.sum(axis=0).astype(np.float64),
            trace.iterations, trace.converged, trace.log_likelihood[-1], relevance="pair", linearisation=lin,
        )
    x, _ = pair_features(data)
    if intercept:
        x = np.concatenate([x, np.ones((m, 1))], axis=1)
    slot_clicks = np.bincount(cells.slot, cells.clicks, k)
    if not (slot_clicks > 0).all():
        missing = [j + 1 for j in range(k) if not slot_clicks[j] > 0]
        raise InputError(f"position bias (em, features): no click at slot(s) {', '.join(map(str, missing))} "
                         "(1-based); their examination is not identified from this log", data.source)
    beta, theta, trace = _regression_em(cells, x, k, data.n, max_iter=max_iter, tol=tol)
    lin = LazyLinearisation(lambda: features_linearisation(cells, x, beta, theta, rows, clicked, cells.of_position,
                                                           data.n))
    n_multi = int(_multi_slot_pairs(cells.pair, cells.slot, m, k).sum())
    return PositionBiasEstimate(
        theta / theta[0], "em", n_multi, data.n, slot_clicks, trace.iterations, trace.converged,
        trace.log_likelihood[-1], relevance="features", coefficients=beta, linearisation=lin,
    )
