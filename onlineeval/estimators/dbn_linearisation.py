r"""The direct method's per-impression terms for a DBN fitted on the log by maximum likelihood (EM).

A DBN user (Chapelle and Zhang 2009) examines the list from the top, clicks a document at an examined slot with
probability :math:`\alpha_{qd}`, after a click is satisfied with probability :math:`\sigma_{qd}` and stops, and
otherwise goes on to the next slot with probability :math:`\gamma` (after a skip too; an empty slot is passed
without stopping). A session with its last click at slot ``l`` has the log-likelihood

.. math::

    \sum_{r \le l} \bigl[c_r\log\alpha_r + (1 - c_r)\log(1 - \alpha_r)\bigr] + \sum_{r < l} \log\gamma
        + \sum_{r < l,\ c_r = 1}\log(1 - \sigma_r) + \log f, \qquad f = A + B\,G_{l+1},

with :math:`A = 1 - \gamma + \sigma_l\gamma` (satisfied, or not and stopped), :math:`B = \gamma(1 - \sigma_l)` (went
on) and :math:`G_t` the chance of no click from slot ``t`` on given that ``t`` is examined; a session without a
click has :math:`A = 0, B = 1, t = 0` (the sums over ``r`` count the non-empty slots). Written as the stopping
point's sum,

.. math::

    G_t = \sum_{j \ge t} c_j P_j, \qquad P_j = \prod_{r=t}^{j}(1 - \alpha_r), \qquad
    c_j = \gamma^{e_j}(1 - \gamma)^{[j < k - 1]}

(:math:`e_j` the non-empty slots from ``t`` to ``j - 1``; an empty slot ``j < k - 1`` ends no scan, :math:`c_j = 0`),
so with the suffix sums :math:`S_r = \sum_{j \ge r} c_j P_j`, :math:`S'_r = \sum_{j \ge r} c'_j P_j` and
:math:`u_r = 1/(1 - \alpha_r)`: :math:`\partial_{\alpha_r} G = -u_r S_r`, :math:`\partial_{\alpha_r}
\partial_{\alpha_{r'}} G = u_r u_{r'} S_{\max(r, r')}` (0 for :math:`r = r'`: ``G`` is linear in each relevance),
:math:`\partial_\gamma G = S'_t`, :math:`\partial_\gamma\partial_{\alpha_r} G = -u_r S'_r`, :math:`\partial^2_\gamma
G = \sum_j c''_j P_j`. Then :math:`\partial\log f = \nabla f / f` and the observed information :math:`\nabla f\nabla
f^\top / f^2 - \nabla^2 f / f` in :math:`(\sigma_l, \gamma, \alpha_{l+1}, \dots)`, by the product rule through
``A`` and ``B``. As for the DCM (:mod:`~onlineeval.estimators.dcm_linearisation`, whose helpers sum and solve the
information here), the maximum likelihood's influence :math:`\frac1n\sum_i \nabla V^\top H^{-1} s_i` gives each
session's term; the information couples the relevances below a session's last click (sparse: pairs of one query),
and :math:`\gamma` couples everything (one dense row).

The value of a target list, :math:`V = \sum_s w_s\alpha_s E_s` with :math:`E_{s+1} = E_s f_s`, :math:`f_s = \gamma(1
- \alpha_s\sigma_s)` (additive; first click: :math:`\gamma(1 - \alpha_s)`; 1 at an empty slot), and :math:`R_s =
w_s\alpha_s + f_s R_{s+1}` the value still to come, has the derivatives :math:`E_s(w_s - \gamma\sigma_s R_{s+1})` in
:math:`\alpha_s` (first click :math:`E_s(w_s - \gamma R_{s+1})`), :math:`-E_s\gamma\alpha_s R_{s+1}` in
:math:`\sigma_s` (first click 0) and :math:`\sum_s E_s (f_s / \gamma) R_{s+1}` over the non-empty slots in
:math:`\gamma`.

Parameters on the boundary (within :data:`~onlineeval.estimators.dcm_linearisation.BOUNDARY` of 0 or 1) or informed
below :data:`~onlineeval.estimators.dcm_linearisation.MIN_INFORMATION` (a satisfaction of a pair never clicked but
last) are held fixed, as for the DCM.

Measured (``tests/test_dm_dbn_world.py``, which also checks the terms against numerical derivatives of clickmodels'
own ``DBN.log_likelihood``): on 1,000 logs of 4,000 impressions of a DBN world (the check world's relevances,
satisfaction 0.2-0.8 per pair, perseverance 0.7, a uniform logger) the 95% interval covered the exact clicks per
query and reciprocal rank of both targets 940-959 times (SE 0.96-1.03 of the estimates' SD); with the model held
fixed (before 2026-12-06), 105-138 times (SE 0.06-0.08 of the SD).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onlineeval.estimators.base import FloatArray, LoggedData, Reward, Target
from onlineeval.estimators.dcm_linearisation import BOUNDARY, PairSums, solved_terms

__all__ = ["dbn_correction", "dbn_value_gradient"]


def dbn_value_gradient(alpha: FloatArray, sigma: FloatArray, gamma: float, filled: np.ndarray,
                       reward: Reward) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(d V / d alpha, d V / d sigma, d V / d gamma)``, the first two ``(n, k)``, the last ``(n,)``: the
    derivatives of a DBN's value of lists whose documents have the relevances ``alpha`` and satisfactions
    ``sigma`` (``(n, k)``), ``filled`` ``(n, k)`` False at empty slots (module docstring)."""
    n, k = alpha.shape
    w = reward.position_weights(k)
    additive = reward.kind == "additive"
    a = np.where(filled, alpha, 0.0)
    keep = 1.0 - a * sigma if additive else 1.0 - a  # f_s / gamma
    f = np.where(filled, gamma * keep, 1.0)
    exam = np.ones((n, k))
    exam[:, 1:] = np.cumprod(f[:, :-1], axis=1)
    rest = np.zeros((n, k + 1))  # rest[:, s]: R_s
    for s in range(k - 1, -1, -1):
        rest[:, s] = w[s] * a[:, s] + f[:, s] * rest[:, s + 1]
    below = rest[:, 1:]
    d_alpha = exam * (w[None, :] - gamma * (sigma if additive else 1.0) * below)
    d_sigma = -exam * gamma * a * below if additive else np.zeros((n, k))
    d_gamma = np.where(filled, exam * keep * below, 0.0).sum(axis=1)
    return d_alpha, d_sigma, d_gamma


def _tail_sums(a: np.ndarray, filled: np.ndarray, start: np.ndarray, gamma: float) -> tuple[np.ndarray, ...]:
    """``(S, S', G'')`` of the sessions' tails from slot ``start`` (module docstring): ``S`` and ``S'`` ``(n, k + 1)``
    suffix sums (column ``k`` zero; 0 above ``start``), ``G''`` ``(n,)``; ``a`` the slots' relevances (0 at empty
    slots, clipped inside the boundary)."""
    n, k = a.shape
    rank = np.arange(k)[None, :]
    inside = rank >= start[:, None]
    # e_j: the non-empty slots from start to j - 1; b_j: a non-empty slot above the last (the user may stop after it)
    e = np.cumsum(filled & inside, axis=1) - (filled & inside)
    stop_after = filled & (rank < k - 1)
    ends = inside & (filled | (rank == k - 1))  # an empty slot above the last ends no scan
    p = np.cumprod(np.where(inside, 1.0 - a, 1.0), axis=1)
    g = gamma
    ge = g ** e
    ge1 = np.where(e >= 1, e * g ** np.maximum(e - 1, 0), 0.0)  # d gamma^e
    ge2 = np.where(e >= 2, e * (e - 1) * g ** np.maximum(e - 2, 0), 0.0)
    c = np.where(stop_after, ge * (1.0 - g), ge)
    c1 = np.where(stop_after, ge1 * (1.0 - g) - ge, ge1)
    c2 = np.where(stop_after, ge2 * (1.0 - g) - 2.0 * ge1, ge2)
    terms = np.where(ends, p, 0.0)
    suffix = np.zeros((n, k + 1))
    suffix1 = np.zeros((n, k + 1))
    suffix[:, :k] = np.cumsum((c * terms)[:, ::-1], axis=1)[:, ::-1]
    suffix1[:, :k] = np.cumsum((c1 * terms)[:, ::-1], axis=1)[:, ::-1]
    return suffix, suffix1, (c2 * terms).sum(axis=1)


def dbn_correction(mdl: Any, data: LoggedData, target: Target, reward: Reward) -> FloatArray:
    """``(n,)``: each impression's linearised influence on the direct method's value with the DBN ``mdl`` fitted
    on ``data`` by maximum likelihood (module docstring), ``n grad V' H^-1 s_i``; its mean is 0 at the maximum."""
    from clickmodels.base import Impressions  # lazy
    from onlineeval.estimators.model_based import target_slot_values
    from onlineeval.estimators.model_fit import pair_index

    idx = pair_index(data)
    k, m, n = data.k, idx.n_pairs, data.n
    pairs = Impressions(query=idx.query, docs=idx.doc[:, None])
    alpha_pair = np.asarray(mdl.attractiveness.lookup(pairs), dtype=np.float64)[:, 0]
    sigma_pair = np.asarray(mdl.satisfaction.lookup(pairs), dtype=np.float64)[:, 0]
    gamma = float(mdl.gamma)
    code = idx.code
    filled = code >= 0
    pc = np.where(filled, code, 0)
    c = np.asarray(data.clicks, dtype=bool) & filled
    rank = np.arange(k)[None, :]
    has = c.any(axis=1)
    last = np.where(has, k - 1 - np.argmax(c[:, ::-1], axis=1), -1)  # -1: no click
    safe = lambda x: np.clip(x, BOUNDARY, 1 - BOUNDARY)  # noqa: E731  (finite derivatives at the boundary's edge)
    a = np.where(filled, safe(alpha_pair[pc]), 0.0)
    g = float(safe(gamma))
    # the parameters: relevance of pair p -> p, its satisfaction -> m + p, gamma -> 2m
    free = np.concatenate([(alpha_pair > BOUNDARY) & (alpha_pair < 1 - BOUNDARY),
                           (sigma_pair > BOUNDARY) & (sigma_pair < 1 - BOUNDARY),
                           [BOUNDARY < gamma < 1 - BOUNDARY]])
    gi = 2 * m
    n_par = gi + 1
    # the information: its diagonal and gamma's column summed per parameter here, the entries between two pairs of
    # one query (relevance and relevance, satisfaction and relevance) in PairSums, then one sparse matrix
    diag, g_col = np.zeros(n_par), np.zeros(n_par)
    scores: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    score = scores.append  # each takes one (sessions, parameters, values) part

    def on_diag(par: np.ndarray, v: np.ndarray) -> None:
        diag[:] += np.bincount(par, v, minlength=n_par)

    def on_gamma(par: np.ndarray, v: np.ndarray) -> None:
        g_col[:] += np.bincount(par, v, minlength=n_par)

    # the slots down to the last click: clicks and skips, the continuations above it
    head = filled & (rank <= last[:, None])
    hi, hj = np.nonzero(head)
    ch, ah, ph = c[hi, hj], a[hi, hj], pc[hi, hj]
    score((hi, ph, np.where(ch, 1.0 / ah, -1.0 / (1.0 - ah))))
    on_diag(ph, np.where(ch, 1.0 / ah ** 2, 1.0 / (1.0 - ah) ** 2))
    went_on = (filled & (rank < last[:, None])).sum(axis=1).astype(np.float64)
    s_on = np.flatnonzero(went_on)
    score((s_on, np.full(s_on.size, gi), went_on[s_on] / g))
    diag[gi] += went_on.sum() / g ** 2
    ci, cj = np.nonzero(c & (rank < last[:, None]))
    ps = pc[ci, cj]
    sc = safe(sigma_pair[ps])
    score((ci, m + ps, -1.0 / (1.0 - sc)))
    on_diag(m + ps, 1.0 / (1.0 - sc) ** 2)
    # the last term log f, f = A + B G: sessions with a non-empty slot below the last click (else f = 1)
    tail_all = filled & (rank > last[:, None])
    sess = np.flatnonzero(tail_all.any(axis=1))
    t_a, t_f, t_start = a[sess], filled[sess], last[sess] + 1
    tail = tail_all[sess]
    s_sum, s_sum1, g2 = _tail_sums(t_a, t_f, t_start, g)
    big_g, g_g = s_sum[np.arange(sess.size), t_start], s_sum1[np.arange(sess.size), t_start]
    clicked = has[sess]
    l_pair = np.where(clicked, pc[sess, np.maximum(last[sess], 0)], 0)
    sig = np.where(clicked, safe(sigma_pair[l_pair]), 0.0)
    # A, B and their derivatives in (sigma_l, gamma): a session without a click has A = 0, B = 1
    big_a = np.where(clicked, 1.0 - g + sig * g, 0.0)
    big_b = np.where(clicked, g * (1.0 - sig), 1.0)
    a_s, a_g, b_s, b_g = (np.where(clicked, x, 0.0) for x in (g, sig - 1.0, -g, 1.0 - sig))
    a_sg, b_sg = np.where(clicked, 1.0, 0.0), np.where(clicked, -1.0, 0.0)
    f = big_a + big_b * big_g
    f_s = a_s + b_s * big_g
    f_g = a_g + b_g * big_g + big_b * g_g
    f_ss_g = a_sg + b_sg * big_g + b_s * g_g  # d sigma d gamma
    f_gg = 2.0 * b_g * g_g + big_b * g2
    u = 1.0 / (1.0 - t_a)
    cs = np.flatnonzero(clicked)  # the satisfaction of the last click's document
    sp = m + l_pair[cs]
    score((sess[cs], sp, f_s[cs] / f[cs]))
    on_diag(sp, (f_s[cs] / f[cs]) ** 2)
    on_gamma(sp, f_s[cs] * f_g[cs] / f[cs] ** 2 - f_ss_g[cs] / f[cs])
    score((sess, np.full(sess.size, gi), f_g / f))
    diag[gi] += np.sum(f_g ** 2 / f ** 2 - f_gg / f)
    # the relevances below the last click: G's derivatives g_r = -u_r S_r, d gamma: -u_r S'_r
    ti, tj = np.nonzero(tail)
    t_pc = pc[sess]
    pr = t_pc[ti, tj]
    g_r = -u[ti, tj] * s_sum[ti, tj]
    f_t = f[ti]
    f_r = big_b[ti] * g_r
    fr = f_r / f_t
    score((sess[ti], pr, fr))
    on_diag(pr, fr ** 2)
    f_gr = b_g[ti] * g_r - big_b[ti] * u[ti, tj] * s_sum1[ti, tj]
    on_gamma(pr, f_g[ti] * fr / f_t - f_gr / f_t)
    sat = np.flatnonzero(clicked[ti])
    sat_alpha = PairSums(idx)  # (the last click's satisfaction, a relevance below it)
    sat_alpha.add(l_pair[ti[sat]], pr[sat], f_s[ti[sat]] * fr[sat] / f_t[sat] - b_s[ti[sat]] * g_r[sat] / f_t[sat])
    pairs_of_pairs = PairSums(idx)
    f_rk = big_b[:, None] * (-u * s_sum[:, :k])  # df / d alpha_r, (sessions, k)
    for r in range(k):
        for r2 in range(r + 1, k):
            on2 = tail[:, r] & tail[:, r2]
            ff = f[on2]
            cross = big_b[on2] * u[on2, r] * u[on2, r2] * s_sum[on2, r2]  # d2 f / d alpha_r d alpha_r2 (r2 > r)
            pairs_of_pairs.add(t_pc[on2, r], t_pc[on2, r2], f_rk[on2, r] * f_rk[on2, r2] / ff ** 2 - cross / ff)
    entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    at = np.flatnonzero(diag)
    entries.append((at, at, diag[at]))
    at = np.flatnonzero(g_col)
    entries += [(at, np.full(at.size, gi), g_col[at]), (np.full(at.size, gi), at, g_col[at])]
    for shift, sums in ((0, pairs_of_pairs), (m, sat_alpha)):
        p1, p2, val = sums.entries()
        entries += [(shift + p1, p2, val), (p2, shift + p1, val)]
    # the value's gradient, weighted by each query's share of the impressions
    t_uq, t_code, t_alpha, t_sigma = target_slot_values((mdl.attractiveness, mdl.satisfaction), idx, target, k)
    shown = t_code >= 0
    d_alpha, d_sigma, d_gamma = dbn_value_gradient(t_alpha, t_sigma, gamma, t_uq >= 0, reward)
    share = idx.n_q / n
    g_vec = np.concatenate([np.bincount(t_code[shown], (d_alpha * share[:, None])[shown], minlength=m),
                            np.bincount(t_code[shown], (d_sigma * share[:, None])[shown], minlength=m),
                            [float(np.dot(d_gamma, share))]])
    return solved_terms(mdl, data, entries, scores, free, g_vec, np.concatenate([idx.qi, idx.qi, [-1]]))
