r"""The bias check of a counterfactual design's estimators: each one's :math:`\hat V(B) - \hat V(A)` from one
large direct log against the exact truth, independent of how many replicates the run has.

The replicates' t-test (:func:`simulations.analysis_bias.estimate_is_biased`) sees a bias only once it exceeds about
four standard errors of the replicates' mean: a run of 30 replicates of three days left IIPS under a half-cascade
population unflagged with a bias of 63% of the effect (+0.0144 +- 0.0041), and the main table then gave it a
sample size half of IPS's. The interleaving designs have their null check for this; an off-policy estimate has an
exact truth instead, so its check is one direct log (no SimPy: :func:`~.sweep.direct_log`, each impression its own
cluster) of ``analysis.bias_check`` impressions served by the design's logger to the config's own users, its
paired difference's delta-method SE (:func:`~.paired.paired_difference`) and
:math:`z = (\hat\Delta - \Delta) / \mathrm{se}`, flagged beyond :data:`~simulations.analysis_null.NULL_BIAS_SE`
(4, as the null check's rule).

One log's :math:`z` is normal only where the estimate's sampling distribution is: with heavy-tailed importance
weights (whole-list IPS or RIPS under a Plackett-Luce logger over 20 candidates, configs/counterfactual.yaml's world)
a log that has not drawn the rare large weights is low *and* has a small SE, so the unbiased IPS, SNIPS and RIPS
reached :math:`|z|` 4-8 in 18 of 180 fixed-seed checks of 10^6 impressions (30 logs at each of temperatures 1 and
0.5). The check therefore reads :math:`z` only where the estimate's skewness, the sample skewness of the
per-impression contributions over :math:`\sqrt n`, is at most :data:`MAX_SKEW` (0.01: its Cornish-Fisher shift of
the 4-SE point is :math:`2.5\gamma`, 0.025); those 18 had 0.03-0.56 and none of the 180 is flagged, while IIPS
(biased, light-tailed item weights: 0.003-0.004) is flagged in all 30 logs at temperature 1 (z 7.8-12.3); at 0.5 its
skewness is 0.03-0.95 and its check inconclusive. Beyond it the check is ``inconclusive`` and says why; the
replicates' test still applies. Skewness cannot see weights the log has not drawn at all: with one epsilon-greedy
logger around A over 20 candidates, B's whole list has probability about 1e-7, a log of 10^6 impressions hardly
shows it, and whole-list IPS of B sat at z -1,087 with skewness below 0.001 (SNIPS of B, on the few draws of
another log, at -91); so each target's weights must also have an effective sample size of at least
:data:`MIN_ESS` impressions and a mean weight within 4 SE (or 5%) of its expectation (the diagnostics' own
rule, :meth:`onlineeval.estimators.Diagnostics.mean_weight_off`). On configs/counterfactual.yaml itself
(epsilon-greedy logger, 40 seeds): SNIPS, IPS, RIPS and adaptive IPS never flagged (their z's SD 0.88-1.06,
skewness at most 0.0032), IIPS and clipped IPS always (z 4.2-7.9 and about -70).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulations.designs.counterfactual.paired import _linearization, paired_difference
from simulations.designs.counterfactual.serving import build_estimators, shared_policy, shared_target
from simulations.designs.counterfactual.sweep import direct_log

__all__ = ["CHECK_METHOD", "MAX_SKEW", "MIN_ESS", "bias_checks", "check_design"]

_CHECK_TAG = 0x636865636B  # "check"

#: the largest skewness of the check's estimate at which its z is compared with the normal (see the docstring)
MAX_SKEW = 0.01

#: the fewest effective impressions (the weights' ESS, each target's) at which the check's z is read: a target
#: whose estimate rests on a few impressions (a few draws of a list of probability 1e-7) has a ratio estimate and a
#: delta-method SE from those few alone (SNIPS at z -91 on an unbiased estimate, its skewness small)
MIN_ESS = 1000

#: what the check is (summary.json ``bias_check.method``)
CHECK_METHOD = ("one direct log (no SimPy; each impression its own cluster) of the design's logger serving the "
                "config's users; z = (estimate - exact V(B) - V(A)) / the paired difference's delta-method SE; "
                "biased where |z| > 4 and the estimate's skewness (sample skewness of the per-impression "
                f"contributions / sqrt(n)) is at most {MAX_SKEW:g}, each target's weights have an effective sample "
                f"size of at least {MIN_ESS:,} impressions and a mean weight within 4 SE (or 5%) of its expectation; "
                "inconclusive otherwise (heavy-tailed weights, or a log that has not drawn the target's large "
                "weights: one log's z is not normal there)")


def _skewness(x: list[np.ndarray]) -> float:
    """The skewness of the paired difference's estimate: the sample skewness of its per-impression linearised
    contributions (:func:`~.paired.paired_difference`'s, from the same linearisation) over sqrt(n) (NaN without
    spread)."""
    from onlineeval.stats import ratio_linearization

    num_a, den_a, num_b, den_b = x
    d = _linearization(num_b, den_b, ratio_linearization)[1] - _linearization(num_a, den_a, ratio_linearization)[1]
    d = d - d.mean()
    m2 = float(d @ d) / d.size
    if not m2 > 0:
        return math.nan
    return float(np.mean(d * d * d)) / m2 ** 1.5 / math.sqrt(d.size)


def check_design(design: Any, world: Any, users: Any, n: int, rng: np.random.Generator, alpha: float,
                 z_rule: float, power: float) -> dict[str, dict[str, Any]]:
    """Per estimator label of ``design``: the check on one direct log of ``n`` impressions (see the module
    docstring). ``z_rule``: the |z| beyond which a reliable check flags a bias; ``power``: the target power, for the
    smallest bias the check finds with that power (``detects``)."""
    from scipy import stats as sps

    from simulations.designs.counterfactual.metric import design_reward, exact_values

    z_power = float(sps.norm.ppf(power))
    base, cand = design.targets
    values = {r: float(world.frequency @ exact_values(world, users, r, design.metric)) for r in (base, cand)}
    truth = values[cand] - values[base]
    policy = shared_policy(design.logger, world)
    data = direct_log(world, users, policy, n, rng)
    reward = design_reward(design.metric, world.offline.metric, world.depth)
    targets = [shared_target(world, t) for t in (base, cand)]
    out: dict[str, dict[str, Any]] = {}
    for label, est in build_estimators(design):
        x: list[np.ndarray] = []
        unseen: list[str] = []  # targets whose weights the log has not drawn enough of (mean weight off, low ESS)
        unsupported: list[str] = []  # targets with events the logger cannot draw (probability 0)
        for name, target in zip(design.targets, targets, strict=True):
            terms = est.terms(data, target, reward)
            x += [np.asarray(terms.num, dtype=np.float64),
                  np.ones(data.n) if terms.den is None else np.asarray(terms.den, dtype=np.float64)]
            diag = est.diagnostics(data, target, terms)
            if diag.support_violations:  # events of logging probability 0: the mean weight is off by construction
                unsupported.append(f"{name}'s list leaves the logger's support on {diag.support_violations:,} of "
                                   f"{diag.support_checked:,} impressions")
            elif diag.mean_weight_off():
                unseen.append(f"{name}'s mean weight {diag.mean_weight:.3g} (se {diag.mean_weight_se:.2g}), "
                              f"expected {diag.mean_weight_expected:g}")
            elif diag.ess_impressions < MIN_ESS:  # (NaN, no weights: the direct method, nothing to gate)
                ess = f"{diag.ess_impressions:,.0f}"
                unseen.append(f"{name}'s weights have an effective sample size of {ess} "
                              f"impression{'' if ess == '1' else 's'} (< {MIN_ESS:,})")
        e = paired_difference(x[0], x[1], x[2], x[3], alpha)
        defined = math.isfinite(e.estimate) and math.isfinite(e.se) and e.se > 0
        z = (e.estimate - truth) / e.se if defined else math.nan
        skew = _skewness(x) if defined else math.nan
        reliable = defined and math.isfinite(skew) and abs(skew) <= MAX_SKEW and not unseen and not unsupported
        reason = (None if reliable else "no support" if unsupported else "undefined" if not defined else
                  "not drawn" if unseen else "heavy tail")
        why = None if reason is None else {
            "no support": f"no support: {'; '.join(unsupported)} (the estimator cannot evaluate the target there: "
                          "biased whatever the check's z, as the main table's support count says)",
            "undefined": "undefined: no positive weight or no spread in the check's log",
            "not drawn": f"inconclusive: the log has not drawn enough of the target's weights ({'; '.join(unseen)}), "
                         "so one log's error and SE say little about the estimator's bias",
            "heavy tail": f"inconclusive: the estimate's skewness {skew:.2g} > {MAX_SKEW:g} (heavy-tailed weights: "
                          "one log's z is not normal)",
        }[reason]
        out[label] = {
            "impressions": int(n),
            "truth": truth,
            "estimate": e.estimate,
            "se": e.se,
            "bias": e.estimate - truth if defined else math.nan,
            "z": z,
            "skewness": skew,
            "reliable": bool(reliable),
            # why an unreliable check says nothing: 'no support' (a target's events of logging probability 0, each
            # one's count in 'no_support'), 'undefined', 'not drawn' (a target's weights: effective sample size or
            # mean off, each target's reason in 'not_drawn'), 'heavy tail' (the estimate's skewness)
            "inconclusive": reason,
            "not_drawn": unseen,
            "no_support": unsupported,
            "biased": bool(reliable and abs(z) > z_rule),
            # the smallest |bias| this check finds with the target power (the null check's 'detects')
            "detects": (z_rule + z_power) * e.se if reliable else None,
            "detects_power": power,
            "note": why,
        }
    return out


def bias_checks(config: Any, world: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(design, estimator label): check}`` of every counterfactual design of ``config``
    (``analysis.bias_check`` impressions each; empty when it is 0). Each design's log has its own stream,
    ``SeedSequence((seed, "check", design's position in designs))``."""
    from simulations.analysis_null import NULL_BIAS_SE
    from simulations.users import UserModels

    n = int(config.analysis.bias_check)
    if not n:
        return {}
    users = None
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for i, design in enumerate(config.designs):
        if design.type != "counterfactual":
            continue
        if users is None:
            users = UserModels.from_config(config.users)
        rng = np.random.default_rng(np.random.SeedSequence((config.seed, _CHECK_TAG, i)))
        for label, check in check_design(design, world, users, n, rng, config.analysis.alpha, NULL_BIAS_SE,
                                         config.analysis.power).items():
            out[(design.name, label)] = check
    return out
