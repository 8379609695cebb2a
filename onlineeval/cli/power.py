r"""``onlineeval power``: sample size, power and minimum detectable effect without simulating.

Three metrics, one sub-command each::

    onlineeval power proportion --baseline 0.10 --target 0.105          # 57,756 users per arm
    onlineeval power ratio --csv users.csv --num-col clicks --den-col queries --relative-mde 0.02
    onlineeval power interleaving --delta 0.02 --sd 0.9 --users 20000

Without ``--users`` the command answers "how many users for ``--power`` at this effect"; with
``--users N`` (total over both arms) it answers "what power at this effect, and what is the
minimum detectable effect (MDE) at ``--power``". ``--sequential msprt|obrien_fleming|pocock
--looks K`` sizes a design analysed at ``K`` equally spaced looks instead of once; ``--looks K``
alone reports the false-positive rate of peeking ``K`` times at the fixed-horizon test.

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
``confidence_sequence`` is accepted as a synonym, the confidence sequence having the same boundaries), ``obrien_fleming`` and ``pocock`` (Lan-DeMets
spending); their maximum size is the fixed size times the inflation factor, and the expected
size under the alternative and the null are reported too.

Only numpy and the standard library are imported (no scipy), and each answer root-finds the
design's :math:`\delta^*` once per boundary scale (the size, the MDE and the design summary share it):
a 14-look O'Brien-Fleming answer with size, power and MDE takes about 0.1 s of computation, the
whole command (interpreter, numpy, typer) about 0.4 s (``python benchmarks/bench_import.py``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from onlineeval.cli._common import effect_text, guarded
from onlineeval.errors import ConfigError, InputError, must_be_one_of

SEQUENTIAL = ("none", "msprt", "confidence_sequence", "obrien_fleming", "pocock")
ALTERNATIVES = ("two-sided", "larger", "smaller")
PROPORTION_METHODS = ("arcsine", "pooled", "unpooled")
FORMATS = ("text", "json")
TREATMENT_VARIANCES = ("same", "scaled")
#: what ``power ratio`` assumes about B's per-user variance, printed with every answer (review 2, D.1)
#: what ``power interleaving`` sizes (review 4, F5): not simulate's Delta_AB, which weighs users by their compared
#: impressions
INTERLEAVING_ESTIMAND = (
    "mean over users of each user's preference (equal user weights; --sd: its SD between users), not "
    "simulate's Delta_AB (a ratio over impressions with a click, clustered by user: heavy users weigh more)"
)

RATIO_ASSUMPTIONS = {
    "same": ("B's per-user sd of the linearised ratio is A's (the effect leaves the per-user variance alone; "
             "--treatment-variance scaled: B's sd x R_B/R_A)"),
    "scaled": ("B's per-user sd of the linearised ratio is A's x R_B/R_A (coefficient of variation kept: exact "
               "when the effect multiplies every user's numerator; where part of the variance does not scale, "
               "e.g. binomial click noise, B's sd lies between A's and this)"),
}


# ----------------------------------------------------------------------------- the calculation


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
    if not 0.0 < st.alpha < 1.0:
        raise ConfigError(("--alpha",), f"must be in (0, 1), got {st.alpha}")
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
    if st.sequential != "none" and st.looks is None:
        raise ConfigError(("--looks",), f"--sequential {st.sequential} needs the number of looks, e.g. --looks 14")
    if st.sequential in ("msprt", "confidence_sequence") and st.alternative != "two-sided":
        raise ConfigError(("--alternative",), "the msprt (normal-mixture) design is two-sided; use two-sided or a spending design")
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
            return 2.0 * math.asin(math.sqrt(p_a + d)) - 2.0 * math.asin(math.sqrt(p_a))
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

    details = {"baseline": p_a, "method": method}
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
    var_e = (num_var - 2.0 * r * cov + r * r * den_var) / (den_mean * den_mean)
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
        {"sd": sd, "estimand": INTERLEAVING_ESTIMAND},
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
    return (d * m.s1(effect) / abs(w)) ** 2, d


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
            "inflation_factor": (d_seq / d_fix) ** 2,
            "expected_fraction_alternative": sq.crossing_probabilities(_scaled(b, c), d_seq).expected_fraction,
            "expected_fraction_null": sq.crossing_probabilities(_scaled(b, c), 0.0).expected_fraction,
        }
    elif st.looks is not None and st.looks > 1:
        fpr = sq.peeking_fpr(sq.equal_fractions(st.looks), st.alpha, st.alternative)
        out["peeking_false_positive_rate"] = float(fpr[-1])
    if effect is not None:
        n, _ = _required_n(m, effect, drifts, st)
        out["required"] = _sizes(m, n, st)
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
        mde = _mde(m, float(users), drifts, st)
        at["mde_absolute"] = mde
        at["mde_relative"] = mde / m.baseline if (mde is not None and m.baseline) else None
        out["at_size"] = at
    return out


def _sizes(m: Metric, n: float, st: Settings) -> dict[str, Any]:
    if not math.isfinite(n):
        return {"users_total": None, "note": "the effect is 0 or in the direction the test does not look for"}
    if not m.per_arm:
        users = math.ceil(n - 1e-9)
        return {"users_total": users, "impressions_total": users * m.units_per_user}
    a = math.ceil((1 - st.share_b) * n - 1e-9)
    bb = math.ceil(st.share_b * n - 1e-9)
    return {
        "users_per_arm": {"A": a, "B": bb},
        "users_total": a + bb,
        "impressions_per_arm": {"A": a * m.units_per_user, "B": bb * m.units_per_user},
        "unrounded_total": n,
    }


# ----------------------------------------------------------------------------- per-user CSV


def moments_from_csv(path: Path, num_col: str, den_col: str) -> tuple[float, float, float, float, float, int]:
    """Means, variances (ddof 1) and covariance of two columns of a per-user CSV file.

    Returns ``(num_mean, num_var, den_mean, den_var, cov, n_users)``. Errors name the file and
    line (a missing column, a non-numeric or negative denominator, fewer than 2 users).
    """
    name = str(path)
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        cols = reader.fieldnames or []
        for opt, col in (("--num-col", num_col), ("--den-col", den_col)):
            if col not in cols:
                raise InputError(f"no column {col!r} (from {opt}); the header has {', '.join(cols) or 'nothing'}", name, 1)
        xs: list[float] = []
        ys: list[float] = []
        for row in reader:
            line = reader.line_num
            try:
                x, y = float(row[num_col]), float(row[den_col])
            except (TypeError, ValueError):
                raise InputError(
                    f"{num_col}={row.get(num_col)!r}, {den_col}={row.get(den_col)!r}: expected numbers", name, line
                ) from None
            if not (math.isfinite(x) and math.isfinite(y)) or y < 0:
                raise InputError(f"{num_col}={x}, {den_col}={y}: values must be finite, denominators >= 0", name, line)
            xs.append(x)
            ys.append(y)
    n = len(xs)
    if n < 2:
        raise InputError(f"needs at least 2 users (data rows), got {n}", name)
    import numpy as np

    data = np.array([xs, ys])
    cov = np.cov(data, ddof=1)
    return float(data[0].mean()), float(cov[0, 0]), float(data[1].mean()), float(cov[1, 1]), float(cov[0, 1]), n


# ----------------------------------------------------------------------------- output


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e7):
            return f"{x:.4g}"
        return f"{x:,.6g}" if abs(x) < 1000 else f"{x:,.0f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def render_text(doc: dict[str, Any]) -> str:
    """A short human-readable report of :func:`calculate`'s answer."""
    lines = [f"metric: {doc['metric']}" + (f" ({doc['method']})" if "method" in doc else "")]
    if doc["metric"] == "ratio":
        lines.append(
            f"ratio: {_fmt(doc['ratio'])}   per-user sd of the linearised ratio: {_fmt(doc['sd_linearized'])}"
            f"   (from {doc['source']})"
        )
        lines.append(f"assumes: {doc['assumption']}")
    if doc["metric"] == "interleaving" and "estimand" in doc:
        lines.append(f"estimand: {doc['estimand']}")
    lines.append(
        f"alpha {doc['alpha']} ({doc['alternative']}), power {doc['power_target']}"
        + (f", share in B {doc['share_b']}" if doc["share_b"] is not None else "")
        + (f", design {doc['sequential']} with {doc['looks']} looks" if doc["sequential"] != "none" else "")
    )
    if "effect" in doc:
        e = doc["effect"]
        rel = f" ({e['relative']:+.2%})" if e["relative"] is not None else ""
        to = f" -> {_fmt(e['treatment_value'])}" if e["treatment_value"] is not None else ""
        lines.append(f"effect: {effect_text(e['absolute'])}{rel}{to}")
    if "design" in doc:
        d = doc["design"]
        ups = ", ".join("inf" if v is None else f"{v:.3f}" for v in (d["upper"] if d["alternative"] != "smaller" else d["lower"]))
        lines.append(f"boundaries (|z|): {ups}")
        lines.append(
            f"max size x {d['inflation_factor']:.4f} of the fixed horizon; expected size "
            f"{d['expected_fraction_alternative']:.1%} of max under the effect, {d['expected_fraction_null']:.1%} under H0"
        )
    if "peeking_false_positive_rate" in doc:
        lines.append(
            f"peeking at {doc['looks']} looks with this fixed-horizon test: false-positive rate "
            f"{doc['peeking_false_positive_rate']:.3f} instead of {doc['alpha']}"
        )
    if "required" in doc:
        r = doc["required"]
        if r.get("users_total") is None:
            lines.append(f"required: - ({r['note']})")
        elif "users_per_arm" in r:
            u, i = r["users_per_arm"], r["impressions_per_arm"]
            lines.append(f"required users per arm: A {_fmt(u['A'])}, B {_fmt(u['B'])} (total {_fmt(r['users_total'])})")
            lines.append(f"impressions per arm:    A {_fmt(float(i['A']))}, B {_fmt(float(i['B']))}")
        else:
            lines.append(f"required users: {_fmt(r['users_total'])} (impressions {_fmt(float(r['impressions_total']))})")
        if "expected_users_alternative" in r:
            lines.append(
                f"expected users: {_fmt(r['expected_users_alternative'])} under the effect, "
                f"{_fmt(r['expected_users_null'])} under H0"
            )
    if "at_size" in doc:
        a = doc["at_size"]
        head = f"with {_fmt(a['users_total'])} users"
        if "power" in a:
            lines.append(f"{head}: power {a['power']:.4f}")
        if a["mde_absolute"] is None:
            lines.append(f"{head}: no effect within the metric's range reaches power {doc['power_target']}")
        else:
            rel = f" ({a['mde_relative']:+.2%})" if a["mde_relative"] is not None else ""
            lines.append(f"{head}: minimum detectable effect {effect_text(a['mde_absolute'])}{rel}")
    return "\n".join(lines)


def _emit(doc: dict[str, Any], output_format: str) -> None:
    if output_format not in FORMATS:
        raise ConfigError(("--format",), must_be_one_of(FORMATS, output_format))
    if output_format == "json":
        typer.echo(json.dumps(doc, indent=2, allow_nan=False, default=float))
    else:
        typer.echo(render_text(doc))


def _effect(
    baseline: float | None, mde: float | None, relative: float | None, target: float | None, users: int | None
) -> float | None:
    given = [name for name, v in (("--mde", mde), ("--relative-mde", relative), ("--target", target)) if v is not None]
    if len(given) > 1:
        raise ConfigError((given[1],), f"give one of --mde, --relative-mde, --target (got {', '.join(given)})")
    if not given:
        if users is None:
            raise ConfigError(("--mde",), "give the effect (--mde, --relative-mde or --target) or a size (--users)")
        return None
    if mde is not None:
        return mde
    if baseline is None or baseline == 0:
        raise ConfigError((given[0],), "a relative effect or a target value needs a non-zero baseline")
    if relative is not None:
        return relative * baseline
    return float(target) - baseline  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- commands

_Alpha = Annotated[float, typer.Option("--alpha", help="Significance level (two-sided total for two-sided tests).")]
_Power = Annotated[float, typer.Option("--power", help="Target power.")]
_Alt = Annotated[str, typer.Option("--alternative", help="two-sided, larger (B > A) or smaller.")]
_Share = Annotated[float, typer.Option("--share-b", help="Share of users allocated to B.")]
_Users = Annotated[
    int | None, typer.Option("--users", min=2, help="Total users (both arms): report power and MDE at this size.")
]
_Seq = Annotated[
    str, typer.Option("--sequential", help="none, msprt (= confidence_sequence), obrien_fleming or pocock.")
]
_Looks = Annotated[int | None, typer.Option("--looks", help="Equally spaced looks (e.g. days) of a sequential design.")]
_Format = Annotated[str, typer.Option("--format", "-f", help="text or json.")]
_Mde = Annotated[float | None, typer.Option("--mde", help="Absolute effect B - A.")]
_Rel = Annotated[float | None, typer.Option("--relative-mde", help="Effect relative to the baseline (0.05 = +5%).")]


def _settings(alpha: float, power: float, alternative: str, share_b: float, sequential: str, looks: int | None) -> Settings:
    return check_settings(Settings(alpha, power, alternative, share_b, sequential, looks))


@guarded
def proportion_cmd(
    baseline: Annotated[float, typer.Option("--baseline", help="Control proportion, e.g. 0.10 click-through.")],
    target: Annotated[float | None, typer.Option("--target", help="Treatment proportion, e.g. 0.105.")] = None,
    mde: _Mde = None,
    relative_mde: _Rel = None,
    method: Annotated[str, typer.Option("--method", help="arcsine (Cohen's h), pooled or unpooled.")] = "arcsine",
    impressions_per_user: Annotated[
        float, typer.Option("--impressions-per-user", help="To report impressions as well as users.")
    ] = 1.0,
    users: _Users = None,
    alpha: _Alpha = 0.05,
    power: _Power = 0.8,
    alternative: _Alt = "two-sided",
    share_b: _Share = 0.5,
    sequential: _Seq = "none",
    looks: _Looks = None,
    output_format: _Format = "text",
) -> None:
    """Users per arm for a difference of two proportions (e.g. click-through 10% -> 10.5%)."""
    st = _settings(alpha, power, alternative, share_b, sequential, looks)
    if not impressions_per_user > 0:
        raise ConfigError(("--impressions-per-user",), f"must be > 0, got {impressions_per_user}")
    effect = _effect(baseline, mde, relative_mde, target, users)
    m = proportion_metric(baseline, method, st)
    if effect is not None and not 0.0 < baseline + effect < 1.0:
        raise ConfigError(("--target",), f"the treatment proportion {baseline + effect} must be in (0, 1)")
    m = dataclasses.replace(m, units_per_user=impressions_per_user)
    _emit(calculate(m, st, effect, users), output_format)


@guarded
def ratio_cmd(
    csv_path: Annotated[
        Path | None, typer.Option("--csv", help="Per-user CSV of past data (one row per user, with a header).")
    ] = None,
    num_col: Annotated[str, typer.Option("--num-col", help="CSV column of the numerator (e.g. clicks).")] = "num",
    den_col: Annotated[str, typer.Option("--den-col", help="CSV column of the denominator (e.g. queries).")] = "den",
    num_mean: Annotated[float | None, typer.Option("--num-mean", help="Mean numerator per user.")] = None,
    num_var: Annotated[float | None, typer.Option("--num-var", help="Variance of the numerator per user.")] = None,
    den_mean: Annotated[float | None, typer.Option("--den-mean", help="Mean denominator per user.")] = None,
    den_var: Annotated[float | None, typer.Option("--den-var", help="Variance of the denominator per user.")] = None,
    cov: Annotated[float | None, typer.Option("--cov", help="Covariance of numerator and denominator.")] = None,
    mde: _Mde = None,
    relative_mde: _Rel = None,
    treatment_variance: Annotated[str, typer.Option(
        "--treatment-variance",
        help="B's per-user variance of the linearised ratio: same (as A's) or scaled (sd x R_B/R_A, CV kept).",
    )] = "same",
    users: _Users = None,
    alpha: _Alpha = 0.05,
    power: _Power = 0.8,
    alternative: _Alt = "two-sided",
    share_b: _Share = 0.5,
    sequential: _Seq = "none",
    looks: _Looks = None,
    output_format: _Format = "text",
) -> None:
    """Users per arm for a ratio metric sum(num)/sum(den) over users (delta method)."""
    st = _settings(alpha, power, alternative, share_b, sequential, looks)
    moments = {"--num-mean": num_mean, "--num-var": num_var, "--den-mean": den_mean, "--den-var": den_var, "--cov": cov}
    if csv_path is not None:
        given = [k for k, v in moments.items() if v is not None]
        if given:
            raise ConfigError((given[0],), "give either --csv or the five moments, not both")
        mx, vx, my, vy, cxy, n_rows = moments_from_csv(csv_path, num_col, den_col)
        source = f"{csv_path}, {n_rows:,} users"
    else:
        missing = [k for k, v in moments.items() if v is None]
        if missing:
            raise ConfigError((missing[0],), f"needed without --csv (missing: {', '.join(missing)})")
        mx, vx, my, vy, cxy = (float(v) for v in moments.values())  # type: ignore[arg-type]
        source = "moments given"
    m = ratio_metric(mx, vx, my, vy, cxy, st, source, treatment_variance)
    effect = _effect(m.baseline, mde, relative_mde, None, users)
    _emit(calculate(m, st, effect, users), output_format)


@guarded
def interleaving_cmd(
    delta: Annotated[float | None, typer.Option("--delta", help="Expected mean per-user preference (not simulate's Delta_AB, see above).")] = None,
    sd: Annotated[float | None, typer.Option("--sd", help="Per-user standard deviation of the preference.")] = None,
    variance: Annotated[float | None, typer.Option("--variance", help="Per-user variance (instead of --sd).")] = None,
    impressions_per_user: Annotated[
        float, typer.Option("--impressions-per-user", help="To report impressions as well as users.")
    ] = 1.0,
    users: Annotated[int | None, typer.Option(
        "--users", min=2,
        help="Users (interleaving has no arms: every user sees both rankers): report power and MDE at this size.",
    )] = None,
    alpha: _Alpha = 0.05,
    power: _Power = 0.8,
    alternative: _Alt = "two-sided",
    sequential: _Seq = "none",
    looks: _Looks = None,
    output_format: _Format = "text",
) -> None:
    """Users for an interleaving experiment: a one-sample test of the per-user preference.

    Estimand: the mean over users of each user's preference, every user weighing the same (--delta, and --sd the
    SD of the preference between users). simulate's Delta_AB is another quantity: a ratio over the impressions with
    a click (compared impressions), clustered by user, so heavy users weigh more. To size from a simulate run
    approximately: --delta its Delta_AB and --sd its se x sqrt(compared impressions) (the SD per compared
    impression); 'users' then counts compared impressions (repeat users' later impressions add less than this
    assumes)."""
    st = _settings(alpha, power, alternative, 0.5, sequential, looks)
    if (sd is None) == (variance is None):
        raise ConfigError(("--sd",), "give exactly one of --sd and --variance")
    if variance is not None and not variance > 0:
        raise ConfigError(("--variance",), f"must be > 0, got {variance}")
    if not impressions_per_user > 0:
        raise ConfigError(("--impressions-per-user",), f"must be > 0, got {impressions_per_user}")
    m = interleaving_metric(float(sd) if sd is not None else math.sqrt(float(variance)))  # type: ignore[arg-type]
    m = dataclasses.replace(m, units_per_user=impressions_per_user)
    if delta is None and users is None:
        raise ConfigError(("--delta",), "give the expected preference (--delta) or a size (--users)")
    _emit(calculate(m, st, delta, users), output_format)


#: the sub-commands, by name (also for the direct path of :func:`onlineeval.cli.main`)
COMMANDS = {"proportion": proportion_cmd, "ratio": ratio_cmd, "interleaving": interleaving_cmd}


def register(app: typer.Typer) -> None:
    """Add the ``power`` sub-app (``proportion``, ``ratio``, ``interleaving``) to the main app."""
    power = typer.Typer(
        name="power",
        help="Sample size, power and MDE without simulation (fixed horizon or sequential designs).",
        no_args_is_help=True,
    )
    for name, command in COMMANDS.items():
        power.command(name)(command)
    app.add_typer(power, name="power")
