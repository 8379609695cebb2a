"""The metric-user utility reward (``utility:<metric>``, #8's "the online metric to estimate: ... the metric-user
utility"): clicks weighted by an offline metric's C/W/L weights. The weights against their closed forms (P@k 1/k,
RBP (1-p) p^(j-1), DCG's discount normalised over the k slots); metrics without a static C/W/L user refused; the
slot-level estimators unbiased for it on the suite's PBM world (exact truth from the click model), IIPS biased under
cascade clicks (its assumption broken), and `onlineeval estimate --metric utility:...` the library's numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onlineeval.errors import ConfigError
from onlineeval.estimators import get_estimator, get_reward
from onlineeval.estimators.exact_worlds import check_world, sample_log


def test_weights_are_the_metrics_cwl_weights_in_closed_form() -> None:
    np.testing.assert_allclose(get_reward("utility:P@4", 6).weights, [0.25] * 4 + [0, 0], atol=1e-15)
    np.testing.assert_allclose(get_reward("utility:RBP(p=0.8)", 5).weights, [0.2 * 0.8 ** j for j in range(5)],
                               rtol=1e-12)
    disc = 1 / np.log2(np.arange(2, 7))
    np.testing.assert_allclose(get_reward("utility:nDCG@5", 5).weights, disc / disc.sum(), rtol=1e-12)
    r = get_reward("utility:RBP(p=0.5)", 3)
    assert r.kind == "additive" and r.offset == 0 and r.name == "utility:RBP(p=0.5)"
    np.testing.assert_allclose(r.value(np.array([[1, 0, 1], [0, 0, 0]], dtype=bool)), [0.5 + 0.125, 0.0])


@pytest.mark.parametrize("metric, message", [
    ("RR", "depend on the grades"), ("INST(T=2)", "depend on the grades"), ("AP", "no static C/W/L user"),
    ("ERR@5", "no static C/W/L user"), ("nope@3", "unknown metric"),
])
def test_metrics_without_a_click_utility_are_refused(metric: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        get_reward(f"utility:{metric}", 5)


@pytest.mark.parametrize("family, name, unbiased", [
    ("pbm", "iips", True), ("pbm", "rips", True), ("pbm", "pbm_ips", True), ("pbm", "ips", True),
    ("cascade", "rips", True), ("cascade", "iips", False),
])
def test_estimators_on_the_utility_reward(family: str, name: str, unbiased: bool) -> None:
    """Mean of 40 logs of 5,000 impressions against the exact truth (click probabilities from the model): within 4
    standard errors where the estimator's assumption holds; beyond 8 where it is broken."""
    world = check_world(family)
    reward = get_reward("utility:RBP(p=0.6)", world.k)
    est = list(get_estimator(name).check_instances(world))[0]
    truth = world.truth(0, reward)
    log = sample_log(world, 40 * 5000, np.random.default_rng(11))
    values = np.array([est.estimate(log.take(np.arange(r * 5000, (r + 1) * 5000)), world.targets[0], reward).value
                       for r in range(40)])
    z = (values.mean() - truth) / (values.std(ddof=1) / math.sqrt(values.size))
    assert (abs(z) <= 4) if unbiased else (abs(z) > 8), (values.mean(), truth, z)


def test_estimate_command_takes_the_utility_metric(tmp_path) -> None:
    import json

    from estimate_cli_world import json_out

    world = check_world("pbm")
    log = sample_log(world, 3000, np.random.default_rng(3))
    path = tmp_path / "log.jsonl"
    docs = lambda q, row: [f"q{q}d{d}" for d in row]  # noqa: E731
    with path.open("w") as f:
        for i in range(log.query.size):
            q = int(log.query[i])
            f.write(json.dumps({"query": f"q{q}", "user": f"u{int(log.user[i])}", "shown": docs(q, log.shown[i]),
                                "clicks": [int(c) for c in log.clicks[i]],
                                "propensities": {"list": float(log.p_list[i]), "item": log.p_item[i].tolist()}})
                    + "\n")
    run = tmp_path / "T.run"
    ranks = world.targets[0].rankings(np.arange(world.n_queries))
    run.write_text("".join(f"q{q} Q0 q{q}d{d} {j + 1} {10 - j} T\n" for q in range(world.n_queries)
                           for j, d in enumerate(ranks[q])))
    doc = json_out("--log", str(path), "--target", str(run), "--estimator", "iips", "--metric", "utility:P@2")
    reward = get_reward("utility:P@2", world.k)
    lib = get_estimator("iips").estimate(log, world.targets[0], reward)
    assert doc["results"][0]["estimate"] == pytest.approx(lib.value, rel=1e-12)
    assert doc["conventions"]["metric"] == "utility:P@2" and "utility:P@2" in doc["conventions"]["reward"]
