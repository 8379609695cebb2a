"""The counterfactual logger's compiled kernels (:mod:`simulations.policies.kernels`) against the NumPy code.

- :meth:`StackedEpsilonGreedy.sample` compiled against :meth:`StackedEpsilonGreedy.sample_numpy` (kept as the
  reference) and the component-by-component scatter: the same lists and the same generator state after, with
  differing candidate sets, RandTop widths below ``k``, three components, ``k`` 1, 5 and 16, batches of 0, 1 and
  thousands of rows;
- :func:`~simulations.policies.kernels.sample_lists` called directly with widths differing across a component's
  queries (rows narrower than their batch's width, which the policies' stacks never give) against
  :func:`~simulations.policies.base.shuffle_top`'s lists and draws;
- a single epsilon-greedy policy's compiled draw (:meth:`StackedEpsilonGreedy.sample_alone`) against its NumPy
  draw (``MixturePolicy._sample``), and mixtures whose components it samples;
- :func:`~simulations.policies.kernels.logged_propensities` against
  :func:`~simulations.designs.counterfactual.serving.known_list_propensities` (``sampled=True``), the running AND
  of the match and :func:`~simulations.designs.counterfactual.fused.stacked_indicators`: lists that are a target's,
  both targets' (the first wins), and documents another component cannot show (its validity masks);
- whole batches of the design (``configs/counterfactual.yaml``'s design) with the compiled paths switched off and
  on: the same per-user sums, log and checkpoint rows;
- ``NUMBA_DISABLE_JIT=1`` (the kernels as plain Python) gives the same lists and propensities, in a subprocess.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from test_counterfactual_cost3 import _eps_mixture, _old_sample

REPO = Path(__file__).resolve().parents[1]


def _mixture3(k: int = 5, m: int = 24, queries: int = 50, n: tuple[int, ...] = (20, 6, 3)):
    """Three epsilon-greedy components around three rankers with different candidate sets (19 candidates each)."""
    from simulations.policies import build_policy

    rng = np.random.default_rng(11)
    scores = {name: rng.normal(size=(queries, m)) for name in ("A", "B", "C")}
    scores["A"][:, 19:] = -np.inf
    scores["B"][:, :5] = -np.inf
    scores["C"][:, 2:7] = -np.inf
    spec = {"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": 0.3, "n": n[0], "scores": "A", "weight": 0.5},
        {"policy": "epsilon_greedy", "epsilon": 0.6, "n": n[1], "scores": "B", "weight": 0.3},
        {"policy": "epsilon_greedy", "epsilon": 0.1, "n": n[2], "scores": "C", "weight": 0.2}]}
    return build_policy(spec, scores, k)


def _policies():
    return [_eps_mixture(False, 10), _eps_mixture(True, 4), _eps_mixture(True, 20, k=1), _eps_mixture(False, 20, k=16),
            _mixture3(), _mixture3(k=8, n=(2, 19, 12))]


# ------------------------------------------------------------------------------------------------ sampling
@pytest.mark.parametrize("which", range(6))
def test_compiled_sample_equals_numpy_sample(which):
    from simulations.policies.epsilon_greedy import StackedEpsilonGreedy

    policy = _policies()[which]
    stacked = policy._stacked()
    assert isinstance(stacked, StackedEpsilonGreedy)
    q = np.random.default_rng(which).integers(0, policy.Q, 6000)
    for n in (6000, 257, 1, 0):
        a, b, c = (np.random.default_rng(100 + n) for _ in range(3))
        got = stacked._sample_compiled(policy, q[:n], a)
        want = stacked.sample_numpy(policy, q[:n], b)
        old = _old_sample(policy, q[:n], c)
        assert got.dtype == np.int64 and got.shape == (n, policy.k)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, old)
        assert a.bit_generator.state == b.bit_generator.state == c.bit_generator.state
        if n == 6000:
            assert (got >= 0).all()
            # more lists than the components' rankers give: the randomised rows are covered
            assert len({(qi, *r) for qi, r in zip(q[:n].tolist(), got.tolist())}) > policy.Q * len(policy.components)


def test_sample_switch_selects_the_path(monkeypatch):
    from simulations.policies import kernels
    from simulations.policies.epsilon_greedy import StackedEpsilonGreedy

    policy = _eps_mixture(True, 10)
    q = np.arange(40, dtype=np.int64)
    calls = []
    real = kernels.sample_lists
    monkeypatch.setattr(kernels, "sample_lists", lambda *a: (calls.append(1), real(*a))[1])
    policy.sample(q, np.random.default_rng(0))
    assert calls == [1]
    monkeypatch.setattr(StackedEpsilonGreedy, "compiled", False)
    policy.sample(q, np.random.default_rng(0))
    assert calls == [1]


def _lists_by_shuffle_top(rng, draw_pick, query, mix_cdf, branch_cdf0, n_eff, tops, orders, n_queries, m, k):
    """sample_lists's documented draws in NumPy: the component of each row (``draw_pick``), per component its rows'
    branch uniforms, then shuffle_top over its randomised rows' ``n_eff`` (their widths may differ)."""
    from simulations.policies.base import shuffle_top

    n = query.size
    pick = (rng.random(n)[:, None] >= mix_cdf[None, :-1]).sum(axis=1) if draw_pick else np.zeros(n, dtype=np.int64)
    out = tops[pick * n_queries + query].copy()
    for c in range(branch_cdf0.size):
        rows = np.flatnonzero(pick == c)
        if rows.size:
            rt = rows[rng.random(rows.size) >= branch_cdf0[c]]
            ranks = shuffle_top(n_eff[c, query[rt]], k, rng)
            out[rt] = orders[((query[rt] + c * n_queries) * m)[:, None] + ranks]
    return out


@pytest.mark.parametrize("draw_pick", [True, False])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_sample_lists_with_widths_differing_by_query_equals_shuffle_top(draw_pick, k):
    """The kernel called directly with ``n_eff`` differing across a component's queries (0, 1, 2, below and above
    ``k``, all ``m``): the stacks the policies build have one width per component, so this is the only test of the
    kernel's rows narrower than their batch's width (their slots past ``n_eff`` keep the base order, however the
    previous row left the kernel's buffer). The same lists and the same generator state as shuffle_top's."""
    from simulations.policies import kernels

    rng = np.random.default_rng(k + 10 * draw_pick)
    n_queries, m, n_c = 12, 9, 2 if draw_pick else 1
    n_eff = np.ascontiguousarray(np.stack([np.array([0, 1, 2, 3, 4, 5, 6, 7, 9, 9, 2, 5])[rng.permutation(n_queries)]
                                           for _ in range(n_c)]), dtype=np.int64)
    tops = rng.integers(100, 200, size=(n_c * n_queries, k)).astype(np.int64)
    orders = np.concatenate([rng.permutation(m) + 10 * m * r for r in range(n_c * n_queries)]).astype(np.int64)
    mix_cdf = np.array([0.4, 1.0][-n_c:])
    branch_cdf0 = np.array([0.3, 0.5][:n_c])
    query = rng.integers(0, n_queries, 3000).astype(np.int64)
    for n in (3000, 37, 1, 0):
        a, b = np.random.default_rng(n), np.random.default_rng(n)
        got = np.full((n, k), -1, dtype=np.int64)
        kernels.sample_lists(a, draw_pick, query[:n], mix_cdf, branch_cdf0, n_eff, tops, orders, n_queries, m, got)
        want = _lists_by_shuffle_top(b, draw_pick, query[:n], mix_cdf, branch_cdf0, n_eff, tops, orders, n_queries,
                                     m, k)
        np.testing.assert_array_equal(got, want)
        assert a.bit_generator.state == b.bit_generator.state
        if n == 3000:  # every slot filled; randomised rows narrower than k next to wider ones
            assert (got >= 0).all()
            shuffled = (got != tops[query[:n]]).any(axis=1) if not draw_pick else np.ones(n, bool)
            assert k == 1 or (shuffled & (n_eff[0, query[:n]] < k)).any()


def _single_eps(epsilon: float, n: int, k: int = 5, queries: int = 40, m: int = 24, candidates: int = 19):
    from simulations.policies import build_policy

    scores = np.random.default_rng(int(epsilon * 100) + n).normal(size=(queries, m))
    scores[:, candidates:] = -np.inf
    return build_policy({"policy": "epsilon_greedy", "epsilon": epsilon, "n": n}, scores, k)


@pytest.mark.parametrize(("epsilon", "n", "k"), [(0.2, 20, 5), (0.5, 3, 5), (0.05, 19, 1), (0.9, 2, 8),
                                                  (0.3, 16, 16), (0.7, 7, 3)])
def test_single_epsilon_greedy_compiled_draw_equals_numpy_draw(monkeypatch, epsilon, n, k):
    from simulations.policies.epsilon_greedy import StackedEpsilonGreedy
    from simulations.policies.mixture import MixturePolicy

    policy = _single_eps(epsilon, n, k)
    assert isinstance(policy.own_stack(), StackedEpsilonGreedy)
    q = np.random.default_rng(7).integers(0, policy.Q, 5000)
    for size in (5000, 257, 1, 0):
        a, b = np.random.default_rng(size), np.random.default_rng(size)
        got = policy.sample(q[:size], a)
        want = MixturePolicy._sample(policy, q[:size], b)  # the NumPy draw (the stack is not used by it)
        assert got.dtype == np.int64 and got.shape == (size, k)
        np.testing.assert_array_equal(got, want)
        assert a.bit_generator.state == b.bit_generator.state
    assert (got >= 0).all()
    # the switch: with the compiled draws off, the kernel is not called
    from simulations.policies import kernels

    monkeypatch.setattr(StackedEpsilonGreedy, "compiled", False)
    monkeypatch.setattr(kernels, "sample_lists", None)
    policy.sample(q, np.random.default_rng(0))


def test_single_policy_stack_reads_the_policy_tables_without_copies():
    """A single policy's stack reads the policy's own (Q, m) rank and order tables (views, not copies: two copies
    would double the logger's memory on large worlds); a mixture's stack joins its components' tables."""
    policy = _single_eps(0.2, 20)
    stack = policy.own_stack()
    assert np.shares_memory(stack.rank_of, policy.rank_of) and np.shares_memory(stack._rank_of, policy.rank_of)
    assert np.shares_memory(stack.orders, policy.components[1].order)
    np.testing.assert_array_equal(stack.rank_of, policy.rank_of.ravel())
    np.testing.assert_array_equal(stack.orders, policy.components[1].order.ravel())
    mixture = _eps_mixture(True, 10)
    joined = mixture._stacked()
    first, second = mixture.components
    np.testing.assert_array_equal(joined.rank_of, np.concatenate([first.rank_of.ravel(), second.rank_of.ravel()]))
    np.testing.assert_array_equal(joined.orders, np.concatenate([first.components[1].order.ravel(),
                                                                 second.components[1].order.ravel()]))


def test_single_epsilon_greedy_without_a_stack_draws_by_numpy():
    from simulations.policies.mixture import MixturePolicy

    for policy in (_single_eps(0.0, 5), _single_eps(1.0, 5), _single_eps(0.2, 5, candidates=3)):
        assert policy.own_stack() is None
        q = np.random.default_rng(1).integers(0, policy.Q, 300)
        a, b = np.random.default_rng(2), np.random.default_rng(2)
        np.testing.assert_array_equal(policy.sample(q, a), MixturePolicy._sample(policy, q, b))
        assert a.bit_generator.state == b.bit_generator.state


def test_mixture_of_epsilon_greedy_and_another_policy_samples_its_components_compiled(monkeypatch):
    """A mixture the stack does not serve (a Plackett-Luce component) samples its epsilon-greedy component by the
    compiled draw: the same lists and generator state as with the compiled draws off."""
    from simulations.policies import build_policy, kernels
    from simulations.policies.epsilon_greedy import StackedEpsilonGreedy

    scores = np.random.default_rng(3).normal(size=(30, 12))
    policy = build_policy({"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 8, "weight": 0.6},
        {"policy": "plackett_luce", "temperature": 1.0, "weight": 0.4}]}, scores, 4)
    assert policy._stacked() is None
    q = np.random.default_rng(4).integers(0, 30, 3000)
    calls = []
    real = kernels.sample_lists
    monkeypatch.setattr(kernels, "sample_lists", lambda *a: (calls.append(1), real(*a))[1])
    a, b = np.random.default_rng(6), np.random.default_rng(6)
    got = policy.sample(q, a)
    assert calls == [1]
    monkeypatch.setattr(StackedEpsilonGreedy, "compiled", False)
    want = policy.sample(q, b)
    assert calls == [1]
    np.testing.assert_array_equal(got, want)
    assert a.bit_generator.state == b.bit_generator.state


# ------------------------------------------------------------------------------------------------ propensities
def _numpy_logging(policy, q, shown, lists):
    """The design's NumPy path: match, running AND, known_list_propensities(sampled=True), stacked_indicators."""
    from simulations.designs.counterfactual.fused import stacked_indicators
    from simulations.designs.counterfactual.serving import known_list_propensities, stack_known

    known = [(t, policy.propensities(np.arange(policy.Q), t)) for t in lists]
    known_lists = np.stack(lists)
    same = known_lists.take(q, axis=1) == shown
    runs = same.copy()
    for j in range(1, runs.shape[2]):
        runs[:, :, j] &= runs[:, :, j - 1]
    table = stack_known(known)
    p = known_list_propensities(policy, q, shown, policy.m, known, [r[:, -1] for r in runs], table, sampled=True)
    return same, runs, p, stacked_indicators(same, runs), known_lists, table


def _compiled_logging(policy, q, shown, known_lists, table):
    from simulations.policies import kernels

    st = policy._stacked()
    return kernels.logged_propensities(
        q, shown, known_lists, table.list, np.ascontiguousarray(table.prefix), np.ascontiguousarray(table.item),
        st.rank_of, st.n_eff, st._w_det, st._w_rt, st.det_tab, st.rt_tab, st._weights, st.m, st.Q)


@pytest.mark.parametrize("which", range(6))
@pytest.mark.parametrize("same_targets", [False, True])
def test_logged_propensities_equal_the_numpy_path(which, same_targets):
    policy = _policies()[which]
    q = np.random.default_rng(7 + which).integers(0, policy.Q, 5000).astype(np.int64)
    shown = policy.sample(q, np.random.default_rng(8))
    lists = [np.asarray(c.components[0].order[:, : policy.k], dtype=np.int64) for c in policy.components[:2]]
    if same_targets:  # both targets the first ranker's lists on half the queries: the first target wins there
        lists[1] = lists[1].copy()
        lists[1][::2] = lists[0][::2]
    same, runs, p, tp, known_lists, table = _numpy_logging(policy, q, shown, lists)
    got = _compiled_logging(policy, q, shown, known_lists, table)
    np.testing.assert_array_equal(got[0], same)
    np.testing.assert_array_equal(got[1], runs)
    for g, w in zip(got[2:], (p.list, p.prefix, p.item, tp.list, tp.prefix, tp.item)):
        assert g.dtype == np.float64 and g.shape == np.shape(w)
        np.testing.assert_array_equal(g, w)
        assert np.array_equal(np.signbit(g), np.signbit(w))
    matched = runs[:, :, -1].any(axis=0)
    assert 0 < matched.mean() < 1  # both the table rows and computed rows are exercised
    if which == 1:  # documents B's component cannot show: its validity masks ran on some rows
        assert (np.asarray(policy.components[1].propensities(q, shown).list) == 0).any()


# ------------------------------------------------------------------------------------------------ the design
def _design_run(compiled: bool, batches: int = 4, fused_step: bool = False):
    from simulations.config import load_config
    from simulations.designs.counterfactual import CounterfactualDesign
    from simulations.designs.counterfactual.fused import FusedTerms
    from simulations.policies.epsilon_greedy import StackedEpsilonGreedy
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    cfg = load_config(REPO / "configs" / "counterfactual.yaml")
    world = build_world(cfg, world_seed(cfg.seed))
    users = UserModels.from_config(cfg.users)
    old = CounterfactualDesign.compiled, StackedEpsilonGreedy.compiled, FusedTerms.compiled
    CounterfactualDesign.compiled = StackedEpsilonGreedy.compiled = FusedTerms.compiled = compiled
    # the per-batch kernels of the general path unless fused_step (the one-pass step: test_counterfactual_step.py)
    old_step, CounterfactualDesign.fused_step = CounterfactualDesign.fused_step, fused_step
    try:
        traffic, designs = build_replicate(cfg, world, users, replicate_seeds(cfg.seed, 1)[0])
        design = next(d for d in designs if isinstance(d, CounterfactualDesign) and not d.aa)
        design.last_day = batches
        for day in range(batches):
            design.process(traffic.batch(24 * day, 24))
            design.checkpoint(day + 1)
        return design
    finally:
        CounterfactualDesign.compiled, StackedEpsilonGreedy.compiled, FusedTerms.compiled = old
        CounterfactualDesign.fused_step = old_step


def test_design_compiled_equals_numpy_design(monkeypatch):
    from simulations.policies import kernels

    calls = []
    for name in ("logged_propensities", "fused_terms", "sample_lists"):
        real = getattr(kernels, name)
        monkeypatch.setattr(kernels, name, lambda *a, real=real, name=name: (calls.append(name), real(*a))[1])
    new = _design_run(True)
    assert calls == ["sample_lists", "logged_propensities", "fused_terms"] * 4
    ref = _design_run(False)
    assert len(calls) == 12
    np.testing.assert_array_equal(new._acc, ref._acc)
    a, b = new.log(), ref.log()
    for f in ("query", "shown", "clicks", "p_list", "p_prefix", "p_item", "user"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert len(new.rows) == len(ref.rows) > 0
    for x, y in zip(new.rows, ref.rows):
        assert repr(x) == repr(y)
    assert new.rng.bit_generator.state == ref.rng.bit_generator.state


def test_kernels_as_plain_python_give_the_same_numbers():
    from test_simulation_kernels import compiled_and_plain

    compiled, plain = compiled_and_plain("""
import json, sys
import numba
import numpy as np
sys.path.insert(0, {tests!r})
from test_policy_kernels import _policies, _numpy_logging, _compiled_logging
policy = _policies()[1]
q = np.random.default_rng(3).integers(0, policy.Q, 700).astype(np.int64)
shown = policy._stacked()._sample_compiled(policy, q, np.random.default_rng(4))
lists = [np.asarray(c.components[0].order[:, :policy.k], dtype=np.int64) for c in policy.components]
*_, known_lists, table = _numpy_logging(policy, q, shown, lists)
got = _compiled_logging(policy, q, shown, known_lists, table)
print(json.dumps({{"jit": not numba.config.DISABLE_JIT, "shown": shown.tolist(),
                  "got": [g.astype(float).tolist() for g in got]}}))
""")
    assert compiled == plain
    assert len(compiled["shown"]) == 700


# ------------------------------------------------------------------------------------------------ fused terms
def _fused_case(k: int, reward_name: str, seed: int):
    from onlineeval.estimators import LoggedData, Propensities, get_estimator, get_reward
    from simulations.designs.counterfactual.fused import FusedTerms
    from simulations.designs.counterfactual.serving import _BatchReward

    rng = np.random.default_rng(seed)
    n, t = 3000, 2
    shown = rng.permutation(np.arange(40))[:k][None, :].repeat(n, axis=0)
    empty = rng.random(n) < 0.3  # trailing empty slots on some rows
    cut = rng.integers(1, k + 1, n)
    shown = np.where(empty[:, None] & (np.arange(k)[None, :] >= cut[:, None]), -1, shown)
    clicks = (rng.random((n, k)) < 0.3) & (shown >= 0)
    p_prefix = rng.random((n, k))
    p_prefix[rng.random((n, k)) < 0.01] = 5e-324  # the least subnormal: inf weights, NaN terms (inf * 0)
    p_item = rng.random((n, k))
    p_item[rng.random((n, k)) < 0.01] = 5e-324
    p_list = p_prefix[:, -1].copy()
    data = LoggedData(np.zeros(n, dtype=np.int64), shown, clicks, p_list=p_list, p_prefix=p_prefix, p_item=p_item)
    tp_prefix = np.where(rng.random((t, n, k)) < 0.5, 1.0, rng.random((t, n, k)))  # indicators and stochastic
    tp_item = np.where(rng.random((t, n, k)) < 0.5, 0.0, rng.random((t, n, k)) * 3)
    target_p = Propensities(tp_prefix[:, :, -1], tp_prefix, tp_item)
    estimators = [(name if not cap else f"clipped_{cap}", get_estimator(name, **({"cap": cap} if cap else {})))
                  for name, cap in (("ips", 0), ("snips", 0), ("rips", 0), ("iips", 0), ("clipped_ips", 5.0),
                                    ("clipped_ips", 0.5), ("adaptive_ips", 0))]
    whole = {label: label == "adaptive_ips" for label, _ in estimators}
    reward = get_reward(reward_name, k)
    fused = FusedTerms.build(estimators, reward, whole, {"adaptive_ips"})
    return fused, data, target_p, _BatchReward(reward)


@pytest.mark.parametrize("k", [1, 2, 5, 7, 8])
@pytest.mark.parametrize("reward_name", ["clicks_per_query", "reciprocal_rank", "abandonment"])
def test_fused_terms_compiled_equal_the_numpy_terms(monkeypatch, k, reward_name):
    from simulations.designs.counterfactual.fused import FusedTerms
    from simulations.policies import kernels

    fused, data, target_p, reward = _fused_case(k, reward_name, k)
    assert k == 1 or not data.all_valid  # empty trailing slots (a list of one slot has none)
    calls = []
    real = kernels.fused_terms
    monkeypatch.setattr(kernels, "fused_terms", lambda *a: (calls.append(1), real(*a))[1])
    with np.errstate(over="ignore", invalid="ignore"):  # k = 8: the NumPy path, which warns of inf and NaN
        got = fused.compute(data, target_p, reward)
    assert len(calls) == (1 if k < 8 else 0)  # 8 slots and more: numpy's pairwise sums, the NumPy path
    monkeypatch.setattr(FusedTerms, "compiled", False)
    with np.errstate(over="ignore", invalid="ignore"):  # the NumPy path warns of the inf and NaN terms
        want = fused.compute(data, target_p, reward)
    assert got[0].keys() == want[0].keys() and len(got[0]) == 6
    pairs = [(a, b) for label in want[0] for a, b in zip(got[0][label], want[0][label])]
    pairs += [(got[1]["adaptive_ips"][b], want[1]["adaptive_ips"][b]) for b in ("independent", "cascade", "standard")]
    for a, b in pairs:
        if b is None:
            assert a is None
            continue
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
        assert np.array_equal(np.signbit(a), np.signbit(b))
    assert any(np.isnan(b).any() for _, b in pairs if b is not None)  # the zero propensities were exercised



def test_fused_terms_divide_by_zero_as_numpy():
    """The kernels use numpy's error model: x / 0.0 is inf or NaN (no ZeroDivisionError), as the NumPy path."""
    from simulations.policies import kernels

    tp_list = np.array([[1.0, 0.0, 1.0]])
    p_list = np.array([0.0, 0.0, 0.5])
    tp_prefix = np.ones((1, 3 * 2))
    p_prefix = np.array([0.0, 1.0, 0.5, 0.0, 1.0, 1.0])
    r = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    big_r = np.array([1.0, 2.0, 0.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        w_want = tp_list / p_list
        pre_want = ((tp_prefix / p_prefix) * r).reshape(1, 3, 2).sum(axis=2)
        ips_want = w_want * big_r
    w, ips, ht, clipped, pre, item, std = kernels.fused_terms(
        tp_list, tp_prefix, tp_prefix, p_list, p_prefix, p_prefix, r, big_r, np.empty(0, dtype=bool), True, False,
        False, np.empty(0), 0.0)
    np.testing.assert_array_equal(w, w_want)
    np.testing.assert_array_equal(ips, ips_want)
    np.testing.assert_array_equal(ht, ips_want)  # no offset: IPS's numerator is SNIPS'
    np.testing.assert_array_equal(pre, pre_want)
    assert np.isinf(w[0, 0]) and np.isnan(w[0, 1]) and item.shape == (0, 3) and clipped.shape == (0, 1, 3)
