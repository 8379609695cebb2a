"""Expected reciprocal rank (Chapelle, Metzler, Zhang, Grinspan, CIKM 2009)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from onlineeval.errors import ConfigError
from onlineeval.metrics._kernels import cut, ranks
from onlineeval.metrics.base import CWL, EMPTY, EvalContext, LabelBatch, Metric, _int_matrix, plain, register

__all__ = ["ERR", "Cascade"]


class Cascade(NamedTuple):
    """The cascade user of ERR over ``(q, d)`` ranks.

    Fields: ``satisfaction`` :math:`R_i`, ``examination`` :math:`\\prod_{j<i}(1-R_j)`
    (probability of reaching rank ``i``) and ``stop`` :math:`R_i \\prod_{j<i}(1-R_j)`
    (probability of stopping satisfied at ``i``). ERR is :math:`\\sum_i \\mathrm{stop}_i / i`.
    """

    satisfaction: np.ndarray
    examination: np.ndarray
    stop: np.ndarray


@register
@dataclass(frozen=True)
class ERR(Metric):
    """Expected reciprocal rank at ``k``.

    .. math::

        ERR@k = \\sum_{i=1}^{k} \\frac{1}{i} R_i \\prod_{j<i} (1 - R_j), \\qquad
        R_i = \\frac{2^{g_i} - 1}{2^{g_{\\max}}}

    ``gmax`` is the top grade of the scale; by default the top grade of the qrels
    (:func:`onlineeval.metrics.evaluate.evaluate_run` passes it in the context, so a
    query scores the same whichever queries a run answers), else the largest grade in
    the batch (at least 1). ir_measures' ERR (gdeval.pl's) fixes gmax = 4 instead: on 0-3 graded qrels
    ``ERR(gmax=4)@k`` is their ``ERR@k`` and ours (gmax = 3) about twice it. ERR is a cascade model, not a static
    C/W/L model: its utility is
    paid on stopping, so :meth:`cwl` raises and :meth:`cascade` gives the user model.
    """

    gmax: int | None = None
    name: ClassVar[str] = "ERR"
    aliases: ClassVar[tuple[str, ...]] = ()

    def _validate(self) -> None:
        if self.gmax is not None and (isinstance(self.gmax, bool) or not isinstance(self.gmax, int) or self.gmax < 1):
            raise ConfigError(("metrics", "ERR", "gmax"), f"must be a positive integer, got {plain(self.gmax)!r}")

    def _top(self, judged: np.ndarray, codes: np.ndarray, ctx_gmax: int | None = None) -> int:
        if self.gmax is not None:
            return self.gmax
        if ctx_gmax is not None:
            return max(1, int(ctx_gmax))
        return max(1, int(judged.max(initial=0)), int(codes.max(initial=0)))

    def _cascade(self, codes: np.ndarray, gmax: int) -> Cascade:
        # only a set gmax can be below a grade (the default is the qrels' or the batch's top): no pass over the
        # grades otherwise
        top = int(codes.max(initial=0)) if self.gmax is not None else gmax
        if top > gmax:
            raise ConfigError(("metrics", "ERR", "gmax"),
                              f"{self}: a ranked document has grade {top}, above gmax={gmax}: its satisfaction "
                              f"probability (2^{top} - 1) / 2^{gmax} would exceed 1 and ERR leave [0, 1]; set gmax to "
                              f"at least {top} (the top grade of the qrels' scale) or leave it unset")
        g = np.maximum(codes, 0).astype(np.float64)
        # (2^g - 1) / 2^gmax as 2^(g - gmax) - 2^-gmax: the same number to the bit (one rounding of the same real,
        # scaled by powers of two), without 2^gmax overflowing for grades of 1024 and more
        sat = np.where(codes > 0, np.exp2(g - gmax) - np.exp2(-float(gmax)), 0.0)
        q = codes.shape[0]
        exam = np.cumprod(np.concatenate([np.ones((q, 1)), 1.0 - sat[:, :-1]], axis=1), axis=1)
        return Cascade(sat, exam, sat * exam)

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        codes = cut(batch.codes, self.k, EMPTY)
        c = self._cascade(codes, self._top(batch.judged, batch.codes, ctx.gmax))
        return (c.stop / ranks(codes.shape[1])).sum(axis=1)

    def cascade(self, ranked: np.ndarray, judged: np.ndarray | None = None) -> Cascade:
        """The cascade user for ``(q, d)`` ranked grades (``-1`` empty), cut at ``k``.

        ``gmax`` defaults to the largest grade in ``judged`` (or ``ranked``) when the metric
        has none; ``ERR@k == (stop / rank).sum(axis=1)``.
        """
        r = _int_matrix(ranked, "ranked")
        codes = cut(np.where(r >= 0, r, EMPTY), self.k, EMPTY)
        j = r if judged is None else _int_matrix(judged, "judged")
        return self._cascade(codes, self._top(j, r))

    def _cwl(self, codes: np.ndarray, ctx: EvalContext) -> CWL:
        raise TypeError(
            "ERR has no static C/W/L model (its gain is paid on stopping); use "
            "ERR.cascade(ranked, judged): continuation 1 - R_i, stop probabilities, ERR = sum stop_i / i"
        )
