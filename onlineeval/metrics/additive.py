"""Metrics that are a weighted sum over ranks of a per-document value.

.. math::

    M = \\sum_i w_i\\, f(d_i)

Their exact expectation over all orders of score-tied documents replaces
:math:`f(d_i)` by its mean over the tie group of rank ``i`` (see
:func:`onlineeval.metrics._kernels.tie_average`), so these metrics support the
``expected`` tie convention. A subclass implements ``_doc_values`` (:math:`f`) and
``_aggregate`` (the weighted sum).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from onlineeval.metrics._kernels import tie_average
from onlineeval.metrics.base import EvalContext, LabelBatch, Metric

__all__ = ["AdditiveMetric"]


@dataclass(frozen=True)
class AdditiveMetric(Metric):
    """Base of :math:`\\sum_i w_i f(d_i)` metrics; see the module docstring."""

    tie_expectation: ClassVar[bool] = True
    #: ``_aggregate`` reads only the first ``k`` columns of the values when ``k`` is set: then,
    #: without tie groups, :math:`f` is computed on the first ``k`` ranks only (the same values;
    #: at 100 documents a query and ``k = 10``, a tenth of the work)
    reads_first_k: ClassVar[bool] = False

    def _doc_values(self, codes: np.ndarray, ctx: EvalContext) -> np.ndarray:
        """``(q, d)`` per-document value :math:`f` (default: binary relevance)."""
        return (codes >= ctx.rel_min).astype(np.float64)

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} does not implement _aggregate")  # pragma: no cover

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        codes = batch.codes
        if self.reads_first_k and batch.groups is None and self.k is not None and self.k < codes.shape[1]:
            codes = codes[:, : self.k]  # (f is per document; tie groups may reach past rank k)
        values = self._doc_values(codes, ctx)
        if batch.groups is not None:
            values = tie_average(values, batch.groups)
        return self._aggregate(values, batch, ctx)
