r"""The calculation behind ``onlineeval power`` (:mod:`onlineeval.cli.power`): sample size, power and MDE.

A metric is reduced to a :class:`Metric` (its working effect and the scales under the null and the
alternative: :func:`proportion_metric`, :func:`ratio_metric`, :func:`interleaving_metric`), the
shared options to :class:`Settings`, and :func:`calculate` answers with a JSON-ready dict. Only
the standard library here; :mod:`onlineeval.stats.sequential` (numpy) is imported when an answer
is computed.

Formulas
--------
Every metric reduces to an estimated effect :math:`\hat w` with standard error
:math:`s_1/\sqrt N` under the alternative and :math:`s_0/\sqrt N` under the null (``N`` users in
total, a share ``s`` of them in B, :math:`\kappa = 1/(1-s) + 1/s`):

* proportion, ``--method arcsine`` (default): :math:`w = h = 2\arcsin\sqrt{p_B} - 2\arcsin\sqrt{p_A}`
  (Cohen's h), :math:`s_0^2 = s_1^2 = \kappa`. This is statsmodels'
  ``NormalIndPower().solve_power(proportion_effectsize(p_B, p_A), ratio=s/(1-s))``;
  10% -> 10.5% at alpha 0.05, power 0.8 gives 57,755.6, i.e. 57,756 per arm.
* proportion, ``--method pooled``: :math:`w = p_B - p_A`,
  :math:`s_0^2 = \bar p(1-\bar p)\kappa` with :math:`\bar p = (1-s)p_A + s p_B` (the pooled
  z-test), :math:`s_1^2 = p_A(1-p_A)/(1-s) + p_B(1-p_B)/s` (statsmodels
  ``power_proportions_2indep``; 57,763 per arm in the example).
* proportion, ``--method unpooled``: :math:`s_0 = s_1` as :math:`s_1` above (Wald test; 57,760).
* ratio metric :math:`R = \sum x/\sum y` (delta method, Deng, Knoblich and Lu 2018): per-user
  :math:`\sigma_e^2 = (V_x - 2R\,C_{xy} + R^2 V_y)/\mu_y^2`, :math:`s_0^2 = s_1^2 = \sigma_e^2\kappa`,
  :math:`w = \Delta R`, the same variance in both arms (``--treatment-variance same``, the default). With
  ``--treatment-variance scaled`` B's per-user sd is :math:`\sigma_e R_B/R_A` (coefficient of variation kept,
  as when the effect multiplies every user's numerator: :math:`\mathrm{Var}((1+\rho)x - (1+\rho)R\,y) =
  (1+\rho)^2\,\mathrm{Var}(x - Ry)`) and :math:`s_0^2 = s_1^2 = \sigma_e^2/(1-s) + \sigma_e^2 (R_B/R_A)^2/s`
  (the delta-method z-test estimates each arm's variance from its own users). The answer prints which.
* interleaving preference (one sample of per-user preferences): :math:`s_0 = s_1 = \sigma`,
  :math:`w = \Delta`.

The test rejects when :math:`|\hat w|/(s_0/\sqrt N) \ge z` at one look, or crosses the design's
boundaries :math:`b_k` at any of ``K`` looks. Writing :math:`Z^{(1)}_k = \hat w_k/(s_1/\sqrt{N t_k})`
(a canonical Brownian z-process with drift :math:`\delta = w\sqrt N/s_1`), the rejection region is
:math:`|Z^{(1)}_k| \ge b_k s_0/s_1`, so power is the crossing probability of the scaled
boundaries at drift :math:`\delta` (:func:`onlineeval.stats.sequential.crossing_probabilities`;
one look gives the usual :math:`\Phi(\delta - z c) + \Phi(-\delta - z c)`). The required size
solves :math:`\delta = \delta^*`, :math:`N = (\delta^* s_1/w)^2`; users per arm are
:math:`\lceil (1-s)N\rceil` and :math:`\lceil sN\rceil`. Sequential designs: ``msprt`` (the
always-valid mixture test with :math:`\tau` tuned to the maximum size, two-sided only;
``confidence_sequence`` is accepted as a synonym, the confidence sequence having the same boundaries),
``obrien_fleming`` and ``pocock`` (Lan-DeMets spending); their maximum size is the fixed size times the
inflation factor, and the expected size under the alternative and the null are reported too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onlineeval.errors import ConfigError, must_be_one_of, significance_level

#: the most looks ``--looks`` takes: the crossing probabilities' numerical integration grows about with the square of
#: the looks (2-core machine: 1,000 looks 2-19 s by design, with the banded kernel of onlineeval.stats._recursion;
#: 10,000 would take hours, and past 10,000
#: equally spaced looks two are less than ``MIN_FRACTION_STEP`` of the information apart, the same look twice)
MAX_LOOKS = 1_000

__all__ = [
    "ALTERNATIVES",
    "INTERLEAVING_ESTIMAND",
    "PROPORTION_METHODS",
    "RATIO_ASSUMPTIONS",
    "SEQUENTIAL",
    "TREATMENT_VARIANCES",
    "Metric",
    "Settings",
    "calculate",
    "check_settings",
    "design",
    "interleaving_metric",
    "power_at",
    "proportion_metric",
    "ratio_metric",
    "required_drift",
]

SEQUENTIAL = ("none", "msprt", "confidence_sequence", "obrien_fleming", "pocock")
ALTERNATIVES = ("two-sided", "larger", "smaller")
PROPORTION_METHODS = ("arcsine", "pooled", "unpooled")
TREATMENT_VARIANCES = ("same", "scaled")
#: what ``power interleaving`` sizes (review 4, F5): not simulate's Delta_AB, which weighs users by their compared
#: impressions
INTERLEAVING_ESTIMAND = (
    "mean over users of each user's preference (equal user weights; --sd: its SD between users), not "
    "simulate's Delta_AB (a ratio over impressions with a click, clustered by user: heavy users weigh more)"
)
#: what ``power ratio`` assumes about B's per-user variance, printed with every answer (review 2, D.1)
RATIO_ASSUMPTIONS = {
    "same": ("B's per-user sd of the linearised ratio is A's (the effect leaves the per-user variance alone; "
             "--treatment-variance scaled: B's sd x R_B/R_A)"),
    "scaled": ("B's per-user sd of the linearised ratio is A's x R_B/R_A (coefficient of variation kept: exact "
               "when the effect multiplies every user's numerator; where part of the variance does not scale, "
               "e.g. binomial click noise, B's sd lies between A's and this)"),
}


#: the test each metric's answer is for, printed with every answer (``test``)
PROPORTION_TESTS = {
    "arcsine": "two-sample z-test of Cohen's h = 2 asin sqrt(p_B) - 2 asin sqrt(p_A) (normal approximation)",
    "pooled": "two-sample z-test of p_B - p_A, pooled variance under H0 (normal approximation)",
    "unpooled": "two-sample Wald z-test of p_B - p_A, each arm's own variance (normal approximation)",
}
RATIO_TEST = "two-sample z-test of R_B - R_A, delta-method variances over users (normal approximation)"
INTERLEAVING_TEST = ("one-sample z-test of the mean per-user preference (normal approximation; fixed horizon: the "
                     "one-sample t-test's size and power beside it where they differ)")


@dataclass(frozen=True)
class Settings:
    """What every metric shares: level, target power, sidedness, allocation and the design."""

    alpha: float = 0.05
    power: float = 0.8
    alternative: str = "two-sided"
    share_b: float = 0.5
    sequential: str = "none"
    looks: int | None = None

    @property
    def kappa(self) -> float:
        """:math:`1/(1-s) + 1/s`: the variance factor of a difference of two arms' means."""
        return 1.0 / (1.0 - self.share_b) + 1.0 / self.share_b


def check_settings(st: Settings) -> Settings:
    """Validate the shared options (errors name the option)."""
    significance_level(st.alpha, "--alpha")
    if not st.alpha < st.power < 1.0:
        raise ConfigError(("--power",), f"must be in (alpha, 1) = ({st.alpha}, 1), got {st.power}")
    if st.alternative not in ALTERNATIVES:
        raise ConfigError(("--alternative",), must_be_one_of(ALTERNATIVES, st.alternative))
    if not 0.0 < st.share_b < 1.0:
        raise ConfigError(("--share-b",), f"must be in (0, 1), got {st.share_b}")
    if st.sequential not in SEQUENTIAL:
        raise ConfigError(("--sequential",), must_be_one_of(SEQUENTIAL, st.sequential))
    if st.looks is not None and st.looks < 1:
        raise ConfigError(("--looks",), f"must be a positive integer, got {st.looks}")
    if st.looks is not None and st.looks > MAX_LOOKS:
        raise ConfigError(("--looks",), f"at most {MAX_LOOKS} looks (the crossing probabilities' numerical "
                          f"integration grows about with the square of the looks: {MAX_LOOKS} take up to 20 s), "
                          f"got {st.looks}")
    if st.sequential != "none" and st.looks is None:
        raise ConfigError(("--looks",), f"--sequential {st.sequential} needs the number of looks, e.g. --looks 14")
    if st.sequential in ("msprt", "confidence_sequence") and st.alternative != "two-sided":
        raise ConfigError(
            ("--alternative",), "the msprt (normal-mixture) design is two-sided; use two-sided or a spending design"
        )
    return st


def design(st: Settings) -> Any:
    """The boundaries of the design: one look at level alpha, or the sequential design's ``K`` looks."""
    from onlineeval.stats import sequential as sq

    if st.sequential == "none":
        return sq.peeking_boundaries([1.0], st.alpha, st.alternative)
    fractions = sq.equal_fractions(st.looks or 1)
    if st.sequential in ("msprt", "confidence_sequence"):  # the same rejection region (the CS is the mSPRT's dual)
        return sq.mixture_boundaries(fractions, st.alpha)
    return sq.spending_boundaries(fractions, st.alpha, st.sequential, st.alternative)


def design_text(st: Settings) -> str:
    """What the sequential design is, for the report (the boundaries' rule, so a reader comparing them with another
    tool's knows which family they belong to)."""
    from onlineeval.stats import sequential as sq

    looks = f"{st.looks or 1} equally spaced look{'s' if (st.looks or 1) > 1 else ''}"
    if st.sequential in ("msprt", "confidence_sequence"):
        x = float(sq.mixture_tau(1.0, st.alpha)) ** 2  # tau at the last look for se 1: tau^2 = x se^2
        return (f"normal-mixture mSPRT, always valid (mixture variance tau^2 = {x:.4g} x the last look's se^2), "
                f"{looks}")
    sides = "alpha/2 spent on each side" if st.alternative == "two-sided" else "one-sided"
    name = "O'Brien-Fleming" if st.sequential == "obrien_fleming" else "Pocock"
    return (f"Lan-DeMets alpha spending of {name} type ({sides}), {looks} (the classical {name} design's "
            "boundaries differ)")


def _scaled(b: Any, c: float) -> Any:
    """The boundaries on the scale of :math:`Z^{(1)}` (multiplied by :math:`c = s_0/s_1`)."""
    from onlineeval.stats.sequential import Boundaries

    return Boundaries(b.fractions, b.upper * c, b.lower * c, b.alpha, b.alternative, b.kind)


def power_at(b: Any, drift: float, c: float = 1.0) -> float:
    """Probability of rejecting at some look at drift :math:`\\delta` (signed) in the design's direction."""
    from onlineeval.stats.sequential import crossing_probabilities

    cross = crossing_probabilities(_scaled(b, c), drift)
    if b.alternative == "larger":
        return float(cross.upper.sum())
    if b.alternative == "smaller":
        return float(cross.lower.sum())
    return cross.reject


def required_drift(b: Any, power: float, c: float = 1.0) -> float:
    """:math:`|\\delta^*|`, the drift at which the design reaches ``power``."""
    from onlineeval.stats.sequential import drift_for_power

    return abs(drift_for_power(_scaled(b, c), power))


@dataclass(frozen=True)
class Metric:
    """A metric reduced to its working effect ``w(effect)`` and the scales ``s0``, ``s1`` per unit.

    ``effect`` is on the metric's own scale (a difference of proportions, ratios or the
    preference); ``lo``/``hi`` bound the effects that make sense (for the MDE search) and
    ``baseline`` (if any) turns absolute effects into relative ones.
    """

    name: str
    w: Callable[[float], float]
    s0: Callable[[float], float]
    s1: Callable[[float], float]
    lo: float
    hi: float
    baseline: float | None
    details: dict[str, Any]
    per_arm: bool = True
    units_per_user: float = 1.0
    linear: bool = False  # w(d) = d and constant scales: the MDE has a closed form
    constant_c: bool = True  # s0/s1 does not depend on the effect: power is a function of the drift alone


def proportion_metric(p_a: float, method: str, st: Settings) -> Metric:
    """Proportion with baseline ``p_a`` (formulas in the module docstring)."""
    if not 0.0 < p_a < 1.0:
        raise ConfigError(("--baseline",), f"must be a proportion in (0, 1), got {p_a}")
    if method not in PROPORTION_METHODS:
        raise ConfigError(("--method",), must_be_one_of(PROPORTION_METHODS, method))
    s, k = st.share_b, st.kappa

    def w(d: float) -> float:
        if method == "arcsine":
            # 2 asin(sqrt(p_b)) - 2 asin(sqrt(p_a)) without subtracting the two arcsines (whose difference loses
            # about 1e-16 / |d| of itself: 8e-8 at d = 1e-10, 3% at d = -1e-15): for x, y in [0, 1],
            # asin x - asin y = asin(x sqrt(1 - y^2) - y sqrt(1 - x^2)), and that argument is
            # (x^2 - y^2) / (x sqrt(1 - y^2) + y sqrt(1 - x^2)) = d / (sqrt(p_b (1 - p_a)) + sqrt(p_a (1 - p_b)))
            p_b = p_a + d
            arg = d / (math.sqrt(p_b * (1.0 - p_a)) + math.sqrt(p_a * (1.0 - p_b)))
            return 2.0 * math.asin(min(1.0, max(-1.0, arg)))
        return d

    def s1(d: float) -> float:
        if method == "arcsine":
            return math.sqrt(k)
        p_b = p_a + d
        return math.sqrt(p_a * (1 - p_a) / (1 - s) + p_b * (1 - p_b) / s)

    def s0(d: float) -> float:
        if method != "pooled":
            return s1(d)
        pbar = (1 - s) * p_a + s * (p_a + d)
        return math.sqrt(pbar * (1 - pbar) * k)

    details = {"baseline": p_a, "method": method, "test": PROPORTION_TESTS[method]}
    return Metric("proportion", w, s0, s1, -p_a, 1.0 - p_a, p_a, details, constant_c=method != "pooled")


def ratio_metric(
    num_mean: float, num_var: float, den_mean: float, den_var: float, cov: float, st: Settings, source: str,
    treatment_variance: str = "same",
) -> Metric:
    """Ratio metric from per-user moments of numerator and denominator (delta method); ``treatment_variance``:
    B's per-user variance of the linearised ratio (:data:`RATIO_ASSUMPTIONS`)."""
    if not den_mean > 0:
        raise ConfigError(("--den-mean",), f"the mean denominator per user must be > 0, got {den_mean}")
    if num_var < 0 or den_var < 0:
        raise ConfigError(("--num-var" if num_var < 0 else "--den-var",), "variances must be >= 0")
    r = num_mean / den_mean
    square = den_mean * den_mean
    var_e = (num_var - 2.0 * r * cov + r * r * den_var) / square if square > 0 else math.inf
    if not (math.isfinite(r) and math.isfinite(var_e)):  # (e.g. --den-mean 1e-300: its square is 0)
        raise ConfigError(("--den-mean",), f"the ratio {num_mean:g} / {den_mean:g} or its per-user delta-method "
                          "variance is beyond float64's range; give the moments in other units")
    if not var_e > 0:
        raise ConfigError(
            ("--cov",), f"the per-user delta-method variance is {var_e:.3g} <= 0; check the variances and covariance"
        )
    if treatment_variance not in TREATMENT_VARIANCES:
        raise ConfigError(("--treatment-variance",), must_be_one_of(TREATMENT_VARIANCES, treatment_variance))
    details = {
        "ratio": r, "sd_linearized": math.sqrt(var_e), "num_mean": num_mean, "num_var": num_var,
        "den_mean": den_mean, "den_var": den_var, "cov": cov, "source": source,
        "treatment_variance": treatment_variance, "assumption": RATIO_ASSUMPTIONS[treatment_variance],
        "test": RATIO_TEST,
    }  # fmt: skip
    if treatment_variance == "same":
        scale = math.sqrt(var_e * st.kappa)
        return Metric(
            "ratio", lambda d: d, lambda d: scale, lambda d: scale, -math.inf, math.inf, r if r != 0 else None,
            details, units_per_user=den_mean, linear=True,
        )  # fmt: skip
    if r == 0:
        raise ConfigError(("--treatment-variance",), "scaled needs a non-zero ratio (B's sd is A's x R_B/R_A)")
    s = st.share_b

    def s1(d: float) -> float:  # A's per-user variance in A, (R_B/R_A)^2 times it in B; the Wald test: s0 = s1
        return math.sqrt(var_e / (1.0 - s) + var_e * (1.0 + d / r) ** 2 / s)

    # effects keep R_B of R's sign (the scaling is meaningless past R_B = 0); the drift is bounded as the
    # effect grows (B's sd grows with it), so a finite far end bounds the MDE search
    far = 1e6 * abs(r)
    lo, hi = (-abs(r), far) if r > 0 else (-far, abs(r))
    return Metric("ratio", lambda d: d, s1, s1, lo, hi, r, details, units_per_user=den_mean)


def interleaving_metric(sd: float) -> Metric:
    """Per-user interleaving preference with standard deviation ``sd`` (one sample)."""
    if not sd > 0 or not math.isfinite(sd):
        raise ConfigError(("--sd",), f"the per-user standard deviation must be finite and > 0, got {sd}")
    return Metric(
        "interleaving", lambda d: d, lambda d: sd, lambda d: sd, -math.inf, math.inf, None,
        {"sd": sd, "estimand": INTERLEAVING_ESTIMAND, "test": INTERLEAVING_TEST},
        per_arm=False, linear=True,
    )  # fmt: skip


class _Drifts:
    r""":math:`|\delta^*|` of one design per boundary scale ``c``, each root-found once per answer
    (the required size, the MDE and the design summary need the same ones)."""

    def __init__(self, b: Any, power: float) -> None:
        self.b, self.power = b, power
        self._known: dict[float, float] = {}

    def __call__(self, c: float = 1.0) -> float:
        if c not in self._known:
            self._known[c] = required_drift(self.b, self.power, c)
        return self._known[c]


def _required_n(m: Metric, effect: float, drifts: _Drifts, st: Settings) -> tuple[float, float]:
    r"""Unrounded total users ``N`` and the drift :math:`\delta^*` for ``st.power`` at ``effect``."""
    w = m.w(effect)
    if w == 0 or (st.alternative == "larger" and w < 0) or (st.alternative == "smaller" and w > 0):
        return math.inf, math.nan
    d = drifts(m.s0(effect) / m.s1(effect))
    try:
        return (d * m.s1(effect) / abs(w)) ** 2, d
    except OverflowError:  # an effect so small (or a baseline so near 0) that no float counts the users
        return math.inf, d


def _drift_n(m: Metric, effect: float, n: float) -> float:
    r""":math:`\delta = w\sqrt N/s_1` (signed) of ``effect`` at ``n`` users."""
    return m.w(effect) * math.sqrt(n) / m.s1(effect)


def _power_n(m: Metric, effect: float, n: float, b: Any) -> float:
    return power_at(b, _drift_n(m, effect, n), m.s0(effect) / m.s1(effect))


def _mde(m: Metric, n: float, drifts: _Drifts, st: Settings) -> float | None:
    r"""Smallest effect in the tested direction (positive unless ``smaller``) with power ``st.power`` at ``n``.

    Power is increasing in the effect's size. Where :math:`c = s_0/s_1` does not depend on the
    effect (every metric but the pooled proportion), power is a function of the drift alone, so
    the MDE solves :math:`|\delta(e)| = \delta^*(c)` (a scalar equation; the one numerical
    integration is the root-find of :math:`\delta^*`, shared with the required size); linear
    metrics have the closed form :math:`\delta^* s_1/\sqrt N`. The pooled proportion solves
    power = target directly (Illinois regula falsi from a bracket around the MDE at
    :math:`c(0)`, about 6 numerical integrations).
    """
    from onlineeval.stats._roots import root_from_guess, root_increasing

    sign = -1.0 if st.alternative == "smaller" else 1.0
    if m.linear:  # constant scale: delta* s1 / sqrt(N)
        return sign * drifts() * m.s1(0.0) / math.sqrt(n)
    far = m.lo if sign < 0 else m.hi
    hi = abs(far) * (1.0 - 1e-12)
    c0 = m.s0(0.0) / m.s1(0.0)
    d0 = drifts(c0)
    if abs(_drift_n(m, sign * hi, n)) < d0 and m.constant_c:
        return None  # not detectable within the metric's range
    e0 = root_increasing(lambda e: abs(_drift_n(m, sign * e, n)), d0, 0.0, hi, tol=1e-13)
    if m.constant_c:
        return sign * e0
    if _power_n(m, sign * hi, n, drifts.b) < st.power:
        return None
    return sign * root_from_guess(lambda e: _power_n(m, sign * e, n, drifts.b), st.power, e0, 0.0, hi, step=1.02)


def calculate(m: Metric, st: Settings, effect: float | None, users: int | None) -> dict[str, Any]:
    """The answer as a JSON-ready dict (see the README section "Power calculator")."""
    from onlineeval.stats import sequential as sq

    b = design(st)
    drifts = _Drifts(b, st.power)
    out: dict[str, Any] = {
        "metric": m.name,
        **m.details,
        "alpha": st.alpha,
        "power_target": st.power,
        "alternative": st.alternative,
        "share_b": st.share_b if m.per_arm else None,
        "sequential": st.sequential,
        "looks": st.looks,
    }
    if effect is not None:
        out["effect"] = {
            "absolute": effect,
            "relative": effect / m.baseline if m.baseline else None,
            "treatment_value": m.baseline + effect if m.baseline is not None and m.name != "interleaving" else None,
        }
    if st.sequential != "none":
        fixed = sq.peeking_boundaries([1.0], st.alpha, st.alternative)
        c = 1.0 if effect is None else m.s0(effect) / m.s1(effect)
        d_seq, d_fix = drifts(c), required_drift(fixed, st.power, c)
        out["design"] = {
            **b.to_dict(),
            "description": design_text(st),
            "inflation_factor": (d_seq / d_fix) ** 2,
            "expected_fraction_alternative": sq.crossing_probabilities(_scaled(b, c), d_seq).expected_fraction,
            "expected_fraction_null": sq.crossing_probabilities(_scaled(b, c), 0.0).expected_fraction,
        }
    elif st.looks is not None and st.looks > 1:
        fpr = sq.peeking_fpr(sq.equal_fractions(st.looks), st.alpha, st.alternative)
        out["peeking_false_positive_rate"] = float(fpr[-1])
    t_test = m.name == "interleaving" and st.sequential == "none"  # a one-sample t-test: exact beside the z-test
    if effect is not None:
        n, drift = _required_n(m, effect, drifts, st)
        out["required"] = _sizes(m, n, st, drift)
        # beyond 10^12 users the two sizes differ by a few users in 10^12 (and floats stop counting single users)
        if t_test and out["required"]["users_total"] is not None and out["required"]["users_total"] <= 1e12:
            from onlineeval.stats.power import required_n_one_sample_t

            t_n = required_n_one_sample_t(effect, m.details["sd"], st.alpha, st.power, st.alternative)
            out["required"]["t_test_users"] = int(t_n) if math.isfinite(t_n) else None
        if st.sequential != "none" and math.isfinite(n):
            for key in ("alternative", "null"):
                frac = out["design"][f"expected_fraction_{key}"]
                out["required"][f"expected_users_{key}"] = frac * n
    if users is not None:
        at: dict[str, Any] = {"users_total": users}
        if m.per_arm:
            at["users_per_arm"] = {"A": (1 - st.share_b) * users, "B": st.share_b * users}
        if effect is not None:
            at["power"] = _power_n(m, effect, users, b)
            if t_test:
                from onlineeval.stats.power import power_one_sample_t

                at["power_t_test"] = power_one_sample_t(effect, m.details["sd"], users, st.alpha, st.alternative)
        mde = _mde(m, float(users), drifts, st)
        at["mde_absolute"] = mde
        at["mde_relative"] = mde / m.baseline if (mde is not None and m.baseline) else None
        out["at_size"] = at
    return out


def _sizes(m: Metric, n: float, st: Settings, drift: float) -> dict[str, Any]:
    if not math.isfinite(n):
        if math.isnan(drift):  # no drift: the effect is 0 or looked for the other way
            return {"users_total": None, "note": "the effect is 0 or in the direction the test does not look for"}
        return {"users_total": None, "note": "more users than a float64 counts: the effect is too small for any "
                                             "finite experiment"}
    # at least one user (per arm): an effect far above the noise needs a fraction of a user, not none
    if not m.per_arm:
        users = max(1, math.ceil(n - 1e-9))
        return {"users_total": users, "impressions_total": users * m.units_per_user}
    a = max(1, math.ceil((1 - st.share_b) * n - 1e-9))
    bb = max(1, math.ceil(st.share_b * n - 1e-9))
    return {
        "users_per_arm": {"A": a, "B": bb},
        "users_total": a + bb,
        "impressions_per_arm": {"A": a * m.units_per_user, "B": bb * m.units_per_user},
        "unrounded_total": n,
    }
