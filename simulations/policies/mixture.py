r"""A mixture of logging policies: each impression picks component :math:`c` with
probability :math:`w_c`, then that component's list.

Intervention harvesting (Agarwal, Zaitsev, Wang, Li, Najork and Joachims 2019,
"Estimating position bias without intrusive interventions", WSDM) logs several rankers'
deterministic lists (say A and B, each with its own scores) on comparable traffic; the
pooled log is a draw from this mixture. Every probability of an event mixes linearly,

.. math::

    P_{\mathrm{mix}}(E) = \sum_c w_c\, P_c(E),

for the whole list, each prefix, each item-position event, each pair and the shown
probabilities. Components may have different candidate sets; an empty slot then has
the probability of the components that leave it empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from onlineeval.errors import ConfigError, finite_number
from onlineeval.estimators.base import Propensities
from simulations.policies.base import (
    BoolArray,
    FloatArray,
    IntArray,
    LoggingPolicy,
    SpecReader,
    policy_class,
    register_policy,
    repeated_entries,
)

__all__ = ["MixturePolicy", "mix_propensities"]


def mix_propensities(weights: Sequence[float], parts: Sequence[Propensities]) -> Propensities:
    """:math:`\\sum_c w_c P_c` of the list, prefix and item probabilities, summed in component
    order (the first term is ``w_0 P_0`` itself: ``0 + x`` is ``x``)."""
    lst, pre, item = weights[0] * parts[0].list, weights[0] * parts[0].prefix, weights[0] * parts[0].item
    for w, p in zip(weights[1:], parts[1:]):
        lst += w * p.list
        pre += w * p.prefix
        item += w * p.item
    return Propensities(lst, pre, item)


@register_policy
class MixturePolicy(LoggingPolicy):
    """A weighted mixture of component policies.

    Spec: ``{"policy": "mixture", "components": [{"policy": "deterministic", "scores": "A",
    "weight": 0.5}, {"policy": "deterministic", "scores": "B", "weight": 0.5}]}`` (with
    ``scores`` a mapping of named score matrices; ``weight`` defaults to equal weights
    when no component gives one; weights must be positive and sum to 1).

    Parameters
    ----------
    components:
        Policies with the same number of queries, candidate columns and slots ``k``.
    weights:
        ``(C,)`` positive mixture weights summing to 1.
    """

    name = "mixture"

    def __init__(self, components: Sequence[LoggingPolicy], weights: ArrayLike) -> None:
        comps = list(components)
        if not comps:
            raise ConfigError(("components",), "a mixture needs at least one component")
        w = np.array(weights, dtype=np.float64).reshape(-1)
        if w.size != len(comps) or not np.all(np.isfinite(w)) or np.any(w <= 0) or abs(w.sum() - 1.0) > 1e-9:
            raise ConfigError(("weights",), f"need {len(comps)} positive weights summing to 1, got {w.tolist()}")
        first = comps[0]
        for i, c in enumerate(comps):
            if (c.Q, c.m, c.k) != (first.Q, first.m, first.k):
                raise ConfigError(("components", i), f"has (queries, candidates, k) = {(c.Q, c.m, c.k)}, the first "
                                  f"component {(first.Q, first.m, first.k)}; all must agree")
        super().__init__(np.max(np.stack([c.scores for c in comps]), axis=0), first.k)
        self.components = tuple(comps)
        self.weights = w
        self.weights.setflags(write=False)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], scores: Any, k: int, path: Sequence[str | int] = ()) -> MixturePolicy:
        rd = SpecReader(spec, path)
        items = rd.raw("components")
        rd.finish()
        if not isinstance(items, Sequence) or isinstance(items, (str, bytes)) or len(items) == 0:
            raise ConfigError((*path, "components"), "must be a non-empty list of policy specs with optional 'weight'")
        comps, weights = [], []
        for i, item in enumerate(items):
            sub = (*path, "components", i)
            if not isinstance(item, Mapping):
                raise ConfigError(sub, f"must be a policy spec mapping, got {type(item).__name__}")
            weights.append(item.get("weight"))
            inner = {key: v for key, v in item.items() if key != "weight"}
            comps.append(policy_class(inner.get("policy"), sub).from_spec(inner, scores, k, sub))
        if all(w is None for w in weights):
            weights = [1.0 / len(comps)] * len(comps)
        for i, w in enumerate(weights):
            value = finite_number(w)
            if value is None or not value > 0:
                raise ConfigError((*path, "components", i, "weight"), f"must be a positive number (all components "
                                  f"give one, or none for equal weights), got {w!r}")
            weights[i] = value
        if abs(sum(weights) - 1.0) > 1e-9:
            raise ConfigError((*path, "components"), f"weights must sum to 1, got {sum(weights):g}")
        return cls(comps, weights)

    def describe(self) -> str:
        parts = "; ".join(f"{w:g} x [{c.describe()}]" for w, c in zip(self.weights, self.components))
        return f"mixture (intervention harvesting, Agarwal et al. 2019): {parts}"

    def conventions(self) -> dict[str, Any]:
        conv = super().conventions()
        conv["components"] = [{"weight": float(w), **c.conventions()} for w, c in zip(self.weights, self.components)]
        if any(c.may_be_monte_carlo for c in self.components):
            conv["item"] = "mixture of the components' item probabilities (see components: some may be Monte Carlo)"
        conv["mixing"] = "every probability is sum_c w_c P_c"
        return conv

    @property
    def may_be_monte_carlo(self) -> bool:  # type: ignore[override]
        return any(c.may_be_monte_carlo for c in self.components)

    def with_mc_seed(self, seed: int) -> MixturePolicy:
        if not self.may_be_monte_carlo:
            return self
        kids = np.random.SeedSequence(seed).generate_state(len(self.components), dtype=np.uint32)
        return MixturePolicy([c.with_mc_seed(int(s)) for c, s in zip(self.components, kids)], self.weights)

    # public methods mix the components' own (each validates against its own candidates)
    def propensities(self, query: ArrayLike, rankings: ArrayLike) -> Propensities:
        q = self._queries(query)
        r = self._lists(q, rankings)
        return self._checked_propensities(q, r)

    def _checked_propensities(self, q: IntArray, r: IntArray, repeat: BoolArray | None = None) -> Propensities:
        stacked = self._stacked()
        if stacked is not None:  # epsilon-greedy components: all at once (the same numbers)
            return stacked(q, r, repeat)  # type: ignore[no-any-return]
        if repeat is None and self.k > 1:  # the repeated entries of r: the same for every component
            repeat = repeated_entries(r)
        return mix_propensities(self.weights, [c._checked_propensities(q, r, repeat) for c in self.components])

    def sampled_propensities(self, q: IntArray, r: IntArray) -> Propensities:
        """:meth:`propensities` of lists ``r`` this policy drew itself (:meth:`sample`) for
        the int64 query ids ``q`` it drew them for: no row repeats a document, so with
        epsilon-greedy components the repeats are not looked for (the same numbers); the
        queries and lists are not validated again."""
        stacked = self._stacked()
        if stacked is not None:
            return stacked(q, r, distinct=True)  # type: ignore[no-any-return]
        return self._checked_propensities(q, r)

    def _stacked(self) -> Any:
        """:class:`~simulations.policies.epsilon_greedy.StackedEpsilonGreedy` of the
        components when they all are epsilon-greedy policies filling the slots, else None
        (decided once)."""
        if not hasattr(self, "_stacked_kernel"):
            from simulations.policies.epsilon_greedy import StackedEpsilonGreedy

            self._stacked_kernel = StackedEpsilonGreedy.build(self.components, self.weights)
        return self._stacked_kernel

    def shown_probability(self, query: ArrayLike, docs: ArrayLike) -> FloatArray:
        q = self._queries(query)
        d = self._lists(q, docs, "docs")
        return sum(w * c.shown_probability(q, d) for w, c in zip(self.weights, self.components))

    def marginals_exact(self, query: ArrayLike) -> BoolArray:
        q = self._queries(query)
        out = np.ones(q.size, dtype=bool)
        for c in self.components:
            out &= c.marginals_exact(q)
        return out

    def marginal_se(self, query: ArrayLike) -> FloatArray:
        q = self._queries(query)
        var = sum(w * w * np.square(c.marginal_se(q)) for w, c in zip(self.weights, self.components))
        return np.sqrt(var)

    def shown_se(self, query: ArrayLike, docs: ArrayLike) -> FloatArray:
        q = self._queries(query)
        d = self._lists(q, docs, "docs")
        return np.sqrt(sum(w * w * np.square(c.shown_se(q, d)) for w, c in zip(self.weights, self.components)))

    def _pick(self, n: int, rng: np.random.Generator) -> IntArray:
        """``(n,)`` component of each impression: ``rng.choice(len(components), size=n,
        p=weights)`` computed as ``Generator.choice`` does it (the same uniform draws and the
        same normalised cumulative weights, searched from the right; tested equal, draws
        and generator state), without its per-call checks of ``p``."""
        cdf = getattr(self, "_cdf", None)
        if cdf is None:
            cdf = self.weights.cumsum()
            cdf /= cdf[-1]
            cdf.setflags(write=False)
            self._cdf = cdf
        u = rng.random(n)
        if cdf.size > 8:
            return cdf.searchsorted(u, side="right")
        # searchsorted from the right counts the cumulative weights <= u; the last is exactly
        # 1.0 (a number divided by itself) and u < 1, so it never counts
        pick = (u >= cdf[0]).astype(np.int64)
        for j in range(1, cdf.size - 1):
            pick += u >= cdf[j]
        return pick

    def _sample(self, q: IntArray, rng: np.random.Generator) -> IntArray:
        stacked = self._stacked()
        if stacked is not None:  # epsilon-greedy components: all at once (the same draws and lists)
            return stacked.sample(self, q, rng)  # type: ignore[no-any-return]
        out = np.full((q.size, self.k), -1, dtype=np.int64)
        self._sample_into(q, np.arange(q.size), rng, out)
        return out

    def _sample_into(self, q: IntArray, rows: IntArray, rng: np.random.Generator, out: IntArray) -> None:
        """Draw the lists of impressions ``rows`` into ``out[rows]``: the component of each
        row, then each component's rows in component order (a nested plain mixture, such
        as epsilon-greedy, in place, so its leaves write straight into ``out``). The draws
        and their order are those of sampling each component's rows on their own."""
        pick = self._pick(rows.size, rng)
        for i, c in enumerate(self.components):
            sub = rows[pick == i]
            if not sub.size:
                continue
            if type(c)._sample is MixturePolicy._sample:
                c._sample_into(q, sub, rng, out)  # type: ignore[attr-defined]
            else:
                out[sub] = c._sample(q[sub], rng)  # q is validated (the same draws as c.sample)

    def _marginals(self, uq: IntArray) -> FloatArray:
        return sum(w * c.item_position_marginals(uq) for w, c in zip(self.weights, self.components))

    def _pairs(self, q: int) -> FloatArray:
        return sum(w * c.pair_marginals(q) for w, c in zip(self.weights, self.components))

    # the list-level hooks are not used: propensities() and shown_probability() mix the components
    def _prefix(self, q: IntArray, r: IntArray, ranks: IntArray) -> FloatArray:
        return self.propensities(q, r).prefix

    def _item(self, q: IntArray, r: IntArray, ranks: IntArray) -> FloatArray:
        return self.propensities(q, r).item

    def _shown(self, q: IntArray, d: IntArray, valid: BoolArray) -> FloatArray:
        return self.shown_probability(q, d)
