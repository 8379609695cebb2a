r"""Epsilon-greedy over rankings: with probability :math:`\varepsilon` a uniformly random
permutation of the base ranking's top ``n`` (positions after ``n`` keep the base
order), otherwise the base ranking; the top ``k`` slots are shown.

It is the mixture :math:`(1-\varepsilon)\,\text{deterministic} + \varepsilon\,
\text{RandTop-}n`, so every probability is closed form:

.. math::

    P(E) = (1 - \varepsilon)\, 1[E \text{ holds for the base list}]
         + \varepsilon\, P_{\text{RandTop-}n}(E)

(see :mod:`simulations.policies.randtop`). The base list keeps probability at least
:math:`1 - \varepsilon`; every other list in the support has probability
:math:`\varepsilon / (n_e)_{\min(k, n_e)}` with :math:`n_e = \min(n, c)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from onlineeval.errors import ConfigError
from onlineeval.estimators.base import Propensities
from simulations.policies.base import (
    BoolArray,
    IntArray,
    SpecReader,
    register_policy,
    repeated_by_slot,
)
from simulations.policies.deterministic import DeterministicPolicy
from simulations.policies.mixture import MixturePolicy, mix_propensities
from simulations.policies.randtop import RandTopPolicy

__all__ = ["EpsilonGreedyPolicy"]


@register_policy
class EpsilonGreedyPolicy(MixturePolicy):
    """Epsilon-greedy (spec ``{"policy": "epsilon_greedy", "epsilon": 0.1, "n": 10}``;
    ``epsilon`` in [0, 1] defaults to 0.1, ``n`` (2..m) defaults to ``max(k, 2)``)."""

    name = "epsilon_greedy"

    def __init__(self, scores: Any, k: int, epsilon: float = 0.1, n: int | None = None) -> None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0.0 <= epsilon <= 1.0:
            raise ConfigError(("epsilon",), f"must be a number in [0, 1], got {epsilon!r}")
        det = DeterministicPolicy(scores, k)
        rt = RandTopPolicy(det.scores, k, n)
        self.epsilon = float(epsilon)
        self.n = rt.n
        if self.epsilon <= 0.0:
            super().__init__([det], [1.0])
        elif self.epsilon >= 1.0:
            super().__init__([rt], [1.0])
        else:
            super().__init__([det, rt], [1.0 - self.epsilon, self.epsilon])

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], scores: Any, k: int,
                  path: Sequence[str | int] = ()) -> EpsilonGreedyPolicy:
        rd = SpecReader(spec, path)
        s = rd.scores(scores)
        m = int(np.shape(s)[1]) if np.ndim(s) == 2 else 0
        eps = rd.number("epsilon", 0.1, low=0.0, high=1.0)
        n = rd.integer("n", max(k, 2), low=2, high=max(m, 2))
        rd.finish()
        return cls(s, k, eps, n)

    def describe(self) -> str:
        return (f"epsilon_greedy: with probability {self.epsilon:g} the top {self.n} of the base ranking shuffled "
                f"uniformly, else the base ranking; top {self.k} shown")

    def conventions(self) -> dict[str, Any]:
        conv = super().conventions()
        conv.pop("components", None)
        return {**conv, "epsilon": self.epsilon, "n": self.n, "mixing": "(1 - epsilon) deterministic + epsilon randtop"}

    def _checked_propensities(self, q: IntArray, r: IntArray, repeat: BoolArray | None = None) -> Propensities:
        """Both components rank by the same scores: the base ranks and the validity of the
        lists are computed once and each component's hooks applied to them (the same
        numbers as mixing the components' own propensities)."""
        if len(self.components) == 1:
            return self.components[0]._checked_propensities(q, r, repeat)
        det = self.components[0]
        if self._full:
            return self._full_propensities(q, r, repeat)
        ranks, ok_prefix, empty_ok = det._ranks(q, r, repeat)
        known = ranks >= 0
        parts = []
        for c in self.components:
            prefix = c._prefix(q, r, ranks) * ok_prefix
            item = np.where(empty_ok, 1.0, np.where(known, c._item(q, r, ranks), 0.0))
            parts.append(Propensities(prefix[:, -1].copy(), prefix, item))
        return mix_propensities(self.weights, parts)

    def _sample(self, q: IntArray, rng: np.random.Generator) -> IntArray:
        """``MixturePolicy._sample``'s draws and lists; with epsilon strictly between 0 and 1, every query filling
        the slots and at most :data:`COMPILED_MAX_K` of them, in one compiled call (:meth:`own_stack`,
        :meth:`StackedEpsilonGreedy.sample_alone`), unless :attr:`StackedEpsilonGreedy.compiled` is False."""
        own = self.own_stack()
        if own is not None and own.draws_compiled(q):
            return own.sample_alone(q, rng)  # type: ignore[no-any-return]
        return super()._sample(q, rng)

    def own_stack(self) -> Any:
        """This policy as a one-component :class:`StackedEpsilonGreedy` (weights ``[1.0]``), or ``None`` where
        :meth:`StackedEpsilonGreedy.build` refuses it (epsilon 0 or 1, a query with fewer than ``k``
        candidates, a subclass); made once. Its tables serve the compiled sampler and the counterfactual design's
        compiled step."""
        if "_own_stack" not in self.__dict__:
            self._own_stack = StackedEpsilonGreedy.build([self], [1.0])
        return self._own_stack

    @property
    def _full(self) -> bool:
        """Every query has at least ``k`` candidates (no empty slot is possible)."""
        return bool(self.Q) and int(self.n_candidates.min()) >= self.k

    def _full_propensities(self, q: IntArray, r: IntArray, repeat: BoolArray | None) -> Propensities:
        r"""The same numbers as the general path when every query fills the ``k`` slots:
        with base ranks :math:`\rho_j` of the list and :math:`n_e = \min(n, c)`,

        .. math::

            p^{\mathrm{det}}_{\mathrm{prefix}, j} = \prod_{i \le j} 1[\rho_i = i], \qquad
            p^{\mathrm{rt}}_{\mathrm{prefix}, j} = \prod_{i \le j}
                \begin{cases} 1[\rho_i < n_e] / (n_e - i) & i < n_e \\ 1[\rho_i = i] & \text{else,}\end{cases}

        each times the validity of the prefix, mixed :math:`(1-\varepsilon)\,\mathrm{det}
        + \varepsilon\,\mathrm{rt}`; item probabilities from the components' rank tables.
        Written out once for both components (no empty-slot cases), which is what makes
        it cheaper."""
        det, rt = self.components
        k, m = self.k, self.m
        # slots-first (k, n) layout: per-query rows and per-slot columns broadcast along the
        # long axis, and the running products are loops over the k rows
        r_t = np.ascontiguousarray(r.T)
        looked = self.rank_of.ravel().take(q * m + np.maximum(r_t, 0))  # rank_of[q, r]
        known = (r_t >= 0) & (looked >= 0)
        if k == 1:
            ok = known
        else:
            ok = known & ~(repeated_by_slot(r_t) if repeat is None else np.ascontiguousarray(repeat.T))
            for j in range(1, k):
                ok[j] &= ok[j - 1]
        rk = np.where(known, looked, 0)  # the hooks' ranks: 0 where unknown (those prefixes are invalid)
        jj = np.arange(k)[:, None]
        at_base = rk == jj
        run = at_base.copy()
        for j in range(1, k):
            run[j] &= run[j - 1]
        p_det = run.astype(np.float64) * ok
        ne = np.minimum(rt.n, self.n_candidates[q])
        inside = np.where(rk < ne, 1.0 / np.maximum(ne - jj, 1), 0.0)
        p_rt = np.where(jj < ne, inside, at_base.astype(np.float64))
        for j in range(1, k):
            p_rt[j] *= p_rt[j - 1]
        p_rt *= ok
        rr = np.where(known, looked, m)
        items = []
        for c in (det, rt):
            tab, inv = c._all_tables()
            items.append(tab[0].ravel().take(rr * k + jj) if tab.shape[0] == 1 else tab[inv[q][None, :], rr, jj])
        w0, w1 = self.weights
        pre = w0 * p_det
        pre += w1 * p_rt
        item = w0 * items[0]
        item += w1 * items[1]
        return Propensities(pre[-1].copy(), np.ascontiguousarray(pre.T), np.ascontiguousarray(item.T))


#: the compiled paths of :class:`StackedEpsilonGreedy` (and the design's compiled step) serve lists of up to this
#: many slots, the sizes they are tested at; longer lists take the NumPy code (the same lists and numbers)
COMPILED_MAX_K = 16


def _cumulative(weights: Any) -> np.ndarray:
    """The normalised cumulative weights as :meth:`MixturePolicy._pick` computes them."""
    cdf = np.asarray(weights, dtype=np.float64).cumsum()
    cdf /= cdf[-1]
    return cdf


def _joined(tables: Sequence[np.ndarray]) -> np.ndarray:
    """The tables flattened and joined end to end; one table is not copied (a flat view of it when it is
    C-contiguous): a single policy's stack (:meth:`EpsilonGreedyPolicy.own_stack`) reads the policy's own
    ``(Q, m)`` tables instead of keeping a second copy (about 160 MB each for 200,000 queries of 100 candidates).
    The stack only reads them."""
    if len(tables) == 1:
        return tables[0].reshape(-1)
    return np.concatenate([t.ravel() for t in tables])


class StackedEpsilonGreedy:
    r"""The propensities of a mixture :math:`\sum_c W_c P_c` whose components are all
    epsilon-greedy policies filling the ``k`` slots (intervention harvesting around
    several rankers), computed for all components at once on ``(C, k, n)`` arrays: the
    arithmetic of :meth:`EpsilonGreedyPolicy._full_propensities` per component and of
    :func:`~simulations.policies.mixture.mix_propensities` across them, element by element
    (the same numbers; tested against the old code), with half the numpy calls for two
    components. When every list is valid (no empty slot, no repeat, only candidates:
    the policy's own samples) the validity masks are all ones and are skipped
    (multiplying by 1 changes nothing).

    :meth:`build` gives ``None`` when the mixture does not have that form (another
    component, epsilon 0 or 1, a query with fewer than ``k`` candidates, queries with
    different candidate counts)."""

    def __init__(self, components: Sequence[EpsilonGreedyPolicy], weights: Any) -> None:
        first = components[0]
        self.k, self.m, self.Q = first.k, first.m, first.Q
        self.weights = [w for w in np.asarray(weights, dtype=np.float64)]  # float64 scalars, as mix_propensities
        self.rank_of = _joined([c.rank_of for c in components])
        self.rank_off = (np.arange(len(components), dtype=np.int64) * (self.Q * self.m))[:, None, None]
        self.n_eff = np.stack([np.minimum(c.components[1].n, c.n_candidates) for c in components])  # (C, Q)
        self.w_det = np.array([c.weights[0] for c in components])[:, None, None]
        self.w_rt = np.array([c.weights[1] for c in components])[:, None, None]
        size = (self.m + 1) * self.k
        self.det_tab = np.concatenate([c.components[0]._all_tables()[0][0].ravel() for c in components])
        self.rt_tab = np.concatenate([c.components[1]._all_tables()[0][0].ravel() for c in components])
        self.tab_off = (np.arange(len(components), dtype=np.int64) * size)[:, None, None]
        # the sampler's tables: each component's top-k lists (its ranker's) and base orders, stacked by component
        self.tops = np.concatenate([np.asarray(c.components[0].order[:, : self.k], dtype=np.int64)
                                    for c in components])
        self.orders = _joined([np.asarray(c.components[1].order, dtype=np.int64) for c in components])
        # the compiled path's tables (:mod:`simulations.policies.kernels`): each component's normalised cumulative
        # branch weights' first entry, as its _pick computes it, and contiguous int64 / float64 copies
        self._branch_cdf0 = np.array([_cumulative(c.weights)[0] for c in components], dtype=np.float64)
        self._w_det = np.ascontiguousarray(self.w_det.ravel(), dtype=np.float64)
        self._w_rt = np.ascontiguousarray(self.w_rt.ravel(), dtype=np.float64)
        self._weights = np.array(self.weights, dtype=np.float64)
        self._rank_of = np.ascontiguousarray(self.rank_of, dtype=np.int64)
        self._n_eff = np.ascontiguousarray(self.n_eff, dtype=np.int64)
        self._mix_cdf = _cumulative(weights)

    @classmethod
    def build(cls, components: Sequence[Any], weights: Any) -> StackedEpsilonGreedy | None:
        comps = list(components)
        if not comps or any(type(c) is not EpsilonGreedyPolicy for c in comps):
            return None
        first = comps[0]
        for c in comps:
            if len(c.components) != 2 or not c._full or (c.k, c.m, c.Q) != (first.k, first.m, first.Q):
                return None
            if any(part._all_tables()[0].shape[0] != 1 for part in c.components):
                return None
        return cls(comps, weights)

    #: whether :meth:`sample` runs the compiled kernels (:mod:`simulations.policies.kernels`) for lists of up to
    #: :data:`COMPILED_MAX_K` slots; False runs the NumPy code (the tested reference: the same lists and draws)
    compiled: bool = True

    def sample(self, mixture: MixturePolicy, q: IntArray, rng: np.random.Generator) -> IntArray:
        """``mixture._sample(q, rng)`` (the mixture whose components these are): the same
        draws in the same order (the component of each row; per component in order, its
        rows' choice between the ranker's list and RandTop-n, then the uniforms of its RandTop
        rows' shuffles by :func:`~simulations.policies.base.shuffle_top`) and the same
        lists, assembled by one take of the components' top-``k`` tables for every row and
        one take of their base orders for the randomised rows instead of a scatter per
        component and branch; with :attr:`compiled`, by the kernels of
        :mod:`simulations.policies.kernels` from the same uniforms."""
        if self.draws_compiled(q):
            return self._sample_compiled(mixture, q, rng)
        return self.sample_numpy(mixture, q, rng)

    def draws_compiled(self, q: IntArray) -> bool:
        """Whether the lists of queries ``q`` are drawn by the compiled kernel (:attr:`compiled`, at most
        :data:`COMPILED_MAX_K` slots, int64 queries) or by the NumPy code (the same lists and draws)."""
        return self.compiled and self.k <= COMPILED_MAX_K and q.dtype == np.int64

    def _sample_compiled(self, mixture: MixturePolicy, q: IntArray, rng: np.random.Generator) -> IntArray:
        """:meth:`sample_numpy`'s draws (the same uniforms in the same order) and lists, in one compiled call
        (:func:`simulations.policies.kernels.sample_lists`)."""
        return self._compiled_lists(q, rng, draw_pick=True)

    def sample_alone(self, q: IntArray, rng: np.random.Generator) -> IntArray:
        """The lists of the single epsilon-greedy policy whose one-component stack this is (``build([policy],
        [1.0])``), as its ``MixturePolicy._sample`` draws them (the branch of each row, then the uniforms of the
        RandTop rows: no component draw), in one compiled call."""
        return self._compiled_lists(q, rng, draw_pick=False)

    def _compiled_lists(self, q: IntArray, rng: np.random.Generator, draw_pick: bool) -> IntArray:
        from simulations.policies import kernels

        out = np.empty((q.size, self.k), dtype=np.int64)
        kernels.sample_lists(rng, draw_pick, q, self._mix_cdf, self._branch_cdf0, self._n_eff, self.tops,
                             self.orders, self.Q, self.m, out)
        return out

    def sample_numpy(self, mixture: MixturePolicy, q: IntArray, rng: np.random.Generator) -> IntArray:
        """:meth:`sample` in NumPy (the reference of the compiled path)."""
        comps = mixture.components
        n, m, Q = q.size, self.m, self.Q
        pick = mixture._pick(n, rng)
        rows = np.arange(n)
        rt_rows, rt_at = [], []
        for i, c in enumerate(comps):
            sub = rows[pick == i]
            if not sub.size:
                continue
            branch = c._pick(sub.size, rng)
            rt_sub = sub[branch == 1]
            if not rt_sub.size:
                continue
            rt = c.components[1]
            qs = q.take(rt_sub)
            ranks = rt._sample_ranks(rt.n_candidates.take(qs), rng)
            rt_rows.append(rt_sub)
            rt_at.append(((qs + i * Q) * m)[:, None] + ranks)  # stacked base orders: row (i Q + q)
        out = self.tops.take(pick * Q + q, axis=0)  # every row the ranker's list of its component ...
        if rt_rows:  # ... the randomised rows their permutation's top k
            at = np.concatenate(rt_at) if len(rt_at) > 1 else rt_at[0]
            out[np.concatenate(rt_rows) if len(rt_rows) > 1 else rt_rows[0]] = self.orders.take(at)
        return out

    def __call__(self, q: IntArray, r: IntArray, repeat: BoolArray | None = None,
                 distinct: bool = False) -> Propensities:
        """The mixture's propensities of lists ``r`` of queries ``q``; ``distinct``: no row
        repeats a document (the policy's own draws), so the repeats are not looked for (the
        rest of the validity check stays: a drawn document may not be another component's
        candidate)."""
        k, m = self.k, self.m
        r_t = np.ascontiguousarray(r.T)  # (k, n)
        looked = self.rank_of.take((q * m + np.maximum(r_t, 0))[None, :, :] + self.rank_off)  # (C, k, n)
        rep = None
        if k > 1 and not distinct:
            rep = repeated_by_slot(r_t) if repeat is None else np.ascontiguousarray(repeat.T)
        valid = r_t.size == 0 or (int(r_t.min()) >= 0 and int(looked.min()) >= 0 and (rep is None or not rep.any()))
        ok = None
        if valid:  # every prefix valid: the masks are all ones
            rk = rr = looked
        else:
            known = (r_t >= 0)[None, :, :] & (looked >= 0)
            ok = known.copy() if rep is None else known & ~rep[None, :, :]  # known is read below
            for j in range(1, k):
                ok[:, j] &= ok[:, j - 1]
            rk = np.where(known, looked, 0)
            rr = np.where(known, looked, m)
        jj = np.arange(k)[:, None]
        at_base = rk == jj
        run = at_base.copy()
        for j in range(1, k):
            run[:, j] &= run[:, j - 1]
        p_det = run.astype(np.float64) if ok is None else run.astype(np.float64) * ok
        ne = self.n_eff.take(q, axis=1)[:, None, :]  # (C, 1, n)
        inside = np.where(rk < ne, 1.0 / np.maximum(ne - jj, 1), 0.0)
        p_rt = np.where(jj < ne, inside, at_base.astype(np.float64))
        for j in range(1, k):
            p_rt[:, j] *= p_rt[:, j - 1]
        if ok is not None:
            p_rt *= ok
        at = rr * k + jj + self.tab_off
        pre = self.w_det * p_det
        pre += self.w_rt * p_rt
        item = self.w_det * self.det_tab.take(at)
        item += self.w_rt * self.rt_tab.take(at)
        top_pre, top_item = self.weights[0] * pre[0], self.weights[0] * item[0]
        for c in range(1, len(self.weights)):
            top_pre += self.weights[c] * pre[c]
            top_item += self.weights[c] * item[c]
        return Propensities(top_pre[-1].copy(), np.ascontiguousarray(top_pre.T), np.ascontiguousarray(top_item.T))
