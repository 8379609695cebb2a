r"""An estimator's click-model assumption checked on the log itself, against ``rips``.

IIPS, PBM-IPS, the pseudoinverse, ``dr`` and the direct method assume more about the users than ``rips`` does
(item-position independence, position-based examination, linearity, a click model): where the users break it (cascade
users, say) they are biased, while ``rips`` (no look-ahead: a slot's expected reward depends on the documents at and
above it) stays unbiased under every top-down click model (PBM, cascade, DCM and the others of ``clickmodels``). Both
are computed from the same impressions, so their paired difference

.. math::

    \hat\Delta = \hat V_{\mathrm{est}} - \hat V_{\mathrm{RIPS}} = \frac{\sum_u \sum_{i \in u} (e_i - r_i)}{n}

has expectation 0 where the estimator's assumption holds for these users and this target, and the estimator's bias
where it does not (a Hausman-type test); its standard error is the delta method's over the users, as every
estimate's. The check is made for an estimator declared biased (:attr:`~onlineeval.estimators.base.Estimator.
biased_under`) under a click family under which ``rips`` is unbiased, for the metric's reward kind (:func:`applies`).

Three things make ``rips``'s weights (prefix propensity ratios) a delicate reference, each measured:

- Deep slots: a target's prefix of ``j`` documents is rarely logged when ``j`` is large, and a log that missed the
  rare huge weights gives a t-type statistic far from its null (10 candidates, top 5, production's order with 30%
  uniform lists, 10,000 impressions, PBM users: the whole-list difference crossed on 16 and 23 of 100 logs for two
  lists other than production's, where IIPS is unbiased). So the check compares the two on the top ``J`` slots
  only, ``J`` the number of leading slots where the reference's weights are drawn (:func:`drawn_slots`): their
  effective number of users (:math:`(\sum_u W_{uj})^2 / \sum_u W_{uj}^2`, :math:`W_{uj}` user ``u``'s weights at
  slot ``j``) at least :data:`MIN_SLOT_USERS`, and their mean within :data:`MEAN_WEIGHT_Z` clustered standard
  errors of its expectation 1. Each slot's reward is estimated by both without bias under their assumptions, so the
  top ``J`` slots' reward (the metric's position weights set to 0 below slot ``J``) is a valid comparison; a
  cascade user's clicks already show at slot 2.
- Missing mass: an epsilon-greedy logger around production draws a target's deep prefixes often for the queries
  where the two lists agree (weights near 1) and almost never for the others; the weights drawn are then many and
  even, but their mean is far below 1 (the bundled world with PBM users, epsilon 0.05, 20,000 impressions: PBM-IPS
  with the logger's propensities, unbiased, was 6.7 SE from ``rips`` on slots 1-4 before the mean's gate; with it,
  slot 1 alone is compared).
- Skewness: the users' influence values are skewed (the reference's large weights), so the t statistic's tail
  opposite to their skewness is heavy. On that side the critical value is :data:`CHECK_Z` plus
  :data:`CF_SAFETY` times the Cornish-Fisher shift of the studentized mean,
  :math:`|\gamma| (2 z^2 + 1) / (6 \sqrt{G})` (skewness :math:`\gamma` over :math:`G` users); on the other
  :data:`CHECK_Z` (:func:`critical_value`).

Measured where the estimator is unbiased (PBM users): the suite's check world (4 queries, 5 candidates, top 3, 3,000
logs of 4,000 impressions) IIPS warned on 3 (uniform logging) and 1 (Plackett-Luce) logs, ``dr`` on 2 and 1 (a plain
3-SE rule on the whole list: 25 and 29, 16 and 16 of 4,000); the sparse world above, 100 logs of 10,000 impressions
and 30 of 10^5 (2,000 queries) for three lists: none; the bundled world's logger, 200 logs of 20,000: 1; the direct
method with a right model of another family (a cascade model on the cascade check world's users, 300 estimates per
logger; a DCM on DCM users, 120): 1 and 0, and 0 (``tests/test_assumption_check.py``). Where the
users are cascade users: the check world's ideal list, 200 of 200 logs for IIPS, 198 and 200 for ``dr`` (z about
7-13); the sparse world, production's own list 50 of 50 logs for IIPS and PBM-IPS at 10^4 impressions (z +5.9, +7.4),
20 of 20 at 10^5 (+19, +23), ``dr`` 10 of 50 and 20 of 20 (+1.9, +5.4); lists rarely logged there are compared on
their top 1-3 slots and their small biases there seldom found (7 of 20 logs for IIPS at 10^5). The exported log of
``configs/counterfactual.yaml`` (half cascade users, 27,848 impressions): IIPS +5.0 SE for B, PBM-IPS +4.3, ``dm``
+3.8, ``dr`` +2.6 (silent), the pseudoinverse +0.2; IIPS's B - A +3.5 (its bias in the simulation +0.015 of the
true +0.0228). ``tests/test_assumption_check.py``.

Not made (``assumption_check`` says why): an estimator whose interval holds a data-driven choice or a fitted model
fixed (its paired SE would leave that out), a self-normalised one, a log without prefix propensities, a target whose
lists leave the logger's support at the prefix level (``rips`` is biased there), no slot drawn, or the two
estimators' terms identical on the slots compared (IIPS and ``rips`` on slot 1 alone). Where the users
look ahead (a click model that is not top-down), ``rips`` is biased too; no model of ``clickmodels`` does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from onlineeval.errors import ConfigError, InputError

if TYPE_CHECKING:
    from onlineeval.estimators.base import Estimator, FloatArray, LoggedData, Reward, Target, Terms

__all__ = ["CF_SAFETY", "CHECK_Z", "MEAN_WEIGHT_Z", "MIN_SLOT_USERS", "REFERENCE", "applies", "assumption_check",
           "assumption_check_difference", "critical_value", "drawn_slots", "verdict_text"]

#: the estimator that checks the others (no look-ahead: unbiased under every top-down click model)
REFERENCE = "rips"

#: the check warns where the paired difference is this many of its standard errors from 0 (on the light side)
CHECK_Z = 3.0

#: the multiple of the Cornish-Fisher shift added to :data:`CHECK_Z` on the heavy side (:func:`critical_value`)
CF_SAFETY = 2.0

#: a slot is compared where the reference's weights there have at least this effective number of users
MIN_SLOT_USERS = 30.0

#: ... and a mean within this many of its standard errors of its expectation 1 (:func:`drawn_slots`)
MEAN_WEIGHT_Z = 4.0


def applies(est: Estimator, reward: Reward) -> tuple[str, ...]:
    """The click families under which ``est`` is declared biased for ``reward``'s kind and :data:`REFERENCE`
    unbiased (the check is made for ``est`` where there are any; ``()``: no check, no note)."""
    from onlineeval.estimators.base import estimator_class

    if est.name == REFERENCE:
        return ()
    ref = {family for family, kind in estimator_class(REFERENCE).unbiased_under if kind == reward.kind}
    _, biased = est.bias_families()
    return tuple(dict.fromkeys(family for family, kind in biased if kind == reward.kind and family in ref))


def critical_value(skewness: float, clusters: int, difference: float) -> float:
    """The check's critical value on ``difference``'s side: :data:`CHECK_Z`, plus on the heavy side (opposite to the
    users' influence values' ``skewness``: a log that missed the reference's rare large weights lies there)
    :data:`CF_SAFETY` times the Cornish-Fisher shift :math:`|\\gamma| (2 z^2 + 1) / (6 \\sqrt{G})`."""
    if not math.isfinite(skewness) or clusters < 2 or (skewness < 0) != (difference > 0):
        return CHECK_Z
    return CHECK_Z + CF_SAFETY * abs(skewness) * (2 * CHECK_Z**2 + 1) / (6 * math.sqrt(clusters))


def drawn_slots(data: LoggedData, weights: FloatArray) -> tuple[int, FloatArray, FloatArray]:
    """``(J, users, mean_z)``: the number of leading slots whose reference weights ``weights`` ``(n, k)`` are drawn,
    each slot's effective number of users and its mean weight's distance from its expectation 1 in clustered
    standard errors (each impression its own user without user ids). A slot is drawn where it has at least
    :data:`MIN_SLOT_USERS` effective users and a mean weight within :data:`MEAN_WEIGHT_Z` standard errors of 1: a
    prefix weight :math:`\\pi / \\mu` has expectation 1 at every shown slot (full support), and a log that hardly
    draws some queries' prefixes (an epsilon-greedy logger around another ranker) misses their mass, whatever the
    concentration of the weights it did draw."""
    from onlineeval.stats import ratio_mean_batch

    valid = np.ones(weights.shape, dtype=bool) if data.all_valid else np.asarray(data.valid, dtype=bool)
    w = np.where(valid, np.asarray(weights, dtype=np.float64), 0.0)
    inv, g = data.user_groups
    per_user = np.stack([np.bincount(inv, col, g) for col in w.T])  # (k, users): each slot's sums per user
    shown = np.stack([np.bincount(inv, col, g) for col in valid.T.astype(np.float64)])
    s2 = (per_user**2).sum(axis=1)
    users = np.divide(per_user.sum(axis=1) ** 2, s2, out=np.zeros(s2.size), where=s2 > 0)
    mean = ratio_mean_batch(per_user, shown)  # each slot's mean weight and its delta-method SE over the users
    off = np.abs(np.nan_to_num(mean.estimate, nan=0.0) - 1.0)
    mean_z = np.divide(off, mean.se, out=np.where(off > 0, np.inf, 0.0), where=mean.se > 0)
    drawn = (users >= MIN_SLOT_USERS) & (mean_z <= MEAN_WEIGHT_Z)
    return (int(np.argmin(drawn)) if not drawn.all() else int(drawn.size)), users, mean_z


def _not_made(est: Estimator, data: LoggedData, reward: Reward) -> str | None:
    if est.clt_holds_fixed(reward) is not None:
        return "its interval holds a data-driven choice or a fitted model fixed (the paired SE would leave it out)"
    if est.self_normalised:
        return "a self-normalised estimator"
    if data.p_prefix is None:
        return f"the log has no prefix propensities ({REFERENCE}, the reference, needs them)"
    return None


def _truncated(reward: Reward, k: int, slots: int) -> Reward:
    from onlineeval.estimators.rewards import Reward as RewardClass

    if slots >= k:
        return reward
    w = reward.position_weights(k).copy()
    w[slots:] = 0.0
    return RewardClass(f"{reward.name} ({_top(slots)})", reward.kind, w, 0.0)


def _slots(data: LoggedData, target: Target, reward: Reward) -> tuple[int, FloatArray] | str:
    """The reference's drawn slots for ``target`` (kept with the log), or why there are none."""
    from onlineeval.estimators.base import get_estimator
    from onlineeval.estimators.diagnostics import support_violations

    def compute() -> tuple[int, FloatArray] | str:
        violations, _ = support_violations(data, target, "prefix")
        if violations:
            return (f"the lists of the target leave the support of the logger at the prefix level on {violations} "
                    f"impressions ({REFERENCE} is biased there)")
        try:
            weights = get_estimator(REFERENCE).terms(data, target, reward).weights
        except (InputError, ConfigError) as exc:
            return exc.message
        slots, users, mean_z = drawn_slots(data, weights)
        if slots == 0:
            return (f"the weights of {REFERENCE} at slot 1 have {users[0]:.3g} effective users (at least "
                    f"{MIN_SLOT_USERS:g} needed) and a mean {mean_z[0]:.3g} standard errors from 1 (at most "
                    f"{MEAN_WEIGHT_Z:g}): the log hardly draws the lists of the target")
        return slots, users

    return data.cached(("assumption_check_slots", reward.kind), compute, target=target)  # type: ignore[no-any-return]


def _num(est: Estimator, data: LoggedData, target: Target, reward: Reward, slots: int,
         terms: Terms | None = None) -> FloatArray:
    """``est``'s per-impression terms of ``reward`` on its top ``slots`` slots (``terms``' where they are the whole
    list's), kept with the log so that a difference against a baseline reuses them."""
    def compute() -> FloatArray:
        if terms is not None and slots >= data.k:
            return terms.num.copy()
        t = est.terms(data, target, _truncated(reward, data.k, slots))
        if t.den is not None:
            raise InputError(f"estimator {est.name!r} gives self-normalised terms")
        return t.num.copy()

    key = ("assumption_check", est, reward.name, reward.kind, slots)
    return data.cached(key, compute, target=target)  # type: ignore[no-any-return]


def _same(own: FloatArray, other: FloatArray) -> bool:
    """Whether two estimators' terms agree on every impression up to rounding (IIPS and RIPS on slot 1 alone: the
    same weights; a z of their rounding noise would mean nothing)."""
    scale = max(float(np.max(np.abs(own), initial=0.0)), float(np.max(np.abs(other), initial=0.0)))
    return bool(np.max(np.abs(own - other), initial=0.0) <= 1e-9 * scale)


def _compare(est: Estimator, data: LoggedData, num: FloatArray) -> dict[str, Any] | None:
    from onlineeval.estimators.intervals import paired_mean

    paired = paired_mean(data, num)
    if paired is None:
        return None
    diff, se, skewness, clusters = paired
    return {"difference": diff, "se": se, "z": diff / se, "threshold": critical_value(skewness, clusters, diff),
            "skewness": skewness}


def assumption_check(est: Estimator, data: LoggedData, target: Target, reward: Reward,
                     terms: Terms) -> dict[str, Any]:
    """Notes of the check (the module docstring): ``assumption_check`` (what was compared, or why not),
    ``assumption_check_slots``, ``assumption_check_difference`` (``est`` - :data:`REFERENCE` on those slots),
    ``assumption_check_se``, ``assumption_check_z``, ``assumption_check_threshold`` (the critical value on the
    difference's side) and ``assumption_check_skewness``; a warning under ``"warnings"`` where ``|z|`` reaches the
    threshold. Nothing where the check does not apply (:func:`applies`)."""
    from onlineeval.estimators.base import get_estimator

    families = applies(est, reward)
    if not families:
        return {}
    why = _not_made(est, data, reward)
    drawn = _slots(data, target, reward) if why is None else why
    if isinstance(drawn, str):
        return {"assumption_check": f"not made: {drawn}"}
    slots, _ = drawn
    try:
        own = _num(est, data, target, reward, slots, terms)
        other = _num(get_estimator(REFERENCE), data, target, reward, slots)
    except (InputError, ConfigError) as exc:
        return {"assumption_check": f"not made: {exc.message}"}
    if _same(own, other):
        return {"assumption_check": f"not made: {est.name} and {REFERENCE} give every impression the same term on "
                                    f"{_top(slots)} (the slots compared)"}
    res = _compare(est, data, own - other)
    if res is None:
        return {"assumption_check": "not made: the difference has no standard error (fewer than two users, or "
                                    "constant)"}
    notes: dict[str, Any] = {"assumption_check": _reference_text(slots, data.k), "assumption_check_slots": slots,
                             **{f"assumption_check_{key}": value for key, value in res.items()}}
    if abs(res["z"]) >= res["threshold"]:
        notes["warnings"] = [check_text(est, "value", res, slots, data.k, families)]
    return notes


def assumption_check_difference(est: Estimator, data: LoggedData, target: Target, baseline: Target, reward: Reward,
                                diff: dict[str, Any], pair: str, warnings: list[str]) -> None:
    """The paired difference's own check (``onlineeval estimate --baseline``; record ``diff`` of
    :func:`~onlineeval.estimators.log_estimates.paired_difference`, prefix ``pair``): ``est``'s difference target -
    baseline against :data:`REFERENCE`'s on the slots drawn for both (each side's bias need not cancel), a warning
    added to ``warnings`` and the record's own where it crosses; nothing where the check does not apply or cannot
    be made (each estimate's notes say why) or the difference is undefined."""
    from onlineeval.estimators.base import get_estimator

    families = applies(est, reward)
    if not families or diff.get("se") is None or _not_made(est, data, reward) is not None:
        return
    drawn = [_slots(data, t, reward) for t in (target, baseline)]
    if any(isinstance(d, str) for d in drawn):
        return
    slots = min(d[0] for d in drawn)  # type: ignore[index]
    ref = get_estimator(REFERENCE)
    try:
        own = _num(est, data, target, reward, slots) - _num(est, data, baseline, reward, slots)
        other = _num(ref, data, target, reward, slots) - _num(ref, data, baseline, reward, slots)
    except (InputError, ConfigError):
        return
    res = None if _same(own, other) else _compare(est, data, own - other)
    if res is not None and abs(res["z"]) >= res["threshold"]:
        warnings.append(f"{pair}: {check_text(est, 'difference', res, slots, data.k, families)}")
        diff.setdefault("warnings", []).append(warnings[-1])


def verdict_text(notes: dict[str, Any]) -> str | None:
    """What the check found on this log, for the catalogue's warning of an estimator declared biased under a click
    family (:func:`~onlineeval.estimators.bias_advice.metric_bias_warning`): its z on the slots compared and the
    threshold, the bias it would see (the threshold times the difference's SE) where it stays silent, or where to
    read why it was not made; ``None`` where the check does not apply (no note)."""
    made = notes.get("assumption_check")
    if made is None:
        return None
    z = notes.get("assumption_check_z")
    if z is None:
        return "not checked on this log (its notes, assumption_check, say why)"
    slots, se, threshold = (notes[f"assumption_check_{key}"] for key in ("slots", "se", "threshold"))
    where = "" if made.endswith("the whole list") else f" on {_top(slots)} (deeper slots not compared)"
    if abs(z) >= threshold:
        return (f"on this log the assumption check finds it: the value{where} is {abs(z):.1f} standard errors "
                f"{'below' if z < 0 else 'above'} that of {REFERENCE} (its own warning)")
    return (f"on this log the assumption check finds no sign of it for this target: the value{where} is "
            f"{abs(z):.1f} standard errors of the paired difference from that of {REFERENCE}, below the "
            f"{threshold:.2f} it warns from (a bias beyond about {threshold * se:.2g} there would show)")


def _top(slots: int) -> str:
    return "slot 1" if slots == 1 else f"slots 1-{slots}"


def _reference_text(slots: int, k: int) -> str:
    where = "the whole list" if slots >= k else f"{_top(slots)} (the weights of deeper slots hardly drawn)"
    return f"{REFERENCE} on {where}"


def check_text(est: Estimator, what: str, res: dict[str, Any], slots: int, k: int, families: tuple[str, ...]) -> str:
    """The warning of an estimator whose ``what`` ("value", "difference") on the top ``slots`` slots is ``res``'s
    z from :data:`REFERENCE`'s; ``families``: where it is declared biased and the reference is not."""
    z = res["z"]
    where = "" if slots >= k else f" on {_top(slots)} (the reference's weights deeper are hardly drawn)"
    return (f"{est.name}: its {what}{where} is {abs(z):.1f} standard errors of the paired difference "
            f"{'below' if z < 0 else 'above'} that of {REFERENCE} ({est.name} - {REFERENCE} = "
            f"{res['difference']:+.4g} +- {res['se']:.2g}; warned from {res['threshold']:.2f} SE on this side, "
            f"{CHECK_Z:g} plus the skewness's allowance): the users of this log break {est.name}'s assumption for "
            f"this target ({REFERENCE} assumes only that a slot's clicks do not depend on the documents below it; "
            f"{est.name} is biased e.g. under {', '.join(families)} clicks), so its estimate is biased here by "
            f"about that difference; use {REFERENCE} or another estimator that assumes less")
