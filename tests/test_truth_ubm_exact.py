"""Exact interleaving truths under user browsing model (UBM) users (:class:`simulations.truth_interleaving_exact.
UbmTables`): the preference and the null-user Delta of two-ranker team-draft and balanced designs, which took the
Monte Carlo before (10,000,000 impressions per run: 21 s of a 30 s run of configs/ab.yaml with UBM users).

References as for the other click models: every click pattern of every table row enumerated with the UBM's own
likelihood (:meth:`clickmodels.base.ClickModel.log_likelihood`) and the design's tested outcome, alone and mixed with
chain and independent-click types, on lists with empty slots too; the Monte Carlo truths within 4 of their SEs; the
UBM's pattern probabilities in closed form on one and two slots."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from clickmodels.docparams import ByGrade, ByQueryDoc
from clickmodels.ubm import UBM
from simulations.designs.interleaving import NULL_PREFIX, draw_table, shared_interleaver
from simulations.runner import compute_truth, monte_carlo_truths
from simulations.truth_interleaving import interleaving_truth
from simulations.truth_interleaving_exact import (
    EXACT_METHOD,
    UbmTables,
    chain_tables,
    exact_interleaving_parts,
    exact_interleaving_truth,
)
from simulations.truth_null_exact import EXACT_NULL_METHOD, exact_null_parts, exact_null_truth, ubm_pattern_probabilities
from tests.test_truth_interleaving_exact import MORE, _enumerated, _programmes, _world, typed_world
from tests.test_truth_null_exact import _enumerated as _null_enumerated
from tests.test_truth_table_draw import _mapping, _trec_mapping


def _ubm_world(method: str, types: tuple[str, ...], depth: int, n_queries: int):  # noqa: ANN202
    config, world, users = typed_world(method, types, depth, n_queries)
    assert any(isinstance(t, UbmTables) for t in chain_tables(users, depth))
    return config, world, users


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
@pytest.mark.parametrize("types", [("ubm",), ("ubm", "nav", "pbm")])
def test_each_rows_outcome_and_click_probability_are_the_enumerations(method: str, types: tuple[str, ...]) -> None:
    config, world, users = _ubm_world(method, types, 6, 40)
    table = draw_table(shared_interleaver(method, {}), [world.rankings["A"], world.rankings["B"]], world.labels,
                       world.depth)
    want_e, want_p = _enumerated(table, users)
    got_e, got_p = _programmes(table, users)
    assert np.abs(want_e).max() > 0.05
    np.testing.assert_allclose(got_e, want_e, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got_p, want_p, rtol=0, atol=1e-13)


def _trec_ubm(tmp_path: Path, method: str):  # noqa: ANN202
    mapping = _trec_mapping(tmp_path, method)
    mapping["users"]["types"][1]["click_model"] = {**MORE["ubm"], "click": [0.1, 0.5, 0.9]}
    config, world, users = _world(mapping)
    table = draw_table(shared_interleaver(method, {}), [world.rankings["A"], world.rankings["B"]], world.labels,
                       world.depth)
    assert table.valid is not None and not table.valid.all()
    return config, world, users, table


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_rows_with_empty_slots_are_the_enumerations(method: str, tmp_path: Path) -> None:
    config, world, users, table = _trec_ubm(tmp_path, method)
    want_e, want_p = _enumerated(table, users)
    got_e, got_p = _programmes(table, users)
    np.testing.assert_allclose(got_e, want_e, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got_p, want_p, rtol=0, atol=1e-13)
    want_num, want_den = _null_enumerated(config, world, users)
    got_num, got_den = exact_null_parts(config, config.designs[0], world, users)
    np.testing.assert_allclose(got_num, want_num, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got_den, want_den, rtol=0, atol=1e-13)


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
@pytest.mark.parametrize("types", [("ubm",), ("ubm", "dbn")])
def test_null_parts_are_the_enumerations(method: str, types: tuple[str, ...]) -> None:
    config, world, users = _ubm_world(method, types, 5, 12)
    want_num, want_den = _null_enumerated(config, world, users)
    got_num, got_den = exact_null_parts(config, config.designs[0], world, users)
    np.testing.assert_allclose(got_num, want_num, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got_den, want_den, rtol=0, atol=1e-13)
    if method == "balanced":
        assert np.abs(want_num).max() > 1e-3


def test_pattern_probabilities_in_closed_form() -> None:
    rng = np.random.default_rng(5)
    a = rng.random((6, 3))
    exam = np.tril(rng.random((3, 3)))
    p = ubm_pattern_probabilities(a, exam)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    one = ubm_pattern_probabilities(a[:, :1], exam[:1, :1])
    np.testing.assert_allclose(one, np.column_stack([1 - a[:, 0] * exam[0, 0], a[:, 0] * exam[0, 0]]), rtol=1e-14)
    two = ubm_pattern_probabilities(a[:, :2], exam[:2, :2])
    # bit r = slot r: 'skip, click' (index 2) examines slot 1 with gamma[1, 0]; 'click, click' (3) with gamma[1, 1]
    np.testing.assert_allclose(two[:, 2], (1 - a[:, 0] * exam[0, 0]) * a[:, 1] * exam[1, 0], rtol=1e-14)
    np.testing.assert_allclose(two[:, 3], a[:, 0] * exam[0, 0] * a[:, 1] * exam[1, 1], rtol=1e-14)


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_exact_truths_are_within_4_monte_carlo_ses(method: str) -> None:
    """The preference (a mixture of UBM and cascade users, lists of 6) and the null-user Delta (UBM users alone, 12
    queries: balanced interleaving's null bias large) against 2,000,000 Monte Carlo impressions each."""
    mapping = _mapping(method, ("nav",), depth=6)
    mapping["users"]["types"] = [{"name": "ubm", "share": 0.6, "click_model": MORE["ubm"]},
                                 {"name": "nav", "share": 0.4, "click_model": {"name": "cascade",
                                                                              "preset": "navigational"}}]
    mapping["analysis"]["truth_impressions"] = 2_000_000
    config, world, users = _world(mapping)
    (exact,) = exact_interleaving_truth(config, config.designs[0], world, users)
    (mc,) = interleaving_truth(config, config.designs[0], world, users, False)
    assert exact.method == EXACT_METHOD and abs(exact.value) > 10 * mc.se
    assert abs(mc.value - exact.value) < 4 * mc.se, (mc.value, exact.value, mc.se)
    mapping["users"]["types"] = [{"name": "ubm", "share": 1.0, "click_model": MORE["ubm"]}]
    mapping["collection"]["n_queries"] = 12
    config, world, users = _world(mapping)
    (exact,) = exact_null_truth(config, config.designs[0], world, users)
    (mc,) = interleaving_truth(config, config.designs[0], world, users, null=True)
    assert exact.method == EXACT_NULL_METHOD and exact.metric == NULL_PREFIX + "delta_ab"
    assert abs(exact.value - mc.value) <= 4 * mc.se, (exact.value, mc.value, mc.se)
    if method == "team_draft":
        assert abs(exact.value) < 1e-15
    else:
        assert abs(exact.value) > 8 * mc.se


def test_compute_truth_runs_no_monte_carlo_for_ubm_users() -> None:
    mapping = _mapping("balanced", ("nav",), depth=6)
    mapping["users"]["types"][0]["click_model"] = MORE["ubm"]
    mapping["analysis"]["truth_impressions"] = 20_000
    config, world, users = _world(mapping)
    truths = {(t.design, t.metric): t for t in compute_truth(config, world, users)}
    assert truths[("il", "delta_ab")].method == EXACT_METHOD and truths[("il", "delta_ab")].se == 0.0
    assert truths[("il", "null:delta_ab")].method == EXACT_NULL_METHOD
    assert len(monte_carlo_truths(config)) == 2  # the runs the config could need; none of them is run


def test_ubms_the_programme_does_not_take() -> None:
    """A UBM by (query, document), or one whose examination is shallower than the lists: no tables (the Monte
    Carlo then)."""
    gamma = np.tril(np.full((6, 6), 0.5))
    by_grade = UBM(ByGrade((0.1, 0.5, 0.9)), gamma)
    assert isinstance(chain_tables(SimpleNamespace(models=[by_grade]), 6)[0], UbmTables)
    assert chain_tables(SimpleNamespace(models=[by_grade]), 7) is None  # 6 ranks deep
    by_doc = UBM(ByQueryDoc(np.array([0]), np.array([1]), np.array([0.5])), gamma)
    assert chain_tables(SimpleNamespace(models=[by_doc]), 6) is None
    assert exact_interleaving_parts  # (the parts' entry point the two truths share)
