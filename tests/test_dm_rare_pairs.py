"""The direct method's warning on sparse logs (:func:`onlineeval.estimators.dm.rare_pairs_warning`).

A click model fitted on a log whose target pairs are mostly shown a handful of times gives a biased value while its
interval measures the spread only: before the warning, `estimate --estimator dm` printed such a value with a tight
interval and the rare pairs' share in its notes alone. The world: 200 Zipf-distributed queries of 10 candidates, PBM
users, the ideal top 5 as the target, production's order (3rd, 1st, 0th, 2nd, 4th best) logged with 30% uniformly
random lists (as tests/sparse_worlds.py). The warning fires where the share s of the target's slots on pairs shown
fewer than 10 times, times the square root of the impressions n, reaches 0.5. Measured (200 queries, 80 logs per
size; z = error / the estimate's SE; s, s sqrt(n), mean z, 95% intervals covering): 4,000 impressions 19%, 11.8,
-3.1, 19%; 10,000 4.2%, 4.2, -1.5, 65%; 14,000 1.2%, 1.4, -0.7, 89%; 17,000 0.4%, 0.5, -0.4, 95%; 20,000 0.1%, 0.16,
-0.5, 94%; 25,000 0%, 0.016, 0.0, 95%; at a user's size (20,000 queries) 10^6 impressions 7.3%, 72, -17 and 2.5
million 0.65%, 10.3, -5.2 (6-12 logs; no interval covered).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from onlineeval.estimators import DeterministicTarget, LoggedData, get_estimator
from onlineeval.estimators.dm import RARE_SLOT_SCALE, rare_pairs_warning

Q, M, K = 200, 10, 5
EXAM = np.array([1.0, 0.7, 0.5, 0.35, 0.25])


def _world(queries: int = Q):
    from clickmodels import PBM, ByQueryDoc

    rng = np.random.default_rng(1)
    alpha = rng.uniform(0.02, 0.8, (queries, M))
    qq, dd = np.meshgrid(np.arange(queries), np.arange(M), indexing="ij")
    users = PBM(EXAM, ByQueryDoc(qq.ravel(), dd.ravel(), alpha.ravel(), default=0.5))
    order = np.argsort(-alpha, axis=1)
    probs = 1.0 / np.arange(1, queries + 1)
    probs /= probs.sum()
    truth = float(probs @ (alpha[np.arange(queries)[:, None], order[:, :K]] * EXAM).sum(axis=1))  # clicks per query
    return users, order, probs, truth


def _logs(n: int, logs: int, seed: int, queries: int = Q):
    """``logs`` logs of ``n`` impressions of the world (of ``queries`` queries), with the target and the exact clicks
    per query."""
    from clickmodels.base import Impressions

    users, order, probs, truth = _world(queries)
    production = order[:, [3, 1, 0, 2, 4]]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(logs):
        q = rng.choice(queries, n, p=probs)
        shown = production[q].copy()
        rand = rng.random(n) < 0.3
        shown[rand] = np.argsort(rng.random((int(rand.sum()), M)), axis=1)[:, :K]
        clicks = users.sample(Impressions(query=q, docs=shown), rng).clicks
        p_item = 0.7 * (shown == production[q]) + 0.3 / M  # each slot: production's document, or uniform
        out.append(LoggedData(q, shown, clicks, user=rng.integers(0, n // 3, n), p_item=p_item))
    return out, DeterministicTarget(order[:, :K], "ideal"), truth


def _runs(n: int, logs: int, seed: int):
    data, target, truth = _logs(n, logs, seed)
    z, warned, share = [], [], []
    for d in data:
        e = get_estimator("dm").estimate(d, target, "clicks_per_query")
        z.append((e.value - truth) / e.se)
        warned.append(any("fewer than 10 times" in w for w in e.warnings()))
        share.append(e.diagnostics.notes["rare_slot_share"])
    return np.array(z), np.array(warned), np.array(share)


def test_the_warning_fires_where_the_value_is_biased_beyond_its_interval():
    # at 14,000 impressions (about 1.2% of the target's slots on rare pairs) the value is low beyond chance: the mean
    # z below 0 by more than 4 of its SEs, coverage below the binomial band, and the warning fires on (nearly) every
    # log; a planted threshold of 2 (or the warning left out) fails here
    z, warned, share = _runs(14_000, 80, 5)
    sem = z.std(ddof=1) / math.sqrt(z.size)
    assert z.mean() < -4 * sem, (z.mean(), sem)
    assert np.all(warned == (share * math.sqrt(14_000) >= RARE_SLOT_SCALE))
    assert warned.mean() >= 0.9, (warned.mean(), share.mean())


def test_the_warning_stays_silent_where_the_interval_covers():
    # at 25,000 impressions no target slot rests on a rare pair: the value within 4 SE of unbiased, the 95% interval
    # in its binomial band over 80 logs, and no warning (a planted threshold of 0.01 fails here)
    from scipy.stats import binom

    z, warned, share = _runs(25_000, 80, 6)
    sem = z.std(ddof=1) / math.sqrt(z.size)
    assert abs(z.mean()) <= 4 * sem, (z.mean(), sem)
    covered = int(np.sum(np.abs(z) < 1.959964))
    assert covered >= binom.ppf(0.005, z.size, 0.95), covered
    assert not warned.any(), share.max()


def test_the_text_and_who_gets_it():
    data, target, _ = _logs(4_000, 1, 7)
    e = get_estimator("dm").estimate(data[0], target, "clicks_per_query")
    share = e.diagnostics.notes["rare_slot_share"]
    assert share > 0.1
    (text,) = [w for w in e.warnings() if "fewer than 10 times" in w]
    assert text.startswith(f"dm (pbm fitted on the log): {share:.2%} of the target's slots")
    assert f"sqrt(4000 impressions) = {share * math.sqrt(4000):.3g} >= 0.5" in text
    assert "dr, dr_list, cascade_dr" in text
    # a model given ready-made is not fitted on this log: its value is not biased by the log's sparseness
    fitted = get_estimator("dm").fit_model(data[0])
    given = get_estimator("dm", model=fitted).estimate(data[0], target, "clicks_per_query")
    assert given.value == pytest.approx(e.value, rel=1e-12)
    assert not any("fewer than 10 times" in w for w in given.warnings())
    # the rule itself: at and above the threshold only (share x sqrt(n)), for a model fitted by name
    est = get_estimator("dm")
    at = RARE_SLOT_SCALE / math.sqrt(10_000)
    assert rare_pairs_warning(est, {"rare_slot_share": at, "rare_shows": 10}, 10_000) is not None
    assert rare_pairs_warning(est, {"rare_slot_share": at * 0.999, "rare_shows": 10}, 10_000) is None
    assert rare_pairs_warning(est, {"rare_slot_share": at * 0.999, "rare_shows": 10}, 40_000) is not None
    assert rare_pairs_warning(est, {"rare_slot_share": math.nan, "rare_shows": 10}, 10_000) is None
    # the doubly robust estimator corrects the model (its item propensities: production's document with 0.7, any
    # with 0.03): no such warning, and its value within 4 of its SEs of the truth where dm's is far off
    dr = get_estimator("dr").estimate(data[0], target, "clicks_per_query")
    assert not any("fewer than 10 times" in w for w in dr.warnings())


@pytest.mark.slow
def test_at_a_users_size_the_value_is_far_off_and_warned():
    # 20,000 Zipf-distributed queries, one log of 10^6 impressions (about 7% of the target's slots on rare pairs):
    # measured -17 SE (+-0.3 over 12 logs); here beyond 8 SE low on the one log, and warned
    data, target, truth = _logs(1_000_000, 1, 100, queries=20_000)
    e = get_estimator("dm").estimate(data[0], target, "clicks_per_query")
    assert (e.value - truth) / e.se < -8, ((e.value - truth) / e.se, e.diagnostics.notes["rare_slot_share"])
    assert any("fewer than 10 times" in w for w in e.warnings())
