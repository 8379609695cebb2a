"""User models from offline metrics through C/W/L (Moffat et al. 2013, 2017; Azzopardi et al. 2018).

A C/W/L user examines rank 1 and goes on from rank :math:`i` to :math:`i+1` with
probability :math:`C(i)`; an examined document of grade :math:`g` is clicked with
probability ``click[g]`` (the attractiveness map). :math:`C(i)` may depend on the labels of
the ranking (RR, ERR, INST) but not on clicks, so the examination probabilities are

.. math:: P(E_i) = \\prod_{j<i} C(j), \\qquad W(i) = P(E_i) \\big/ \\textstyle\\sum_j P(E_j).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from clickmodels.base import (
    ByGrade,
    ClickModel,
    ClickSample,
    DocParam,
    FloatArray,
    Impressions,
    SpecReader,
    register,
)
from clickmodels.cascade import Chain, ChainModel, _empty_one, _skip_fill
from onlineeval.errors import ConfigError, InputError
from onlineeval.metrics import CWL, DCG, ERR, INSQ, NDCG, RBP, Metric, P, parse_metric

__all__ = ["RBPUser", "MetricUser", "MetricMatch", "implied_cwl", "closest_metrics", "default_candidates"]


@register("rbp")
@dataclass(frozen=True, eq=False)
class RBPUser(ChainModel):
    """Rank-biased precision user (Moffat & Zobel, TOIS 2008): continue with probability ``p``.

    .. math:: P(E_i) = p^{i-1},\\qquad P(C_i) = p^{i-1}\\,\\mathrm{click}[g_i]

    Parameters
    ----------
    persistence:
        :math:`p` in [0, 1].
    attractiveness:
        Click probability of an examined document, by grade or per (query, doc).

    Spec: ``{"name": "rbp", "p": 0.8, "click": [...]}``.
    """

    persistence: float
    attractiveness: DocParam

    example_spec: ClassVar[Mapping[str, Any]] = {"name": "rbp", "p": 0.8, "click": [0.05, 0.3, 0.5, 0.7, 0.95]}

    def __post_init__(self) -> None:
        if not (0.0 <= float(self.persistence) <= 1.0):
            raise ValueError(f"persistence must be in [0, 1], got {self.persistence}")
        object.__setattr__(self, "persistence", float(self.persistence))

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> RBPUser:
        reader = SpecReader(spec, ("p", "click"))
        p = reader.number("p")
        click = reader.vector("click")
        assert click is not None
        return cls(p, ByGrade(click))

    def _chain(self, imp: Impressions) -> Chain:
        cont = _skip_fill(np.full(imp.shape, self.persistence), imp)
        return Chain(self.attractiveness.lookup(imp), cont, cont)

    def _grade_chain(self, k: int) -> Chain | None:
        if not isinstance(self.attractiveness, ByGrade):
            return None
        a = self.attractiveness.table(0.0)
        cont = np.full(a.shape, self.persistence)
        return Chain(a, cont, _empty_one(cont))


#: Metrics whose C/W/L continuation depends on the rank only (fast sampling path).
_RANK_ONLY = (RBP, P, DCG, NDCG, INSQ)


def _metric_has_cwl(metric: Metric) -> bool:
    if isinstance(metric, ERR):
        return True
    try:
        metric.cwl(np.zeros((1, 2), dtype=np.int64))
    except TypeError:
        return False
    return True


@register("metric")
@dataclass(frozen=True, eq=False)
class MetricUser(ChainModel):
    """The user model of an offline metric with a C/W/L profile (or ERR's cascade).

    The user examines rank 1 and goes on from rank :math:`i` with the metric's
    continuation :math:`C(i)` (computed from the labels of the list, so adaptive metrics
    such as RR, INST and INSQ work), independently of clicks; an examined document is
    clicked with probability ``click[g]``. For ERR the continuation is
    :math:`1 - R_i` with :math:`R_i = (2^{g_i} - 1)/2^{g_{max}}` (Chapelle et al. 2009).
    An empty slot counts as a position (gain 0), as in the metric.

    Expected utility (:meth:`expected_utility`) is the metric's value: for a C/W/L metric
    the expected rate of gain

    .. math::
        U = s \\, \\frac{E[\\sum_i \\mathbb{1}[E_i]\\, r_i]}{E[\\text{depth}]}
          = s \\sum_i W(i)\\, r_i ,

    where :math:`E[\\text{depth}] = \\sum_{t \\ge 1} \\prod_{j<t} C(j) = 1/W(1)` continues the
    metric's :math:`C` past the shown list and :math:`s` is the metric's ``cwl_scale``
    (:math:`Z_k` for DCG, :math:`Z_k/\\mathrm{IDCG}` for nDCG, else 1); for ERR
    :math:`U = E[\\sum_i \\mathbb{1}[E_i] R_i / i]`, the expected reciprocal rank of the
    satisfied stop (Moffat et al., TOIS 2017; Azzopardi et al., SIGIR 2019).

    Spec: ``{"name": "metric", "metric": "RBP(p=0.8)", "click": [...]}``; for ERR without
    ``gmax`` the top grade is that of the ``click`` table.
    """

    metric: Metric
    attractiveness: DocParam

    example_spec: ClassVar[Mapping[str, Any]] = {
        "name": "metric", "metric": "INST(T=2)", "click": [0.1, 0.3, 0.5, 0.7, 0.9]
    }

    def __post_init__(self) -> None:
        if not _metric_has_cwl(self.metric):
            raise ValueError(f"{self.metric} has no C/W/L user model")

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> MetricUser:
        reader = SpecReader(spec, ("metric", "click"))
        name = reader.raw("metric")
        if not isinstance(name, str):
            raise ConfigError(("metric",), "is required: a metric name with a C/W/L profile, e.g. 'RBP(p=0.8)', "
                              f"got {name!r}")
        try:
            metric = parse_metric(name)
        except ConfigError as exc:
            raise ConfigError(("metric",), exc.message) from None
        click = reader.vector("click")
        assert click is not None
        if isinstance(metric, ERR) and metric.gmax is None:
            metric = replace(metric, gmax=max(1, len(click) - 1))
        if not _metric_has_cwl(metric):
            raise ConfigError(
                ("metric",),
                f"{metric} has no C/W/L user model; use one of RBP, P@k, RR, DCG@k, nDCG@k, INSQ, INST or ERR",
            )
        return cls(metric, ByGrade(click))

    def _check(self, imp: Impressions) -> None:
        super()._check(imp)
        if imp.labels is None:
            raise InputError(f"the {self.metric} user needs labels (its continuation depends on them)")

    def continuation(self, labels: np.ndarray) -> FloatArray:
        """(n, k) the metric's continuation :math:`C(i)` for each list."""
        n, k = labels.shape
        if isinstance(self.metric, ERR):
            sat = self.metric.cascade(labels).satisfaction
            cont = np.zeros((n, k))
            cont[:, : sat.shape[1]] = 1.0 - sat[:, :k]
            return cont
        return np.asarray(self.metric.cwl(labels).continuation, dtype=np.float64)

    def _chain(self, imp: Impressions) -> Chain:
        assert imp.labels is not None
        c = self.continuation(imp.labels)
        return Chain(self.attractiveness.lookup(imp), c, c)

    def _grade_chain(self, k: int) -> Chain | None:
        # metrics whose continuation depends on the rank only (not on the labels)
        if not isinstance(self.attractiveness, ByGrade) or not isinstance(self.metric, _RANK_ONLY):
            return None
        cont = self.continuation(np.zeros((1, k), dtype=np.int64))[0][:, None]
        return Chain(self.attractiveness.table(0.0), cont, cont)

    def _utility_terms(self, labels: np.ndarray, judged: np.ndarray | None) -> FloatArray:
        """(n, k) per-rank utility weights ``u_i`` with ``U = sum_i P(E_i) u_i``."""
        n, k = labels.shape
        if isinstance(self.metric, ERR):
            sat = np.zeros((n, k))
            s = self.metric.cascade(labels).satisfaction
            sat[:, : s.shape[1]] = s[:, :k]
            return sat / np.arange(1, k + 1)[None, :]
        prof = self.metric.cwl(labels)
        w1 = prof.weight[:, 0] if k else np.zeros(n)
        gains = np.asarray(self.metric.cwl_gains(labels), dtype=np.float64)
        scale = np.ones(n)
        if hasattr(self.metric, "cwl_scale"):
            scale = np.asarray(self.metric.cwl_scale(labels, labels if judged is None else judged), dtype=np.float64)
        # W(1) = 1 / E[depth]; W(1) = 0 means the user never stops (no utility rate)
        return (scale * w1)[:, None] * gains

    def utility_weights(self, batch: Impressions | ArrayLike, judged: ArrayLike | None = None) -> FloatArray:
        """(n, k) per-rank utility ``u_i`` of an examination: :math:`U = \\sum_i P(E_i)\\, u_i`.

        ``u_i = s W(1) r_i`` for C/W/L metrics and :math:`R_i / i` for ERR (see the class docstring).
        """
        imp = self._prepare(batch)
        assert imp.labels is not None
        return self._utility_terms(imp.labels, None if judged is None else np.asarray(judged))

    def expected_utility(self, batch: Impressions | ArrayLike, judged: ArrayLike | None = None) -> FloatArray:
        """(n,) exact expected utility (the metric's value, see the class docstring).

        Parameters
        ----------
        batch:
            Labels (n, k) of the shown lists.
        judged:
            (n, m) grades of all judged documents per list (for nDCG's ideal DCG); default
            the shown labels.
        """
        imp = self._prepare(batch)
        assert imp.labels is not None
        exam = self._examination_probabilities(imp)
        j = None if judged is None else np.asarray(judged)
        return (exam * self._utility_terms(imp.labels, j)).sum(axis=1)

    def realised_utility(
        self, batch: Impressions | ArrayLike, sample: ClickSample, judged: ArrayLike | None = None
    ) -> FloatArray:
        """(n,) utility of each sampled session: :math:`\\sum_i \\mathbb{1}[E_i] u_i` over the
        examined slots; its mean is :meth:`expected_utility`."""
        imp = self._prepare(batch)
        assert imp.labels is not None
        j = None if judged is None else np.asarray(judged)
        return (sample.examined * self._utility_terms(imp.labels, j)).sum(axis=1)


# ---------------------------------------------------------------------------------- reverse


def implied_cwl(model: ClickModel, batch: Impressions | ArrayLike) -> CWL:
    """The C/W/L profile implied by a click model's examination probabilities.

    With :math:`E_i` the exact examination probability of rank :math:`i`:

    .. math::
        W(i) = \\frac{E_i}{\\sum_{j \\le k} E_j},\\qquad C(i) = \\frac{E_{i+1}}{E_i},\\qquad
        L(i) = \\frac{E_i - E_{i+1}}{E_1}

    (weights normalised over the shown list; :math:`C(k)` is the model's own continuation
    for cascade-family models and 0 otherwise, i.e. the list ends). For cascade-family
    models :math:`C` equals the chain's :math:`P(E_{i+1} \\mid E_i)`; for PBM it is the
    ratio of examination probabilities and may exceed 1 when they are not decreasing.

    Returns
    -------
    onlineeval.metrics.CWL
        ``continuation``, ``weight``, ``last``, each (n, k).
    """
    exam = model.examination_probabilities(batch)
    n, k = exam.shape
    if isinstance(model, ChainModel):
        last_c = model.continuation_probabilities(batch)[:, -1] if k else np.zeros(n)
    else:
        last_c = np.zeros(n)
    nxt = np.concatenate([exam[:, 1:], (exam[:, -1] * last_c)[:, None]], axis=1) if k else exam
    cont = np.divide(nxt, exam, out=np.zeros_like(exam), where=exam > 0)
    total = exam.sum(axis=1, keepdims=True)
    weight = np.divide(exam, total, out=np.zeros_like(exam), where=total > 0)
    first = exam[:, :1] if k else np.ones((n, 1))
    last = np.divide(exam - nxt, first, out=np.zeros_like(exam), where=first > 0)
    return CWL(cont, weight, last)


class MetricMatch(NamedTuple):
    """How close a metric's user is to a click model's implied weights."""

    metric: str
    distance: float


def default_candidates(depth: int) -> list[str]:
    """Metric names compared by :func:`closest_metrics` for lists of ``depth`` slots."""
    names = [f"RBP(p={p / 100:.2f})" for p in range(5, 100, 5)]
    names += [f"P@{k}" for k in range(1, depth + 1)]
    names += [f"DCG@{depth}", "RR"]
    names += [f"INSQ(T={t})" for t in (1, 2, 3, 5)] + [f"INST(T={t})" for t in (1, 2, 3, 5)]
    return names


def _window_weights(metric: Metric, labels: np.ndarray) -> FloatArray:
    """The metric's attention over the shown list: :math:`\\prod_{j<i} C(j)` normalised over
    the window (proportional to :math:`W(i)`, and defined even when the user never stops)."""
    cont = np.asarray(metric.cwl(labels).continuation, dtype=np.float64)
    n, k = cont.shape
    reach = np.ones((n, k))
    if k > 1:
        np.cumprod(cont[:, :-1], axis=1, out=reach[:, 1:])
    return reach / reach.sum(axis=1, keepdims=True)


def closest_metrics(
    model: ClickModel,
    batch: Impressions | ArrayLike,
    candidates: Sequence[str | Metric] | None = None,
    labels: ArrayLike | None = None,
) -> list[MetricMatch]:
    """Rank offline metrics by how closely their users match the model's attention.

    Distance is the mean over lists of the total-variation distance between the model's
    implied weights :math:`W(i)` (:func:`implied_cwl`) and the metric's C/W/L weights,
    both normalised over the shown list:
    :math:`\\tfrac12 \\sum_i |W_{model}(i) - W_{metric}(i)|` (0 = same user, 1 = disjoint).

    Parameters
    ----------
    model:
        Any click model, e.g. one fitted on logs.
    batch:
        Representative lists the model can score: a label matrix (n, k) or
        :class:`~clickmodels.base.Impressions` (``query``/``docs`` for a fitted model).
    candidates:
        Metric names or objects with a C/W/L profile; default :func:`default_candidates`.
    labels:
        (n, k) grades for the adaptive metrics (RR, INST, INSQ), whose weights depend on
        them; default the batch's labels, or no relevant document when it has none.
    """
    from clickmodels.base import as_impressions

    imp = as_impressions(batch)
    if labels is not None:
        lab = np.asarray(labels)
        if lab.shape != imp.shape:
            raise InputError(f"labels must have the batch's shape {imp.shape}, got {lab.shape}")
    elif imp.labels is not None:
        lab = imp.labels
    else:
        lab = np.where(imp.valid, 0, -1)
    mine = implied_cwl(model, imp).weight
    out = []
    for cand in candidates if candidates is not None else default_candidates(imp.shape[1]):
        metric = parse_metric(cand) if isinstance(cand, str) else cand
        if isinstance(metric, ERR) or not _metric_has_cwl(metric):
            raise ConfigError(("candidates",), f"{metric} has no static C/W/L weights to compare")
        theirs = _window_weights(metric, lab)
        out.append(MetricMatch(str(metric), float(0.5 * np.abs(mine - theirs).sum(axis=1).mean())))
    return sorted(out, key=lambda m: m.distance)
