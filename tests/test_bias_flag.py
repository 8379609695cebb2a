"""The report's bias flag (``simulations.analysis.estimate_is_biased``): a t-test whose
false-alarm rate does not depend on the number of replicates.

References: scipy's Student t quantiles, and a Monte Carlo of unbiased normal replicates
(fixed seed, tolerance 4 binomial standard errors).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from simulations.analysis import NULL_BIAS_P, NULL_BIAS_SE, estimate_is_biased


def test_level_is_that_of_four_normal_standard_errors() -> None:
    assert NULL_BIAS_P == pytest.approx(2 * stats.norm.sf(NULL_BIAS_SE), rel=1e-12)


def test_threshold_is_the_t_quantile_with_welch_satterthwaite_df() -> None:
    sd, r, truth_se = 0.3, 5, 0.05
    v = sd**2 / r
    s = math.sqrt(v + truth_se**2)
    df = (v + truth_se**2) ** 2 / (v**2 / (r - 1))
    q = stats.t.ppf(1 - NULL_BIAS_P / 2, df)
    assert not estimate_is_biased(0.999 * q * s, sd, r, truth_se)
    assert estimate_is_biased(1.001 * q * s, sd, r, truth_se)
    assert estimate_is_biased(-1.001 * q * s, sd, r, truth_se)


def test_few_replicates_do_not_flag_what_four_ses_would() -> None:
    # two replicates 5 SE from the truth: the 4-SE rule fires, a t(1) test at the same level does not
    assert not estimate_is_biased(5 * 1.0 / math.sqrt(2), 1.0, 2)
    # many replicates: close to the normal 4 SE
    r = 100_000
    assert estimate_is_biased(4.05 / math.sqrt(r), 1.0, r)
    assert not estimate_is_biased(3.95 / math.sqrt(r), 1.0, r)
    assert not estimate_is_biased(1.0, 1.0, 1)  # one replicate: no spread to judge by
    assert not estimate_is_biased(1.0, 0.0, 10)


@pytest.mark.parametrize("r", [2, 3, 8])
def test_false_alarm_rate_is_the_level_at_any_number_of_replicates(r: int) -> None:
    rng = np.random.default_rng(20261201 + r)
    trials, p = 10_000, 0.05
    x = rng.normal(size=(trials, r))
    flags = [estimate_is_biased(float(m), float(s), r, 0.0, p=p)
             for m, s in zip(x.mean(axis=1), x.std(axis=1, ddof=1), strict=True)]
    rate = float(np.mean(flags))
    assert abs(rate - p) <= 4 * math.sqrt(p * (1 - p) / trials), rate
    # the fixed-z rule at the same nominal level over-fires with few replicates
    z = stats.norm.ppf(1 - p / 2)
    naive = float(np.mean(np.abs(x.mean(axis=1)) / (x.std(axis=1, ddof=1) / math.sqrt(r)) > z))
    if r <= 3:
        assert naive > p + 4 * math.sqrt(p * (1 - p) / trials)
