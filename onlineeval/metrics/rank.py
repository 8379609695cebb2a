"""Rank-sensitive binary metrics: RR, AP, bpref, infAP and interpolated precision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from onlineeval.errors import ConfigError, must_be_one_of
from onlineeval.metrics._kernels import (
    cut,
    cwl_profile,
    first_relevant_probability,
    gather_rows,
    ranks,
    reach_after,
    safe_div,
    tie_stats,
)
from onlineeval.metrics.base import CWL, EMPTY, UNJUDGED, EvalContext, LabelBatch, Metric, register

__all__ = ["RR", "AP", "Bpref", "InfAP", "IPrec", "IPrecAvg"]

INFAP_EPSILON = 1e-5


@register
@dataclass(frozen=True)
class RR(Metric):
    """Reciprocal rank of the first relevant document (0 if none in the top ``k``).

    .. math::

        RR = 1 / \\min\\{i : g_i \\ge \\mathrm{rel\\_min}\\}

    C/W/L: :math:`C(i) = 1 - r_i` (and :math:`C(k) = 0` with a cut-off), so the user
    reads down to the first relevant document ``f`` and :math:`W(i) = 1/f` for
    :math:`i \\le f` (Moffat et al. 2017). With no relevant document and no cut-off the
    user never stops and every weight is 0.
    """

    name: ClassVar[str] = "RR"
    aliases: ClassVar[tuple[str, ...]] = ("MRR", "recip_rank", "ReciprocalRank")
    tie_expectation: ClassVar[bool] = True

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        if batch.groups is not None:
            # E[RR] = sum_i P(first relevant at i) / i (see first_relevant_probability)
            p = first_relevant_probability(tie_stats(batch.codes >= ctx.rel_min, batch.groups))
            p = cut(p, self.k)
            return (p / ranks(p.shape[1])).sum(axis=1)
        rel = cut(batch.codes, self.k, EMPTY) >= ctx.rel_min
        if rel.shape[1] == 0:
            return np.zeros(rel.shape[0])
        first = np.argmax(rel, axis=1)
        return np.where(rel.any(axis=1), 1.0 / (first + 1.0), 0.0)

    def _cwl(self, codes: np.ndarray, ctx: EvalContext) -> CWL:
        q, d = codes.shape
        cont = 1.0 - (codes >= ctx.rel_min)
        if self.k is not None and self.k <= d:
            cont[:, self.k - 1 :] = 0.0
        past = reach_after(cont)
        if self.k is None:
            tail = np.where(past > 0, np.inf, 0.0)
        else:
            tail = past * max(self.k - d, 0)
        return cwl_profile(cont, tail)


@register
@dataclass(frozen=True)
class AP(Metric):
    """Average precision (trec_eval ``map``; ``map_cut_k`` with a cut-off).

    .. math::

        AP@k = \\frac{1}{D} \\sum_{i=1}^{k} r_i \\, P@i, \\qquad
        D = R \\text{ (denominator='R')} \\text{ or } \\min(R, k) \\text{ ('min_r_k')}

    0 when ``R = 0``. AP has no static C/W/L user model: its weights depend on R, which
    the user cannot know while reading (Moffat et al. 2017).
    """

    denominator: str = "R"
    name: ClassVar[str] = "AP"
    aliases: ClassVar[tuple[str, ...]] = ("MAP", "map_cut", "AveP")
    tie_expectation: ClassVar[bool] = True

    def _validate(self) -> None:
        if self.denominator not in ("R", "min_r_k"):
            raise ConfigError(("metrics", "AP", "denominator"), must_be_one_of(("R", "min_r_k"), self.denominator))

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        if batch.groups is not None:
            num = self._expected_numerator(batch, ctx)
        else:
            rel = cut(batch.codes, self.k, EMPTY) >= ctx.rel_min
            # precision at each rank (an integer count over the rank: the same doubles as a
            # float cumsum, in half the time), kept at the relevant ranks
            prec = np.cumsum(rel, axis=1, dtype=np.int32 if rel.shape[1] < 2**31 else np.int64) / ranks(rel.shape[1])
            prec *= rel
            num = prec.sum(axis=1)
        den = batch.num_rel(ctx.rel_min)
        if self.denominator == "min_r_k" and self.k is not None:
            den = np.minimum(den, self.k)
        return safe_div(num, den)

    def _expected_numerator(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        r""":math:`E[\sum_i r_i P@i]` over random orders inside tie groups.

        For slot ``i`` at offset ``j`` of a group with ``n`` documents, ``r`` relevant and
        ``b`` relevant documents in earlier groups (McSherry and Najork, ECIR 2008):

        .. math::

            E[r_i \cdot \#\mathrm{rel}_{\le i}] = \frac{r}{n}
            \Bigl(b + 1 + (j - 1) \frac{r - 1}{n - 1}\Bigr)
        """
        st = tie_stats(batch.codes >= ctx.rel_min, batch.groups)
        n, r, b, j = st.size, st.relevant, st.before, st.offset
        pair = np.where(n > 1, (r - 1) / np.maximum(n - 1, 1), 0.0)
        term = (r / n) * (b + 1 + (j - 1) * pair)
        term = cut(term, self.k)
        return (term / ranks(term.shape[1])).sum(axis=1)


@register
@dataclass(frozen=True)
class Bpref(Metric):
    """Binary preference (Buckley and Voorhees, SIGIR 2004), trec_eval's form.

    .. math::

        \\mathrm{bpref} = \\frac{1}{R} \\sum_{r} \\Bigl(1 - \\frac{\\min(n_r, R)}{\\min(N, R)}\\Bigr)

    over retrieved relevant documents ``r``, with :math:`n_r` the judged non-relevant
    documents above ``r`` and ``N`` all judged non-relevant documents; the term is 1 when
    :math:`n_r = 0`. Unjudged documents are ignored.
    """

    name: ClassVar[str] = "bpref"
    aliases: ClassVar[tuple[str, ...]] = ()

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        _, rel, nonrel = _binary_judgements(batch, ctx, self.k)
        above = np.cumsum(nonrel, axis=1)  # at a relevant slot, equals the count above it
        big_r = batch.num_rel(ctx.rel_min)
        big_n = ((batch.judged >= 0) & (batch.judged < ctx.rel_min)).sum(axis=1)
        den = np.minimum(big_n, big_r)[:, None]
        frac = safe_div(np.minimum(above, big_r[:, None]), np.broadcast_to(den, above.shape))
        term = np.where(above > 0, 1.0 - frac, 1.0)
        return safe_div((term * rel).sum(axis=1), big_r)


@register
@dataclass(frozen=True)
class InfAP(Metric):
    """Inferred AP (Yilmaz and Aslam, CIKM 2006), trec_eval's form.

    Qrels entries with a negative grade are pooled but not judged (trec_eval's ``-2``
    code); retrieved documents absent from the qrels were not pooled and count as
    non-relevant. For a relevant document at 0-based position ``j > 0``, with
    :math:`r, n, u` the relevant, judged non-relevant and pooled-unjudged documents above:

    .. math::

        \\frac{1}{j+1} + \\frac{j}{j+1} \\cdot \\frac{r + n + u}{j} \\cdot
        \\frac{r + \\epsilon}{r + n + 2\\epsilon}, \\qquad \\epsilon = 10^{-5},

    and 1 at ``j = 0``; the sum is divided by R.
    """

    name: ClassVar[str] = "infAP"
    aliases: ClassVar[tuple[str, ...]] = ()

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        codes, rel, nonrel = _binary_judgements(batch, ctx, self.k)
        unj = codes == UNJUDGED
        r = np.cumsum(rel, axis=1) - rel
        n = np.cumsum(nonrel, axis=1) - nonrel
        u = np.cumsum(unj, axis=1) - unj
        j = np.arange(codes.shape[1], dtype=np.float64)[None, :]
        jj = np.maximum(j, 1.0)
        term = 1.0 / (j + 1.0) + (j / (j + 1.0)) * ((r + n + u) / jj) * (
            (r + INFAP_EPSILON) / (r + n + 2 * INFAP_EPSILON)
        )
        term = np.where(j == 0, 1.0, term)
        return safe_div((term * rel).sum(axis=1), batch.num_rel(ctx.rel_min))


def _binary_judgements(batch: LabelBatch, ctx: EvalContext, k: int | None) -> tuple[np.ndarray, ...]:
    """Codes cut at ``k`` and the masks of judged relevant and judged non-relevant slots
    (unjudged, not pooled and empty slots are neither), as bpref and infAP read them."""
    codes = cut(batch.codes, k, EMPTY)
    rel = codes >= ctx.rel_min
    return codes, rel, (codes >= 0) & ~rel


def _iprec(batch: LabelBatch, ctx: EvalContext, levels: np.ndarray, k: int | None) -> np.ndarray:
    """``(q, L)`` interpolated precision at recall levels (trec_eval ``iprec_at_recall``).

    The level's relevant count is ``round(level * R)`` (half away from zero); the value is
    the maximum precision at or below the rank where that many relevant documents have
    been seen, and 0 when the run never reaches it.
    """
    codes = cut(batch.codes, k, EMPTY)
    q, d = codes.shape
    rel = codes >= ctx.rel_min
    cum = np.cumsum(rel, axis=1)
    prec = cum / ranks(d)
    if d == 0:
        return np.zeros((q, len(levels)))
    present = codes != EMPTY
    last = np.where(present.any(axis=1), d - np.argmax(present[:, ::-1], axis=1), 0)
    prec = np.where(np.arange(d)[None, :] < last[:, None], prec, 0.0)
    suffix = np.maximum.accumulate(prec[:, ::-1], axis=1)[:, ::-1]
    found = cum[:, -1]
    big_r = batch.num_rel(ctx.rel_min)
    need = np.floor(levels[None, :] * big_r[:, None] + 0.5).astype(np.int64)
    target = np.maximum(need, 1)
    ok = (target <= found[:, None]) & (found[:, None] > 0)
    out = np.zeros((q, len(levels)))
    for c in range(len(levels)):  # a loop over recall levels, not documents
        pos = np.argmax(cum >= target[:, c : c + 1], axis=1)
        out[:, c] = np.where(ok[:, c], gather_rows(suffix, pos), 0.0)
    return out


@register
@dataclass(frozen=True)
class IPrec(Metric):
    """Interpolated precision at one recall level (trec_eval ``iprec_at_recall``).

    .. math::

        \\mathrm{iP}(\\rho) = \\max\\{P@i : \\mathrm{Recall}@i \\ge \\rho\\}

    with trec_eval's rounding of :math:`\\rho R` to a whole number of relevant documents.
    """

    recall: float = 0.0
    name: ClassVar[str] = "IPrec"
    shown_params: ClassVar[tuple[str, ...]] = ("recall",)  # IPrec(recall=0), as the names line translates it
    aliases: ClassVar[tuple[str, ...]] = ("iprec_at_recall", "iP")

    def _validate(self) -> None:
        if not 0.0 <= self.recall <= 1.0:
            raise ConfigError(("metrics", "IPrec", "recall"), f"must be in [0, 1], got {self.recall}")

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return _iprec(batch, ctx, np.array([self.recall]), self.k)[:, 0]


@register
@dataclass(frozen=True)
class IPrecAvg(Metric):
    """Mean interpolated precision over recall levels; the default is the 11-point average."""

    levels: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    name: ClassVar[str] = "IPrecAvg"
    aliases: ClassVar[tuple[str, ...]] = ("11pt", "11pt_avg", "11-pt_avg")

    def _validate(self) -> None:
        try:
            levels = tuple(float(x) for x in self.levels)
        except TypeError:
            raise ConfigError(("metrics", "IPrecAvg", "levels"), "must be a tuple of recall levels") from None
        if not levels or any(not 0.0 <= x <= 1.0 for x in levels):
            raise ConfigError(("metrics", "IPrecAvg", "levels"), "must be a non-empty tuple of levels in [0, 1]")
        object.__setattr__(self, "levels", levels)

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        return _iprec(batch, ctx, np.asarray(self.levels), self.k).mean(axis=1)
