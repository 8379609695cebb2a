r"""Linearisations (influence functions) of the examination estimates: what carries their
estimation error into the interval of PBM-IPS.

Every estimator :math:`\hat\theta` (normalised to :math:`\hat\theta_0 = 1`) is, to first
order, a mean of per-impression terms: :math:`\hat\theta - \theta \approx \frac1n\sum_i
\mathrm{IF}_i`. For a smooth function :math:`f` of the examination ratios with gradient
:math:`g` the *linearisation* returns :math:`\psi_i = g^\top\mathrm{IF}_i` (centred to
mean 0), so that :math:`f(\hat\theta) - f(\theta) \approx \frac1n\sum_i\psi_i`. PBM-IPS
adds :math:`\psi_i` (with :math:`g = \partial\hat V/\partial\theta`) to its own
per-impression terms; the clustered CLT interval of the sum is the stacked
estimating-equations (M-estimation sandwich) interval, the terms of one user summed
before the variance as for every estimate (Stefanski and Boos, "The calculus of
M-estimation", Am. Stat. 2002).

Maximum likelihood, one relevance per pair (harvest, em ``"pair"``)
    Parameters :math:`\theta_1..\theta_{k-1}` (:math:`\theta_0 = 1`) and :math:`\alpha_m`;
    a position of impression ``i`` in cell :math:`(m, j)` with click ``c`` has the scores
    :math:`s_{\theta_j} = r/\theta_j`, :math:`s_{\alpha_m} = r/\alpha_m` with
    :math:`r = (c - p)/(1 - p)`, :math:`p = \theta_j\alpha_m`. With the Fisher
    information :math:`A` and :math:`w_c = N_c p_c/(1 - p_c)`, :math:`W_m = \sum_{c\in m}
    w_c`, the Schur complement of the (diagonal) :math:`\alpha` block is, in the scaled
    coordinates :math:`\theta_j\,\partial/\partial\theta_j`,

    .. math::

        \tilde S_{jl} = \delta_{jl}\sum_{c \in j} w_c - \sum_m \frac{w_{mj}\,w_{ml}}{W_m},
        \qquad j, l \ge 1,

    and :math:`g^\top[A^{-1}s]_\theta` of one position is :math:`r\,(\bar h_j - H_m)` with
    :math:`h = \tilde S^{-1}(\theta\circ g)_{1..}`, :math:`\bar h = (0, h)` and
    :math:`H_m = \sum_{c \in m} w_c\bar h_{j(c)}/W_m` (a pair shown at one slot adds
    exactly 0). :math:`\psi_i = n\sum_{\text{positions of } i} r\,(\bar h_j - H_m)`.
    A function of the relevances too (gradient :math:`g_\alpha`, the direct method's value:
    :mod:`onlineeval.estimators.dm`) adds their block: with :math:`f_m = \alpha_m g_{\alpha,m}/W_m`
    (the relevance's influence with the examination known) the examination's part takes the
    profile gradient, :math:`h = \tilde S^{-1}(\theta\circ g - \textstyle\sum_{c \in j} w_c f_{m(c)})_{1..}`,
    and a position adds :math:`r\,(f_m + \bar h_j - H_m)` (block elimination of the
    relevances; the same :math:`g^\top A^{-1}s` as the dense inverse, tested).
    Pairs with a fitted click probability within :math:`10^{-9}` of 1 sit on the boundary
    of the parameter space (always clicked); their relevance is held fixed (they add
    nothing), as are pairs never clicked (:math:`\hat\alpha_m = 0`, where :math:`r = 0`).
Maximum likelihood with a relevance regression (em ``"features"``)
    :math:`p = \theta_j\sigma(x_m^\top\beta)` with all :math:`\theta_0..\theta_{k-1}` and
    :math:`\beta` free; :math:`A = \sum_c N_c\nabla p_c\nabla p_c^\top/(p_c(1-p_c))` and
    :math:`\psi_i = n\sum (c - p)\nabla p^\top A^{-1}\tilde g/(p(1-p))`, with
    :math:`\tilde g` the gradient of :math:`f(\theta/\theta_0)` in the absolute
    :math:`\theta` (zero for :math:`\beta`).
Ratios of sums (swap, randtop)
    :math:`\hat\theta_j = \mathrm{num}_j/\mathrm{den}_j`:
    :math:`\mathrm{IF}_{ij} = n(\mathrm{num}_{ij} - \hat\theta_j\mathrm{den}_{ij})/\mathrm{den}_j`
    (in :mod:`~onlineeval.estimators.position_bias.interventions`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from onlineeval.estimators.position_bias._core import (
    Cells,
    FloatArray,
    IntArray,
    Linearisation,
)

__all__ = ["BOUNDARY", "features_linearisation", "pair_linearisation"]

#: a pair whose fitted click probability is within this of 1 is on the boundary (held fixed)
BOUNDARY = 1e-9


def _solve(a: FloatArray, b: FloatArray) -> FloatArray:
    """``a^{-1} b``, by least squares when ``a`` is singular (a direction the log does
    not inform has no estimation error to carry)."""
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(a, b, rcond=None)[0]


def pair_linearisation(cells: Cells, alpha: FloatArray, theta: FloatArray, rows: IntArray,
                       clicked: NDArray[np.bool_], cell_of: IntArray, n: int) -> Callable[..., FloatArray]:
    """Linearisation of the PBM maximum likelihood with one relevance per pair (module
    docstring), at the normalised fit ``alpha`` (per pair), ``theta`` (``theta[0] == 1``).

    ``cells``: the cells the fit used; ``rows``, ``clicked``, ``cell_of``: every position
    the cells aggregate (impression row, click, cell index); ``n``: impressions in the log.
    The returned function takes the gradient in ``theta`` (``(k,)``; its entry 0 is not used: the
    normalisation) and optionally ``alpha_grad``, ``(n_pairs,)`` the gradient in ``alpha``.
    """
    from scipy.sparse import csr_matrix

    cp, cs, views = cells.pair, cells.slot, cells.views
    k, n_pairs = theta.size, alpha.size
    p = alpha[cp] * theta[cs]
    edge = np.zeros(n_pairs, dtype=bool)
    edge[cp[p >= 1.0 - BOUNDARY]] = True
    ok = ~edge[cp] & (p > 0.0)
    pp = np.where(ok, p, 0.0)
    w = np.where(ok, views * pp / (1.0 - pp), 0.0)
    big_w = np.bincount(cp, w, n_pairs)
    inv_w = np.divide(1.0, big_w, out=np.zeros(n_pairs), where=big_w > 1e-150)  # no overflow on denormals
    root = csr_matrix((w * np.sqrt(inv_w[cp]), (cp, cs)), shape=(n_pairs, k))
    s_tilde = np.diag(np.bincount(cs, w, k)) - (root.T @ root).toarray()
    # the residual r = (c - p) / (1 - p) of a position is per cell: 1 for a click, -p / (1 - p) for
    # a skip (0 on boundary pairs); so psi_i = n [sum_positions b_cell + sum_clicked (a - b)_cell]
    r_skip = np.where(ok, -pp / (1.0 - pp), 0.0)
    r_click = ok.astype(np.float64)
    hit = np.flatnonzero(clicked)
    hit_rows, hit_cells = rows[hit], cell_of[hit]

    def linearisation(grad: FloatArray, alpha_grad: FloatArray | None = None) -> FloatArray:
        g = np.asarray(grad, dtype=np.float64)[:k]
        lam = theta * g
        if alpha_grad is not None:  # f_m, 0 for pairs held fixed (W_m = 0)
            f = alpha * np.asarray(alpha_grad, dtype=np.float64) * inv_w
            lam = lam - np.bincount(cs, w * f[cp], k)
        h_bar = np.concatenate([[0.0], _solve(s_tilde[1:, 1:], lam[1:])])
        h_pair = np.bincount(cp, w * h_bar[cs], n_pairs) * inv_w
        coef = h_bar[cs] - h_pair[cp]
        if alpha_grad is not None:
            coef = coef + f[cp]
        skip, click = r_skip * coef, r_click * coef
        psi = np.bincount(rows, skip[cell_of], n) + np.bincount(hit_rows, (click - skip)[hit_cells], n)
        psi *= n
        return psi - psi.mean()

    return linearisation


def features_linearisation(cells: Cells, x: FloatArray, beta: FloatArray, theta: FloatArray, rows: IntArray,
                           clicked: NDArray[np.bool_], cell_of: IntArray, n: int) -> Linearisation:
    """Linearisation of the PBM maximum likelihood with relevance :math:`\\sigma(x^\\top\\beta)`
    (module docstring) at the fit ``beta``, ``theta`` (absolute, not normalised); ``x``:
    ``(m, p)`` the pairs' features (with the intercept column when the fit had one);
    other arguments as for :func:`pair_linearisation`."""
    from scipy.sparse import csr_matrix

    cp, cs, views = cells.pair, cells.slot, cells.views
    k, n_feat = theta.size, x.shape[1]
    sig = 0.5 * (1.0 + np.tanh(0.5 * (x @ beta)))
    a, g = sig[cp], theta[cs]
    p = np.clip(a * g, 1e-12, 1.0 - 1e-12)
    weight = views / (p * (1.0 - p))
    d_beta = (g * a * (1.0 - a))[:, None] * x[cp]  # dp / dbeta per cell
    onehot = csr_matrix((weight * a, (np.arange(cs.size), cs)), shape=(cs.size, k))
    info = np.zeros((k + n_feat, k + n_feat))
    info[:k, :k] = np.diag(np.bincount(cs, weight * a * a, k))
    info[:k, k:] = np.asarray(onehot.T @ d_beta)
    info[k:, :k] = info[:k, k:].T
    info[k:, k:] = d_beta.T @ (weight[:, None] * d_beta)
    r = (clicked - p[cell_of]) / (p * (1.0 - p))[cell_of]

    def linearisation(grad: FloatArray) -> FloatArray:
        gr = np.asarray(grad, dtype=np.float64)[:k]
        g_abs = np.zeros(k + n_feat)
        g_abs[1:k] = gr[1:] / theta[0]
        g_abs[0] = -float(gr[1:] @ theta[1:]) / theta[0] ** 2
        q = _solve(info, g_abs)
        coef = a * q[cs] + d_beta @ q[k:]
        psi = n * np.bincount(rows, r * coef[cell_of], n)
        return psi - psi.mean()

    return linearisation
