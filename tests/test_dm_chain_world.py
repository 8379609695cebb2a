"""The direct method with a DBN or CCM fitted on the log by EM: its linearised interval
(:mod:`onlineeval.estimators.chain_linearisation`).

References independent of the code: clickmodels' own ``log_likelihood`` (the chain's conditional click
probabilities, not the closed form the code differentiates), differentiated numerically for the sessions' scores and
the observed information; the value of a list by enumerating its click patterns (``tests/click_patterns.py``); the
exact values of a DBN world (the check world's queries and relevances, a satisfaction per pair, perseverance 0.7)
and of a CCM world (the same relevances, tau 0.85 / 0.7 / 0.3), each logged by a uniform logger, for the coverage.
"""

from __future__ import annotations

import numpy as np
import pytest

from click_patterns import dcm_chance, pattern_value
from numerical_derivatives import check_terms, scores_and_information
from coverage_checks import assert_linearised_coverage, sd_band
from sparse_worlds import sparse_estimates
from onlineeval.estimators import get_estimator, get_reward
from onlineeval.estimators.checks import check_world

REWARDS = ("clicks_per_query", "reciprocal_rank")
SATISFACTION = np.random.default_rng(12).uniform(0.2, 0.8, (4, 5))
GAMMA = 0.7
TAU = (0.85, 0.7, 0.3)
MODELS = ("dbn", "ccm")


def _model(name: str, query: np.ndarray, doc: np.ndarray, tables: list[np.ndarray], shared):
    """A DBN (tables: relevance, satisfaction; shared: gamma) or CCM (relevance; tau1, tau2, tau3) over the pairs
    ``(query, doc)``."""
    from clickmodels import CCM, DBN, ByQueryDoc

    per_pair = [ByQueryDoc(query, doc, t, default=0.5) for t in tables]
    return DBN(*per_pair, *shared) if name == "dbn" else CCM(*per_pair, *shared)


def _world(name: str):
    world = check_world("pbm")
    q_, d_ = np.meshgrid(np.arange(world.n_queries), np.arange(world.m), indexing="ij")
    tables = [world.attraction.ravel()] + ([SATISFACTION.ravel()] if name == "dbn" else [])
    return world, _model(name, q_.ravel(), d_.ravel(), tables, (GAMMA,) if name == "dbn" else TAU)


def _logs(name: str, reps: int, n: int, rng: np.random.Generator, empty_share: float = 0.0) -> list:
    """The model's clicks on uniformly shuffled lists of the world's queries; ``empty_share`` of the lists without
    their last slot (an empty slot, passed without stopping)."""
    from clickmodels.base import Impressions
    from onlineeval.estimators import LoggedData

    world, model = _world(name)
    out = []
    for _ in range(reps):
        q = rng.choice(world.n_queries, n, p=world.query_probs)
        shown = np.argsort(rng.random((n, world.m)), axis=1)[:, :world.k]
        shown[rng.random(n) < empty_share, -1] = -1
        clicks = model.sample(Impressions(query=q, docs=shown), rng).clicks
        out.append(LoggedData(q, shown, clicks, user=rng.integers(0, n // 3, n)))
    return out


def _value(name: str, tables: list[np.ndarray], shared, filled: np.ndarray, reward) -> float:
    """The model's expected reward of one list (``tables``: its documents' per-pair values) by enumerating its click
    patterns (an empty slot: relevance 0, passed without stopping)."""
    a = np.where(filled, tables[0], 0.0)
    if name == "dbn":
        after_click, after_skip = shared[0] * (1.0 - tables[1]), shared[0]
    else:
        after_click, after_skip = shared[1] * (1.0 - a) + shared[2] * a, shared[0]
    return pattern_value(a.size, reward, dcm_chance(a, after_click, np.where(filled, after_skip, 1.0)))


def _truth(name: str, target, reward) -> float:
    world = check_world("pbm")
    reward = get_reward(reward, world.k)
    shared = (GAMMA,) if name == "dbn" else TAU
    filled = np.ones(world.k, dtype=bool)
    return sum(world.query_probs[q] * _value(name, [world.attraction[q, target.lists[q]],
                                                    SATISFACTION[q, target.lists[q]]], shared, filled, reward)
               for q in range(world.n_queries))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("rw", REWARDS)
def test_the_value_gradient_against_the_enumerated_value(name, rw):
    from onlineeval.estimators.chain_linearisation import chain_of, chain_value_gradient

    rng = np.random.default_rng(4)
    k = 4
    tables = [rng.uniform(0.1, 0.9, (3, k)) for _ in range(2 if name == "dbn" else 1)]
    shared = np.array([0.6] if name == "dbn" else [0.8, 0.6, 0.25])
    filled = np.ones((3, k), dtype=bool)
    filled[1, 2] = filled[2, 3] = False  # an empty slot inside the list and at its end
    reward = get_reward(rw, k)
    _, mdl = _world(name)
    d_fam, d_shared = chain_value_gradient(chain_of(mdl), tables, filled, reward, shared)
    h = 1e-6
    for i in range(3):
        def v(tab=None, sh=shared):
            return _value(name, [t[i] for t in tables] if tab is None else tab, sh, filled[i], reward)
        for f, t in enumerate(tables):
            for j in range(k):
                up, down = [x[i].copy() for x in tables], [x[i].copy() for x in tables]
                up[f][j] += h
                down[f][j] -= h
                want = (v(up) - v(down)) / (2 * h) if filled[i, j] else 0.0
                assert d_fam[f][i, j] * filled[i, j] == pytest.approx(want, abs=1e-8), (f, i, j)
        for s in range(shared.size):
            e = np.eye(shared.size)[s] * h
            assert d_shared[i, s] == pytest.approx((v(sh=shared + e) - v(sh=shared - e)) / (2 * h), abs=1e-8)


@pytest.mark.parametrize("name", MODELS)
def test_the_terms_against_numerical_derivatives(name):
    # n grad V' H^-1 s_i with the scores and the observed information by central differences of clickmodels' own
    # log_likelihood per session (steps relative to each parameter's distance from its bounds), the value's
    # gradient by differences of the enumerated value; the parameters held fixed as the code holds them (on the
    # boundary, or informed below MIN_INFORMATION). A fifth of the lists have an empty last slot
    from clickmodels.base import Impressions
    from onlineeval.estimators.chain_linearisation import chain_correction, chain_of
    from onlineeval.estimators.dcm_linearisation import MIN_INFORMATION
    from onlineeval.estimators.model_fit import pair_index

    world = check_world("pbm")
    data = _logs(name, 1, 1500, np.random.default_rng(2), empty_share=0.2)[0]
    mdl = get_estimator("dm", model=name, tol=1e-14, max_iter=100000).fit_model(data)
    chain = chain_of(mdl)
    idx = pair_index(data)
    k, m = data.k, idx.n_pairs
    pairs = Impressions(query=idx.query, docs=idx.doc[:, None])
    fam = len(chain.tables)
    x_all = np.concatenate([np.asarray(t.lookup(pairs))[:, 0] for t in chain.tables] + [chain.shared])
    inside = [j for j in range(x_all.size) if 1e-9 < x_all[j] < 1 - 1e-9]
    sessions = Impressions(query=data.query, docs=data.shown)

    def model_at(x: np.ndarray, free: list):
        full = x_all.copy()
        full[free] = x
        return _model(name, idx.query, idx.doc, [full[f * m:(f + 1) * m] for f in range(fam)], full[fam * m:]), full

    def lls(x: np.ndarray, free: list) -> np.ndarray:
        return model_at(x, free)[0].log_likelihood(sessions, data.clicks)

    scores, info = scores_and_information(lambda x: lls(x, inside), x_all[inside])
    informed = np.diag(info) >= MIN_INFORMATION
    free = [j for j, ok in zip(inside, informed) if ok]
    scores, info = scores[:, informed], info[np.ix_(informed, informed)]
    assert all(fam * m + s in free for s in range(chain.shared.size)), free  # the shared parameters are free
    assert len(free) >= fam * m - 10, (len(free), m)  # and most others
    x0 = x_all[free]
    filled = np.ones(k, dtype=bool)
    for rw_name in REWARDS:
        reward = get_reward(rw_name, k)
        for target in world.targets:
            t_lists = target.rankings(idx.uq)[:, :k]

            def value(x: np.ndarray) -> float:
                _, full = model_at(x, free)
                at = {(int(q), int(d)): p for p, (q, d) in enumerate(zip(idx.query, idx.doc))}
                vq = [_value(name, [full[f * m + np.array([at[(int(q), int(d))] for d in row])] for f in range(fam)],
                             full[fam * m:], filled, reward) for q, row in zip(idx.uq, t_lists)]
                return float(np.dot(idx.n_q, vq) / data.n)

            check_terms(chain_correction, mdl, data, target, reward, scores, info, value, x0)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_the_interval_covers(name):
    # 1,000 logs of 4,000 impressions of the model's world, the model fitted on each by EM. DBN: held fixed (before
    # 2026-12-06) the interval covered 105-138 of 1,000 (SE 0.06-0.08 of the SD); linearised 940-959 (SE 0.96-1.03
    # of the SD, the means within 1.7 SE of the exact values). CCM: held fixed 34-126 (SE 0.03-0.08 of the SD);
    # linearised 933-956 (SE 0.96-1.03 of the SD; the shuffled list's 0.96 here was 1.01 on another 1,000 logs,
    # seed 5: 945-952 covered)
    logs = _logs(name, 1000, 4000, np.random.default_rng(3))
    assert_linearised_coverage(get_estimator("dm", model=name), logs, [
        (target, rw, _truth(name, target, rw)) for rw in REWARDS for target in check_world("pbm").targets])


@pytest.mark.slow
@pytest.mark.parametrize("model", ["dbn", "sdbn", "ccm"])
def test_the_interval_on_sparse_logs_stays_finite(model):
    # 200 Zipf-distributed queries of 10 candidates, DBN clicks (perseverance 0.7), 4,000 impressions a log: a
    # document clicked last only above one other document informs only its satisfaction times the other's
    # relevance (each informed on its own, jointly not), which made the SE of a DBN's value 1,600 on one log and an
    # SDBN's SE / SD 1e8 over 100 logs before such parameters were held fixed (weakly_informed). Clicks per query:
    # the SD over the mean SE within the chi2(59) band at 4 normal SEs, every SE finite and below 1, the value the
    # model's own (DM itself is biased here: the documented rare-pair bias)
    from clickmodels import DBN, ByQueryDoc

    q_n, m = 200, 10
    rng = np.random.default_rng(1)
    alpha = rng.uniform(0.02, 0.8, (q_n, m))
    qq, dd = np.meshgrid(np.arange(q_n), np.arange(m), indexing="ij")
    world = DBN(ByQueryDoc(qq.ravel(), dd.ravel(), alpha.ravel(), default=0.5),
                ByQueryDoc(qq.ravel(), dd.ravel(), rng.uniform(0.2, 0.8, q_n * m), default=0.5), GAMMA)
    vals, ses = sparse_estimates(world, alpha, model, rng)
    lo, hi = sd_band(vals.size)
    assert np.all(np.isfinite(ses)) and ses.max() < 1.0, ses.max()
    assert lo <= vals.std(ddof=1) / ses.mean() <= hi, vals.std(ddof=1) / ses.mean()


def test_the_weakly_informed_rule_on_small_blocks():
    # the Cholesky elimination with the largest pivot first: a pair of parameters informed each on its own (6.7,
    # 6.37) and jointly not (their information given the other 0.006) loses the second; a well-conditioned block
    # keeps both; of three parameters of rank 2 (the third's direction the sum of the first two's), the third
    # (information 18) is kept first, then the first (given the third 4.5) and the second is held (given both 0); a
    # parameter below the floor on its own is held whatever the block
    from scipy.sparse import csc_matrix

    from onlineeval.estimators.dcm_linearisation import weakly_informed

    def held(mat, block, free=None):
        mat = np.asarray(mat, dtype=np.float64)
        free = np.ones(mat.shape[0], dtype=bool) if free is None else np.asarray(free)
        return weakly_informed(csc_matrix(mat), free, np.asarray(block)).tolist()

    assert held([[6.7, 6.53], [6.53, 6.37]], [0, 0]) == [False, True]
    assert held([[6.7, 6.53], [6.53, 6.37]], [0, 1]) == [False, False]  # two queries' blocks: not judged jointly
    assert held([[6.7, 6.53], [6.53, 6.37]], [-1, -1]) == [False, False]  # shared parameters: the diagonal only
    assert held([[10.0, 1.0], [1.0, 10.0]], [0, 0]) == [False, False]
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]) * 3.0  # the third row the sum of the first two: rank 2
    assert held(v @ v.T, [0, 0, 0]) == [False, True, False]
    assert held([[3.0, 0.0], [0.0, 100.0]], [0, 0]) == [True, False]
    assert held([[3.0, 0.0], [0.0, 100.0]], [-1, -1]) == [True, False]
    assert held([[6.7, 6.53], [6.53, 6.37]], [0, 0], free=[False, True]) == [False, False]  # the first already fixed


@pytest.mark.parametrize("name", MODELS)
def test_the_terms_over_chunks_of_sessions_are_the_one_pass_terms(monkeypatch, name):
    # a log longer than CHUNK is linearised in two passes over chunks of sessions (the information, then the scores
    # with its solution): the same terms as one pass, to rounding (a chunk of 97 sessions: 16 chunks, the last short)
    from onlineeval.estimators.chain_linearisation import chain_correction

    data = _logs(name, 1, 1500, np.random.default_rng(5), empty_share=0.2)[0]
    mdl = get_estimator("dm", model=name).fit_model(data)
    reward = get_reward("reciprocal_rank", data.k)
    target = check_world("pbm").targets[1]
    whole = chain_correction(mdl, data, target, reward)
    monkeypatch.setattr("onlineeval.estimators.dcm_linearisation.CHUNK", 97)
    np.testing.assert_allclose(chain_correction(mdl, data, target, reward), whole, rtol=0,
                               atol=1e-12 * np.abs(whole).max())
