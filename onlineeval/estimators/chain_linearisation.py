r"""The direct method's per-impression terms for a DBN or CCM fitted on the log by maximum likelihood (EM).

Both are cascade chains (Chuklin, Markov and de Rijke 2015, ch. 3): the user examines the list from the top, clicks
a document at an examined slot with probability :math:`\alpha_{qd}`, goes on after a skip with probability
:math:`g` and after a click with probability :math:`c` (an empty slot is passed without stopping):

- DBN (Chapelle and Zhang 2009): :math:`g = \gamma`, :math:`c = \gamma(1 - \sigma_{qd})`, a satisfaction per pair;
- CCM (Guo et al. 2009): :math:`g = \tau_1`, :math:`c = \tau_2(1 - \alpha_{qd}) + \tau_3\alpha_{qd}`.

A session with its last click at slot ``l`` has the log-likelihood

.. math::

    \sum_{r \le l} \bigl[c_r\log\alpha_r + (1 - c_r)\log(1 - \alpha_r)\bigr]
        + \sum_{r < l,\ \text{skip}} \log g + \sum_{r < l,\ \text{click}} \log c_r + \log f,
        \qquad f = 1 - c_l\,(1 - G_{l+1}),

(stopped after the last click, or went on and clicked nothing more), ``G_t`` the chance of no click from slot ``t``
on given that ``t`` is examined; a session without a click has :math:`f = G_0`. Written as the stopping point's sum,

.. math::

    G_t = \sum_{j \ge t} c_j P_j, \qquad P_j = \prod_{r=t}^{j}(1 - \alpha_r), \qquad
    c_j = g^{e_j}(1 - g)^{[j < k - 1]}

(:math:`e_j` the non-empty slots from ``t`` to ``j - 1``; an empty slot ``j < k - 1`` ends no scan, :math:`c_j = 0`),
so with the suffix sums :math:`S_r = \sum_{j \ge r} c_j P_j`, :math:`S'_r = \sum_{j \ge r} c'_j P_j` (derivatives in
``g``) and :math:`u_r = 1/(1 - \alpha_r)`: :math:`\partial_{\alpha_r} G = -u_r S_r`, :math:`\partial_{\alpha_r}
\partial_{\alpha_{r'}} G = u_r u_{r'} S_{\max(r, r')}` (0 for :math:`r = r'`: ``G`` is linear in each relevance),
:math:`\partial_g G = S'_t`, :math:`\partial_g\partial_{\alpha_r} G = -u_r S'_r`, :math:`\partial^2_g G = \sum_j
c''_j P_j`. The derivatives of :math:`f = 1 - c_l + c_l G` follow by the product rule, with ``c``'s own in its
parameters (:class:`_Chain`'s ``click``); where a parameter enters twice (a DBN's :math:`\gamma`, in ``g`` and in
``c``) each appearance is a term of its own and the sums add them. The score is :math:`\nabla f / f` and the
observed information :math:`\nabla f\nabla f^\top / f^2 - \nabla^2 f / f`. As for the DCM
(:mod:`~onlineeval.estimators.dcm_linearisation`, whose helpers sum and solve the information here), the maximum
likelihood's influence :math:`\frac1n\sum_i \nabla V^\top H^{-1} s_i` gives each session's term; the information
couples the parameters of one query (sparse) and the shared ones (:math:`\gamma`; :math:`\tau_{1,2,3}`: dense rows).

The value of a target list, :math:`V = \sum_s w_s\alpha_s E_s` with :math:`E_{s+1} = E_s f_s`, :math:`f_s = \alpha_s
c_s + (1 - \alpha_s) g` (additive; first click: :math:`(1 - \alpha_s) g`; 1 at an empty slot) and :math:`R_s =
w_s\alpha_s + f_s R_{s+1}` the value still to come, has the derivative :math:`E_s(w_s\,[\theta = \alpha_s] +
\partial_\theta f_s\,R_{s+1})` summed over the slots where a parameter :math:`\theta` enters.

Parameters on the boundary (within :data:`~onlineeval.estimators.dcm_linearisation.BOUNDARY` of 0 or 1) or that the
log does not inform (:func:`~onlineeval.estimators.dcm_linearisation.weakly_informed`) are held fixed, as for the
DCM.

Measured (``tests/test_dm_chain_world.py``, which also checks the terms against numerical derivatives of
clickmodels' own ``log_likelihood``): on 1,000 logs of 4,000 impressions of a DBN world (the check world's
relevances, satisfaction 0.2-0.8 per pair, perseverance 0.7, a uniform logger) the 95% interval covered the exact
clicks per query and reciprocal rank of both targets 940-959 times (SE 0.96-1.03 of the estimates' SD); with the
model held fixed (before 2026-12-06), 105-138 times (SE 0.06-0.08 of the SD). A CCM world (the same relevances,
tau 0.85 / 0.7 / 0.3): 933-956 (SE 0.96-1.03 of the SD; another 1,000 logs of the shuffled list: 945-952, SE 1.01);
held fixed, 34-126 (SE 0.03-0.08 of the SD). Cost on 10^6 top-10 impressions (``benchmarks/bench_dm.py``'s log, one
core, one BLAS thread, a fresh log each run): ``dm`` with a DBN 7.3 s of CPU and a peak of 1.2 GB against 4.3 s and
1.0 GB held fixed (its EM fit; 11.9 s and 2.6 GB before the pairwise sums were compiled and the sessions taken in
chunks); with a CCM about 95 s either way (its EM fit: the linearisation adds a few per cent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onlineeval.estimators import dcm_linearisation as _dcm
from onlineeval.estimators.base import FloatArray, LoggedData, Reward, Target
from onlineeval.estimators.dcm_linearisation import (
    BOUNDARY,
    PairSums,
    exam_and_rest,
    score_sums,
    solved_information,
)

__all__ = ["chain_correction", "chain_value_gradient"]


#: a parameter of a chain: ("f", family) a table per (query, document) pair (family 0 the relevance), ("s", i) the
#: i-th shared parameter
Kind = tuple[str, int]
#: ``click(families, shared) -> (c, first, second)``: the continuation after a click at slots whose documents have
#: the per-pair values ``families`` (one array per family, any shape) and its derivatives: ``first`` a list of
#: ``(kind, dc)``, ``second`` of ``(i, j, d2c)`` for ``i <= j`` indices into ``first`` (the nonzero ones)
ClickFn = Callable[[list[np.ndarray], np.ndarray], tuple[np.ndarray, list[tuple[Kind, np.ndarray]],
                                                          list[tuple[int, int, np.ndarray]]]]


@dataclass(frozen=True)
class _Chain:
    """A chain model as the linearisation reads it: its per-pair tables (the relevance first), its shared
    parameters, which of those is the continuation after a skip, and its continuation after a click."""

    tables: tuple[Any, ...]
    shared: np.ndarray
    skip: int
    click: ClickFn


def _dbn_click(fam: list[np.ndarray], sh: np.ndarray) -> Any:
    sigma, gamma = fam[1], sh[0]
    one = np.ones_like(sigma)
    return gamma * (1.0 - sigma), [(("s", 0), 1.0 - sigma), (("f", 1), -gamma * one)], [(0, 1, -one)]


def _ccm_click(fam: list[np.ndarray], sh: np.ndarray) -> Any:
    alpha, (tau2, tau3) = fam[0], sh[1:]
    one = np.ones_like(alpha)
    return (tau2 * (1.0 - alpha) + tau3 * alpha, [(("s", 1), 1.0 - alpha), (("s", 2), alpha.copy()),
                                                   (("f", 0), (tau3 - tau2) * one)], [(0, 2, -one), (1, 2, one)])


def chain_of(mdl: Any) -> _Chain:
    """The :class:`_Chain` of a fitted DBN or CCM."""
    if hasattr(mdl, "gamma"):
        return _Chain((mdl.attractiveness, mdl.satisfaction), np.array([float(mdl.gamma)]), 0, _dbn_click)
    return _Chain((mdl.attractiveness,), np.array([float(mdl.tau1), float(mdl.tau2), float(mdl.tau3)]), 0,
                  _ccm_click)


def chain_value_gradient(chain: _Chain, values: list[FloatArray], filled: np.ndarray, reward: Reward,
                         shared: np.ndarray | None = None) -> tuple[list[FloatArray], FloatArray]:
    """``(per-family derivatives, shared derivatives)``: each family's ``(n, k)`` (the derivative of each list's
    value in the value at that slot) and ``(n, S)`` in the shared parameters, of the chain's value of lists whose
    documents have the per-pair ``values`` (one ``(n, k)`` array per family), ``filled`` ``(n, k)`` False at empty
    slots (module docstring). ``shared``: the shared parameters (default the chain's)."""
    sh = chain.shared if shared is None else shared
    n, k = filled.shape
    w = reward.position_weights(k)
    additive = reward.kind == "additive"
    a = np.where(filled, values[0], 0.0)
    g = sh[chain.skip]
    cv, first, _ = chain.click([np.where(filled, v, 0.5) for v in values], sh)
    f = np.where(filled, (a * cv if additive else 0.0) + (1.0 - a) * g, 1.0)
    exam, below = exam_and_rest(a, f, w)
    er = np.where(filled, exam * below, 0.0)  # E_s R_{s+1}
    d_fam = [np.zeros((n, k)) for _ in values]
    d_shared = np.zeros((n, sh.size))
    d_fam[0] += np.where(filled, exam * w[None, :], 0.0) + er * ((cv if additive else 0.0) - g)
    d_shared[:, chain.skip] += (er * (1.0 - a)).sum(axis=1)
    if additive:
        for (kind, idx), dc in first:
            if kind == "f":
                d_fam[idx] += er * a * dc
            else:
                d_shared[:, idx] += (er * a * dc).sum(axis=1)
    return d_fam, d_shared


def _tail_sums(a: np.ndarray, filled: np.ndarray, start: np.ndarray, g: float) -> tuple[np.ndarray, ...]:
    """``(S, S', G'')`` of the sessions' tails from slot ``start`` (module docstring): ``S`` and ``S'`` ``(n, k + 1)``
    suffix sums (column ``k`` zero; 0 above ``start``), ``G''`` ``(n,)``; ``a`` the slots' relevances (0 at empty
    slots, clipped inside the boundary), ``g`` the continuation after a skip."""
    n, k = a.shape
    rank = np.arange(k)[None, :]
    inside = rank >= start[:, None]
    # e_j: the non-empty slots from start to j - 1; a non-empty slot above the last: the user may stop after it
    e = np.cumsum(filled & inside, axis=1) - (filled & inside)
    stop_after = filled & (rank < k - 1)
    ends = inside & (filled | (rank == k - 1))  # an empty slot above the last ends no scan
    p = np.cumprod(np.where(inside, 1.0 - a, 1.0), axis=1)
    ge = g ** e
    ge1 = np.where(e >= 1, e * g ** np.maximum(e - 1, 0), 0.0)  # d g^e
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


class _Information:
    """The observed information's entries as they are added: the diagonal and the shared parameters' rows summed
    per parameter, the entries between two pairs of one query in :class:`PairSums` per pair of families."""

    def __init__(self, idx: Any, families: int, shared: int, active: bool = True) -> None:
        self.active = active  # False: adds nothing (the scores' pass over chunks of sessions)
        self.idx, self.m, self.base = idx, idx.n_pairs, families * idx.n_pairs
        self.n_par = self.base + shared
        self.diag = np.zeros(self.n_par)
        self.rows = np.zeros((shared, self.n_par))  # (shared parameter, any other parameter)
        self.pairs: dict[tuple[int, int], PairSums] = {}

    def index(self, kind: Kind, pair: np.ndarray | None) -> np.ndarray | int:
        """The parameters' indices: a family's at ``pair`` (the pair codes), or a shared parameter's."""
        return kind[1] * self.m + pair if kind[0] == "f" else self.base + kind[1]

    def on_diag(self, kind: Kind, pair: np.ndarray | None, v: np.ndarray) -> None:
        """``v`` at the diagonal entries of ``kind`` (at ``pair``)."""
        if not self.active:
            return
        if kind[0] == "f":
            self.diag += np.bincount(kind[1] * self.m + pair, v, minlength=self.n_par)
        else:
            self.diag[self.base + kind[1]] += float(np.sum(v))

    def cross(self, k1: Kind, p1: np.ndarray | None, k2: Kind, p2: np.ndarray | None, v: np.ndarray) -> None:
        """``v`` at the entries of two distinct appearances of parameters, both ``(P1, P2)`` and ``(P2, P1)`` (twice
        on the diagonal where both are the same shared parameter); pairs of the same query."""
        if not self.active:
            return
        if k1[0] == "s" and k2[0] == "s":
            total = float(np.sum(v))
            if k1[1] == k2[1]:
                self.diag[self.base + k1[1]] += 2.0 * total
            else:
                self.rows[k1[1], self.base + k2[1]] += total
                self.rows[k2[1], self.base + k1[1]] += total
        elif k1[0] == "s" or k2[0] == "s":
            shared, (_, fam), pair = (k1, k2, p2) if k1[0] == "s" else (k2, k1, p1)
            self.rows[shared[1]] += np.bincount(fam * self.m + pair, v, minlength=self.n_par)
        else:
            key = (k1[1], k2[1])
            if key not in self.pairs:
                self.pairs[key] = PairSums(self.idx)
            self.pairs[key].add(p1, p2, v)

    def tail_pairs(self, tail: np.ndarray, pc: np.ndarray, a: np.ndarray, b: np.ndarray, u: np.ndarray,
                   v: np.ndarray) -> None:
        """The relevances' entries between two slots of one session's tail (:meth:`PairSums.add_tail_pairs`)."""
        if not self.active:
            return
        if (0, 0) not in self.pairs:
            self.pairs[(0, 0)] = PairSums(self.idx)
        self.pairs[(0, 0)].add_tail_pairs(tail, pc, a, b, u, v)

    def entries(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``(row, column, value)`` parts of the whole symmetric matrix."""
        out = []
        at = np.flatnonzero(self.diag)
        out.append((at, at, self.diag[at]))
        for s, row in enumerate(self.rows):
            at = np.flatnonzero(row)
            me = np.full(at.size, self.base + s)
            out.append((me, at, row[at]))
            pair = at < self.base  # a shared parameter's entries with another shared one are in both rows already
            out.append((at[pair], me[pair], row[at[pair]]))
        for (f1, f2), sums in self.pairs.items():
            p1, p2, val = sums.entries()
            out += [(f1 * self.m + p1, f2 * self.m + p2, val), (f2 * self.m + p2, f1 * self.m + p1, val)]
        return out


def chain_correction(mdl: Any, data: LoggedData, target: Target, reward: Reward) -> FloatArray:
    """``(n,)``: each impression's linearised influence on the direct method's value with the DBN or CCM ``mdl``
    fitted on ``data`` by maximum likelihood (module docstring), ``n grad V' H^-1 s_i``; its mean is 0 at the
    maximum."""
    from clickmodels.base import Impressions  # lazy
    from onlineeval.estimators.model_based import target_slot_values
    from onlineeval.estimators.model_fit import pair_index

    chain = chain_of(mdl)
    idx = pair_index(data)
    k, m, n = data.k, idx.n_pairs, data.n
    pairs = Impressions(query=idx.query, docs=idx.doc[:, None])
    per_pair = [np.asarray(t.lookup(pairs), dtype=np.float64)[:, 0] for t in chain.tables]
    families, n_shared = len(per_pair), chain.shared.size
    code = idx.code
    filled_all = code >= 0
    pc_all = np.where(filled_all, code, 0)
    c_all = np.asarray(data.clicks, dtype=bool) & filled_all
    rank = np.arange(k)[None, :]
    has_all = c_all.any(axis=1)
    last_all = np.where(has_all, k - 1 - np.argmax(c_all[:, ::-1], axis=1), -1)  # -1: no click

    def inside(x: np.ndarray) -> np.ndarray:
        return (x > BOUNDARY) & (x < 1 - BOUNDARY)

    def safe(x: np.ndarray) -> np.ndarray:  # finite derivatives at the boundary's edge
        return np.clip(x, BOUNDARY, 1 - BOUNDARY)

    free = np.concatenate([inside(t) for t in per_pair] + [inside(chain.shared)])
    at_slot_all = [np.where(filled_all, safe(t[pc_all]), 0.0) for t in per_pair]
    sh = safe(chain.shared)
    g = float(sh[chain.skip])
    skip: Kind = ("s", chain.skip)
    alpha: Kind = ("f", 0)
    info = _Information(idx, families, n_shared)

    def sessions(lo: int, hi: int, info: _Information, score: Any) -> None:
        """Add the information of sessions ``lo`` to ``hi`` to ``info`` and pass their scores to ``score`` (parts of
        ``(session - lo, parameter, value)``)."""
        c, filled, pc, last, has = c_all[lo:hi], filled_all[lo:hi], pc_all[lo:hi], last_all[lo:hi], has_all[lo:hi]
        at_slot = [v[lo:hi] for v in at_slot_all]
        a = at_slot[0]

        def click_terms(rows: np.ndarray, cols: np.ndarray) -> Any:
            """The continuation after the clicks at ``(rows, cols)``: its value, terms and the terms' pairs."""
            cv, first, second = chain.click([v[rows, cols] for v in at_slot], sh)
            return cv, [(kind, pc[rows, cols] if kind[0] == "f" else None, dc) for kind, dc in first], second

        # the slots down to the last click: clicks and skips, the continuations above it
        hi, hj = np.nonzero(filled & (rank <= last[:, None]))
        ch, ah, ph = c[hi, hj], a[hi, hj], pc[hi, hj]
        score((hi, ph, np.where(ch, 1.0 / ah, -1.0 / (1.0 - ah))))
        info.on_diag(alpha, ph, np.where(ch, 1.0 / ah ** 2, 1.0 / (1.0 - ah) ** 2))
        skips = (filled & ~c & (rank < last[:, None])).sum(axis=1).astype(np.float64)
        s_on = np.flatnonzero(skips)
        score((s_on, np.full(s_on.size, info.index(skip, None)), skips[s_on] / g))
        info.on_diag(skip, None, skips.sum() / g ** 2)
        ci, cj = np.nonzero(c & (rank < last[:, None]))
        cv, terms, second = click_terms(ci, cj)
        for kind, p, dc in terms:
            score((ci, np.broadcast_to(info.index(kind, p), ci.shape), dc / cv))
        _click_information(info, terms, second, cv)
        # the last term log f, f = 1 - c_l (1 - G): sessions with a non-empty slot below the last click (else f = 1)
        tail_all = filled & (rank > last[:, None])
        sess = np.flatnonzero(tail_all.any(axis=1))
        t_a, start = a[sess], last[sess] + 1
        tail = tail_all[sess]
        s_sum, s_sum1, g_gg = _tail_sums(t_a, filled[sess], start, g)
        at = np.arange(sess.size)
        big_g, g_g = s_sum[at, start], s_sum1[at, start]
        cs = np.flatnonzero(has[sess])  # the sessions with a click: their continuation after it
        c_l = np.ones(sess.size)
        cv, terms, second = click_terms(sess[cs], last[sess[cs]])
        c_l[cs] = cv
        f = 1.0 - c_l * (1.0 - big_g)
        # the click's terms: f_i = (G - 1) dc_i, f_ij = (G - 1) d2c_ij
        f_cs = f[cs]
        for kind, p, dc in terms:
            score((sess[cs], np.broadcast_to(info.index(kind, p), cs.shape), (big_g[cs] - 1.0) * dc / f_cs))
        _click_information(info, [(kind, p, (big_g[cs] - 1.0) * dc) for kind, p, dc in terms],
                           [(i, j, (big_g[cs] - 1.0) * d2) for i, j, d2 in second], f_cs)
        # the skip's continuation g: f_g = c G_g; with the click's terms f_ig = dc_i G_g
        f_g = c_l * g_g
        score((sess, np.full(sess.size, info.index(skip, None)), f_g / f))
        info.on_diag(skip, None, (f_g / f) ** 2 - c_l * g_gg / f)
        for kind, p, dc in terms:
            info.cross(kind, p, skip, None, (big_g[cs] - 1.0) * dc * f_g[cs] / f_cs ** 2 - dc * g_g[cs] / f_cs)
        # the relevances below the last click: f_r = c G_r, G_r = -u_r S_r, d g: -u_r S'_r
        ti, tj = np.nonzero(tail)
        t_pc = pc[sess]
        pr = t_pc[ti, tj]
        u = 1.0 / (1.0 - t_a)
        g_r = -u[ti, tj] * s_sum[ti, tj]
        f_t = f[ti]
        fr = c_l[ti] * g_r / f_t  # f_r / f
        score((sess[ti], pr, fr))
        if not info.active:  # the scores' pass over chunks: the rest is information, summed in the first pass
            return
        info.on_diag(alpha, pr, fr ** 2)
        info.cross(skip, None, alpha, pr, f_g[ti] / f_t * fr - c_l[ti] * (-u[ti, tj] * s_sum1[ti, tj]) / f_t)
        clicked_tail = np.flatnonzero(has[sess][ti])  # with the click's terms: f_ir = dc_i G_r
        row_of = np.full(sess.size, -1)
        row_of[cs] = np.arange(cs.size)
        rc = row_of[ti[clicked_tail]]
        for kind, p, dc in terms:
            f_i = (big_g[cs] - 1.0) * dc
            tc = ti[clicked_tail]
            info.cross(kind, None if p is None else p[rc], alpha, pr[clicked_tail],
                       f_i[rc] * fr[clicked_tail] / f[tc] - dc[rc] * g_r[clicked_tail] / f[tc])
        # two relevances below it: f_r f_r2 / f^2 - f_rr2 / f, f_rr2 = c u_r u_r2 S_r2 (r2 > r)
        f_rk = c_l[:, None] * (-u * s_sum[:, :k]) / f[:, None]  # f_r / f, (sessions, k)
        info.tail_pairs(tail, t_pc, f_rk, -c_l / f, u, s_sum[:, :k])

    if n <= _dcm.CHUNK:  # one pass: the scores kept until the information is solved
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        sessions(0, n, info, parts.append)
    else:  # the information over chunks of sessions, then the scores chunk by chunk: bounded memory
        for lo in range(0, n, _dcm.CHUNK):
            sessions(lo, min(lo + _dcm.CHUNK, n), info, _dcm.discard)
    # the value's gradient, weighted by each query's share of the impressions
    t_uq, t_code, *t_values = target_slot_values(chain.tables, idx, target, k)
    shown = t_code >= 0
    d_fam, d_shared = chain_value_gradient(chain, t_values, t_uq >= 0, reward)
    share = idx.n_q / n
    g_vec = np.concatenate([np.bincount(t_code[shown], (d * share[:, None])[shown], minlength=m) for d in d_fam]
                           + [share @ d_shared])
    block = np.concatenate([idx.qi] * families + [np.full(n_shared, -1)])
    y = solved_information(mdl, data, info.entries(), free, g_vec, block)
    if n <= _dcm.CHUNK:
        return n * score_sums(parts, y, n)
    out = np.empty(n)
    idle = _Information(idx, families, n_shared, active=False)
    for lo in range(0, n, _dcm.CHUNK):
        hi = min(lo + _dcm.CHUNK, n)
        parts = []
        sessions(lo, hi, idle, parts.append)
        out[lo:hi] = n * score_sums(parts, y, hi - lo)
    return out


def _click_information(info: _Information, terms: list[Any], second: list[tuple[int, int, np.ndarray]],
                       denom: np.ndarray) -> None:
    """The information of ``log(x)`` in the click's terms: ``x_i x_j / x^2 - x_ij / x`` with ``x`` ``denom`` (the
    continuation itself for a click above the last, ``f`` for the last), the terms' derivatives ``x_i`` and the
    nonzero second derivatives ``second``."""
    d2 = {(i, j): v for i, j, v in second}
    for i, (ki, pi, di) in enumerate(terms):
        info.on_diag(ki, pi, (di / denom) ** 2 - d2.get((i, i), 0.0) / denom)
        for j in range(i + 1, len(terms)):
            kj, pj, dj = terms[j]
            info.cross(ki, pi, kj, pj, di * dj / denom ** 2 - d2.get((i, j), 0.0) / denom)
