r"""Estimates of targets from a read log: the one computation behind ``onlineeval estimate`` and
:func:`onlineeval.api.estimate`.

Both read a log (:mod:`onlineeval.io.logged`), map each target ranker into its id space
(:class:`onlineeval.io.logged.TargetMap`) and then call :func:`estimate_targets`, so the CLI and
the API print the same numbers, warnings and conventions. For each estimator and target it
estimates

.. math::

    V(\pi) = \mathbb E_q\,\mathbb E_{\mathbf s\sim\pi(q)}\,\mathbb E[R \mid q, \mathbf s]

with its CLT interval (delta method over clusters: users, or impressions without user ids; t with Bell and
McCaffrey's degrees of freedom, :func:`~onlineeval.estimators.intervals.working_df`), an
optional cluster bootstrap interval and the weight diagnostics; with a baseline also each target
minus the baseline on the same impressions (:func:`paired_difference`: the delta method of
Deng, Knoblich and Lu 2018 for two ratios on the same clusters).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from onlineeval.estimators.bias_advice import (
    _log_key,
    chosen_behaviours,
    metric_bias_warning,
    missing_needs,
    runnable_estimators,
)
from onlineeval.estimators.intervals import (  # noqa: F401  (re-exported: their home was this module)
    BOOTSTRAP_SE,
    FEW_CLUSTERS,
    clt_interval,
    clt_quantile,
    difference_df,
    differences_held_text,
    effective_clusters,
    few_clusters_text,
    influence_skewness,
    lopsided_difference,
    refused_paired_text,
)

from onlineeval.estimators.log_bootstrap import SHARED_RESAMPLES_TEXT, SharedResamples, boot_rng  # re-exported
from onlineeval.estimators.rewards import metric_range  # noqa: F401  (re-exported: its home was this module)
from onlineeval.estimators.target_support import (
    never_logged_text,
    shorter_target_text,
    support_count,
    unseen_refused,
)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from onlineeval.estimators.base import Estimator, LoggedData, Reward, Target
    from onlineeval.io.logged import LoggedLog, TargetMap

#: Online metrics a log's estimates can be of (the reward of each impression).
METRICS = ("clicks_per_query", "reciprocal_rank", "abandonment")
#: Score-tie rules for ranking a target run.
TIES = ("docno_desc", "input_order")


def check_settings(metric: str, alpha: float, bootstrap: int, ties: str, prefix: str = "--") -> None:
    """The estimate command's and :func:`onlineeval.estimate`'s shared settings checked, each error naming the
    setting as the caller spells it (``prefix`` ``"--"`` for the CLI's options, ``""`` for the API's arguments)."""
    from onlineeval.errors import MAX_RESAMPLES, ConfigError, must_be_one_of

    from onlineeval.estimators.rewards import UTILITY_PREFIX, get_reward

    if metric.startswith(UTILITY_PREFIX):  # the metric-user utility: the metric checked by building the reward
        try:
            get_reward(metric, 1)
        except ConfigError as exc:
            raise ConfigError((f"{prefix}metric",), exc.message) from None
    elif metric not in METRICS:
        raise ConfigError((f"{prefix}metric",), must_be_one_of(METRICS, metric, note=(
            f" or {UTILITY_PREFIX}<metric> (clicks weighted by an offline metric's C/W/L weights, e.g. "
            "utility:RBP(p=0.8), utility:nDCG@10)")))
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ConfigError((f"{prefix}alpha",), f"must be in (0, 1), got {alpha!r}")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, numbers.Integral):
        raise ConfigError((f"{prefix}bootstrap",), f"must be a whole number: 0 (no bootstrap) or >= 100 replicates, "
                          f"got {bootstrap!r}")
    if bootstrap != 0 and not 100 <= bootstrap <= MAX_RESAMPLES:
        raise ConfigError((f"{prefix}bootstrap",), f"must be 0 (no bootstrap) or 100 to {MAX_RESAMPLES:,} replicates, "
                          f"got {bootstrap}")
    if ties not in TIES:
        raise ConfigError((f"{prefix}ties",), must_be_one_of(TIES, ties, note=" (runs are ranked without qrels)"))


def parse_estimators(text: str, key: str = "--estimator") -> list[str]:
    """Names of ``a,b`` (known, distinct, none empty), or a ``ConfigError`` at ``key`` listing the allowed."""
    from onlineeval.errors import ConfigError, must_be_one_of
    from onlineeval.estimators import available_estimators

    parts = [x.strip() for x in text.split(",")]
    names = [x for x in parts if x]
    if not names:
        raise ConfigError((key,), "give at least one estimator; allowed: " + ", ".join(available_estimators()))
    if len(names) != len(parts):
        raise ConfigError((key,), f"{text!r} has an empty estimator name (two commas in a row, or a comma at the "
                          "start or end); give names separated by single commas, e.g. ips,snips")
    for name in names:
        if name not in available_estimators():
            raise ConfigError((key,), must_be_one_of(available_estimators(), name))
    if len(set(names)) != len(names):
        raise ConfigError((key,), "an estimator is named twice")
    return names


def check_needs(log: LoggedLog, estimators: list[Estimator]) -> None:
    """Every estimator finds what it reads in the log: the propensity forms and, for some, the logging policy
    (else an ``InputError`` naming them by the log's keys, and the estimators that could run)."""
    from onlineeval.errors import InputError

    for est in estimators:
        missing = missing_needs(log, est)
        if log.item_refusal is not None and "propensities.item" in missing:
            raise InputError(f"estimator {est.name!r} needs item propensities, withheld: "
                             f"{log.item_refusal[0]}", log.path, log.item_refusal[1])
        if missing:
            have = ("a logging policy (all propensity forms computed from it)" if log.data.logger is not None else
                    ", ".join(_log_key(f) for f in log.forms) or "no propensities")
            raise InputError(
                f"estimator {est.name!r} needs {', '.join(missing)}; the log carries {have}; estimators that "
                f"could run on it: {', '.join(runnable_estimators(log)) or 'none'}", log.path)


def check_rewards(estimators: list[Estimator], reward: Reward, key: str = "--metric") -> None:
    """Every estimator can estimate the reward's kind (else a ``ConfigError`` at ``key``)."""
    from onlineeval.errors import ConfigError
    from onlineeval.estimators import available_estimators, estimator_class

    for est in estimators:
        if reward.kind not in est.rewards:
            ok = [n for n in available_estimators() if reward.kind in estimator_class(n).rewards]
            raise ConfigError((key,), f"estimator {est.name!r} cannot estimate {reward.name} "
                              f"({reward.kind} rewards); estimators that can: {', '.join(ok)}")


def range_note(value: float, reward: Reward, k: int) -> str | None:
    """A note when an estimate lies outside the values the metric can take (``None`` inside)."""
    lo, hi = metric_range(reward, k)
    if lo - 1e-12 <= value <= hi + 1e-12 or not math.isfinite(value):
        return None
    return (f"the estimate {value:.4g} lies outside the range of {reward.name}, [{lo:g}, {hi:g}]: no ranker can have "
            "that value; the estimator's weights do not sum to one per impression (an unbiased one leaves the range "
            "by noise; a biased one, see its warnings, also by its bias); report it clipped to the range, or use a "
            "self-normalised list estimator (snips: a weighted mean of the impressions' metric) that stays in it")


def _cluster_sums(data: LoggedData, num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    if data.user is None:
        return num, den
    inv, g = data.user_groups  # np.unique's inverse, computed once per log
    return np.bincount(inv, num, g), np.bincount(inv, den, g)


#: a clipped estimate whose estimated clipping bias exceeds this many SEs is warned: its interval then misses the
#: target's value (cap 5 in the audit of 2026-12-02: bias 16-35 SE, 0 of 400 covered, 378-381 of the clipped value)
CLIPPING_BIAS_SE = 0.5


def _has_reward_model(estimator: Estimator) -> bool:
    """Whether the estimate has a click-model part besides its weighted terms (the doubly robust estimators)."""
    from onlineeval.estimators.model_based import ClickModelEstimator

    return isinstance(estimator, ClickModelEstimator)


def paired_difference(
    estimator: Estimator,
    data: LoggedData,
    target: Target,
    baseline: Target,
    reward: Reward,
    alpha: float = 0.05,
    n_boot: int = 0,
    rng: np.random.Generator | None = None,
    whole: np.ndarray | None = None,
) -> dict[str, Any]:
    r"""``estimator``'s estimate for ``target`` minus that for ``baseline`` on the same log.

    Standard error from the per-cluster influence values (module docstring), interval and two-sided p-value of
    :math:`\Delta = 0` with :math:`t_{\nu}` quantiles (:func:`clt_quantile`; :math:`\nu` Bell and McCaffrey's degrees
    of freedom of the difference's clustered variance, :func:`difference_df`, ``df``); with ``n_boot`` >= 100 a paired
    cluster-bootstrap percentile interval (clusters resampled once for both estimates). For an estimator whose CLT
    holds a data-driven choice fixed (:meth:`~onlineeval.estimators.base.Estimator.clt_holds_fixed`: adaptive IPS,
    dm) and that resamples it (its ``bootstrap_estimates``), the bootstrap's SD replaces the delta-method standard
    error in ``se``, the interval and the p-value (``se_source``). ``whole`` ``(n_boot, 2)``: its
    ``bootstrap_estimates`` of ``[target, baseline]`` computed by the caller (:class:`SharedResamples`).

    Raises
    ------
    InputError
        When either estimate is undefined (no positive weight) or rests on weights that are all 0
        (an estimator with weights: its estimate, e.g. IPS's 0 with standard error 0, says nothing about
        the target), or a bootstrap resample gives one of them no positive weight.
    """
    import numpy as np
    from scipy.stats import t as t_dist

    from onlineeval.errors import InputError
    from onlineeval.estimators.base import _weighted_clusters, check_cluster_sums
    from onlineeval.stats import ratio_linearization

    sums = []
    df_sides = []  # per side: (weights, clusters' sums of denominators), for the degrees of freedom
    weighted = []  # per side: whether the estimator weights its impressions (IPS family, DR) or not (DM)
    thin = []  # per side: weights on fewer than two clusters (users)
    for t in (target, baseline):
        terms = estimator.terms(data, t, reward)
        den = np.ones(data.n) if terms.den is None else np.asarray(terms.den, dtype=np.float64)
        x, y = _cluster_sums(data, np.asarray(terms.num, dtype=np.float64), den)
        check_cluster_sums(estimator.name, x, y, data.source, f" for {getattr(t, 'name', 'target')!r}")
        if y.sum() <= 0:
            raise InputError(f"estimator {estimator.name!r}: undefined for {getattr(t, 'name', 'target')!r} "
                             "(no positive weight)", data.source)
        # (slot weights are 0 at empty slots); a doubly robust estimate with every weight 0 is its reward model's
        # alone: defined, and its rows warn
        if terms.weights is not None and not np.any(terms.weights) and not _has_reward_model(estimator):
            raise InputError(f"estimator {estimator.name!r}: undefined for {getattr(t, 'name', 'target')!r}: every "
                             "weight is 0 (no logged impression agrees with it where the estimator needs it), so "
                             "its estimate and zero standard error say nothing about it", data.source)
        weighted.append(terms.weights is not None)
        df_sides.append((terms.weights, y))
        thin.append(terms.weights is not None and x.size >= 2 and _weighted_clusters(data, terms) < 2)
        sums.append((x, y))
    (xt, yt), (xb, yb) = sums
    g = xt.size
    degenerate = False
    if g >= 2:
        rt, et = ratio_linearization(xt, yt)
        rb, eb = ratio_linearization(xb, yb)
        d = et - eb
        se = float(math.sqrt(np.sum((d - d.mean()) ** 2) / (g * (g - 1))))
        # as for an estimate (Estimator.estimate): a weighted side whose weights rest on one cluster, or whose own
        # influence values do not vary (a delta-method se of 0: every weighted impression with the same reward), has
        # no measured spread; the difference's se would leave its uncertainty out (0 when both sides are so: a
        # 'p 0' certainty that is not there), so it is undefined, and so are the interval, p-value and bootstrap
        side_se = [math.sqrt(np.sum((e - e.mean()) ** 2) / (g * (g - 1))) for e in (et, eb)]
        flat = [v <= 1e-12 * max(abs(r), 1e-300) for v, r in zip(side_se, (rt, rb), strict=True)]
        names = (getattr(target, "name", "target"), getattr(baseline, "name", "baseline"))
        bare = [n for n, w, th, fl in zip(names, weighted, thin, flat, strict=True) if w and (th or fl)]
        degenerate = bool(bare)
        if degenerate:
            se = math.nan
    else:
        rt, rb, se = float(xt.sum() / yt.sum()), float(xb.sum() / yb.sum()), math.nan
    diff = rt - rb
    blo = bhi = math.nan
    se_source = "delta method"
    if n_boot and not degenerate:
        if rng is None:
            raise ValueError("n_boot > 0 needs rng")
        if g < 2:  # every resample would be the log itself: a zero-width interval, as if certain
            raise InputError("paired cluster bootstrap: the log has one cluster (user); a bootstrap needs at least "
                             "two", data.source)
        if whole is None:
            whole = estimator.bootstrap_estimates(data, [target, baseline], reward, n_boot, rng)
        reps = np.empty(n_boot) if whole is None else whole[:, 0] - whole[:, 1]
        block = max(1, min(n_boot, (1 << 22) // g))
        for start in range(0, n_boot if whole is None else 0, block):
            stop = min(start + block, n_boot)
            idx = rng.integers(0, g, size=(stop - start, g))
            st, sb = yt[idx].sum(axis=1), yb[idx].sum(axis=1)
            if (st <= 0).any() or (sb <= 0).any():
                raise InputError("paired cluster bootstrap: a resample gives an estimate no positive weight; "
                                 "too few clusters with weight for a bootstrap", data.source)
            reps[start:stop] = xt[idx].sum(axis=1) / st - xb[idx].sum(axis=1) / sb
        blo, bhi = (float(v) for v in np.quantile(reps, [alpha / 2, 1 - alpha / 2]))
        if whole is not None and estimator.clt_holds_fixed(reward) is not None:  # F-A: the delta method's is too small
            se, se_source = float(np.std(reps, ddof=1)), BOOTSTRAP_SE
    if se == 0 and diff != 0:
        # no spread measured (a model-based estimator's constant predictions): not a certain difference
        se = math.nan
    df = difference_df(data, df_sides) if math.isfinite(se) else math.nan  # none where the interval is undefined
    lo, hi = clt_interval(diff, se, df=df, alpha=alpha)
    skewness = influence_skewness(d) if math.isfinite(se) and g >= 2 and se_source != BOOTSTRAP_SE else math.nan
    if se > 0:
        p = float(2 * t_dist.sf(abs(diff) / se, df))
    else:
        p = math.nan if math.isnan(se) else 1.0  # se 0 and difference 0: the two estimates agree on every cluster
    return {
        "estimator": estimator.name,
        "target": getattr(target, "name", "target"),
        "baseline": getattr(baseline, "name", "baseline"),
        "estimate": diff,
        "se": se,
        "ci_low": lo,
        "ci_high": hi,
        "pvalue": p,
        "boot_low": blo,
        "boot_high": bhi,
        "n": data.n,
        "clusters": g,
        "df": df,
        "skewness": skewness,
        "se_source": se_source,
        # why the se is undefined although both estimates are defined (the caller words the warning)
        "unmeasured": bare if degenerate else [],
    }


#: the keys of an estimate's record (:func:`one_estimate`; JSON ``results``), each present (``None`` if undefined)
RESULT_KEYS = ("estimator", "target", "estimate", "se", "ci_low", "ci_high", "boot_low", "boot_high", "n", "clusters",
               "df", "skewness", "se_source", "assumption", "diagnostics", "warnings", "error")
#: the keys of a difference's record (:func:`estimate_targets`; JSON ``differences``)
DIFFERENCE_KEYS = ("estimator", "target", "baseline", "estimate", "se", "ci_low", "ci_high", "pvalue", "boot_low",
                   "boot_high", "n", "clusters", "df", "skewness", "se_source", "warnings", "error")
#: the keys of an estimate's ``diagnostics`` (the :class:`Diagnostics` fields and the derived ones)
DIAGNOSTIC_KEYS = ("ess", "max_weight", "top1_share", "zero_weight_share", "support_violations", "support_checked",
                   "never_logged", "notes", "weight_level", "weights_per_impression", "mean_weight", "mean_weight_se",
                   "mean_weight_expected", "ess_clusters", "ess_impressions", "mean_weight_off")


def undefined_record(est: Estimator, name: str, data: LoggedData, message: str) -> dict[str, Any]:
    """The record of an undefined estimate: every key of :data:`RESULT_KEYS` (numbers and diagnostics ``None``, the
    log's ``n`` and ``clusters``), so that a reader of the JSON never meets a missing key."""
    out: dict[str, Any] = dict.fromkeys(RESULT_KEYS)
    out.update({"estimator": est.name, "target": name, "n": data.n, "clusters": effective_clusters(data)[0],
                "assumption": est.assumption, "error": message, "warnings": [f"undefined: {message}"],
                "diagnostics": {**dict.fromkeys(DIAGNOSTIC_KEYS), "notes": {}}})
    return out


def one_estimate(
    est: Estimator, log: LoggedLog, data: LoggedData, tmap: TargetMap, rows: np.ndarray, reward: Reward,
    alpha: float, n_boot: int, seed: int, bootstrap_option: str = "--bootstrap N",
    chosen: dict[str, str] | None = None,
    shared: SharedResamples | None = None,
) -> dict[str, Any]:
    """One estimator's record of one target (:data:`RESULT_KEYS`): :meth:`Estimator.estimate
    <onlineeval.estimators.base.Estimator.estimate>`'s numbers (its t_df CLT interval; for an estimator whose CLT
    holds a data-driven choice fixed and a bootstrap asked for, the bootstrap's SD as ``se``), the bootstrap interval
    (or why there is none), the diagnostics and every warning (fewer than 30 effective clusters are warned once per
    log by :func:`estimate_targets`)."""
    from dataclasses import asdict, replace

    from onlineeval.errors import InputError

    name = tmap.target.name
    extra: list[str] = []
    rng = boot_rng(seed, est.name, name) if n_boot else None
    try:
        reps = shared.reps(est, data, rows, [name]) if shared is not None else None
        res = est.estimate(data, tmap.target, reward, alpha=alpha, n_boot=n_boot, rng=rng, boot_reps=reps)
    except InputError as exc:
        message = exc.message
        try:  # is it the bootstrap alone that fails (too few clusters with weight)?
            res = est.estimate(data, tmap.target, reward, alpha=alpha) if n_boot else None
        except InputError as own:  # the estimate's own error (the shared resamples are drawn before it is met)
            res, message = None, own.message
        if res is None:
            return undefined_record(est, name, data, message)
        # the bootstrap asked for and refused: its warnings say so instead of advising one (se_source stays delta)
        res = replace(res, n_boot=int(n_boot))
        extra.append(f"no bootstrap interval: {exc.message}")
    diag = res.diagnostics
    never = None
    if log.source == "log":  # written propensities: documents never logged are not known support violations
        never, _ = support_count(log, tmap, rows)
    out = {("estimate" if k == "value" else k): v for k, v in asdict(res).items()
           if k not in ("diagnostics", "reward", "alpha")}
    out["diagnostics"] = asdict(diag)
    out["diagnostics"]["never_logged"] = never
    out["diagnostics"]["ess_impressions"] = diag.ess_impressions
    out["diagnostics"]["mean_weight_off"] = diag.mean_weight_off()
    out["warnings"] = res.warnings(bootstrap_option, clusters=False) + extra
    bias = diag.notes.get("clipping_bias_estimate")
    if bias is not None and bias != 0 and not (abs(bias) <= CLIPPING_BIAS_SE * res.se):
        out["warnings"].append(
            f"clipping bias estimated at {bias:+.4g} ({abs(bias) / res.se:.1f} standard errors): the interval is "
            "centred on the clipped value, not the target's; a larger cap (or ips / snips) removes it"
            if res.se > 0 else f"clipping bias estimated at {bias:+.4g}: the estimate is the clipped value, not the "
            "target's; a larger cap (or ips / snips) removes it")
    # adaptive IPS's own behaviours from its notes; the others' advice from what it chose for this target (chosen)
    biased = metric_bias_warning(est, reward, log, chosen_behaviours(diag.notes) if est.name == "adaptive_ips" else
                                 chosen, diag.notes)
    if biased:
        out["warnings"].append(biased)
    outside = range_note(res.value, reward, data.k)
    if outside:
        out["warnings"].append(outside)
    if diag.zero_weight_share == 1.0:
        zero = "zero " if res.se == 0 else ""
        out["warnings"].append(
            "every weight is 0: no logged impression agrees with the target where this estimator needs it, so the "
            + ("estimate is its click model's alone (the direct method's): nothing in the log corrects it"
               if _has_reward_model(est) else f"estimate (and its {zero}standard error) says nothing about the target"))
    out["error"] = None
    return {k: out[k] for k in RESULT_KEYS}


def user_fixed_behaviours(est: Any) -> str | None:
    """The user's setting that fixed an estimator's behaviours (``'behaviours=cascade'``, ``'behaviours={0: cascade,
    1: standard}'``): adaptive IPS given its behaviours chooses nothing on the log. ``None`` for the data-driven choice
    and for every other estimator."""
    if getattr(est, "chooses_from_log", True) or getattr(est, "behaviours", None) is None:
        return None
    b = est.behaviours
    return "behaviours=" + (b if isinstance(b, str) else "{" + ", ".join(f"{t}: {v}" for t, v in b) + "}")


def user_fixed_text(est: Any) -> str | None:
    """'adaptive_ips's behaviours are fixed by the user's setting (behaviours=cascade), not chosen on this log' when
    the user fixed them (:func:`user_fixed_behaviours`), else ``None``: the one wording of the estimate command's se
    legend and of the bootstrap convention (:func:`bootstrap_resample_text`)."""
    setting = user_fixed_behaviours(est)
    return None if setting is None else (f"{est.name}'s behaviours are fixed by the user's setting ({setting}), not "
                                         "chosen on this log")


#: the bootstrap convention's clause when the estimators are not known (worded for either setting)
RESAMPLE_TEXT_UNKNOWN = ("adaptive_ips's data-driven choice of behaviours (unless the user fixed its behaviours) is "
                         "run again in every resample, and dm's click model (when given by name) is fitted again on "
                         f"every resample, once for every target and difference ({SHARED_RESAMPLES_TEXT})")


def bootstrap_resample_text(estimators: Sequence[Any] | None) -> str:
    """What the bootstrap makes again in every resample, worded by the run's settings: adaptive IPS's data-driven
    choice of behaviours is run again, but nothing is chosen when the user fixed its behaviours
    (:func:`user_fixed_text`); dm's click model given by name is fitted again, a given fitted model stays as given.
    '' when no estimator of the run does either; :data:`RESAMPLE_TEXT_UNKNOWN` when ``estimators`` is ``None``."""
    if estimators is None:
        return RESAMPLE_TEXT_UNKNOWN
    parts = []
    for est in estimators:
        fixed = user_fixed_text(est)
        if fixed is not None:
            parts.append(f"{fixed}, so nothing is chosen again in the resamples: its terms are fixed per "
                         "impression and their cluster sums are resampled")
        elif getattr(est, "chooses_from_log", False):
            parts.append(f"{est.name}'s data-driven choice of behaviours is run again in every resample "
                         f"({SHARED_RESAMPLES_TEXT})")
        elif getattr(est, "refits_in_bootstrap", None) is True:
            parts.append(f"{est.name}'s click model (given by name) is fitted again on every resample, once for "
                         f"every target and difference ({SHARED_RESAMPLES_TEXT})")
        elif getattr(est, "refits_in_bootstrap", None) is False:
            parts.append(f"{est.name}'s click model is the fitted model given, the same in every resample")
    return "; ".join(parts)


def estimate_conventions(lg: LoggedLog, metric: str, reward: Reward, alpha: float, ties: str,
                         bootstrap: int, seed: int, estimators: Sequence[Any] | None = None) -> dict[str, Any]:
    """The conventions every estimate of a log is computed under (printed by the CLI, returned
    by :func:`onlineeval.api.estimate`): metric and reward, interval, cluster unit,
    propensity source, logging policy, tie rule, target depth, support, bootstrap, seed. The bootstrap's
    convention names what it makes again in every resample for the run's ``estimators``
    (:func:`bootstrap_resample_text`; not given: worded for either setting)."""
    from onlineeval.io.logged import LogPolicy

    data = lg.data
    if data.user is None:
        unit = "impression (the log has no user ids)"
    elif lg.no_user:
        unit = f"user ({lg.no_user} impressions without a user are clusters of their own)"
    else:
        unit = "user"
    conventions = {
        "metric": metric,
        "reward": reward.describe(),
        "alpha": alpha,
        "interval": ("estimate +- t_df(1-alpha/2) x se, se by the delta method over clusters (CR1), df Bell and "
                     "McCaffrey's degrees of freedom of that variance under a working model of independent rewards "
                     "of equal variance (G - 1 for G clusters of equal weight, fewer where a few clusters hold the "
                     "weight; each record's df); for estimators whose delta method holds a data-driven choice "
                     "fixed (adaptive_ips, dm), with a bootstrap, se = the bootstrap's SD (se_source); skewness: "
                     "the clusters' influence values' (a lopsided interval is warned: intervals.lopsided_text)"),
        "cluster_unit": unit,
        "propensity_source": (f"the log ({', '.join(lg.forms)})" if lg.source == "log" else
                              f"{lg.source} (propensities computed from the logged scores)"),
        "logging_policy": ("; ".join(lg.data.logger.describe()) if isinstance(lg.data.logger, LogPolicy) else
                           "not given (propensities written in the log)"),
        "item_propensities": ("; ".join(lg.data.logger.item_methods()) if isinstance(lg.data.logger, LogPolicy) else
                              "as written in the log" if "p_item" in lg.forms else "none (not in the log)"),
        "ties": f"{ties} (runs ranked by score; ties broken by "
                + ("document id descending, as trec_eval)" if ties == "docno_desc" else "file order)"),
        "target_depth": "a target's list for a query is its top k, k = the longest list the log shows for it",
        "support": ("target lists the logging policy gives probability 0" if lg.source != "log" else
                    "unknown: the log carries no logging policy (written propensities give the probabilities of "
                    "shown events only); never_logged counts impressions whose target list holds a document the log "
                    "never shows for the query (weight 0 there: a sampling zero if the policy could show it)"),
        "bootstrap": bootstrap,
        "bootstrap_interval": ("none" if not bootstrap else
                               f"{bootstrap} cluster resamples, percentile; generator numpy default_rng([seed, "
                               "crc32(estimator), crc32(target)(, crc32(baseline))])" + "".join(
                                   f"; {t}" for t in [bootstrap_resample_text(estimators)] if t)),
        "seed": seed,
    }
    return conventions


@dataclass(frozen=True)
class LogEstimates:
    """What :func:`estimate_targets` computes.

    Attributes
    ----------
    results:
        One dict per estimator and target (baseline included): ``estimator, target, estimate,
        se, ci_low, ci_high, ...``, ``diagnostics``, ``warnings`` and ``error`` (``None``, or
        why the estimate is undefined).
    differences:
        With a baseline, one dict per estimator and target: the target minus the baseline (``estimate`` ``None``
        with an ``error`` where either estimate is undefined or has every weight 0), with ``warnings``: those of
        its two estimates (prefixed ``"<estimator> <target>: "``), its estimator's differences' and a failed
        paired bootstrap's.
    warnings:
        Warnings about the log and the targets (the estimates' own are in their rows).
    """

    results: list[dict[str, Any]]
    differences: list[dict[str, Any]]
    warnings: list[str]


def estimate_targets(
    lg: LoggedLog,
    maps: list[TargetMap],
    estimators: list[Estimator],
    reward: Reward,
    *,
    alpha: float = 0.05,
    bootstrap: int = 0,
    seed: int = 0,
    baseline: TargetMap | None = None,
    sources: dict[str, str] | None = None,
    bootstrap_option: str = "--bootstrap N",
) -> LogEstimates:
    """Every estimator's estimate of every target (and the baseline), and each target minus the baseline.

    Parameters
    ----------
    lg:
        The read log.
    maps:
        The targets in the log's id space (the baseline not among them).
    estimators, reward:
        Constructed estimators (checked with :func:`check_needs` and :func:`check_rewards`)
        and the reward of the metric at the log's depth.
    alpha, bootstrap, seed:
        Interval level; cluster-bootstrap replicates (0 = none) and the seed of their
        generators (:func:`boot_rng`).
    baseline:
        Each target minus it, paired on the impressions of queries both rank.
    sources:
        ``{target name: where it comes from}`` for the warnings (a run file's path);
        default "the target".
    bootstrap_option:
        How the warnings spell asking for a bootstrap (the CLI's ``--bootstrap N``, the API's ``bootstrap=N``).

    Returns
    -------
    LogEstimates
        Undefined estimates are rows with an ``error``, not exceptions; a bootstrap that fails
        alone leaves the CLT interval and a warning.
    """
    import numpy as np

    from onlineeval.errors import InputError
    from onlineeval.estimators.assumption_check import assumption_check_difference  # against rips on the log
    from onlineeval.estimators.dm_dr_check import dr_check_difference  # dm against dr on the same log
    from onlineeval.estimators.model_based import cross_fit_difference  # a DR fitted on its log (folds 1)
    from onlineeval.io.logged import LogPolicy

    data = lg.data
    sources = sources or {}
    warnings: list[str] = []
    few = few_clusters_text(data)
    if few:
        warnings.append(few)
    results: list[dict[str, Any]] = []
    everyone = list(maps) + ([baseline] if baseline is not None else [])
    shared = SharedResamples(data, everyone, reward, bootstrap, seed)
    for tmap in everyone:
        name = tmap.target.name
        rows = np.flatnonzero(tmap.ranked[data.query])
        if rows.size < data.n:
            missing = int((~tmap.ranked).sum())
            warnings.append(
                f"{name}: {missing} of {len(lg.queries)} log queries are not in {sources.get(name, 'the target')}; "
                f"their {data.n - rows.size} impressions are left out of its estimates")
        shorter = shorter_target_text(name, lg, tmap, sources.get(name, "the target"),
                                      [e.name + (" (where it chooses the standard behaviour)"
                                                 if e.name == "adaptive_ips" else "")
                                       for e in estimators if "p_list" in e.needs])
        if shorter:
            warnings.append(shorter)
        if tmap.unseen:
            count, _ = support_count(lg, tmap, rows)
            warnings.append(never_logged_text(name, tmap, count) if not unseen_refused(lg) else
                            f"{name}: ranks {len(tmap.unseen)} documents the logging policy cannot show for their "
                            f"query ({len({u.query for u in tmap.unseen})} queries, {count} impressions): support "
                            "violations (probability 0), the estimates are biased there")
        sub = data if rows.size == data.n else data.take(rows)
        if rows.size < data.n and not few:
            few_sub = few_clusters_text(sub)
            if few_sub:
                warnings.append(f"{name} (the impressions of the queries it ranks): {few_sub}")
        # adaptive IPS first: the others' bias advice names it according to the behaviours it chose for this target
        order = sorted(range(len(estimators)), key=lambda i: estimators[i].name != "adaptive_ips")
        done: dict[int, dict[str, Any]] = {}
        chosen = None
        for i in order:
            est = estimators[i]
            done[i] = one_estimate(est, lg, sub, tmap, rows, reward, alpha, bootstrap, seed, bootstrap_option, chosen,
                                   shared)
            if est.name == "adaptive_ips":
                chosen = chosen_behaviours(done[i]["diagnostics"]["notes"] if done[i]["diagnostics"] else None)
        results.extend(done[i] for i in range(len(estimators)))

    differences: list[dict[str, Any]] = []
    if baseline is not None:
        base = baseline
        for tmap in maps:
            rows = np.flatnonzero((tmap.ranked & base.ranked)[data.query])
            if rows.size == 0:
                warnings.append(f"{tmap.target.name} - {base.target.name}: no query ranked by both")
                continue
            sub = data if rows.size == data.n else data.take(rows)
            for est in estimators:
                rng = boot_rng(seed, est.name, tmap.target.name, base.target.name) if bootstrap else None
                pair = f"{est.name} {tmap.target.name} - {base.target.name}"
                try:
                    whole = shared.reps(est, sub, rows, [tmap.target.name, base.target.name])
                    differences.append(paired_difference(est, sub, tmap.target, base.target, reward, alpha,
                                                         bootstrap, rng, whole))
                    if differences[-1]["unmeasured"]:
                        warnings.append(f"{pair}: standard error, interval and p-value undefined: the weights of "
                                        f"{' and '.join(differences[-1]['unmeasured'])} rest on fewer than two "
                                        "clusters (users) or on impressions with one reward, whose spread the delta "
                                        "method cannot measure (a standard error of 0 would read as a certain "
                                        "difference)")
                        differences[-1]["warnings"] = [warnings[-1]]
                except InputError as exc:
                    message = exc.message
                    try:  # is it the bootstrap alone that fails?
                        diff = (paired_difference(est, sub, tmap.target, base.target, reward, alpha)
                                if bootstrap else None)
                    except InputError as own:  # the difference's own error
                        diff, message = None, own.message
                    if diff is None:
                        differences.append({**dict.fromkeys(DIFFERENCE_KEYS), "estimator": est.name,
                                            "target": tmap.target.name, "baseline": base.target.name,
                                            "n": sub.n, "clusters": effective_clusters(sub)[0],
                                            "error": message})
                    else:
                        differences.append(diff)
                        warnings.append(f"{pair}: no bootstrap interval: {exc.message}")
                        diff["warnings"] = [warnings[-1]]
                        fixed = est.clt_holds_fixed(reward)
                        if fixed is not None:  # refused: no 'the paired bootstrap's se' nor advice to ask for one
                            diff["refused"] = True
                            text = f"{pair}: {refused_paired_text(fixed, bootstrap, math.isfinite(diff['se']))}"
                            warnings.append(text)
                            diff["warnings"].append(text)
                lopsided_difference(differences[-1], pair, alpha, warnings)  # an undefined one's skewness is None
                cross_fit_difference(est, sub, tmap.target, base.target, reward, differences[-1], pair, warnings)
                dr_check_difference(est, sub, tmap.target, base.target, reward, differences[-1], pair, warnings)
                assumption_check_difference(est, sub, tmap.target, base.target, reward, differences[-1], pair,
                                            warnings)
    fixed_warning: dict[str, str] = {}
    if differences:
        for est in estimators:
            fixed = est.clt_holds_fixed(reward)
            if fixed is not None and not all(d.get("refused") for d in differences if d["estimator"] == est.name):
                fixed_warning[est.name] = f"{est.name}: {differences_held_text(fixed, bootstrap, bootstrap_option)}"
                warnings.append(fixed_warning[est.name])
    # each difference carries the warnings of its two estimates and of its estimator's differences
    by_row = {(r["estimator"], r["target"]): r["warnings"] for r in results}
    for diff in differences:
        carried = [f"{diff['estimator']} {side}: {w}" for side in (diff["target"], diff["baseline"])
                   for w in by_row.get((diff["estimator"], side), [])]
        if diff["estimator"] in fixed_warning and not diff.get("refused"):
            carried.append(fixed_warning[diff["estimator"]])
        diff["warnings"] = (diff.get("warnings") or []) + carried
    differences = [{k: d.get(k) for k in DIFFERENCE_KEYS} for d in differences]
    mc = data.logger.monte_carlo_queries() if isinstance(data.logger, LogPolicy) else 0
    if mc:
        warnings.append(f"the item propensities of {mc} queries are Monte Carlo estimates of the logging policy "
                        "(above its exact budget), not exact values; item-level estimators carry that error")
    if lg.short:
        warnings.append(f"{lg.short} impressions show fewer documents than the longest list of their query; a "
                        "target list (read to that longest length) never equals them")
    return LogEstimates(results, differences, warnings)
