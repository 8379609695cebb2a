"""Holm and Benjamini-Hochberg against statsmodels.stats.multitest.multipletests and paired.holm."""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.errors import InputError
from onlineeval.stats.multiple import adjust_pvalues, reject_adjusted
from onlineeval.stats.paired import holm

import statsmodels.stats.multitest as mt

# statsmodels' Holm calls gc.collect() on every call (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("no_gc_collect")


@pytest.mark.parametrize(("ours", "theirs"), [("holm", "holm"), ("bh", "fdr_bh")])
def test_matches_statsmodels_row_by_row(ours: str, theirs: str) -> None:
    rng = np.random.default_rng(0)
    p = rng.beta(0.4, 1.0, size=(50, 7))
    p[3, 2] = p[3, 5]  # ties
    p[4] = 0.0
    adj = adjust_pvalues(p, ours)
    dec = reject_adjusted(p, 0.05, ours)
    for row in range(p.shape[0]):
        rej, ref, _, _ = mt.multipletests(p[row], alpha=0.05, method=theirs)
        np.testing.assert_allclose(adj[row], ref, rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(dec[row], rej)


def test_holm_equals_paired_holm_and_nan_is_left_out() -> None:
    p = np.array([0.01, np.nan, 0.04, 0.03, np.nan, 0.2])
    np.testing.assert_allclose(adjust_pvalues(p, "holm"), holm(p), equal_nan=True)
    _, ref, _, _ = mt.multipletests(p[~np.isnan(p)], method="fdr_bh")
    bh = adjust_pvalues(p, "bh")
    assert np.isnan(bh[[1, 4]]).all()
    np.testing.assert_allclose(bh[~np.isnan(p)], ref, rtol=1e-12)


def test_family_wise_rate_under_the_null_by_monte_carlo() -> None:
    rng = np.random.default_rng(5)
    reps, m = 40_000, 6
    p = rng.random((reps, m))
    fwer_raw = (p < 0.05).any(axis=1).mean()
    fwer_holm = reject_adjusted(p, 0.05, "holm").any(axis=1).mean()
    assert abs(fwer_raw - (1 - 0.95**m)) <= 4 * np.sqrt(0.265 * 0.735 / reps)
    assert fwer_holm <= 0.05 + 4 * np.sqrt(0.05 * 0.95 / reps)


def test_bad_input() -> None:
    with pytest.raises(InputError, match="method"):
        adjust_pvalues([0.1], "bonferroni-ish")
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        adjust_pvalues([0.1, 1.2])
