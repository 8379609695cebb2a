"""The direct method with an SDBN reward model (fitted by EM, the default) on logs from an SDBN world.

The conformance suite's worlds (onlineeval.estimators.exact_worlds) have PBM, cascade and DCM users; DM with DCM is
checked in tests/test_dm_dcm_world.py. Here the suite's world (4 queries, 5 candidates, 3 slots, its attraction
table, query probabilities, Plackett-Luce logger and targets 'ideal' and 'shuffled') gets SDBN users, sampled by the
test itself: top-down, click with the document's attraction, after a click stop with its satisfaction, after a
skip go on. Exact truths from SDBN's formulas (never simulated): P(E_1) = 1, P(E_{j+1}) = P(E_j) (1 - alpha_j
sigma_j), P(C_j) = P(E_j) alpha_j; the first click has the cascade's probability alpha_j prod_{i<j} (1 - alpha_i).
200 replicate logs of 2,500 impressions (fixed seed), one fit per replicate; tolerance 4 SE of the mean over the
replicates, as the conformance checks. The last-click closed form is shown biased on the same logs (the check has
power).

Measured (these 200 replicates): mean - exact -0.0023 / -0.0007 / -0.0004 / +0.0006 (z -1.1, -1.1, -0.3, +0.9) for
(ideal, clicks per query), (ideal, reciprocal rank), (shuffled, clicks per query), (shuffled, reciprocal rank); the
closed form (method='closed_form') z -490, +21, -101, +44.
"""

from __future__ import annotations

import numpy as np

from onlineeval.estimators import LoggedData, get_estimator
from onlineeval.estimators.checks import Z, _mc_summary, check_world

REPLICATES, SIZE = 200, 2500
SIGMA = np.array([[0.7, 0.2, 0.5, 0.9, 0.4],
                  [0.3, 0.8, 0.6, 0.1, 0.5],
                  [0.9, 0.5, 0.2, 0.6, 0.3],
                  [0.4, 0.6, 0.8, 0.3, 0.7]])
REWARDS = ("clicks_per_query", "reciprocal_rank")


def _truth(world, target, reward: str) -> float:
    total = 0.0
    for q, pq in enumerate(world.query_probs):
        docs = target.lists[q]
        a, s = world.attraction[q, docs], SIGMA[q, docs]
        if reward == "clicks_per_query":
            exam = np.concatenate([[1.0], np.cumprod(1.0 - a * s)[:-1]])
            value = float((exam * a).sum())
        else:
            first = a * np.concatenate([[1.0], np.cumprod(1.0 - a)[:-1]])
            value = float((first / np.arange(1, len(docs) + 1)).sum())
        total += pq * value
    return total / float(world.query_probs.sum())


def _log(world, rng: np.random.Generator) -> LoggedData:
    n = REPLICATES * SIZE
    p = world.query_probs / world.query_probs.sum()
    query = rng.choice(len(p), size=n, p=p).astype(np.int64)
    shown = world.logger.sample(query, rng)
    a, s = world.attraction[query[:, None], shown], SIGMA[query[:, None], shown]
    clicks = np.zeros(shown.shape, dtype=bool)
    going = np.ones(n, dtype=bool)
    for j in range(shown.shape[1]):
        clicks[:, j] = going & (rng.random(n) < a[:, j])
        going &= ~(clicks[:, j] & (rng.random(n) < s[:, j]))
    props = world.logger.propensities(query, shown)
    return LoggedData(query, shown, clicks, p_list=props.list, p_prefix=props.prefix, p_item=props.item,
                      user=rng.integers(0, n // 3, size=n), source="sdbn world")


def _replicate_values(log: LoggedData, world, opts: dict) -> dict[tuple[str, str], np.ndarray]:
    est = get_estimator("dm", model="sdbn", **opts)
    out = {(t.name, rw): np.empty(REPLICATES) for t in world.targets for rw in REWARDS}
    for r in range(REPLICATES):
        sub = log.take(np.arange(r * SIZE, (r + 1) * SIZE))  # one fit, cached on sub
        for t in world.targets:
            for rw in REWARDS:
                out[t.name, rw][r] = est.estimate(sub, t, rw).value
    return out


def test_dm_with_sdbn_is_unbiased_by_default_and_the_closed_form_is_not():
    world = check_world("pbm")  # its attraction, queries, logger and targets; the clicks here are SDBN's
    log = _log(world, np.random.default_rng(20261203))
    truth = {(t.name, rw): _truth(world, t, rw) for t in world.targets for rw in REWARDS}
    for key, values in _replicate_values(log, world, {}).items():
        bias, se = _mc_summary(values, truth[key])
        assert abs(bias) <= Z * se, (key, bias, se)
        assert se < 0.003, (key, se)
    z = {key: (lambda b, s: b / s)(*_mc_summary(values, truth[key]))
         for key, values in _replicate_values(log, world, {"method": "closed_form"}).items()}
    assert z["ideal", "clicks_per_query"] < -20 and z["shuffled", "clicks_per_query"] < -20, z
    assert z["ideal", "reciprocal_rank"] > 4 and z["shuffled", "reciprocal_rank"] > 4, z
