"""The direct method on sparse logs: Zipf-distributed queries, most pairs seen a few times, some only below a last
click (``tests/test_dm_dcm_world.py``, ``tests/test_dm_chain_world.py``)."""

from __future__ import annotations

import numpy as np
import pytest


def zipf_query_probs(q_n: int) -> np.ndarray:
    """Query ``q``'s share proportional to ``1 / (q + 1)``."""
    p = 1.0 / np.arange(1, q_n + 1)
    return p / p.sum()


def sparse_estimates(world, alpha: np.ndarray, model: str, rng: np.random.Generator, reps: int = 60,
                     n: int = 4000, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """``(values, ses)`` of ``dm`` with ``model`` fitted on each of ``reps`` logs of ``n`` impressions, clicks by the
    click model ``world``; the target the ideal top ``k`` by ``alpha`` (``(queries, candidates)``), the logger its
    production order (3rd, 1st, 0th, 2nd, 4th best) with 30% of the lists random; clicks per query. Each value is
    asserted equal to the fitted model's own to 1e-12 (the linearisation moves the SE only)."""
    from clickmodels.base import Impressions
    from onlineeval.estimators import DeterministicTarget, LoggedData, get_estimator, get_reward

    q_n, m = alpha.shape
    q_probs = zipf_query_probs(q_n)
    order = np.argsort(-alpha, axis=1)
    target = DeterministicTarget(order[:, :k], "ideal")
    production = order[:, [3, 1, 0, 2, 4]]
    est = get_estimator("dm", model=model)
    vals, ses = np.empty(reps), np.empty(reps)
    for r in range(reps):
        q = rng.choice(q_n, n, p=q_probs)
        shown = production[q].copy()
        rand = rng.random(n) < 0.3
        shown[rand] = np.argsort(rng.random((int(rand.sum()), m)), axis=1)[:, :k]
        data = LoggedData(q, shown, world.sample(Impressions(query=q, docs=shown), rng).clicks,
                          user=rng.integers(0, n // 3, n))
        e = est.estimate(data, target, "clicks_per_query")
        vals[r], ses[r] = e.value, e.se
        model_value = est.predictions(data, target, get_reward("clicks_per_query", k)).target_sums().mean()
        assert e.value == pytest.approx(model_value, rel=1e-12, abs=1e-12)
    return vals, ses
