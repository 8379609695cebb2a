"""The exact null-user Delta of two-ranker team-draft and balanced designs (:mod:`simulations.truth_null_exact`).

References: every table row, other query and user type with every click pattern enumerated, each pattern's
probability from the click model's own likelihood (:meth:`clickmodels.base.ClickModel.log_likelihood`) on A's
grades of the other query at the row's filled slots and its outcome from the design's tested outcome
(:meth:`simulations.designs.interleaving.DrawTable.outcome`); the Monte Carlo null truth (within 4 of its SEs); and
the null check's rules on an exact value."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulations.analysis_null import NULL_EXACT_ZERO, null_check
from simulations.designs.interleaving import NULL_PREFIX, draw_table, shared_interleaver
from simulations.runner import Truth
from simulations.truth_interleaving import interleaving_truth
from simulations.truth_null_exact import (
    EXACT_NULL_METHOD,
    exact_null_parts,
    exact_null_truth,
    pattern_probabilities,
)
from tests.test_truth_interleaving_exact import _world, trec_world, typed_world
from tests.test_truth_table_draw import _mapping


def _enumerated(config, world, users):  # noqa: ANN001, ANN202
    """Per query, the null user's E[o / 2] and P(a click) by brute force (module docstring)."""
    design = config.designs[0]
    lists = [world.rankings[r] for r in design.rankers]
    table = draw_table(shared_interleaver(design.method, {}), lists, world.labels, world.depth)
    rows, k = table.grades.shape
    patterns = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(bool)
    valid = np.ones((rows, k), bool) if table.valid is None else table.valid
    other = world.ranked_labels("A").astype(np.int64)
    f = world.frequency / world.frequency.sum()
    e, p_click = np.zeros(rows), np.zeros(rows)
    for row in range(rows):
        labels = np.where(valid[row][None, :], other, -1)  # (Q', k): A's grades of each other query
        lab = np.repeat(labels, patterns.shape[0], axis=0)
        clicks = np.tile(patterns, (labels.shape[0], 1))
        possible = ~(clicks & (lab < 0)).any(axis=1)
        outcome = table.outcome(np.full(clicks.shape[0], row), clicks).astype(np.float64)
        for share, model in zip(users.shares, users.models, strict=True):
            prob = np.zeros(clicks.shape[0])
            prob[possible] = np.exp(model.log_likelihood(lab[possible], clicks[possible]))
            prob = prob.reshape(labels.shape[0], -1)
            assert np.allclose(prob.sum(axis=1), 1.0, atol=1e-12)
            e[row] += share * float(f @ (prob * outcome.reshape(labels.shape[0], -1)).sum(axis=1))
            p_click[row] += share * float(f @ (1.0 - prob[:, 0]))
    same = (lists[0] == lists[1]).all(axis=1)
    num = np.where(same, 0.0, e.reshape(-1, table.combos).mean(axis=1) / 2)
    return num, p_click.reshape(-1, table.combos).mean(axis=1)


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
@pytest.mark.parametrize("types", [("nav", "inf"), ("pbm", "dbn"), ("dcm", "sdbn", "rctr"), ("ubm",), ("ubm", "dbn"),
                                   ("metric_inst", "metric_err"), ("rbp6", "pbm")])
def test_per_query_parts_are_the_enumerations(method: str, types: tuple[str, ...]) -> None:
    config, world, users = typed_world(method, types, 5, 12)
    want_num, want_den = _enumerated(config, world, users)
    got_num, got_den = exact_null_parts(config, config.designs[0], world, users)
    np.testing.assert_allclose(got_num, want_num, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got_den, want_den, rtol=0, atol=1e-13)
    if method == "balanced":
        assert np.abs(want_num).max() > 1e-3  # balanced interleaving's bias under the null user: not all 0


@pytest.mark.parametrize("second", ["pbm", "ubm", "metric_inst", "metric_err"])
@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_rows_with_empty_slots_are_the_enumerations(method: str, second: str, tmp_path: Path) -> None:
    config, world, users, _ = trec_world(tmp_path, method, second)
    want_num, want_den = _enumerated(config, world, users)
    got_num, got_den = exact_null_parts(config, config.designs[0], world, users)
    np.testing.assert_allclose(got_num, want_num, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got_den, want_den, rtol=0, atol=1e-13)


def test_pattern_probabilities_sum_to_one_and_end_after_the_last_click() -> None:
    rng = np.random.default_rng(3)
    a, c, s = rng.random((3, 7, 4))
    p = pattern_probabilities(a, c, s)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    # one slot: click with a, else not
    p1 = pattern_probabilities(a[:, :1], c[:, :1], s[:, :1])
    np.testing.assert_allclose(p1, np.column_stack([1 - a[:, 0], a[:, 0]]), rtol=0, atol=1e-15)
    # two slots, pattern 'skip then click': (1 - a0) s0 a1
    p2 = pattern_probabilities(a[:, :2], c[:, :2], s[:, :2])
    np.testing.assert_allclose(p2[:, 2], (1 - a[:, 0]) * s[:, 0] * a[:, 1], rtol=1e-14)


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_the_exact_null_delta_is_within_4_monte_carlo_ses(method: str) -> None:
    mapping = _mapping(method, ("nav", "pbm", "dbn"), depth=5)
    mapping["collection"]["n_queries"] = 12  # a world where balanced interleaving's null bias is large
    mapping["analysis"]["truth_impressions"] = 2_000_000
    config, world, users = _world(mapping)
    (exact,) = exact_null_truth(config, config.designs[0], world, users)
    (mc,) = interleaving_truth(config, config.designs[0], world, users, null=True)
    assert exact.metric == mc.metric == NULL_PREFIX + "delta_ab" and exact.method == EXACT_NULL_METHOD
    assert abs(exact.value - mc.value) <= 4 * mc.se, (exact.value, mc.value, mc.se)
    if method == "team_draft":
        assert abs(exact.value) < 1e-15  # unbiased under the null user by symmetry
    else:
        assert abs(exact.value) > 8 * mc.se  # balanced interleaving's bias, well beyond the Monte Carlo's error


def test_the_null_check_on_an_exact_value() -> None:
    c = pd.DataFrame({"day": [1, 2], "mean_se": [0.004, 0.003]})
    zero = null_check(Truth("td", "null:delta_ab", 0.5 * NULL_EXACT_ZERO, 0.0, EXACT_NULL_METHOD), c, 0.05, 100)
    assert zero["exact"] and zero["delta"] == 0.0 and zero["z"] == 0.0 and not zero["biased"]
    assert zero["detectable_bias"] == zero["detectable_bias_80"] == 0.0 and zero["pvalue"] == 1.0
    bias = null_check(Truth("b", "null:delta_ab", 2e-9, 0.0, EXACT_NULL_METHOD), c, 0.05, 100)
    assert bias["exact"] and bias["z"] == math.inf and bias["biased"] and bias["bias_rules"] == ["null_delta"]
    # a Monte Carlo null Delta keeps its 4-SE rule (an SE of 0 there is not 'exact')
    mc = null_check(Truth("b", "null:delta_ab", 2e-9, 1e-3, "monte_carlo(n=10)"), c, 0.05, 100)
    assert not mc["exact"] and not mc["biased"]


def test_report_lines_of_an_exact_null_check() -> None:
    from simulations.report_null import null_bias_evidence, null_detects_text, null_unflagged_verdict

    c = pd.DataFrame({"day": [1], "mean_se": [0.003]})
    zero = null_check(Truth("td", "null:delta_ab", 0.0, 0.0, EXACT_NULL_METHOD), c, 0.05, 100)
    assert null_unflagged_verdict(zero) == "no bias (exact null Delta 0)"
    assert null_detects_text(zero, 0.01) == "any |bias| (the null Delta is exact)"
    bias = null_check(Truth("b", "null:delta_ab", 0.00362, 0.0, EXACT_NULL_METHOD), c, 0.05, 100)
    assert null_bias_evidence(bias) == "exact null Delta +0.00362"
    assert null_detects_text(bias, -0.0101) == "any |bias| (the null Delta is exact; its +0.00362 is 36% of the effect)"
    assert null_detects_text(bias, None) == "any |bias| (the null Delta is exact)"
