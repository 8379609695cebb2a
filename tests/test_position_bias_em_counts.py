"""EM on (query, document, slot) counts gives the estimates of EM on impressions.

Reference: :func:`clickmodels.estimation.fit_pbm` (the impression-level PBM EM that
``estimate_em`` called before it ran on counts) on the same log, same start, same
stopping rule.
"""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.estimators import DeterministicTarget, LoggedData
from onlineeval.estimators.pbm_ips import PBMIPS, click_propensities
from onlineeval.estimators.position_bias import estimate_em

K = 4
THETA = np.array([0.9, 0.6, 0.4, 0.25])


def production_log(seed: int, n: int, n_q: int = 40, n_cand: int = 7) -> LoggedData:
    """A Plackett-Luce production log (noisy scores), some lists shorter than K."""
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.05, 0.9, (n_q, n_cand))
    q = rng.integers(0, n_q, n)
    shown = np.argsort(-(alpha[q] + rng.gumbel(0, 0.3, (n, n_cand))), axis=1)[:, :K]
    shown[rng.random(n) < 0.1, K - 1] = -1  # short lists: empty last slot
    p = np.where(shown >= 0, THETA * alpha[q[:, None], np.maximum(shown, 0)], 0.0)
    return LoggedData(q * 1000 + 7, np.where(shown >= 0, shown * 13 + 5, -1), rng.random((n, K)) < p)


def impression_em(data: LoggedData, tol: float, max_iter: int, pseudo: float = 0.0):
    from clickmodels.estimation import EMOptions, fit_pbm
    from clickmodels.logs import from_arrays

    _, qcode = np.unique(data.query, return_inverse=True)
    _, dcode = np.unique(data.shown[data.valid], return_inverse=True)
    docs = np.full(data.shown.shape, -1, dtype=np.int64)
    docs[data.valid] = dcode.reshape(-1)
    return fit_pbm(from_arrays(qcode.reshape(-1), docs, data.clicks), EMOptions(max_iter=max_iter, tol=tol,
                                                                                  pseudo=pseudo))


@pytest.mark.parametrize(("seed", "pseudo"), [(1, 0.0), (2, 0.0), (3, 1.0)])
def test_count_em_equals_impression_em(seed, pseudo):
    data = production_log(seed, 4000)
    for tol, max_iter in ((1e-8, 500), (1e-12, 5000), (0.0, 37)):
        ours = estimate_em(data, relevance="pair", tol=tol, max_iter=max_iter, pseudo=pseudo)
        ref = impression_em(data, tol, max_iter, pseudo)
        gamma = np.asarray(ref.examination)
        np.testing.assert_allclose(ours.examination, gamma / gamma[0], rtol=1e-9)
        assert ours.iterations == ref.trace.iterations
        assert ours.log_likelihood == pytest.approx(ref.trace.log_likelihood[-1], rel=1e-12)


def test_fast_empirical_propensity_equals_the_public_one():
    data = production_log(4, 3000)
    target = DeterministicTarget(np.tile(np.array([5, 18, 31, 44]), (40 * 1000 + 8, 1)), "B")
    theta = THETA / THETA[0]
    est = PBMIPS(examination=tuple(theta), click_propensity="empirical")
    from onlineeval.estimators.pbm_ips import _empirical_rho, _target_pairs

    np.testing.assert_allclose(_empirical_rho(data, theta, _target_pairs(data, target)),
                               click_propensities(data, theta, "empirical"), rtol=1e-13)
    assert np.isfinite(est.estimate(data, target).value)
