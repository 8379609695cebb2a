"""Coupled click sampling (``UserModels.sample_coupled``, ``_GradeChains.sample_rows``): every row reads its own
uniforms whatever its user type, so two mixtures of the same models with other shares, given the same generator,
click alike on every row whose type stays (the assumption sweep's common random numbers). Checked: the law (click
rates per type and rank against the models' exact probabilities, within 4 SE), the same clicks as the type-by-type
sampler where the two read the same uniforms, row independence across blocks, and the coupling in the sweep's
direct logs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import clickmodels
from clickmodels.kernels import BLOCK
from simulations.users import UserModels

REPO = Path(__file__).resolve().parents[1]
K = 5
SPECS = [{"name": "cascade", "preset": "navigational"}, {"name": "pbm", "preset": "ai2018"},
         {"name": "dcm", "click": [0.1, 0.3, 0.5, 0.7, 0.9], "continuation": [0.6, 0.65, 0.7, 0.75, 0.8]}]


def _users(shares: list[float]) -> UserModels:
    return UserModels([f"t{i}" for i in range(len(SPECS))], shares, [clickmodels.build(s) for s in SPECS],
                      [dict(s) for s in SPECS])


def _labels(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, size=(n, K)).astype(np.int8)
    labels[rng.random(n) < 0.1, -1] = -1  # some lists one slot short
    return labels


def _assert_law(users: UserModels, pattern_seed: int, seed: int, n: int = 60_000) -> np.ndarray:
    """Coupled clicks of ``n`` rows of four fixed lists, types drawn uniformly: each type's click rates per rank and
    list within 4 SE of its model's exact click probabilities. Returns the types drawn."""
    rng = np.random.default_rng(seed)
    pattern = _labels(4, pattern_seed)
    labels = np.repeat(pattern, n // 4, axis=0)
    types = rng.integers(0, len(users.models), size=labels.shape[0]).astype(np.int8)
    clicks = users.sample_coupled(labels, types, rng)
    for t, model in enumerate(users.models):
        exact = np.asarray(model.click_probabilities(pattern), dtype=np.float64)
        for j in range(4):
            rows = (types == t) & (np.arange(labels.shape[0]) // (n // 4) == j)
            rate = clicks[rows].mean(axis=0)
            se = np.sqrt(exact[j] * (1 - exact[j]) / rows.sum())
            assert np.all(np.abs(rate - exact[j]) <= 4 * se + 1e-12), (t, j, rate, exact[j])
    return types


def test_the_law_is_each_types_model() -> None:
    """Click rates per type and rank of fixed lists against each model's exact click probabilities (4 SE)."""
    _assert_law(_users([0.3, 0.3, 0.4]), 1, 5)


def test_one_type_reads_the_uniforms_the_type_by_type_sampler_reads() -> None:
    """With one type and one block, sample() draws rng.random((k, n)); sample_rows on its transpose gives the same
    clicks bit for bit (the same comparisons on the same numbers)."""
    users = UserModels(["nav"], [1.0], [clickmodels.build(SPECS[2])], [dict(SPECS[2])])
    labels = _labels(3000, 2)
    types = np.zeros(3000, dtype=np.int8)
    a = users.sample(labels, types, np.random.default_rng(9))
    u = np.random.default_rng(9).random((K, 3000))
    b = users.chains(K).sample_rows(labels, types, u.T)
    assert np.array_equal(a, b)


def test_each_row_reads_its_own_uniforms_across_blocks_and_types() -> None:
    """A row's clicks depend on its own uniforms and type only: the whole call (two blocks of one type) equals calls
    on subsets, and a mixture with other types on some rows clicks alike on every row whose type stays."""
    n = BLOCK * 2 + 500
    users = _users([0.8, 0.1, 0.1])
    labels = _labels(n, 3)
    rng = np.random.default_rng(4)
    types = users.draw_types(n, rng)
    assert (types == 0).sum() > BLOCK  # type 0's rows span two blocks
    u = rng.random((n, K))
    chains = users.chains(K)
    full = chains.sample_rows(labels, types, u)
    pick = np.sort(rng.choice(n, 700, replace=False))
    assert np.array_equal(chains.sample_rows(labels[pick], types[pick], u[pick]), full[pick])
    other = types.copy()
    flip = rng.random(n) < 0.2
    other[flip] = (other[flip] + 1) % 3
    moved = chains.sample_rows(labels, other, u)
    assert np.array_equal(moved[~flip], full[~flip])
    assert not np.array_equal(moved[flip], full[flip])  # (the other models do click otherwise)
    # the type-by-type sampler shares nothing row by row once a row changes type: most later rows click otherwise
    a = users.sample(labels, types, np.random.default_rng(8))
    b = users.sample(labels, other, np.random.default_rng(8))
    assert (a[~flip] != b[~flip]).any(axis=1).mean() > 0.2


def test_rows_the_chains_refuse_go_to_the_models_own_path() -> None:
    """Labels the chains refuse (a grade the models do not know): sample() serves after the row uniforms' draw,
    with the model's own error."""
    users = UserModels(["c"], [1.0], [clickmodels.build(SPECS[0])], [dict(SPECS[0])])
    labels = np.full((50, K), 9)  # a grade the cascade preset does not know: no chains, the model's own error
    from onlineeval.errors import InputError

    with pytest.raises(InputError) as coupled:
        users.sample_coupled(labels, np.zeros(50, dtype=np.int8), np.random.default_rng(1))
    with pytest.raises(InputError) as plain:
        users.sample(labels, np.zeros(50, dtype=np.int8), np.random.default_rng(1))
    assert str(coupled.value) == str(plain.value)


def test_the_sweeps_direct_logs_are_coupled_across_shares() -> None:
    """The assumption sweep's logs at two shares of the cascade users, from the same seed: the same queries, user
    uniforms and lists, and the same clicks on every impression whose user type stays."""
    from simulations.config import load_config
    from simulations.designs.counterfactual import direct_log, shared_policy
    from simulations.runner import world_seed
    from simulations.world import build_world

    cfg = load_config(REPO / "configs" / "counterfactual.yaml")
    world = build_world(cfg, world_seed(cfg.seed))
    policy = shared_policy(cfg.designs[2].logger, world)
    logs = []
    for share in (0.25, 0.75):
        users = UserModels([t.name for t in cfg.users.types], [1 - share, share],
                           [clickmodels.build(dict(t.click_model)) for t in cfg.users.types],
                           [dict(t.click_model) for t in cfg.users.types])
        logs.append(direct_log(world, users, policy, 20_000, np.random.default_rng(np.random.SeedSequence(3))))
    a, b = logs
    assert np.array_equal(a.query, b.query) and np.array_equal(a.shown, b.shown)
    stay = a.user_type == b.user_type
    assert 0.4 < stay.mean() < 0.6  # about half the users change type between shares 0.25 and 0.75
    assert np.array_equal(a.clicks[stay], b.clicks[stay])


def test_the_sweep_says_when_its_clicks_are_not_coupled() -> None:
    """User types whose click models cannot be coupled (none with grade tables; UBM and INST metric users were the
    examples before they were coupled, below, and types with different numbers of grades too) sample type by type:
    the sweep's label and plot no longer claim that the errors move together, and name those types."""
    import yaml

    from simulations.config import config_from_mapping
    from simulations.designs.counterfactual.sweep import ERROR_LABEL, assumption_sweep
    from simulations.runner import world_seed
    from simulations.world import build_world

    mapping = yaml.safe_load((REPO / "configs" / "counterfactual.yaml").read_text(encoding="utf-8"))
    mapping["analysis"]["assumption_sweep"]["impressions"] = 5_000
    mapping["analysis"]["assumption_sweep"]["values"] = [0.25, 0.75]
    cfg = config_from_mapping(mapping)
    world = build_world(cfg, world_seed(cfg.seed))
    coupled = assumption_sweep(cfg, world)
    assert coupled["coupled"] and coupled["error_label"] == ERROR_LABEL.format(n="5,000")
    # types without grade tables (random clicks, GCTR): no table to lay the rows' uniforms on
    mapping["users"]["types"][0]["click_model"] = {"name": "random", "p": 0.3}
    mapping["users"]["types"][1]["click_model"] = {"name": "gctr", "p": 0.12}
    cfg = config_from_mapping(mapping)
    assert not UserModels.from_config(cfg.users).couples(world.depth)
    sweep = assumption_sweep(cfg, world)
    assert not sweep["coupled"]
    assert "not the same clicks, which the click models of user types 'pbm', 'cascade' cannot couple row by row" \
        in sweep["error_label"]
    assert "move together" not in sweep["error_label"]


UBM_SPEC = {"name": "ubm", "click": [0.1, 0.3, 0.5, 0.7, 0.9],
            "examination": [[0.95], [0.7, 0.9], [0.5, 0.6, 0.85], [0.4, 0.45, 0.6, 0.8], [0.3, 0.35, 0.4, 0.6, 0.8]]}


def _ubm_users(shares: list[float]) -> UserModels:
    specs = [UBM_SPEC, *SPECS[:2]]
    return UserModels(["ubm", "cascade", "pbm"], shares, [clickmodels.build(s) for s in specs],
                      [dict(s) for s in specs])


def test_ubm_types_are_coupled_and_their_law_is_the_ubm() -> None:
    """UBM users (by grade) beside a cascade and a PBM type: coupled (no grade chain, so type by type from the rows'
    own uniforms); each type's click rates per rank of fixed lists within 4 SE of its model's exact probabilities."""
    users = _ubm_users([0.4, 0.3, 0.3])
    assert users.chains(K) is None and users.couples(K)
    _assert_law(users, 6, 15)


def test_one_ubm_type_reads_the_uniforms_its_own_sampler_reads() -> None:
    """One UBM type, fewer rows than a block: its own sampler draws rng.random((k, n)) and compares as the coupled
    rule does, so the transposed uniforms give the same clicks bit for bit."""
    users = UserModels(["ubm"], [1.0], [clickmodels.build(UBM_SPEC)], [dict(UBM_SPEC)])
    labels = _labels(3000, 7)
    types = np.zeros(3000, dtype=np.int8)
    a = users.sample(labels, types, np.random.default_rng(9))
    u = np.random.default_rng(9).random((K, 3000))
    assert np.array_equal(users._sample_by_type(labels, types, u.T), a)


def test_rows_whose_type_stays_click_alike_with_ubm_types() -> None:
    """Two mixtures from the same generator: every row whose type stays clicks alike (UBM, cascade and PBM rows);
    the cascade and PBM rows click exactly as in a population without the UBM type (the same tables)."""
    n = BLOCK + 700
    labels = _labels(n, 8)
    rng = np.random.default_rng(10)
    users = _ubm_users([0.5, 0.25, 0.25])
    types = users.draw_types(n, rng)
    other = types.copy()
    flip = rng.random(n) < 0.3
    other[flip] = (other[flip] + 1) % 3
    a = users.sample_coupled(labels, types, np.random.default_rng(11))
    b = users.sample_coupled(labels, other, np.random.default_rng(11))
    assert np.array_equal(a[~flip], b[~flip])
    assert not np.array_equal(a[flip], b[flip])
    # the chain types' rows: the stacked tables of a chain-only population, on the same row uniforms
    chains_only = UserModels(["x", "cascade", "pbm"], [0.5, 0.25, 0.25],
                             [clickmodels.build(SPECS[0]), *users.models[1:]])
    assert chains_only.chains(K) is not None
    u = np.random.default_rng(11).random((n, K))
    want = chains_only.chains(K).sample_rows(labels, types, u)
    chain_rows = types > 0
    assert np.array_equal(a[chain_rows], want[chain_rows])


def test_the_sweep_with_ubm_users_is_coupled() -> None:
    """configs/counterfactual.yaml's assumption sweep with its PBM type replaced by a UBM: coupled, the errors' label
    says they move together."""
    import yaml

    from simulations.config import config_from_mapping
    from simulations.designs.counterfactual.sweep import ERROR_LABEL, assumption_sweep
    from simulations.runner import world_seed
    from simulations.world import build_world

    mapping = yaml.safe_load((REPO / "configs" / "counterfactual.yaml").read_text(encoding="utf-8"))
    mapping["analysis"]["assumption_sweep"]["impressions"] = 5_000
    mapping["analysis"]["assumption_sweep"]["values"] = [0.25, 0.75]
    mapping["users"]["types"][0]["click_model"] = UBM_SPEC
    cfg = config_from_mapping(mapping)
    world = build_world(cfg, world_seed(cfg.seed))
    assert UserModels.from_config(cfg.users).couples(world.depth)
    sweep = assumption_sweep(cfg, world)
    assert sweep["coupled"] and sweep["error_label"] == ERROR_LABEL.format(n="5,000")


INST_SPEC = {"name": "metric", "metric": "INST(T=2)", "click": [0.1, 0.3, 0.5, 0.7, 0.9]}


def test_metric_users_of_adaptive_metrics_are_coupled() -> None:
    """INST users (a continuation of the row's whole list) beside cascade users: coupled type by type; their click
    rates within 4 SE of the model's exact probabilities; one INST type, fewer rows than a block, bit for bit its own
    sampler's clicks on the same uniforms; rows whose type stays click alike."""
    specs = [INST_SPEC, SPECS[0]]
    users = UserModels(["inst", "cascade"], [0.5, 0.5], [clickmodels.build(s) for s in specs], [dict(s) for s in specs])
    assert users.chains(K) is None and users.couples(K)
    _assert_law(users, 9, 21)
    one = UserModels(["inst"], [1.0], [clickmodels.build(INST_SPEC)], [dict(INST_SPEC)])
    few = _labels(3000, 10)
    zeros = np.zeros(3000, dtype=np.int8)
    u = np.random.default_rng(12).random((K, 3000))
    assert np.array_equal(one._sample_by_type(few, zeros, u.T), one.sample(few, zeros, np.random.default_rng(12)))
    rng = np.random.default_rng(22)
    labels = _labels(BLOCK + 700, 11)
    types = users.draw_types(labels.shape[0], rng)
    other = types.copy()
    flip = rng.random(types.size) < 0.3
    other[flip] = 1 - other[flip]
    a = users.sample_coupled(labels, types, np.random.default_rng(13))
    b = users.sample_coupled(labels, other, np.random.default_rng(13))
    assert np.array_equal(a[~flip], b[~flip]) and not np.array_equal(a[flip], b[flip])


def test_types_with_different_numbers_of_grades_share_the_widest_tables() -> None:
    """A 6-grade RBP user beside a 5-grade cascade user: the stacked tables are 7 wide (the cascade's widened), take
    labels up to the fewest grades (0-4), and sample the same clicks as each model's own sampler on its rows (the
    type-by-type path they replaced for such populations); coupled too."""
    specs = [SPECS[0], {"name": "rbp", "p": 0.8, "click": [0.05, 0.2, 0.4, 0.6, 0.8, 0.95]}]
    users = UserModels(["cascade", "rbp6"], [0.5, 0.5], [clickmodels.build(s) for s in specs], [dict(s) for s in specs])
    chains = users.chains(K)
    assert chains is not None and chains.width == 7 and chains.grades == 5 and users.couples(K)
    labels = _labels(BLOCK + 900, 12)
    types = users.draw_types(labels.shape[0], np.random.default_rng(14))
    fast = users.sample(labels, types, np.random.default_rng(15))
    users._chains[K] = None  # the models' own samplers, each type's rows in turn
    own = users.sample(labels, types, np.random.default_rng(15))
    assert np.array_equal(fast, own)
    users._chains.clear()
    assert not chains.accepts(np.full((2, K), 5))  # a grade the cascade does not know: its own path and error

