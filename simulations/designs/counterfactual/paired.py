r"""The paired difference of two ratio estimates from the same users (what each
counterfactual checkpoint row holds), with its delta-method standard error.

.. math::

    \hat\Delta = \hat R_B - \hat R_A, \quad \hat R_t = \frac{\sum_u x_{tu}}{\sum_u y_{tu}},
    \quad e_{tu} = \frac{x_{tu} - \hat R_t y_{tu}}{\bar y_t}, \quad
    \widehat{\mathrm{se}}^2 = \frac{\sum_u (d_u - \bar d)^2}{n(n-1)}, \; d_u = e_{Bu} - e_{Au}

(Deng, Knoblich and Lu 2018; :func:`onlineeval.stats.ratio_linearization`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special as _spc

__all__ = ["PairedEstimate", "paired_difference"]


class PairedEstimate:
    """An estimate with its interval and two-sided z-test (what a checkpoint row holds)."""

    __slots__ = ("ci_high", "ci_low", "estimate", "pvalue", "se")

    def __init__(self, estimate: float, se: float, alpha: float) -> None:
        self.estimate, self.se = float(estimate), float(se)
        if not (math.isfinite(self.estimate) and math.isfinite(self.se)):
            self.ci_low = self.ci_high = self.pvalue = math.nan
            self.estimate = self.se = math.nan
        elif self.se > 0:
            z = float(-_spc.ndtri(alpha / 2.0))
            self.ci_low, self.ci_high = self.estimate - z * self.se, self.estimate + z * self.se
            self.pvalue = float(min(1.0, 2.0 * _spc.ndtr(-abs(self.estimate) / self.se)))
        else:  # no spread: the interval is the point, the test rejects unless it is 0
            self.ci_low = self.ci_high = self.estimate
            self.pvalue = 1.0 if self.estimate == 0 else 0.0


def paired_difference(
    num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray, alpha: float
) -> PairedEstimate:
    r"""``R_B - R_A`` of two ratio estimates from the *same* users, with the delta-method
    SE of the paired difference (see the module docstring). Undefined (NaN) with fewer
    than two users or a denominator summing to 0."""
    from onlineeval.stats import ratio_linearization

    n = num_a.shape[0]
    if n < 2 or not den_a.sum() > 0 or not den_b.sum() > 0:
        return PairedEstimate(math.nan, math.nan, alpha)
    if not (np.isfinite(num_a).all() and np.isfinite(num_b).all()):
        return PairedEstimate(math.nan, math.nan, alpha)
    r_a, e_a = _linearization(num_a, den_a, ratio_linearization)
    r_b, e_b = _linearization(num_b, den_b, ratio_linearization)
    d = e_b - e_a
    d = d - d.mean()
    return PairedEstimate(r_b - r_a, math.sqrt(float(d @ d) / (n * (n - 1))), alpha)


def _linearization(num: np.ndarray, den: np.ndarray, checked: Any) -> tuple[float, np.ndarray]:
    """``ratio_linearization(num, den)`` (the same expressions) without its input copies
    when the inputs are plain float vectors (``num`` is checked finite by the caller);
    anything else goes to ``checked``, which raises its errors."""
    if (num.dtype == np.float64 and den.dtype == np.float64 and num.ndim == den.ndim == 1
            and num.size == den.size and num.size >= 2 and np.isfinite(den).all() and not (den < 0).any()):
        r = float(num.sum() / den.sum())
        return r, (num - r * den) / den.mean()
    return checked(num, den)  # type: ignore[no-any-return]

