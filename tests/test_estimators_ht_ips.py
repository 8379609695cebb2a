"""List-level IPS and clipped IPS in Horvitz-Thompson form (review 3, F-C): the weight multiplies the whole list
reward ``c0 + sum_j r_j`` (abandonment: ``1[no click]``), checked against exact expectations over every
(list, clicks) outcome of a small world."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from onlineeval.estimators import LoggedData, get_estimator, get_reward
# ------------------------------------------------------------------------------------------------ F-C
def _two_list_world() -> tuple[LoggedData, Any, np.ndarray, float]:
    """Every (shown list, click vector) of one query, two documents shown in either order with probability 1/2,
    PBM clicks (theta 1, 0.5; attractiveness a 0.6, b 0.3): rows with their probabilities; the target [a, b] and its
    exact abandonment (1 - 0.6)(1 - 0.15) = 0.34."""
    from onlineeval.estimators import DeterministicTarget

    rows, probs = [], []
    attract, theta = (0.6, 0.3), (1.0, 0.5)
    for order in ((0, 1), (1, 0)):
        for c0 in (0, 1):
            for c1 in (0, 1):
                p0, p1 = theta[0] * attract[order[0]], theta[1] * attract[order[1]]
                probs.append(0.5 * (p0 if c0 else 1 - p0) * (p1 if c1 else 1 - p1))
                rows.append((order, (c0, c1)))
    n = len(rows)
    data = LoggedData(np.zeros(n, dtype=np.int64), np.array([r[0] for r in rows]),
                      np.array([r[1] for r in rows], dtype=bool), p_list=np.full(n, 0.5))
    return data, DeterministicTarget(np.array([[0, 1]]), "T"), np.array(probs), 0.4 * 0.85


def test_ips_weights_the_whole_reward_for_abandonment() -> None:
    """Review 3, F-C: IPS and clipped IPS weight R = 1[no click] itself (Horvitz-Thompson), not R - 1. Exact
    expectations over every (list, clicks) of a two-document world: IPS's is the truth 0.34; clipped IPS (cap 1.5,
    weights 2) has bias -E[(w - cap)^+ R] = -0.5 x 0.5 x 0.34 = -0.085 <= 0, as its assumption says (the R - 1 form
    gave +0.165); its note's bias estimate is exactly clipped - IPS on the log; a target with every weight 0 reads 0."""
    data, target, prob, truth = _two_list_world()
    reward = get_reward("abandonment", 2)
    assert prob.sum() == pytest.approx(1.0, abs=1e-15)

    def expectation(name: str, **opts: Any) -> float:
        terms = get_estimator(name, **opts).terms(data, target, reward)
        return reward.offset + float(prob @ terms.num)  # den = 1: the estimate is linear in the rows

    assert expectation("ips") == pytest.approx(truth, abs=1e-15)
    w = np.where((data.shown == [[0, 1]]).all(axis=1), 2.0, 0.0)
    big_r = 1.0 - data.clicks.any(axis=1)
    assert expectation("clipped_ips", cap=1.5) - truth == pytest.approx(-float(prob @ (np.maximum(w - 1.5, 0) * big_r)),
                                                                        abs=1e-15)
    assert expectation("clipped_ips", cap=1.5) - truth == pytest.approx(-0.085, abs=1e-15)
    ips = get_estimator("ips").estimate(data, target, reward)
    clipped = get_estimator("clipped_ips", cap=1.5).estimate(data, target, reward)
    assert ips.value == pytest.approx(float(np.mean(w * big_r)), abs=1e-15)
    assert clipped.diagnostics.notes["clipping_bias_estimate"] == pytest.approx(clipped.value - ips.value, abs=1e-15)
    assert clipped.diagnostics.notes["clipping_bias_bound"] == pytest.approx(np.maximum(w - 1.5, 0).mean() * 1.0)
    # by hand, on the 8 equally weighted rows: the 4 rows showing [a, b] have (w - cap)^+ = 0.5, one of them no click
    # (R = 1): bias estimate -0.5 x 1 / 8; bound 0.5 x 4 / 8 x max|R| (1) = 0.25, which covers the exact bias 0.085
    assert clipped.diagnostics.notes["clipping_bias_estimate"] == pytest.approx(-0.0625, abs=1e-15)
    bound = clipped.diagnostics.notes["clipping_bias_bound"]
    assert bound == pytest.approx(0.25, abs=1e-15) and bound >= 0.085
    from onlineeval.estimators import DeterministicTarget

    nowhere = DeterministicTarget(np.array([[1, 0]]), "N")
    only = data.take(np.flatnonzero((data.shown == [[0, 1]]).all(axis=1)))
    assert get_estimator("ips").estimate(only, nowhere, reward).value == 0.0
