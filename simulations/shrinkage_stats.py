r"""The statistics of the shrinkage study (:mod:`simulations.shrinkage`): the relation's fit and its MDE.

- :func:`fit_relation`: ``y = beta x`` (or ``alpha + beta x``) by weighted least squares with
  weights :math:`1/(\hat\tau^2 + s_i^2)`, :math:`\hat\tau^2` from :func:`paule_mandel_tau2`
  (Paule and Mandel 1982), covariance :math:`\max(1, q)(X^\top W X)^{-1}` and Student-t intervals
  on :math:`n - p` degrees of freedom (the modified Knapp-Hartung interval; Knapp and Hartung 2003,
  Roever, Knapp and Friede 2015), returned as a :class:`RelationFit` (predictions with confidence
  and prediction intervals);
- :func:`kendall_tau_b`: Kendall's tau-b of two orderings (Kendall 1945);
- :func:`mde_offline`: the offline gain an experiment with a given standard error detects through
  the fitted slope.

Where each is used, and the study's structure, is in the docstring of :mod:`simulations.shrinkage`,
which re-exports every public name here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.stats as sps

__all__ = ["RelationFit", "fit_relation", "kendall_tau_b", "mde_offline", "paule_mandel_tau2"]


def kendall_tau_b(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    r"""Kendall's tau-b of two orderings (ties in either count as neither concordant nor discordant).

    :math:`\tau_b = (C - D) / \sqrt{(n_0 - T_x)(n_0 - T_y)}` with :math:`n_0 = n(n-1)/2`,
    :math:`C, D` the concordant and discordant pairs and :math:`T_x, T_y` the pairs tied in
    ``x`` and in ``y`` (Kendall 1945). ``nan`` when either ordering is constant or ``n < 2``.
    """
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"x and y must be 1-d of the same length, got shapes {a.shape} and {b.shape}")
    n = a.size
    if n < 2:
        return float("nan")
    i, j = np.triu_indices(n, 1)
    sa, sb = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    n0 = n * (n - 1) / 2
    tx, ty = float(np.sum(sa == 0)), float(np.sum(sb == 0))
    denom = math.sqrt((n0 - tx) * (n0 - ty))
    return float(np.sum(sa * sb) / denom) if denom > 0 else float("nan")


def _wls(design: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Weighted least squares: coefficients, (X'WX)^-1 and the weighted residual sum of squares."""
    xtwx = design.T @ (w[:, None] * design)
    inv = np.linalg.inv(xtwx)
    coef = inv @ (design.T @ (w * y))
    r = y - design @ coef
    return coef, inv, float(np.sum(w * r * r))


def paule_mandel_tau2(design: np.ndarray, y: np.ndarray, s: np.ndarray) -> float:
    r"""The between-point variance :math:`\tau^2 \ge 0` solving
    :math:`Q(\tau^2) = \sum_i w_i (y_i - x_i^\top \hat\beta_w)^2 = n - p`,
    :math:`w_i = 1 / (\tau^2 + s_i^2)` (Paule and Mandel 1982): 0 when the known errors
    already explain the scatter (:math:`Q(0) \le n - p`). With every :math:`s_i = 0` it is
    the ordinary residual variance :math:`RSS / (n - p)`. :math:`Q` decreases in
    :math:`\tau^2`, so the root is bracketed and found by bisection to relative 1e-12."""
    n, p = design.shape
    df = n - p
    if df < 1:
        raise ValueError(f"{n} points cannot fit {p} coefficients with a residual degree of freedom")
    s2 = np.asarray(s, dtype=np.float64) ** 2
    if not np.any(s2 > 0):
        _, _, rss = _wls(design, y, np.ones(n))
        return rss / df
    exact = s2 == 0
    if not exact.any():
        _, _, q0 = _wls(design, y, 1.0 / s2)
        if q0 <= df:
            return 0.0
        lo = 0.0
    else:  # some exact points: tau^2 > 0 is needed for finite weights
        lo = 1e-12 * max(float(np.var(y)), float(s2.max()), 1e-300)

    def q(t2: float) -> float:
        return _wls(design, y, 1.0 / (t2 + s2))[2] - df

    hi = max(float(np.var(y)) * n, float(s2.max()), 1e-300)
    while q(hi) > 0:
        hi *= 4.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if q(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class RelationFit:
    """A fitted relation ``online = coef . [1?, offline]`` (see the module docstring)."""

    intercept: bool
    coef: tuple[float, ...]  # (slope,) or (intercept, slope)
    cov: tuple[tuple[float, ...], ...]
    tau2: float
    df: int
    q: float  # weighted residual sum of squares / df at the fitted tau^2
    level: float

    @property
    def slope(self) -> float:
        return self.coef[-1]

    def _t(self) -> float:
        return float(sps.t.ppf(0.5 + self.level / 2, self.df))

    def ci(self, k: int) -> tuple[float, float]:
        se = math.sqrt(self.cov[k][k])
        return self.coef[k] - self._t() * se, self.coef[k] + self._t() * se

    def predict(self, x0: float) -> dict[str, Any]:
        """Mean online effect at offline gain ``x0`` with its confidence interval, and the
        prediction interval for one new pair (adds ``tau2``)."""
        v = np.array([1.0, x0] if self.intercept else [x0])
        mean = float(v @ np.array(self.coef))
        se = math.sqrt(max(float(v @ np.array(self.cov) @ v), 0.0))
        t = self._t()
        pse = math.sqrt(se * se + self.tau2)
        return {"offline_gain": x0, "online_effect": mean, "ci": [mean - t * se, mean + t * se],
                "prediction_interval": [mean - t * pse, mean + t * pse]}

    def as_dict(self) -> dict[str, Any]:
        k = len(self.coef) - 1
        out: dict[str, Any] = {"slope": self.slope, "slope_se": math.sqrt(self.cov[k][k]),
                               "slope_ci": list(self.ci(k))}
        if self.intercept:
            out.update(intercept=self.coef[0], intercept_se=math.sqrt(self.cov[0][0]), intercept_ci=list(self.ci(0)))
        out.update(tau2=self.tau2, df=self.df, q=self.q)
        return out


def fit_relation(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    s: Sequence[float] | np.ndarray | None = None,
    intercept: bool = False,
    level: float = 0.95,
) -> RelationFit | None:
    r"""Fit ``y = beta x`` (or ``alpha + beta x``) with known response errors ``s``.

    Weighted least squares with :math:`w_i = 1/(\hat\tau^2 + s_i^2)`, :math:`\hat\tau^2`
    from :func:`paule_mandel_tau2`; covariance :math:`\max(1, q)(X^\top W X)^{-1}` and
    Student-t intervals on :math:`n - p` degrees of freedom. ``None`` when there are not
    more points than coefficients or the offline deltas do not vary (the slope is not
    identified).
    """
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ss = np.zeros_like(ys) if s is None else np.asarray(s, dtype=np.float64)
    design = np.column_stack([np.ones_like(xs), xs]) if intercept else xs[:, None]
    n, p = design.shape
    if n <= p or (intercept and np.ptp(xs) == 0) or (not intercept and not np.any(xs != 0)):
        return None
    tau2 = paule_mandel_tau2(design, ys, ss)
    s2 = ss**2
    w = 1.0 / (tau2 + s2) if (tau2 > 0 or np.all(s2 > 0)) else np.ones(n)
    coef, inv, wrss = _wls(design, ys, w)
    q = wrss / (n - p)
    if tau2 == 0 and not np.any(s2 > 0):  # an exact fit of exact truths: no scatter at all
        cov = inv * 0.0
    else:
        cov = inv * max(1.0, q)
    return RelationFit(intercept, tuple(float(c) for c in coef), tuple(tuple(float(v) for v in row) for row in cov),
                       float(tau2), int(n - p), float(q), level)


def mde_offline(se: np.ndarray | float, slope: float, alpha: float, power: float) -> np.ndarray:
    r"""Offline gain whose predicted online effect :math:`\hat\beta x` an experiment with
    standard error ``se`` detects with ``power`` at two-sided ``alpha``:
    :math:`(z_{1-\alpha/2} + z_{power})\, se / \hat\beta`; ``nan`` for a slope <= 0."""
    z = float(sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power))
    se = np.asarray(se, dtype=np.float64)
    if not slope > 0:
        return np.full_like(se, np.nan)
    return z * se / slope
