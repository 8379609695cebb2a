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
The target's :math:`\mathbf q_\pi` is read from its item propensities. The cost is one
symmetric eigendecomposition of size :math:`km'` per distinct query (``m'``: candidates the
logger ever shows), kept for later calls with the same logger and target objects (both are
treated as immutable), then one gather per impression.

Reference
---------
Swaminathan, A., Krishnamurthy, A., Agarwal, A., Dudík, M., Langford, J., Jose, D.,
Zitouni, I. (2017). Off-policy evaluation for slate recommendation. *NeurIPS 2017*.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from onlineeval.errors import ConfigError, InputError, OnlineEvalError
from onlineeval.estimators.base import (
    Estimator,
    FloatArray,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)

__all__ = ["PseudoInverse", "pi_slot_weights"]

#: residual above which a target's q is reported as outside the range of Gamma
RANGE_TOLERANCE = 1e-8


def _pair_marginals(logger: Any, query: int, k: int, source: str | None) -> FloatArray:
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
    if not np.all(np.isfinite(g)) or g.min() < -1e-12 or g.max() > 1 + 1e-12:
        raise InputError(f"pseudoinverse: pair_marginals({query}) must be probabilities in [0, 1]", source)
    return g[:k, :, :k, :]


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


#: logger -> target -> (query, k, rcond) -> weights; loggers and targets are immutable by
#: contract, and entries go when either is garbage-collected
_CACHE: weakref.WeakKeyDictionary[Any, weakref.WeakKeyDictionary[Any, dict[tuple[int, int, float], Any]]] = (
    weakref.WeakKeyDictionary()
)


def _cache_for(logger: Any, target: Any) -> dict[tuple[int, int, float], Any] | None:
    """The weight cache of a (logger, target) pair; ``None`` when either cannot be weakly referenced."""
    try:
        per_logger = _CACHE.setdefault(logger, weakref.WeakKeyDictionary())
        return per_logger.setdefault(target, {})
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
    unbiased_under = (("pbm", "additive"),)
    biased_under = (("pbm", "first_click"), ("cascade", "additive"), ("cascade", "first_click"))

    def __post_init__(self) -> None:
        r = self.rcond
        if isinstance(r, bool) or not isinstance(r, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(r)) or not 0 <= float(r) < 1:
            raise ConfigError(("estimator", "rcond"), f"must be a number in [0, 1), got {r!r}")
        object.__setattr__(self, "rcond", float(r))

    def _query_weights(self, logger: Any, target: Target, query: int, k: int,
                       source: str | None) -> tuple[FloatArray, float, bool]:
        """``(Gamma^+ q as (k, m), range residual, target outside the candidates)`` of one query."""
        gamma = _pair_marginals(logger, query, k, source)
        m = gamma.shape[1]
        w, resid = pi_slot_weights(gamma, _target_q(target, query, k, m), self.rcond)
        rankings = getattr(target, "rankings", None)
        foreign = rankings is not None and bool((np.asarray(rankings(np.array([query])))[0, :k] >= m).any())
        if foreign:
            resid = max(resid, 1.0)  # the target's indicator of that document is not represented
        w.setflags(write=False)
        return w, resid, foreign

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
        uq, inv = np.unique(data.query, return_inverse=True)
        per_query: list[FloatArray] = []
        resid = np.zeros(uq.size)
        foreign = np.zeros(uq.size, dtype=bool)  # target list holds documents outside the logger's candidates
        cache = _cache_for(logger, target)
        for u, query in enumerate(uq):
            key = (int(query), k, self.rcond)
            hit = cache.get(key) if cache is not None else None
            if hit is None:
                hit = self._query_weights(logger, target, int(query), k, data.source)
                if cache is not None:
                    cache[key] = hit
            per_query.append(hit[0])
            resid[u], foreign[u] = hit[1], hit[2]
        width = max(w.shape[1] for w in per_query)
        table = np.zeros((uq.size, k, width + 1))  # column `width` stays 0: empty slots and padding
        m_of = np.empty(uq.size, dtype=np.int64)
        for u, w in enumerate(per_query):
            table[u, :, : w.shape[1]] = w
            m_of[u] = w.shape[1]
        shown = data.shown
        outside = shown >= m_of[inv][:, None]
        if outside.any():
            i, j = np.argwhere(outside)[0]
            raise InputError(
                f"pseudoinverse: impression {int(i)} shows document {int(shown[i, j])} at slot {int(j)}, outside the "
                f"logger's {int(m_of[inv[i]])} candidates of query {int(data.query[i])}",
                data.source,
            )
        col = np.where(shown >= 0, shown, width)
        weight = table[inv[:, None], np.arange(k)[None, :], col].sum(axis=1)
        r = reward.slot_rewards(data.clicks).sum(axis=1)
        notes = {
            "max_range_residual": float(resid.max()),
            "queries_outside_range": int(np.count_nonzero(resid > RANGE_TOLERANCE)),
            "queries_target_outside_candidates": int(np.count_nonzero(foreign)),
            "negative_weight_share": float(np.mean(weight < 0)),
        }
        return Terms(num=weight * r, weights=weight, notes=notes)
