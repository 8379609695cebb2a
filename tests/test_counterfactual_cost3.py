"""Issue 8, round 3: the counterfactual design's cost, against the implementations replaced.

- the users' one-pass click sampler on independent-click types (PBM, DCTR, RCTR, random clicks),
  alone and mixed with grade chains, against each type's model sampling its own rows (the
  previous implementation, kept here as reference): the same clicks and the same generator state;
- the epsilon-greedy mixture logger's stacked sampler against the component-by-component sampler
  (``MixturePolicy._sample_into``: the same lists and generator state), and the propensities of
  its own draws without the repeat search against the checked propensities (the same bits), also
  through the design's ``known_list_propensities``.
"""

from __future__ import annotations

import numpy as np
import pytest

import clickmodels
from clickmodels.kernels import BLOCK
from onlineeval.errors import InputError
from simulations.users import UserModels
from test_simulation_point_speed import reference_sample  # each type's model on its own rows

PBM = {"name": "pbm", "preset": "ai2018"}
INDEPENDENT = [
    PBM,
    {"name": "pbm", "examination": [0.9, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05], "click": [0.05, 0.2, 0.4, 0.8, 0.95]},
    {"name": "dctr", "click": [0.02, 0.1, 0.3, 0.5, 0.7]},
    {"name": "rctr", "p": [0.4, 0.3, 0.2, 0.15, 0.1, 0.08, 0.05]},
    {"name": "random", "p": 0.3},
]
CHAINS = [{"name": "cascade", "preset": "navigational"}, clickmodels.DBN.example_spec, clickmodels.DCM.example_spec]


def users_of(specs, shares=None):
    models = [clickmodels.build(s) for s in specs]
    shares = np.full(len(models), 1 / len(models)) if shares is None else shares
    return UserModels([f"t{i}" for i in range(len(models))], shares, models)


@pytest.mark.parametrize("specs", [
    [PBM], [INDEPENDENT[2]], [PBM, CHAINS[0]], [CHAINS[0], PBM], INDEPENDENT, [*CHAINS, *INDEPENDENT],
])
@pytest.mark.parametrize("n", [1, 7, 1500, BLOCK, BLOCK + 1, 2 * BLOCK + 3])
@pytest.mark.parametrize("k", [5, 7])
def test_one_pass_clicks_of_independent_types_match_each_model(specs, n, k):
    users = users_of(specs)
    rng = np.random.default_rng(n + k)
    labels = rng.integers(-1, 5, size=(n, k)).astype(np.int8)
    labels[: n // 3, 3:] = -1  # trailing empty slots
    labels[n // 3: n // 2, 0] = -1  # an empty first slot
    user_type = users.draw_types(n, rng)
    g1, g2 = np.random.default_rng(11), np.random.default_rng(11)
    ref = reference_sample(users, labels, user_type, g1)
    got = users.sample(labels, user_type, g2)
    np.testing.assert_array_equal(got, ref)
    assert got.dtype == np.bool_ and got.flags.c_contiguous
    assert g1.bit_generator.state == g2.bit_generator.state
    assert users._chains[k] is not None  # the one-pass sampler ran
    assert not got[labels < 0].any()
    if n > 1000:
        assert 0.05 < got[labels >= 0].mean() < 0.9


def test_one_pass_sampler_uses_the_independent_models_tables():
    # a PBM whose clicks are certain at rank 0 and impossible below: u < e_r a_g read from its table
    pbm = {"name": "pbm", "examination": [1.0, 0.0, 0.0], "click": [1.0] * 5}
    users = users_of([pbm, CHAINS[0]])
    labels = np.zeros((500, 3), dtype=np.int8)
    types = np.zeros(500, dtype=np.int8)
    clicks = users.sample(labels, types, np.random.default_rng(0))
    assert users._chains[3] is not None and users._chains[3].independent == [True, False]
    assert clicks[:, 0].all() and not clicks[:, 1:].any()


def test_independent_types_fall_back_where_the_models_refuse():
    # PBM with 7 ranks cannot show 9 slots: no tables, the model's own error
    users = users_of([INDEPENDENT[1], CHAINS[0]])
    labels = np.zeros((4, 9), dtype=np.int8)
    with pytest.raises(InputError, match="covers only 7 ranks"):
        users.sample(labels, np.array([0, 1, 0, 1], dtype=np.int8), np.random.default_rng(0))
    assert users._chains[9] is None
    # grade tables of different widths (a 3-grade CM with a 5-grade PBM): the tables are the widest's (the CM's
    # widened), they take labels the CM knows (0-2), and they click as each type's model does on its rows
    users = users_of([PBM, {"name": "cm", "click": [0.1, 0.5, 0.9]}])
    labels = np.random.default_rng(1).integers(0, 3, size=(300, 5)).astype(np.int8)
    types = users.draw_types(300, np.random.default_rng(2))
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_array_equal(users.sample(labels, types, g2), reference_sample(users, labels, types, g1))
    assert users._chains[5] is not None and users._chains[5].width == 6 and users._chains[5].grades == 3
    # random clicks alone have no grade limit: no table width, the model's own path
    users = users_of([INDEPENDENT[4]])
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_array_equal(users.sample(labels, types * 0, g2), reference_sample(users, labels, types, g1))
    assert users._chains[5] is None


# ------------------------------------------------------------------ the logger: a mixture of epsilon-greedy policies
def _eps_mixture(candidates_b: bool = False, n_b: int = 10, queries: int = 60, m: int = 20, k: int = 5):
    """An epsilon-greedy mixture around A and B that fills the slots, every query with 17 of
    the ``m`` columns as candidates (the stacked kernels need one candidate count), so
    ``n_eff = min(n, 17)``; ``candidates_b``: B's candidates differ from A's on half the queries."""
    from simulations.policies import build_policy

    rng = np.random.default_rng(5)
    scores = {name: rng.normal(size=(queries, m)) for name in ("A", "B")}
    for s in scores.values():
        s[:, 17:] = -np.inf
    if candidates_b:  # documents A may show but B cannot
        scores["B"][queries // 2:, 17:] = 0.0
        scores["B"][queries // 2:, :3] = -np.inf
    spec = {"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": 0.2, "n": 20, "scores": "A", "weight": 0.8},
        {"policy": "epsilon_greedy", "epsilon": 0.35, "n": n_b, "scores": "B", "weight": 0.2}]}
    return build_policy(spec, scores, k)


def _old_sample(policy, q, rng):
    """The previous MixturePolicy._sample: each component's rows in turn, scattered into the output, each
    epsilon-greedy component sampled by the NumPy code (its compiled sampler off)."""
    from simulations.policies.epsilon_greedy import StackedEpsilonGreedy

    out = np.full((q.size, policy.k), -1, dtype=np.int64)
    old, StackedEpsilonGreedy.compiled = StackedEpsilonGreedy.compiled, False
    try:
        policy._sample_into(q, np.arange(q.size), rng, out)
    finally:
        StackedEpsilonGreedy.compiled = old
    return out


@pytest.mark.parametrize("candidates_b", [False, True])
@pytest.mark.parametrize("n_b", [4, 10, 20])  # 4 < k: the permutation fills only part of the slots
def test_stacked_mixture_sample_equals_the_component_by_component_sample(candidates_b, n_b):
    from simulations.policies.epsilon_greedy import StackedEpsilonGreedy

    policy = _eps_mixture(candidates_b, n_b)
    assert isinstance(policy._stacked(), StackedEpsilonGreedy)
    q = np.random.default_rng(1).integers(0, 60, 7000)
    for n in (7000, 333, 1, 0):
        a, b = np.random.default_rng(n), np.random.default_rng(n)
        got = policy.sample(q[:n], a)
        want = _old_sample(policy, q[:n], b)
        assert got.dtype == np.int64 and got.shape == (n, 5)
        np.testing.assert_array_equal(got, want)
        assert a.bit_generator.state == b.bit_generator.state  # the same draws consumed
    assert (got >= 0).all()


@pytest.mark.parametrize("candidates_b", [False, True])
def test_sampled_propensities_equal_the_checked_propensities(candidates_b):
    from simulations.designs.counterfactual.serving import known_list_propensities

    policy = _eps_mixture(candidates_b)
    q = np.random.default_rng(2).integers(0, 60, 5000)
    shown = policy.sample(q, np.random.default_rng(3))
    want = policy.propensities(q, shown)
    got = policy.sampled_propensities(q, shown)
    for f in ("list", "prefix", "item"):
        np.testing.assert_array_equal(getattr(got, f), getattr(want, f))
    if candidates_b:  # some drawn lists have probability 0 under B's component: the validity masks ran
        assert (np.asarray(policy.components[1].propensities(q, shown).list) == 0).any()
    # the design's path: rows showing a known list from the table, the rest from sampled_propensities
    lists = [np.asarray(c.components[0].order[:, :5]) for c in policy.components]
    known = [(t, policy.propensities(np.arange(60), t)) for t in lists]
    match = [(t[q] == shown).all(axis=1) for t in lists]
    assert 0 < match[0].mean() < 1
    for sampled in (False, True):
        p = known_list_propensities(policy, q, shown, 20, known, match, sampled=sampled)
        for f in ("list", "prefix", "item"):
            np.testing.assert_array_equal(getattr(p, f), getattr(want, f))
