"""Metric-derived users (C/W/L): expected utility equals the offline metric; the reverse direction."""

from __future__ import annotations

import numpy as np
import pytest

import clickmodels
from clickmodels import MetricUser, closest_metrics, implied_cwl
from onlineeval.metrics import parse_metric

CLICK = [0.2, 0.4, 0.6, 0.8, 0.95]


def _lists(n: int = 400, k: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=(n, k), p=[0.45, 0.25, 0.15, 0.1, 0.05])
    labels[: n // 10, k - 3 :] = -1  # some short lists
    labels[n // 10 : n // 5] = 0  # some lists with nothing relevant
    # judged: the shown labels plus a few unshown relevant documents (nDCG's ideal)
    judged = np.concatenate([labels, rng.integers(0, 5, size=(n, 3))], axis=1)
    return labels, judged


METRICS = [
    "RBP(p=0.8)",
    "RBP(p=0.5)",
    "RBP(p=0.9)@5",
    "P@5",
    "P@10",
    "P@20",
    "RR",
    "RR@3",
    "DCG@10",
    "DCG@5",
    "nDCG@10",
    "nDCG@3",
    "ERR",
    "ERR@5",
    "INST(T=2)",
    "INSQ(T=1)",
]


def _user(name: str) -> MetricUser:
    model = clickmodels.build({"name": "metric", "metric": name, "click": CLICK})
    assert isinstance(model, MetricUser)
    return model


@pytest.mark.parametrize("name", METRICS)
def test_expected_utility_equals_offline_metric(name: str) -> None:
    labels, judged = _lists()
    user = _user(name)
    metric = user.metric
    want = metric.evaluate_labels(labels, judged)
    got = user.expected_utility(labels, judged)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    assert np.ptp(want) > 0  # the comparison is not vacuous


def test_expected_utility_hand_computed() -> None:
    labels = np.array([[0, 3, 1, 0]])
    # RBP(p=.5), binary relevance (grade >= 1): (1 - .5) (.5 + .25)
    assert _user("RBP(p=0.5)").expected_utility(labels)[0] == pytest.approx(0.5 * (0.5 + 0.25), abs=1e-12)
    # RR: first relevant at rank 2
    assert _user("RR").expected_utility(labels)[0] == pytest.approx(1 / 2, abs=1e-12)
    # ERR with gmax 4: R = (2^g - 1) / 16 -> ranks 2, 3: 7/16 and 1/16
    r2, r3 = 7 / 16, 1 / 16
    assert _user("ERR").expected_utility(labels)[0] == pytest.approx(r2 / 2 + (1 - r2) * r3 / 3, abs=1e-12)
    # DCG@4 (exponential gain): 7 / log2(3) + 1 / log2(4)
    assert _user("DCG@4").expected_utility(labels)[0] == pytest.approx(7 / np.log2(3) + 1 / 2, abs=1e-12)


@pytest.mark.parametrize("name", ["RBP(p=0.8)", "P@5", "RR", "DCG@10", "nDCG@10", "ERR", "INST(T=2)"])
def test_monte_carlo_utility_agrees_within_4_se(name: str) -> None:
    labels, judged = _lists(n=200, seed=1)
    user = _user(name)
    reps = 300
    big, big_j = np.tile(labels, (reps, 1)), np.tile(judged, (reps, 1))
    sample = user.sample(big, np.random.default_rng(7))
    exact = user.expected_utility(labels, judged).mean()
    # from the sampled path (utility accrues on examination)
    u = user.realised_utility(big, sample, big_j)
    assert abs(u.mean() - exact) <= 4 * u.std(ddof=1) / np.sqrt(u.size)
    # from the sampled clicks alone: each click of grade g stands for 1 / click[g] examinations
    weights = user.utility_weights(big, big_j)
    attract = np.asarray(CLICK)[np.maximum(big, 0)]
    v = (sample.clicks * weights / attract).sum(axis=1)
    assert abs(v.mean() - exact) <= 4 * v.std(ddof=1) / np.sqrt(v.size)


def test_metric_user_spec() -> None:
    err = _user("ERR")
    assert err.metric.gmax == 4  # the top grade of the click table
    three = clickmodels.build({"name": "metric", "metric": "ERR", "click": [0.1, 0.5, 0.9]})
    assert three.metric.gmax == 2
    assert str(_user("RBP(p=0.8)").metric) == "RBP(p=0.8)"


def test_implied_cwl_of_rbp_user_is_rbp() -> None:
    labels, _ = _lists(n=50)
    user = clickmodels.build({"name": "rbp", "p": 0.7, "click": CLICK})
    full = labels[labels.min(axis=1) >= 0]
    prof = implied_cwl(user, full)
    np.testing.assert_allclose(prof.continuation, 0.7, rtol=1e-12)
    w = 0.7 ** np.arange(10)
    np.testing.assert_allclose(prof.weight, np.broadcast_to(w / w.sum(), full.shape), rtol=1e-12)
    np.testing.assert_allclose(prof.last.sum(axis=1), 1 - 0.7**10, rtol=1e-12)


def test_implied_cwl_of_cascade_user() -> None:
    model = clickmodels.build({"name": "cascade", "preset": "navigational"})
    labels = np.array([[4, 0, 2, 1]])
    prof = implied_cwl(model, labels)
    click, stop = np.array([0.05, 0.3, 0.5, 0.7, 0.95]), np.array([0.2, 0.3, 0.5, 0.7, 0.9])
    np.testing.assert_allclose(prof.continuation[0], 1 - click[labels[0]] * stop[labels[0]], rtol=1e-12)


def test_closest_metrics() -> None:
    labels, _ = _lists(n=100)
    full = labels[labels.min(axis=1) >= 0]
    best = closest_metrics(clickmodels.build({"name": "rbp", "p": 0.7, "click": CLICK}), full)
    assert best[0].metric == "RBP(p=0.7)" and best[0].distance < 1e-12
    assert best[1].distance > 0.01
    pbm = clickmodels.build({"name": "pbm", "examination": list(0.5 ** np.arange(10)), "click": CLICK})
    assert closest_metrics(pbm, full)[0].metric == "RBP(p=0.5)"
    p3 = clickmodels.build({"name": "metric", "metric": "P@3", "click": CLICK})
    assert closest_metrics(p3, full)[0].metric == "P@3"
    rr = closest_metrics(_user("RR"), full, candidates=["RR", "P@1", parse_metric("RBP(p=0.5)")])
    assert rr[0].metric == "RR" and rr[0].distance < 1e-12


def test_closest_metrics_of_a_model_fitted_per_query_document() -> None:
    from clickmodels import ByQueryDoc, Impressions

    rng = np.random.default_rng(3)
    alpha = ByQueryDoc(np.repeat(np.arange(4), 20), np.tile(np.arange(20), 4), rng.uniform(0.1, 0.9, 80))
    pbm = clickmodels.PBM(0.6 ** np.arange(10), alpha)
    query = rng.integers(0, 4, size=30)
    docs = np.stack([rng.permutation(20)[:10] for _ in range(30)])
    imp = Impressions(query=query, docs=docs)
    best = closest_metrics(pbm, imp)
    assert best[0].metric == "RBP(p=0.6)" and best[0].distance < 1e-12
    prof = implied_cwl(pbm, imp)
    np.testing.assert_allclose(prof.continuation[:, :-1], 0.6, rtol=1e-12)
    np.testing.assert_allclose(prof.continuation[:, -1], 0.0)  # the list ends (PBM has no continuation)
