"""Slate estimators (clipped IPS, IIPS, RIPS, SN-RIPS, pseudoinverse) against exact expectations.

The reference is brute-force enumeration on tiny worlds (m = 4-5 candidates, k = 2-3
slots, two queries): every ordered list the logger can show, with its probability, and
every click vector, with its probability under a position-based, cascade or dependent
click model written here. An estimator's exact expectation is then the probability-weighted
sum of its per-impression terms over all (query, list, clicks) rows, compared with the
target's exact value: equal to 1e-12 where the estimator declares itself unbiased, apart
where it declares itself biased. Monte Carlo checks use fixed seeds and 4 standard errors.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators import (
    DeterministicTarget,
    LoggedData,
    Propensities,
    Reward,
    estimator_class,
    get_estimator,
    get_reward,
)
from onlineeval.estimators.clipped_ips import ClippedIPS
from onlineeval.estimators.iips import IIPS
from onlineeval.estimators.pseudoinverse import PseudoInverse
from onlineeval.estimators.rips import RIPS, SNRIPS


# ----------------------------------------------------------------------------- exact loggers
class EnumLogger:
    """A logging policy given by an explicit table: ``prob[q, l]`` of the ordered list
    ``lists[l]`` (all k-permutations of m candidates). Every propensity is a sum over the
    table, so nothing here relies on a closed form."""

    def __init__(self, m: int, k: int, prob: np.ndarray, replacement: bool = False) -> None:
        self.m, self.k = m, k
        every = itertools.product(range(m), repeat=k) if replacement else itertools.permutations(range(m), k)
        self.lists = np.array(list(every), dtype=np.int64)
        prob = np.asarray(prob, dtype=np.float64)
        if prob.shape[1] != len(self.lists) or not np.allclose(prob.sum(axis=1), 1.0):
            raise ValueError("bad probability table")
        self.prob = prob
        self.code_index = np.full(m**k, -1, dtype=np.int64)
        self.code_index[self._code(self.lists)] = np.arange(len(self.lists))
        # prefix[j][q, code of the top j+1] and item[q, j, a], summed from the table
        self.prefix = []
        for j in range(k):
            codes = self._code(self.lists[:, : j + 1])
            tab = np.zeros((prob.shape[0], m ** (j + 1)))
            for q in range(prob.shape[0]):
                np.add.at(tab[q], codes, prob[q])
            self.prefix.append(tab)
        self.item = np.zeros((prob.shape[0], k, m))
        for q in range(prob.shape[0]):
            for j in range(k):
                np.add.at(self.item[q, j], self.lists[:, j], prob[q])

    @classmethod
    def uniform(cls, m: int, k: int, n_queries: int) -> EnumLogger:
        n_lists = math.perm(m, k)
        return cls(m, k, np.full((n_queries, n_lists), 1.0 / n_lists))

    @classmethod
    def plackett_luce(cls, m: int, k: int, scores: np.ndarray) -> EnumLogger:
        lists = list(itertools.permutations(range(m), k))
        prob = np.ones((scores.shape[0], len(lists)))
        for q in range(scores.shape[0]):
            e = np.exp(scores[q])
            for li, s in enumerate(lists):
                left = e.sum()
                for a in s:
                    prob[q, li] *= e[a] / left
                    left -= e[a]
        return cls(m, k, prob)

    def _code(self, lists: np.ndarray) -> np.ndarray:
        return (lists * (self.m ** np.arange(lists.shape[1]))[None, :]).sum(axis=1)

    def propensities(self, query: np.ndarray, rankings: np.ndarray) -> Propensities:
        query = np.asarray(query, dtype=np.int64)
        r = np.asarray(rankings, dtype=np.int64)[:, : self.k]
        pre = np.stack([self.prefix[j][query, self._code(r[:, : j + 1])] for j in range(self.k)], axis=1)
        item = self.item[query[:, None], np.arange(self.k)[None, :], r]
        return Propensities(pre[:, -1].copy(), pre, item)

    def pair_marginals(self, query: int) -> np.ndarray:
        ind = np.zeros((len(self.lists), self.k, self.m))
        ind[np.arange(len(self.lists))[:, None], np.arange(self.k)[None, :], self.lists] = 1.0
        return np.einsum("l,lja,lkb->jakb", self.prob[query], ind, ind)


class NoPairLogger:
    """A logger that only gives propensities (as a log file would)."""

    def __init__(self, inner: EnumLogger) -> None:
        self.inner = inner

    def propensities(self, query: np.ndarray, rankings: np.ndarray) -> Propensities:
        return self.inner.propensities(query, rankings)


# ---------------------------------------------------------------------------- click models
def click_vectors(k: int) -> np.ndarray:
    return np.array(list(itertools.product([0, 1], repeat=k)), dtype=bool)


def click_prob(family: str, attract: np.ndarray, theta: np.ndarray, lam: np.ndarray, c: np.ndarray) -> float:
    """P(click vector c | attractiveness of the shown documents), by each model's story.

    PBM: slot j is clicked with probability theta_j * attract_j, independently. Cascade and
    DCM: the user examines slots top-down from slot 0, clicks an examined slot with
    probability attract_j, continues after a click with probability lam_j (cascade: 0) and
    always continues after a skip; stopping after the last click is not observed.
    """
    if family == "pbm":
        p = theta * attract
        return float(np.prod(np.where(c, p, 1 - p)))
    cont = np.zeros_like(lam) if family == "cascade" else lam

    def from_slot(j: int) -> float:  # P(c[j:] | slot j examined)
        if j == len(c):
            return 1.0
        if not c[j]:
            return (1 - attract[j]) * from_slot(j + 1)
        stop = 0.0 if c[j + 1:].any() else 1.0
        return attract[j] * (cont[j] * from_slot(j + 1) + (1 - cont[j]) * stop)

    return from_slot(0)


@dataclass
class World:
    """Queries with per-document attractiveness, a logger, a target and click tables."""

    logger: EnumLogger
    attract: np.ndarray  # (Q, m)
    theta: np.ndarray  # (k,) PBM examination
    lam: np.ndarray  # (k,) DCM continuation after a click
    q_prob: np.ndarray  # (Q,)
    target: DeterministicTarget
    _tables: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def k(self) -> int:
        return self.logger.k

    def click_table(self, family: str) -> np.ndarray:
        """(Q, L, 2^k) P(click vector | query, list), computed once per family."""
        if family not in self._tables:
            self._tables[family] = self._click_table(family)
        return self._tables[family]

    def _click_table(self, family: str) -> np.ndarray:
        cv = click_vectors(self.k)
        lists = self.logger.lists
        out = np.zeros((len(self.q_prob), len(lists), len(cv)))
        for q in range(len(self.q_prob)):
            for li, s in enumerate(lists):
                a = self.attract[q, s]
                out[q, li] = [click_prob(family, a, self.theta, self.lam, c) for c in cv]
        assert np.allclose(out.sum(axis=2), 1.0)
        return out

    def truth(self, family: str, reward: Reward) -> float:
        cv = click_vectors(self.k)
        table = self.click_table(family)
        values = reward.value(cv)
        t_idx = self.logger.code_index[self.logger._code(self.target.lists)]
        return float(sum(self.q_prob[q] * table[q, t_idx[q]] @ values for q in range(len(self.q_prob))))

    def full_log(self, family: str, logger: object | None = None) -> tuple[LoggedData, np.ndarray]:
        """Every (query, list, clicks) row with its probability."""
        cv = click_vectors(self.k)
        lists = self.logger.lists
        table = self.click_table(family)
        nq, nl, nc = table.shape
        q = np.repeat(np.arange(nq), nl * nc)
        li = np.tile(np.repeat(np.arange(nl), nc), nq)
        ci = np.tile(np.arange(nc), nq * nl)
        prob = self.q_prob[q] * self.logger.prob[q, li] * table[q, li, ci]
        return self._log(q, lists[li], cv[ci], logger), prob

    def sample(self, family: str, n: int, rng: np.random.Generator) -> LoggedData:
        cv = click_vectors(self.k)
        table = self.click_table(family)
        q = rng.choice(len(self.q_prob), size=n, p=self.q_prob)
        cum = np.cumsum(self.logger.prob[q], axis=1)
        li = np.minimum((cum < rng.random(n)[:, None]).sum(axis=1), cum.shape[1] - 1)
        ccum = np.cumsum(table[q, li], axis=1)
        ci = np.minimum((ccum < rng.random(n)[:, None]).sum(axis=1), ccum.shape[1] - 1)
        return self._log(q, self.logger.lists[li], cv[ci], None)

    def _log(self, q: np.ndarray, shown: np.ndarray, clicks: np.ndarray, logger: object | None) -> LoggedData:
        p = self.logger.propensities(q, shown)
        return LoggedData(q, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item,
                          logger=self.logger if logger is None else logger)


def make_world(m: int, k: int, seed: int, uniform: bool = False) -> World:
    rng = np.random.default_rng(seed)
    nq = 2
    logger = EnumLogger.uniform(m, k, nq) if uniform else EnumLogger.plackett_luce(m, k, rng.normal(0, 1, (nq, m)))
    attract = rng.uniform(0.1, 0.9, (nq, m))
    # the target ranks by a noisy version of attractiveness (neither the logger nor the ideal)
    noisy = attract + rng.normal(0, 0.2, attract.shape)
    target = DeterministicTarget(np.argsort(-noisy, axis=1)[:, :k], "B")
    theta = np.array([0.95, 0.6, 0.4, 0.3])[:k]
    lam = np.array([0.7, 0.5, 0.4, 0.3])[:k]
    return World(logger, attract, theta, lam, np.array([0.6, 0.4]), target)


WORLDS = {"m5k3": (5, 3, 11), "m4k2": (4, 2, 12)}


@pytest.fixture(scope="module", params=list(WORLDS))
def world(request: pytest.FixtureRequest) -> World:
    m, k, seed = WORLDS[request.param]
    return make_world(m, k, seed)


def rewards_of(kind: str, k: int) -> list[Reward]:
    if kind == "additive":
        return [get_reward("clicks_per_query", k), Reward("dcg_clicks", "additive", 1.0 / np.log2(np.arange(2, k + 2)))]
    return [get_reward("reciprocal_rank", k), get_reward("abandonment", k)]


def exact_expectation(est: object, w: World, family: str, reward: Reward) -> float:
    log, prob = w.full_log(family)
    t = est.terms(log, w.target, reward)
    assert t.den is None
    return float(reward.offset + prob @ t.num)


def pairs(cls: type, attr: str) -> list[tuple[type, str, str]]:
    return [(cls, fam, kind) for fam, kind in getattr(cls, attr)]


UNBIASED = pairs(IIPS, "unbiased_under") + pairs(RIPS, "unbiased_under") + pairs(PseudoInverse, "unbiased_under")
BIASED = pairs(IIPS, "biased_under") + pairs(RIPS, "biased_under") + pairs(PseudoInverse, "biased_under")


# ------------------------------------------------------------------------ the reference itself
def test_enumerated_truth_matches_closed_forms(world: World) -> None:
    """The enumeration's target values agree with the models' textbook formulas."""
    k = world.k
    for q in range(2):
        a = world.attract[q, world.target.lists[q]]
        ones = np.ones(k)
        pbm_clicks = float((world.theta * a).sum())
        casc_rr = float(sum(a[j] * np.prod(1 - a[:j]) / (j + 1) for j in range(k)))
        casc_aband = float(np.prod(1 - a))
        single = World(world.logger, world.attract, world.theta, world.lam, np.eye(2)[q], world.target)
        assert single.truth("pbm", get_reward("clicks_per_query", k)) == pytest.approx(pbm_clicks, abs=1e-14)
        assert single.truth("cascade", get_reward("reciprocal_rank", k)) == pytest.approx(casc_rr, abs=1e-14)
        assert single.truth("cascade", get_reward("abandonment", k)) == pytest.approx(casc_aband, abs=1e-14)
        # DCM with continuation 1 after every click is PBM with examination 1
        full = World(world.logger, world.attract, ones, ones, np.eye(2)[q], world.target)
        assert full.truth("dcm", get_reward("clicks_per_query", k)) == pytest.approx(a.sum(), abs=1e-14)


def test_logger_tables_are_consistent(world: World) -> None:
    lg = world.logger
    for q in range(2):
        g = lg.pair_marginals(q)
        k = lg.k
        assert np.allclose(g.sum(axis=(1, 3)), 1.0)  # each pair of slots is filled once
        for j in range(k):
            assert np.allclose(np.diag(g[j, :, j, :]), lg.item[q, j])
    p = lg.propensities(np.zeros(len(lg.lists), dtype=np.int64), lg.lists)
    assert np.allclose(p.list, lg.prob[0])


# ------------------------------------------------------------------------ exact (un)biasedness
@pytest.mark.parametrize(("cls", "family", "kind"), UNBIASED, ids=lambda x: getattr(x, "name", x))
def test_exactly_unbiased_where_declared(world: World, cls: type, family: str, kind: str) -> None:
    for reward in rewards_of(kind, world.k):
        exp = exact_expectation(cls(), world, family, reward)
        assert exp == pytest.approx(world.truth(family, reward), abs=1e-12, rel=0), (cls.name, family, reward.name)


@pytest.mark.parametrize(("cls", "family", "kind"), UNBIASED, ids=lambda x: getattr(x, "name", x))
def test_exactly_unbiased_for_a_stochastic_target(cls: type, family: str, kind: str) -> None:
    """A Plackett-Luce target (no rankings, only propensities): V = sum_s pi(s) V(s)."""
    w = make_world(4, 3, 31)
    target = EnumLogger.plackett_luce(4, 3, np.random.default_rng(32).normal(0, 1.5, (2, 4)))
    table = w.click_table(family)
    cv = click_vectors(w.k)
    log, prob = w.full_log(family)
    for reward in rewards_of(kind, w.k):
        truth = reward.offset + sum(w.q_prob[q] * target.prob[q] @ (table[q] @ reward.slot_rewards(cv).sum(1))
                                    for q in range(2))
        t = cls().terms(log, target, reward)
        assert reward.offset + prob @ t.num == pytest.approx(truth, abs=1e-12), (cls.name, family, reward.name)


@pytest.mark.parametrize(("cls", "family", "kind"), BIASED, ids=lambda x: getattr(x, "name", x))
def test_biased_where_declared(world: World, cls: type, family: str, kind: str) -> None:
    for reward in rewards_of(kind, world.k):
        bias = exact_expectation(cls(), world, family, reward) - world.truth(family, reward)
        assert abs(bias) > 1e-5, (cls.name, family, reward.name, bias)  # exact sums agree to ~1e-14


def test_declarations_cover_the_families() -> None:
    assert set(RIPS.unbiased_under) == {(f, r) for f in ("pbm", "cascade", "dcm") for r in ("additive", "first_click")}
    assert IIPS.unbiased_under == (("pbm", "additive"),) and PseudoInverse.unbiased_under == (("pbm", "additive"),)
    assert not set(IIPS.unbiased_under) & set(IIPS.biased_under)
    assert not set(PseudoInverse.unbiased_under) & set(PseudoInverse.biased_under)


def test_rips_slot_weights_shape_and_slot_expectations(world: World) -> None:
    """Each slot's prefix weight has expectation 1 (support), so weights are a proper (n, k) reweighting."""
    log, prob = world.full_log("pbm")
    t = RIPS().terms(log, world.target, "clicks_per_query")
    assert t.weights.shape == (log.n, world.k)
    assert np.allclose(prob @ t.weights, 1.0, atol=1e-12)
    ti = IIPS().terms(log, world.target, "clicks_per_query")
    assert ti.weights.shape == (log.n, world.k)
    assert np.allclose(prob @ ti.weights, 1.0, atol=1e-12)


# ----------------------------------------------------------------------------------- SN-RIPS
@pytest.mark.parametrize("family", ["pbm", "cascade", "dcm"])
def test_snrips_is_consistent_exactly(world: World, family: str) -> None:
    """Population limit sum E[num] / sum E[den] is the truth, with E[den] = 1 (optional stopping)."""
    log, prob = world.full_log(family)
    for reward in rewards_of("first_click", world.k):
        t = SNRIPS().terms(log, world.target, reward)
        assert prob @ t.den == pytest.approx(1.0, abs=1e-12)
        limit = reward.offset + (prob @ t.num) / (prob @ t.den)
        assert limit == pytest.approx(world.truth(family, reward), abs=1e-12)


def test_snrips_stays_in_the_reward_range() -> None:
    """Each term is its normaliser times the realised reward, so the estimate is a weighted
    mean of the observed rewards, also on logs whose propensities agree with no policy."""
    w = make_world(4, 3, 5)
    rng = np.random.default_rng(7)
    k = w.k
    rewards = [get_reward("reciprocal_rank", k), get_reward("abandonment", k),
               Reward("signed_first", "first_click", np.array([1.0, -0.5, 0.25]))]
    for trial in range(300):
        log = w.sample(("pbm", "cascade", "dcm")[trial % 3], int(rng.integers(2, 12)), rng)
        if trial % 2:  # wild propensities, unrelated to the logger
            prefix = np.cumprod(10.0 ** rng.uniform(-2, 0, log.shown.shape), axis=1)
            log = LoggedData(log.query, log.shown, log.clicks, p_prefix=prefix)
        for reward in rewards:
            t = SNRIPS().terms(log, w.target, reward)
            r = reward.value(log.clicks) - reward.offset
            assert np.allclose(t.num, t.den * r, rtol=1e-12, atol=1e-12)
            if t.den.sum() > 0:
                v = reward.offset + t.num.sum() / t.den.sum()
                used = t.den > 0
                assert reward.offset + r[used].min() - 1e-12 <= v <= reward.offset + r[used].max() + 1e-12


def test_snrips_refuses_additive_rewards() -> None:
    w = make_world(4, 3, 5)
    log = w.sample("pbm", 20, np.random.default_rng(1))
    with pytest.raises(ConfigError, match="first_click"):
        SNRIPS().estimate(log, w.target, "clicks_per_query")


def test_short_lists_carry_the_list_weight() -> None:
    logger = EnumLogger.uniform(3, 2, 1)
    shown = np.array([[0, -1], [1, 2]])
    p_prefix = np.array([[1 / 3, 1.0], [1 / 3, 1 / 6]])
    log = LoggedData(np.zeros(2, dtype=np.int64), shown, np.array([[0, 0], [0, 1]], dtype=bool),
                     p_prefix=p_prefix, logger=logger)
    target = DeterministicTarget(np.array([[0, -1]]))
    t = SNRIPS().terms(log, target, "reciprocal_rank")
    assert t.weights.tolist() == [[3.0, 0.0], [0.0, 0.0]]
    assert t.den.tolist() == [3.0, 0.0]  # row 0 has no click: its empty last slot carries slot 0's weight
    assert t.num.tolist() == [0.0, 0.0]
    clicked = LoggedData(log.query, shown, np.array([[1, 0], [0, 1]], dtype=bool), p_prefix=p_prefix)
    assert RIPS().terms(clicked, target, "clicks_per_query").num.tolist() == [3.0, 0.0]


# ------------------------------------------------------------------------------ clipped IPS
def test_clipped_with_large_cap_equals_ips(world: World) -> None:
    log = world.sample("cascade", 2000, np.random.default_rng(3))
    ips = get_estimator("ips").estimate(log, world.target, "reciprocal_rank")
    w_max = float(world.target.propensities(log.query, log.shown).list.max() / log.p_list.min())
    clipped = ClippedIPS(cap=w_max).estimate(log, world.target, "reciprocal_rank")
    assert clipped.value == ips.value and clipped.se == ips.se
    assert clipped.diagnostics.notes["clipping_bias_estimate"] == 0.0
    assert clipped.diagnostics.notes["clipped_impressions"] == 0


def test_clipping_bias_note_is_the_difference_to_ips(world: World) -> None:
    log = world.sample("pbm", 3000, np.random.default_rng(4))
    for reward in ("clicks_per_query", "reciprocal_rank", "abandonment"):
        ips = get_estimator("ips").estimate(log, world.target, reward)
        w = world.target.propensities(log.query, log.shown).list / log.p_list
        cap = float(np.quantile(w[w > 0], 0.5))
        clipped = ClippedIPS(cap=cap).estimate(log, world.target, reward)
        notes = clipped.diagnostics.notes
        assert notes["clipped_impressions"] == int(np.sum(w > cap)) > 0
        assert notes["clipping_bias_estimate"] == pytest.approx(clipped.value - ips.value, abs=1e-12)
        assert notes["clipped_weight_share"] == pytest.approx(np.maximum(w - cap, 0).sum() / w.sum(), rel=1e-12)


@pytest.mark.parametrize("family", ["pbm", "cascade"])
def test_clipped_exact_bias_and_bound(world: World, family: str) -> None:
    """E[clipped] - V = -E[(w - M)^+ R] exactly (computed here row by row), and |bias| <= E[(w - M)^+] max|R|."""
    log, prob = world.full_log(family)
    w = world.target.propensities(log.query, log.shown).list / log.p_list
    cap = 0.5 * float(w.max())
    for reward in (get_reward("clicks_per_query", world.k), get_reward("reciprocal_rank", world.k)):
        exp = exact_expectation(ClippedIPS(cap=cap), world, family, reward)
        bias = exp - world.truth(family, reward)
        excess = sum(p * max(wi - cap, 0.0) * ri for p, wi, ri in zip(prob, w, reward.slot_rewards(log.clicks).sum(1)))
        assert bias == pytest.approx(-excess, abs=1e-12)
        assert bias < -1e-4
        max_r = world.k if reward.kind == "additive" else 1.0
        assert abs(bias) <= sum(p * max(wi - cap, 0.0) for p, wi in zip(prob, w)) * max_r + 1e-12
        # the note's bound on the full log, weighted by probability, is that bound
        t = ClippedIPS(cap=cap).terms(log, world.target, reward)
        assert t.notes["clipping_bias_bound"] == pytest.approx(np.maximum(w - cap, 0).mean() * max_r, rel=1e-12)


# ---------------------------------------------------------------------------- pseudoinverse
def pi_uniform_closed_form(m: int, k: int, n_agree: np.ndarray, n_target_shown: np.ndarray) -> np.ndarray:
    if k == m:
        return (m - 1) * n_agree - m + 2
    return (m - 1) * n_agree + ((m - 1) * n_target_shown - m * (k - 1)) / (m - k)


@pytest.mark.parametrize(("m", "k"), [(3, 2), (4, 2), (4, 3), (5, 3), (5, 2), (3, 3), (4, 4), (2, 2)])
def test_pi_uniform_closed_form(m: int, k: int) -> None:
    logger = EnumLogger.uniform(m, k, 2)
    target = DeterministicTarget(np.array([list(range(k)), list(range(m - 1, m - 1 - k, -1))]))
    lists = logger.lists
    for q in range(2):
        log = LoggedData(np.full(len(lists), q), lists, np.zeros(lists.shape, dtype=bool), logger=logger)
        t = PseudoInverse().terms(log, target, "clicks_per_query")
        tl = target.lists[q]
        agree = (lists == tl[None, :]).sum(axis=1)
        shown_anywhere = np.isin(lists, tl).sum(axis=1)
        assert np.allclose(t.weights, pi_uniform_closed_form(m, k, agree, shown_anywhere), atol=1e-9)
        assert t.notes["queries_outside_range"] == 0


def test_pi_independent_uniform_slots_closed_form() -> None:
    """Slots drawn independently and uniformly (repetition allowed): PI's weight is m N - k + 1."""
    for m, k in [(3, 2), (4, 3), (3, 3)]:
        logger = EnumLogger(m, k, np.full((1, m**k), float(m) ** -k), replacement=True)
        lists = logger.lists
        target = DeterministicTarget(np.array([[(j + 1) % m for j in range(k)]]))
        # slates of independent slots repeat documents, which a ranked list never does: LoggedData refuses such rows
        # unless told they are meant (lists_checked), as here to reproduce the paper's slate setting
        with pytest.raises(InputError, match="twice"):
            LoggedData(np.zeros(len(lists), dtype=np.int64), lists, np.zeros(lists.shape, bool), logger=logger)
        log = LoggedData(np.zeros(len(lists), dtype=np.int64), lists, np.zeros(lists.shape, bool), logger=logger,
                         lists_checked=True)
        t = PseudoInverse().terms(log, target, "clicks_per_query")
        agree = (lists == target.lists[0][None, :]).sum(axis=1)
        assert np.allclose(t.weights, m * agree - k + 1, atol=1e-9)


def test_independent_slot_formula_is_biased_without_replacement() -> None:
    """m N - k + 1 (the independent-slots weight) is not PI's weight without replacement: m = k = 2."""
    phi = np.array([[0.7, 0.2], [0.1, 0.4]])  # phi[j, a]
    lists = [(0, 1), (1, 0)]
    value = {s: phi[0, s[0]] + phi[1, s[1]] for s in lists}
    naive = sum(0.5 * value[s] * (2 * sum(s[j] == j for j in range(2)) - 1) for s in lists)
    assert naive == pytest.approx((3 * value[(0, 1)] - value[(1, 0)]) / 2)
    assert abs(naive - value[(0, 1)]) > 0.1
    exact = sum(0.5 * value[s] * pi_uniform_closed_form(2, 2, np.array(sum(s[j] == j for j in range(2))), 2)
                for s in lists)
    assert exact == pytest.approx(value[(0, 1)], abs=1e-12)


def test_pi_unbiased_under_pbm_with_nonuniform_logger_and_matches_pinv(world: World) -> None:
    # the weights agree with an independently built dense pseudoinverse
    log, _ = world.full_log("pbm")
    t = PseudoInverse().terms(log, world.target, "clicks_per_query")
    lg = world.logger
    for q in range(2):
        gamma = lg.pair_marginals(q).reshape(lg.k * lg.m, -1)
        qv = np.zeros((lg.k, lg.m))
        qv[np.arange(lg.k), world.target.lists[q]] = 1.0
        g = np.linalg.pinv(gamma, rcond=1e-10, hermitian=True) @ qv.reshape(-1)
        rows = np.flatnonzero(log.query == q)
        ind = np.zeros((rows.size, lg.k, lg.m))
        ind[np.arange(rows.size)[:, None], np.arange(lg.k)[None, :], log.shown[rows]] = 1.0
        assert np.allclose(t.weights[rows], ind.reshape(rows.size, -1) @ g, atol=1e-9)


def test_pi_reports_target_outside_the_range() -> None:
    """A logger that always shows document 0 first cannot support a target starting with 1."""
    m, k = 4, 2
    base = EnumLogger.uniform(m, k, 1)
    prob = np.where(base.lists[:, 0] == 0, 1.0, 0.0)
    logger = EnumLogger(m, k, (prob / prob.sum())[None, :])
    log = LoggedData(np.zeros(3, dtype=np.int64), np.array([[0, 1], [0, 2], [0, 3]]), np.zeros((3, 2), bool),
                     logger=logger)
    t = PseudoInverse().terms(log, DeterministicTarget(np.array([[1, 0]])), "clicks_per_query")
    assert t.notes["queries_outside_range"] == 1 and t.notes["max_range_residual"] > 0.1
    t_ok = PseudoInverse().terms(log, DeterministicTarget(np.array([[0, 3]])), "clicks_per_query")
    assert t_ok.notes["queries_outside_range"] == 0
    # a target document the logger does not know (id 7 of 4 candidates)
    t_far = PseudoInverse().terms(log, DeterministicTarget(np.array([[0, 7]])), "clicks_per_query")
    assert t_far.notes["queries_outside_range"] == 1 and t_far.notes["queries_target_outside_candidates"] == 1


def test_pi_weights_are_cached_per_logger_and_target() -> None:
    w = make_world(4, 2, 3)
    log, _ = w.full_log("pbm")
    first = PseudoInverse().terms(log, w.target, "clicks_per_query").weights
    calls = []

    class Counting(EnumLogger):
        def pair_marginals(self, query: int) -> np.ndarray:
            calls.append(query)
            return super().pair_marginals(query)

    counting = Counting(4, 2, w.logger.prob)
    again = LoggedData(log.query, log.shown, log.clicks, logger=counting)
    for _ in range(3):
        assert np.array_equal(PseudoInverse().terms(again, w.target, "clicks_per_query").weights, first)
    assert sorted(calls) == [0, 1]  # once per query, not per call
    other = DeterministicTarget(w.target.lists[:, ::-1].copy())
    assert not np.allclose(PseudoInverse().terms(again, other, "clicks_per_query").weights, first)
    assert sorted(calls) == [0, 1]  # Gamma's decomposition is the logger's: shared by every target
    # a new logger object (equal content) is asked again
    fresh = Counting(4, 2, w.logger.prob)
    assert np.array_equal(PseudoInverse().terms(LoggedData(log.query, log.shown, log.clicks, logger=fresh), w.target,
                                                "clicks_per_query").weights, first)
    assert sorted(calls) == [0, 0, 1, 1]


def test_pi_with_the_simulator_plackett_luce_policy() -> None:
    """The simulator's logging policy gives the same PI weights as the brute-force table."""
    import simulations.policies as policies
    scores = np.random.default_rng(8).normal(size=(2, 5))
    policy = policies.build_policy({"policy": "plackett_luce"}, scores, 3)
    w = make_world(5, 3, 11)
    w = World(EnumLogger.plackett_luce(5, 3, scores), w.attract, w.theta, w.lam, w.q_prob, w.target)
    log, prob = w.full_log("pbm")
    sim_log = LoggedData(log.query, log.shown, log.clicks, logger=policy)
    a = PseudoInverse().terms(log, w.target, "clicks_per_query")
    b = PseudoInverse().terms(sim_log, w.target, "clicks_per_query")
    assert np.allclose(a.weights, b.weights, atol=1e-9)
    assert prob @ b.num == pytest.approx(w.truth("pbm", get_reward("clicks_per_query", 3)), abs=1e-10)


# ------------------------------------------------------------------------------ Monte Carlo
MC_CASES = [
    (ClippedIPS(cap=6.0), "cascade", "reciprocal_rank"),
    (IIPS(), "pbm", "clicks_per_query"),
    (RIPS(), "cascade", "reciprocal_rank"),
    (SNRIPS(), "dcm", "abandonment"),
    (PseudoInverse(), "pbm", "clicks_per_query"),
]


@pytest.mark.parametrize(("est", "family", "reward"), MC_CASES, ids=[c[0].name for c in MC_CASES])
def test_monte_carlo_within_four_se(est: object, family: str, reward: str) -> None:
    w = make_world(4, 3, 21)
    rw = get_reward(reward, w.k)
    expected = w.truth(family, rw) if est.name != "clipped_ips" else exact_expectation(est, w, family, rw)
    log = w.sample(family, 40_000, np.random.default_rng(20261201))
    res = est.estimate(log, w.target, rw)
    assert abs(res.value - expected) <= 4 * res.se, (est.name, res.value, expected, res.se)
    assert res.se < 0.05


def test_estimate_end_to_end_diagnostics() -> None:
    w = make_world(4, 3, 21)
    log = w.sample("pbm", 500, np.random.default_rng(9))
    for name, opts in [("iips", {}), ("rips", {}), ("snrips", {}), ("pseudoinverse", {}), ("clipped_ips", {"cap": 3})]:
        est = get_estimator(name, **opts)
        res = est.estimate(log, w.target, "clicks_per_query" if "additive" in est.rewards else "reciprocal_rank")
        assert res.diagnostics.support_violations == 0 and math.isfinite(res.value)
        assert res.assumption == estimator_class(name).assumption


# ------------------------------------------------------------------------------------ errors
def test_missing_propensities_are_input_errors() -> None:
    w = make_world(4, 3, 21)
    log = w.sample("pbm", 50, np.random.default_rng(1))
    bare = LoggedData(log.query, log.shown, log.clicks)
    for est, what in [(ClippedIPS(cap=2.0), "p_list"), (IIPS(), "p_item"), (RIPS(), "p_prefix"),
                      (SNRIPS(), "p_prefix")]:
        with pytest.raises(InputError, match=what):
            est.estimate(bare, w.target, "reciprocal_rank")


def test_pi_needs_the_logging_policy() -> None:
    w = make_world(4, 3, 21)
    log = w.sample("pbm", 50, np.random.default_rng(1))
    with_props = LoggedData(log.query, log.shown, log.clicks, p_list=log.p_list)
    with pytest.raises(InputError, match="needs the logging policy.*no logger"):
        PseudoInverse().estimate(with_props, w.target)
    no_pairs = LoggedData(log.query, log.shown, log.clicks, logger=NoPairLogger(w.logger))
    with pytest.raises(InputError, match="without pair_marginals"):
        PseudoInverse().estimate(no_pairs, w.target)


def test_pi_passes_the_loggers_own_errors_and_wraps_others() -> None:
    class Refusing(EnumLogger):
        def pair_marginals(self, query: int) -> np.ndarray:
            raise ConfigError(("pair_max_states",), "too many states")

    class Broken(EnumLogger):
        def pair_marginals(self, query: int) -> np.ndarray:
            return np.ones((2, 3))

    base = EnumLogger.uniform(3, 2, 1)
    target = DeterministicTarget(np.array([[0, 1]]))
    log = LoggedData([0], [[0, 1]], [[False, True]], logger=Refusing(3, 2, base.prob))
    with pytest.raises(ConfigError, match="pair_max_states: too many states"):
        PseudoInverse().estimate(log, target)
    log = LoggedData([0], [[0, 1]], [[False, True]], logger=Broken(3, 2, base.prob))
    with pytest.raises(InputError, match=r"must have shape \(k, m, k, m\), got \(2, 3\)"):
        PseudoInverse().estimate(log, target)


def test_pi_refuses_documents_outside_the_candidates() -> None:
    logger = EnumLogger.uniform(3, 2, 1)
    log = LoggedData([0], [[0, 5]], [[False, True]], logger=logger)
    with pytest.raises(InputError, match="document 5 at slot 1, outside the logger's 3 candidates"):
        PseudoInverse().estimate(log, DeterministicTarget(np.array([[0, 1]])))


@pytest.mark.parametrize("cap", [0, -1.0, float("nan"), float("inf"), "3", None, True])
def test_bad_cap_is_a_config_error(cap: object) -> None:
    with pytest.raises(ConfigError, match="cap"):
        get_estimator("clipped_ips", **({} if cap is None else {"cap": cap}))


@pytest.mark.parametrize("rcond", [-1e-3, 1.0, float("nan"), "x"])
def test_bad_rcond_is_a_config_error(rcond: object) -> None:
    with pytest.raises(ConfigError, match="rcond"):
        get_estimator("pseudoinverse", rcond=rcond)
