r"""The direction of the Open Bandit Pipeline's slate OPE quickstart, reproduced independently.

OBP's synthetic-slate quickstart (Saito et al., "Open Bandit Pipeline", NeurIPS 2021
datasets track; ``examples/quickstart/synthetic_slate.ipynb``) logs slates of 3 out of
10 items with a uniformly random policy, draws per-slot binary rewards whose expectation
depends on the item *and the items above it* ("cascade additive" reward structure) and
finds that the independent-IPS estimator (IIPS) is biased while the standard slate IPS
(SIPS, our whole-list ``ips``) and reward-interaction IPS (RIPS) stay close to the
truth. No OBP code is used: the world below is our own.

World: one query, items ``0..9``, 3 slots, uniform random logging (every ordered triple
has probability ``1/720``). The expected reward at slot ``j`` is

.. math::

    q_j(\mathbf s) = \sigma\Big(b_{s_j} + \sum_{i<j} W_{s_i s_j}\Big),

with base logits :math:`b` and interactions :math:`W` in which the five best items
suppress each other (:math:`W = -1.5` between them). Rewards are independent Bernoulli
draws given the slate. The target is a Plackett–Luce policy with scores
:math:`e^{2 b}` (it favours the best items, which then suppress each other). Its exact
value :math:`V(\pi) = \sum_{\mathbf s} \pi(\mathbf s) \sum_j q_j(\mathbf s)` is a sum over
the 720 slates, and so is the exact expectation of IIPS,
:math:`\sum_j \sum_d \pi(s_j = d)\, \mathbb E_\mu[q_j \mid s_j = d]`.
"""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.estimators import LoggedData, get_estimator
from onlineeval.estimators.checks import plackett_luce_policy, uniform_policy

M, K = 10, 3
N = 200_000


def _world() -> tuple[np.ndarray, np.ndarray]:
    base = np.linspace(-1.5, 1.0, M)
    rng = np.random.default_rng(12)
    inter = rng.normal(0.0, 0.3, size=(M, M))
    best = np.argsort(-base)[:5]
    inter[np.ix_(best, best)] = -1.5
    return base, inter


def _slot_means(lists: np.ndarray, base: np.ndarray, inter: np.ndarray) -> np.ndarray:
    """``(n, K)`` expected reward of each slot of each slate."""
    logit = base[lists].copy()
    for j in range(1, K):
        for i in range(j):
            logit[:, j] += inter[lists[:, i], lists[:, j]]
    return 1.0 / (1.0 + np.exp(-logit))


@pytest.fixture(scope="module")
def setting() -> dict[str, object]:
    base, inter = _world()
    logger = uniform_policy(1, M, K)
    target = plackett_luce_policy(np.exp(2.0 * base)[None, :], K, name="plackett_luce_target")
    means_all = _slot_means(target.lists, base, inter)          # (720, K)
    truth = float(target.probs[0] @ means_all.sum(axis=1))
    # exact expectation of IIPS: sum_j sum_d pi(d at j) E_mu[q_j | d at j]
    iips_limit = 0.0
    for j in range(K):
        at = target.lists[:, j]
        mu_cond = np.bincount(at, logger.probs[0] * means_all[:, j], M) / np.bincount(at, logger.probs[0], M)
        pi_item = np.bincount(at, target.probs[0], M)
        iips_limit += float(pi_item @ mu_cond)
    rng = np.random.default_rng(2021)
    query = np.zeros(N, dtype=np.int64)
    shown = logger.sample(query, rng)
    clicks = rng.random((N, K)) < _slot_means(shown, base, inter)
    p = logger.propensities(query, shown)
    log = LoggedData(query, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item, source="obp-like")
    return {"log": log, "target": target, "truth": truth, "iips_limit": iips_limit}


def test_world_makes_iips_biased(setting: dict[str, object]) -> None:
    """The exact IIPS limit differs from the truth by much more than the test's noise."""
    truth, limit = float(setting["truth"]), float(setting["iips_limit"])
    assert limit - truth > 0.1, (limit, truth)


@pytest.mark.parametrize("name", ["ips", "rips"])
def test_sips_and_rips_close_to_truth(setting: dict[str, object], name: str) -> None:
    est = get_estimator(name).estimate(setting["log"], setting["target"], "clicks_per_query")
    truth = float(setting["truth"])
    assert abs(est.value - truth) <= 4 * est.se, (name, est.value, truth, est.se)
    assert est.se < 0.05  # informative at this size


def test_iips_biased(setting: dict[str, object]) -> None:
    est = get_estimator("iips").estimate(setting["log"], setting["target"], "clicks_per_query")
    truth, limit = float(setting["truth"]), float(setting["iips_limit"])
    # lands on its own (wrong) limit, far from the truth
    assert abs(est.value - limit) <= 4 * est.se, (est.value, limit, est.se)
    assert est.value - truth > 4 * est.se, (est.value, truth, est.se)


def test_ordering_of_errors(setting: dict[str, object]) -> None:
    """OBP's headline: IIPS's error is the largest of the three."""
    for name in ("iips", "rips", "ips"):
        truth = float(setting["truth"])
    err = {name: abs(get_estimator(name).estimate(setting["log"], setting["target"], "clicks_per_query").value
                     - truth) for name in ("iips", "rips", "ips")}
    assert err["iips"] > max(err["rips"], err["ips"]), err
