"""A simulation of fewer than 3 days cannot fit the SE floor b of se^2 = a/N + b (two parameters, and the fit asks for
3 checkpoints): the variance model then assumes b = 0 (se^2 = a/N through the last day). Its sizes used to look
precise (the refits' relative SE about 1%, 'floor b = 0.00 x the target se^2', as if a floor had been measured
and found absent) while, beyond the simulated days, they are too small wherever returning users give the SE a floor
(configs/ab.yaml, reciprocal rank: 273,237 impressions needed from 2 simulated days and 20 replicates against
741,150 from its 14 days). Every size, planned day and CUPED day from such a fit is now flagged unstable ('?') and
its range line says the floor was not fitted."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.analysis import (
    required_impressions,
    required_impressions_uncertainty,
    size_refits,
    spread_text,
    target_variance,
    variance_model,
)
from simulations.analysis_sizes import FLOOR_MIN_POINTS, FLOOR_NOT_FITTED
from simulations.sequential import _planned, _planned_fractions

ALPHA, POWER, QPD, EFFECT = 0.05, 0.8, 1000.0, 0.01


def _world(days: int, floor_share: float, r: int = 40, seed: int = 3):
    """Replicates' SEs on se^2 = a/N + b over ``days`` days (b = floor_share x the target se^2), and the truth's
    size a / (T - b)."""
    t = target_variance(EFFECT, ALPHA, POWER)
    b = floor_share * t
    a = (t - b) * 4e4
    n = QPD * np.arange(1, days + 1)
    rng = np.random.default_rng(seed)
    se = np.sqrt(a / n + b) * (1 + 0.02 * rng.standard_normal((r, days)))
    return se, np.tile(n, (r, 1)), a / (t - b)


def test_fewer_than_three_days_assume_no_floor_and_say_so() -> None:
    assert FLOOR_MIN_POINTS == 3
    for days in (1, 2):
        se, n, true_size = _world(days, 0.5)
        fit = variance_model(n[0], se.mean(axis=0))
        assert (fit.points, fit.b, fit.floor_fitted) == (days, 0.0, False)
        # through the last day: a = se^2 N there, so the size beyond the simulated days is too small
        size = required_impressions(fit, EFFECT, ALPHA, POWER)
        assert size == pytest.approx(fit.a / target_variance(EFFECT, ALPHA, POWER), rel=1e-12)
        assert n[0, -1] < size < 0.8 * true_size
        unc = required_impressions_uncertainty(fit, se, n, EFFECT, 0.0, ALPHA, POWER, (1,))
        assert unc["rel_se"] < 0.05  # the refits see the same assumption: a precise-looking range
        assert unc["unstable"] and unc["floor_fitted"] is False and unc["floor_ratio"] is None
        text = spread_text(unc["range"], str, unc["rel_se"], unc["floor_ratio"], unc["unreachable_share"],
                           floor_fitted=unc["floor_fitted"])
        assert FLOOR_NOT_FITTED in text and "floor b =" not in text


def test_three_days_fit_the_floor_as_before() -> None:
    se, n, true_size = _world(7, 0.5)
    fit = variance_model(n[0], se.mean(axis=0))
    assert fit.floor_fitted and fit.b > 0
    unc = required_impressions_uncertainty(fit, se, n, EFFECT, 0.0, ALPHA, POWER, (1,))
    assert unc["floor_fitted"] is True and not unc["unstable"]
    assert unc["floor_ratio"] == pytest.approx(fit.b / target_variance(EFFECT, ALPHA, POWER), rel=1e-12)
    assert required_impressions(fit, EFFECT, ALPHA, POWER) == pytest.approx(true_size, rel=0.1)
    text = spread_text(unc["range"], str, unc["rel_se"], unc["floor_ratio"], unc["unreachable_share"],
                       floor_fitted=unc["floor_fitted"])
    assert "floor b = " in text and FLOOR_NOT_FITTED not in text


def test_the_sequential_plan_is_flagged_too() -> None:
    se, n, _ = _world(2, 0.5)
    fit = variance_model(n[0], se.mean(axis=0))
    refits = size_refits(se, n, EFFECT, 0.0, (2,), resamples=60)
    fractions = _planned_fractions(np.sqrt(2.0 / n[0]))
    plan = _planned("obrien_fleming", fractions, ALPHA, POWER, 1.0, fit._asdict(), EFFECT, QPD, refits)
    assert plan is not None
    for key, u in plan["uncertainty"].items():
        assert u["unstable"] and u["floor_fitted"] is False and u["floor_ratio"] is None, key
    # a fit of 3 days or more: unflagged where the refits are tight (as before)
    se7, n7, _ = _world(7, 0.1)
    fit7 = variance_model(n7[0], se7.mean(axis=0))
    plan7 = _planned("obrien_fleming", _planned_fractions(np.sqrt(2.0 / n7[0])), ALPHA, POWER, 1.0, fit7._asdict(),
                     EFFECT, QPD, size_refits(se7, n7, EFFECT, 0.0, (2,), resamples=60))
    assert plan7 is not None and plan7["uncertainty"]["fixed_days"]["floor_fitted"] is True
    assert not plan7["uncertainty"]["fixed_days"]["unstable"]
