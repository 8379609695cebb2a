"""The IPS family's shared derived arrays and the pseudoinverse's shared decompositions give
the numbers of a straightforward computation.

The reference here is each estimator's formula written out plainly from the log's arrays
and the target's propensities (no cache, no shared array, ``np.unique`` groups, the
diagnostics' definitions restated), estimated with :func:`onlineeval.stats.ratio_mean` and
:func:`onlineeval.stats.cluster_bootstrap_ratio` directly. The optimised path must give the
same estimate, SE, CLT and bootstrap interval and diagnostics: exactly for the reweighting
estimators, to 1e-12 relative for the pseudoinverse (queries whose pair marginals are the
same matrix up to relabelled candidates share one eigendecomposition, which changes the
rounding). Every estimator runs on one log one after the other (the derived arrays shared,
three targets so that the least recently used is dropped) and is compared with the
reference computed afresh.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import scipy.stats

from onlineeval.errors import InputError
from onlineeval.estimators import (
    DeterministicTarget,
    LoggedData,
    Reward,
    get_estimator,
    get_reward,
)
from onlineeval.estimators.base import _unique_inverse, first_click, weight_statistics
from onlineeval.estimators.checks import check_world, plackett_luce_policy, sample_log
from onlineeval.estimators.derived import CACHED_TARGETS, is_frozen
from onlineeval.estimators.pseudoinverse import (
    _store_for,
    _target_q,
    _targets_q,
    pi_slot_weights,
)
from onlineeval.stats import cluster_bootstrap_ratio, ratio_mean

ALPHA = 0.05
N_BOOT = 100


# ----------------------------------------------------------------------------- the reference
def ref_weights(data: LoggedData, target: object) -> dict[str, np.ndarray]:
    """Item, prefix (0 at empty slots), carried prefix and list weights, straight from the formulas."""
    p = target.propensities(data.query, data.shown)
    valid = data.shown >= 0
    item = np.where(valid, np.asarray(p.item, float) / data.p_item, 0.0)
    prefix = np.where(valid, np.asarray(p.prefix, float) / data.p_prefix, 0.0)
    carried = prefix.copy()  # empty slots (they only trail) carry the slot before them, 1 without any
    carried[:, 0] = np.where(valid[:, 0], prefix[:, 0], 1.0)
    for j in range(1, data.k):
        carried[:, j] = np.where(valid[:, j], prefix[:, j], carried[:, j - 1])
    lst = np.asarray(p.list, float) / data.p_list
    return {"item": item, "prefix": prefix, "carried": carried, "list": lst}


def ref_pi_weights(data: LoggedData, target: object, rcond: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """Per-impression pseudoinverse weights, one :func:`pi_slot_weights` per distinct query."""
    k = data.k
    weight = np.zeros(data.n)
    resid = []
    for q in np.unique(data.query):
        gamma = np.asarray(data.logger.pair_marginals(int(q)), float)[:k, :, :k, :]
        m = gamma.shape[1]
        w, r = pi_slot_weights(gamma, _target_q(target, int(q), k, m), rcond)
        resid.append(r)
        rows = np.flatnonzero(data.query == q)
        for j in range(k):
            d = data.shown[rows, j]
            weight[rows] += np.where(d >= 0, w[j, np.maximum(d, 0)], 0.0)
    return weight, np.array(resid)


def ref_terms(name: str, opts: dict, data: LoggedData, target: object, reward: Reward):
    """``(num, den or None, weights)`` of estimator ``name`` by its formula."""
    r = reward.slot_rewards(data.clicks)
    big_r = r.sum(axis=1)
    w = ref_weights(data, target)
    c0 = reward.offset  # IPS and clipped IPS weight the whole reward c0 + R (Horvitz-Thompson): num = w (c0 + R) - c0
    if name == "ips":
        return w["list"] * (c0 + big_r) - c0, None, w["list"]
    if name == "snips":
        return w["list"] * big_r, w["list"], w["list"]
    if name == "clipped_ips":
        wc = np.minimum(w["list"], opts["cap"])
        return wc * (c0 + big_r) - c0, None, wc
    if name == "iips":
        return (w["item"] * r).sum(axis=1), None, w["item"]
    if name in ("rips", "snrips"):
        num = (w["prefix"] * r).sum(axis=1)
        if name == "rips":
            return num, None, w["prefix"]
        tau = np.where(data.clicks, np.arange(data.k), data.k - 1).min(axis=1)  # first click, else last slot
        return num, w["carried"][np.arange(data.n), tau], w["prefix"]
    if name == "adaptive_ips":
        per = {"independent": w["item"], "cascade": w["prefix"],
               "standard": np.where(data.shown >= 0, w["list"][:, None], 0.0)}
        b = opts["behaviours"]
        if isinstance(b, str):
            ws = per[b]
        else:
            ws = np.stack([per[dict(b)[int(t)]][i] for i, t in enumerate(data.user_type)])
        return (ws * r).sum(axis=1), None, ws
    if name == "pseudoinverse":
        weight, _ = ref_pi_weights(data, target, opts.get("rcond", 1e-10))
        return weight * big_r, None, weight
    raise ValueError(name)


def ref_diagnostics(data: LoggedData, weights: np.ndarray) -> tuple[float, float, float, float]:
    """``(ess, max_weight, top1_share, zero_weight_share)`` by their definitions (full sort)."""
    valid = data.shown >= 0
    flat = weights[valid] if weights.ndim == 2 else weights
    s, s2 = flat.sum(), np.square(flat).sum()
    ess = float(s * s / s2) if s2 > 0 else 0.0
    top_k = max(1, math.ceil(0.01 * flat.size))
    top = float(np.sort(flat)[::-1][:top_k].sum() / s) if s > 0 else math.nan
    row = weights if weights.ndim == 1 else np.where(valid, weights, 0.0).sum(axis=1)
    return ess, float(flat.max()), top, float(np.mean(row == 0))


def ref_estimate(data: LoggedData, num: np.ndarray, den: np.ndarray | None, reward: Reward, seed: int,
                 weights: np.ndarray | None) -> dict:
    from onlineeval.estimators.intervals import estimate_df

    den = np.ones(data.n) if den is None else den
    if data.user is None:
        nu, du = num, den
    else:
        _, inv = np.unique(data.user, return_inverse=True)
        nu, du = np.bincount(inv, num), np.bincount(inv, den)
    est = ratio_mean(nu, du, alpha=ALPHA)
    boot = cluster_bootstrap_ratio(nu, du, N_BOOT, np.random.default_rng(seed), alpha=ALPHA)
    off = reward.offset
    # the CLT interval's t quantile, its degrees of freedom from the reference weights on the fresh log (their value
    # is checked against a dense reference in tests/test_estimators_intervals.py)
    q = float(scipy.stats.t.ppf(1 - ALPHA / 2, estimate_df(data, weights, du)))
    value = est.estimate + off
    return {"value": value, "se": est.se, "ci_low": value - q * est.se, "ci_high": value + q * est.se,
            "boot_low": boot.ci_low + off, "boot_high": boot.ci_high + off}


def close(a: float, b: float, rel: float) -> bool:
    if a == b or (math.isnan(a) and math.isnan(b)):
        return True
    return abs(a - b) <= rel * max(abs(a), abs(b))


# ----------------------------------------------------------------------------- the logs
def sim_log(seed: int, users: bool, policy: str = "epsilon_greedy"):
    """A simulator log with short candidate lists (empty slots), user types and a logger."""
    import simulations.policies as policies
    rng = np.random.default_rng(seed)
    n_q, m, k = 25, 7, 4
    scores = rng.normal(size=(n_q, m))
    scores[::4, 3:] = -np.inf  # three candidates: the fourth slot stays empty
    spec = {"epsilon_greedy": {"policy": "epsilon_greedy", "epsilon": 0.4, "n": 5},
            "plackett_luce": {"policy": "plackett_luce"}}[policy]
    pol = policies.build_policy(spec, scores, k)
    q = rng.integers(0, n_q, 3000)
    shown = pol.sample(q, rng)
    clicks = (rng.random(shown.shape) < 0.35) & (shown >= 0)
    p = pol.propensities(q, shown)
    log = LoggedData(q, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item,
                     user=rng.integers(0, 2000, q.size) if users else None, user_type=rng.integers(0, 2, q.size),
                     logger=pol)
    targets = []
    for t, noise in enumerate((0.0, 0.7, 5.0)):  # three targets: more than a log keeps (least recent dropped)
        order = np.argsort(-(scores + rng.normal(scale=noise, size=scores.shape)), axis=1)[:, :k]
        order = np.where(np.take_along_axis(np.isfinite(scores), order, 1), order, -1)  # non-candidates last
        targets.append(DeterministicTarget(order, f"t{t}"))
    return log, targets


CASES = [("ips", {}), ("snips", {}), ("clipped_ips", {"cap": 3.0}), ("iips", {}), ("rips", {}), ("snrips", {}),
         ("adaptive_ips", {"behaviours": "cascade"}),
         ("adaptive_ips", {"behaviours": {0: "independent", 1: "standard"}}),
         ("pseudoinverse", {})]


def check_all(log: LoggedData, fresh: LoggedData, targets: list, rewards: list, pi_rel: float) -> int:
    """Every case on ``log`` (shared arrays, targets interleaved) against the reference on
    ``fresh``; returns how many estimates were compared."""
    compared = 0
    for rw_name in rewards:
        reward = get_reward(rw_name, log.k) if isinstance(rw_name, str) else rw_name
        for name, opts in CASES:
            est = get_estimator(name, **opts)
            if reward.kind not in est.rewards:
                continue
            for target in targets:
                seed = 11 + compared
                try:
                    got = est.estimate(log, target, reward, alpha=ALPHA, n_boot=N_BOOT, rng=np.random.default_rng(seed))
                except InputError as exc:  # the reference must fail the same way
                    num, den, _ = ref_terms(name, opts, fresh, target, reward)
                    assert den is not None and den.sum() <= 0, (name, exc)
                    continue
                num, den, weights = ref_terms(name, opts, fresh, target, reward)
                want = ref_estimate(fresh, num, den, reward, seed, weights)
                rel = pi_rel if name == "pseudoinverse" else 0.0
                for key, value in want.items():
                    assert close(getattr(got, key), value, rel), (name, opts, target.name, reward.name, key)
                for key, value in zip(("ess", "max_weight", "top1_share", "zero_weight_share"),
                                      ref_diagnostics(fresh, weights)):
                    if name == "pseudoinverse" and key == "zero_weight_share":
                        continue  # counts exact zeros: rounding decides for weights that are 0 mathematically
                    assert close(getattr(got.diagnostics, key), value, max(rel, 1e-12)), (name, target.name, key)
                compared += 1
    return compared


# ------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("users", [True, False])
def test_shared_arrays_equal_the_reference_on_a_log_with_empty_slots(users: bool) -> None:
    log, targets = sim_log(3, users)
    fresh, _ = sim_log(3, users)
    assert not log.all_valid
    rewards = (["reciprocal_rank", Reward("weighted", "additive", np.array([1.0, 0.6, 0.3, 0.1]))] if users
               else ["clicks_per_query", "abandonment"])
    assert check_all(log, fresh, targets, rewards, pi_rel=1e-12) >= 40
    assert len(log._cache.targets) <= CACHED_TARGETS


def test_shared_arrays_equal_the_reference_in_a_check_world() -> None:
    world = check_world("mixture")
    log = sample_log(world, 5000, np.random.default_rng(4))
    fresh = sample_log(world, 5000, np.random.default_rng(4))
    check_all(log, fresh, list(world.targets), ["clicks_per_query", "reciprocal_rank"], pi_rel=1e-12)


def test_a_stochastic_target_gives_the_reference_terms() -> None:
    world = check_world("pbm")
    log = sample_log(world, 4000, np.random.default_rng(6))
    target = plackett_luce_policy(np.exp(-0.5 * world.attraction), world.k, name="pl_target")
    for rw in ("clicks_per_query", "reciprocal_rank"):
        reward = get_reward(rw, log.k)
        for name, opts in CASES[:-1]:
            est = get_estimator(name, **opts)
            if reward.kind not in est.rewards:
                continue
            t = est.terms(log, target, reward)
            num, den, weights = ref_terms(name, opts, log, target, reward)
            assert np.array_equal(t.num, num) and np.array_equal(t.weights, weights), name
            assert (t.den is None and den is None) or np.array_equal(t.den, den), name


def test_pseudoinverse_equals_per_query_decompositions() -> None:
    """Plackett-Luce: every query its own Gamma, the same numbers as one pi_slot_weights per
    query; epsilon-greedy: queries of equal relabelled Gamma share a decomposition (two here:
    full and short candidate lists), weights within rounding of the per-query ones."""
    for policy, exact in (("plackett_luce", True), ("epsilon_greedy", False)):
        log, targets = sim_log(8, True, policy)
        for target in targets:
            t = get_estimator("pseudoinverse").terms(log, target, "clicks_per_query")
            weight, resid = ref_pi_weights(log, target)
            if exact:
                assert np.array_equal(t.weights, weight)
                assert t.notes["max_range_residual"] == resid.max()
            else:
                assert np.abs(t.weights - weight).max() <= 1e-12 * np.abs(weight).max()
                assert abs(t.notes["max_range_residual"] - resid.max()) <= 1e-12
            assert t.notes["queries_outside_range"] == int(np.count_nonzero(resid > 1e-8))
        store = _store_for(log.logger)
        classes = sum(len(v) for v in store.by_print.values())
        assert classes == (np.unique(log.query).size if exact else 2)


def test_batched_target_marginals_equal_one_query_at_a_time() -> None:
    world = check_world("pbm")
    stochastic = plackett_luce_policy(np.exp(-0.5 * world.attraction), world.k)
    for target in (*world.targets, stochastic):
        for m in (2, 3, 5, 7):  # fewer candidates than slots, as many, more
            queries = np.array([0, 2, 3, 1, 2])
            got = _targets_q(target, queries, world.k, m)
            for i, q in enumerate(queries):
                assert np.array_equal(got[i], _target_q(target, int(q), world.k, m))


def test_derived_arrays_are_read_only_and_not_pickled() -> None:
    log, targets = sim_log(5, True)
    w = log.importance_weights(targets[0], "item")
    assert not w.flags.writeable and log.importance_weights(targets[0], "item") is w
    assert not log.valid.flags.writeable and not log.slot_rewards(get_reward("reciprocal_rank", log.k)).flags.writeable
    with pytest.raises(ValueError, match="level must be one of list, item, prefix, list_slots, prefix_carried; got"):
        log.importance_weights(targets[0], "slot")
    copy = pickle.loads(pickle.dumps(log))
    assert "_cache" not in copy.__dict__
    assert np.array_equal(copy.importance_weights(targets[0], "item"), w)
    log.clear_cache()
    assert log.importance_weights(targets[0], "item") is not w


def test_constructor_copies_writable_arrays_and_keeps_frozen_ones() -> None:
    rng = np.random.default_rng(2)
    shown = np.argsort(rng.random((50, 9)), axis=1)[:, :3]  # rankings: no document twice in a list
    clicks = rng.random((50, 3)) < 0.3
    p_list = rng.uniform(0.1, 1.0, 50)
    log = LoggedData(np.zeros(50, dtype=np.int64), shown, clicks, p_list=p_list)
    shown[0, 0], p_list[0] = 99, 0.5  # the caller's arrays change; the log's do not
    assert log.shown[0, 0] != 99 and log.p_list[0] != 0.5 and not np.shares_memory(log.shown, shown)
    again = LoggedData(log.query, log.shown, log.clicks, p_list=log.p_list)  # frozen arrays: kept, not copied
    assert again.shown is log.shown and again.p_list is log.p_list
    view = shown.view()
    view.setflags(write=False)  # read-only, but its base is writable: copied
    assert not np.shares_memory(LoggedData(log.query, view, log.clicks).shown, shown)
    part = log.take(np.arange(10, 30))
    assert is_frozen(part.shown) and np.array_equal(part.shown, log.shown[10:30])
    with pytest.raises(Exception, match="propensities must be in"):
        LoggedData(log.query, log.shown, log.clicks, p_list=np.where(np.arange(50) == 7, np.nan, 0.5))


def test_rows_no_logger_can_show_are_refused_naming_the_impression() -> None:
    # a log built by hand with a document twice in a row, an empty slot before a document or an id below -1 was
    # accepted and estimated (the readers refuse such lines; LoggedData itself did not)
    rng = np.random.default_rng(3)
    shown = np.argsort(rng.random((40, 12)), axis=1)[:, :4]
    shown[5, 3] = -1  # trailing empty slots are the convention
    q, clicks = np.zeros(40, dtype=np.int64), np.zeros((40, 4), dtype=bool)
    LoggedData(q, shown, clicks, source="hand.npz")
    for row, change, match in [
        (7, [3, 1, 3, 0], "impression 7 shows document 3 twice"),
        (9, [-1, 1, 2, 0], "impression 9 has an empty slot \\(-1\\) at slot 1 before document 1 at slot 2"),
        (11, [4, 1, -1, 0], "impression 11 has an empty slot \\(-1\\) at slot 3 before document 0 at slot 4"),
        (13, [4, -2, 2, 0], "impression 13, slot 2 holds -2"),
    ]:
        bad = shown.copy()
        bad[row] = change
        with pytest.raises(InputError, match="hand.npz: shown: " + match):
            LoggedData(q, bad, clicks, source="hand.npz")
    ok = LoggedData(q, np.vstack([shown[:20], [[3, 1, 3, 0]] * 20]), clicks, lists_checked=True)  # told: kept
    with pytest.raises(InputError, match="impression 0 shows document 3 twice"):
        LoggedData(q, ok.shown[::-1], clicks)  # a log made of another's rows, not by take(): checked
    assert np.array_equal(ok.take(np.arange(20, 40)).shown, ok.shown[20:])  # take() trusts its log


def test_small_helpers_equal_numpy() -> None:
    rng = np.random.default_rng(0)
    for x in (rng.integers(0, 10, 100), rng.integers(0, 10**12, 100), rng.integers(-5, 5, 60), np.array([3]),
              rng.integers(0, 3000, 20_000)):
        u, inv = np.unique(x, return_inverse=True)
        u2, inv2 = _unique_inverse(x.astype(np.int64))
        assert np.array_equal(u, u2) and np.array_equal(inv, inv2)
    c = rng.random((500, 6)) < 0.3
    before = np.cumsum(c, axis=1) - c
    assert np.array_equal(first_click(c), (c & (before == 0)).astype(float))
    lists = np.array([rng.permutation(6)[:4] for _ in range(40)]) - 1  # rankings: no document twice (-1 empty)
    target = DeterministicTarget(lists)
    q = rng.integers(0, 40, 300)
    r = np.where(rng.random((300, 4)) < 0.6, lists[q], rng.integers(-1, 5, size=(300, 4)))
    p = target.propensities(q, r)
    same = lists[q] == r
    assert np.array_equal(p.prefix, np.cumprod(same, axis=1).astype(float))
    assert np.array_equal(p.item, same.astype(float)) and np.array_equal(p.list, p.prefix[:, -1])


@pytest.mark.parametrize("kind", ["nonnegative", "mixed", "ties", "list"])
@pytest.mark.parametrize("empty", [False, True])
def test_weight_statistics_equal_their_definitions(kind: str, empty: bool) -> None:
    """ESS, largest weight, top-1% share and zero-row share of slot (and list) weights against
    the definitions (full sort, row sums), with all-zero rows and, optionally, empty slots;
    large enough (5 x 10^5 slots) for the linear-time top-1% path."""
    rng = np.random.default_rng(len(kind) + empty)
    n, k = 50_000, 10
    w = {"nonnegative": rng.exponential(size=(n, k)) * (rng.random((n, k)) < 0.4),
         "mixed": rng.normal(size=(n, k)),
         "ties": rng.choice([0.0, 1.9, 40.0], size=(n, k), p=[0.5, 0.45, 0.05]),
         "list": rng.exponential(size=(n, k))}[kind]
    w[rng.random(n) < 0.1] = 0.0  # rows of zeros
    shown = np.tile(np.arange(k), (n, 1))
    if empty:
        short = rng.random(n) < 0.2
        shown[short, 7:] = -1
        w[short, 7:] = 0.0
    if kind == "list":
        w = w[:, 0].copy()
    log = LoggedData(np.zeros(n, dtype=np.int64), shown, np.zeros((n, k), dtype=bool))
    got = weight_statistics(w, log.valid, log.all_valid)
    want = ref_diagnostics(log, w)
    for g, r in zip(got, want):
        assert close(g, r, 1e-12), (got, want)
