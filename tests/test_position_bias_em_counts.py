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
        # the same stopping rule on log-likelihoods summed in other orders: at tol 1e-12 the last change sits within
        # rounding of the threshold (plain EM, seed 3: 799 against 798 once clickmodels' compress ordered the
        # distinct rows by hash); SQUAREM's extrapolation carries those last bits, so at 1e-12 (relative changes of
        # 1e-11 to 1e-12 per cycle along PBM's flat scale direction) the two stop up to four cycles (12 E-steps) apart
        # (seed 3, pseudo 1: 187 against 178 once jumps leaving (0, 1) were shortened) with the same fit (the
        # parameters agree to 1e-9 above)
        assert abs(ours.iterations - ref.trace.iterations) <= (12 if tol == 1e-12 else 0)
        # (a few cycles more or less move the last log-likelihood by about 1e-11 of itself)
        same = ours.iterations == ref.trace.iterations
        assert ours.log_likelihood == pytest.approx(ref.trace.log_likelihood[-1], rel=1e-12 if same else 2e-11)


def test_fast_empirical_propensity_equals_the_public_one():
    data = production_log(4, 3000)
    target = DeterministicTarget(np.tile(np.array([5, 18, 31, 44]), (40 * 1000 + 8, 1)), "B")
    theta = THETA / THETA[0]
    est = PBMIPS(examination=tuple(theta), click_propensity="empirical")
    from onlineeval.estimators.pbm_ips import _empirical_rho, _target_pairs

    np.testing.assert_allclose(_empirical_rho(data, theta, _target_pairs(data, target)),
                               click_propensities(data, theta, "empirical"), rtol=1e-13)
    assert np.isfinite(est.estimate(data, target).value)


class UniformMarginals:
    """Item-position marginals varying with query, document and slot (all positive)."""

    def item_position_marginals(self, query: np.ndarray) -> np.ndarray:
        q = np.asarray(query, dtype=np.float64)
        d = np.arange(100, dtype=np.float64)
        j = np.arange(K, dtype=np.float64)
        return 0.002 + 0.001 * ((q[:, None, None] + 3 * d[None, :, None] + 7 * j[None, None, :]) % 5)


@pytest.mark.parametrize(("kind", "doc_scale"), [("empirical", 13), ("empirical", 10**12), ("logged", 13),
                                                 ("logged", 10**12), ("logger", 13)])
def test_pbm_ips_terms_equal_the_plain_formula(kind, doc_scale):
    # num_i = sum_j c_ij w_s theta_s / rho_ij over clicked slots whose document the target
    # shows at s, with rho from click_propensities (its own grouping) and s from a dict;
    # doc_scale 10**12: pair codes by the sorted-groups fallback instead of the dense range
    data = production_log(5, 3000)
    if doc_scale != 13:
        shown = np.where(data.shown >= 0, data.shown * doc_scale, -1)
        data = LoggedData(data.query, shown, data.clicks)
    if kind == "logger":
        data = LoggedData(data.query, data.shown, data.clicks, logger=UniformMarginals())
    rng = np.random.default_rng(6)
    uq = np.unique(data.query)
    docs = np.unique(data.shown[data.valid])
    lists = np.full((int(uq.max()) + 1, K), -1, dtype=np.int64)
    pool = np.append(docs, [-5])  # some never-logged documents too; a ranking holds each document once
    lists[uq] = np.array([rng.choice(pool, K, replace=False) for _ in uq])
    lists[uq[::7], K - 1] = -1
    target = DeterministicTarget(lists, "B")
    theta = THETA / THETA[0]
    w = np.array([1.0, 0.6, 0.3, 0.1])
    from onlineeval.estimators import Reward

    terms = PBMIPS(examination=tuple(theta), click_propensity=kind).terms(data, target, Reward("w", "additive", w))
    rho = click_propensities(data, theta, kind)
    want_num = np.zeros(data.n)
    want_w = np.zeros(data.shown.shape)
    for i in range(data.n):
        row = list(lists[data.query[i]])
        for j in range(K):
            d = data.shown[i, j]
            if d >= 0 and d in row:
                s = row.index(d)
                want_w[i, j] = theta[s] / rho[i, j]
                want_num[i] += data.clicks[i, j] * w[s] * theta[s] / rho[i, j]
    if kind == "empirical":
        # the terms are linearised in rho_hat (pbm_ips docstring, "Interval of the empirical
        # propensity"; tests/test_pbm_ips_empirical_interval.py): equal per query, not per impression
        qi = np.unique(data.query, return_inverse=True)[1].reshape(-1)
        np.testing.assert_allclose(np.bincount(qi, terms.num), np.bincount(qi, want_num), rtol=1e-12, atol=1e-12)
        assert np.abs(terms.num - want_num).max() > 1e-3  # (not the plug-in terms)
    else:
        np.testing.assert_allclose(terms.num, want_num, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(terms.weights, want_w, rtol=1e-12, atol=1e-15)


def test_logger_propensity_zero_for_a_logged_document_is_an_error():
    from onlineeval.errors import InputError

    class Zero(UniformMarginals):
        def item_position_marginals(self, query: np.ndarray) -> np.ndarray:
            m = super().item_position_marginals(query)
            m[:, 18, :] = 0.0  # document 18 = 1 * 13 + 5 is logged
            return m

    base = production_log(5, 500)
    data = LoggedData(base.query, base.shown, base.clicks, logger=Zero())
    i, j = (int(x) for x in np.argwhere(data.shown == 18)[0])
    target = DeterministicTarget(np.tile(np.array([5, 18, 31, 44]), (40 * 1000 + 8, 1)), "B")
    with pytest.raises(InputError, match=f"document 18 of query {int(data.query[i])} probability 0.*impression {i}\\)"):
        PBMIPS(examination=tuple(THETA), click_propensity="logger").estimate(data, target)


def test_log_and_estimate_pickle_after_an_estimate_with_estimated_examination():
    import pickle

    data = production_log(6, 800)
    target = DeterministicTarget(np.tile(np.array([5, 18, 31, 44]), (40 * 1000 + 8, 1)), "B")
    first = PBMIPS(estimate_with="em").estimate(data, target)
    again = pickle.loads(pickle.dumps(data))  # the per-log caches are not on the log
    assert PBMIPS(estimate_with="em").estimate(again, target).value == first.value
    est = pickle.loads(pickle.dumps(estimate_em(data)))
    assert est.linearisation is None and est.examination[0] == 1.0
