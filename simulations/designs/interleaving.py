"""Interleaving and multileaving designs: every impression shows one list made from
the rankers' lists (``rankers``, baseline first; two for interleaving, more for
multileaving).

For a pair of rankers ``(i, j)`` an impression's outcome is +1 (``j`` preferred), -1
(``i`` preferred) or 0 (for probabilistic and optimized methods: the expected outcome
they define, in [-1, 1]; see :func:`pair_outcomes`). Impressions without a click are not comparisons and are left
out; with ``w``, ``l``, ``t`` the wins, losses and ties of ``j`` over the impressions
with at least one click,

.. math::

    \\Delta_{ji} = \\frac{w + t/2}{w + l + t} - \\frac12 = \\frac{(w - l)/2}{w + l + t},

positive when ``j`` is preferred (Chapelle, Joachims, Radlinski, Yue 2012; with two
rankers this is :math:`\\Delta_{AB}` with B as the candidate, reported as ``delta_ab``).
The test is clustered by user: per user ``num = (w_u - l_u) / 2`` and
``den = w_u + l_u + t_u``, and :math:`\\Delta = \\sum num / \\sum den` with its
delta-method standard error over users. A multileaving design reports every pair
``delta_<j>_vs_<i>`` (its preference matrix), the first pair being its primary metric.

Every interleaving design also runs as a *null variant* (:meth:`InterleavingDesign.use_null_user`):
the same rankers and traffic, but clicks that do not depend on the shown documents, so
every true effect is 0; its rows ``null:<pair>`` measure the method's bias and the false
positives it causes on these rankers (balanced interleaving is biased: Hofmann, Whiteson
and de Rijke 2011).
"""

from __future__ import annotations

import json
from itertools import combinations
from typing import Any

import numpy as np

from simulations.designs.base import Design, register_design
from simulations.traffic import Batch

__all__ = ["NULL_PREFIX", "InterleavingDesign", "shared_interleaver", "pair_metrics", "pair_outcomes"]

#: prefix of a pair's metric under the null user (``null:delta_ab``): its truth, and the
#: rows of a design's null variant
NULL_PREFIX = "null:"

_INTERLEAVERS: dict[tuple[str, str], Any] = {}


def shared_interleaver(method: str, options: dict[str, Any]) -> Any:
    """One interleaver instance per (method, options) in this process, so state that only
    depends on the input lists (optimized interleaving's solved distributions) is
    computed once for all replicates a process runs. Random draws always come from the
    generator passed to ``interleave``."""
    from onlineeval.interleaving import get_interleaver

    key = (method, json.dumps(options, sort_keys=True, default=str))
    if key not in _INTERLEAVERS:
        _INTERLEAVERS[key] = get_interleaver(method, **options)
    return _INTERLEAVERS[key]


def pair_metrics(rankers: list[str]) -> list[tuple[str, int, int]]:
    """``(metric name, i, j)`` for every pair, ``j`` compared against ``i`` (baseline first)."""
    if len(rankers) == 2:
        return [("delta_ab", 0, 1)]
    pairs = sorted(combinations(range(len(rankers)), 2), key=lambda p: (p[0] != 0, p[0], p[1]))
    return [(f"delta_{rankers[j]}_vs_{rankers[i]}", i, j) for i, j in pairs]


def pair_outcomes(interleaver: Any, shown: Any, clicks: np.ndarray, n_rankers: int) -> np.ndarray:
    """``(n, pairs)`` outcomes in [-1, 1] (+1: the later ranker of the pair preferred),
    pairs as in :func:`pair_metrics`.

    Methods that define an expected outcome (``expected_preferences``) contribute it:
    probabilistic interleaving and multileaving their expectation over the hidden
    assignment of slots to rankers given the shown list and the clicks, as the papers
    define it (Hofmann, Whiteson and de Rijke 2011; Schuth et al. 2015); optimized
    interleaving its normalised credit difference, the quantity its LP makes unbiased
    (Radlinski and Craswell 2013). Averaging per-impression *signs* instead is a
    different statistic, biased for these methods (under random clicks for optimized;
    with several rankers it can reverse a probabilistic-multileaving preference). Other
    methods contribute win / loss / tie.
    """
    expected = getattr(interleaver, "expected_preferences", None)
    if expected is not None:
        prefs = np.asarray(expected(shown, clicks), dtype=np.float64)
    elif n_rankers == 2:
        return np.asarray(interleaver.outcome(shown, clicks), dtype=np.float64)[:, None]
    else:
        prefs = np.asarray(interleaver.preferences(shown, clicks), dtype=np.float64)
    pairs = sorted(combinations(range(n_rankers), 2), key=lambda p: (p[0] != 0, p[0], p[1]))
    return np.stack([prefs[:, j, i] for i, j in pairs], axis=1)


@register_design("interleaving")
class InterleavingDesign(Design):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.interleaver = shared_interleaver(self.config.method or "", self.config.options)
        names = self.config.rankers
        # A/A: every ranker replaced by the baseline
        self.ranker_lists = [self.world.rankings[names[0] if self.aa else r] for r in names]
        self.pairs = pair_metrics(names)
        for metric, _, _ in self.pairs:
            self.sums[f"num:{metric}"] = np.zeros(self.population)
        self.sums["compared"] = np.zeros(self.population)
        self.null_labels: np.ndarray | None = None

    def use_null_user(self) -> None:
        """Run as the design's null variant: the real rankers, but every impression's clicks
        are the user's clicks on ranker A's list for another query drawn by frequency (clicks
        that do not depend on the shown documents, so every true effect is 0); its rows are
        named ``null:<pair>``. Draws come from the design's own stream."""
        self.null_labels = self.world.ranked_labels("A")
        self.query_cdf = np.cumsum(self.world.frequency)

    def _process(self, batch: Batch) -> None:
        q = batch.query
        shown = self.interleaver.interleave([r[q] for r in self.ranker_lists], self.rng, length=self.world.depth)
        ranking = np.asarray(shown.ranking)
        if self.null_labels is None:
            clicks = self._clicks(batch, ranking)
        else:
            from simulations.sampling import draw_from_cdf

            other = draw_from_cdf(self.query_cdf, self.rng.random(len(batch)))
            labels = np.where(ranking >= 0, self.null_labels[other], -1).astype(np.int8)
            clicks = self.users.sample(labels, batch.user_type, self.rng)
        outcomes = pair_outcomes(self.interleaver, shown, clicks, len(self.ranker_lists))
        for p, (metric, _, _) in enumerate(self.pairs):
            self._add(f"num:{metric}", batch.user, outcomes[:, p] / 2.0)
        self._add("compared", batch.user, clicks.any(axis=1).astype(np.float64))

    def _has_data(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> bool:
        return users.size >= 2 and bool(sums["compared"].sum() > 0)

    def metric_names(self) -> list[str]:
        prefix = "" if self.null_labels is None else NULL_PREFIX
        return [prefix + metric for metric, _, _ in self.pairs]

    def _estimates(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> dict[str, Any]:
        from onlineeval.stats import ratio_mean

        return {
            name: ratio_mean(sums[f"num:{metric}"], sums["compared"], alpha=self.alpha)
            for name, (metric, _, _) in zip(self.metric_names(), self.pairs, strict=True)
        }
