"""The counterfactual design's fast paths give the numbers of the code they replaced.

Each optimised function (logging-policy propensities and sampling, the estimators'
terms, the design's per-batch work) is compared with a verbatim copy of the previous
implementation kept below as the reference (``_old_*``), on random inputs that include
the edge cases: repeated documents, non-candidates, empty slots, queries with fewer
candidates than slots, mixtures whose components have different candidate sets. The
comparison is exact (``np.array_equal``) where the arithmetic is the same and within
1e-12 where only the order of a sum changed.
"""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.estimators.base import Propensities
from simulations.policies import MixturePolicy, build_policy
from simulations.policies.base import EMPTY, INVALID, LoggingPolicy

NEG = -np.inf


# ------------------------------------------------------------------ references (the old code)
def _old_ranks(policy: LoggingPolicy, q: np.ndarray, r: np.ndarray):
    c = policy.n_candidates[q]
    j = np.arange(policy.k)[None, :]
    ranks = np.where(r >= 0, policy.rank_of[q[:, None], np.maximum(r, 0)], EMPTY)
    ranks = np.where((r >= 0) & (ranks < 0), INVALID, ranks)
    should_be_empty = j >= c[:, None]
    empty_ok = (r == EMPTY) & should_be_empty
    good = np.where(should_be_empty, r == EMPTY, ranks >= 0)
    if policy.k > 1:
        o = np.argsort(r, axis=1, kind="stable")
        rs = np.take_along_axis(r, o, axis=1)
        dup = np.zeros(r.shape, dtype=bool)
        dup[:, 1:] = (rs[:, 1:] == rs[:, :-1]) & (rs[:, 1:] >= 0)
        repeat = np.zeros(r.shape, dtype=bool)
        np.put_along_axis(repeat, o, dup, axis=1)
        good &= ~repeat
    ok_prefix = np.cumprod(good, axis=1).astype(bool)
    return ranks, ok_prefix, empty_ok


def _old_item_rank_policy(policy, q, r, ranks):
    tab, inv = policy._padded_tables(policy.n_candidates[q])
    rr = np.where(ranks >= 0, ranks, policy.m)
    return tab[inv[:, None], rr, np.arange(policy.k)[None, :]]


def _old_propensities(policy: LoggingPolicy, q: np.ndarray, r: np.ndarray) -> Propensities:
    if isinstance(policy, MixturePolicy):
        lst, pre, item = np.zeros(q.size), np.zeros((q.size, policy.k)), np.zeros((q.size, policy.k))
        for w, c in zip(policy.weights, policy.components):
            p = _old_propensities(c, q, r)
            lst += w * p.list
            pre += w * p.prefix
            item += w * p.item
        return Propensities(lst, pre, item)
    ranks, ok_prefix, empty_ok = _old_ranks(policy, q, r)
    prefix = policy._prefix(q, r, ranks) * ok_prefix
    hook = _old_item_rank_policy if hasattr(policy, "_padded_tables") else type(policy)._item
    item = np.where(empty_ok, 1.0, np.where(ranks >= 0, hook(policy, q, r, ranks), 0.0))
    return Propensities(prefix[:, -1].copy(), prefix, item)


def _old_mixture_sample(policy, q, rng):
    pick = rng.choice(len(policy.components), size=q.size, p=policy.weights)
    out = np.full((q.size, policy.k), -1, dtype=np.int64)
    for i, c in enumerate(policy.components):
        rows = np.flatnonzero(pick == i)
        if rows.size:
            out[rows] = _old_sample(c, q[rows], rng)
    return out


def _plain_shuffle_top(c_top, k, rng):
    """shuffle_top as a plain loop: row by row, ``kk = min(k, max(c_top))`` uniforms, slot ``j`` swapped with
    slot ``j + floor(u (c_top - j))`` while ``j < c_top - 1`` (the textbook Fisher-Yates step)."""
    n = c_top.size
    width = int(c_top.max()) if n else 0
    ranks = np.broadcast_to(np.arange(k, dtype=np.int64), (n, k)).copy()
    if width < 2:
        return ranks
    kk = min(k, width)
    u = rng.random((n, kk))
    for i in range(n):
        perm = list(range(width))
        for j in range(kk):
            left = int(c_top[i]) - j
            if left > 1:
                x = j + int(u[i, j] * left)
                perm[j], perm[x] = perm[x], perm[j]
        ranks[i, :kk] = perm[:kk]
    return ranks


def _old_rank_sample(policy, q, ranks):
    c = policy.n_candidates[q]
    j = np.arange(policy.k)[None, :]
    shown = ranks < c[:, None]
    docs = policy.order[q[:, None], np.where(shown, ranks, 0)]
    return np.where((j < c[:, None]) & shown, docs, EMPTY).astype(np.int64)


def _old_sample(policy, q, rng):
    from simulations.policies import DeterministicPolicy, RandTopPolicy

    if isinstance(policy, MixturePolicy):
        return _old_mixture_sample(policy, q, rng)
    if isinstance(policy, RandTopPolicy):
        return _old_rank_sample(policy, q, _plain_shuffle_top(policy._n_eff(policy.n_candidates[q]), policy.k, rng))
    if isinstance(policy, DeterministicPolicy):
        return _old_rank_sample(policy, q, np.broadcast_to(np.arange(policy.k), (q.size, policy.k)))
    return policy._sample(q, rng)  # unchanged


# ------------------------------------------------------------------ random inputs
def _scores(rng: np.random.Generator, n_queries: int, m: int, padding: bool = True) -> np.ndarray:
    s = rng.normal(size=(n_queries, m))
    if not padding:  # every query has m candidates (the policies' fast paths for full lists)
        s[2, :] = np.round(s[2, :])  # ties
        return s
    s[rng.random((n_queries, m)) < 0.25] = NEG  # padding: some queries have fewer than k candidates
    s[np.arange(n_queries), rng.integers(0, m, size=n_queries)] = rng.normal(size=n_queries)  # >= 1 candidate
    s[0, :] = rng.normal(size=m)  # one full row
    s[1, 2:] = NEG  # two candidates only
    s[2, :] = np.round(s[2, :])  # ties
    s[2, 0] = 0.0
    return s


def _lists(rng: np.random.Generator, policy: LoggingPolicy, q: np.ndarray) -> np.ndarray:
    """Sampled lists, random permutations, repeats, non-candidates and empty slots."""
    n, k, m = q.size, policy.k, policy.m
    r = policy.sample(q, rng).copy()
    kind = rng.integers(0, 5, size=n)
    perm = np.argsort(rng.random((n, m)), axis=1)[:, :k]
    r[kind == 1] = perm[kind == 1]
    r[kind == 2] = rng.integers(-1, m, size=(int((kind == 2).sum()), k))  # repeats, -1 anywhere
    tail = kind == 3
    cut = rng.integers(0, k + 1, size=n)
    r[tail[:, None] & (np.arange(k)[None, :] >= cut[:, None])] = -1  # trailing empty slots
    return r


SPECS = [
    {"policy": "deterministic"},
    {"policy": "randtop", "n": 3},
    {"policy": "randtop"},
    {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 4},
    {"policy": "epsilon_greedy", "epsilon": 0.0},
    {"policy": "epsilon_greedy", "epsilon": 1.0, "n": 5},
    {"policy": "swap"},
    {"policy": "randpair", "n": 3},
    {"policy": "plackett_luce"},
    {"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": 0.2, "n": 6, "scores": "A", "weight": 0.8},
        {"policy": "epsilon_greedy", "epsilon": 0.2, "n": 6, "scores": "B", "weight": 0.2}]},
    {"policy": "mixture", "components": [
        {"policy": "deterministic", "scores": "A"}, {"policy": "randtop", "n": 3, "scores": "B"},
        {"policy": "plackett_luce", "scores": "A"}]},
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s["policy"] + str(len(s)))
@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("padding", [True, False])
def test_policy_propensities_and_samples_equal_the_old_code(spec, k, padding):
    rng = np.random.default_rng(k * 1000 + len(str(spec)) + padding)
    m = 7
    scores = {"A": _scores(rng, 30, m, padding), "B": _scores(rng, 30, m, padding)}
    if spec["policy"] != "mixture":
        scores = {"A": scores["A"]}
    policy = build_policy(spec, scores, k)
    q = rng.integers(0, 30, size=600)
    r = _lists(rng, policy, q)
    new = policy.propensities(q, r)
    old = _old_propensities(policy, q, r)
    for a, b in zip((new.list, new.prefix, new.item), (old.list, old.prefix, old.item)):
        assert a.shape == b.shape
        assert np.array_equal(a, b)
    seed = int(rng.integers(1 << 30))
    g_new, g_old = np.random.default_rng(seed), np.random.default_rng(seed)
    assert np.array_equal(policy.sample(q, g_new), _old_sample(policy, q, g_old))
    assert g_new.bit_generator.state == g_old.bit_generator.state  # the same draws, no more, no fewer


@pytest.mark.parametrize("components", [
    [(0.2, 6, "A", 0.8), (0.2, 6, "B", 0.2)],
    [(0.5, 3, "A", 1.0)],
    [(0.1, 7, "A", 0.5), (0.9, 4, "B", 0.3), (0.4, 2, "C", 0.2)],
])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_stacked_epsilon_greedy_mixture_equals_the_old_code(components, k):
    """A mixture of epsilon-greedy loggers that fill the slots is computed for all its
    components at once (``StackedEpsilonGreedy``); its propensities equal the old code's
    exactly on sampled lists (the all-valid shortcut) and on lists with repeats,
    non-candidates and empty slots, also when a component lacks a candidate the others
    have and when ``n`` is below the candidate count (ranks outside the shuffled top)."""
    from simulations.policies.epsilon_greedy import StackedEpsilonGreedy

    rng = np.random.default_rng(k + 10 * len(components))
    m = 7
    scores = {name: _scores(rng, 30, m, padding=False) for name in ("A", "B", "C")}
    scores["C"][:, 6] = NEG  # C has one candidate fewer (still at least k)
    spec = {"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": e, "n": n, "scores": s, "weight": w} for e, n, s, w in components]}
    policy = build_policy(spec, scores, k)
    assert isinstance(policy._stacked(), StackedEpsilonGreedy)
    q = rng.integers(0, 30, size=800)
    for r in (policy.sample(q, rng), _lists(rng, policy, q)):
        new, old = policy.propensities(q, r), _old_propensities(policy, q, r)
        for a, b in zip((new.list, new.prefix, new.item), (old.list, old.prefix, old.item)):
            assert a.shape == b.shape and np.array_equal(a, b)
    padded = {name: _scores(rng, 30, m, padding=True) for name in ("A", "B")}
    other = build_policy({"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": 0.2, "scores": "A"}, {"policy": "epsilon_greedy", "scores": "B"}]},
        padded, 3)
    assert other._stacked() is None  # some query has fewer than k candidates: the general path


@pytest.mark.parametrize("weights", [[1.0], [0.8, 0.2], [0.2, 0.8], [0.5, 0.5], [0.1, 0.2, 0.3, 0.4],
                                     [1e-9, 1.0 - 1e-9], [1 / 3, 1 / 3, 1 / 3], [0.1] * 10])
def test_mixture_pick_is_generator_choice(weights):
    """The mixture's component draw equals ``rng.choice(C, size=n, p=weights)``: the same
    indices and the same generator state afterwards, for several sizes and seeds."""
    scores = np.random.default_rng(0).normal(size=(4, 6))
    policy = MixturePolicy([build_policy({"policy": "randtop", "n": 3}, scores, 2) for _ in weights], weights)
    for seed in range(20):
        for n in (0, 1, 7, 1000):
            a, b = np.random.default_rng(seed), np.random.default_rng(seed)
            got = policy._pick(n, a)
            want = b.choice(len(weights), size=n, p=policy.weights)
            assert got.dtype == want.dtype and np.array_equal(got, want)
            assert a.bit_generator.state == b.bit_generator.state


# ------------------------------------------------------------------ adaptive IPS
def _old_adaptive_terms(est, data, target, reward):
    """The previous ``AdaptiveIPS._terms``: (3, n, k) stacks indexed by each row's choice."""
    from onlineeval.estimators.adaptive_ips import BEHAVIOURS

    weights = est.slot_weights(data, target)
    r = reward.slot_rewards(data.clicks)
    terms = {b: (w * r).sum(axis=1) for b, w in weights.items()}
    if isinstance(est.behaviours, str):
        choice = np.full(data.n, BEHAVIOURS.index(est.behaviours))
    else:
        types = data.user_type if data.user_type is not None else np.zeros(data.n, dtype=np.int64)
        # the data-driven choice among the reward's candidates (review 11 F1: no independent on first-click rewards)
        mapping = (est.choose(types, terms, candidates=est.candidates(reward))[0] if est.behaviours is None
                   else dict(est.behaviours))
        uniq, inv = np.unique(types, return_inverse=True)
        choice = np.array([BEHAVIOURS.index(mapping[int(t)]) for t in uniq])[inv]
    stacked_w = np.stack([weights[b] for b in BEHAVIOURS])
    stacked_t = np.stack([terms[b] for b in BEHAVIOURS])
    rows = np.arange(data.n)
    return stacked_t[choice, rows], stacked_w[choice, rows]


def _random_log(seed: int, n: int = 3000, k: int = 4, m: int = 8, n_queries: int = 40, types: bool = True):
    from onlineeval.estimators import DeterministicTarget, LoggedData

    rng = np.random.default_rng(seed)
    scores = {"A": _scores(rng, n_queries, m), "B": _scores(rng, n_queries, m)}
    policy = build_policy({"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 5, "scores": "A", "weight": 0.7},
        {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 5, "scores": "B", "weight": 0.3}]}, scores, k)
    q = rng.integers(0, n_queries, size=n)
    shown = policy.sample(q, rng)
    clicks = (rng.random((n, k)) < 0.3) & (shown >= 0)
    p = policy.propensities(q, shown)
    data = LoggedData(q, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item,
                      user=rng.integers(0, 300, size=n), user_type=rng.integers(0, 3, size=n) if types else None,
                      logger=policy)
    target_lists = np.stack([DeterministicPolicyLists(scores[key], k) for key in ("A", "B")])
    return data, [DeterministicTarget(target_lists[0], "A"), DeterministicTarget(target_lists[1], "B")]


def DeterministicPolicyLists(scores: np.ndarray, k: int) -> np.ndarray:
    """The base top-k lists of a score matrix (-1 where a query has fewer candidates)."""
    return build_policy({"policy": "deterministic"}, scores, k).order[:, :k].copy()


@pytest.mark.parametrize("behaviours", [None, "independent", "cascade", "standard",
                                        {0: "independent", 1: "cascade", 2: "standard"},
                                        {0: "cascade", 1: "cascade", 2: "cascade"}])
@pytest.mark.parametrize("metric", ["clicks_per_query", "reciprocal_rank"])
def test_adaptive_ips_terms_equal_the_old_code(behaviours, metric):
    from onlineeval.estimators import get_estimator, get_reward

    for seed, types in ((1, True), (2, True), (3, False)):
        if isinstance(behaviours, dict) and not types:
            continue
        data, targets = _random_log(seed, types=types)
        reward = get_reward(metric, data.k)
        est = get_estimator("adaptive_ips", behaviours=behaviours)
        for target in targets:
            new = est.terms(data, target, reward)
            num, w = _old_adaptive_terms(est, data, target, reward)
            assert np.array_equal(new.num, num)
            assert np.array_equal(new.weights, w)


# ------------------------------------------------------------------ the design's shared per-batch objects
def test_batch_target_and_reward_equal_the_plain_ones():
    from onlineeval.estimators import get_estimator, get_reward
    from simulations.designs.counterfactual import _BatchReward, _BatchTarget

    data, targets = _random_log(5)
    for target in targets:
        fast = _BatchTarget(target).propensities(data.query, data.shown)
        slow = target.propensities(data.query, data.shown)
        for a, b in zip((fast.list, fast.prefix, fast.item), (slow.list, slow.prefix, slow.item)):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    for metric in ("clicks_per_query", "reciprocal_rank", "abandonment"):
        plain = get_reward(metric, data.k)
        cached = _BatchReward(plain)
        assert np.array_equal(cached.slot_rewards(data.clicks), plain.slot_rewards(data.clicks))
        assert cached.slot_rewards(data.clicks) is cached.slot_rewards(data.clicks)  # computed once per batch
        with pytest.raises(ValueError):
            cached.slot_rewards(data.clicks)[0, 0] = 5.0  # read-only: no estimator changes what the next reads
        assert np.array_equal(cached.value(data.clicks), plain.value(data.clicks))
        assert (cached.kind, cached.offset, cached.name) == (plain.kind, plain.offset, plain.name)
        for name in ("ips", "snips", "rips", "iips", "adaptive_ips", "clipped_ips"):
            est = get_estimator(name, **({"cap": 3.0} if name == "clipped_ips" else {}))
            if plain.kind not in est.rewards:
                continue
            for target in targets:
                a = est.terms(data, _BatchTarget(target), cached)
                b = est.terms(data, target, plain)
                assert np.array_equal(a.num, b.num), name
                assert (a.den is None) == (b.den is None) and (a.den is None or np.array_equal(a.den, b.den))


def _small_design_config(estimators: list) -> object:
    from simulations.config import config_from_mapping

    return config_from_mapping({
        "seed": 3, "replicates": 1, "workers": 1,
        "collection": {"n_queries": 120, "candidates": 10},
        "rankers": {"depth": 4, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.5}},
        "offline_metric": "nDCG@4",
        "users": {"population": 400, "activity": {"sigma": 0.5}, "types": [
            {"name": "pbm", "share": 0.5, "click_model": {"name": "pbm", "preset": "ai2018"}},
            {"name": "cascade", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}}]},
        "traffic": {"days": 2, "queries_per_day": 2000, "batch_hours": 12},
        "designs": [{"name": "cf", "type": "counterfactual", "metric": "clicks_per_query",
                     "logger": {"policy": "mixture", "components": [
                         {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 8, "weight": 0.7},
                         {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 8, "scores": "B", "weight": 0.3}]},
                     "estimators": estimators}],
        "analysis": {"aa": False, "truth_impressions": 1000},
    })


def test_denominator_rows_of_all_ones_and_arrays_in_any_order():
    """The design's denominator rows: all-ones terms (``den is None``) add the batch's
    impression counts, arrays add themselves, in any order of the two over batches; each
    row equals the plain per-user sum of its batches' denominators."""
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    cfg = _small_design_config(["ips", "snips"])
    world = build_world(cfg, world_seed(cfg.seed))
    (design,) = build_replicate(cfg, world, UserModels.from_config(cfg.users), replicate_seeds(cfg.seed, 1)[0])[1]
    rng = np.random.default_rng(1)
    keys = [f"den:{label}:{t}" for label in ("ips", "snips") for t in design.target_names]
    patterns = [[None, None, None], [None, "a", None], ["a", None, "a"], ["a", "a", "a"]]
    want = {key: np.zeros(design.population) for key in keys}
    for b in range(3):
        user = rng.integers(0, design.population, size=500)
        design._counts = np.bincount(user, minlength=design.population)
        dens = {}
        for key, pattern in zip(keys, patterns, strict=True):
            den = None if pattern[b] is None else rng.random(500)
            dens[key] = den
            want[key] += np.bincount(user, np.ones(500) if den is None else den, design.population)
        design._add_dens(user, dens)
    for key in keys:
        np.testing.assert_allclose(design.sums[key], want[key], rtol=1e-12, atol=0)


def test_design_sums_equal_the_plain_estimators_on_its_own_log():
    """One replicate of a small counterfactual design: its logged propensities are the old
    code's, and its per-user sums of each batch-accumulated estimator equal the plain
    estimators' terms on the whole log (uncached target and reward), within 1e-12."""
    from onlineeval.estimators import DeterministicTarget, get_reward
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    cfg = _small_design_config(["snips", "ips", "rips", "iips", "adaptive_ips", {"name": "clipped_ips", "cap": 5}])
    world = build_world(cfg, world_seed(cfg.seed))
    traffic, designs = build_replicate(cfg, world, UserModels.from_config(cfg.users), replicate_seeds(cfg.seed, 1)[0])
    (design,) = designs
    for hour in range(0, traffic.days * 24, traffic.batch_hours):
        design.process(traffic.batch(hour, traffic.batch_hours))
    log = design.log()
    old = _old_propensities(design.policy, log.query, log.shown)
    assert np.array_equal(log.p_list, old.list) and np.array_equal(log.p_prefix, old.prefix)
    assert np.array_equal(log.p_item, old.item)
    reward = get_reward("clicks_per_query", world.depth)
    checked = 0
    for label, est in design.estimators:
        if design.whole_log[label]:
            continue
        for t in design.target_names:
            terms = est.terms(log, DeterministicTarget(world.rankings[t], t), reward)
            den = np.ones(log.n) if terms.den is None else terms.den
            num_u, den_u = design.per_user_sums(label, t)
            np.testing.assert_allclose(num_u, np.bincount(log.user, terms.num, 400), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(den_u, np.bincount(log.user, den, 400), rtol=1e-12, atol=1e-12)
            checked += 1
    assert checked == 10
    # adaptive IPS (a whole-log estimator): its sums from the per-row statistics kept batch by
    # batch equal the old whole-log recomputation exactly
    users = np.flatnonzero(design.sums["impressions"] > 0)
    est = dict(design.estimators)["adaptive_ips"]
    kept = design._row_stat_sums("adaptive_ips", est, users, design.sums["impressions"][users])
    again = design._whole_log_sums(est, log, users)
    assert len(kept) == len(again) == 4
    for a, b in zip(kept, again):
        assert np.array_equal(a, b)


def test_logging_rows_in_one_batch_equal_ratio_mean_row_by_row():
    """The design computes its three ``logging:`` rows together (``ratio_means``: the
    kernel of ``ratio_mean_batch`` without its copies, and the z-test of ``PairedEstimate``):
    exactly ``ratio_mean_batch``'s numbers, and with count denominators (the design's
    impressions) exactly :func:`onlineeval.stats.ratio_mean` of each metric alone (also a
    metric that is 0 for every user: SE 0, and one with every value equal)."""
    from onlineeval.stats import ratio_mean
    from onlineeval.stats.online import ratio_mean_batch
    from simulations.designs.counterfactual.paired import ratio_means

    rng = np.random.default_rng(8)
    for n, counts in [(2, True), (3, True), (17, True), (1000, True), (6000, True), (17, False), (6000, False)]:
        den = rng.integers(1, 30, size=n).astype(np.float64)
        if not counts:  # fractional denominators: ratio_mean_batch's own layout
            den *= rng.random(n)
        nums = [rng.poisson(0.5 * den).astype(np.float64), (rng.random(n) < 0.3) * den, rng.random(n) * den]
        nums += [np.zeros(n), 0.5 * den]
        batch = ratio_mean_batch(np.stack(nums), np.broadcast_to(den, (5, n)), alpha=0.05)
        ours = ratio_means(np.stack(nums), den, 0.05)
        for i, x in enumerate(nums):
            single = ratio_mean(x, den, alpha=0.05)
            for field in ("estimate", "se", "ci_low", "ci_high", "pvalue"):
                # the design's numbers are ratio_mean_batch's (what it called before), exactly
                assert getattr(ours[i], field) == getattr(batch[i], field), (n, i, field)
                if counts:  # with count denominators (the design's) also ratio_mean's, exactly
                    assert getattr(batch[i], field) == getattr(single, field), (n, i, field)
                else:  # fractional ones: ratio_mean_batch sums its column-major copy in another order
                    assert getattr(ours[i], field) == pytest.approx(getattr(single, field), rel=1e-12, abs=1e-15)


# ------------------------------------------------------------------ slot-by-slot reductions
@pytest.mark.parametrize("k", list(range(1, 13)))
def test_row_sum_equals_numpy_sum(k):
    """``row_sum`` adds short rows left to right, as numpy does (exactly equal), and calls
    numpy's own sum from 8 slots on."""
    from onlineeval.estimators.ips import row_sum

    rng = np.random.default_rng(k)
    x = rng.random((20_000, k)) * rng.choice([1e-8, 1e-3, 1.0, 1e3, -1.0], size=(20_000, k))
    x[rng.random(x.shape) < 0.3] = 0.0
    x[rng.random(x.shape) < 0.05] = -0.0
    assert np.array_equal(row_sum(x), x.sum(axis=1))
    assert np.array_equal(row_sum(x[:, ::-1]), x[:, ::-1].sum(axis=1))  # not contiguous


# ------------------------------------------------------------------ estimators' terms (the old formulas)
def _old_terms(name, data, target, reward, cap=3.0):
    """The previous ``_terms`` of each estimator: numpy's ``.sum(axis=1)`` over slots. IPS and clipped IPS in
    Horvitz-Thompson form (review 3, F-C): the weight multiplies the whole list reward ``R = c0 + sum_j r_j``, the
    terms' numerator is ``w R - c0`` (the estimate adds ``c0`` back), here as ``w sum_j r_j + c0 (w - 1)``, the
    same value in the library's order of operations (checked against ``w R - c0`` to rounding by the caller)."""
    p = target.propensities(data.query, data.shown)
    r = reward.slot_rewards(data.clicks)
    if name in ("ips", "snips", "clipped_ips"):
        w = p.list / data.p_list
        if name == "clipped_ips":
            w = w - np.maximum(w - cap, 0.0)
        wr = w * r.sum(axis=1)
        return wr if name == "snips" or reward.offset == 0 else wr + reward.offset * (w - 1.0)
    if name == "iips":
        return (np.where(data.valid, p.item / data.p_item, 0.0) * r).sum(axis=1)
    # rips
    valid = data.valid
    w = np.where(valid, p.prefix / data.p_prefix, 0.0)
    n_shown = valid.sum(axis=1)
    carried = np.where(n_shown > 0, w[np.arange(data.n), np.maximum(n_shown - 1, 0)], 1.0)
    w = np.where(valid, w, carried[:, None])
    return (np.where(valid, w, 0.0) * r).sum(axis=1)


@pytest.mark.parametrize("k", [3, 4, 9])
def test_estimator_terms_equal_the_old_formulas(k):
    from onlineeval.estimators import get_estimator, get_reward
    from simulations.designs.counterfactual import _BatchReward, _BatchTarget

    data, targets = _random_log(11 + k, k=k, m=12)
    for metric in ("clicks_per_query", "reciprocal_rank", "abandonment"):
        plain = get_reward(metric, k)
        for name in ("ips", "snips", "clipped_ips", "iips", "rips"):
            est = get_estimator(name, **({"cap": 3.0} if name == "clipped_ips" else {}))
            if plain.kind not in est.rewards:
                continue
            for target in targets:
                old = _old_terms(name, data, target, plain)
                assert np.array_equal(est.terms(data, target, plain).num, old), (name, metric)
                if name in ("ips", "clipped_ips"):  # the definition: c0 + mean(num) = mean(w (c0 + R))
                    w = target.propensities(data.query, data.shown).list / data.p_list
                    w = np.minimum(w, 3.0) if name == "clipped_ips" else w
                    whole = plain.offset + plain.slot_rewards(data.clicks).sum(axis=1)
                    np.testing.assert_allclose(plain.offset + old.mean(), (w * whole).mean(), rtol=0, atol=1e-12)
                cached = _BatchReward(plain)
                assert np.array_equal(est.terms(data, _BatchTarget(target), cached).num, old), (name, metric)


def test_adaptive_ips_rows_of_unusual_type_codes_equal_the_old_code():
    """Type codes outside a small lookup table (negative, large) take the sorted path."""
    import dataclasses

    from onlineeval.estimators import get_estimator, get_reward

    data, targets = _random_log(21)
    codes = np.array([-3, 5, 100_000])[data.user_type]
    data = dataclasses.replace(data, user_type=codes)
    reward = get_reward("clicks_per_query", data.k)
    for behaviours in ({-3: "independent", 5: "cascade", 100_000: "standard"}, None):
        est = get_estimator("adaptive_ips", behaviours=behaviours)
        for target in targets:
            num, w = _old_adaptive_terms(est, data, target, reward)
            new = est.terms(data, target, reward)
            assert np.array_equal(new.num, num) and np.array_equal(new.weights, w)


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_known_list_lookup_equals_the_policy(share):
    """Rows showing a known list (a target's top k) take the precomputed propensities; the
    result equals the policy's own propensities row by row, whatever the share of such rows."""
    from simulations.designs.counterfactual import known_list_propensities, stack_known

    data, targets = _random_log(31)
    policy, k = data.logger, data.k
    rng = np.random.default_rng(int(share * 10))
    q = data.query
    shown = data.shown.copy()
    pick = rng.random(q.size)
    use_a, use_b = pick < share * 0.7, (pick >= share * 0.7) & (pick < share)
    shown[use_a] = targets[0].lists[q[use_a]]
    shown[use_b] = targets[1].lists[q[use_b]]
    known = [(t.lists, policy.propensities(np.arange(t.lists.shape[0]), t.lists)) for t in targets]
    ref = _old_propensities(policy, q, shown)
    for match, table in ((None, None), ([(t.lists[q] == shown).all(axis=1) for t in targets], stack_known(known))):
        got = known_list_propensities(policy, q, shown, policy.m, known, match, table)
        assert np.array_equal(got.list, ref.list)
        assert np.array_equal(got.prefix, ref.prefix) and np.array_equal(got.item, ref.item)
        assert got.prefix.shape == (q.size, k)


def _old_paired_difference(num_a, den_a, num_b, den_b, alpha):
    import math

    from onlineeval.stats import ratio_linearization
    from simulations.designs.counterfactual import PairedEstimate

    n = num_a.shape[0]
    if n < 2 or not den_a.sum() > 0 or not den_b.sum() > 0:
        return PairedEstimate(math.nan, math.nan, alpha)
    if not (np.isfinite(num_a).all() and np.isfinite(num_b).all()):
        return PairedEstimate(math.nan, math.nan, alpha)
    r_a, e_a = ratio_linearization(num_a, den_a)
    r_b, e_b = ratio_linearization(num_b, den_b)
    d = e_b - e_a
    d = d - d.mean()
    return PairedEstimate(r_b - r_a, math.sqrt(float(d @ d) / (n * (n - 1))), alpha)


def test_paired_difference_equals_the_old_code():
    from onlineeval.errors import InputError
    from simulations.designs.counterfactual import paired_difference

    rng = np.random.default_rng(4)
    fields = ("estimate", "se", "ci_low", "ci_high", "pvalue")
    for n in (2, 3, 50, 6000):
        den_a, den_b = rng.integers(0, 9, size=n).astype(float), rng.random(n) * 3
        den_a[0] = 1.0
        num_a, num_b = rng.normal(size=n) * den_a, rng.normal(size=n)
        new, old = paired_difference(num_a, den_a, num_b, den_b, 0.05), _old_paired_difference(
            num_a, den_a, num_b, den_b, 0.05)
        assert all(getattr(new, f) == getattr(old, f) for f in fields)
    bad = den_b.copy()
    bad[3] = -1.0  # a negative denominator is still refused, as before
    with pytest.raises(InputError):
        paired_difference(num_a, den_a, num_b, bad, 0.05)


def _same_estimate(a, b) -> bool:
    fields = ("estimate", "se", "ci_low", "ci_high", "pvalue")
    return all(getattr(a, f) == getattr(b, f) or (getattr(a, f) != getattr(a, f) and getattr(b, f) != getattr(b, f))
               for f in fields)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("n", [1, 2, 3, 17, 1000, 2369, 6000])
def test_paired_differences_of_rows_equal_paired_difference_of_each_row(n):
    """The checkpoint's batched paired differences (one row per estimator) equal the old
    paired difference of each row exactly: ordinary rows, all-ones denominators, an
    all-zero denominator (undefined), a non-finite numerator (undefined), a NaN
    denominator, finite terms whose sum overflows."""
    from simulations.designs.counterfactual.paired import paired_differences

    rng = np.random.default_rng(n)
    e = 8
    den_a = rng.integers(0, 9, size=(e, n)).astype(float)
    den_a[:, 0] = 1.0
    den_b = rng.random((e, n)) * 3
    num_a, num_b = rng.normal(size=(e, n)) * den_a, rng.normal(size=(e, n)) * 1e3 ** rng.random((e, n))
    den_a[1] = den_b[1] = np.ones(n)
    den_a[2] = 0.0
    num_b[3, n // 2] = np.inf
    den_b[4, n // 2] = np.nan  # a NaN denominator: undefined, as before
    num_a[5, :] = 1e308  # every term finite, the sum overflows: the checked path, as before
    got = paired_differences(num_a, den_a, num_b, den_b, 0.05)
    assert len(got) == e
    for i in range(e):
        assert _same_estimate(got[i], _old_paired_difference(num_a[i], den_a[i], num_b[i], den_b[i], 0.05)), i
    if n >= 2:
        assert np.isnan(got[2].estimate) and np.isnan(got[3].estimate)
        assert np.isfinite(got[0].estimate) and got[0].se > 0


def test_paired_differences_refuse_a_negative_denominator_like_paired_difference():
    from onlineeval.errors import InputError
    from simulations.designs.counterfactual.paired import paired_differences

    rng = np.random.default_rng(2)
    den = rng.random((2, 40)) + 0.1
    bad = den.copy()
    bad[1, 5] = -1.0
    with pytest.raises(InputError):
        paired_differences(rng.normal(size=(2, 40)), den, rng.normal(size=(2, 40)), bad, 0.05)
