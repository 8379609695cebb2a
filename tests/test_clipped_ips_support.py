"""Clipped IPS checks its weights' mean *before* clipping (review 18): a target the logger shows only on some queries
biases clipped IPS as much as IPS while no weight exceeds the cap, so the clipping bias estimate is 0 and, before,
its row carried no warning at all. A target inside the support is not warned about and is within 4 SE of its exact
value."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pandas as pd
import pytest

import onlineeval

Q, N, EPS = 20, 20_000, 0.3
DOCS = ("a", "b", "c")
PERMS = [list(p) for p in permutations(DOCS)]
THETA = np.array([1.0, 0.6, 0.4])


@pytest.fixture(scope="module")
def world() -> dict:
    """Logger: A's list [a, b, c] with probability 1 - EPS, else one of the 6 orders uniformly; PBM clicks."""
    rng = np.random.default_rng(20261203)
    alpha = {f"q{i}": dict(zip(DOCS, rng.uniform(0.05, 0.9, 3))) for i in range(Q)}
    q = rng.integers(0, Q, N)
    rand = rng.random(N) < EPS
    pick = rng.integers(0, 6, N)
    shown = [PERMS[pick[i]] if rand[i] else list(DOCS) for i in range(N)]
    p_list = [(1 - EPS) * (s == list(DOCS)) + EPS / 6 for s in shown]
    clicks = [[int(rng.random() < THETA[j] * alpha[f"q{q[i]}"][d]) for j, d in enumerate(s)]
              for i, s in enumerate(shown)]
    log = pd.DataFrame({"query": [f"q{x}" for x in q], "user": [f"u{u}" for u in rng.integers(0, 2_000, N)],
                        "shown": shown, "clicks": clicks, "p_list": p_list})
    # inside the support: [c, b, a] on every query; outside: a never-shown document "x" on the even queries
    inside = {f"q{i}": ["c", "b", "a"] for i in range(Q)}
    outside = {f"q{i}": (["x", "b", "c"] if i % 2 == 0 else ["c", "b", "a"]) for i in range(Q)}

    def truth(run: dict) -> float:  # queries uniform; PBM: sum_j theta_j alpha(d_j), 0 for "x"
        return float(np.mean([sum(THETA[j] * alpha[qq].get(d, 0.0) for j, d in enumerate(lst))
                              for qq, lst in run.items()]))

    return {"log": log, "inside": inside, "outside": outside, "truth": {"inside": truth(inside),
                                                                        "outside": truth(outside)}}


def _row(est: onlineeval.api.Estimates, name: str, target: str) -> pd.Series:
    r = est.results
    return r[(r["estimator"] == name) & (r["target"] == target)].iloc[0]


def test_clipped_ips_warns_when_the_unclipped_mean_weight_is_off(world: dict) -> None:
    # cap 100 > every weight (1 / (EPS / 6) = 20): clipping changes nothing, its bias estimate is 0
    est = onlineeval.estimate(world["log"], {"inside": world["inside"], "outside": world["outside"]},
                              "ips,clipped_ips", options={"clipped_ips": {"cap": 100}})
    out, ins = _row(est, "clipped_ips", "outside"), _row(est, "clipped_ips", "inside")
    ips_out = _row(est, "ips", "outside")
    assert out["diag_notes"]["clipping_bias_estimate"] == 0 and out["estimate"] == ips_out["estimate"]
    # the estimate is far below the truth (the missing half of the weight) ...
    assert (world["truth"]["outside"] - out["estimate"]) / out["se"] > 4
    # ... and both rows now say why; the unclipped mean equals IPS's mean weight
    assert any("mean importance weight before clipping" in w for w in out["warnings"])
    assert any("mean importance weight" in w for w in ips_out["warnings"])
    notes = out["diag_notes"]
    assert notes["mean_unclipped_weight"] == pytest.approx(ips_out["diag_mean_weight"], rel=1e-12)
    assert notes["mean_unclipped_weight_se"] == pytest.approx(ips_out["diag_mean_weight_se"], rel=1e-12)
    assert abs(notes["mean_unclipped_weight"] - 0.5) < 4 * notes["mean_unclipped_weight_se"]
    # inside the support: no such warning, the estimate within 4 SE of the exact value
    assert not any("before clipping" in w for w in ins["warnings"])
    assert abs(ins["estimate"] - world["truth"]["inside"]) < 4 * ins["se"]
    assert abs(ins["diag_notes"]["mean_unclipped_weight"] - 1) < 4 * ins["diag_notes"]["mean_unclipped_weight_se"]


def test_clipped_ips_small_cap_keeps_the_unclipped_check(world: dict) -> None:
    """With a cap below the weights the capped mean is shown unchecked; the unclipped mean is still checked."""
    est = onlineeval.estimate(world["log"], {"inside": world["inside"], "outside": world["outside"]},
                              "clipped_ips", options={"clipped_ips": {"cap": 5}})
    out, ins = _row(est, "clipped_ips", "outside"), _row(est, "clipped_ips", "inside")
    assert not ins["diag_mean_weight_off"]
    assert any("before clipping" in w for w in out["warnings"])
    assert not any("before clipping" in w for w in ins["warnings"])
