"""``sequential_test``'s fixed-horizon and peeking tests with Student's t of each look's degrees of freedom (the
counterfactual design's looks), against scipy's t distribution; without them (or with inf) the z tests as before."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from onlineeval.stats.sequential import sequential_test


def test_fixed_and_peeking_take_the_looks_t() -> None:
    rng = np.random.default_rng(7)
    est = rng.normal(0.0, 1.0, (400, 5))
    se = np.ones((400, 5))
    df = rng.uniform(1.5, 40.0, (400, 5))
    df[::7] = np.inf  # z's looks
    alpha = 0.05
    crit = np.where(np.isfinite(df), stats.t.ppf(1 - alpha / 2, np.where(np.isfinite(df), df, 1.0)),
                    stats.norm.ppf(1 - alpha / 2))
    fixed = sequential_test(est, se, "none", alpha=alpha, df=df)
    np.testing.assert_array_equal(fixed.reject, np.abs(est[:, -1]) >= crit[:, -1])
    peek = sequential_test(est, se, "peeking", alpha=alpha, df=df)
    p = np.where(np.isfinite(df), 2 * stats.t.sf(np.abs(est), np.where(np.isfinite(df), df, 1.0)),
                 2 * stats.norm.sf(np.abs(est)))
    first = np.argmax(p < alpha, axis=1)
    np.testing.assert_array_equal(peek.reject, (p < alpha).any(axis=1))
    np.testing.assert_array_equal(peek.stop_look[peek.reject], first[peek.reject])
    assert fixed.reject.sum() < sequential_test(est, se, "none", alpha=alpha).reject.sum()  # t is wider than z
    # every look z's: the z tests exactly
    for kind in ("none", "peeking"):
        a, b = sequential_test(est, se, kind, alpha=alpha, df=np.inf), sequential_test(est, se, kind, alpha=alpha)
        np.testing.assert_array_equal(a.reject, b.reject)
        np.testing.assert_array_equal(a.stop_look, b.stop_look)


@pytest.mark.parametrize("kind", ["msprt", "obrien_fleming"])
def test_the_normal_theory_rules_ignore_the_degrees_of_freedom(kind: str) -> None:
    rng = np.random.default_rng(8)
    est, se = rng.normal(0.0, 1.0, (200, 4)), np.ones((200, 4))
    tau = 1.0 if kind == "msprt" else None
    a = sequential_test(est, se, kind, tau=tau, df=np.full((200, 4), 3.0))
    b = sequential_test(est, se, kind, tau=tau)
    np.testing.assert_array_equal(a.reject, b.reject)
