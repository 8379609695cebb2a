"""Set- and cut-off-based binary metrics: P@k, Recall@k, R-Precision, Success@k, unjudged@k, judged@k, counts.

Relevance is binary: a grade of at least ``rel_min`` (trec_eval ``-l``). Missing slots
below the cut-off count as non-relevant (P@k always divides by ``k``, as trec_eval does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from onlineeval.errors import ConfigError
from onlineeval.metrics._kernels import cut, first_relevant_probability, gather_rows, safe_div, tie_stats
from onlineeval.metrics.additive import AdditiveMetric
from onlineeval.metrics.base import (
    CWL,
    EMPTY,
    NONPOOL,
    UNJUDGED,
    EvalContext,
    LabelBatch,
    Metric,
    register,
)

__all__ = [
    "P", "Recall", "RPrec", "RPrecMult", "Success", "Unjudged", "Judged", "NumQ", "NumRet", "NumRel", "NumRelRet",
    "NumNonRelJudgedRet",
]


@register
@dataclass(frozen=True)
class P(AdditiveMetric):
    """Precision at ``k``.

    .. math::

        P@k = \\frac{1}{k} \\sum_{i=1}^{k} \\mathbb{1}[g_i \\ge \\mathrm{rel\\_min}]

    Without ``k``: set precision, relevant retrieved / retrieved (trec_eval ``set_P``).
    C/W/L (with ``k``): :math:`C(i) = 1` for :math:`i < k`, 0 at ``k``; :math:`W(i) = 1/k`.
    """

    name: ClassVar[str] = "P"
    aliases: ClassVar[tuple[str, ...]] = ("Precision",)
    reads_first_k: ClassVar[bool] = True  # (_aggregate cuts at k when k is set)

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        if self.k is None:
            return safe_div(values.sum(axis=1), batch.num_ret())
        return cut(values, self.k).sum(axis=1) / self.k

    def _cwl(self, codes: np.ndarray, ctx: EvalContext) -> CWL:
        if self.k is None:
            raise TypeError("P without a cut-off (set precision) has no static C/W/L model; use P@k")
        q, d = codes.shape
        i = np.arange(1, d + 1)
        cont = np.broadcast_to(np.where(i < self.k, 1.0, 0.0), (q, d)).copy()
        weight = np.broadcast_to(np.where(i <= self.k, 1.0 / self.k, 0.0), (q, d)).copy()
        last = np.broadcast_to(np.where(i == self.k, 1.0, 0.0), (q, d)).copy()
        return CWL(cont, weight, last)


@register
@dataclass(frozen=True)
class Recall(AdditiveMetric):
    """Recall at ``k``: relevant documents in the top ``k`` over all relevant (R).

    .. math::

        \\mathrm{Recall}@k = \\frac{1}{R} \\sum_{i=1}^{k} \\mathbb{1}[g_i \\ge \\mathrm{rel\\_min}]

    0 when ``R = 0``. Without ``k``: relevant retrieved / R (trec_eval ``set_recall``).
    """

    name: ClassVar[str] = "Recall"
    aliases: ClassVar[tuple[str, ...]] = ()
    reads_first_k: ClassVar[bool] = True  # (_aggregate cuts at k when k is set)

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return safe_div(cut(values, self.k).sum(axis=1), batch.num_rel(ctx.rel_min))


def _precision_at(values: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Row-wise precision at a per-query depth (0 where depth is 0); slots beyond the list count 0."""
    q, d = values.shape
    csum = np.concatenate([np.zeros((q, 1)), np.cumsum(values, axis=1)], axis=1)
    hits = gather_rows(csum, np.minimum(depth, d))
    return safe_div(hits, depth)


@register
@dataclass(frozen=True)
class RPrec(AdditiveMetric):
    """R-Precision: precision at rank R, the number of relevant documents (trec_eval ``Rprec``).

    .. math::

        \\mathrm{RPrec} = \\frac{1}{R} \\sum_{i=1}^{R} \\mathbb{1}[g_i \\ge \\mathrm{rel\\_min}]
    """

    name: ClassVar[str] = "RPrec"
    aliases: ClassVar[tuple[str, ...]] = ("R-Prec", "Rprec", "R-Precision")
    cutoff: ClassVar[str] = "none"

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return _precision_at(values, batch.num_rel(ctx.rel_min))


@register
@dataclass(frozen=True)
class RPrecMult(AdditiveMetric):
    """Precision at a multiple of R: rank :math:`\\lfloor m R + 0.9 \\rfloor` (trec_eval ``Rprec_mult``)."""

    mult: float = 1.0
    name: ClassVar[str] = "RPrecMult"
    aliases: ClassVar[tuple[str, ...]] = ("Rprec_mult",)
    cutoff: ClassVar[str] = "none"

    def _validate(self) -> None:
        if not self.mult > 0:
            raise ConfigError(("metrics", "RPrecMult", "mult"), f"must be > 0, got {self.mult}")

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        depth = np.floor(self.mult * batch.num_rel(ctx.rel_min) + 0.9).astype(np.int64)
        return _precision_at(values, depth)


@register
@dataclass(frozen=True)
class Success(Metric):
    """Success at ``k``: 1 when a relevant document is in the top ``k``, else 0."""

    name: ClassVar[str] = "Success"
    aliases: ClassVar[tuple[str, ...]] = ("S",)
    tie_expectation: ClassVar[bool] = True

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        if batch.groups is not None:  # P(first relevant document within the top k)
            p = first_relevant_probability(tie_stats(batch.codes >= ctx.rel_min, batch.groups))
            return cut(p, self.k).sum(axis=1)
        codes = batch.codes if self.k is None else cut(batch.codes, self.k, EMPTY)
        return (codes >= ctx.rel_min).any(axis=1).astype(np.float64)


@register
@dataclass(frozen=True)
class Unjudged(AdditiveMetric):
    """Fraction of the top ``k`` that is retrieved but unjudged (trec_eval ``unj``).

    Slots past the end of the list count as judged (trec_eval's rule).
    """

    name: ClassVar[str] = "Unjudged"
    empty_sensitive: ClassVar[bool] = False
    relevance_free: ClassVar[bool] = True
    aliases: ClassVar[tuple[str, ...]] = ("unj", "unjudged")
    cutoff: ClassVar[str] = "required"

    def _doc_values(self, codes: np.ndarray, ctx: EvalContext) -> np.ndarray:
        return ((codes == NONPOOL) | (codes == UNJUDGED)).astype(np.float64)

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return cut(values, self.k).sum(axis=1) / self.k


@register
@dataclass(frozen=True)
class Judged(AdditiveMetric):
    """Fraction of the retrieved top ``k`` that is judged: ir_measures' ``Judged@k``.

    .. math::

        Judged@k = \\frac{1}{\\min(k, n)} \\sum_{i=1}^{\\min(k, n)} \\mathbb{1}[d_i \\in \\mathrm{qrels}]

    with ``n`` the number of retrieved documents (0 when nothing is retrieved). Any qrels entry counts as
    judged, whatever its grade (negative grades too, as in ir_measures); the relevance threshold ``rel_min``
    plays no part, so Judged@k goes with metrics at any threshold (nDCG@10 + Judged@10, as TREC DL and BEIR
    report). When the run retrieves at least ``k`` documents and the qrels have no negative grade it is
    ``1 - Unjudged@k``; on a shorter list it divides by the list's length (ir_measures' rule), where
    Unjudged@k (trec_eval's ``unj``) counts the empty slots as judged. Score ties follow the conventions'
    tie rule (ir_measures' judged provider breaks them by document id ascending). It is relevance-free: under
    ``empty="exclude"`` its mean still counts the queries without a relevant document, as ir_measures' does.
    """

    name: ClassVar[str] = "Judged"
    empty_sensitive: ClassVar[bool] = False
    relevance_free: ClassVar[bool] = True
    aliases: ClassVar[tuple[str, ...]] = ()
    cutoff: ClassVar[str] = "required"
    reads_first_k: ClassVar[bool] = True

    def _doc_values(self, codes: np.ndarray, ctx: EvalContext) -> np.ndarray:
        return ((codes >= 0) | (codes == UNJUDGED)).astype(np.float64)

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        assert self.k is not None
        return safe_div(cut(values, self.k).sum(axis=1), np.minimum(batch.num_ret(), self.k))


@register
@dataclass(frozen=True)
class NumQ(Metric):
    """Number of queries (1 per counted query); summed over queries in reports.

    The sum is the number of counted queries: trec_eval ``num_q``, ir_measures ``NumQ``; with
    ``missing="zero"`` (trec_eval ``-c``) the filled queries count too. It follows the ``empty`` rule (under
    ``empty="exclude"`` it is the number of queries the relevance metrics' means are over), though a
    relevance-free metric such as Judged@k may be averaged over more queries.
    """

    name: ClassVar[str] = "NumQ"
    empty_sensitive: ClassVar[bool] = False
    aliases: ClassVar[tuple[str, ...]] = ("num_q",)
    summed: ClassVar[bool] = True
    cutoff: ClassVar[str] = "none"
    tie_expectation: ClassVar[bool] = True

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return np.ones(batch.codes.shape[0], dtype=np.float64)


@register
@dataclass(frozen=True)
class NumRet(Metric):
    """Number of retrieved documents (within the run depth); summed over queries in reports."""

    name: ClassVar[str] = "NumRet"
    empty_sensitive: ClassVar[bool] = False
    relevance_free: ClassVar[bool] = True
    aliases: ClassVar[tuple[str, ...]] = ("num_ret",)
    summed: ClassVar[bool] = True
    cutoff: ClassVar[str] = "none"
    tie_expectation: ClassVar[bool] = True

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return batch.num_ret().astype(np.float64)


@register
@dataclass(frozen=True)
class NumRel(Metric):
    """Number of judged relevant documents R (grade >= rel_min); summed over queries in reports."""

    name: ClassVar[str] = "NumRel"
    empty_sensitive: ClassVar[bool] = False
    aliases: ClassVar[tuple[str, ...]] = ("num_rel",)
    summed: ClassVar[bool] = True
    cutoff: ClassVar[str] = "none"
    tie_expectation: ClassVar[bool] = True

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return batch.num_rel(ctx.rel_min).astype(np.float64)


@register
@dataclass(frozen=True)
class NumRelRet(AdditiveMetric):
    """Number of relevant retrieved documents (in the top ``k`` when given); summed over queries in reports."""

    name: ClassVar[str] = "NumRelRet"
    empty_sensitive: ClassVar[bool] = False
    aliases: ClassVar[tuple[str, ...]] = ("num_rel_ret",)
    summed: ClassVar[bool] = True

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return cut(values, self.k).sum(axis=1)


@register
@dataclass(frozen=True)
class NumNonRelJudgedRet(NumRelRet):
    """Number of judged non-relevant retrieved documents (in the top ``k`` when given); summed over queries in reports.

    Retrieved documents that the qrels grade ``0 <= grade < rel_min``: trec_eval's
    ``num_nonrel_judged_ret`` (``num_ret - num_nonpool - num_unjudged_in_pool - num_rel_ret``).
    Documents absent from the qrels and qrels entries with a negative grade (pooled but
    unjudged) are not judged, so neither counts.
    """

    name: ClassVar[str] = "NumNonRelJudgedRet"
    aliases: ClassVar[tuple[str, ...]] = ("num_nonrel_judged_ret",)

    def _doc_values(self, codes: np.ndarray, ctx: EvalContext) -> np.ndarray:  # NumRelRet's sum, other documents
        return ((codes >= 0) & (codes < ctx.rel_min)).astype(np.float64)
