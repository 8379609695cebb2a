"""The direct method's CLT interval with a PBM fitted on the log is linearised in the fitted relevances for
first-click rewards (reciprocal rank, abandonment) as for additive ones: before, it held the fitted model fixed and
covered the exact value in 16-26 of 200 logs for 190 nominal. A cascade model (CM) fitted on the log is linearised
likewise (before: 24-34 of 200)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from click_patterns import pattern_value, ubm_chance
from clickmodels import PBM, ByQueryDoc
from onlineeval.estimators import Reward, get_reward
from onlineeval.estimators.checks import check_world, sample_log
from onlineeval.estimators.dm import DirectMethod, _click_gradient, _ubm_click_gradient, _value_gradient

Q, M, K = 3, 6, 4


def _model(rng: np.random.Generator) -> tuple[PBM, np.ndarray]:
    theta = np.array([1.0, *rng.uniform(0.2, 0.9, K - 1)])
    alpha = rng.uniform(0.05, 0.95, (Q, M))
    alpha[0, 2] = 1.0  # a sure click at the top (h = 1): the recursion needs no division by 1 - h
    q, d = np.meshgrid(np.arange(Q), np.arange(M), indexing="ij")
    return PBM(examination=theta, attractiveness=ByQueryDoc(q.ravel(), d.ravel(), alpha.ravel(), default=0.5)), alpha


def _brute_value(h: np.ndarray, reward: Reward) -> float:
    """The list's expected reward (offset left out) by enumerating every click pattern of independent clicks with
    probabilities ``h`` (a PBM's), the first click's slot weight for first-click rewards, every click's for
    additive ones."""
    w = reward.position_weights(h.size)
    total = 0.0
    for pattern in itertools.product((0, 1), repeat=h.size):
        c = np.array(pattern, dtype=bool)
        p = float(np.prod(np.where(c, h, 1.0 - h)))
        if reward.kind == "additive":
            total += p * float(w[c].sum())
        elif c.any():
            total += p * float(w[int(np.argmax(c))])
    return total


REWARDS = [get_reward("reciprocal_rank", K), get_reward("abandonment", K), get_reward("clicks_per_query", K),
           Reward("odd_first", "first_click", np.array([0.3, -1.2, 2.0, 0.7]))]


@pytest.mark.parametrize("reward", REWARDS, ids=lambda r: r.name)
def test_value_gradient_equals_finite_differences_of_the_enumerated_value(reward):
    rng = np.random.default_rng(3)
    mdl, alpha = _model(rng)
    theta = np.asarray(mdl.examination)
    query = np.array([0, 0, 1, 2, 2])
    lists = np.array([[2, 0, 1, 3], [0, 1, 2, -1], [5, 4, 3, 2], [1, 1, 0, 4], [3, -1, -1, -1]])
    alphas = np.where(lists >= 0, alpha[query[:, None], np.maximum(lists, 0)], 0.0)
    grad = _value_gradient(alphas, theta, reward)
    eps = 1e-6
    for i in range(lists.shape[0]):
        valid = lists[i] >= 0
        a = alphas[i]
        for s in range(K):
            if not valid[s]:
                continue
            up, down = a.copy(), a.copy()
            up[s] += eps
            down[s] -= eps
            fd = (_brute_value(theta * up, reward) - _brute_value(theta * down, reward)) / (2 * eps)
            assert grad[i, s] == pytest.approx(fd, rel=1e-6, abs=1e-8), (i, s)


def _brute_ubm_value(alpha: np.ndarray, gamma: np.ndarray, reward: Reward) -> float:
    """A UBM's expected reward of one list (offset left out) by enumerating every click pattern: slot ``s`` clicked
    with probability ``gamma[s, j] alpha[s]``, ``j`` 0 without a click above, else 1 + the previous click's rank."""
    return pattern_value(alpha.size, reward, ubm_chance(alpha, gamma))


@pytest.mark.parametrize("reward", REWARDS, ids=lambda r: r.name)
def test_ubm_click_gradient_equals_finite_differences_of_the_enumerated_value(reward):
    # d V / d h_sj by differencing gamma_sj (h = gamma alpha, so d V / d gamma_sj = alpha_s d V / d h_sj); with
    # every state's examination equal (a PBM) the states' derivatives sum to the PBM's click gradient
    rng = np.random.default_rng(5)
    gamma = np.tril(rng.uniform(0.2, 0.95, (K, K)))
    alpha = np.array([[0.3, 0.8, 0.5, 0.6], [0.9, 0.1, 0.7, 0.0], [1.0, 0.4, 0.2, 0.5]])  # an empty slot, a sure one
    grad = _ubm_click_gradient(alpha, gamma, reward)
    eps = 1e-6
    for i in range(alpha.shape[0]):
        for s in range(K):
            for j in range(K):
                if j > s:
                    assert grad[i, s, j] == 0.0
                    continue
                up, down = gamma.copy(), gamma.copy()
                up[s, j] += eps
                down[s, j] -= eps
                fd = (_brute_ubm_value(alpha[i], up, reward) - _brute_ubm_value(alpha[i], down, reward)) / (2 * eps)
                assert alpha[i, s] * grad[i, s, j] == pytest.approx(fd, rel=1e-6, abs=1e-8), (i, s, j)
    theta = rng.uniform(0.2, 0.95, K)
    pbm = _ubm_click_gradient(alpha, np.tril(np.repeat(theta[:, None], K, axis=1)), reward)
    np.testing.assert_allclose(pbm.sum(axis=2) if reward.kind == "additive" else pbm[:, :, 0],
                               _click_gradient(alpha, theta, reward), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("reward", REWARDS, ids=lambda r: r.name)
def test_cascade_value_gradient_is_the_first_click_form_for_every_reward(reward):
    # a cascade model's click at a slot is its first click: the additive value sum_s w_s P(click at s) is the
    # first-click value of the same weights, so the derivative is the first-click form whatever the reward's kind
    rng = np.random.default_rng(4)
    _, alpha = _model(rng)
    query = np.array([0, 1, 2, 2])
    lists = np.array([[2, 0, 1, 3], [5, 4, 3, -1], [1, 1, 0, 4], [3, -1, -1, -1]])
    alphas = np.where(lists >= 0, alpha[query[:, None], np.maximum(lists, 0)], 0.0)
    grad = _value_gradient(alphas, np.ones(K), reward, True)
    first = Reward("as_first", "first_click", reward.position_weights(K))
    eps = 1e-6
    for i in range(lists.shape[0]):
        a = np.where(lists[i] >= 0, alpha[query[i], np.maximum(lists[i], 0)], 0.0)
        for s in np.flatnonzero(lists[i] >= 0):
            up, down = a.copy(), a.copy()
            up[s] += eps
            down[s] -= eps
            fd = (_brute_value(up, first) - _brute_value(down, first)) / (2 * eps)
            assert grad[i, s] == pytest.approx(fd, rel=1e-6, abs=1e-8), (i, s)


def _coverage_bounds(reps: int) -> tuple[float, float, float]:
    """The SD over the mean SE within the chi2(reps - 1) band at 4 normal SEs, and the lower end of the 99% binomial
    band of 0.95."""
    p = 2 * stats.norm.sf(4.0)
    lo_sd, hi_sd = (float(np.sqrt(stats.chi2.ppf(x, reps - 1) / (reps - 1))) for x in (p / 2, 1 - p / 2))
    return lo_sd, hi_sd, float(stats.binom.ppf(0.005, reps, 0.95))


@pytest.mark.slow
@pytest.mark.parametrize(("family", "model", "reward", "reps"), [
    # 1,000 logs of 4,000 impressions of the suite's PBM world, a PBM fitted on each: the plug-in interval (the
    # model held fixed) covered 16-26 of 200, its SE 0.05-0.07 of the estimates' SD; linearised in the relevances
    # alone (the examination held fixed, until 2026-12-06) SE 1.19-1.22 of the SD for the ideal list and 0.88-0.98
    # for the shuffled one (clicks per query 915 of 1,000 covered): outside the chi2 band of 1,000 logs (0.91-1.10);
    # in the relevances and the examination 0.98-1.00, 943-955 covered
    ("pbm", "pbm", "clicks_per_query", 1000), ("pbm", "pbm", "reciprocal_rank", 1000),
    ("pbm", "pbm", "abandonment", 1000),
    # the cascade world, a cascade model fitted on each log: held fixed, the interval covered 24-34 of 200 (SE
    # 0.07-0.09 of the SD); linearised 186-192, SE 0.96-1.00 of the SD
    ("cascade", "cm", "clicks_per_query", 200), ("cascade", "cm", "reciprocal_rank", 200),
])
def test_the_linearised_interval_carries_the_fit_error(family, model, reward, reps):
    # the bounds: the SD over the mean SE within the chi2(reps - 1) band at 4 normal SEs, coverage at least the lower
    # end of the 99% binomial band of 0.95
    world = check_world(family)
    n = 4000
    big = sample_log(world, reps * n, np.random.default_rng(7))
    est = DirectMethod(model=model)
    lo_sd, hi_sd, lo_cover = _coverage_bounds(reps)
    for target in world.targets:
        truth = world.truth(target, reward)
        vals, ses, covered = np.empty(reps), np.empty(reps), 0
        for r in range(reps):
            e = est.estimate(big.take(np.arange(r * n, (r + 1) * n)), target, reward)
            vals[r], ses[r] = e.value, e.se
            covered += e.ci_low <= truth <= e.ci_high
            if r == 0:
                assert e.held_fixed is None and e.diagnostics.notes["se"].startswith("linearised")
                assert not any("fitting error" in w or "held fixed" in w for w in e.warnings()), e.warnings()
                assert ("first click" in e.diagnostics.notes["se"]) == (model == "cm")
        ratio = vals.std(ddof=1) / ses.mean()
        assert lo_sd <= ratio <= hi_sd, (target.name, ratio, lo_sd, hi_sd)
        assert covered >= lo_cover, (target.name, covered, lo_cover)


@pytest.mark.parametrize("reward", ["clicks_per_query", "reciprocal_rank"])
def test_the_pbm_terms_are_the_refitted_value_s_influence(reward):
    # one more copy of impression i moves the refitted value by IF_i / (n + 1) to first order: d1 = (n + 1) (V(log +
    # i) - V(log)) against the terms' IF_i = num_i - mean, on the three impressions of largest |IF| per target. The
    # terms invert the expected information, the refit follows the observed one: they differ by O(1 / sqrt(shows
    # per pair)) (measured on this log: d1 within 0.8% of the dense observed-information influence, the terms
    # 0.01-2% off for the shuffled list and 4-10% for the ideal one; tests/test_estimators_model_fit.py checks the
    # terms against the dense expected information to 1e-6). With the examination held fixed (before 2026-12-06)
    # they were 1-81% off (the ideal list 43-81%), so 12% fails them
    world = check_world("pbm")
    n = 12800
    data = sample_log(world, n, np.random.default_rng(11), users=False)
    est = DirectMethod(model="pbm", tol=1e-15, max_iter=50000)  # EM converged (1e-10 relative): d1 is the fit's
    rw = get_reward(reward, world.k)
    for target in world.targets:
        num = est.terms(data, target, rw).num
        influence = num - num.mean()
        for i in np.argsort(-np.abs(influence))[:3]:
            more = data.take(np.append(np.arange(n), i))
            d1 = (n + 1) * (float(est.terms(more, target, rw).num.mean()) - float(num.mean()))
            assert d1 == pytest.approx(influence[i], rel=0.12), (target.name, i, d1, influence[i])


#: a UBM world: the suite's attraction and query mix, examination by rank and the previous click's rank
#: (``gamma[r, j]``, ``j`` 0 without a click above, else 1 + its rank), a uniformly random logger
UBM_GAMMA = np.array([[1.0, 0.0, 0.0], [0.5, 0.9, 0.0], [0.3, 0.5, 0.8]])


def _ubm_logs(reps: int, n: int, rng: np.random.Generator) -> list:
    from clickmodels import UBM
    from clickmodels.base import Impressions
    from onlineeval.estimators import LoggedData

    world = check_world("pbm")
    q_, d_ = np.meshgrid(np.arange(world.n_queries), np.arange(world.m), indexing="ij")
    model = UBM(attractiveness=ByQueryDoc(q_.ravel(), d_.ravel(), world.attraction.ravel(), default=0.5),
                examination=UBM_GAMMA)
    out = []
    for _ in range(reps):
        q = rng.choice(world.n_queries, n, p=world.query_probs)
        shown = np.argsort(rng.random((n, world.m)), axis=1)[:, :world.k]
        clicks = model.sample(Impressions(query=q, docs=shown), rng).clicks
        out.append(LoggedData(q, shown, clicks, user=rng.integers(0, n // 3, n)))
    return out


@pytest.mark.slow
def test_the_ubm_interval_carries_the_fit_error_in_a_ubm_world():
    # 1,000 logs of 4,000 impressions of a world whose examination depends on the previous click, a UBM fitted on
    # each: the truth by enumerating every click pattern of each query's list (_brute_ubm_value). Held fixed (until
    # 2026-12-06) the interval covered 28-38 of 300 on the PBM world, its SE 0.06-0.08 of the SD; linearised here
    # SE 0.96-1.05 of the SD, 939-964 of 1,000 covered, every mean within 1.1 of its SE
    world = check_world("pbm")
    reps, n = 1000, 4000
    logs = _ubm_logs(reps, n, np.random.default_rng(3))
    est = DirectMethod(model="ubm")
    lo_sd, hi_sd, lo_cover = _coverage_bounds(reps)
    for name in ("clicks_per_query", "reciprocal_rank"):
        reward = get_reward(name, world.k)
        for target in world.targets:
            truth = sum(world.query_probs[q] * _brute_ubm_value(world.attraction[q, target.lists[q]], UBM_GAMMA, reward)
                        for q in range(world.n_queries))
            vals, ses, covered = np.empty(reps), np.empty(reps), 0
            for r, data in enumerate(logs):
                e = est.estimate(data, target, reward)
                vals[r], ses[r] = e.value, e.se
                covered += e.ci_low <= truth <= e.ci_high
            assert e.held_fixed is None and e.diagnostics.notes["se"].startswith("linearised")
            sd = vals.std(ddof=1)
            assert lo_sd <= sd / ses.mean() <= hi_sd, (name, target.name, sd / ses.mean())
            assert covered >= lo_cover, (name, target.name, covered)
            assert abs(vals.mean() - truth) <= 4 * sd / np.sqrt(reps), (name, target.name, vals.mean(), truth)
