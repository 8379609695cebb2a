"""Fast paths of one simulation point (issue 12) against the implementations they replace.

- :class:`simulations.designs.interleaving.DrawTable` against ``interleaver.interleave`` on the
  same generator (shown lists, teams, input rankings, shown grades and the generator's state after);
- the one-pass click sampler of :meth:`simulations.users.UserModels.sample` against each type's
  model sampling its own rows (the previous implementation, kept here as reference);
- whole replicates with the fast paths against the same replicates with them switched off.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import clickmodels
from onlineeval.errors import InputError
from onlineeval.interleaving import get_interleaver
from simulations.config import config_from_mapping
from simulations.designs import interleaving as il_design
from simulations.designs.interleaving import DrawTable, draw_table
from simulations.runner import replicate_seeds, run_replicate, world_seed
from simulations.users import UserModels
from simulations.world import build_world, shown_labels


def lists_with_edge_cases(rng: np.random.Generator, n_queries: int = 400, depth: int = 10, docs: int = 14):
    """Two ranking matrices with shared prefixes, identical rows, heavy overlap and short lists."""
    a = np.array([rng.permutation(docs)[:depth] for _ in range(n_queries)], dtype=np.int32)
    b = a.copy()
    for row in range(n_queries):
        kind = row % 5
        if kind == 1:  # B swaps two positions below a shared prefix
            i, j = sorted(rng.choice(depth, 2, replace=False))
            b[row, [i, j]] = b[row, [j, i]]
        elif kind == 2:  # B draws its own list from the same few documents
            b[row] = rng.permutation(docs)[:depth]
        elif kind == 3:  # short lists (trailing -1), of different lengths
            a[row, 6:] = -1
            b[row] = rng.permutation(docs)[:depth]
            b[row, 3:] = -1
        elif kind == 4:  # B with a single document
            b[row, 1:] = -1
    labels = rng.integers(0, 5, size=(n_queries, docs)).astype(np.int8)
    return a, b, labels


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
@pytest.mark.parametrize("length", [10, 7, 1, 4, 18])  # 18: 9 coins, keys over two bytes
@pytest.mark.parametrize("same", [False, True])
def test_draw_table_matches_the_interleaver(method, length, same):
    rng = np.random.default_rng(3)
    a, b, labels = lists_with_edge_cases(rng, depth=max(10, length + 2), docs=max(14, length + 6))
    if same:
        b = a
    interleaver = get_interleaver(method)
    table = DrawTable(method, np.stack([a, b]), labels, length)
    for seed, n in [(1, 1), (2, 1500), (5, 40_000)]:  # 40000 > the kernels' block of rows
        q = np.random.default_rng(seed + 100).integers(0, a.shape[0], n)
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        ref = interleaver.interleave([a[q], b[q]], g1, length=length)
        got, grades, key = table.draw(q, g2)
        np.testing.assert_array_equal(got.ranking, ref.ranking)
        np.testing.assert_array_equal(got.team, ref.team)
        np.testing.assert_array_equal(got.rankings, ref.rankings)
        assert got.ranking.dtype == ref.ranking.dtype and got.team.dtype == ref.team.dtype
        np.testing.assert_array_equal(grades, shown_labels(labels, q, ref.ranking))
        assert g1.bit_generator.state == g2.bit_generator.state  # the same draws were made
        # and so the same outcomes whatever the clicks; balanced's outcome from the table's ranks too
        for rate in (0.05, 0.3, 0.9):  # clicks on empty slots included (the interleaver ignores them)
            clicks = np.random.default_rng(seed).random(ref.ranking.shape) < rate
            expected = interleaver.outcome(ref, clicks)
            np.testing.assert_array_equal(interleaver.outcome(got, clicks), expected)
            if method == "balanced":
                fast = table.balanced_outcome(key, got.ranking, clicks)
                assert fast.dtype == expected.dtype
                np.testing.assert_array_equal(fast, expected)
                assert n < 100 or same or 0 < np.count_nonzero(fast) < n


def test_draw_table_only_for_two_ranker_table_methods_and_cached():
    rng = np.random.default_rng(4)
    a, b, labels = lists_with_edge_cases(rng)
    assert draw_table(get_interleaver("team_draft"), [a, b, a], labels, 10) is None  # multileaving
    assert draw_table(get_interleaver("probabilistic"), [a, b], labels, 10) is None
    assert draw_table(get_interleaver("team_draft_multileave"), [a, b], labels, 10) is None
    t1 = draw_table(get_interleaver("team_draft"), [a, b], labels, 10)
    assert t1 is not None and draw_table(get_interleaver("team_draft"), [a, b], labels, 10) is t1
    assert draw_table(get_interleaver("team_draft"), [a, b], labels, 9) is not t1
    assert draw_table(get_interleaver("balanced"), [a, b], labels, 10).method == "balanced"
    # beyond the memory budget: no table (20 slots: 1024 coin patterns per query)
    assert DrawTable.nbytes("team_draft", 20_000, 20) > il_design.DRAW_TABLE_BYTES
    big = np.zeros((20_000, 20), dtype=np.int32)
    assert draw_table(get_interleaver("team_draft"), [big, big], labels, 20) is None


def drive_batches(traffic, designs, on_day_end=None) -> None:
    """A replicate's batches handed to every design in turn, then at each day's end ``on_day_end(day)`` (default:
    every design's checkpoint): :func:`simulations.traffic.run_traffic`'s order without SimPy."""
    step = traffic.batch_hours
    for hour in range(0, traffic.days * 24, step):
        batch = traffic.batch(hour, step)
        for d in designs:
            d.process(batch)
        if (hour + step) % 24 == 0:
            if on_day_end is None:
                for d in designs:
                    d.checkpoint((hour + step) // 24)
            else:
                on_day_end((hour + step) // 24)


def reference_sample(users: UserModels, labels, user_type, rng):
    """The previous UserModels.sample: each type's model on its own rows."""
    if len(users.models) == 1:
        return np.asarray(users.models[0].sample(labels, rng).clicks, dtype=bool)
    clicks = np.zeros(labels.shape, dtype=bool)
    for t, model in enumerate(users.models):
        rows = np.flatnonzero(user_type == t)
        if rows.size:
            clicks[rows] = np.asarray(model.sample(labels[rows], rng).clicks, dtype=bool)
    return clicks


CHAIN_SPECS = [
    {"name": "cascade", "preset": "navigational"},
    {"name": "cascade", "preset": "informational"},
    {"name": "cm", "click": [0.05, 0.3, 0.5, 0.7, 0.95]},
    clickmodels.DCM.example_spec,
    clickmodels.CCM.example_spec,
    clickmodels.DBN.example_spec,
    clickmodels.SDBN.example_spec,
]


@pytest.mark.parametrize("specs", [CHAIN_SPECS[:1], CHAIN_SPECS[:2], CHAIN_SPECS[2:], CHAIN_SPECS])
@pytest.mark.parametrize("n", [1, 1500, 50_000])
def test_one_pass_clicks_match_each_model_on_its_rows(specs, n):
    models = [clickmodels.build(s) for s in specs]
    users = UserModels([f"t{i}" for i in range(len(models))], np.full(len(models), 1 / len(models)), models)
    rng = np.random.default_rng(n)
    labels = rng.integers(-1, 5, size=(n, 10)).astype(np.int8)
    labels[: n // 3, 7:] = -1  # trailing empty slots
    user_type = users.draw_types(n, rng)
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    ref = reference_sample(users, labels, user_type, g1)
    got = users.sample(labels, user_type, g2)
    np.testing.assert_array_equal(got, ref)
    assert g1.bit_generator.state == g2.bit_generator.state
    assert users._chains[10] is not None  # the fast path ran
    assert 0 < got.mean() < 1


def test_clicks_fall_back_to_the_models():
    # a model that is neither a grade chain nor an independent-click table (UBM): each type samples its own rows
    users = UserModels(["nav", "ubm"], [0.5, 0.5], [clickmodels.build(CHAIN_SPECS[0]),
                                                    clickmodels.UBM.example()])
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, size=(2000, 6)).astype(np.int8)
    types = users.draw_types(2000, rng)
    g1, g2 = np.random.default_rng(2), np.random.default_rng(2)
    np.testing.assert_array_equal(users.sample(labels, types, g2), reference_sample(users, labels, types, g1))
    assert users._chains[6] is None
    # labels above the models' grades: the model's own error
    users = UserModels(["nav"], [1.0], [clickmodels.build(CHAIN_SPECS[0])])
    with pytest.raises(InputError, match="above this model's grades"):
        users.sample(np.full((3, 10), 7, dtype=np.int8), np.zeros(3, dtype=np.int8), rng)
    # rows of an unknown type get no clicks, as before
    two = UserModels(["a", "b"], [0.5, 0.5], [clickmodels.build(s) for s in CHAIN_SPECS[:2]])
    types = np.array([0, 1, 5, 1], dtype=np.int8)
    labels = np.full((4, 10), 4, dtype=np.int8)
    g1, g2 = np.random.default_rng(2), np.random.default_rng(2)
    np.testing.assert_array_equal(two.sample(labels, types, g2), reference_sample(two, labels, types, g1))


def point_config(**over):
    base = {
        "seed": 5,
        "replicates": 2,
        "workers": 1,
        "collection": {"type": "synthetic", "n_queries": 300, "candidates": 20},
        "rankers": {"depth": 10, "A": {"noise": 1.0}, "B": {"noise": 0.8}, "others": {"C": {"noise": 1.3}}},
        "users": {
            "population": 800,
            "activity": {"sigma": 1.2},
            "types": [
                {"name": "nav", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
                {"name": "inf", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}},
            ],
        },
        "traffic": {"days": 2, "queries_per_day": 1200, "batch_hours": 6},
        "designs": [
            {"name": "ab", "type": "ab", "analysis": {"sequential": "msprt", "monitoring": "batch"}},
            {"name": "td", "type": "interleaving", "method": "team_draft", "analysis": {"monitoring": "batch"}},
            {"name": "bal", "type": "interleaving", "method": "balanced"},
            {"name": "tdm", "type": "interleaving", "method": "team_draft_multileave", "rankers": ["A", "B", "C"]},
            {"name": "pi", "type": "interleaving", "method": "probabilistic"},
        ],
        "analysis": {"aa": True},
    }
    base.update(over)
    return config_from_mapping(base)


def test_replicates_identical_with_the_fast_paths_switched_off(monkeypatch):
    cfg = point_config()
    world = build_world(cfg, world_seed(cfg.seed))
    seqs = replicate_seeds(cfg.seed, 2)

    def rows(users):
        return pd.DataFrame([r for i, s in enumerate(seqs) for r in run_replicate(cfg, world, users, s, i)])

    fast = rows(UserModels.from_config(cfg.users))
    with monkeypatch.context() as m:
        m.setattr(il_design, "draw_table", lambda *args: None)
        slow_users = UserModels.from_config(cfg.users)
        slow_users._chains = {10: None}
        slow = rows(slow_users)
    assert len(fast) > 100 and fast["estimate"].notna().sum() > 50
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
