r"""PBM-IPS: the counterfactual learning-to-rank estimator under the position-based model
(Wang, Bendersky, Metzler and Najork, SIGIR 2016; Joachims, Swaminathan and Schnabel,
WSDM 2017), in its policy-aware form for top-``k`` lists (Oosterhuis and de Rijke,
CIKM 2020).

Estimand and assumption
-----------------------
Clicks follow the position-based model: a document ``d`` shown at slot ``j`` for query
``q`` is clicked with probability :math:`\theta_j\alpha_{qd}`, independently of the other
slots. The target (a deterministic ranker with list :math:`t_q`) then has the value of an
*additive* reward :math:`R = c_0 + \sum_s w_s c_s`

.. math::

    V = c_0 + \mathbb E_q \sum_{s<k} w_s\,\theta_s\,\alpha_{q,t_q(s)}.

A click on ``d`` is evidence of :math:`\alpha_{qd}` discounted by how often ``d`` was
examined under the logger, :math:`\rho_{qd} = \sum_j \mu(d \text{ at } j \mid q)\,\theta_j`,
so each click on a document the target shows at slot :math:`s = t^{-1}(d)` counts

.. math::

    \hat V = c_0 + \frac1n \sum_{i=1}^n \sum_{j:\,c_{ij}=1,\ d_{ij}\in t_{q_i}}
        \frac{w_{s}\,\theta_{s}}{\rho_{q_i d_{ij}}}, \qquad s = t_{q_i}^{-1}(d_{ij}),

and 0 for clicked documents the target does not show in its top ``k``. Three choices of
:math:`\rho` (option ``click_propensity``):

``"auto"`` (default)
    ``"logger"`` when the log carries its logging policy with item-position marginals
    (exact), else ``"empirical"``. ``Terms.notes["click_propensity"]`` says which.
``"empirical"``
    :math:`\hat\rho_{qd} = \frac1{n_q}\sum_{i: q_i = q}\theta_{\mathrm{slot}_i(d)}` (0
    where ``d`` was not shown): the logger's position distribution replaced by its
    frequency in the log. With a deterministic logger it is exactly :math:`\theta_j` of
    the slot ``d`` always has, so the estimate is the classic
    :math:`\sum w_s\theta_s/\theta_j`. With a randomised logger it is *not* exactly
    unbiased: given the slots at which the log shows ``d`` for ``q``, the clicks on it
    sum to :math:`\alpha_{qd}\sum_i\theta_{\mathrm{slot}_i(d)}`, so the pair contributes
    exactly its true value :math:`n_q w_s\theta_s\alpha_{qd}` whenever the log shows it
    at least once, and 0 when it never does:

    .. math::

        \mathbb E[\hat V] - V = -\,\mathbb E_q \sum_s w_s\,\theta_s\,\alpha_{q,t_q(s)}\,
            P\big(t_q(s) \text{ never shown in the } n_q \text{ impressions of } q\big).

    The bias is not :math:`O(1/n_q)` but the (exponentially small in :math:`n_q`) chance
    of never showing a target document; it stays for tail queries at any log size when
    the logger rarely shows the target's documents. Its observable part,
    ``Terms.notes["target_mass_unseen"]`` (the target's examination mass, in reward
    units, on pairs this log never shows), bounds it in expectation (:math:`\alpha\le
    1`); a warning is added to ``notes["warnings"]`` when it exceeds half the standard
    error. Tested by enumerating every two-impression log of a query. Its interval is the
    delta-method one (below, "Interval of the empirical propensity").
``"logger"``
    The exact :math:`\rho_{qd} = \sum_j M_{qdj}\theta_j` from the logging policy's
    item-position marginals :math:`M_{qdj} = P(\text{slot } j \text{ shows } d \mid q)`
    (``data.logger.item_position_marginals(query) -> (n, m, k)``, document ids
    ``0..m-1``, as the policies of :mod:`simulations.policies` give): exactly unbiased
    under support level ``"any"`` (Oosterhuis and de Rijke 2020) with given
    examination probabilities, whatever the log size.
``"logged"``
    :math:`\rho = \theta_j` of the slot the click was logged at (Joachims et al. 2017's
    weight :math:`\theta_s/\theta_j`): exactly unbiased when the logger shows every
    document of the target's top ``k`` on *every* impression (in any order); when it
    shows one only sometimes, the estimate is scaled down by that probability.

Not defined for first-click rewards (the reciprocal rank or abandonment depend on the
documents above, which PBM-IPS does not reweight). Under cascade clicks the examination
of a slot depends on the documents above it, so the estimate is biased (declared).

The examination probabilities :math:`\theta` are given (option ``examination``, only
their ratios matter) or estimated from the log itself
(:mod:`onlineeval.estimators.position_bias`, option ``estimate_with``); an estimated
:math:`\hat\theta` makes the estimate consistent, not unbiased.

Interval of the empirical propensity: with :math:`E_{qd} = \sum_{i:\,q_i=q}\theta_{\mathrm{slot}_i(d)}
= n_q\hat\rho_{qd}` and :math:`C_{qd}` the clicks on ``d`` for ``q``, the estimate sums per query to
:math:`\sum_{i:\,q_i=q}\mathrm{num}_i = n_q\sum_s w_s\theta_s\hat\alpha_{q,t_q(s)}`,
:math:`\hat\alpha_{qd} = C_{qd}/E_{qd}` (0 for pairs never shown): a ratio whose error given
the slots is the click noise :math:`\hat\alpha_{qd}-\alpha_{qd} = \sum_{i:\,q_i=q}
(c_{id}-\alpha_{qd}\theta_{\mathrm{slot}_i(d)})/E_{qd}` only. The plug-in terms
:math:`\sum_{j:\,c_{ij}=1} r_{q_i d_{ij}}`, :math:`r_{qd} = w_s\theta_s/\hat\rho_{qd}`, treat
:math:`\hat\rho` as known and also carry the variation of :math:`\alpha_{qd}\theta_{\mathrm{slot}_i(d)}`
from where the logger happened to put ``d``, which the ratio cancels: their standard error
was 15-40% too large (over-coverage). The terms are therefore the linearised (delta-method)
ones, the influence of each impression on :math:`\hat\alpha` and on the query mean,

.. math::

    \mathrm{num}_i = \sum_{j:\,c_{ij}=1} r_{q_i d_{ij}}
        - \sum_{j\ \mathrm{shown}} r_{q_i d_{ij}}\,\hat\alpha_{q_i d_{ij}}\,\theta_j + a_{q_i},
    \qquad a_q = \sum_{s:\,E_{q,t_q(s)}>0} w_s\,\theta_s\,\hat\alpha_{q,t_q(s)},

(:math:`r = 0` for documents the target does not show). Per pair
:math:`\sum_{i:\,q_i=q}(c_{id}-\hat\alpha_{qd}\theta_{\mathrm{slot}_i(d)}) = C_{qd}-\hat\alpha_{qd}E_{qd} = 0`,
so :math:`\sum_i\mathrm{num}_i` and the estimate are exactly unchanged; the variance is the
clustered variance of these terms like every interval (the bootstrap resamples them too).
With estimated examination the sandwich term :math:`\psi_i` below is added to them
(:math:`\hat V(\hat\theta)-V \approx [\hat V(\theta)-V] + \nabla_\theta\hat V^\top(\hat\theta-\theta)`,
the two linearisations stacked). Measured (95% CLT interval, PBM users, the check world's 4
queries x 5 candidates x 3 slots and a 200-query Zipf(1) world of 6 candidates, logger uniform
with probability 0.8, else one of two target lists; 400 logs of 4,000 impressions, clicks per
query, band 368-390; before -> after, coverage and sd of the estimates / mean SE):

=============================  ===========================  ===========================
examination                    check world                  Zipf world
=============================  ===========================  ===========================
given                          396 -> 376 (0.81 -> 1.04)    395 -> 383 (0.78 -> 0.98)
``harvest``, sandwich          396 -> 380 (0.76 -> 1.00)    396 -> 382 (0.78 -> 0.99)
``em``, sandwich               396 -> 380 (0.76 -> 1.00)    394 -> 377 (0.78 -> 0.99)
``harvest``, ``ignore``        399 -> 389 (0.73 -> 0.93)    396 -> 385 (0.76 -> 0.95)
=============================  ===========================  ===========================

and on 200 logs of 20,000 impressions (band 181-197): given 199 -> 191 (0.72 -> 0.92; 187,
sd/SE 1.04, on a second log set), ``harvest``/``em`` with the sandwich 200 -> 194 (0.68 ->
0.90; 188, 1.03) in the check world, 197 -> 194 (0.83 -> 1.02) and 197 -> 193 (0.81 ->
1.01) in the Zipf world. (In the Zipf world at 4,000 impressions the estimates are 0.23-0.36
of their sd low: the never-shown pairs above.) ``tests/test_pbm_ips_empirical_interval.py``
checks the terms against the infinitesimal jackknife of the estimate and the coverage on the
check world's own logger (397 -> 380 of 400 given, 200 -> 189 of 200 with ``em``).
``"logger"`` and ``"logged"`` keep the plain terms (their propensity is not estimated).

Interval with estimated examination (option ``examination_error``): by default
(``"sandwich"``) each impression's term is :math:`\mathrm{num}_i + \psi_i` with
:math:`\psi_i = \nabla_\theta\hat V^\top\mathrm{IF}_i` the linearised error of
:math:`\hat\theta` (:mod:`onlineeval.estimators.position_bias.influence`;
:func:`value_gradient`): the stacked estimating equations of :math:`\hat\theta` and
:math:`\hat V` (M-estimation sandwich), clustered by user like every interval. The
estimate is unchanged (:math:`\sum_i\psi_i = 0`). ``"ignore"`` keeps the plug-in
interval that treats :math:`\hat\theta` as known. Measured
(``tests/test_pbm_ips_sandwich.py``): on logs whose examination rests on 10% swapped
impressions the 95% plug-in interval covered the exact value 197 times in 300 (203 before
the empirical propensity's terms were linearised), the sandwich 279 (band 275-294; known
examination 288); with ``em`` on 10% shuffled
impressions and users of 4 impressions, 176 and 190 of 200 (band 181-197). With given
examination nothing changes. ``Terms.notes["variance"]`` says which variance was used;
:func:`~onlineeval.estimators.position_bias.pipeline_bootstrap` is the resampling
alternative.
``Terms.notes`` records the examination used and whether it was estimated.

What is unbiased: given examination probabilities with ``"logger"`` (or ``"auto"`` on a
log with its logger), exactly; with ``"empirical"``, up to the never-shown mass above;
with estimated examination, consistent only. On the 400,000-impression direct log of
``configs/counterfactual.yaml`` with PBM users, the former default (``"auto"``
examination picking ``swap`` from about 50 incidental swap pairs per slot, each list seen
about once) was 8 standard errors off (3 to 43 on eight other seeds); ``auto`` now needs swap pairs to hold half
the log and otherwise harvests (``tests/test_estimators_at_scale.py``).

Cost: under ``"empirical"`` and ``"logger"`` every factor of a slot's weight depends on
its (query, document) pair only, so it is computed once per pair and read once per
logged slot; the numerator adds the clicked slots only. On the 10^6-impression top-10
log of ``benchmarks/bench_estimators.py`` (1,000 queries, 20 candidates) one estimate
took 0.25 s of CPU with given examination and 0.9-1.3 s with ``estimate_with="em"``
(sandwich included), against 2.5 s and 47 s before (per-impression EM), on a shared
2-core machine (measured in a separate run per version at about the same load). The
empirical propensity's linearised terms add one read per logged slot: on a 10^6-impression
top-10 log (1,000 queries, 20 candidates, given examination) an estimate took 0.55 s of CPU
against 0.45-0.50 s with the plug-in terms.

The code: the estimator and its options here; :mod:`~onlineeval.estimators.pbm_pairs` (the (query, document)
pairs of a log and a target under one code, their shows and the condition notes),
:mod:`~onlineeval.estimators.pbm_propensities` (the click propensities) and
:mod:`~onlineeval.estimators.pbm_interval` (the value's gradient in the examination and the empirical
propensity's linearised terms). Every name is importable from this module as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import ConfigError, InputError, must_be_one_of
from onlineeval.estimators.base import (
    Estimator,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)
from onlineeval.estimators.pbm_interval import _empirical_influence, value_gradient
from onlineeval.estimators.pbm_pairs import (  # noqa: F401  (re-exported: importable from here as before)
    RARE_SHOWS,
    _all_valid,
    _clicked_positions,
    _condition_notes,
    _Pairs,
    _query_shows,
    _slots_from_pairs,
    _target_pairs,
    _valid_positions,
    target_pair_shows,
    target_slots,
)
from onlineeval.estimators.pbm_propensities import (  # noqa: F401  (re-exported: importable from here as before)
    CLICK_PROPENSITIES,
    _empirical_rho,
    _logger_propensities,
    _logger_rho_pairs,
    _rho_pairs,
    click_propensities,
    resolve_click_propensity,
)
from onlineeval.estimators.position_bias import (  # noqa: F401  (_groups: re-exported as before)
    METHODS,
    PositionBiasEstimate,
    _groups,
    estimate_examination,
)
from onlineeval.estimators.position_bias._core import log_cache

__all__ = ["EXAMINATION_ERRORS", "PBMIPS", "RARE_SHOWS", "click_propensities", "target_pair_shows", "target_slots",
           "value_gradient"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: how an estimated examination's error enters the interval (option ``examination_error``)
EXAMINATION_ERRORS = ("sandwich", "ignore")


@register_estimator
@dataclass(frozen=True)
class PBMIPS(Estimator):
    """PBM-IPS (see the module docstring).

    Parameters
    ----------
    examination:
        ``k`` examination probabilities :math:`\\theta_0, \\dots, \\theta_{k-1}` (any
        positive multiple: only ratios matter; longer tuples are cut to the log's ``k``),
        or ``None`` (default) to estimate them from the log being evaluated.
    estimate_with:
        How to estimate them when ``examination`` is ``None``: ``"swap"``, ``"randtop"``,
        ``"harvest"`` (each distinct list of a query as its own ranker), ``"em"`` or
        ``"auto"`` (default; see
        :func:`~onlineeval.estimators.position_bias.estimate_examination`).
    click_propensity:
        ``"auto"`` (default: ``"logger"`` when the log has its logging policy, else
        ``"empirical"``), ``"empirical"``, ``"logger"`` or ``"logged"`` (see the module
        docstring).
    examination_error:
        With estimated examination: ``"sandwich"`` (default; its estimation error is in the
        interval, see the module docstring) or ``"ignore"`` (plug-in, treated as known).
        No effect with given ``examination``.
    """

    name = "pbm_ips"
    assumption = (
        "position-based clicks (examination depends on the slot only), additive rewards; support: every document "
        "the target shows in its top k can be shown somewhere in the logger's top k; exactly unbiased with known "
        "examination and the logger's propensities ('logger'); the 'empirical' propensity counts 0 for target "
        "documents the log never showed for a query (see notes target_mass_unseen); estimated examination: "
        "consistent only, its error in the interval by a sandwich (option examination_error)"
    )
    needs = ()
    rewards = ("additive",)
    support_level = "any"
    unbiased_under = (("pbm", "additive"),)
    biased_under = (("cascade", "additive"),)

    examination: tuple[float, ...] | None = None
    estimate_with: str = "auto"
    click_propensity: str = "auto"
    examination_error: str = "sandwich"

    def __post_init__(self) -> None:
        if self.examination is not None:
            try:
                theta = tuple(float(x) for x in np.asarray(self.examination, dtype=np.float64).reshape(-1))
            except (TypeError, ValueError, OverflowError):
                raise ConfigError(("estimator", "examination"), "must be a list of positive numbers") from None
            if not theta or not all(math.isfinite(x) and x > 0 for x in theta):
                raise ConfigError(("estimator", "examination"),
                                  f"must be positive finite examination probabilities, got {list(theta)}")
            object.__setattr__(self, "examination", theta)
        if self.estimate_with not in ("auto", *METHODS):
            raise ConfigError(("estimator", "estimate_with"), must_be_one_of(("auto", *METHODS), self.estimate_with))
        if self.click_propensity not in CLICK_PROPENSITIES:
            raise ConfigError(("estimator", "click_propensity"),
                              must_be_one_of(CLICK_PROPENSITIES, self.click_propensity))
        if self.examination_error not in EXAMINATION_ERRORS:
            raise ConfigError(("estimator", "examination_error"),
                              must_be_one_of(EXAMINATION_ERRORS, self.examination_error))

    def logger_needs(self) -> tuple[str, ...]:
        """``click_propensity="logger"`` reads the logging policy's item-position marginals."""
        return ("item_position_marginals",) if self.click_propensity == "logger" else ()

    @classmethod
    def check_instances(cls, world: Any) -> list[Estimator]:
        """In a world with known examination probabilities (PBM): one instance with them
        and the ``"empirical"`` propensity, one that estimates them from the log by
        ``harvest`` (consistent, not unbiased; at the suite's size, 24 logs of 2,500
        impressions, its bias is far below 4 SE) and, when the world's logger gives
        item-position marginals, one with them and the exact ``"logger"`` propensities.
        Otherwise one instance estimating them (``"auto"``)."""
        exam = getattr(world, "examination", None)
        if exam is not None:
            k = int(getattr(world, "k", len(exam)))
            theta = tuple(float(x) for x in np.asarray(exam, dtype=np.float64)[:k])
            out: list[Estimator] = [cls(examination=theta, click_propensity="empirical"),
                                    cls(estimate_with="harvest", click_propensity="empirical")]
            if hasattr(getattr(world, "logger", None), "item_position_marginals"):
                out.append(cls(examination=theta, click_propensity="logger"))
            return out
        return [cls()]

    def resolve_examination(self, data: LoggedData) -> tuple[FloatArray, dict[str, Any]]:
        """The ``(k,)`` examination used on ``data`` and the notes describing it."""
        if self.examination is not None:
            if len(self.examination) < data.k:
                raise InputError(f"pbm_ips: {len(self.examination)} examination probabilities given, "
                                 f"lists have {data.k} slots", data.source)
            theta = np.asarray(self.examination[: data.k], dtype=np.float64)
            return theta, {"examination": [float(x) for x in theta], "examination_estimated": False}
        est = self._estimated(data)
        theta = np.asarray(est.examination, dtype=np.float64)
        if not (np.isfinite(theta).all() and (theta > 0).all()):
            raise InputError(
                f"pbm_ips: the examination estimated by {est.method} is not positive at every slot "
                f"({[float(x) for x in theta]}); pass known examination probabilities", data.source)
        info = est.to_dict()
        info.pop("examination")
        return theta, {"examination": [float(x) for x in theta], "examination_estimated": True,
                       "examination_method": est.method, "estimation": info}

    def _estimated(self, data: LoggedData) -> PositionBiasEstimate:
        """The examination estimated from ``data`` by ``estimate_with``: estimated once per log
        and method (every target, and the two sides of a difference, read the same log), kept
        on the log object, which never changes."""
        cache = log_cache(data, "examination")
        if self.estimate_with not in cache:
            cache[self.estimate_with] = estimate_examination(data, self.estimate_with)
        return cache[self.estimate_with]  # type: ignore[no-any-return]

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        theta, notes = self.resolve_examination(data)
        kind = resolve_click_propensity(data, self.click_propensity)
        pairs = _target_pairs(data, target)
        w = reward.position_weights(data.k)
        slot_of = pairs.slot_of(data.k)
        sandwich = self.examination is None and self.examination_error == "sandwich"
        slots = None
        if kind in ("empirical", "logger"):
            # every factor of a slot's weight is a function of its (query, document) pair: computed
            # per pair, then read once per logged slot
            rho_pair = _rho_pairs(data, theta, pairs) if kind == "empirical" else _logger_rho_pairs(data, theta, pairs)
            s_pair = np.maximum(slot_of, 0)
            use = (slot_of >= 0) & (rho_pair > 0)
            ratio_pair = np.where(use, theta[s_pair] / np.where(use, rho_pair, 1.0), 0.0)
            ratio = pairs.per_position(data, ratio_pair, 0.0)
            # the numerator adds the clicked slots only (clicks are sparse)
            c_rows, c_cols = _clicked_positions(data)
            c_codes = pairs.codes_at(data, c_rows, c_cols)
            # float64 also without clicks (np.bincount of no values is int64, whatever the weights' type)
            num = np.bincount(c_rows, (ratio_pair * w[s_pair])[c_codes], data.n).astype(np.float64, copy=False)
            if kind == "empirical":
                num = _empirical_influence(data, theta, w, pairs, ratio_pair * w[s_pair], c_codes, num)
        else:
            rho_pair = None
            slots = pairs.per_position(data, slot_of, -1)
            rho = click_propensities(data, theta, kind)
            s = np.maximum(slots, 0)
            ratio = np.where(slots >= 0, theta[s] / rho, 0.0)
            num = (data.clicks * ratio * w[s]).sum(axis=1)
        notes["click_propensity"] = kind
        if self.examination is not None:
            notes["variance"] = "plug-in: the PBM-IPS terms with the given examination (no estimation error)"
        elif not sandwich:
            notes["variance"] = ("plug-in: the PBM-IPS terms with the estimated examination treated as known "
                                 "(its estimation error ignored; examination_error 'ignore')")
        else:
            est = self._estimated(data)
            if est.linearisation is None:
                raise InputError(f"pbm_ips: the examination estimate ({est.method}) carries no linearisation; "
                                 "use examination_error 'ignore' or pipeline_bootstrap", data.source)
            grad = value_gradient(data, theta, kind, w, pairs, rho_pair)
            num = num + est.linearisation(grad)
            notes["variance"] = (f"sandwich: the PBM-IPS terms plus the linearised examination estimate "
                                 f"({est.method}; stacked estimating equations, clustered like the terms)")
            notes["value_gradient"] = [float(x) for x in grad]
        if kind == "empirical":
            notes["variance"] += "; the terms linearised in the empirical propensity (delta method)"
        notes.update(self._condition_notes(data, pairs, theta, w, kind, slots, num))
        return Terms(num=num, weights=ratio, notes=notes)

    #: how far the log is from the conditions of the chosen propensity, and warnings where they fail
    #: (:func:`onlineeval.estimators.pbm_pairs._condition_notes`)
    _condition_notes = staticmethod(_condition_notes)
