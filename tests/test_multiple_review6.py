"""Multiple comparisons, review 6 (F7, F5).

- F7: an A/B family's truths are exact and non-zero, so no test is null and the 'false discovery proportion'
  counts wrong-sign (type S) rejections only: the report labels it so, and lists the near-null tests with the
  proportion that counts their rejections as false too. Review 8, F3: near-null is a fixed property of the test
  (at least half of its rejections noise: alpha / q >= 1/2, q its analytic rejection probability either sign),
  not the R-dependent binomial band it was. Everything is recomputed from the replicate rows: Holm by statsmodels'
  multipletests, the analytic power and q by scipy from the rows' mean SE.
- F5: configs/multileaving.yaml reads each design's six pairs as one Holm family (the README recommends it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.multiple import multiple_lines

# statsmodels' Holm calls gc.collect() on every call (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("no_gc_collect")

ALPHA = 0.05
AB = {
    "seed": 7, "replicates": 120,
    "collection": {"n_queries": 60, "candidates": 8}, "rankers": {"depth": 3},
    "users": {"population": 1500, "activity": {"sigma": 0.5}},
    "traffic": {"days": 5, "queries_per_day": 500, "batch_hours": 24},
    "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query", "analysis": {"multiple": "holm"}}],
    "analysis": {"alpha": ALPHA, "truth_impressions": 20000, "null": False},
}


@pytest.fixture(scope="module")
def ab():
    return simulate(config_from_mapping(AB), workers=1)


def _band_hi_rate(n: int, p: float, level: float = 0.99) -> float:
    k = np.arange(n + 1)
    return float(k[np.searchsorted(sps.binom.cdf(k, n, p), 1 - (1 - level) / 2 - 1e-12)]) / n


def _fdp(reject: np.ndarray, true: np.ndarray) -> float:
    out = []
    for rej, ok in zip(reject, true, strict=True):
        n = int(rej.sum())
        out.append(0.0 if n == 0 else float((rej & ~ok).sum()) / n)
    return float(np.mean(out))


def test_ab_family_fdp_is_labelled_type_s_and_near_null_tests_are_counted(ab) -> None:
    e = ab.summary["multiple"]["ab"]
    metrics = e["family"]
    rows = ab.rows[(ab.rows["design"] == "ab") & (~ab.rows["aa"])]
    last = rows[rows["day"] == rows["day"].max()]
    p = np.column_stack([last[last["metric"] == m].sort_values("replicate")["pvalue"].to_numpy() for m in metrics])
    est = np.column_stack([last[last["metric"] == m].sort_values("replicate")["estimate"].to_numpy()
                           for m in metrics])
    truth = np.array([ab.summary["designs"]["ab"][m]["true_effect"] for m in metrics])
    assert np.all(truth != 0) and np.all(np.isfinite(p))
    raw = p < ALPHA
    adj = np.array([multipletests(row, ALPHA, "holm")[0] for row in p])
    right = np.sign(est) == np.sign(truth)
    # no null test: a false discovery can only be a wrong-sign rejection
    assert e["null_tests"] == [] and e["fdp_counts"] == "wrong sign"
    assert e["false_discovery_proportion_raw"] == pytest.approx(_fdp(raw, right))
    assert e["false_discovery_proportion_adjusted"] == pytest.approx(_fdp(adj, right))
    # near-null (review 8, F3): d = |truth| / mean SE; rejection probability either sign q = Phi(d - z) + Phi(-d - z);
    # near-null when alpha / q >= 1/2, whatever the replicate count
    z = sps.norm.ppf(1 - ALPHA / 2)
    se = np.array([last[last["metric"] == m]["se"].mean() for m in metrics])
    d = np.abs(truth) / se
    power = sps.norm.cdf(d - z)
    share = np.minimum(1.0, ALPHA / (sps.norm.cdf(d - z) + sps.norm.cdf(-d - z)))
    near = share >= 0.5
    assert "independent of the number of replicates" in e["near_null_rule"]
    assert list(e["near_null"]) == [m for m, n in zip(metrics, near, strict=True) if n]
    assert 0 < near.sum() < len(metrics)  # this world has one
    for m, v in e["near_null"].items():
        assert v == pytest.approx(power[metrics.index(m)], rel=1e-9)
        assert e["near_null_noise_share"][m] == pytest.approx(share[metrics.index(m)], rel=1e-9)
    for j, m in enumerate(metrics):
        assert e["per_test"][m]["noise_share"] == pytest.approx(share[j], rel=1e-9)
    fdp_near_raw, fdp_near_adj = _fdp(raw, right & ~near), _fdp(adj, right & ~near)
    assert e["false_discovery_proportion_near_null_raw"] == pytest.approx(fdp_near_raw)
    assert e["false_discovery_proportion_near_null_adjusted"] == pytest.approx(fdp_near_adj)
    assert fdp_near_raw > _fdp(raw, right) + 0.05  # the near-null test's rejections were counted as true
    line = next(ln for ln in multiple_lines(ab.summary) if ln.split()[:1] == ["ab"])
    assert (f"false discoveries (no test is null: wrong-sign, type S, share of rejections) "
            f"{_fdp(raw, right):.3f} -> {_fdp(adj, right):.3f}") in line
    assert f"false discovery proportion {fdp_near_raw:.3f} -> {fdp_near_adj:.3f}" in line
    for m in e["near_null"]:
        j = metrics.index(m)
        assert f"{m} (analytic power {power[j]:.3f}, noise share {share[j]:.3f})" in line
    assert "at least half of a test's rejections are noise" in line and "mostly" not in line


def test_noise_share_hand_values() -> None:
    """alpha / q with q the analytic rejection probability either way; by hand (z = 1.959964):
    power 0.184 -> d = z + Phi^-1(0.184) = 1.059958, q = 0.184 + Phi(-3.019922) = 0.185265, share 0.269884 (the
    review's '27%, not mostly'); d = 0 -> power alpha/2, q = alpha, share 1; power 0.1 -> q 0.104165, share 0.480;
    the boundary share 1/2 sits at q = 2 alpha, power 0.0955."""
    from scipy.optimize import brentq

    from simulations.multiple import noise_share, rejection_probability

    assert rejection_probability(0.184, 0.05) == pytest.approx(0.185265, abs=2e-6)
    assert noise_share(0.184, 0.05) == pytest.approx(0.269884, abs=2e-6)
    assert noise_share(0.025, 0.05) == pytest.approx(1.0, abs=1e-9)
    assert noise_share(0.1, 0.05) == pytest.approx(0.480007, abs=2e-6)
    z = sps.norm.ppf(0.975)
    d_half = brentq(lambda d: sps.norm.cdf(d - z) + sps.norm.cdf(-d - z) - 0.1, 0.0, 3.0)
    p_half = sps.norm.cdf(d_half - z)
    assert p_half == pytest.approx(0.09550, abs=1e-5)
    assert noise_share(p_half, 0.05) == pytest.approx(0.5, abs=1e-9)
    # Monte Carlo: a z-test at the power-0.184 effect rejects (either way) at q, within 4 SE of 200,000 draws
    rng = np.random.default_rng(5)
    d = z + sps.norm.ppf(0.184)
    rate = float(np.mean(np.abs(rng.normal(d, 1.0, 200_000)) > z))
    assert abs(rate - rejection_probability(0.184, 0.05)) < 4 * np.sqrt(0.185 * 0.815 / 200_000)


# review 8, F3: abc7's analytic powers (reciprocal_rank, clicks_per_query, abandonment)
F3_POWERS = {"reciprocal_rank": 0.184, "clicks_per_query": 0.063, "abandonment": 0.054}


def _synthetic_family(replicates: int, seed: int):
    """Rows of an A/B family whose tests have exactly F3_POWERS at the horizon: z-statistics N(d, 1) with
    d = z + Phi^-1(power), estimate 0.01 z, truth 0.01 d; and the designs entries the summary would carry."""
    rng = np.random.default_rng(seed)
    z = sps.norm.ppf(1 - ALPHA / 2)
    rows, entries = [], {}
    for m, pw in F3_POWERS.items():
        d = z + sps.norm.ppf(pw)
        entries[m] = {"true_effect": 0.01 * d, "detectable": True, "final_day": {"analytic_power": pw}}
        stat = rng.normal(d, 1.0, replicates)
        for r, s_ in enumerate(stat):
            rows.append({"design": "ab", "aa": False, "metric": m, "day": 5, "replicate": r,
                         "pvalue": float(2 * sps.norm.sf(abs(s_))), "estimate": 0.01 * float(s_)})
    return pd.DataFrame(rows), {"ab": entries}


def test_near_null_set_does_not_depend_on_the_replicate_count() -> None:
    """The same tests at 20 and 150 replicates are classified alike (before: the 99% band's top, 0.20 at R = 20 and
    0.10 at 150, put reciprocal_rank at power 0.184 into the set at 20 only); the near-null FDP recomputed with
    statsmodels' Holm from the synthetic rows."""
    from simulations.multiple import multiple_summary

    cfg = config_from_mapping(AB)
    metrics = list(F3_POWERS)
    sets = {}
    for reps, seed in ((20, 1), (150, 2)):
        rows, designs = _synthetic_family(reps, seed)
        e = multiple_summary(rows, designs, cfg)["ab"]
        sets[reps] = list(e["near_null"])
        assert sets[reps] == ["clicks_per_query", "abandonment"], reps
        p = np.column_stack([rows[rows["metric"] == m].sort_values("replicate")["pvalue"].to_numpy()
                             for m in metrics])
        est = np.column_stack([rows[rows["metric"] == m].sort_values("replicate")["estimate"].to_numpy()
                               for m in metrics])
        right = est > 0
        near = np.array([m in ("clicks_per_query", "abandonment") for m in metrics])
        raw = p < ALPHA
        adj = np.array([multipletests(row, ALPHA, "holm")[0] for row in p])
        assert e["false_discovery_proportion_near_null_raw"] == pytest.approx(_fdp(raw, right & ~near))
        assert e["false_discovery_proportion_near_null_adjusted"] == pytest.approx(_fdp(adj, right & ~near))
        assert e["false_discovery_proportion_raw"] == pytest.approx(_fdp(raw, right))
    assert sets[20] == sets[150] == ["clicks_per_query", "abandonment"]


def test_multileaving_config_reads_its_pairs_with_holm() -> None:
    path = Path(__file__).resolve().parents[1] / "configs" / "multileaving.yaml"
    cfg = config_from_mapping(yaml.safe_load(path.read_text()))
    kinds = [(d.method, d.analysis.multiple) for d in cfg.designs]
    assert kinds == [("team_draft_multileave", "holm"), ("probabilistic_multileave", "holm")]


ML = {
    "seed": 3, "replicates": 100,
    "collection": {"n_queries": 60, "candidates": 10},
    "rankers": {"depth": 4, "others": {"C": {"noise": 0.9}, "D": {"noise": 1.1}}},
    "users": {"population": 3000, "activity": {"sigma": 0.5}},
    "traffic": {"days": 3, "queries_per_day": 800, "batch_hours": 24},
    "designs": [{"name": "pm", "type": "interleaving", "method": "probabilistic_multileave",
                 "rankers": ["A", "B", "C", "D"], "analysis": {"multiple": "holm"}}],
    "analysis": {"alpha": ALPHA, "truth_impressions": 20000},
}


def test_degenerate_aa_family_gets_the_null_variants_family_wise_rate() -> None:
    """Probabilistic multileaving's A/A is identically 0 (every pair a tie); given the side rows, the family-wise
    rate is measured on its null-variant replicates instead (review 6, F5), recomputed with statsmodels' Holm; the
    simulate job passes the side rows, so the run's own summary carries it."""
    from simulations.analysis import side_row_mask
    from simulations.multiple import multiple_summary

    run = simulate(config_from_mapping(ML), workers=1)
    cfg = config_from_mapping(ML)
    side = side_row_mask(run.rows)
    out = multiple_summary(run.rows[~side], run.summary["designs"], cfg, run.rows[side])["pm"]
    assert out["aa"]["degenerate"] is True
    null = run.rows[(run.rows["metric"].str.startswith("null:")) & (~run.rows["aa"])]
    last = null[null["day"] == null["day"].max()]
    p = np.column_stack([last[last["metric"] == "null:" + m].sort_values("replicate")["pvalue"].to_numpy()
                         for m in out["family"]])
    assert p.shape == (ML["replicates"], 6) and np.isfinite(p).all()
    raw = (p < ALPHA).any(axis=1)
    holm = np.array([multipletests(row, ALPHA, "holm")[0].any() for row in p])
    hi = _band_hi_rate(p.shape[0], ALPHA)
    n = out["null"]
    assert n["family_wise_rate_raw"] == pytest.approx(raw.mean())
    assert n["family_wise_rate_adjusted"] == pytest.approx(holm.mean())
    assert n["binomial_99_band"][1] == pytest.approx(hi)
    assert n["raw_within_band_or_below"] is bool(raw.mean() <= hi + 1e-12)
    assert raw.mean() > holm.mean()  # six pairs at alpha each: Holm lowers the family-wise rate
    line = next(ln for ln in multiple_lines({"multiple": {"pm": out}}) if ln.split()[:1] == ["pm"])
    assert f"A/A 0 (ties); null-variant family-wise rate {raw.mean():.3f}" in line
    assert f"-> {holm.mean():.3f}" in line
    # the run's own summary (simulations.analysis) has it; without the side rows the A/A stays '0 (ties)'
    assert run.summary["multiple"]["pm"]["null"] == n
    assert "null" not in multiple_summary(run.rows[~side], run.summary["designs"], cfg)["pm"]


def test_conventions_state_the_near_null_rule(ab) -> None:
    """summary.json's conventions name the near-null rule the multiple-comparisons block applies."""
    from simulations.multiple import NEAR_NULL_RULE
    from simulations.report import conventions

    text = conventions(ab)["multiple_comparisons"]
    assert text.endswith("; " + NEAR_NULL_RULE) and ab.summary["multiple"]["ab"]["near_null_rule"] == NEAR_NULL_RULE
