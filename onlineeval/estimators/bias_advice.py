"""Bias advice for a log's estimates: which estimators can run on a log, and the warning of an estimator known to
be biased for the metric (:func:`metric_bias_warning`, :func:`adaptive_bias_warning`).

An estimator declares the click-model families it is unbiased and biased under for each reward kind
(``Estimator.unbiased_under`` / ``biased_under``; ``("any", kind)`` there: unbiased under every family, or biased
by an option rather than the click model, as clipped IPS, which warns of its own bias). For an estimator biased
for the metric's kind under some family, the warning names the metric, the families and the estimators unbiased
there that run on this log (:func:`runnable_estimators`: the log's propensity forms and logging policy). Adaptive
IPS's unbiasedness is that of the behaviours it chose on the log (:data:`BEHAVIOUR_ESTIMATORS`, read back from its
result's notes by :func:`chosen_behaviours`), not its declaration. The warning ends with what the estimate's assumption
check against RIPS found on this log (:mod:`~onlineeval.estimators.assumption_check`). Used by
:func:`onlineeval.estimators.log_estimates.estimate_targets` (``onlineeval estimate`` and
:func:`onlineeval.estimate`); :func:`~onlineeval.estimators.log_estimates.check_needs` names what a log lacks with
:func:`missing_needs` and the estimators that could run with :func:`runnable_estimators`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from onlineeval.estimators.base import Estimator, Reward
    from onlineeval.io.logged import LoggedLog


def _log_key(field: str) -> str:
    """The log's JSON key of a propensity array of :class:`~onlineeval.estimators.base.LoggedData`
    (``p_prefix`` -> ``propensities.prefix``)."""
    from onlineeval.io.logged import FORMS

    keys = {attr: f"propensities.{form}" for form, attr in FORMS.items()}
    return keys.get(field, field)


def missing_needs(log: LoggedLog, est: Estimator) -> list[str]:
    """What ``est`` needs that the read log lacks, named by the log's keys: propensity forms
    (``propensities.list``, ...) and the logging policy (a ``logger`` on every line) with the methods
    :meth:`~onlineeval.estimators.base.Estimator.logger_needs` names."""
    data = log.data
    out = [_log_key(f) for f in est.needs if getattr(data, f, None) is None]
    lacking = [m for m in est.logger_needs() if not callable(getattr(data.logger, m, None))]
    if lacking:
        out.append("the logging policy (a 'logger' on every line; recorded 'propensities' are not enough: it reads "
                   f"the policy's {', '.join(lacking)})" if data.logger is None else
                   f"a logging policy with {', '.join(lacking)}")
    return out


def runnable_estimators(log: LoggedLog, kind: str | None = None) -> list[str]:
    """The registered estimators that could run on ``log`` (its propensity forms and logging policy; those without
    a default instance judged by their propensities alone) and, given a reward ``kind``, estimate it."""
    from onlineeval.estimators import available_estimators, estimator_class

    out = []
    for name in available_estimators():
        cls = estimator_class(name)
        if kind is not None and kind not in cls.rewards:
            continue
        try:
            default = cls()
        except (TypeError, ValueError):  # no default instance: judged by its propensities alone
            ok = all(getattr(log.data, f, None) is not None for f in cls.needs)
        else:
            ok = not missing_needs(log, default)
        if ok:
            out.append(name)
    return out


#: the click-model families the estimators declare their bias under (``Estimator.unbiased_under``)
FAMILIES = ("pbm", "cascade", "dcm")


#: the estimator whose weights each adaptive IPS behaviour uses (its unbiasedness is that estimator's)
BEHAVIOUR_ESTIMATORS = {"independent": "iips", "cascade": "rips", "standard": "ips"}


def chosen_behaviours(notes: dict[str, Any] | None) -> dict[str, str] | None:
    """Adaptive IPS's behaviours on a log from its result's notes (``{user type: behaviour}``; ``{"all": b}`` for one
    fixed behaviour), ``None`` when unknown (not run, undefined)."""
    b = (notes or {}).get("behaviours")
    if isinstance(b, str):
        return {"all": b}
    return dict(b) if isinstance(b, dict) and b else None


def _families_under(name: str, kind: str) -> set[str]:
    from onlineeval.estimators import estimator_class

    under = estimator_class(name).unbiased_under
    return set(FAMILIES) if ("any", kind) in under else {f for f in FAMILIES if (f, kind) in under}


def metric_bias_warning(est: Estimator, reward: Reward, log: LoggedLog,
                        chosen: dict[str, str] | None = None, notes: dict[str, Any] | None = None) -> str | None:
    """The warning of an estimator known to be biased for the metric's reward kind (its ``biased_under`` names the
    kind under a click family), naming the estimator, the metric and its kind, the click models it is biased under
    and the estimators unbiased there that could run on this log; ``None`` when it is not, or when its bias comes
    from an option rather than the click model (``("any", kind)``: clipped IPS, whose bias is estimated and warned
    on its own). ``chosen``: adaptive IPS's behaviours for this target on this log (:func:`chosen_behaviours`):
    adaptive IPS is named among the unbiased estimators only when each chosen behaviour's weights (iips, rips, ips:
    :data:`BEHAVIOUR_ESTIMATORS`) are unbiased there, with a condition when its choice is unknown, and its own
    estimate is warned when a chosen behaviour's weights are biased for the metric (:func:`adaptive_bias_warning`).
    ``notes``: the estimate's, whose assumption check against RIPS (:mod:`~onlineeval.estimators.assumption_check`)
    says what this log shows of that bias (:func:`~onlineeval.estimators.assumption_check.verdict_text`)."""
    if est.name == "adaptive_ips":
        return adaptive_bias_warning(reward, log, chosen, fixed=not getattr(est, "chooses_from_log", True))
    from onlineeval.estimators.assumption_check import verdict_text

    kind = reward.kind
    unbiased_under, biased_under = est.bias_families()  # this instance's (the direct method's: its model's)
    declared = {f for f, k in biased_under if k == kind}
    if not declared or "any" in declared:
        return None
    biased = [f for f in FAMILIES if f in declared]
    unbiased = [f for f in FAMILIES if (f, kind) in unbiased_under]
    text = _bias_text(est.name, reward, log, biased, unbiased, chosen)
    verdict = None if notes is None else verdict_text(notes)
    return text if verdict is None else f"{text}; {verdict}"


def _bias_text(name: str, reward: Reward, log: LoggedLog, biased: list[str], unbiased: list[str],
               chosen: dict[str, str] | None, lead: str | None = None) -> str:
    from onlineeval.estimators import estimator_class

    kind = reward.kind

    def covers(other: str) -> bool:
        if other == "adaptive_ips" and chosen is not None:  # what it chose on this log, not its declaration
            return all(set(biased) <= _families_under(BEHAVIOUR_ESTIMATORS[b], kind) for b in chosen.values())
        under = estimator_class(other).unbiased_under
        return ("any", kind) in under or all((f, kind) in under for f in biased)

    others = [n if n != "adaptive_ips" or chosen is not None else
              "adaptive_ips (if the behaviours it chooses cover each user type)"
              for n in runnable_estimators(log, kind) if n != name and covers(n)]
    what = f"{reward.name} ({'an additive' if kind == 'additive' else 'a first-click'} reward)"
    where = (f"when clicks follow {', '.join(biased)} (unbiased only under {', '.join(unbiased)} clicks): its "
             "interval then covers" if unbiased else
             f"under every click model ({', '.join(biased)}): its interval covers")
    return (f"{lead or name + ' is'} biased for {what} {where} the target's value less often than its level says; "
            f"estimators unbiased for {reward.name} there that run on this log: " + (", ".join(others) or "none"))


def adaptive_bias_warning(reward: Reward, log: LoggedLog, chosen: dict[str, str] | None,
                          fixed: bool = False) -> str | None:
    """Adaptive IPS's warning when a behaviour it chose on this log (``chosen``, :func:`chosen_behaviours`) weights
    as an estimator biased for the metric (the independent behaviour: IIPS's item weights, biased for additive
    rewards under cascade and DCM clicks; for first-click rewards it is no candidate of the data-driven choice, but
    may be fixed): its estimate for those users is that estimator's. ``fixed``: the behaviours are the user's
    setting (``behaviours=...``), not a choice made on the log, and the warning says so. ``None`` when every
    chosen behaviour is unbiased under the top-down click models."""
    from onlineeval.estimators import estimator_class

    if not chosen:
        return None
    kind = reward.kind
    weak = {}
    for t, b in chosen.items():
        other = estimator_class(BEHAVIOUR_ESTIMATORS[b])
        declared = {f for f, k in other.biased_under if k == kind}
        if declared and "any" not in declared:
            weak.setdefault(b, []).append(t)
    if not weak:
        return None
    b, types = next(iter(weak.items()))
    other = BEHAVIOUR_ESTIMATORS[b]
    oc = estimator_class(other)
    biased = [f for f in FAMILIES if (f, kind) in oc.biased_under]
    unbiased = [f for f in FAMILIES if (f, kind) in oc.unbiased_under]
    who = "every impression" if types == ["all"] else f"user type{'s' if len(types) > 1 else ''} {', '.join(types)}"
    if fixed:
        setting = b if types == ["all"] else "{" + ", ".join(f"{t}: {v}" for t, v in chosen.items()) + "}"
        lead = (f"adaptive_ips is fixed to the {b} behaviour ({other}'s weights) for {who} by the user's setting "
                f"(behaviours={setting}), not chosen on this log, so its estimate there is {other}'s, which is")
    else:
        lead = (f"adaptive_ips chose the {b} behaviour ({other}'s weights) for {who} on this log, so its estimate "
                f"there is {other}'s, which is")
    text = _bias_text("adaptive_ips", reward, log, biased, unbiased, None, lead)
    if fixed and kind == "first_click" and b == "independent":
        text += ("; without the behaviours option adaptive_ips chooses among cascade and standard for a first-click "
                 "metric and would not take independent")
    return text
