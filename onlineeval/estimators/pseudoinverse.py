r"""Pseudoinverse estimator (PI; Swaminathan et al. 2017), linearity assumption.

Write a list of ``k`` slots over the ``m`` candidates of a query as the indicator vector
:math:`\mathbf 1_{\mathbf s} \in \{0,1\}^{km}` with :math:`(\mathbf 1_{\mathbf s})_{(j,a)} =
1[s_j = a]`. *Linearity*: the expected list reward is additive over (slot, document)
pairs with unknown per-pair values :math:`\phi_q`,

.. math::

    \mathbb E[R \mid q, \mathbf s] = \mathbf 1_{\mathbf s}^\top \phi_q .

Then :math:`\theta_\mu = \mathbb E_\mu[\mathbf 1_{\mathbf s} R] = \Gamma_\mu \phi_q` with
:math:`\Gamma_\mu(q) = \mathbb E_\mu[\mathbf 1_{\mathbf s}\mathbf 1_{\mathbf s}^\top]`
(the logger's pairwise marginals :math:`P(s_j = a, s_l = b)`), and the target's value is
:math:`\mathbf q_\pi^\top \phi_q` with :math:`\mathbf q_\pi(j, a) = \pi(a \text{ at } j)`.
PI replaces :math:`\phi_q` by :math:`\Gamma_\mu^{+} \mathbf 1_{\mathbf s_i} R_i`:

.. math::

    \hat V_{\mathrm{PI}} = c_0 + \frac1n \sum_{i=1}^n R_i\,
        \mathbf q_\pi(q_i)^\top \Gamma_\mu(q_i)^{+}\, \mathbf 1_{\mathbf s_i}.

:math:`\mathbb E[\hat V_{\mathrm{PI}}] = c_0 + \mathbb E_q\, \mathbf q_\pi^\top \Gamma^{+}\Gamma
\phi_q`, which is the target's value exactly when :math:`\mathbf q_\pi` lies in the range of
:math:`\Gamma_\mu` (then :math:`\Gamma^{+}\Gamma` fixes it), e.g. whenever the logger gives
every target list positive probability. ``Gamma`` is always singular for lists without
repeated documents (each slot's indicators sum to one), hence the pseudoinverse. The
notes report ``max_range_residual`` :math:`\max_q \|\Gamma\Gamma^{+}\mathbf q_\pi -
\mathbf q_\pi\|_\infty` and ``queries_outside_range`` (residual above ``1e-8``, or a target list
holding a document outside the logger's candidates, counted in
``queries_target_outside_candidates``): where it is not zero, PI is biased for that query
even under linearity.

Linearity holds for additive rewards under the position-based model
(:math:`\phi_q(j, a) = v_j \theta_j \alpha_q(a)`). It fails for the cascade and dependent
click models (a slot's click probability depends on the documents above it) and for
first-click rewards (reciprocal rank, abandonment), so PI is biased there.

Uniform logging without replacement (a worked case, checked in the tests). With
:math:`N` the number of slots where the logged list agrees with the target's and
:math:`Z` the number of the target's ``k`` documents shown anywhere in the logged list,
the per-impression weight :math:`\mathbf q_\pi^\top\Gamma^{+}\mathbf 1_{\mathbf s}` is

.. math::

    (m-1)N + \frac{(m-1)Z - m(k-1)}{m-k} \quad (k < m), \qquad (m-1)N - m + 2 \quad (k = m).

(The often-quoted :math:`mN - k + 1` is the weight for slots drawn *independently* and
uniformly, with repetition; without replacement it is biased, e.g. for :math:`m = k = 2`
it gives the target's list weight 3 and the other list -1, expectation
:math:`(3V_\pi - V_{\bar\pi})/2 \ne V_\pi`.)

Needs the logging policy itself, not only recorded propensities: ``data.logger`` must
offer ``pair_marginals(query_index) -> (k, m, k, m)`` array of :math:`P(s_j = a, s_l = b)`
(documents are the query's candidate indices ``0..m-1``; empty slots have no indicator).
The target's :math:`\mathbf q_\pi` is read from its item propensities.

Cost. :math:`\Gamma_\mu(q)` is asked once per distinct query and logger. Queries whose
:math:`\Gamma` are the same matrix up to a relabelling of the candidates (the randomised
part of epsilon-greedy, RandTop-n or swap logging does not depend on which documents the
production ranker put where) share one symmetric eigendecomposition of size :math:`km'`
(``m'``: candidates the logger ever shows): the candidates are put in a canonical order
(sorted by their item-position marginals, the diagonal of :math:`\Gamma`), and a query
whose relabelled :math:`\Gamma` equals, element for element, one already decomposed
reuses it; otherwise (e.g. Plackett-Luce, whose :math:`\Gamma` depends on the scores) it
gets its own. Decompositions (up to :data:`STORE_BYTES` per logger) and each query's
weights per target are kept for later calls with the same logger and target objects
(both are treated as immutable); then one gather per impression, made and added block by
block of rows (:func:`~onlineeval.estimators.derived.add_rows`, numpy's order: no ``(n, k)``
index or value array). Measured on the benchmark's log (``benchmarks/bench_estimators.py``:
10^6 top-10 impressions, 1000 queries of 20 candidates, one class; loaded 2-core machine):
the 1000 look-ups about 0.17 s of CPU (asking the logger, relabelling and comparing Gamma:
three copies of its :math:`(km)^2` values per query; one eigendecomposition), the
per-impression part 0.06 s once the query weights are known (0.10 s before it was blockwise,
plus up to 0.2 s of system time for the page faults of its two ``(n, k)`` temporaries in a
process holding other estimators' arrays). A query with a
:math:`\Gamma` of its own gets exactly the numbers of one decomposition per query
(:func:`pi_slot_weights`); queries sharing one get them up to rounding (relative
differences near :math:`10^{-14}`), so where a weight is 0 mathematically its sign and
whether it is exactly 0 are rounding, as they always were (the ``negative_weight_share``
note and the ``zero_weight_share`` diagnostic count such weights as they come out).

Reference
---------
Swaminathan, A., Krishnamurthy, A., Agarwal, A., Dudík, M., Langford, J., Jose, D.,
Zitouni, I. (2017). Off-policy evaluation for slate recommendation. *NeurIPS 2017*.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from onlineeval.errors import ConfigError, InputError, OnlineEvalError, finite_number
from onlineeval.estimators.base import (
    Estimator,
    FloatArray,
    IntArray,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)
from onlineeval.estimators.derived import add_rows, block_rows

__all__ = ["PseudoInverse", "pi_slot_weights"]

#: residual above which a target's q is reported as outside the range of Gamma
RANGE_TOLERANCE = 1e-8
#: memory kept per logger for decompositions of Gamma shared across calls and targets
STORE_BYTES = 64 * 2**20
#: distinct queries handled together (target marginals and weights of a class batched)
_CHUNK = 256


def _raw_pair_marginals(logger: Any, query: int, k: int, source: str | None) -> FloatArray:
    """The logger's ``(k, m, k, m)`` pair marginals of ``query`` (first ``k`` slots), shape
    checked; the values are checked by :func:`_check_values`."""
    try:
        g = np.asarray(logger.pair_marginals(int(query)), dtype=np.float64)
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        if isinstance(exc, OnlineEvalError):
            raise  # the logger's own located error (e.g. pair marginals it cannot give exactly)
        raise InputError(f"pseudoinverse: the logger's pair_marginals({query}) failed: {exc}", source) from None
    if g.ndim != 4 or g.shape[0] != g.shape[2] or g.shape[1] != g.shape[3] or g.shape[1] == 0:
        raise InputError(f"pseudoinverse: pair_marginals({query}) must have shape (k, m, k, m), got {g.shape}",
                         source)
    if g.shape[0] < k:
        raise InputError(f"pseudoinverse: the logger's pair marginals cover {g.shape[0]} slots, the log has {k}",
                         source)
    return g if g.shape[0] == k else g[:k, :, :k, :]


def _check_values(g: FloatArray, query: int, source: str | None) -> None:
    if not np.all(np.isfinite(g)) or g.min() < -1e-12 or g.max() > 1 + 1e-12:
        raise InputError(f"pseudoinverse: pair_marginals({query}) must be probabilities in [0, 1]", source)


def _pair_marginals(logger: Any, query: int, k: int, source: str | None) -> FloatArray:
    g = _raw_pair_marginals(logger, query, k, source)
    _check_values(g, query, source)
    return g


def _target_q(target: Target, query: int, k: int, m: int) -> FloatArray:
    """``(k, m)`` target marginals ``pi(a at j)``, read from the target's item propensities on
    the ``m`` cyclic shifts of the candidates (every document visits every slot once)."""
    a = np.arange(m)
    lists = (a[:, None] + np.arange(k)[None, :]) % m  # lists[a, j] = (a + j) mod m
    if k > m:
        lists = np.where(np.arange(k)[None, :] < m, lists, -1)
    item = np.asarray(target.propensities(np.full(m, query, dtype=np.int64), lists).item, dtype=np.float64)
    q = np.zeros((k, m))
    rows = np.arange(m)
    for j in range(min(k, m)):
        q[j, lists[rows, j]] = item[rows, j]
    return q


def pi_slot_weights(gamma: FloatArray, q: FloatArray, rcond: float) -> tuple[FloatArray, float]:
    """``(k, m)`` vector :math:`\\Gamma^{+} q` and the residual :math:`\\|\\Gamma\\Gamma^{+}q - q\\|_\\infty`.

    ``gamma`` is ``(k, m, k, m)``; rows and columns of (slot, document) pairs the logger
    never shows are zero and are dropped before the eigendecomposition; eigenvalues below
    ``rcond`` times the largest count as zero.
    """
    k, m = q.shape
    g = gamma.reshape(k * m, k * m)
    g = 0.5 * (g + g.T)
    qv = q.reshape(-1)
    live = np.flatnonzero(np.diag(g) > 0)
    out = np.zeros(k * m)
    if live.size:
        sub = g[np.ix_(live, live)]
        lam, vec = np.linalg.eigh(sub)
        keep = lam > rcond * max(float(lam.max()), 0.0)
        inv = (vec[:, keep] / lam[keep]) @ vec[:, keep].T
        out[live] = inv @ qv[live]
    resid = float(np.abs(g @ out - qv).max()) if qv.size else 0.0
    return out.reshape(k, m), resid


def _targets_q(target: Target, queries: IntArray, k: int, m: int) -> FloatArray:
    """``(len(queries), k, m)``: :func:`_target_q` of each query (``m`` candidates each), from
    one call of the target's propensities."""
    a = np.arange(m)
    lists = (a[:, None] + np.arange(k)[None, :]) % m  # lists[a, j] = (a + j) mod m
    if k > m:
        lists = np.where(np.arange(k)[None, :] < m, lists, -1)
    nq = queries.size
    item = np.asarray(target.propensities(np.repeat(queries, m), np.tile(lists, (nq, 1))).item, dtype=np.float64)
    item = item.reshape(nq, m, k)
    q = np.zeros((nq, k, m))
    for j in range(min(k, m)):
        q[:, j, lists[:, j]] = item[:, :, j]
    return q


def _relabelled(gamma: FloatArray, perm: IntArray,
                buffers: dict[tuple[int, ...], tuple[FloatArray, ...]] | None = None) -> FloatArray:
    """``gamma[j, perm[a], l, perm[b]]`` laid out as ``[l, b, j, a]`` (two takes along a middle
    axis, which copy whole rows, and one transposed copy; into ``buffers`` when given)."""
    k, m = gamma.shape[:2]
    if buffers is None:
        bufs = (np.empty((k, m, k, m)), np.empty((k, m, k, m)), np.empty((k, m, k, m)))
    else:
        bufs = buffers.get((k, m)) or buffers.setdefault((k, m), tuple(np.empty((k, m, k, m)) for _ in range(3)))
    gamma.take(perm, axis=1, out=bufs[0], mode="clip")
    np.copyto(bufs[1].reshape(k * m, k * m), bufs[0].reshape(k * m, k * m).T)  # [j, a, l, b] -> [l, b, j, a]
    bufs[1].take(perm, axis=1, out=bufs[2], mode="clip")
    return bufs[2]


class _Class:
    """One Gamma up to a relabelling of the candidates, decomposed in the frame of the first
    query that had it (``perm``: that query's candidates in canonical order), exactly as
    :func:`pi_slot_weights` does; ``gamma`` is the matrix in canonical order (for matching,
    laid out by :func:`_relabelled`)."""

    __slots__ = ("g", "gamma", "inv", "lam", "live", "nbytes", "perm", "vec")

    def __init__(self, own: FloatArray, perm: IntArray) -> None:
        k, m = own.shape[:2]
        g = own.reshape(k * m, k * m)
        self.g = 0.5 * (g + g.T)
        self.gamma = _relabelled(own, perm).copy()
        self.perm = perm
        self.live = np.flatnonzero(np.diag(self.g) > 0)
        if self.live.size:
            self.lam, self.vec = np.linalg.eigh(self.g[np.ix_(self.live, self.live)])
        else:
            self.lam, self.vec = np.zeros(0), np.zeros((0, 0))
        self.inv: dict[float, FloatArray] = {}
        self.nbytes = self.gamma.nbytes + self.g.nbytes + self.vec.nbytes

    def solve(self, q: FloatArray, perm: IntArray, rcond: float) -> tuple[FloatArray, float]:
        """``(Gamma^+ q as (k, m), ||Gamma Gamma^+ q - q||_inf)`` for the target marginals ``q``
        of a query whose candidates in canonical order are ``perm``; eigenvalues below
        ``rcond`` times the largest count as zero."""
        k, m = q.shape
        same = perm is self.perm or np.array_equal(perm, self.perm)
        qv = q.reshape(-1)
        if not same:  # the query's candidate perm[c] is this frame's candidate self.perm[c]
            qf = np.empty((k, m))
            qf[:, self.perm] = q[:, perm]
            qv = qf.reshape(-1)
        out = np.zeros(k * m)
        if self.live.size:
            out[self.live] = self._inverse(rcond) @ qv[self.live]
        resid = float(np.abs(self.g @ out - qv).max()) if qv.size else 0.0
        w = out.reshape(k, m)
        if not same:
            back = np.empty((k, m))
            back[:, perm] = w[:, self.perm]
            w = back
        return w, resid

    def solve_many(self, q: FloatArray, perms: IntArray, rcond: float) -> tuple[FloatArray, FloatArray]:
        """:meth:`solve` for several queries at once: ``q`` ``(r, k, m)``, ``perms`` ``(r, m)``;
        one matrix product for all (the same numbers up to rounding)."""
        r, k, m = q.shape
        frame_pos = np.argsort(self.perm)  # frame_pos[d]: canonical position of this frame's candidate d
        qf = np.take_along_axis(q, perms[:, frame_pos][:, None, :], axis=2).reshape(r, k * m)
        out = np.zeros((r, k * m))
        if self.live.size:
            out[:, self.live] = qf[:, self.live] @ self._inverse(rcond).T
        resid = np.abs(out @ self.g - qf).max(axis=1) if k * m else np.zeros(r)  # g is symmetric
        back = self.perm[np.argsort(perms, axis=1)]  # the frame's candidate of each query candidate
        return np.take_along_axis(out.reshape(r, k, m), back[:, None, :], axis=2), resid

    def _inverse(self, rcond: float) -> FloatArray:
        """The pseudoinverse of the live block, eigenvalues below ``rcond`` times the largest dropped."""
        inv = self.inv.get(rcond)
        if inv is None:
            lam, vec = self.lam, self.vec
            keep = lam > rcond * max(float(lam.max()), 0.0)
            inv = self.inv[rcond] = (vec[:, keep] / lam[keep]) @ vec[:, keep].T
            self.nbytes += inv.nbytes
        return inv


class _ClassStore:
    """The decompositions of a logger's Gamma, found by the canonical relabelling of the
    candidates (see the module docstring), and each query's class; bounded by
    :data:`STORE_BYTES` (beyond it, new classes serve the current call only)."""

    def __init__(self) -> None:
        self.by_print: dict[tuple[int, int, bytes], list[_Class]] = {}
        self.queries: dict[tuple[int, int], tuple[_Class, IntArray]] = {}
        self.nbytes = 0
        self.buffers: dict[tuple[int, ...], tuple[FloatArray, ...]] = {}

    def lookup(self, logger: Any, query: int, k: int, source: str | None,
               local: dict[tuple[int, int, bytes], list[_Class]]) -> tuple[_Class, IntArray]:
        """``(class, perm)`` of ``query``: its Gamma with candidates ``perm`` (canonical order)
        equals the class's; asks the logger for Gamma once per query."""
        hit = self.queries.get((query, k))
        if hit is not None:
            return hit
        gamma = _raw_pair_marginals(logger, query, k, source)
        m = gamma.shape[1]
        profile = gamma.reshape(k * m, k * m).diagonal().reshape(k, m)  # (k, m) item-position marginals
        perm = np.lexsort(profile[::-1])  # candidates by their marginal at slot 0, then 1, ... (stable)
        key = (k, m, np.ascontiguousarray(profile[:, perm]).tobytes())
        canon = None
        for persist, pool in ((True, self.by_print.get(key, ())), (False, local.get(key, ()))):
            for cls in pool:
                if canon is None:
                    canon = _relabelled(gamma, perm, self.buffers)
                if np.array_equal(canon, cls.gamma):  # the same matrix, element for element
                    if persist:
                        self._remember(query, k, cls, perm)
                    return cls, perm
        _check_values(gamma, query, source)
        cls = _Class(gamma, perm)
        if self.nbytes + cls.nbytes <= STORE_BYTES:
            self.nbytes += cls.nbytes
            self.by_print.setdefault(key, []).append(cls)
            self._remember(query, k, cls, perm)
        else:
            local.setdefault(key, []).append(cls)
        return cls, perm

    def _remember(self, query: int, k: int, cls: _Class, perm: IntArray) -> None:
        if self.nbytes + perm.nbytes <= STORE_BYTES:
            self.nbytes += perm.nbytes
            self.queries[(query, k)] = (cls, perm)


#: logger -> its decompositions (entries go when the logger is garbage-collected)
_STORES: weakref.WeakKeyDictionary[Any, _ClassStore] = weakref.WeakKeyDictionary()


def _store_for(logger: Any) -> _ClassStore:
    try:
        return _STORES.setdefault(logger, _ClassStore())
    except TypeError:  # a logger that cannot be weakly referenced: a store for this call only
        return _ClassStore()


#: logger -> target -> (query, k, rcond) -> weights; loggers and targets are immutable by
#: contract, and entries go when either is garbage-collected
_CACHE: weakref.WeakKeyDictionary[Any, weakref.WeakKeyDictionary[Any, dict[tuple[int, int, float], Any]]] = (
    weakref.WeakKeyDictionary()
)


def _cache_for(logger: Any, target: Any) -> dict[tuple[int, int, float], Any] | None:
    """The weight cache of a (logger, target) pair; ``None`` when either cannot be weakly referenced. A target
    that wraps another (the simulation's per-replicate wrapper of a shared target) names the immutable target whose
    weights these are by ``cache_key``, so every wrapper of it shares them."""
    try:
        per_logger = _CACHE.setdefault(logger, weakref.WeakKeyDictionary())
        return per_logger.setdefault(getattr(target, "cache_key", target), {})
    except TypeError:
        return None


@register_estimator
@dataclass(frozen=True)
class PseudoInverse(Estimator):
    """Pseudoinverse estimator.

    Parameters
    ----------
    rcond:
        Eigenvalues of :math:`\\Gamma_\\mu` below ``rcond`` times the largest are treated as
        zero (default ``1e-10``).
    """

    rcond: float = 1e-10

    name = "pseudoinverse"
    assumption = (
        "linearity: the expected list reward is a sum of per-(slot, document) values "
        "(additive rewards under PBM); needs the logging policy's pairwise marginals"
    )
    needs = ()
    support_level = "item"
    weights_expectation = 1.0  # pi/mu weights (Diagnostics.mean_weight)
    unbiased_under = (("pbm", "additive"),)
    biased_under = (("pbm", "first_click"), ("cascade", "additive"), ("cascade", "first_click"))

    def __post_init__(self) -> None:
        r = finite_number(self.rcond)  # (None for a bool, text, NaN or a number beyond float64)
        if r is None or not 0 <= r < 1:
            raise ConfigError(("estimator", "rcond"), f"must be a number in [0, 1), got {self.rcond!r}")
        object.__setattr__(self, "rcond", r)

    def _queries_weights(self, logger: Any, target: Target, queries: IntArray, k: int,
                         source: str | None) -> list[tuple[FloatArray, float, bool]]:
        """``(Gamma^+ q as (k, m), range residual, target outside the candidates)`` of each query."""
        store = _store_for(logger)
        out: list[tuple[FloatArray, float, bool]] = []
        rankings = getattr(target, "rankings", None)
        for start in range(0, queries.size, _CHUNK):
            chunk = queries[start: start + _CHUNK]
            local: dict[tuple[int, int, bytes], list[_Class]] = {}
            found = [store.lookup(logger, int(q), k, source, local) for q in chunk]
            m_of = np.array([f[0].gamma.shape[1] for f in found], dtype=np.int64)
            foreign = np.zeros(chunk.size, dtype=bool)
            if rankings is not None:
                foreign = (np.asarray(rankings(chunk))[:, :k] >= m_of[:, None]).any(axis=1)
            result: list[Any] = [None] * chunk.size
            for m in np.unique(m_of).tolist():
                rows = np.flatnonzero(m_of == m)
                q_all = _targets_q(target, chunk[rows], k, m)  # (rows, k, m)
                members: dict[int, list[int]] = {}  # rows of q_all by class
                for r, i in enumerate(rows.tolist()):
                    members.setdefault(id(found[i][0]), []).append(r)
                for group in members.values():
                    cls = found[rows[group[0]]][0]
                    if len(group) == 1:  # one query: exactly pi_slot_weights' arithmetic
                        w1, res1 = cls.solve(q_all[group[0]], found[rows[group[0]]][1], self.rcond)
                        ws, res = w1[None], np.array([res1])
                    else:
                        perms = np.stack([found[rows[r]][1] for r in group])
                        ws, res = cls.solve_many(q_all[group], perms, self.rcond)
                    for r, w, rs in zip(group, ws, res.tolist()):
                        i = int(rows[r])
                        w.setflags(write=False)
                        if foreign[i]:
                            rs = max(rs, 1.0)  # the target's indicator of that document is not represented
                        result[i] = (w, rs, bool(foreign[i]))
            out.extend(result)
        return out

    def logger_needs(self) -> tuple[str, ...]:
        return ("pair_marginals",)

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        logger = data.logger
        if logger is None or not callable(getattr(logger, "pair_marginals", None)):
            raise InputError(
                "estimator 'pseudoinverse' needs the logging policy (a logger with pair_marginals(query) giving "
                "P(s_j = a, s_l = b)), not only recorded propensities; the log has "
                + ("no logger" if logger is None else "a logger without pair_marginals"),
                data.source,
            )
        k = data.k
        uq, inv = data.query_groups
        cache = _cache_for(logger, target)
        hits: list[Any] = [cache.get((int(q), k, self.rcond)) if cache is not None else None for q in uq]
        todo = np.array([u for u, h in enumerate(hits) if h is None], dtype=np.int64)
        if todo.size:
            for u, hit in zip(todo.tolist(), self._queries_weights(logger, target, uq[todo], k, data.source)):
                hits[u] = hit
                if cache is not None:
                    cache[(int(uq[u]), k, self.rcond)] = hit
        resid = np.array([h[1] for h in hits])
        foreign = np.array([h[2] for h in hits], dtype=bool)  # target list holds documents outside the candidates
        width = max(h[0].shape[1] for h in hits)
        table = np.zeros((uq.size, k, width + 1))  # column `width` stays 0: empty slots and padding
        m_of = np.empty(uq.size, dtype=np.int64)
        for u, h in enumerate(hits):
            table[u, :, : h[0].shape[1]] = h[0]
            m_of[u] = h[0].shape[1]
        shown = data.shown
        n = data.n
        # every shown document among its query's candidates: one maximum decides the common case
        if int(shown.max()) >= int(m_of.min()):
            outside = shown >= m_of[inv][:, None]
            if outside.any():
                i, j = np.argwhere(outside)[0]
                raise InputError(
                    f"pseudoinverse: impression {int(i)} shows document {int(shown[i, j])} at slot {int(j)}, outside "
                    f"the logger's {int(m_of[inv[i]])} candidates of query {int(data.query[i])}",
                    data.source,
                )
        # weight_i = sum_j table[query of i, j, shown[i, j]] (empty slots read the zero column), gathered
        # and added (numpy's order, as .sum(axis=1)) block by block of rows: no (n, k) index or value array
        stride = k * (width + 1)
        cols = np.arange(0, stride, width + 1)
        flat = table.reshape(-1)
        weight = np.empty(n)
        rows = block_rows(k)
        ibuf = np.empty((min(rows, n), k), dtype=np.int64)
        fbuf = np.empty((min(rows, n), k))
        acc = np.empty((8, min(rows, n)))
        valid = data.all_valid
        for s in range(0, n, rows):
            e = min(n, s + rows)
            idx, vals = ibuf[: e - s], fbuf[: e - s]
            if valid:
                np.add(shown[s:e], cols, out=idx)
            else:
                np.add(np.where(shown[s:e] >= 0, shown[s:e], width), cols, out=idx)
            idx += (inv[s:e] * stride)[:, None]
            np.take(flat, idx, out=vals, mode="clip")  # every index is in range (checked above)
            add_rows(vals, weight[s:e], acc)
        r = data.list_rewards(reward)
        notes = {
            "max_range_residual": float(resid.max()),
            "queries_outside_range": int(np.count_nonzero(resid > RANGE_TOLERANCE)),
            "queries_target_outside_candidates": int(np.count_nonzero(foreign)),
            "negative_weight_share": float(np.mean(weight < 0)),
        }
        return Terms(num=weight * r, weights=weight, notes=notes)
