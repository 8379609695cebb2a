r"""The direct method (DM): a click model fitted on the log predicts the target's reward.

Estimand: the target's online value :math:`V(\pi)` of a per-slot reward (see
:mod:`onlineeval.estimators.base`). The *reward model* is a click model from
:mod:`clickmodels` fitted by MLE / EM on the log itself (query, shown list, clicks) or
given ready-made. For every logged impression the model's expected reward of the
*target's* list for that query is averaged:

.. math::

    \hat V_{\mathrm{DM}} = c_0 + \frac1n \sum_{i=1}^n \sum_{j=0}^{k-1} \hat q_j(q_i, \mathbf t(q_i)),

with :math:`\mathbf t(q)` the target's list and the model's expected slot rewards

.. math::

    \hat q_j(q, \mathbf t) = w_j\, \hat P(C_j = 1 \mid q, \mathbf t)
        \quad\text{(additive)}, \qquad
    \hat q_j(q, \mathbf t) = w_j\, \hat h_j \prod_{l<j} (1 - \hat h_l),\ \
    \hat h_j = \hat P(C_j = 1 \mid C_{<j} = 0, q, \mathbf t) \quad\text{(first click)}.

The first-click form is exact for every click model: the first click is at ``j`` iff
no slot above is clicked and ``j`` is, and the chain rule over the conditional click
probabilities given no click above gives that probability.

Assumption: the click model is right (its family holds and its parameters are the
truth); a fitted model is consistent when its family holds and every target document
was shown often enough for its query (documents never logged for a query get the
fitted model's default for unseen pairs; their number, and the share of target slots
whose pair was shown fewer than :data:`~onlineeval.estimators.model_based.RARE_SHOWS` times, are in the diagnostics'
notes). Models are fitted by maximum likelihood (pseudo-count 0; DCM and SDBN by EM, whose
last-click closed forms, not the maximum likelihood, are used only with ``method="closed_form"``:
on the 200 logs of 2,500 impressions of the DCM check world DM with the closed form was 0.18 low
in clicks per query, 190 SE, and with EM within 1.5 SE of the exact values,
``tests/test_dm_dcm_world.py``; the estimate's ``assumption`` and ``notes["fit"]`` say which fit
was used). Beta(1, 1)
pseudo-counts pull rarely shown pairs towards relevance 1/2 and biased V(B) - V(A) on
the 400,000-impression log of ``configs/counterfactual.yaml`` by +0.0044 to +0.0076
(8 seeds; truth 0.0233, SE 0.0013).

Interval: for a PBM fitted on the whole log (the default) or a UBM the per-impression terms are
linearised in the fitted relevances and examination (see :func:`_pbm_correction`: the
maximum likelihood's influence function), so the CLT interval carries their fitting error;
over 8 such logs the estimates of clicks per query spread by 0.0012 where the former plug-in
SE said 0.00013.
A cascade model (``cm``) fitted on the whole log is linearised likewise
(:func:`_cm_correction`: its closed-form relevances are clicks over examinations down to the
first click): on 200 logs of 4,000 impressions of the cascade check world its interval covered
186-192 for 190 nominal (SE 0.96-1.00 of the SD; held fixed: 24-34, SE 0.07-0.09 of the SD).
First-click rewards (reciprocal rank, abandonment) are linearised too (the derivative of the
first click's chance at each slot in the click probabilities above it, :func:`_click_gradient`):
over 1,000 logs of 4,000 impressions of the PBM check world the interval covered the exact
value 943-955 times for 950 nominal (clicks per query, reciprocal rank, abandonment; ideal and
shuffled list; band 936-963), its SE 0.98-1.00 times the estimates' SD (the plug-in one: 16-26 of
200 for 190 nominal). With the examination held fixed (until 2026-12-06) the SE was 1.19-1.22
times the SD for the ideal list (conservative) and 0.88 for the shuffled one (915 of 1,000
covered): the fitted examination's error and the relevances' offset each other for one list and
add up for the other. Its SE is right, but on sparse logs the
maximum-likelihood relevances of rarely shown pairs bias the value: over 400 logs of
4,000 impressions of 200 Zipf-distributed queries (PBM users) it was 0.71 SE off and
covered 350 of 400 (band 368-390), in band at 20,000 impressions (the coverage audit of
2026-12-02, the examination then held fixed in the SE); where the share of the target's slots on such pairs times
the square root of the impressions reaches 0.5 a warning says so (:func:`rare_pairs_warning`, with its
measurements). A DCM fitted by EM (its default) is linearised by its observed information
(:mod:`~onlineeval.estimators.dcm_linearisation`): over
1,000 logs of 4,000 impressions of the DCM check world 946-957 covered for 950 nominal (SE
1.00-1.03 of the SD; held fixed, until 2026-12-06, 71 of 400, 380 nominal), and an SDBN by EM
likewise (its satisfaction per pair as the continuation: 377-384 of 400 on an SDBN world), and a DBN
or CCM (:mod:`~onlineeval.estimators.chain_linearisation`, the shared continuations too: 940-959 of 1,000 on a DBN
world, 933-956 on a CCM world; held fixed 105-138 and 34-126), and the CTR models (``dctr``, ``rctr``, ``gctr``,
:func:`_ctr_correction`: 937-952 of 1,000; held fixed 134-171 for ``dctr``, 0-2 for the others, whose plug-in SE is
0). For DCM's or SDBN's closed form or
cross-fitting it is a CLT interval *given the fitted model*, which excludes the fitting
error; ``notes["warnings"]`` says so (a cascade model cross-fitted over two folds of the users of
each of 100 logs of 2,000 impressions of the cascade check world, reciprocal rank: 20 covered
for 95 nominal). The
bootstrap interval (``estimate(n_boot=...)``, the CLI's ``--bootstrap``, a simulation's
``bootstrap``) fits the model again on every resample of the users
(:meth:`DirectMethod.bootstrap_estimates`), so it carries the fitting error whatever the
model (96 of those 100; ``tests/test_dm_bootstrap.py``); a model object given ready-made
is held fixed, as it should be.

Targets must be deterministic rankers (``target.rankings``); lists longer than the
logged ``k`` slots are cut to ``k``, shorter ones padded with empty slots.

Cost: one O(n k) pass indexes the log's (query, document) pairs and counts the fitted
model's sufficient statistics (shows and clicks per (pair, rank), per (pair, rank,
previous click) for UBM, per pair down to the first / last click for CM / DCM's closed form); EM
then costs O(distinct keys) per iteration instead of O(n k) (see
:mod:`onlineeval.estimators.model_fit`; DBN, CCM, and DCM and SDBN by EM, their default, are
fitted per session by :mod:`clickmodels.estimation`). The target's expected reward is computed
once per (distinct query, target list) and weighted by the query's frequency; the
linearised PBM / UBM terms take one more O(n k) pass. On 10^6 logged top-10 impressions
(``benchmarks/bench_dm.py``, one core) the PBM direct method takes 0.32 s of CPU (4.6x plain
IPS's 0.07 s on the same log, 2026-12-06, with the examination's terms; their first version
renumbered the examination indices by ``np.unique``, a sort of every position: 1.1 s); the
former per-slot fit took 8.2 s on 10^5 impressions (25x the aggregated path there) and about
a minute on 10^6. DCM and SDBN by EM (their default, per
session) cost far more than DCM's aggregated closed form: on that 10^6 log dm with dcm took 74.5 s
of CPU against 0.40 s, with sdbn 110 s; on a 27,848-impression top-5 log 1.06 s (dcm, 69
iterations) and 2.1 s (sdbn, 116) against 14 ms, so a bootstrap that refits dcm on 400 resamples
costs about 7 minutes per log. A warm start from the closed form did not cut the iterations (see
``benchmarks/bench_dm.py``).

:class:`ClickModelEstimator`, the shared base of the model-based estimators (this one,
:mod:`~onlineeval.estimators.dr`, :mod:`~onlineeval.estimators.cascade_dr`: model options, fitting, optionally
cross-fitted over ``folds``, and the expected slot rewards), is in :mod:`onlineeval.estimators.model_based`.

References
----------
M. Dudík, J. Langford, L. Li, "Doubly robust policy evaluation and learning", ICML 2011
(the direct method as the regression baseline). A. Chuklin, I. Markov, M. de Rijke,
*Click Models for Web Search*, 2015 (the click models and their estimation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from onlineeval.errors import InputError
from onlineeval.estimators.base import (
    BOOTSTRAP_PROGRESS,
    FloatArray,
    IntArray,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)
from onlineeval.estimators.chain_linearisation import chain_correction
from onlineeval.estimators.dcm_linearisation import dcm_correction
from onlineeval.estimators.dm_dr_check import DR_CHECK_Z
from onlineeval.estimators.model_based import (  # the shared base (importable from here, as before it moved)
    CLOSED_FORM_NOTE,
    EM_BY_DEFAULT,
    EM_MAX_ITER,
    EM_OR_CLOSED_FORM,
    FITTABLE,
    RARE_SHOWS,
    ClickModelEstimator,
    Predictions,
    _rare_notes,
    expected_slot_rewards,
    slot_rewards_from,
    target_lists,
    target_slot_values,
)

__all__ = ["CLOSED_FORM_NOTE", "EM_BY_DEFAULT", "EM_MAX_ITER", "EM_OR_CLOSED_FORM", "FITTABLE", "RARE_SHOWS",
           "RARE_SLOT_SCALE", "ClickModelEstimator", "DirectMethod", "Predictions", "expected_slot_rewards",
           "rare_pairs_warning", "slot_rewards_from", "target_lists"]


def _families(unbiased: str, biased: str) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """``("cascade dcm:first_click", "pbm dcm:additive")`` -> the pairs of ``Estimator.unbiased_under`` and
    ``biased_under``: a family alone stands for both reward kinds."""
    def pairs(text: str) -> tuple[tuple[str, str], ...]:
        out: list[tuple[str, str]] = []
        for item in text.split():
            fam, _, kind = item.partition(":")
            out += [(fam, k) for k in ((kind,) if kind else ("additive", "first_click"))]
        return tuple(out)
    return pairs(unbiased), pairs(biased)


#: per click model fitted on the log by name: the click families under which the direct method is consistent (the
#: model's own and those it nests) and those under which it is biased; a pair in neither is not declared. A cascade
#: model nests nothing else, but a DCM user behaves as a cascade one down to the first click, so first-click rewards
#: are consistent under DCM clicks (the coverage audit: reciprocal rank 95 of 100 covered); a DCM nests the cascade
#: (continuation 0); UBM nests PBM (examination by rank alone) and the cascade (examined until a click, never after);
#: DBN, SDBN and CCM nest the cascade (satisfied by every click); the CTR models hold no examination at all. None of
#: UBM, DBN, SDBN and CCM has DCM's continuation after a click by rank, so under DCM clicks their additive values
#: are off (16 logs of 20,000 impressions of the DCM world: UBM +2.3% / -1.7%, DBN +1.4%, SDBN +1.3%, CCM +1.5%,
#: beyond 4 SE for a target). First-click values under DCM clicks, over 16 logs of 120,000 impressions: DBN's and
#: CCM's reciprocal rank +0.16% (z 6.2) and abandonment -1.7% (z -4.6) for the ideal list: biased (their
#: misspecified fit moves the relevances too); SDBN's within 2.2 SE (not declared: no argument that it is
#: consistent).
MODEL_FAMILIES: dict[str, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {
    "pbm": _families("pbm", "cascade dcm"),  # the class's declarations (the default model: the conformance suite's)
    "cm": _families("cascade dcm:first_click", "pbm dcm:additive"),
    "dcm": _families("cascade dcm", "pbm"),
    "ubm": _families("pbm cascade dcm:first_click", "dcm:additive"),
    "dbn": _families("cascade", "pbm dcm"),
    "sdbn": _families("cascade", "pbm dcm:additive"),
    "ccm": _families("cascade", "pbm dcm"),
    "dctr": _families("", "pbm cascade dcm"),
    "rctr": _families("", "pbm cascade dcm"),
    "gctr": _families("", "pbm cascade dcm"),
}


@register_estimator
@dataclass(frozen=True)
class DirectMethod(ClickModelEstimator):
    """The direct method: the mean of the reward model's expected reward of the target's
    list (see the module docstring). Options as in :class:`ClickModelEstimator`
    (default: a PBM fitted by EM on the log)."""

    name = "dm"
    assumption = (
        "the click model is right (fitted: its family holds; consistent, by maximum likelihood, when every target "
        "(query, document) pair is shown often; see notes rare_slot_share); deterministic target"
    )
    needs = ()
    support_level = "any"
    unbiased_under, biased_under = MODEL_FAMILIES["pbm"]

    def bias_families(self) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
        """The click families (of :data:`~onlineeval.estimators.bias_advice.FAMILIES`) under which a direct method
        with this click model fitted on the log is consistent, and those under which it is biased
        (:data:`MODEL_FAMILIES`; a PBM's are the class's, which the conformance suite checks); a model given
        ready-made: none declared (whether it is right is not known)."""
        if not isinstance(self.model, str):
            return (), ()
        return MODEL_FAMILIES.get(self.model_name, ((), ()))

    def linearised(self, reward: Reward) -> bool:
        """Whether the CLT interval carries the fit's error to first order (a PBM, UBM or cascade model fitted on the
        whole log, every reward: :func:`_pbm_correction`, their relevances and examination, and
        :func:`_cm_correction`; a DCM or SDBN fitted on it by EM, the maximum likelihood:
        :func:`~onlineeval.estimators.dcm_linearisation.dcm_correction`, a DBN or CCM likewise:
        :func:`~onlineeval.estimators.chain_linearisation.chain_correction`; a CTR model: :func:`_ctr_correction`);
        otherwise (DCM's and SDBN's closed forms, cross-fitting) it holds the fitted model fixed.
        (``reward``: the interface's; both reward kinds are linearised.)"""
        entry = _LINEARISED.get(self.model_name)
        return (entry is not None and isinstance(self.model, str) and self.folds == 1
                and (self.fits_by_em or not entry[2]))

    def clt_holds_fixed(self, reward: Reward) -> str | None:
        """The click model fitted on the log, unless the CLT interval is linearised (:meth:`linearised`: a PBM or a
        cascade model fitted on the whole log)."""
        from onlineeval.estimators.intervals import MODEL_HELD

        return MODEL_HELD if self.refits_in_bootstrap and not self.linearised(reward) else None

    def value_checks(self, data: LoggedData, target: Target, reward: Reward, value: float,
                     se: float, terms: Terms) -> dict[str, Any]:
        """The value checked against the doubly robust ``dr`` on the same log
        (:mod:`~onlineeval.estimators.dm_dr_check`: their paired difference measures the model's bias for an
        independent-click model, an additive reward and a log with item propensities)."""
        from onlineeval.estimators.dm_dr_check import dm_dr_check

        return {**super().value_checks(data, target, reward, value, se, terms),
                **dm_dr_check(self, data, target, reward, terms)}

    @property
    def refits_in_bootstrap(self) -> bool:
        """True when the model is fitted on the log (given by name): :meth:`bootstrap_estimates` then fits it again
        on every resample (:meth:`resampled_values`), so the bootstrap interval carries the fitting error, which
        the CLT interval of a model held fixed leaves out."""
        return isinstance(self.model, str)

    def resampled_values(self, data: LoggedData, targets: list[Target], reward: Reward | str,
                         multiplicity: IntArray) -> FloatArray:
        """``(len(targets),)`` values (without the reward's offset) on the log whose row ``i`` appears
        ``multiplicity[i]`` times, the model fitted again on it: one resample of the whole pipeline (the rows of a
        cluster drawn twice appear twice and stay one user, so cross-fitting's folds keep them together)."""
        rw = self._reward(reward, data.k)
        rows = np.repeat(np.arange(data.n), np.asarray(multiplicity, dtype=np.int64))
        if rows.size == 0:
            raise InputError(f"{self.name}: an empty bootstrap resample", data.source)
        sub = LoggedData(data.query[rows], data.shown[rows], data.clicks[rows],
                         user=None if data.user is None else data.user[rows], source=data.source, lists_checked=True)
        return np.array([float(self.predictions(sub, t, rw).target_sums().mean()) for t in targets])

    def bootstrap_estimates(self, data: LoggedData, targets: list[Target], reward: Reward | str, n_boot: int,
                            rng: np.random.Generator) -> FloatArray | None:
        """With the model fitted on the log (:attr:`refits_in_bootstrap`): ``(n_boot, len(targets))`` estimates of
        cluster resamples (``data.user``; rows without it) of the log, the model fitted again on each
        (:meth:`resampled_values`; the same resample for every target); ``None`` with a given model (its terms are
        fixed per row and the plain cluster bootstrap of their sums is the same).

        Holding the fitted model fixed, as a bootstrap of the per-user sums does, left its error out: over 200 logs
        of 4,000 impressions of the cascade world of :mod:`onlineeval.estimators.checks` (a cascade model fitted,
        reciprocal rank), that interval and the CLT one covered the exact value 25 times for 190 nominal. Cost: one
        fit per resample: about 1.5 ms for a cascade model in closed form on 4,000 impressions, 70-95 ms for a
        PBM by EM (pseudo-count 0, about 316 iterations, compiled step) on one replicate's 27,848-impression log
        of ``configs/counterfactual.yaml``, so 400 resamples add about 30-40 s to each replicate of a simulation
        (its progress is reported through :data:`~onlineeval.estimators.base.BOOTSTRAP_PROGRESS`)."""
        if not self.refits_in_bootstrap:
            return None
        from onlineeval.stats import cluster_resample_counts

        inv, g = data.user_groups
        out = np.empty((int(n_boot), len(targets)))
        report = BOOTSTRAP_PROGRESS.get()
        names = ", ".join(str(getattr(t, "name", "target")) for t in targets)
        what = f"{self.name} ({self.model_name} fitted again on every resample) of {names}"
        for start, _, counts in cluster_resample_counts(rng, g, int(n_boot)):
            for i, c in enumerate(counts):
                out[start + i] = self.resampled_values(data, targets, reward, c.astype(np.int64)[inv])
                if report is not None:
                    report(what, start + i + 1, int(n_boot))
        return out

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        linearise = self.linearised(reward)
        pred = self.predictions(data, target, reward)
        notes: dict[str, Any] = {**self.model_notes(data, pred), **_rare_notes(data, pred.t_uq)}
        rare = rare_pairs_warning(self, notes, data.n)
        if rare is not None:
            notes.setdefault("warnings", []).append(rare)
        num = pred.target_sums()
        if linearise:
            correction, what, _ = _LINEARISED[self.model_name]
            corr = correction(self.fit_model(data), data, target, reward)
            notes["correction_mean"] = float(corr.mean())
            num = num + corr - corr.mean()
            notes["se"] = f"linearised: includes the fitted {what}, the value is the model's"
        else:  # a model fitted on the log: the estimate's warnings say so (clt_holds_fixed), or, with a bootstrap,
            # that its se is the bootstrap's (the model fitted again in each resample)
            notes["se"] = "delta method: given the fitted model, excluding its fitting error"
        return Terms(num=num, weights=None, notes=notes)


#: a direct method fitted on the log warns that its value may be biased beyond its interval where the share of the
#: target's slots on pairs the log shows fewer than RARE_SHOWS times, times the square root of the log's impressions,
#: reaches this (:func:`rare_pairs_warning`)
RARE_SLOT_SCALE = 0.5


def rare_pairs_warning(est: ClickModelEstimator, notes: dict[str, Any], n: int) -> str | None:
    r"""The warning of a direct method whose click model is fitted on the log (by name) when the share :math:`s` of
    the target's slots (over impressions, ``notes["rare_slot_share"]``) holding (query, document) pairs the log shows
    fewer than :data:`~onlineeval.estimators.model_based.RARE_SHOWS` times satisfies :math:`s \sqrt n \ge`
    :data:`RARE_SLOT_SCALE` (``n`` the log's impressions), else ``None`` (and for a model given ready-made, which no
    log's sparseness biases).

    There the maximum-likelihood fit rests on a handful of impressions per pair (relevances at their bounds, the
    examination or continuations fitted alongside those many parameters), which biases the value, while the
    interval (linearised or bootstrapped) measures its spread only. The bias goes with :math:`s` and the standard
    error with :math:`1/\sqrt n`, so the bias in standard errors goes with :math:`s \sqrt n`, and a fixed share
    would be silent exactly at the sizes where it matters most. Measured on logs of Zipf-distributed queries of 10
    candidates, PBM users, a top 5 logged as production's order with 30% uniformly random lists
    (``tests/test_dm_rare_pairs.py``; :math:`s \sqrt n`, then the mean error in SEs): 200 queries, 40 logs per size,
    4,000 to 50,000 impressions: 11.8, -3.0; 4.3, -1.3; 1.3, -0.9; 0.45, -0.5; 0.15, -0.25; 0.015, -0.1; 0, +0.5 (+-
    0.16); 20,000 queries, 6-12 logs: 10^6 impressions (7.3% of the slots) 72, -17; 2.5 million (0.65%) 10.3, -5.2
    (no interval covered). So the error was about 0.25-1 times :math:`s \sqrt n` SEs there; on other worlds it can
    be less: 200 queries of 6 candidates, 3 slots, 80% uniform logging (the bootstrap tests' world), reciprocal
    rank, 60 logs: 4,000 impressions :math:`s \sqrt n` 16.5, -0.9 SE (87% covered); 20,000: 2.6, +0.2; so the
    warning says 'may'."""
    share = notes.get("rare_slot_share")
    if not isinstance(est.model, str) or not isinstance(share, float) or not share * math.sqrt(n) >= RARE_SLOT_SCALE:
        return None
    return (f"{est.name} ({est.model_name} fitted on the log): {share:.2%} of the target's slots hold (query, "
            f"document) pairs the log shows fewer than {notes.get('rare_shows', RARE_SHOWS)} times (that share x "
            f"sqrt({n} impressions) = {share * math.sqrt(n):.3g} >= {RARE_SLOT_SCALE:g}); the fit rests on a handful "
            "of impressions there, which may bias the value beyond its interval (measured on sparse logs of PBM "
            "users: low by up to about that product in standard errors, 0.05-1 times it across the worlds measured; "
            "17 SE at 10^6 impressions with 7% of the slots). A doubly robust estimator (dr, dr_list, cascade_dr) "
            "corrects the model's bias; or use a longer log. For an independent-click model (pbm, dctr, rctr, "
            "gctr), an additive reward and a log with item propensities, the notes' dr_check measures this bias "
            f"against dr on the log itself (warned from {DR_CHECK_Z:g} SE)")


def _pbm_correction(mdl: Any, data: LoggedData, target: Target, reward: Reward) -> FloatArray:
    r"""Per-impression linearisation of a fitted PBM's or UBM's DM value in its relevances and its examination.

    The model's maximum likelihood :math:`(\hat\alpha, \hat\gamma)` is an M-estimator (its score equations), so
    to first order :math:`\hat V - V \approx \frac1n\sum_i \nabla V^\top A^{-1} s_i` with :math:`A` the
    information and :math:`s_i` impression ``i``'s scores (Stefanski and Boos 2002): the influence of impression
    ``i`` on the relevances of the pairs it shows and on the examination parameters its slots use, weighted by the
    value's gradient in each. Both models click a slot with probability :math:`h = \gamma_e\,\alpha_{qd}` given
    what happened above, ``e`` the slot's examination parameter: its rank (PBM) or its rank and the previous
    click's (UBM, :func:`_ubm_click_gradient`), so both are the same likelihood over (pair, examination index)
    cells, which :func:`~onlineeval.estimators.position_bias.influence.pair_linearisation` (the examination
    estimators' own, for PBM-IPS) linearises, the relevances eliminated block by block and the examination
    normalised to rank 0's (the value depends on the products :math:`\gamma_e\alpha_{qd}` only). The value's
    gradient in each target slot's click probabilities, :math:`\partial V_q/\partial h`, weighted by the
    query's impressions, gives :math:`\partial V/\partial\alpha_{qd} = \sum \gamma_e\,\partial V/\partial h`
    and :math:`\partial V/\partial\gamma_e = \sum \alpha\,\partial V/\partial h`. Pairs never clicked or
    clicked surely (fitted probability within :data:`~onlineeval.estimators.position_bias.influence.BOUNDARY`
    of 1), and examination parameters the log never uses, are held fixed. The terms' mean is 0 at the maximum
    (recorded as ``notes["correction_mean"]`` and removed, so the value stays the model's); they add the fitted
    model's variance to the CLT interval.

    Until 2026-12-06 a PBM's examination was held fixed (the relevances' part alone, in their moment form
    :math:`C_{qd}/E_{qd}`) and a UBM's whole fit: over 1,000 logs of 4,000 impressions of the PBM check world
    (:func:`~onlineeval.estimators.exact_worlds.check_world`) the PBM's SE was 1.19-1.22 times the estimates' SD
    for the ideal list and 0.88 for the shuffled one (clicks per query: 915 of 1,000 covered, band 936-963); now
    0.98-1.00 for both lists and both reward kinds, 943-955 covered. A UBM fitted on 300 such logs (it nests the
    PBM): 277-287 of 300 covered, SE 0.98-1.04 of the SD (held fixed: 28-38, SE 0.06-0.08); on 1,000 logs of a UBM
    world (its examination depends on the previous click; ``tests/test_dm_linearised_intervals.py``) 939-964 of
    1,000, SE 0.96-1.05 of the SD. Where a pair the value
    uses is held fixed (a target document clicked on every show at rank 0) the value is not free of the models'
    scale, so the normalisation (rank 0's examination without a click above held at its fit) is part of the
    convention. ``mdl``: a PBM or UBM (``examination`` and an ``attractiveness`` table); one O(n k) pass gathers
    the positions.
    """
    from onlineeval.estimators.model_fit import pair_index
    from onlineeval.estimators.position_bias._core import _cells
    from onlineeval.estimators.position_bias.influence import pair_linearisation

    idx = pair_index(data)
    k, m, n = data.k, idx.n_pairs, data.n
    gamma = np.asarray(mdl.examination, dtype=np.float64)
    ubm = gamma.ndim == 2
    gamma = gamma[:k, :k] if ubm else gamma[:k, None]  # (k, states): states = 1 (PBM) or k (UBM)
    alpha = _pair_alpha(mdl, idx)
    n_states = gamma.shape[1]
    exam_code = np.broadcast_to(np.arange(k)[None, :] * n_states, data.shown.shape)  # slot * states + state
    if ubm:  # state 0: no click above, else 1 + the previous click's rank
        last = np.where(data.clicks, np.arange(k)[None, :] + 1, 0)
        exam_code = exam_code.copy()
        exam_code[:, 1:] += np.maximum.accumulate(last, axis=1)[:, :-1]
    if idx.all_valid:  # every position, in row order (no index arrays to gather through)
        rows, pair = np.repeat(np.arange(n), k), idx.code.reshape(-1)
        clicked, code = data.clicks.reshape(-1), exam_code.reshape(-1)
    else:
        rows, slot = np.nonzero(idx.code >= 0)
        pair, clicked, code = idx.code[rows, slot], data.clicks[rows, slot], exam_code[rows, slot]
    # the examination parameters the log uses, renumbered in order (those it never uses are held fixed)
    present = np.bincount(code, minlength=k * n_states) > 0
    used = np.flatnonzero(present)
    cl = _cells(pair, (np.cumsum(present) - 1)[code], clicked, used.size)
    # the target's slots: the model's relevance (its default for a pair the log never shows), 0 at empty slots
    _, t_code, t_alpha = target_slot_values((mdl.attractiveness,), idx, target, k)
    # n_q / n dV_q / dh at each target slot and state, h = gamma alpha (the click probability given that state)
    dv_dh = (_ubm_click_gradient(t_alpha, gamma, reward) if ubm else
             _click_gradient(t_alpha, gamma[:, 0], reward)[:, :, None]) * (idx.n_q / n)[:, None, None]
    shown = t_code >= 0
    g_alpha = np.bincount(t_code[shown], np.einsum("usj,sj->us", dv_dh, gamma)[shown], minlength=m)
    g_gamma = np.einsum("usj,us->sj", dv_dh, t_alpha).reshape(-1)[used]
    theta = gamma.reshape(-1)[used]
    t0 = theta[0]  # the linearisation's normalisation (rank 0 without a click above): theta / t0, alpha t0
    lin = pair_linearisation(cl, alpha * t0, theta / t0, rows, clicked, cl.of_position, n)
    return lin(g_gamma * t0, g_alpha / t0)


def _cm_correction(mdl: Any, data: LoggedData, target: Target, reward: Reward) -> FloatArray:
    r"""Per-impression linearisation of a fitted cascade model's (CM's) DM value in the relevances, as
    :func:`_pbm_correction` for a PBM: the closed-form (maximum-likelihood) relevance of a pair is the ratio
    :math:`\hat\alpha_{qd} = C_{qd}/E_{qd}` of its clicks to its examinations, a slot counting as examined down to
    the impression's first click (every slot without a click), so impression ``i`` adds

    .. math::

        \sum_{j \le \mathrm{first}_i} \frac{\partial V_{q_i}}{\partial \alpha_{q_i d_{ij}}}\,
            \frac{n_{q_i}}{E_{q_i d_{ij}}}\big(c_{ij} - \hat\alpha_{q_i d_{ij}}\big);

    a cascade's click at a slot is its first click, so the value's derivative is the first-click reward's
    (:func:`_value_gradient` with the examination 1) for additive rewards too. A target pair the log shows but never
    examines adds nothing (no impression carries its error; the diagnostics count such rarely shown pairs)."""
    from onlineeval.estimators.model_fit import pair_index

    idx = pair_index(data)
    k = data.k
    clicks = data.clicks
    stop = np.where(clicks.any(axis=1), clicks.argmax(axis=1), k - 1)
    examined = (idx.code >= 0) & (np.arange(k)[None, :] <= stop[:, None])
    views = np.bincount(idx.code[examined], minlength=idx.n_pairs).astype(np.float64)
    alpha = _pair_alpha(mdl, idx)
    ratio = _pair_ratios(mdl, idx, k, target, reward, np.ones(k), views, True)
    residual = clicks - np.append(alpha, 0.0)[idx.code]
    return np.where(examined, np.append(ratio, 0.0)[idx.code] * residual, 0.0).sum(axis=1)


def _ctr_correction(mdl: Any, data: LoggedData, target: Target, reward: Reward) -> FloatArray:
    r"""Per-impression linearisation of a fitted CTR model's DM value. The models click every shown slot
    independently, with a probability :math:`\theta` per pair (``dctr``), per rank (``rctr``) or one for all
    (``gctr``), fitted in closed form as the parameter's clicks over its shows, :math:`\hat\theta_p = C_p / N_p`, so
    impression ``i`` adds

    .. math::

        n \sum_j \frac{\partial V}{\partial\theta_{p_{ij}}}\,\frac{c_{ij} - \hat\theta_{p_{ij}}}{N_{p_{ij}}},

    :math:`p_{ij}` the parameter of its slot ``j``; the value's derivative in each target slot's click probability
    is :func:`_click_gradient`'s (independent clicks: the probability given no click above is the slot's own). A
    target pair the log never shows takes the model's default (held fixed, as the diagnostics count such pairs).

    Measured (``tests/test_dm_ctr_world.py``): 1,000 logs of 4,000 impressions of each model's world, 937-952 of
    1,000 covered, SE 0.97-1.01 of the SD; held fixed (before 2026-12-06) 134-171 for ``dctr`` and 0-2 for ``rctr``
    and ``gctr`` (an SE of 0: every impression's plug-in term is the same value)."""
    from onlineeval.estimators.model_based import target_slot_values
    from onlineeval.estimators.model_fit import pair_index

    idx = pair_index(data)
    k, n = data.k, data.n
    valid = idx.code >= 0
    rank = np.broadcast_to(np.arange(k)[None, :], idx.code.shape)
    if hasattr(mdl, "attractiveness"):  # dctr: a parameter per pair
        t_uq, t_code, t_p = target_slot_values((mdl.attractiveness,), idx, target, k)
        t_par, log_par, theta = t_code, np.where(valid, idx.code, 0), _pair_alpha(mdl, idx)
    else:  # rctr (per rank), gctr (one)
        t_uq, t_code = target_slot_values((), idx, target, k)
        p = np.broadcast_to(np.asarray(mdl.p, dtype=np.float64), (k,)) if np.ndim(mdl.p) == 0 else \
            np.asarray(mdl.p, dtype=np.float64)[:k]
        t_p = np.where(t_uq >= 0, p[None, :], 0.0)
        per_rank = np.ndim(mdl.p) > 0
        t_par = np.where(t_uq >= 0, np.arange(k)[None, :] if per_rank else 0, -1)
        log_par, theta = (rank if per_rank else np.zeros_like(rank)), (p if per_rank else p[:1])
    size = theta.size
    share = (idx.n_q / n)[:, None]
    on = t_par >= 0
    g = np.bincount(t_par[on], (_click_gradient(t_p, np.ones(k), reward) * share)[on], minlength=size)
    shows = np.bincount(log_par[valid], minlength=size).astype(np.float64)
    ratio = np.divide(n * g, shows, out=np.zeros(size), where=shows > 0)
    residual = data.clicks - theta[log_par]
    return np.where(valid, ratio[log_par] * residual, 0.0).sum(axis=1)


#: per click model whose CLT interval is linearised (:meth:`DirectMethod.linearised`): its terms, what they carry,
#: and whether only its maximum likelihood by EM is (DCM's and SDBN's closed forms are not linearised; DBN and CCM
#: have EM only)
_LINEARISED = {
    "pbm": (_pbm_correction, "relevances' and examination's error", False),
    "ubm": (_pbm_correction, "relevances' and examination's error", False),
    "cm": (_cm_correction, "relevances' error (a slot examined down to the first click, as the cascade's closed form "
                           "counts it)", False),
    "dcm": (dcm_correction, "relevances' and continuations' error (the maximum likelihood's observed information)",
            True),
    "sdbn": (dcm_correction, "relevances' and satisfactions' error (the maximum likelihood's observed information)",
             True),
    "dbn": (chain_correction, "relevances', satisfactions' and perseverance's error (the maximum likelihood's observed "
                              "information)", True),
    "ccm": (chain_correction, "relevances' and continuations' error (the maximum likelihood's observed information)",
            True),
    "dctr": (_ctr_correction, "click-through rates' error", False),
    "rctr": (_ctr_correction, "click-through rates' error", False),
    "gctr": (_ctr_correction, "click-through rate's error", False),
}


def _pair_alpha(mdl: Any, idx: Any) -> FloatArray:
    """The fitted relevance of each (query, document) pair of the log (``idx``: its pair index)."""
    from clickmodels.base import Impressions  # lazy

    return np.asarray(mdl.attractiveness.lookup(Impressions(query=idx.query, docs=idx.doc[:, None])),
                      dtype=np.float64)[:, 0]


def _pair_ratios(mdl: Any, idx: Any, k: int, target: Target, reward: Reward, theta: FloatArray,
                 mass: FloatArray, first_click: bool) -> FloatArray:
    """Per pair of the log: the derivative of the target's value in its relevance (summed over the target's slots
    holding the document, :func:`_value_gradient`) over its examination mass per impression of its query
    (``mass / n_q``); 0 for a pair the target does not show or the log never examines (a target's pairs the log
    never shows have no impression to carry their influence)."""

    _, t_code, t_alpha = target_slot_values((mdl.attractiveness,), idx, target, k)
    grad = _value_gradient(t_alpha, theta, reward, first_click)
    shown = t_code >= 0
    g_pair = np.bincount(t_code[shown], grad[shown], minlength=idx.n_pairs)
    rho = mass / idx.n_q[idx.qi]
    return np.where(rho > 0, g_pair, 0.0) / np.where(rho > 0, rho, 1.0)


def _value_gradient(alpha: FloatArray, theta: FloatArray, reward: Reward, first_click: bool | None = None
                    ) -> FloatArray:
    r"""``(n, k)``: the derivative of a PBM's value of lists whose documents have the relevances ``alpha`` (``(n, k)``,
    0 at empty slots) in the relevance :math:`\alpha_s` at each slot, the examination :math:`\theta` held fixed.

    Additive rewards: :math:`V = \sum_s w_s\theta_s\alpha_s`, so :math:`w_s\theta_s`. First-click rewards: with
    :math:`h_s = \theta_s\alpha_s` (a PBM's click probability given no click above),
    :math:`V = \sum_s w_s h_s S_s`, :math:`S_s = \prod_{l<s}(1 - h_l)`, so
    :math:`\theta_s S_s (w_s - T_s)` with :math:`T_s = \sum_{u>s} w_u h_u \prod_{s<l<u}(1 - h_l)` the value of
    the slots below ``s`` given that ``s`` is not clicked (by the backward recursion
    :math:`T_{s} = w_{s+1}h_{s+1} + (1 - h_{s+1})T_{s+1}`, no division: exact where a slot is clicked surely, whose
    derivative still counts the slots below; the models' own conditional click probabilities are 0 there, so ``h``
    is computed from the relevances). ``first_click``: the first-click form whatever the reward's kind (a cascade
    model: :math:`\theta = 1`, its marginal click probabilities are its first click's); ``None``: by the reward's
    kind. Empty slots (relevance 0) get 0 only where the caller masks them (:func:`_pair_ratios` reads only the
    target's documents).
    """
    return theta[None, :] * _click_gradient(alpha, theta, reward, first_click)


def _ubm_click_gradient(alpha: FloatArray, gamma: FloatArray, reward: Reward) -> FloatArray:
    r"""``(n, k, k)``: the derivative of a UBM's value of lists whose documents have the relevances ``alpha``
    (``(n, k)``, 0 at empty slots) in :math:`h_{sj} = \gamma_{sj}\alpha_s`, slot ``s``'s click probability in state
    ``j`` (0: no click above, else 1 + the previous click's rank; ``gamma`` ``(k, k)``, the model's
    ``examination``).

    Forward, the state's distribution :math:`\pi_s(j)` (:math:`\pi_0(0) = 1`; a click at ``s`` moves to state
    :math:`s + 1`, a skip keeps the state); backward, the value still to come from each state,
    :math:`\lambda_s(j) = h_{sj}(r_{sj} + \lambda_{s+1}(s+1)) + (1 - h_{sj})\lambda_{s+1}(j)`,
    :math:`\lambda_k = 0`, with the slot's reward :math:`r_{sj} = w_s` (additive) or :math:`w_s[j = 0]` (first
    click: only a click from state 0 is the first); then
    :math:`\partial V/\partial h_{sj} = \pi_s(j)\,(r_{sj} + \lambda_{s+1}(s+1) - \lambda_{s+1}(j))`. With one
    state (a PBM) this is :func:`_click_gradient`."""
    n, k = alpha.shape
    w = reward.position_weights(k)
    h = gamma[None, :, :] * alpha[:, :, None]
    r = np.zeros((k, k))
    if reward.kind == "additive":
        r[:] = w[:, None]
    else:
        r[:, 0] = w
    pi = np.zeros((n, k + 1, k + 1))  # pi[:, s, j]: state j before slot s
    pi[:, 0, 0] = 1.0
    for s in range(k):
        pi[:, s + 1, : s + 1] = pi[:, s, : s + 1] * (1.0 - h[:, s, : s + 1])
        pi[:, s + 1, s + 1] = np.einsum("nj,nj->n", pi[:, s, : s + 1], h[:, s, : s + 1])
    lam = np.zeros((n, k + 1))  # lam[:, j] = lambda_{s+1}(j) while going back
    out = np.zeros((n, k, k))
    for s in range(k - 1, -1, -1):
        after_click = lam[:, s + 1][:, None]
        out[:, s, : s + 1] = pi[:, s, : s + 1] * (r[None, s, : s + 1] + after_click - lam[:, : s + 1])
        lam[:, : s + 1] = h[:, s, : s + 1] * (r[None, s, : s + 1] + after_click) \
            + (1.0 - h[:, s, : s + 1]) * lam[:, : s + 1]
    return out


def _click_gradient(alpha: FloatArray, theta: FloatArray, reward: Reward, first_click: bool | None = None
                    ) -> FloatArray:
    r"""``(n, k)``: the derivative of the same value in each slot's click probability given no click above,
    :math:`h_s = \theta_s\alpha_s`: :math:`w_s` (additive) or :math:`S_s(w_s - T_s)` (first click; see
    :func:`_value_gradient`, which is this times :math:`\theta_s`; the derivative in :math:`\theta_s` is this
    times :math:`\alpha_s`)."""
    n, k = alpha.shape
    w = reward.position_weights(k)
    if not (reward.kind != "additive" if first_click is None else first_click):
        return np.broadcast_to(w[None, :], (n, k)).copy()
    h = theta[None, :] * alpha
    above = np.ones((n, k))
    above[:, 1:] = np.cumprod(1.0 - h[:, :-1], axis=1)
    tail = np.zeros((n, k))
    for s in range(k - 2, -1, -1):
        tail[:, s] = w[s + 1] * h[:, s + 1] + (1.0 - h[:, s + 1]) * tail[:, s + 1]
    return above * (w[None, :] - tail)
