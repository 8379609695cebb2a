r"""The direct method's value checked against the doubly robust ``dr`` on the same log.

A click model fitted on a log can be wrong for the target's list while its interval measures the fit's spread only:
rarely shown pairs carried to other slots (:func:`~onlineeval.estimators.dm.rare_pairs_warning`), or a model the
users do not follow. The slot-level doubly robust ``dr`` with the same model measures that error: its correction,
the item-weighted residuals of its model, has expectation :math:`V - \hat V_{\mathrm{DM}}` whatever the model, when
the item propensities are right and a slot's clicks depend on its document only, and its model is cross-fitted over
the users (no in-sample bias). That assumption is an independent-click model's own (``pbm``, ``dctr``, ``rctr``,
``gctr``), so the check is made for those, with an additive reward (``dr``'s) and item propensities in the log. Not
for the other models: a cascade model on cascade users is right while ``dr`` is biased there (against ``dr`` with a
PBM, ``dm`` with a cascade model crossed 3 SE on 30 of 30 logs of 4,000 impressions of the cascade check world, z
-20.5), and ``cascade_dr``'s prefix weights, whose assumption every model here shares, are too heavy-tailed for a
3-SE rule on the whole list (skewness about -19 there: 3 of 100 right models crossed it). Those models are tested
by :mod:`~onlineeval.estimators.assumption_check` against ``rips`` on the slots where its weights are drawn, with a
side-aware critical value: on the sparse Zipf world below with PBM users (10 logs of 4,000 impressions, three lists)
a cascade model fitted on the log was caught on 26 of 30 estimates (all 30 at 10^4 impressions), a DCM fitted on
DCM users of that world warned on none of 30 (and 12 at 10^5 impressions), and ``cascade_dr``
with the same model as the reference (its control variate) would have raised the z by a quarter to two fifths
(-6.4 against -4.5 on the ideal list) at the cost of a cross-fitted model per estimate: not built. So the paired
difference

.. math::

    \hat\Delta = \hat V_{\mathrm{DM}} - \hat V_{\mathrm{DR}}
               = \frac{\sum_u \sum_{i \in u} (m_i - r_i)}{n},

with :math:`m_i` and :math:`r_i` impression ``i``'s terms of the two estimators (the direct method's linearised
ones, which carry its fit's error), estimates the direct method's bias on this log, and its standard error is the
delta method's over the users (the log's clusters), as every estimate's. Where :math:`|\hat\Delta| / se` reaches
:data:`DR_CHECK_Z` the estimate warns (about 0.3% of unbiased estimates, by the normal tail).

Measured (the sparse Zipf world of ``tests/test_dm_rare_pairs.py``: 10 candidates, top 5, PBM users, production's
order with 30% uniformly random lists; the check's z, mean and SD over the logs, then the direct method's own error in
its SEs), for the ideal list (rarely shown pairs moved to other slots), production's own list and production's
reversed: 200 queries, 10,000 impressions (20 logs): -0.55, +0.14, -0.21 (dm -1.74, -0.15, -0.45 SE); the check's SE
is 2.9-3.1 times the direct method's for the moved lists (0.4 for production's own), so at that size it rarely
concludes and the rare-pairs warning speaks alone. 2,000 queries, 10^5 impressions (30 logs): -1.81 (SD 1.00), +0.38
(0.91), -1.01 (1.11) (dm -4.9, +0.06, -2.1 SE; 3, 0 and 0 logs warned). 20,000 queries, 10^6 impressions (16 logs):
-6.1 (1.13), +0.85 (0.92), -2.5 (0.91) (dm -18.4, +0.09, -8.4 SE; 16, 0 and 7 logs warned), where the rare-pairs
warning flags all three alike (7.3% of the slots). The z's SD near 1 says the difference's SE is right; production's
+0.85 is ``dr``'s own small bias there (-0.2 of its SE, seen through the check's SE of 0.37 of ``dr``'s). So the
check tells a biased direct method from an unbiased one at a user's sizes, and where dm's error is large against
``dr``'s SE (a model the users do not follow: a rank CTR model, ``rctr``, on PBM users' 4,000 impressions, z -5.8,
-4.4 and -3.9 on three logs; ``tests/test_dm_dr_check.py``). The skewness of the paired difference's users' influence
values was -1.4 for the moved lists, +0.5 for production's own (10^4 and 10^6 impressions).

Not made (``dr_check`` says why, :func:`not_made`): a model given ready-made (its error is not the fit's), a direct
method whose interval holds its fitted model fixed (the difference's SE would leave the fit's error out), a model that
is not an independent-click one, a first-click reward, a log without item propensities, or a ``dr`` that cannot be
computed (too few users for its folds). Nor does it conclude where the paired difference's users' influence values
are so skewed that the first Edgeworth term puts the heavy side's rate of crossing :data:`DR_CHECK_Z` at
:data:`LOPSIDED_LIMIT` times the normal tail's or more (:func:`lopsided_check`; ``dr_check`` then says
'inconclusive'): heavy-tailed weights make a t-type statistic cross on a log that missed the rare large weights.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators.intervals import paired_mean

if TYPE_CHECKING:
    from onlineeval.estimators.base import Estimator, FloatArray, LoggedData, Reward, Target, Terms
    from onlineeval.estimators.dm import DirectMethod

__all__ = ["DR_CHECK_Z", "LOPSIDED_LIMIT", "dm_dr_check", "dr_check_difference", "dr_check_text", "dr_reference",
           "lopsided_check", "not_made"]

#: the direct method warns where its value is this many standard errors of the paired difference from ``dr``'s
DR_CHECK_Z = 3.0

#: the check warns only where the first Edgeworth term puts its heavy side's rate of crossing :data:`DR_CHECK_Z`
#: below this multiple of the normal tail's (:func:`lopsided_check`)
LOPSIDED_LIMIT = 2.0


def dr_reference(est: DirectMethod, data: LoggedData, reward: Reward) -> Any:
    """The ``dr`` that checks ``est`` (its click model and fit options, cross-fitted over the users) where that model
    is an independent-click one (``pbm``, ``dctr``, ``rctr``, ``gctr``: ``dr``'s assumption, a slot's clicks depend
    on its document only, is then the model's own, so a right model is never held to a biased reference), the reward
    additive and the log has item propensities; else ``None`` (:func:`not_made` says why)."""
    from onlineeval.estimators.dr import DR

    if not_made(est, data, reward) is not None:
        return None
    return DR(model=est.model_name, method=est.method, max_iter=est.max_iter, tol=est.tol, pseudo=est.pseudo)


def _reference_text(ref: Any) -> str:
    return f"{ref.name} ({ref.model_name}, cross-fitted over {ref.default_folds} folds of the users)"


def not_made(est: DirectMethod, data: LoggedData, reward: Reward) -> str | None:
    """Why the check cannot be made for ``est`` on ``data`` and ``reward``, or ``None``."""
    from onlineeval.estimators.dr import INDEPENDENT_MODELS

    if not isinstance(est.model, str):
        return "a model given ready-made"
    if not est.linearised(reward):
        return "the direct method's interval holds its fitted model fixed"
    if est.model_name not in INDEPENDENT_MODELS:
        from onlineeval.estimators.assumption_check import applies

        instead = ("; the assumption check against rips (notes assumption_check) tests this model on the log instead"
                   if applies(est, reward) else "")
        return (f"dr, the reference, assumes a slot's clicks depend on its document only, which a {est.model_name} "
                f"model does not (a right model would be held to a biased reference){instead}")
    if reward.kind != "additive":
        return "dr, the reference, takes additive rewards only"
    if data.p_item is None:
        return "the log has no item propensities (dr, the reference, needs them)"
    return None


def lopsided_check(skewness: float, clusters: int) -> float:
    """How often the check's one heavy side crosses :data:`DR_CHECK_Z` where the direct method is unbiased, by the
    first Edgeworth term (:func:`~onlineeval.estimators.intervals.lopsided_excess`), as a multiple of the normal
    tail's: the check concludes only below :data:`LOPSIDED_LIMIT` (NaN skewness: 1, no excess measured)."""
    from statistics import NormalDist

    from onlineeval.estimators.intervals import lopsided_excess

    tail = NormalDist().cdf(-DR_CHECK_Z)
    excess = lopsided_excess(skewness, clusters, df=math.inf, alpha=2 * tail)
    return 1.0 + excess / tail if math.isfinite(excess) else 1.0


def _num(est: Any, data: LoggedData, target: Target, reward: Reward, num: FloatArray | None = None) -> FloatArray:
    """``est``'s per-impression terms of ``target`` (``num`` where the caller has them), kept with the log, so a
    difference against a baseline checks the targets' own terms without computing them again."""
    def compute() -> FloatArray:
        return (est.terms(data, target, reward).num if num is None else num).copy()

    return data.cached(("dm_dr_check", est, reward), compute, target=target)  # type: ignore[no-any-return]


def dm_dr_check(est: DirectMethod, data: LoggedData, target: Target, reward: Reward, terms: Terms) -> dict[str, Any]:
    """Notes of the check (see the module docstring): ``dr_check`` (what was compared, or why not),
    ``dr_check_value`` (``dr``'s value), ``dr_check_difference`` (dm - dr), ``dr_check_se``, ``dr_check_z`` and
    ``dr_check_skewness`` (of the users' influence values); a warning under ``"warnings"`` from :data:`DR_CHECK_Z`
    unless :func:`lopsided_check` reaches :data:`LOPSIDED_LIMIT` (then ``dr_check`` says 'inconclusive')."""
    ref = dr_reference(est, data, reward)
    if ref is None:
        return {"dr_check": f"not made: {not_made(est, data, reward)}"}
    try:
        other = _num(ref, data, target, reward)
    except (InputError, ConfigError) as exc:  # e.g. too few users for the folds
        return {"dr_check": f"not made: {exc.message}"}
    paired = paired_mean(data, _num(est, data, target, reward, terms.num) - other)
    if paired is None:
        return {"dr_check": "not made: the difference has no standard error (fewer than two users, or constant)"}
    diff, se, skewness, clusters = paired
    value = float(other.sum() / data.n) + reward.offset
    rate = lopsided_check(skewness, clusters)
    notes: dict[str, Any] = {"dr_check": _reference_text(ref), "dr_check_value": value, "dr_check_difference": diff,
                             "dr_check_se": se, "dr_check_z": diff / se, "dr_check_skewness": skewness}
    if rate >= LOPSIDED_LIMIT:
        notes["dr_check"] += (f"; inconclusive: its users' influence values have skewness {skewness:+.3g}, so its "
                              f"heavy side crosses {DR_CHECK_Z:g} SE about {rate:.1f} times as often as the normal "
                              "tail says (the first Edgeworth term): no warning either way")
    elif abs(diff / se) >= DR_CHECK_Z:
        notes["warnings"] = [dr_check_text(est, ref, "value", diff, se, f"{value:.6g}")]
    return notes


def dr_check_difference(est: Estimator, data: LoggedData, target: Target, baseline: Target, reward: Reward,
                        diff: dict[str, Any], pair: str, warnings: list[str]) -> None:
    """The paired difference's own check (``onlineeval estimate --baseline``; record ``diff`` of
    :func:`~onlineeval.estimators.log_estimates.paired_difference`, prefix ``pair``): for a direct method checked as
    :func:`dm_dr_check`, its difference target - baseline against ``dr``'s on the same impressions (each side's bias
    need not cancel), a warning added to ``warnings`` and the record's own from :data:`DR_CHECK_Z`; nothing where
    the check cannot be made (each estimate's notes say why) or the difference is undefined."""
    from onlineeval.estimators.dm import DirectMethod

    ref = dr_reference(est, data, reward) if isinstance(est, DirectMethod) else None
    if ref is None or diff.get("se") is None:
        return
    try:
        own = _num(est, data, target, reward) - _num(est, data, baseline, reward)
        other = _num(ref, data, target, reward) - _num(ref, data, baseline, reward)
    except (InputError, ConfigError):
        return
    paired = paired_mean(data, own - other)
    if (paired is not None and abs(paired[0] / paired[1]) >= DR_CHECK_Z
            and lopsided_check(paired[2], paired[3]) < LOPSIDED_LIMIT):
        text = dr_check_text(est, ref, "difference", paired[0], paired[1], f"{float(other.sum() / data.n):+.6g}")
        warnings.append(f"{pair}: {text}")
        diff.setdefault("warnings", []).append(warnings[-1])


def dr_check_text(est: DirectMethod, ref: Any, what: str, diff: float, se: float, other: str) -> str:
    """The warning of a direct method whose ``what`` ("value", "difference") is ``diff`` (+- ``se``) from the
    doubly robust ``ref``'s, ``other`` (formatted)."""
    z = diff / se
    return (f"{est.name} ({est.model_name} fitted on the log): its {what} is {abs(z):.1f} standard errors of the "
            f"paired difference {'below' if z < 0 else 'above'} that of the doubly robust {_reference_text(ref)}, "
            f"{other} (dm - dr = {diff:+.4g} +- {se:.2g}; warned from {DR_CHECK_Z:g} SE). dr's correction measures "
            "the model's error on this log whatever the model, where the item propensities are right and a slot's "
            "clicks depend on its document only (the model's own assumption): then dm is biased here by about that "
            "difference, beyond its interval (e.g. rarely shown pairs carried to other slots); use dr")
