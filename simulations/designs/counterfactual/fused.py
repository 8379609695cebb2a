r"""The per-impression terms of the IPS family for both targets of a batch at once.

The counterfactual design asks each estimator for its terms of each target
(:meth:`onlineeval.estimators.Estimator.terms`). For the reweighting estimators these are
elementwise expressions of the targets' propensities :math:`\pi`, the logging
propensities :math:`\mu` and the slot rewards :math:`r_{ij}` (list reward :math:`R_i`):
with the weights :math:`w = \pi / \mu` at the list, prefix and item level,

- ``ips``: :math:`w^{\mathrm{list}}_i R_i`; ``snips``: the same numerator over :math:`w^{\mathrm{list}}_i`;
- ``clipped_ips``: :math:`(w - (w - M)^+)_i R_i`;
- ``rips`` and ``iips``: :math:`\sum_j w_{ij} r_{ij}` with prefix and item weights;
- ``adaptive_ips``'s behaviour terms (:meth:`~onlineeval.estimators.AdaptiveIPS.behaviour_terms`):
  the item and prefix sums again (``independent``, ``cascade``) and the list weight at every
  shown slot (``standard``).

:class:`FusedTerms` computes them on arrays stacked over the targets, so each expression is
one numpy call for both targets, and computes what several estimators share once (the
weights, the IPS numerator, the item and prefix sums). The numbers are each estimator's
own: the same IEEE operations on the same operands, in the same order (a slot sum is
:func:`onlineeval.estimators.derived.row_sum` itself, on the stacked rows); tested exactly
equal to ``terms`` and ``behaviour_terms`` in ``tests/test_counterfactual_fastpaths.py``.
Only these classes themselves are fused (a subclass may change the arithmetic), and only
for rewards they support; every other estimator goes through its ``terms``.

Measured (``benchmarks/bench_counterfactual.py``, the six estimators of
``configs/counterfactual.yaml``, batches of 4,000 impressions, a loaded 2-core machine):
0.13 us per impression for the six estimators' terms of both targets, against 0.29 for
their own ``terms`` called one by one (numpy's per-call overhead dominated, and each
estimator recomputed its slot products).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FusedTerms"]


def _fused_kinds() -> dict[type, str]:
    from onlineeval.estimators.clipped_ips import ClippedIPS
    from onlineeval.estimators.iips import IIPS
    from onlineeval.estimators.ips import IPS
    from onlineeval.estimators.rips import RIPS
    from onlineeval.estimators.snips import SNIPS

    return {IPS: "ips", SNIPS: "snips", ClippedIPS: "clipped_ips", RIPS: "rips", IIPS: "iips"}


class FusedTerms:
    """The terms of the fused estimators of a design (see the module docstring).

    ``terms[label]`` after :meth:`compute` is ``(num, den)``, each ``(T, n)`` (one row per
    target; ``den`` ``None`` for all ones); ``behaviours[label]`` (adaptive IPS) maps each
    behaviour to its ``(T, n)`` terms."""

    def __init__(self, fused: dict[str, tuple[str, Any]], behaviour_labels: list[str]) -> None:
        self.fused = fused
        self.behaviour_labels = behaviour_labels
        kinds = {kind for kind, _ in fused.values()}
        wanted = bool(behaviour_labels)
        self._list = wanted or bool(kinds & {"ips", "snips", "clipped_ips"})
        self._prefix = wanted or "rips" in kinds
        self._item = wanted or "iips" in kinds

    @classmethod
    def build(cls, estimators: list[tuple[str, Any]], reward: Any, whole_log: dict[str, bool],
              row_separable: set[str]) -> FusedTerms | None:
        """The fused terms of ``estimators`` (``(label, estimator)``) for ``reward``: the
        accumulated estimators of the fused classes, and adaptive IPS's behaviour terms for
        the labels in ``row_separable``; ``None`` when there is none."""
        from onlineeval.estimators.adaptive_ips import AdaptiveIPS

        kinds = _fused_kinds()
        fused: dict[str, tuple[str, Any]] = {}
        behaviours: list[str] = []
        for label, est in estimators:
            if reward.kind not in est.rewards:  # its own terms raise the error
                continue
            if whole_log[label]:
                if type(est) is AdaptiveIPS and label in row_separable:
                    behaviours.append(label)
                continue
            kind = kinds.get(type(est))
            if kind is not None:
                fused[label] = (kind, est)
        return cls(fused, behaviours) if fused or behaviours else None

    #: whether :meth:`compute` runs the compiled kernel (:func:`simulations.policies.kernels.fused_terms`; the
    #: same numbers) for lists of fewer than 8 slots; False runs the NumPy code (the tested reference)
    compiled: bool = True

    def _compiled(self, data: Any, target_p: Any, reward: Any, all_valid: bool) -> tuple[dict[str, Any], Any]:
        """:meth:`compute` by :func:`~simulations.policies.kernels.fused_terms` (lists of 1 to 7 slots, at least
        one row): the same arrays, the SNIPS numerators one array, as there."""
        from simulations.policies import kernels

        caps = getattr(self, "_caps", None)
        if caps is None:
            labels = [label for label, (kind, _) in self.fused.items() if kind == "clipped_ips"]
            caps = self._caps = (labels, np.array([float(self.fused[label][1].cap) for label in labels]))
        r = reward.slot_rewards(data.clicks)
        big_r = reward.list_rewards(data.clicks) if self._list else np.zeros(target_p.list.shape[1])  # no list term
        t = target_p.list.shape[0]
        w_list, ips_num, ht_num, clipped, pre, item, std = kernels.fused_terms(
            _flat(target_p.list, t), _flat(target_p.prefix, t), _flat(target_p.item, t), _flat(data.p_list),
            _flat(data.p_prefix), _flat(data.p_item), _flat(r), _flat(big_r),
            _ALL_SHOWN if all_valid else np.ravel(np.ascontiguousarray(data.valid, dtype=bool)),
            self._prefix, self._item, bool(self.behaviour_labels), caps[1], float(reward.offset))
        terms: dict[str, Any] = {}
        at = {label: i for i, label in enumerate(caps[0])}
        for label, (kind, _) in self.fused.items():
            if kind in ("ips", "snips"):  # IPS in Horvitz-Thompson form w (c0 + R) - c0 (IPS._terms); SNIPS w R
                terms[label] = (ips_num, w_list) if kind == "snips" else (ht_num, None)
            elif kind == "clipped_ips":
                terms[label] = (clipped[at[label]], None)
            else:
                terms[label] = (pre if kind == "rips" else item, None)
        behaviours = {label: {"independent": item, "cascade": pre, "standard": std} for label in self.behaviour_labels}
        return terms, behaviours

    def compute(self, data: Any, target_p: Any, reward: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """``(terms, behaviours)`` of one batch: ``data`` the batch's
        :class:`~onlineeval.estimators.LoggedData`, ``target_p`` the targets' propensities of
        its lists stacked (``list`` ``(T, n)``, ``prefix`` and ``item`` ``(T, n, k)``, float64),
        ``reward`` the design's reward (slot and list rewards of the batch's clicks)."""
        from onlineeval.estimators.derived import row_sum
        from onlineeval.estimators.ips import ht_numerator

        t, n = target_p.list.shape
        k = data.k
        all_valid = data.all_valid
        if self.compiled and 0 < k < 8 and n > 0:
            return self._compiled(data, target_p, reward, all_valid)

        def on_shown(x: np.ndarray) -> np.ndarray:  # LoggedData._on_shown, broadcast over the targets
            return x if all_valid else np.where(data.valid, x, 0.0)

        def slot_sums(x: np.ndarray) -> np.ndarray:  # row_sum of each target's (n, k) rows
            return row_sum(x.reshape(t * n, k)).reshape(t, n)

        r = reward.slot_rewards(data.clicks)
        w_list = target_p.list / data.p_list if self._list else None
        pre = slot_sums(on_shown(target_p.prefix / data.p_prefix) * r) if self._prefix else None
        item = slot_sums(on_shown(target_p.item / data.p_item) * r) if self._item else None
        big_r = reward.list_rewards(data.clicks) if self._list else None
        terms: dict[str, Any] = {}
        ips_num = None
        for label, (kind, est) in self.fused.items():
            if kind in ("ips", "snips"):
                if ips_num is None:
                    ips_num = w_list * big_r  # SNIPS: w * R; IPS in Horvitz-Thompson form w (c0 + R) - c0
                terms[label] = (ht_numerator(w_list, big_r, reward.offset) if kind == "ips" else ips_num,
                                w_list if kind == "snips" else None)
            elif kind == "clipped_ips":
                excess = np.maximum(w_list - float(est.cap), 0.0)
                terms[label] = (ht_numerator(w_list - excess, big_r, reward.offset), None)
            elif kind == "rips":
                terms[label] = (pre, None)
            else:  # iips
                terms[label] = (item, None)
        behaviours: dict[str, dict[str, Any]] = {}
        if self.behaviour_labels:
            assert w_list is not None
            slots = w_list[:, :, None] if all_valid else np.where(data.valid, w_list[:, :, None], 0.0)
            std = slot_sums(slots * r)
            for label in self.behaviour_labels:
                behaviours[label] = {"independent": item, "cascade": pre, "standard": std}
        return terms, behaviours


_ALL_SHOWN = np.empty(0, dtype=bool)


def _flat(x: Any, rows: int = 0) -> np.ndarray:
    """``x`` as C-contiguous float64, ``(rows, -1)`` (``rows > 0``) or flat."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    return x.reshape(rows, -1) if rows else x.reshape(-1)


def stacked_indicators(same: Any, runs: Any) -> Any:
    """The deterministic targets' propensities of a batch's lists, stacked ``(T, ...)``:
    ``same[t]`` is ``lists_t[query] == shown`` and ``runs[t]`` its running AND over the
    slots (what :meth:`onlineeval.estimators.DeterministicTarget.propensities` computes:
    the prefix indicators as float, the list indicator its last slot, the item indicators);
    ``(T, n, k)`` bool arrays or lists of ``(n, k)`` ones."""
    from onlineeval.estimators import Propensities

    prefix = np.asarray(runs).astype(np.float64)
    return Propensities(prefix[:, :, -1], prefix, np.asarray(same).astype(np.float64))


def stack_propensities(parts: list[Any]) -> Any:
    """Targets' :class:`~onlineeval.estimators.Propensities` stacked over the targets as float64."""
    from onlineeval.estimators import Propensities

    return Propensities(*(np.stack([np.asarray(getattr(p, f), dtype=np.float64) for p in parts])
                          for f in ("list", "prefix", "item")))
