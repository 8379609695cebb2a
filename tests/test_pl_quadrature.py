"""Plackett-Luce item-position marginals by the exponential race's quadrature
(:mod:`simulations.policies.pl_quadrature`), the default above ``dp_max_states``: against brute-force enumeration
in log space (an independent reference: every top-k permutation's probability, its log-sum-exp per slot), against
the subset dynamic programme, and against the logger's own draws and the Monte Carlo estimate at 300 candidates."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import norm

from onlineeval.errors import ConfigError
from simulations.policies import build_policy
from simulations.policies.pl_quadrature import SUM_TOLERANCE, race_marginals
from simulations.policies.plackett_luce import PlackettLucePolicy


def enumerated(logits: np.ndarray, k: int) -> np.ndarray:
    """Every ordered top-k: the product of softmax ratios over the documents left, in log space."""
    c = logits.size
    out = np.zeros((c, k))
    for perm in itertools.permutations(range(c), k):
        left, lp = list(range(c)), 0.0
        for d in perm:
            lp += logits[d] - np.logaddexp.reduce(logits[left])
            left.remove(d)
        for s, d in enumerate(perm):
            out[d, s] += math.exp(lp)
    return out


@pytest.mark.parametrize("scale", [0.01, 0.5, 3.0, 15.0, 80.0])
def test_quadrature_equals_enumeration_to_1e_11_relative(scale: float) -> None:
    """Random lists of 2-6 candidates (some with tied logits), logits spread up to ~300 units: every marginal
    above 1e-280 within 1e-11 relative error of enumeration (marginals down to 1e-15 and far below at the larger
    spreads)."""
    rng = np.random.default_rng(int(scale * 100))
    worst, smallest = 0.0, 1.0
    for trial in range(12):
        c = int(rng.integers(2, 7))
        k = int(rng.integers(1, c + 1))
        lg = rng.normal(size=c) * scale
        if trial % 4 == 0:
            lg[1] = lg[0]
        exact = enumerated(lg, k)
        got, h = race_marginals(lg, k)
        assert got.shape == (c, k) and h > 0
        m = exact > 1e-280
        worst = max(worst, float((np.abs(got[m] - exact[m]) / exact[m]).max()))
        smallest = min(smallest, float(exact[m].min()))
        np.testing.assert_allclose(got.sum(axis=0), 1.0, atol=SUM_TOLERANCE)
    assert worst < 1e-11, worst
    if scale >= 15:
        assert smallest < 1e-15  # the check reaches tiny marginals, where a Monte Carlo estimate reads 0


def test_quadrature_equals_the_subset_dp_at_20_candidates() -> None:
    """The policy's own two exact routes agree: the subset DP (c = 20, k = 6: 60,460 states, under a raised
    dp_max_states) and the quadrature (dp_max_states 0), to 1e-11 relative, at three temperatures."""
    rng = np.random.default_rng(4)
    scores = rng.normal(size=(3, 20))
    for t in (0.2, 1.0, 5.0):
        dp = PlackettLucePolicy(scores, 6, t, dp_max_states=100_000)
        quad = PlackettLucePolicy(scores, 6, t, dp_max_states=0)
        for q in range(3):
            a, b = dp.table(q), quad.table(q)
            assert "dynamic programme" in a.method and "quadrature" in b.method and a.exact and b.exact
            np.testing.assert_allclose(b.mean, a.mean, rtol=1e-11, atol=0)
            assert not b.se.any() and not b.shown_se.any()


def test_quadrature_at_300_candidates_matches_draws_and_monte_carlo() -> None:
    """300 candidates, k = 10 (far above any DP): each slot sums to 1; the logger's own 40,000 draws match the
    marginals cell by cell within a Bonferroni z (family-wise 0.001); an independent Monte Carlo estimate
    (item_method monte_carlo, 20,000 prefixes) is within a Bonferroni z of its SEs of every cell it resolves
    (family-wise 0.001 over those cells)."""
    rng = np.random.default_rng(9)
    scores = rng.normal(size=(1, 300)) * 1.5
    k, n = 10, 40_000
    pol = PlackettLucePolicy(scores, k)
    marg = pol.item_position_marginals([0])[0]
    assert pol.marginals_exact([0]).all() and "quadrature" in pol.table(0).method
    np.testing.assert_allclose(marg.sum(axis=0), 1.0, atol=1e-10)
    shown = pol.sample(np.zeros(n, dtype=np.int64), np.random.default_rng(10))
    z = float(norm.isf(0.001 / (2 * 300 * k)))
    for j in range(k):
        freq = np.bincount(shown[:, j], minlength=300) / n
        se = np.sqrt(marg[:, j] * (1 - marg[:, j]) / n)
        big = marg[:, j] * n >= 10
        assert np.all(np.abs(freq[big] - marg[big, j]) <= z * se[big]), j
    mc = PlackettLucePolicy(scores, k, dp_max_states=0, item_method="monte_carlo", mc_samples=20_000, mc_seed=2)
    t = mc.table(0)
    assert not t.exact and "Monte Carlo" in t.method
    ok = t.se > 0
    assert ok.sum() > 1000
    z_mc = float(norm.isf(0.001 / (2 * ok.sum())))
    assert np.all(np.abs(t.mean[ok] - marg[ok]) <= z_mc * t.se[ok])


def test_a_rare_slot_of_a_dominant_document_is_positive_and_exact() -> None:
    """The case that refused item estimators on logger logs: a document far above the others, shown below slot 1
    only rarely. The Monte Carlo estimate (2 prefixes) reads 0 there; the quadrature gives enumeration's value."""
    scores = np.array([[12.0, 0.0, 0.0, -1.0]])
    exact = enumerated(scores[0], 2)
    quad = build_policy({"policy": "plackett_luce", "dp_max_states": 0}, scores, 2)
    mc = build_policy({"policy": "plackett_luce", "dp_max_states": 0, "item_method": "monte_carlo", "mc_samples": 2},
                      scores, 2)
    got = quad.item_position_marginals([0])[0]
    assert 0 < exact[0, 1] < 1e-4 and mc.item_position_marginals([0])[0][0, 1] == 0
    np.testing.assert_allclose(got[:4, :2], exact, rtol=1e-11)
    props = quad.propensities([0], [[1, 0]])
    np.testing.assert_allclose(props.item[0], [exact[1, 0], exact[0, 1]], rtol=1e-11)


def test_item_method_is_checked_and_reported() -> None:
    scores = np.zeros((1, 5))
    with pytest.raises(ConfigError, match=r"item_method.*allowed: quadrature, monte_carlo"):
        build_policy({"policy": "plackett_luce", "item_method": "exact"}, scores, 2)
    quad = build_policy({"policy": "plackett_luce"}, scores, 2)
    mc = build_policy({"policy": "plackett_luce", "item_method": "monte_carlo"}, scores, 2)
    assert quad.conventions()["item_method"] == "quadrature" and "exponential race" in quad.conventions()["item"]
    assert not quad.may_be_monte_carlo and mc.may_be_monte_carlo
    assert "Monte Carlo" in mc.conventions()["item"]
    assert mc.with_mc_seed(3).item_method == "monte_carlo"
    with pytest.raises(ValueError, match="finite"):
        race_marginals(np.array([0.0, np.inf]), 1)


def test_compiled_kernel_equals_the_numpy_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled quadrature (pl_kernels.pl_race, node by node) and the NumPy reference (chunks of nodes) sum
    the same terms in another order: equal to 1e-12 relative, at 5 and at 400 candidates (the reference in
    many chunks of nodes)."""
    import simulations.policies.pl_quadrature as pq

    rng = np.random.default_rng(6)
    for c, k, scale in ((5, 3, 10.0), (400, 8, 1.0)):
        lg = rng.normal(size=c) * scale
        fast, h1 = race_marginals(lg, k)
        monkeypatch.setattr(pq, "compiled", False)
        monkeypatch.setattr(pq, "_CHUNK_BYTES", 1 << 20)  # 400 candidates: 16-node chunks
        slow, h2 = race_marginals(lg, k)
        monkeypatch.setattr(pq, "compiled", True)
        assert h1 == h2
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-300)


def test_estimate_on_a_logger_log_names_how_item_propensities_were_computed(tmp_path) -> None:
    """`onlineeval estimate` on a log whose lines name a Plackett-Luce logger above its DP budget (12 candidates,
    top 6, dp_max_states 0): the item estimator runs (no Monte Carlo zero can withhold the item form), its weights
    on slots 1 and 2 are those of the exact subset DP (an independent route: the same policy with a raised
    dp_max_states), and the conventions say how the item propensities were computed."""
    import json

    from estimate_cli_world import json_out

    rng = np.random.default_rng(3)
    docs = [f"d{i}" for i in range(12)]
    scores = dict(zip(docs, rng.normal(size=12).round(3).tolist()))
    spec = {"policy": "plackett_luce", "dp_max_states": 0, "scores": scores}
    pol = PlackettLucePolicy(np.array([[scores[d] for d in docs]]), 6, dp_max_states=0)
    shown = pol.sample(np.zeros(300, dtype=np.int64), np.random.default_rng(4))
    log = tmp_path / "pl.jsonl"
    log.write_text("".join(json.dumps({"query": "q", "user": f"u{i}", "shown": [docs[d] for d in row],
                                       "clicks": [docs[row[0]], docs[row[1]]], "logger": spec}) + "\n"
                           for i, row in enumerate(shown.tolist())))
    run = tmp_path / "T.run"
    run.write_text("".join(f"q Q0 {d} {r + 1} {12 - r} T\n" for r, d in enumerate(docs)))
    doc = json_out("--log", str(log), "--target", str(run), "--estimator", "iips")
    assert "exponential race" in doc["conventions"]["item_propensities"]
    (res,) = doc["results"]
    # IIPS with clicks on slots 1 and 2: a row showing T's document of slot j there adds 1 / P(it at slot j)
    exact = PlackettLucePolicy(np.array([[scores[d] for d in docs]]), 6, dp_max_states=10 ** 6)
    assert "dynamic programme" in exact.table(0).method
    marg = exact.item_position_marginals([0])[0]
    want = sum((shown[:, j] == j).sum() / marg[j, j] for j in (0, 1)) / 300  # T ranks d0, d1, ... by id
    assert res["estimate"] == pytest.approx(want, rel=1e-9)
