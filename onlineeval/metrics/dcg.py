"""Discounted cumulative gain: DCG@k and nDCG@k (Järvelin and Kekäläinen, TOIS 2002)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from onlineeval.conventions import Gain
from onlineeval.errors import ConfigError
from onlineeval.metrics._kernels import cut, cwl_profile, log2_discount, reach_after, safe_div
from onlineeval.metrics.additive import AdditiveMetric
from onlineeval.metrics.base import CWL, EvalContext, LabelBatch, _int_matrix, register

__all__ = ["DCG", "NDCG"]


@dataclass(frozen=True)
class _DCGBase(AdditiveMetric):
    gain: str | None = None
    reads_first_k: ClassVar[bool] = True  # (_dcg cuts at k)

    def _validate(self) -> None:
        if self.gain is not None:
            if not isinstance(self.gain, str):
                raise ConfigError(("metrics", type(self).name, "gain"), "must be a string such as 'linear'")
            Gain.parse(self.gain)

    def _gain(self, ctx: EvalContext) -> Gain:
        return ctx.gain if self.gain is None else Gain.parse(self.gain)

    def _doc_values(self, codes: np.ndarray, ctx: EvalContext) -> np.ndarray:
        return self._gain(ctx)(codes)

    def _dcg(self, values: np.ndarray) -> np.ndarray:
        v = cut(values, self.k)
        return (v * log2_discount(v.shape[1])[None, :]).sum(axis=1)

    # C/W/L: C(i) = log2(i+1)/log2(i+2) for i < k and C(k) = 0, so the reach of rank i is
    # 1/log2(i+1), the DCG discount. Without a cut-off the window width d is the horizon.
    def _cwl(self, codes: np.ndarray, ctx: EvalContext) -> CWL:
        q, d = codes.shape
        k = d if self.k is None else self.k
        i = np.arange(1, d + 1, dtype=np.float64)
        cont = np.where(i < k, np.log2(i + 1) / np.log2(i + 2), 0.0)
        cont = np.broadcast_to(cont, (q, d)).copy()
        tail_ranks = np.arange(d + 1, k + 1, dtype=np.float64)
        tail = np.full(q, (1.0 / np.log2(tail_ranks + 1)).sum()) * (reach_after(cont) > 0)
        return cwl_profile(cont, tail)

    def _cwl_gains(self, codes: np.ndarray, ctx: EvalContext) -> np.ndarray:
        return self._gain(ctx)(codes)

    def _horizon_mass(self, d: int) -> float:
        k = d if self.k is None else self.k
        return float(log2_discount(k).sum())


@register
@dataclass(frozen=True)
class DCG(_DCGBase):
    """Discounted cumulative gain at ``k``.

    .. math::

        DCG@k = \\sum_{i=1}^{k} \\frac{g(r_i)}{\\log_2(i + 1)}

    with the gain ``g`` of the conventions (default exponential, :math:`2^r - 1`) or the
    ``gain`` parameter (``DCG(gain='linear')@10``).

    C/W/L: :math:`C(i) = \\log_2(i+1)/\\log_2(i+2)` for :math:`i < k`, :math:`C(k) = 0`;
    :math:`W(i) = 1/(Z_k \\log_2(i+1))` with :math:`Z_k = \\sum_{i \\le k} 1/\\log_2(i+1)`,
    so :math:`DCG@k = Z_k \\sum_i W(i) g(r_i)` (:meth:`cwl_scale` returns :math:`Z_k`).
    """

    name: ClassVar[str] = "DCG"
    aliases: ClassVar[tuple[str, ...]] = ("dcg_cut",)

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return self._dcg(values)

    def cwl_scale(self, ranked: np.ndarray, judged: np.ndarray) -> np.ndarray:
        """Factor ``s`` with ``DCG = s * sum_i W(i) g(r_i)``: :math:`Z_k`."""
        r = _int_matrix(ranked, "ranked")
        return np.full(r.shape[0], self._horizon_mass(r.shape[1]))


@register
@dataclass(frozen=True)
class NDCG(_DCGBase):
    """Normalised DCG at ``k``: DCG@k over the ideal DCG@k.

    .. math::

        nDCG@k = \\frac{DCG@k}{IDCG@k}, \\qquad
        IDCG@k = \\sum_{i=1}^{k} \\frac{g^{*}_{i}}{\\log_2(i+1)}

    where :math:`g^{*}` are the positive gains of *all judged documents* of the query
    sorted descending and cut at ``k`` (not at R). 0 when the ideal DCG is 0 (the
    ``empty`` convention then decides how such a query counts).
    C/W/L as :class:`DCG`; :meth:`cwl_scale` returns :math:`Z_k / IDCG@k`.
    """

    name: ClassVar[str] = "nDCG"
    aliases: ClassVar[tuple[str, ...]] = ("NDCG", "ndcg_cut")

    def ideal(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        """``(q,)`` ideal DCG at ``k`` from the judged documents."""
        g = self._gain(ctx)(batch.judged)
        g = -np.sort(-np.maximum(g, 0.0), axis=1)
        return self._dcg(g)

    def _aggregate(self, values: np.ndarray, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return safe_div(self._dcg(values), self.ideal(batch, ctx))

    def cwl_scale(self, ranked: np.ndarray, judged: np.ndarray) -> np.ndarray:
        """Factor ``s`` with ``nDCG = s * sum_i W(i) g(r_i)``: :math:`Z_k / IDCG@k` (0 if IDCG is 0)."""
        batch = LabelBatch.from_labels(ranked, judged)
        return safe_div(self._horizon_mass(batch.codes.shape[1]), self.ideal(batch, EvalContext()))
