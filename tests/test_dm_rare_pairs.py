"""The direct method's warning on sparse logs (:func:`onlineeval.estimators.dm.rare_pairs_warning`).

A click model fitted on a log whose target pairs are mostly shown a handful of times gives a biased value while its
interval measures the spread only: before the warning, `estimate --estimator dm` printed such a value with a tight
interval and the rare pairs' share in its notes alone. The world: 200 Zipf-distributed queries of 10 candidates, PBM
users, the ideal top 5 as the target, production's order (3rd, 1st, 0th, 2nd, 4th best) logged with 30% uniformly
random lists (as tests/sparse_worlds.py). Measured (80 logs per size; z = error / the estimate's SE; share of the
target's slots on pairs shown fewer than 10 times, mean z, 95% intervals covering, logs warned): 4,000 impressions
19%, -3.1, 19%, all; 10,000 4.2%, -1.5, 65%, all; 14,000 1.2%, -0.7, 89%, all; 17,000 0.4%, -0.4, 95%, 21%; 20,000
0.1%, -0.5, 94%, none; 25,000 0%, 0.0, 95%, none.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from onlineeval.estimators import DeterministicTarget, LoggedData, get_estimator
from onlineeval.estimators.dm import RARE_SLOT_WARN, rare_pairs_warning

Q, M, K = 200, 10, 5
EXAM = np.array([1.0, 0.7, 0.5, 0.35, 0.25])


def _world():
    from clickmodels import PBM, ByQueryDoc

    rng = np.random.default_rng(1)
    alpha = rng.uniform(0.02, 0.8, (Q, M))
    qq, dd = np.meshgrid(np.arange(Q), np.arange(M), indexing="ij")
    users = PBM(EXAM, ByQueryDoc(qq.ravel(), dd.ravel(), alpha.ravel(), default=0.5))
    order = np.argsort(-alpha, axis=1)
    probs = 1.0 / np.arange(1, Q + 1)
    probs /= probs.sum()
    truth = float(probs @ (alpha[np.arange(Q)[:, None], order[:, :K]] * EXAM).sum(axis=1))  # clicks per query
    return users, order, probs, truth


def _logs(n: int, logs: int, seed: int):
    """``logs`` logs of ``n`` impressions of the world, with the target and the exact clicks per query."""
    from clickmodels.base import Impressions

    users, order, probs, truth = _world()
    production = order[:, [3, 1, 0, 2, 4]]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(logs):
        q = rng.choice(Q, n, p=probs)
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
    # log; a planted threshold of 2% (or the warning left out) fails here
    z, warned, share = _runs(14_000, 80, 5)
    sem = z.std(ddof=1) / math.sqrt(z.size)
    assert z.mean() < -4 * sem, (z.mean(), sem)
    assert np.all(warned == (share >= RARE_SLOT_WARN))
    assert warned.mean() >= 0.9, (warned.mean(), share.mean())


def test_the_warning_stays_silent_where_the_interval_covers():
    # at 25,000 impressions no target slot rests on a rare pair: the value within 4 SE of unbiased, the 95% interval
    # in its binomial band over 80 logs, and no warning (a planted threshold of 0 fails here)
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
    assert text.startswith(f"dm (pbm fitted on the log): {share:.1%} of the target's slots")
    assert "dr, dr_list, cascade_dr" in text
    # a model given ready-made is not fitted on this log: its value is not biased by the log's sparseness
    fitted = get_estimator("dm").fit_model(data[0])
    given = get_estimator("dm", model=fitted).estimate(data[0], target, "clicks_per_query")
    assert given.value == pytest.approx(e.value, rel=1e-12)
    assert not any("fewer than 10 times" in w for w in given.warnings())
    # the rule itself: at and above the threshold only, for a model fitted by name
    est = get_estimator("dm")
    assert rare_pairs_warning(est, {"rare_slot_share": RARE_SLOT_WARN, "rare_shows": 10}) is not None
    assert rare_pairs_warning(est, {"rare_slot_share": RARE_SLOT_WARN * 0.999, "rare_shows": 10}) is None
    assert rare_pairs_warning(est, {"rare_slot_share": math.nan, "rare_shows": 10}) is None
    # the doubly robust estimator corrects the model (its item propensities: production's document with 0.7, any
    # with 0.03): no such warning, and its value within 4 of its SEs of the truth where dm's is far off
    dr = get_estimator("dr").estimate(data[0], target, "clicks_per_query")
    assert not any("fewer than 10 times" in w for w in dr.warnings())
