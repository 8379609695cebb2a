r"""The direct method's per-impression terms for a DCM or SDBN fitted on the log by maximum likelihood (EM).

A DCM user (Guo, Liu and Wang 2009) examines the list from the top, clicks a document at an examined slot with
probability :math:`\alpha_{qd}` and, after a click at slot ``r``, goes on with probability :math:`\lambda_r` (after
a skip always). A session with its last click at slot ``l`` has the log-likelihood

.. math::

    \sum_{r \le l} \bigl[c_r\log\alpha_r + (1 - c_r)\log(1 - \alpha_r)\bigr] + \sum_{r < l,\ c_r = 1}\log\lambda_r
        + \log\bigl(1 - \lambda_l + \lambda_l P\bigr), \qquad P = \prod_{r > l}(1 - \alpha_r)

(the last term: stopped after the last click, or went on and clicked nothing more; a session without a click has
only the skips, :math:`\sum_r\log(1 - \alpha_r)`). The maximum likelihood :math:`\hat\beta = (\hat\alpha,
\hat\lambda)` is an M-estimator, so to first order :math:`\hat V - V \approx \frac1n\sum_i \nabla V^\top H^{-1}
s_i` with :math:`s_i` session ``i``'s scores and :math:`H` the negative Hessian of the log-likelihood (the observed
information) at the fit (Stefanski and Boos 2002). With :math:`D = 1 - \lambda_l + \lambda_l P` and
:math:`u_r = 1/(1 - \alpha_r)` the last term's derivatives are

.. math::

    \partial_{\lambda_l} = \frac{P - 1}{D}, \quad \partial_{\alpha_r} = -\frac{\lambda_l P u_r}{D}, \quad
    -\partial^2_{\lambda_l} = \frac{(P - 1)^2}{D^2}, \quad -\partial_{\lambda_l}\partial_{\alpha_r} = \frac{P u_r}{D^2},

    -\partial_{\alpha_r}\partial_{\alpha_{r'}} = -\frac{\lambda_l(1 - \lambda_l)P u_r u_{r'}}{D^2}\ (r \ne r'), \quad
    -\partial^2_{\alpha_r} = \frac{\lambda_l^2 P^2 u_r^2}{D^2},

so the information couples the relevances of the documents below a session's last click: it is sparse (pairs of
one query, and the continuations), built in one pass per pair of slots and solved by a sparse LU. The value of a
target list, :math:`V = \sum_s w_s\alpha_s E_s` with :math:`E_s = \prod_{r < s}(1 - \alpha_r(1 - \lambda_r))`
(additive) or :math:`f_r = 1 - \alpha_r` in place of those factors (first click), has the derivatives
:math:`E_s(w_s - (1 - \lambda_s)R_{s+1})` in :math:`\alpha_s` (first click: :math:`E_s(w_s - R_{s+1})`) and
:math:`E_s\alpha_s R_{s+1}` in :math:`\lambda_s` (first click: 0), :math:`R_s = w_s\alpha_s + f_s R_{s+1}` the
value still to come from slot ``s``.

Parameters on the boundary (a relevance or continuation within :data:`BOUNDARY` of 0 or 1: a pair never or always
clicked, a continuation never or always taken) or that the log barely informs (information below
:data:`MIN_INFORMATION`: the last slot's continuation, which no slot below shows, or a pair seen only below last
clicks the users had likely left) are held fixed. Without that floor, on sparse logs (200 Zipf-distributed queries,
4,000 impressions) parameters with an information of 1e-72 made the SE about 1e14 and, through rounding, moved the
value itself (``tests/test_dm_dcm_world.py``). So are parameters each informed on its own but not jointly with the
others of their query (their information given the better-informed ones below the floor, :func:`weakly_informed`:
an SDBN's satisfaction of a document clicked last only above one other document, which informs only that
satisfaction times the other's relevance, made the SE / SD 1e8 over 100 such logs, ``tests/test_dm_chain_world.py``).

An SDBN (Chapelle and Zhang 2009, :math:`\gamma = 1`) has the same likelihood with the continuation after a click
on a document its :math:`1 - \sigma_{qd}` (satisfaction per pair, not a continuation per slot): the same terms with
one continuation parameter per pair (:func:`dcm_correction` reads which the model has).

Measured: over 1,000 logs of 4,000 impressions of the DCM check world the 95% interval covered 946-957 times (SE
1.00-1.03 of the estimates' SD; held fixed, 71 of 400, 380 nominal); the cascade world (continuation 0, on the
boundary) 281-283 of 300 (``tests/test_dm_dcm_world.py``, which also checks the terms against numerical
derivatives of the forward filter's log-likelihood). An SDBN fitted on 400 logs of 4,000 impressions of an SDBN
world (satisfaction 0.2-0.8 per pair): 377-384 of 400 covered, SE 0.99-1.01 of the SD (held fixed: 65 of 400 on
the cascade world's logs). Cost (``benchmarks/bench_dm.py``'s log, 10^6 top-10
impressions, one core, one BLAS thread, a fresh log each run): ``dm`` with a DCM 5.0 s of CPU and a peak of 1.0 GB
against 2.1 s and 1.0 GB with the model held fixed (its EM fit alone; 8.3 s and 2.6 GB before the relevances'
pairwise sums were compiled, :meth:`PairSums.add_tail_pairs`, and the sessions taken in chunks, :data:`CHUNK`),
against about 800 s for a bootstrap of 400 refits.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from onlineeval.errors import InputError
from onlineeval.estimators.base import FloatArray, LoggedData, Reward, Target

__all__ = ["BOUNDARY", "CHUNK", "PairSums", "dcm_correction", "dcm_value_gradient", "discard", "exam_and_rest",
           "score_sums", "solved_information", "weakly_informed"]

#: a relevance or continuation this close to 0 or 1 is on the boundary (held fixed)
BOUNDARY = 1e-9
#: the largest (pair, pair of the same query) table the information's pairwise entries are summed in before the
#: sparse matrix is built (else the matrix sums them: about twice the time at 10^6 top-10 impressions)
TABLE_MAX = 1 << 22
#: sessions per chunk: a longer log is linearised in two passes over chunks (the information, then the scores with
#: its solution), so its memory stays that of a chunk's temporaries (:mod:`~onlineeval.estimators.chain_linearisation`
#: reads it too): at 10^6 top-10 impressions ``dm`` with a DBN peaked at 2.3 GB in one pass, 1.2 GB in chunks (held
#: fixed 1.0 GB)
CHUNK = 1 << 18
#: a parameter whose information (its diagonal entry) is below this is held fixed: a probability's variance cannot
#: exceed 1/4, so below 4 the log does not locate it within its range (one Bernoulli observation gives at least 4)
MIN_INFORMATION = 4.0


def dcm_value_gradient(alpha: FloatArray, lam: FloatArray, reward: Reward) -> tuple[FloatArray, FloatArray]:
    """``(d V / d alpha, d V / d lambda)``, each ``(n, k)``: the derivatives of a DCM's value of lists whose
    documents have the relevances ``alpha`` (``(n, k)``, 0 at empty slots) in each slot's relevance and
    continuation ``lam`` (``(k,)`` by slot, a DCM's, or ``(n, k)`` by the slot's document, an SDBN's ``1 -
    satisfaction``; module docstring)."""
    n, k = alpha.shape
    w = reward.position_weights(k)
    additive = reward.kind == "additive"
    lam = np.broadcast_to(np.asarray(lam, dtype=np.float64), (n, k))
    f = 1.0 - alpha * (1.0 - lam) if additive else 1.0 - alpha
    exam, below = exam_and_rest(alpha, f, w)
    if additive:
        return exam * (w[None, :] - (1.0 - lam) * below), exam * alpha * below
    return exam * (w[None, :] - below), np.zeros((n, k))


def exam_and_rest(alpha: FloatArray, f: FloatArray, w: FloatArray) -> tuple[FloatArray, FloatArray]:
    r"""``(E, R)``, each ``(n, k)``, of a cascade chain's value :math:`V = \sum_s w_s\alpha_s E_s`: :math:`E_s` the
    chance that slot ``s`` is examined (:math:`E_{s+1} = E_s f_s`, ``f`` the chance of going on past a slot) and
    :math:`R_{s+1}` the value still to come below slot ``s`` given that ``s + 1`` is examined (:math:`R_s = w_s\alpha_s
    + f_s R_{s+1}`, 0 below the last slot)."""
    n, k = alpha.shape
    exam = np.ones((n, k))
    exam[:, 1:] = np.cumprod(f[:, :-1], axis=1)
    rest = np.zeros((n, k + 1))  # rest[:, s]: R_s
    for s in range(k - 1, -1, -1):
        rest[:, s] = w[s] * alpha[:, s] + f[:, s] * rest[:, s + 1]
    return exam, rest[:, 1:]


def dcm_correction(mdl: Any, data: LoggedData, target: Target, reward: Reward) -> FloatArray:
    """``(n,)``: each impression's linearised influence on the direct method's value with the DCM or SDBN ``mdl``
    fitted on ``data`` by maximum likelihood (module docstring), ``n grad V' H^-1 s_i``; its mean is 0 at the
    maximum. An SDBN is the same likelihood with the continuation after a click on a document its ``1 -
    satisfaction`` (one parameter per pair, not per slot)."""
    from scipy.sparse import csc_matrix

    from clickmodels.base import Impressions  # lazy
    from onlineeval.estimators.model_based import target_slot_values
    from onlineeval.estimators.model_fit import pair_index

    idx = pair_index(data)
    k, m, n = data.k, idx.n_pairs, data.n
    pairs = Impressions(query=idx.query, docs=idx.doc[:, None])
    alpha_pair = np.asarray(mdl.attractiveness.lookup(pairs), dtype=np.float64)[:, 0]
    code = idx.code
    valid = code >= 0
    pc_all = np.where(valid, code, 0)
    per_pair = hasattr(mdl, "satisfaction")  # an SDBN: the continuation 1 - satisfaction of the clicked document
    if per_pair:  # each position's continuation parameter: its pair's (an SDBN's) or its slot's (a DCM's)
        lam = 1.0 - np.asarray(mdl.satisfaction.lookup(pairs), dtype=np.float64)[:, 0]
    else:
        lam = np.asarray(mdl.continuation, dtype=np.float64)[:k]
    c_all = np.asarray(data.clicks, dtype=bool) & valid
    rank = np.arange(k)[None, :]
    safe_l = np.clip(lam, BOUNDARY, 1 - BOUNDARY)
    # the parameters: pair p -> p, continuation j (a DCM's slot, an SDBN's pair) -> m + j
    free = np.concatenate([(alpha_pair > BOUNDARY) & (alpha_pair < 1 - BOUNDARY),
                           (lam > BOUNDARY) & (lam < 1 - BOUNDARY)])
    pairs_of_pairs = PairSums(idx)

    def sessions(lo: int, hi: int, add: Any, score: Any, pairwise: bool) -> None:
        """Pass the information's entries of sessions ``lo`` to ``hi`` to ``add`` (parts of ``(row, column,
        value)``; with ``pairwise`` the relevances' pairwise ones to ``pairs_of_pairs``) and their scores to
        ``score`` (parts of ``(session - lo, parameter, value)``)."""
        v, pc, c = valid[lo:hi], pc_all[lo:hi], c_all[lo:hi]
        cont_of = pc if per_pair else np.broadcast_to(np.arange(k)[None, :], pc.shape)
        a = np.where(v, alpha_pair[pc], 0.0)
        has = c.any(axis=1)
        last = np.where(has, k - 1 - np.argmax(c[:, ::-1], axis=1), k)  # k: no click (every slot a skip)
        head = v & (rank <= last[:, None])
        tail = v & (rank > last[:, None])
        cont = c & (rank < last[:, None])
        # the derivatives at the boundary's edge (BOUNDARY inside it): finite; a parameter on it is held fixed, and
        # the others' derivatives move by about BOUNDARY
        safe_a = np.clip(a, BOUNDARY, 1 - BOUNDARY)
        u = 1.0 / np.where(tail, 1.0 - safe_a, 1.0)
        p_tail = np.prod(np.where(tail, 1.0 - safe_a, 1.0), axis=1)
        last_cont = cont_of[np.arange(hi - lo), np.minimum(last, k - 1)]  # the continuation after the last click
        ll = np.where(has, safe_l[last_cont], 0.0)  # lambda_l of each session with a click
        d = np.where(has, 1.0 - ll + ll * p_tail, 1.0)
        hi_, hj = np.nonzero(head)
        ch = c[hi_, hj]
        ah = safe_a[hi_, hj]
        score((hi_, pc[hi_, hj], np.where(ch, 1.0 / ah, -1.0 / (1.0 - ah))))
        add((pc[hi_, hj], pc[hi_, hj], np.where(ch, 1.0 / ah ** 2, 1.0 / (1.0 - ah) ** 2)))
        ci, cj = np.nonzero(cont)
        cc = cont_of[ci, cj]
        score((ci, m + cc, 1.0 / safe_l[cc]))
        add((m + cc, m + cc, 1.0 / safe_l[cc] ** 2))
        sess = np.flatnonzero(has & tail.any(axis=1))
        ls, ps, ds, lm = last_cont[sess], p_tail[sess], d[sess], ll[sess]
        score((sess, m + ls, (ps - 1.0) / ds))
        add((m + ls, m + ls, (ps - 1.0) ** 2 / ds ** 2))
        tail_s, u_s, pc_s = tail[sess], u[sess], pc[sess]
        for r in range(k):
            on = tail_s[:, r]
            si = sess[on]
            ur = u_s[on, r]
            pr = pc_s[on, r]
            score((si, pr, -lm[on] * ps[on] * ur / ds[on]))
            cross = ps[on] * ur / ds[on] ** 2
            add((m + ls[on], pr, cross))
            add((pr, m + ls[on], cross))
            add((pr, pr, (lm[on] * ps[on] * ur / ds[on]) ** 2))
        if pairwise:  # the relevances below one last click, pairwise (the bulk of the entries)
            pairs_of_pairs.add_tail_pairs(tail_s, pc_s, None, -lm * (1.0 - lm) * ps / ds ** 2, u_s, None)

    n_par = m + lam.size
    info = csc_matrix((n_par, n_par))
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for lo in range(0, n, CHUNK):  # the information chunk by chunk (one chunk: the scores kept for the solve)
        chunk: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        sessions(lo, min(lo + CHUNK, n), chunk.append, parts.append if n <= CHUNK else discard, True)
        for rows_i, cols_i, vals in chunk:
            info = info + csc_matrix((vals, (rows_i, cols_i)), shape=(n_par, n_par))
    p1, p2, val = pairs_of_pairs.entries()
    entries = [(p1, p2, val), (p2, p1, val)]
    coo = info.tocoo()
    entries.append((coo.row, coo.col, coo.data))
    # the value's gradient, weighted by each query's share of the impressions
    # the target documents' relevances and (an SDBN's) own continuations; the model's default for unseen pairs
    _, t_code, t_alpha, *t_sat = target_slot_values(
        (mdl.attractiveness, mdl.satisfaction) if per_pair else (mdl.attractiveness,), idx, target, k)
    shown = t_code >= 0
    t_lam = 1.0 - t_sat[0] if per_pair else lam
    d_alpha, d_lam = dcm_value_gradient(t_alpha, t_lam, reward)
    share = (idx.n_q / n)[:, None]
    g_lam = (np.bincount(t_code[shown], (d_lam * share)[shown], minlength=m) if per_pair else
             (d_lam * share).sum(axis=0))
    g = np.concatenate([np.bincount(t_code[shown], (d_alpha * share)[shown], minlength=m), g_lam])
    # each pair's relevance (and satisfaction) in its query's block; a DCM's continuations are shared
    block = np.concatenate([idx.qi, idx.qi if per_pair else np.full(lam.size, -1)])
    y = solved_information(mdl, data, entries, free, g, block)
    if n <= CHUNK:
        return n * score_sums(parts, y, n)
    out = np.empty(n)
    for lo in range(0, n, CHUNK):  # the scores chunk by chunk, with the solution
        hi = min(lo + CHUNK, n)
        parts = []
        sessions(lo, hi, discard, parts.append, False)
        out[lo:hi] = n * score_sums(parts, y, hi - lo)
    return out


def discard(part: Any) -> None:
    """A part nobody needs (the scores of the information's pass over chunks; the entries of the scores' pass)."""


class PairSums:
    """The information's entries between two relevances of one query (a session's pairs below its last click, the
    bulk of the entries), summed per pair of pairs by a count over compact keys (the pair, the other pair's rank
    among its query's pairs) where that table is at most :data:`TABLE_MAX`, else kept as they are (the sparse matrix
    sums duplicates: about twice the time at 10^6 top-10 impressions). ``idx``: the log's pair index (pairs sorted
    by query)."""

    def __init__(self, idx: Any) -> None:
        m = idx.n_pairs
        self.first = np.searchsorted(idx.qi, np.arange(idx.uq.size))  # each query's first pair
        self.qi = idx.qi
        self.local = np.arange(m) - self.first[idx.qi]
        self.width = int(self.local.max()) + 1 if m else 1
        self.table = m * self.width <= TABLE_MAX
        self.total = np.zeros(m * self.width if self.table else 0)
        self.keys: list[np.ndarray] = []
        self.values: list[np.ndarray] = []

    def add(self, p1: np.ndarray, p2: np.ndarray, values: np.ndarray) -> None:
        """Add ``values`` at the entries ``(p1, p2)`` (pairs of one query each)."""
        key = p1 * self.width + self.local[p2]
        if self.table:
            self.total += np.bincount(key, values, minlength=self.total.size)
        else:
            self.keys.append(key)
            self.values.append(values)

    def add_tail_pairs(self, tail: np.ndarray, pc: np.ndarray, a: np.ndarray | None, b: np.ndarray,
                       u: np.ndarray, v: np.ndarray | None) -> None:
        """Add, for every session ``s`` (a row) and every two of its slots ``r < r2`` in ``tail``, the value
        ``a[s, r] a[s, r2] + b[s] u[s, r] u[s, r2] v[s, r2]`` (``a`` None: no first term; ``v`` None: 1) at the
        entry of their pairs ``(pc[s, r], pc[s, r2])``: the pairwise information of the relevances below a last
        click. Summed in the table by a compiled loop over the sessions (:func:`_tail_pair_sums`; it replaced one
        NumPy pass per pair of slots, 45 at ten slots, about ten times slower at 10^6 impressions), else by those
        passes."""
        k = tail.shape[1]
        if self.table:
            none = np.empty((0, 0))
            _pair_kernel()(np.ascontiguousarray(tail), np.ascontiguousarray(pc, dtype=np.int64),
                           none if a is None else np.ascontiguousarray(a, dtype=np.float64),
                           np.ascontiguousarray(b, dtype=np.float64), np.ascontiguousarray(u, dtype=np.float64),
                           none if v is None else np.ascontiguousarray(v, dtype=np.float64),
                           self.local, self.width, self.total)
            return
        for r in range(k):
            for r2 in range(r + 1, k):
                on2 = tail[:, r] & tail[:, r2]
                val = b[on2] * u[on2, r] * u[on2, r2]
                if v is not None:
                    val = val * v[on2, r2]
                if a is not None:
                    val = a[on2, r] * a[on2, r2] + val
                self.add(pc[on2, r], pc[on2, r2], val)

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(p1, p2, value)``: the sums so far (one entry per pair of pairs where summed in the table)."""
        if self.table:
            key = np.flatnonzero(self.total)
            val = self.total[key]
        else:
            key = np.concatenate(self.keys) if self.keys else np.zeros(0, dtype=np.int64)
            val = np.concatenate(self.values) if self.values else np.zeros(0)
        p1 = key // self.width
        return p1, self.first[self.qi[p1]] + key % self.width, val


def solved_information(mdl: Any, data: LoggedData, entries: Any, free: np.ndarray, g: FloatArray,
                       block: np.ndarray) -> FloatArray:
    """``H^-1 g`` with ``H`` the information summed from ``entries`` (parts of ``(row, column, value)``), the
    parameters not ``free`` or that the log does not inform held fixed (0; :func:`weakly_informed`: ``block`` each
    parameter's query, ``-1`` for the parameters every query shares); a non-finite solve is a clear error naming
    the bootstrap. The parts are summed one by one, not concatenated first (and :func:`score_sums` likewise)."""
    from scipy.sparse import csc_matrix
    from scipy.sparse.linalg import spsolve

    n_par = g.size
    info = csc_matrix((n_par, n_par))
    for rows_i, cols_i, vals in entries:  # part by part (each part's duplicates summed)
        info = info + csc_matrix((vals, (rows_i, cols_i)), shape=(n_par, n_par))
    free = free & ~weakly_informed(info, free, block)
    keep = np.flatnonzero(free)
    y = np.zeros(n_par)
    if keep.size:
        y[keep] = np.atleast_1d(spsolve(info[keep][:, keep].tocsc(), g[keep]))
    if not np.all(np.isfinite(y)):
        raise InputError(f"dm: the fitted {type(mdl).__name__}'s information is singular on this log, so its "
                         "linearised interval is undefined; a bootstrap (n_boot, --bootstrap) fits the model again on "
                         "every resample", data.source)
    return y


def score_sums(scores: Any, y: FloatArray, n: int) -> FloatArray:
    """``(n,)``: per session, its scores (parts of ``(session, parameter, value)``) weighted by ``y``."""
    out = np.zeros(n)
    for rows, par, val in scores:
        out += np.bincount(rows, y[par] * val, minlength=n)
    return out


def weakly_informed(info: Any, free: np.ndarray, block: np.ndarray) -> np.ndarray:
    """The free parameters the log does not locate within their range: information below :data:`MIN_INFORMATION`
    (a probability's variance cannot exceed 1/4), and, within each query's block of parameters (``block``: each
    parameter's query, ``-1`` for shared ones, which only the first rule judges), those whose information given the
    block's others is below it, by a Cholesky elimination that takes the best-informed remaining parameter first
    and holds fixed what is left once the best of it falls below the floor. On a sparse log a document clicked last
    only above one other document informs only its satisfaction times the other's relevance: each informed on its
    own (6.4 and 6.7), jointly not (an eigenvalue of 5e-7), which made a DBN's SE 1,600 on a 4,000-impression log
    (``tests/test_dm_dbn_world.py``). ``info`` the (sparse) information; a boolean mask."""
    diag = info.diagonal()
    weak = free & (diag < MIN_INFORMATION)
    cand = np.flatnonzero(free & ~weak & (block >= 0))
    if cand.size == 0:
        return weak
    order = cand[np.argsort(block[cand], kind="stable")]
    bid = block[order]
    starts = np.flatnonzero(np.r_[True, bid[1:] != bid[:-1]])
    sizes = np.diff(np.r_[starts, bid.size])
    pos = np.arange(bid.size) - np.repeat(starts, sizes)  # each parameter's place in its block
    sub = info[order][:, order].tocoo()
    same = bid[sub.row] == bid[sub.col]
    r, c, v = sub.row[same], sub.col[same], sub.data[same]
    which = np.repeat(np.arange(starts.size), sizes)  # each parameter's block number
    for b in np.unique(sizes[sizes > 1]):
        blocks = np.flatnonzero(sizes == b)
        slot = np.full(starts.size, -1)
        slot[blocks] = np.arange(blocks.size)
        on = slot[which[r]] >= 0
        a = np.zeros((blocks.size, b, b))
        np.add.at(a, (slot[which[r[on]]], pos[r[on]], pos[c[on]]), v[on])
        held = _pivoted_weak(a)
        members = order[(np.repeat(starts[blocks], b) + np.tile(np.arange(b), blocks.size))]
        weak[members[held.ravel()]] = True
    return weak


def _pivoted_weak(a: np.ndarray) -> np.ndarray:
    """``(B, b)``: per ``(b, b)`` block of ``a`` (``(B, b, b)``, symmetric), the parameters a Cholesky elimination
    with the largest remaining pivot first leaves with a pivot below :data:`MIN_INFORMATION` (their information
    given the parameters eliminated before them)."""
    a = a.copy()
    nb, b, _ = a.shape
    done = np.zeros((nb, b), dtype=bool)
    held = np.zeros((nb, b), dtype=bool)
    rows = np.arange(nb)
    for _ in range(b):
        d = np.where(done, -np.inf, np.diagonal(a, axis1=1, axis2=2))
        piv = np.argmax(d, axis=1)
        pv = d[rows, piv]
        weak = np.isfinite(pv) & (pv < MIN_INFORMATION)  # the best left is below the floor: so is the rest
        held |= weak[:, None] & ~done
        done |= weak[:, None]
        go = np.flatnonzero(np.isfinite(pv) & ~weak)
        if go.size == 0:
            break
        col = a[go, :, piv[go]]  # (G, b)
        a[go] -= col[:, :, None] * col[:, None, :] / pv[go, None, None]
        done[go, piv[go]] = True
    return held


def _tail_pair_sums(tail, pc, a, b, u, v, local, width, total):  # type: ignore[no-untyped-def]
    """:meth:`PairSums.add_tail_pairs`' sums into ``total`` (``a`` or ``v`` with no rows: absent); compiled by
    :func:`_pair_kernel`."""
    n, k = tail.shape
    has_a = a.shape[0] > 0
    has_v = v.shape[0] > 0
    for s in range(n):
        for r in range(k):
            if not tail[s, r]:
                continue
            base = pc[s, r] * width
            for r2 in range(r + 1, k):
                if tail[s, r2]:
                    val = b[s] * u[s, r] * u[s, r2]
                    if has_v:
                        val = val * v[s, r2]
                    if has_a:
                        val = a[s, r] * a[s, r2] + val
                    total[base + local[pc[s, r2]]] += val


@functools.cache
def _pair_kernel():  # type: ignore[no-untyped-def]
    """:func:`_tail_pair_sums` compiled by numba at its first use (``njit(cache=True, nogil=True)``, no fastmath, as
    :func:`onlineeval.estimators.model_fit._kernels`)."""
    import numba

    return numba.njit(cache=True, nogil=True)(_tail_pair_sums)
