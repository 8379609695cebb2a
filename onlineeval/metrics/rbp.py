"""Rank-biased precision and its residual (Moffat and Zobel, TOIS 2008)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from onlineeval.errors import ConfigError, must_be_one_of
from onlineeval.metrics._kernels import cut, cwl_profile, tie_average
from onlineeval.metrics.additive import AdditiveMetric
from onlineeval.metrics.base import CWL, EMPTY, NONPOOL, UNJUDGED, EvalContext, LabelBatch, register

__all__ = ["RBP", "RBPResidual", "RBPInterval"]


class RBPInterval(NamedTuple):
    """RBP as an interval: the base value and base + residual (unjudged and unseen mass)."""

    low: np.ndarray
    high: np.ndarray


def _check_p(p: float, label: str) -> None:
    if not 0.0 < p < 1.0:
        raise ConfigError(("metrics", label, "p"), f"persistence p must be in (0, 1), got {p}")


@register
@dataclass(frozen=True)
class RBP(AdditiveMetric):
    """Rank-biased precision with persistence ``p``.

    .. math::

        RBP = (1 - p) \\sum_{i} r_i\\, p^{i-1}

    with binary :math:`r_i` (grade >= rel_min), or :math:`r_i = g_i / g_{\\max}` with
    ``graded=True`` (:math:`g_{\\max}` the query's largest judged grade, at least 1,
    as trec_eval's ``rbp`` does; that form ignores rel_min). C/W/L:
    :math:`C(i) = p`, :math:`W(i) = L(i) = (1-p) p^{i-1}`. An optional ``@k`` truncates
    the sum. The residual is :class:`RBPResidual`; :meth:`interval` gives both ends.
    """

    p: float = 0.8
    graded: bool = False
    name: ClassVar[str] = "RBP"
    shown_params: ClassVar[tuple[str, ...]] = ("p",)
    aliases: ClassVar[tuple[str, ...]] = ("rbp",)

    def _validate(self) -> None:
        _check_p(self.p, "RBP")

    def _values(self, codes: np.ndarray, judged: np.ndarray, ctx: EvalContext) -> np.ndarray:
        if not self.graded:
            return (codes >= ctx.rel_min).astype(np.float64)
        top = np.maximum(judged.max(axis=1, initial=0), 1).astype(np.float64)
        return np.maximum(codes, 0) / top[:, None]

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        v = cut(values, self.k)
        w = (1.0 - self.p) * self.p ** np.arange(v.shape[1], dtype=np.float64)
        return (v * w).sum(axis=1)

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        values = self._values(batch.codes, batch.judged, ctx)
        if batch.groups is not None:
            values = tie_average(values, batch.groups)
        return self._aggregate(values, batch, ctx)

    def interval(self, batch: LabelBatch, ctx: EvalContext = EvalContext()) -> RBPInterval:
        """``[RBP, RBP + residual]``: every unjudged or unseen document relevant at the top."""
        low = self.compute(batch, ctx)
        return RBPInterval(low, low + RBPResidual(k=self.k, p=self.p).compute(batch, ctx))

    # C/W/L: the user is the same with or without @k (C(i) = p); a cut-off zeroes the gains
    # past rank k, so RBP@k = sum_i W(i) r_i with those gains (see cwl_gains).
    def _cwl(self, codes: np.ndarray, ctx: EvalContext) -> CWL:
        q, d = codes.shape
        cont = np.full((q, d), self.p)
        tail = np.full(q, self.p**d / (1.0 - self.p))
        return cwl_profile(cont, tail)

    def _cwl_gains(self, codes: np.ndarray, ctx: EvalContext) -> np.ndarray:
        # graded=True scales by the largest grade in the shown list (no judged set here)
        values = self._values(codes, codes, ctx)
        if self.k is not None:
            values[:, self.k :] = 0.0
        return values


@register
@dataclass(frozen=True)
class RBPResidual(AdditiveMetric):
    """Residual of RBP: the most the value could grow if every unjudged or unseen document were relevant.

    .. math::

        \\mathrm{resid} = p^{n} + (1 - p) \\sum_{i \\le n,\\; d_i \\text{ unjudged}} p^{i-1}

    with ``n`` the length of the ranked list (or ``k``). trec_eval's ``rbp_resid``
    (fixed p = 0.9) reports 0 when no retrieved document is unjudged, dropping
    :math:`p^n`; ``form='trec_eval'`` reproduces that, the default ``'full'`` always
    includes it.
    """

    p: float = 0.8
    form: str = "full"
    name: ClassVar[str] = "RBPResidual"
    empty_sensitive: ClassVar[bool] = False
    relevance_free: ClassVar[bool] = True
    shown_params: ClassVar[tuple[str, ...]] = ("p",)
    aliases: ClassVar[tuple[str, ...]] = ("rbp_resid", "RBPResid")

    def _validate(self) -> None:
        _check_p(self.p, "RBPResidual")
        if self.form not in ("full", "trec_eval"):
            raise ConfigError(("metrics", "RBPResidual", "form"), must_be_one_of(("full", "trec_eval"), self.form))

    def _doc_values(self, codes: np.ndarray, ctx: EvalContext) -> np.ndarray:
        return ((codes == NONPOOL) | (codes == UNJUDGED)).astype(np.float64)

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        v = cut(values, self.k)
        w = (1.0 - self.p) * self.p ** np.arange(v.shape[1], dtype=np.float64)
        n = (cut(batch.codes, self.k, EMPTY) != EMPTY).sum(axis=1)
        resid = (v * w).sum(axis=1) + self.p ** n.astype(np.float64)
        if self.form == "trec_eval":
            resid = np.where(v.any(axis=1), resid, 0.0)
        return resid


RBPResid = RBPResidual
