"""Exact interleaving truths under user browsing model (UBM) users (:class:`simulations.user_tables.UbmTables`) and
metric users of adaptive metrics, RR, INST, INSQ, ERR (:class:`~simulations.user_tables.RowChain`): the preference
and the null-user Delta of two-ranker team-draft and balanced designs, which took the Monte Carlo before (10,000,000
impressions per run: 21 s of a 30 s run of configs/ab.yaml with UBM users).

Every click pattern of every table row enumerated with the models' own likelihoods, alone and mixed with chain and
independent-click types, on lists with empty slots too: tests/test_truth_interleaving_exact.py and
tests/test_truth_null_exact.py ('ubm' and 'metric_*' cases). Here: the Monte Carlo truths within 4 of their SEs, the
UBM's pattern probabilities in closed form on one and two slots, the runner taking the exact truths, and the UBMs
not taken."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from clickmodels.docparams import ByGrade, ByQueryDoc
from clickmodels.ubm import UBM
from simulations.designs.interleaving import NULL_PREFIX
from simulations.runner import compute_truth, monte_carlo_truths
from simulations.truth_interleaving import interleaving_truth
from simulations.truth_interleaving_exact import EXACT_METHOD, exact_interleaving_truth
from simulations.truth_null_exact import EXACT_NULL_METHOD, exact_null_truth, ubm_pattern_probabilities
from simulations.user_tables import UbmTables, chain_tables
from tests.test_truth_interleaving_exact import MORE, _world
from tests.test_truth_table_draw import _mapping


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


def _against_monte_carlo(method: str, types: list[dict], null_types: list[dict]) -> None:
    """The exact preference under ``types`` (lists of 6) and the exact null-user Delta under ``null_types`` (12
    queries: balanced interleaving's null bias large) within 4 SEs of 2,000,000 Monte Carlo impressions each."""
    mapping = _mapping(method, ("nav",), depth=6)
    mapping["users"]["types"] = types
    mapping["analysis"]["truth_impressions"] = 2_000_000
    config, world, users = _world(mapping)
    (exact,) = exact_interleaving_truth(config, config.designs[0], world, users)
    (mc,) = interleaving_truth(config, config.designs[0], world, users, False)
    assert exact.method == EXACT_METHOD and abs(exact.value) > 10 * mc.se
    assert abs(mc.value - exact.value) < 4 * mc.se, (mc.value, exact.value, mc.se)
    mapping["users"]["types"] = null_types
    mapping["collection"]["n_queries"] = 12
    config, world, users = _world(mapping)
    (exact,) = exact_null_truth(config, config.designs[0], world, users)
    (mc,) = interleaving_truth(config, config.designs[0], world, users, null=True)
    assert exact.method == EXACT_NULL_METHOD and exact.metric == NULL_PREFIX + "delta_ab"
    assert abs(exact.value - mc.value) <= 4 * mc.se, (exact.value, mc.value, mc.se)
    if method == "team_draft":
        assert abs(exact.value) < 1e-15  # unbiased under the null user by symmetry
    else:
        assert abs(exact.value) > 8 * mc.se  # balanced interleaving's bias, well beyond the Monte Carlo's error


NAV = {"name": "nav", "share": 0.4, "click_model": {"name": "cascade", "preset": "navigational"}}


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_exact_truths_are_within_4_monte_carlo_ses(method: str) -> None:
    """UBM users: the preference with cascade users beside them, the null Delta under UBM users alone."""
    _against_monte_carlo(method, [{"name": "ubm", "share": 0.6, "click_model": MORE["ubm"]}, NAV],
                         [{"name": "ubm", "share": 1.0, "click_model": MORE["ubm"]}])


@pytest.mark.parametrize("model", ["ubm", "metric_inst"])
def test_compute_truth_runs_no_monte_carlo_for_these_users(model: str) -> None:
    mapping = _mapping("balanced", ("nav",), depth=6)
    mapping["users"]["types"][0]["click_model"] = MORE[model]
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


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_metric_users_exact_truths_are_within_4_monte_carlo_ses(method: str) -> None:
    """INST and ERR metric users beside cascade users for the preference, INST users alone for the null Delta."""
    _against_monte_carlo(method, [{"name": "inst", "share": 0.3, "click_model": MORE["metric_inst"]},
                                  {"name": "err", "share": 0.3, "click_model": MORE["metric_err"]}, NAV],
                         [{"name": "inst", "share": 1.0, "click_model": MORE["metric_inst"]}])
