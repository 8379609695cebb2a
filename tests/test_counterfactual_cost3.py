"""Issue 8, round 3: the counterfactual design's cost, against the implementations replaced.

- the users' one-pass click sampler on independent-click types (PBM, DCTR, RCTR, random clicks),
  alone and mixed with grade chains, against each type's model sampling its own rows (the
  previous implementation, kept here as reference): the same clicks and the same generator state.
"""

from __future__ import annotations

import numpy as np
import pytest

import clickmodels
from clickmodels.kernels import BLOCK
from onlineeval.errors import InputError
from simulations.users import UserModels

PBM = {"name": "pbm", "preset": "ai2018"}
INDEPENDENT = [
    PBM,
    {"name": "pbm", "examination": [0.9, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05], "click": [0.05, 0.2, 0.4, 0.8, 0.95]},
    {"name": "dctr", "click": [0.02, 0.1, 0.3, 0.5, 0.7]},
    {"name": "rctr", "p": [0.4, 0.3, 0.2, 0.15, 0.1, 0.08, 0.05]},
    {"name": "random", "p": 0.3},
]
CHAINS = [{"name": "cascade", "preset": "navigational"}, clickmodels.DBN.example_spec, clickmodels.DCM.example_spec]


def reference_sample(users: UserModels, labels, user_type, rng):
    """The models' own samplers: each type's model on its own rows (UserModels.sample's fallback)."""
    if len(users.models) == 1:
        return np.asarray(users.models[0].sample(labels, rng).clicks, dtype=bool)
    clicks = np.zeros(labels.shape, dtype=bool)
    for t, model in enumerate(users.models):
        rows = np.flatnonzero(user_type == t)
        if rows.size:
            clicks[rows] = np.asarray(model.sample(labels[rows], rng).clicks, dtype=bool)
    return clicks


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
    # grade tables of different widths (a 3-grade CM with a 5-grade PBM): each type samples its rows
    users = users_of([PBM, {"name": "cm", "click": [0.1, 0.5, 0.9]}])
    labels = np.random.default_rng(1).integers(0, 3, size=(300, 5)).astype(np.int8)
    types = users.draw_types(300, np.random.default_rng(2))
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_array_equal(users.sample(labels, types, g2), reference_sample(users, labels, types, g1))
    assert users._chains[5] is None
    # random clicks alone have no grade limit: no table width, the model's own path
    users = users_of([INDEPENDENT[4]])
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_array_equal(users.sample(labels, types * 0, g2), reference_sample(users, labels, types, g1))
    assert users._chains[5] is None
