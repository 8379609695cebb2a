"""Review 6, F5: multileaving summaries give the rankers' exact online values and the pairwise error rate by day.

References: the A/B design's simulated replicates (their mean reciprocal-rank difference of every ranker pair
within 4 SE of the exact values: simulated clicks against exact expectations) and the error rates counted by an
explicit loop over replicate x pair.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from simulations.analysis import pair_rankers, pairwise_error_rates


def test_pair_names():
    assert pair_rankers("delta_C_vs_A") == ("C", "A")


def test_error_rate_counts_wrong_signs_by_an_explicit_loop():
    rng = np.random.default_rng(11)
    pairs = ["delta_B_vs_A", "delta_C_vs_A", "delta_C_vs_B"]
    signs = {"delta_B_vs_A": 1.0, "delta_C_vs_A": -1.0, "delta_C_vs_B": 0.0}  # a 0-sign pair is left out
    recs = []
    for rep in range(30):
        for day in (1, 2):
            for p in pairs:
                e = float(rng.normal(0.3 * day, 1.0))
                e = 0.0 if rep == 3 else (float("nan") if rep == 4 else e)
                recs.append({"design": "tdm", "aa": False, "replicate": rep, "day": day, "metric": p, "estimate": e})
    recs.append({"design": "tdm", "aa": True, "replicate": 0, "day": 1, "metric": "delta_B_vs_A", "estimate": -5.0})
    rows = pd.DataFrame(recs)
    got = pairwise_error_rates(rows, "tdm", signs)
    for day, g in zip((1, 2), got, strict=True):
        wrong = total = 0
        for r in recs:
            if r["aa"] or r["day"] != day or signs[r["metric"]] == 0:
                continue
            total += 1
            x = r["estimate"]
            wrong += not (x == x and x != 0 and (x > 0) == (signs[r["metric"]] > 0))
        assert g["day"] == day and g["trials"] == total == 60
        assert g["error_rate"] == pytest.approx(wrong / total, abs=1e-15)
        assert g["binomial_se"] == pytest.approx(math.sqrt(wrong / total * (1 - wrong / total) / total))


def test_online_values_match_simulated_ab_tests_and_the_error_rates_are_reported():
    from simulations.config import config_from_mapping
    from simulations.job import simulate
    from simulations.report import terminal_summary

    cfg = config_from_mapping({
        "seed": 3, "replicates": 30,
        "collection": {"n_queries": 150, "candidates": 20},
        "rankers": {"depth": 10, "B": {"noise": 0.9}, "others": {"C": {"noise": 0.8}}},
        "users": {"population": 3000},
        "traffic": {"days": 2, "queries_per_day": 1000, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank"},
                    {"name": "tdm", "type": "interleaving", "method": "team_draft_multileave",
                     "rankers": ["A", "B", "C"]}],
        "analysis": {"truth_impressions": 40000, "aa": False},
    })
    result = simulate(cfg, workers=1)
    ml = result.summary["multileaving"]
    v = {r: ml["online_values"][r]["reciprocal_rank"] for r in ("A", "B", "C")}
    rows = result.rows
    for design, (x, y) in (("ab", ("B", "A")),):
        last = rows[(rows.design == design) & (~rows.aa) & (rows.metric == "reciprocal_rank") & (rows.day == 2)]
        est = last.estimate.to_numpy()
        assert abs(est.mean() - (v[x] - v[y])) <= 4 * est.std(ddof=1) / math.sqrt(est.size), design
    assert ml["order"] == sorted(v, key=lambda r: -v[r])
    # the A/B design's exact truth (compute_truth) is the same difference
    assert result.summary["designs"]["ab"]["reciprocal_rank"]["true_effect"] == pytest.approx(v["B"] - v["A"],
                                                                                               rel=1e-9)
    e = ml["designs"]["tdm"]
    for p, q in e["pairs"].items():
        x, y = pair_rankers(p)
        assert q["exact_difference"] == pytest.approx(v[x] - v[y], rel=1e-12)
    assert [r["day"] for r in e["error_rate_exact"]] == [1, 2]
    text = terminal_summary(result)
    assert "Multileaving: the rankers' exact online reciprocal_rank" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("  tdm            day 1 "))
    r1, r2 = (r["error_rate"] for r in e["error_rate_exact"])
    assert 0 < r1 < 0.5 and 0 < r2 < 0.5  # a world where the design errs, better than a coin
    agree = all(q["signs_agree"] for q in e["pairs"].values())
    own = [r["error_rate"] for r in e["error_rate_own_truth"]]
    assert line == f"  tdm            day 1 {r1:.3f}, day 2 {r2:.3f}" if agree else line.startswith(
        f"  tdm            day 1 {r1:.3f}/{own[0]:.3f}, day 2 {r2:.3f}/{own[1]:.3f}")


def test_html_shows_the_terminal_lines():
    from simulations.html_report.simulate import _multileaving

    ml = {"online_values": {"A": {"reciprocal_rank": 0.815}, "B": {"reciprocal_rank": 0.816}},
          "order_metric": "reciprocal_rank", "order": ["B", "A"],
          "designs": {"tdm": {"pairs": {"delta_B_vs_A": {"signs_agree": False}},
                              "error_rate_exact": [{"day": 1, "error_rate": 0.25}],
                              "error_rate_own_truth": [{"day": 1, "error_rate": 0.75}]}}}
    html = "".join(str(h) for h in _multileaving({"multileaving": ml}))
    assert "A 0.815, B 0.816 (from A: B +0.00100) -&gt; B &gt; A" in html
    assert ("<li>tdm            day 1 0.250/0.750; own truth&#x27;s sign differs from the exact order on "
            "delta_B_vs_A") in html
