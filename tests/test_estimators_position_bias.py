"""PBM-IPS and position-bias (examination) estimation.

Exact references: expectations of PBM-IPS by enumerating every logged list (a logger
written here) and every click vector (PBM / cascade click probabilities computed here),
against the target's value from the PBM formula. Propensity estimators: seeded
replicates of simulated PBM logs, mean within 4 standard errors (measured from the
replicates' spread) of the true examination ratios.
"""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators import (
    DeterministicTarget,
    LoggedData,
    Propensities,
    Reward,
    available_estimators,
    get_reward,
)
from onlineeval.estimators.pbm_ips import PBMIPS, click_propensities, target_slots
from onlineeval.estimators.position_bias import (
    PositionBiasEstimate,
    estimate_em,
    estimate_examination,
    estimate_harvest,
    estimate_randtop,
    estimate_swap,
    pipeline_bootstrap,
)

# ----------------------------------------------------------------------- a tiny world
THETA = np.array([0.9, 0.5, 0.3])  # absolute examination of slots 0..2
P_QUERY = np.array([0.4, 0.6])
DOCS = {0: [10, 11, 12], 1: [20, 21, 22]}
ALPHA = {10: 0.7, 11: 0.2, 12: 0.45, 20: 0.1, 21: 0.8, 22: 0.35}
TARGET = DeterministicTarget(np.array([[12, 10, 11], [21, 22, 20]]), "B")
WEIGHTS = np.array([1.0, 0.7, 0.2])


def pbm_truth(target_lists: np.ndarray, weights: np.ndarray, theta: np.ndarray = THETA) -> float:
    """V = sum_q P(q) sum_s w_s theta_s alpha(q, t_q(s)) (the PBM formula)."""
    return float(sum(P_QUERY[q] * sum(weights[s] * theta[s] * ALPHA[int(d)] for s, d in enumerate(target_lists[q])
                                      if d >= 0) for q in range(2)))


def logger_lists(q: int, k: int) -> list[tuple[tuple[int, ...], float]]:
    """A randomised logger: every ordered k-subset of the query's documents, with
    probabilities proportional to 1, 2, 3, ... in enumeration order."""
    lists = list(itertools.permutations(DOCS[q], k))
    raw = np.arange(1, len(lists) + 1, dtype=float)
    return list(zip(lists, raw / raw.sum()))


def pbm_click_vectors(docs: tuple[int, ...], theta: np.ndarray) -> list[tuple[np.ndarray, float]]:
    p = np.array([theta[j] * ALPHA[d] for j, d in enumerate(docs)])
    out = []
    for bits in itertools.product((0, 1), repeat=len(docs)):
        c = np.array(bits, dtype=bool)
        out.append((c, float(np.prod(np.where(c, p, 1.0 - p)))))
    return out


def cascade_click_vectors(docs: tuple[int, ...]) -> list[tuple[np.ndarray, float]]:
    """Cascade model: examine top down, click with probability alpha, stop at the click."""
    out, stay = [], 1.0
    for j, d in enumerate(docs):
        c = np.zeros(len(docs), dtype=bool)
        c[j] = True
        out.append((c, stay * ALPHA[d]))
        stay *= 1.0 - ALPHA[d]
    out.append((np.zeros(len(docs), dtype=bool), stay))
    return out


def enumerated_log(k: int, clicks_of, logger=logger_lists) -> tuple[LoggedData, np.ndarray]:
    """Every (query, list, click vector) as one row, with its probability."""
    qs, shown, clicks, prob = [], [], [], []
    for q in range(2):
        for lst, p_list in logger(q, k):
            for c, p_c in clicks_of(lst):
                qs.append(q)
                shown.append(lst)
                clicks.append(c)
                prob.append(P_QUERY[q] * p_list * p_c)
    return LoggedData(np.array(qs), np.array(shown), np.array(clicks)), np.array(prob)


def exact_expectation(est: PBMIPS, data: LoggedData, prob: np.ndarray, reward: Reward | str) -> float:
    """E[V_hat] of a one-impression log: every row is scored as its own log."""
    rw = get_reward(reward, data.k) if isinstance(reward, str) else reward
    vals = np.array([rw.offset + est.terms(data.take([i]), TARGET, rw).num[0] for i in range(data.n)])
    assert math.isclose(prob.sum(), 1.0, rel_tol=1e-12)
    return float(prob @ vals)


# ----------------------------------------------------------------- PBM-IPS: exactness
@pytest.mark.parametrize("propensity", ["logged", "empirical"])
@pytest.mark.parametrize("weights", [None, WEIGHTS])
def test_exact_expectation_equals_target_value_when_the_logger_shows_every_target_document(propensity, weights):
    # the logger shuffles all 3 documents (k = 3) with unequal probabilities
    data, prob = enumerated_log(3, lambda lst: pbm_click_vectors(lst, THETA))
    reward = Reward("w", "additive", weights)
    est = PBMIPS(examination=tuple(THETA), click_propensity=propensity)
    truth = pbm_truth(TARGET.lists, np.ones(3) if weights is None else weights)
    assert exact_expectation(est, data, prob, reward) == pytest.approx(truth, rel=1e-12, abs=1e-14)
    # only ratios of the examination matter
    scaled = PBMIPS(examination=tuple(THETA / 0.9), click_propensity=propensity)
    assert exact_expectation(scaled, data, prob, reward) == pytest.approx(truth, rel=1e-12)


def test_logged_weights_are_scaled_by_the_showing_probability_when_the_logger_shows_a_subset():
    # k = 2 of 3 documents: a one-impression log can only see shown documents, so the
    # 'logged' weight theta_s/theta_j gives sum_s w_s theta_s alpha_s P(t(s) shown), not V
    data, prob = enumerated_log(2, lambda lst: pbm_click_vectors(lst, THETA))
    est = PBMIPS(examination=tuple(THETA[:2]), click_propensity="logged")
    expected = 0.0
    truth = 0.0
    for q in range(2):
        lists = logger_lists(q, 2)
        for s, d in enumerate(TARGET.lists[q][:2]):
            p_shown = sum(p for lst, p in lists if d in lst)
            expected += P_QUERY[q] * THETA[s] * ALPHA[int(d)] * p_shown
            truth += P_QUERY[q] * THETA[s] * ALPHA[int(d)]
    got = exact_expectation(est, data, prob, "clicks_per_query")
    assert got == pytest.approx(expected, rel=1e-12)
    assert abs(got - truth) > 0.05


class EnumeratedLogger:
    """The test's logger with its item-position marginals M[q, d, j] (document ids index d)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.m = 1 + max(max(v) for v in DOCS.values())
        self.M = np.zeros((2, self.m, k))
        for q in range(2):
            for lst, p in logger_lists(q, k):
                for j, d in enumerate(lst):
                    self.M[q, d, j] += p

    def item_position_marginals(self, query: np.ndarray) -> np.ndarray:
        return self.M[np.asarray(query)]


def test_logger_propensity_exactly_unbiased_when_the_logger_shows_a_subset():
    # k = 2 of 3 documents: rho_qd = sum_j M_qdj theta_j (policy-aware) is exactly unbiased
    data, prob = enumerated_log(2, lambda lst: pbm_click_vectors(lst, THETA))
    data = LoggedData(data.query, data.shown, data.clicks, logger=EnumeratedLogger(2))
    reward = Reward("w", "additive", WEIGHTS[:2])
    est = PBMIPS(examination=tuple(THETA[:2]), click_propensity="logger")
    terms = est.terms(data, TARGET, reward)  # rows are independent under 'logger'
    assert float(prob @ terms.num) == pytest.approx(pbm_truth(TARGET.lists[:, :2], WEIGHTS[:2]), rel=1e-12)
    # its weight: theta_s / sum_j M_qdj theta_j, e.g. doc 12 of query 0 (target slot 0)
    row = int(np.flatnonzero((data.query == 0) & (data.shown[:, 1] == 12))[0])
    m12 = data.logger.M[0, 12]
    assert terms.weights[row, 1] == pytest.approx(THETA[0] / (m12 @ THETA[:2]))
    with pytest.raises(InputError, match="item_position_marginals"):
        est.estimate(LoggedData(data.query, data.shown, data.clicks), TARGET)


def test_empirical_propensity_is_consistent_when_the_logger_shows_a_subset():
    # k = 2 of 3: the policy-aware (empirical) propensity recovers V; seeded replicates,
    # mean within 4 SE of the PBM formula
    rng = np.random.default_rng(20261201)
    lists = {q: logger_lists(q, 2) for q in range(2)}
    truth = pbm_truth(TARGET.lists[:, :2], np.ones(2))
    est = PBMIPS(examination=tuple(THETA[:2]))
    vals = []
    for _ in range(30):
        n = 4000
        q = (rng.random(n) < P_QUERY[1]).astype(np.int64)
        shown = np.empty((n, 2), dtype=np.int64)
        for qq in range(2):
            rows = np.flatnonzero(q == qq)
            pick = rng.choice(len(lists[qq]), rows.size, p=[p for _, p in lists[qq]])
            shown[rows] = np.array([lst for lst, _ in lists[qq]])[pick]
        alpha = np.vectorize(ALPHA.get)(shown)
        clicks = rng.random((n, 2)) < THETA[:2] * alpha
        vals.append(est.estimate(LoggedData(q, shown, clicks), TARGET).value)
    vals = np.array(vals)
    assert abs(vals.mean() - truth) <= 4 * vals.std(ddof=1) / math.sqrt(vals.size)


def test_deterministic_logger_exact_for_the_documents_it_shows():
    # the logger always shows [10, 11, 12] / [20, 21, 22]; the target reorders them
    def fixed(q, k):
        return [(tuple(DOCS[q][:k]), 1.0)]

    data, prob = enumerated_log(3, lambda lst: pbm_click_vectors(lst, THETA), logger=fixed)
    for propensity in ("logged", "empirical"):
        est = PBMIPS(examination=tuple(THETA), click_propensity=propensity)
        got = exact_expectation(est, data, prob, Reward("w", "additive", WEIGHTS))
        assert got == pytest.approx(pbm_truth(TARGET.lists, WEIGHTS), rel=1e-12)
    # with a deterministic logger the empirical propensity is theta of the fixed slot:
    # on a multi-impression log both weights agree row by row
    w_emp = PBMIPS(examination=tuple(THETA)).terms(data, TARGET).weights
    w_log = PBMIPS(examination=tuple(THETA), click_propensity="logged").terms(data, TARGET).weights
    np.testing.assert_allclose(w_emp, w_log, rtol=1e-12)
    # the classic weight theta[t(d)] / theta[j]: doc 12 logged at slot 2, target slot 0
    row = int(np.flatnonzero(data.query == 0)[0])
    assert w_log[row, 2] == pytest.approx(THETA[0] / THETA[2])
    assert w_log[row, 0] == pytest.approx(THETA[1] / THETA[0])


class SubsetLogger:
    """Shows the query's candidates in a uniformly random order (ordered k-subsets);
    the documents it can show are ``candidates[q]``."""

    def __init__(self, candidates: dict[int, list[int]], k: int) -> None:
        self.candidates, self.k = candidates, k

    def shown_probability(self, query: np.ndarray, docs: np.ndarray) -> np.ndarray:
        out = np.zeros(docs.shape)
        for i, q in enumerate(query):  # test helper over a handful of queries
            cand = self.candidates[int(q)]
            out[i] = [min(1.0, self.k / len(cand)) if d in cand else 0.0 for d in docs[i]]
        return out

    def propensities(self, query: np.ndarray, rankings: np.ndarray) -> Propensities:
        item = np.zeros(rankings.shape)
        for i, q in enumerate(query):
            cand = self.candidates[int(q)]
            item[i] = [1.0 / len(cand) if d in cand else 0.0 for d in rankings[i]]
        prefix = np.zeros(rankings.shape)
        for i, q in enumerate(query):
            m, p = len(self.candidates[int(q)]), 1.0
            for j in range(rankings.shape[1]):
                p = p / (m - j) if item[i, j] > 0 and m - j > 0 else 0.0
                prefix[i, j] = p
        return Propensities(prefix[:, -1].copy(), prefix, item)


def test_support_violation_counted_when_the_target_shows_unlogged_documents():
    rng = np.random.default_rng(3)
    logger = SubsetLogger({0: [10, 11], 1: [20, 21, 22]}, 2)  # query 0: doc 12 is never shown
    q = np.array([0, 0, 1, 0, 1, 1, 0])
    shown = np.array([rng.permutation(logger.candidates[int(x)])[:2] for x in q])
    clicks = rng.random(shown.shape) < 0.5
    target = DeterministicTarget(np.array([[12, 10], [21, 22]]))
    data = LoggedData(q, shown, clicks, logger=logger)
    diag = PBMIPS(examination=(0.9, 0.5)).estimate(data, target).diagnostics
    assert diag.support_violations == int((q == 0).sum())
    assert diag.support_checked == q.size
    assert any("support violated" in w for w in diag.warnings())
    ok = DeterministicTarget(np.array([[11, 10], [22, 20]]))
    assert PBMIPS(examination=(0.9, 0.5)).estimate(data, ok).diagnostics.support_violations == 0
    # without a logger the check is unknown, not zero
    assert PBMIPS(examination=(0.9, 0.5)).estimate(data.take(np.arange(q.size)), target) \
        .diagnostics.support_violations is not None  # take keeps the logger
    plain = LoggedData(q, shown, clicks)
    assert PBMIPS(examination=(0.9, 0.5)).estimate(plain, target).diagnostics.support_violations is None


def test_biased_under_cascade_clicks():
    assert ("cascade", "additive") in PBMIPS.biased_under
    assert ("pbm", "additive") in PBMIPS.unbiased_under
    data, prob = enumerated_log(3, cascade_click_vectors)
    # the best position-only examination: the logger's average examination per slot
    theta = np.zeros(3)
    for q in range(2):
        for lst, p in logger_lists(q, 3):
            stay = 1.0
            for j, d in enumerate(lst):
                theta[j] += P_QUERY[q] * p * stay
                stay *= 1.0 - ALPHA[d]
    truth = 0.0
    for q in range(2):
        stay = 1.0
        for d in TARGET.lists[q]:
            truth += P_QUERY[q] * stay * ALPHA[int(d)]
            stay *= 1.0 - ALPHA[int(d)]
    got = exact_expectation(PBMIPS(examination=tuple(theta), click_propensity="logged"), data, prob,
                            "clicks_per_query")
    assert abs(got - truth) > 0.02, (got, truth)


def test_rewards_and_options_are_checked():
    data, _ = enumerated_log(3, lambda lst: pbm_click_vectors(lst, THETA))
    est = PBMIPS(examination=tuple(THETA))
    with pytest.raises(ConfigError, match="additive"):
        est.estimate(data, TARGET, "reciprocal_rank")
    with pytest.raises(ConfigError, match="examination"):
        PBMIPS(examination=(0.5, 0.0, 0.2))
    with pytest.raises(ConfigError, match="estimate_with"):
        PBMIPS(estimate_with="magic")
    with pytest.raises(ConfigError, match="click_propensity"):
        PBMIPS(click_propensity="oracle")
    with pytest.raises(InputError, match="2 examination probabilities"):
        PBMIPS(examination=(0.9, 0.5)).estimate(data, TARGET)
    assert "pbm_ips" in available_estimators()


def test_target_slots_and_notes():
    data = LoggedData([0, 1], [[10, 11, -1], [22, 99, 20]], [[1, 0, 0], [1, 1, 0]])
    np.testing.assert_array_equal(target_slots(data, TARGET), [[1, 2, -1], [1, -1, 2]])
    rho = click_propensities(data, THETA, "empirical")
    np.testing.assert_allclose(rho, [[0.9, 0.5, 1.0], [0.9, 0.5, 0.3]])
    est = PBMIPS(examination=tuple(THETA)).estimate(data, TARGET)
    assert est.diagnostics.notes["examination_estimated"] is False
    assert est.diagnostics.notes["examination"] == pytest.approx(list(THETA))
    # clicks: q0 doc 10 at slot 0 -> theta[1]/theta[0]; q1 doc 22 at slot 0 -> theta[1]/theta[0]; doc 99 -> 0
    assert est.value == pytest.approx((THETA[1] / THETA[0] + THETA[1] / THETA[0]) / 2)


def test_check_instances_use_the_worlds_examination():
    world = SimpleNamespace(family="pbm", k=2, examination=np.array([0.8, 0.4, 0.2]))
    inst, estimated = PBMIPS.check_instances(world)  # no logger in this world: no 'logger' instance
    assert inst.examination == (0.8, 0.4)
    assert estimated.examination is None and estimated.estimate_with == "harvest"
    (other,) = PBMIPS.check_instances(SimpleNamespace(family="cascade", k=3, examination=None))
    assert other.examination is None and other.estimate_with == "auto"


# ------------------------------------------------------------ simulated PBM logs
K = 4
RATIOS = np.array([1.0, 0.55, 0.35, 0.22])
THETA_ABS = 0.9 * RATIOS
N_Q, N_CAND = 30, 6


def world(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.1, 0.8, (N_Q, N_CAND))


def pbm_log(rng: np.random.Generator, alpha: np.ndarray, shown: np.ndarray, q: np.ndarray, **kw) -> LoggedData:
    a = alpha[q[:, None], shown]
    return LoggedData(q, shown, rng.random(shown.shape) < THETA_ABS[None, :] * a, **kw)


def swap_log(rng: np.random.Generator, alpha: np.ndarray, n: int) -> LoggedData:
    q = rng.integers(0, N_Q, n)
    shown = np.tile(np.arange(K), (n, 1))
    j = rng.integers(0, K, n)  # j = 0: no swap
    rows = np.arange(n)
    shown[rows, 0], shown[rows, j] = j, 0
    return pbm_log(rng, alpha, shown, q)


def randtop_log(rng: np.random.Generator, alpha: np.ndarray, n: int) -> LoggedData:
    q = rng.integers(0, N_Q, n)
    return pbm_log(rng, alpha, np.argsort(rng.random((n, K)), axis=1), q)


def ranker_log(rng: np.random.Generator, alpha: np.ndarray, n: int,
               n_rankers: int = 3) -> tuple[LoggedData, np.ndarray]:
    perms = np.argsort(np.random.default_rng(99).random((n_rankers, N_Q, N_CAND)), axis=2)[:, :, :K]
    q = rng.integers(0, N_Q, n)
    r = rng.integers(0, n_rankers, n)
    return pbm_log(rng, alpha, perms[r, q], q), r


def stochastic_log(rng: np.random.Generator, alpha: np.ndarray, n: int) -> LoggedData:
    """A regular production log: Plackett-Luce top-K of noisy scores."""
    q = rng.integers(0, N_Q, n)
    score = alpha[q] + rng.gumbel(0, 0.3, (n, N_CAND))
    return pbm_log(rng, alpha, np.argsort(-score, axis=1)[:, :K], q)


def replicate_check(estimates: list[PositionBiasEstimate]) -> None:
    th = np.array([e.examination for e in estimates])
    se = th.std(axis=0, ddof=1) / math.sqrt(th.shape[0])
    np.testing.assert_array_equal(th[:, 0], 1.0)
    dev = np.abs(th.mean(axis=0) - RATIOS)[1:]
    assert (dev <= 4 * se[1:]).all(), (th.mean(axis=0), se)
    assert (se[1:] > 0).all() and (se[1:] < 0.02).all()  # informative, not degenerate


def test_swap_recovers_examination():
    alpha = world(1)
    rng = np.random.default_rng(11)
    ests = [estimate_swap(swap_log(rng, alpha, 6000)) for _ in range(20)]
    replicate_check(ests)
    assert ests[0].n_interventions == N_Q * (K - 1)
    assert ests[0].method == "swap"


def test_randtop_recovers_examination():
    alpha = world(2)
    rng = np.random.default_rng(12)
    replicate_check([estimate_randtop(randtop_log(rng, alpha, 6000)) for _ in range(20)])


def test_randtop_top_n_only_identifies_the_shuffled_slots():
    alpha = world(2)
    rng = np.random.default_rng(22)
    n = 3000
    shown = np.tile(np.arange(K), (n, 1))
    flip = rng.random(n) < 0.5  # RandTop-2: the top two shuffled, the rest fixed
    shown[flip, 0], shown[flip, 1] = 1, 0
    data = pbm_log(rng, alpha, shown, rng.integers(0, N_Q, n))
    top2 = estimate_randtop(data, n_top=2)
    assert np.isnan(top2.examination[2:]).all()
    clicks = data.clicks.sum(axis=0)
    assert top2.examination[1] == pytest.approx(clicks[1] / clicks[0], rel=1e-12)
    full = randtop_log(rng, alpha, 3000)
    clicks = full.clicks.sum(axis=0)
    assert estimate_randtop(full).examination[3] == pytest.approx(clicks[3] / clicks[0], rel=1e-12)
    with pytest.raises(ConfigError, match="n_top"):
        estimate_randtop(full, n_top=K + 1)
    # an examination estimated as 0 at a slot is refused by PBM-IPS, not used
    no_slot3 = LoggedData(full.query, full.shown, full.clicks & (np.arange(K) < 3))
    with pytest.raises(InputError, match="not positive"):
        PBMIPS(estimate_with="randtop").estimate(no_slot3, DeterministicTarget(np.tile(np.arange(K), (N_Q, 1))))


def test_harvest_recovers_examination_from_deterministic_rankers():
    alpha = world(3)
    rng = np.random.default_rng(13)
    ests = []
    for _ in range(16):
        data, r = ranker_log(rng, alpha, 6000)
        ests.append(estimate_harvest(data, r))
    replicate_check(ests)
    assert all(e.converged for e in ests)
    # two rankers suffice when their positions link every slot
    data, r = ranker_log(rng, alpha, 6000, n_rankers=2)
    assert estimate_harvest(data, r).examination.shape == (K,)


@pytest.mark.slow
def test_em_recovers_examination_from_a_regular_log():
    alpha = world(4)
    rng = np.random.default_rng(14)
    ests = [estimate_em(stochastic_log(rng, alpha, 4000)) for _ in range(12)]
    replicate_check(ests)
    assert all(e.converged for e in ests)


def test_methods_refuse_logs_without_interventions():
    alpha = world(5)
    rng = np.random.default_rng(15)
    q = rng.integers(0, N_Q, 500)
    fixed = pbm_log(rng, alpha, np.tile(np.arange(K), (500, 1)), q)  # one deterministic ranker
    with pytest.raises(InputError, match="no swap intervention"):
        estimate_swap(fixed)
    with pytest.raises(InputError, match="two different orders"):
        estimate_randtop(fixed)
    with pytest.raises(InputError, match="not identified"):
        estimate_harvest(fixed)
    with pytest.raises(InputError, match="not identified"):
        estimate_em(fixed)
    with pytest.raises(InputError, match="neither swap"):
        estimate_examination(fixed)
    with pytest.raises(InputError, match="neither swap"):
        PBMIPS().estimate(fixed, DeterministicTarget(np.tile(np.arange(K)[::-1], (N_Q, 1))))
    data, _ = ranker_log(rng, alpha, 500)
    with pytest.raises(InputError, match="different document sets"):
        estimate_randtop(data)
    with pytest.raises(InputError, match="not identified"):  # one ranker id: no harvested intervention
        estimate_harvest(data, np.zeros(500, dtype=np.int64))
    with pytest.raises(InputError, match="ranker"):
        estimate_harvest(data, np.zeros(3, dtype=np.int64))
    # swaps only between slots 0 and 1: slots 3 and 4 are not identified
    shown = np.tile(np.arange(K), (500, 1))
    flip = rng.random(500) < 0.5
    shown[flip, 0], shown[flip, 1] = 1, 0
    with pytest.raises(InputError, match="slot"):
        estimate_swap(pbm_log(rng, alpha, shown, q))
    with pytest.raises(ConfigError, match="estimate_with"):
        estimate_examination(fixed, "guess")


def test_pbm_ips_with_estimated_examination_notes_and_auto():
    alpha = world(6)
    rng = np.random.default_rng(16)
    data = swap_log(rng, alpha, 6000)
    target = DeterministicTarget(np.tile(np.arange(K)[::-1], (N_Q, 1)))
    est = PBMIPS().estimate(data, target)
    notes = est.diagnostics.notes
    assert notes["examination_estimated"] is True and notes["examination_method"] == "swap"
    np.testing.assert_allclose(notes["examination"], estimate_swap(data).examination)
    same = PBMIPS(examination=tuple(notes["examination"])).estimate(data, target)
    assert est.value == pytest.approx(same.value, rel=1e-12)


# ------------------------------------------------------------------ pipeline bootstrap
def swap_truth(alpha: np.ndarray, target: DeterministicTarget) -> float:
    t = target.lists
    return float(np.mean([(THETA_ABS * alpha[q, t[q]]).sum() for q in range(N_Q)]))


def test_pipeline_interval_is_wider_than_the_plug_in_one_on_a_small_log():
    alpha = world(7)
    rng = np.random.default_rng(17)
    data = swap_log(rng, alpha, 1500)
    target = DeterministicTarget(np.tile(np.arange(K)[::-1], (N_Q, 1)))
    theta_hat = estimate_swap(data).examination
    plug = PBMIPS(examination=tuple(theta_hat)).estimate(data, target)
    pipe = pipeline_bootstrap(data, target, "clicks_per_query", "swap", 200, np.random.default_rng(5))
    assert pipe.value == pytest.approx(plug.value, rel=1e-12)
    assert pipe.n_failed == 0 and pipe.replicates.size == 200
    # the plug-in intervals (CLT and cluster bootstrap with theta_hat held fixed) ignore the
    # error of theta_hat; the pipeline interval carries it
    plug_boot = PBMIPS(examination=tuple(theta_hat)).estimate(data, target, n_boot=200, rng=np.random.default_rng(5))
    width = pipe.ci_high - pipe.ci_low
    assert width > plug.ci_high - plug.ci_low, (pipe, plug)
    assert width > plug_boot.boot_high - plug_boot.boot_low, (pipe, plug_boot)
    # same seed, same interval
    again = pipeline_bootstrap(data, target, "clicks_per_query", "swap", 200, np.random.default_rng(5))
    assert (again.ci_low, again.ci_high) == (pipe.ci_low, pipe.ci_high)


def test_pipeline_bootstrap_resamples_user_clusters_and_passes_rows():
    alpha = world(8)
    rng = np.random.default_rng(18)
    base = swap_log(rng, alpha, 1200)
    data = LoggedData(base.query, base.shown, base.clicks, user=np.arange(1200) // 3)
    target = DeterministicTarget(np.tile(np.arange(K)[::-1], (N_Q, 1)))
    seen = []

    def fn(d: LoggedData, rows: np.ndarray) -> PositionBiasEstimate:
        np.testing.assert_array_equal(d.query, data.query[rows])
        # whole clusters are drawn: every user appears a multiple of 3 times
        seen.append(bool((np.bincount(d.user) % 3 == 0).all()))
        return estimate_swap(d)

    out = pipeline_bootstrap(data, target, "clicks_per_query", fn, 100, np.random.default_rng(1))
    assert all(seen) and len(seen) == 101
    assert out.ci_low < out.value < out.ci_high
    with pytest.raises(ConfigError, match="n_boot"):
        pipeline_bootstrap(data, target, "clicks_per_query", "swap", 10, np.random.default_rng(1))


@pytest.mark.slow
def test_pipeline_bootstrap_coverage_sanity():
    # 24 small swap logs (n = 800), 95% intervals of 100 resamples: the share covering the
    # exact value is not below what a 95% interval gives with probability 0.999
    alpha = world(9)
    target = DeterministicTarget(np.tile(np.arange(K)[::-1], (N_Q, 1)))
    truth = swap_truth(alpha, target)
    rng = np.random.default_rng(19)
    reps, covered = 24, 0
    for _ in range(reps):
        data = swap_log(rng, alpha, 800)
        out = pipeline_bootstrap(data, target, "clicks_per_query", "swap", 100, rng)
        covered += out.ci_low <= truth <= out.ci_high
    assert covered >= stats.binom.ppf(0.001, reps, 0.95), covered


def test_row_grouping_matches_numpy_unique_rows():
    from onlineeval.estimators.position_bias import _groups

    rng = np.random.default_rng(21)
    for _ in range(40):
        n, k = int(rng.integers(1, 300)), int(rng.integers(1, 10))
        x = rng.integers(-1, int(10 ** rng.integers(1, 10)), (n, k))
        if rng.random() < 0.3:
            x[:, -1] = rng.integers(-(2**62), 2**62, n)  # sparse huge ids
        uniq, code = _groups(x)
        ref, inv = np.unique(x, axis=0, return_inverse=True)
        np.testing.assert_array_equal(uniq, ref)
        np.testing.assert_array_equal(code, inv.reshape(-1))


def test_with_the_simulators_logging_policies():
    # logs served by simulations.policies (swap, RandTop-n, Plackett-Luce): the examination
    # ratios and the target's PBM value recovered within 4 SE of seeded replicates
    import simulations.policies as policies
    alpha = world(10)
    scores = 3.0 * alpha
    swap = policies.build_policy("swap", scores, K)
    randtop = policies.build_policy("randtop", scores, K)
    pl = policies.build_policy({"policy": "plackett_luce", "temperature": 0.5}, scores, K)
    target = DeterministicTarget(np.argsort(-alpha, axis=1)[:, :K][:, ::-1].copy())
    truth = swap_truth(alpha, target)
    rng = np.random.default_rng(23)
    th_swap, th_rt, v_logger, v_emp = [], [], [], []
    for _ in range(12):
        q = rng.integers(0, N_Q, 4000)
        th_swap.append(estimate_swap(pbm_log(rng, alpha, swap.sample(q, rng), q)).examination)
        th_rt.append(estimate_randtop(pbm_log(rng, alpha, randtop.sample(q, rng), q)).examination)
        data = pbm_log(rng, alpha, pl.sample(q, rng), q, logger=pl)
        v_logger.append(PBMIPS(examination=tuple(RATIOS), click_propensity="logger").estimate(data, target).value)
        v_emp.append(PBMIPS(examination=tuple(RATIOS)).estimate(data, target).value)
    for th in (np.array(th_swap), np.array(th_rt)):
        se = th.std(axis=0, ddof=1) / math.sqrt(th.shape[0])
        assert (np.abs(th.mean(axis=0) - RATIOS)[1:] <= 4 * se[1:]).all(), (th.mean(axis=0), se)
    for v in (np.array(v_logger), np.array(v_emp)):
        assert abs(v.mean() - truth) <= 4 * v.std(ddof=1) / math.sqrt(v.size), (v.mean(), truth)


def test_target_slots_against_a_loop():
    rng = np.random.default_rng(24)
    lists = np.array([rng.permutation(13)[:5] for _ in range(7)]) - 1  # rankings: no document twice (-1 empty)
    lists[2, :] = [3, 5, 4, -1, -1]
    with pytest.raises(InputError, match="the list of query index 2 holds document 3 twice"):  # (was read as slot 0)
        DeterministicTarget(np.where(np.arange(7)[:, None] == 2, [3, 3, 4, -1, -1], lists))
    target = DeterministicTarget(lists)
    q = rng.integers(0, 7, 60)
    shown = np.array([rng.permutation(14)[:4] for _ in q]) - 1
    shown = np.sort(shown, axis=1)[:, ::-1]  # empty slots (-1) trail
    data = LoggedData(q, shown, np.zeros(shown.shape, bool))
    got = target_slots(data, target)
    for i in range(q.size):  # reference: a plain loop
        for j in range(4):
            d, row = shown[i, j], list(lists[q[i], :4])
            want = row.index(d) if d >= 0 and d in row else -1
            assert got[i, j] == want


def test_harvest_count_em_matches_clickmodels_pbm_fit_on_the_same_likelihood():
    # on a RandTop log every (query, document) pair is seen at several slots, so harvesting's
    # count-level EM and clickmodels' impression-level PBM EM maximise the same likelihood
    alpha = world(11)
    data = randtop_log(np.random.default_rng(25), alpha, 3000)
    h = estimate_harvest(data, tol=1e-12, max_iter=20000)
    e = estimate_em(data, tol=1e-12, max_iter=3000)
    # same start (all 0.5), same posteriors per cell as per impression: the same iterates
    np.testing.assert_allclose(h.examination, e.examination, rtol=1e-9)
    assert h.iterations == e.iterations and h.converged and e.converged
    assert h.n_interventions == e.n_interventions == N_Q * K



def test_empirical_propensity_exact_bias_is_the_never_shown_mass():
    # every two-impression log of query 0 under the k = 2 of 3 logger, PBM clicks: the
    # empirical propensity is exact for pairs the log shows and counts 0 for the others,
    #   E[V_hat] = V - sum_s theta_s alpha_{t(s)} (1 - p_{t(s)})^2,  p_d = P(d is shown)
    rows = [(lst, p_l * p_c, c) for lst, p_l in logger_lists(0, 2) for c, p_c in pbm_click_vectors(lst, THETA)]
    est = PBMIPS(examination=tuple(THETA[:2]), click_propensity="empirical")
    target = DeterministicTarget(TARGET.lists[:, :2], "B")
    mean = 0.0
    for (l1, p1, c1), (l2, p2, c2) in itertools.product(rows, rows):
        data = LoggedData(np.zeros(2, dtype=np.int64), np.array([l1, l2]), np.array([c1, c2]))
        mean += p1 * p2 * float(est.terms(data, target, "clicks_per_query").num.mean())
    shown = {d: sum(p for lst, p in logger_lists(0, 2) if d in lst) for d in DOCS[0]}
    t = TARGET.lists[0, :2]
    value = sum(THETA[s] * ALPHA[int(d)] for s, d in enumerate(t))
    bias = -sum(THETA[s] * ALPHA[int(d)] * (1 - shown[int(d)]) ** 2 for s, d in enumerate(t))
    assert bias < -1e-3  # the logger leaves target documents out
    assert mean == pytest.approx(value + bias, rel=1e-12)
