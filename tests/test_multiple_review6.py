"""Multiple comparisons, review 6 (F7, F5).

- F7: an A/B family's truths are exact and non-zero, so no test is null and the 'false discovery proportion'
  counts wrong-sign (type S) rejections only: the report labels it so, and lists the near-null tests (analytic
  power at the horizon within alpha's exact 99% binomial band) with the proportion that counts their rejections
  as false too. Everything is recomputed from the replicate rows: Holm by statsmodels' multipletests, the analytic
  power by scipy from the rows' mean SE, the band from scipy's binomial cdf.
- F5: configs/multileaving.yaml reads each design's six pairs as one Holm family (the README recommends it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.multiple import multiple_lines

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
    # near-null: analytic power (right sign, from the mean SE of the last day) at or below alpha's band
    z = sps.norm.ppf(1 - ALPHA / 2)
    se = np.array([last[last["metric"] == m]["se"].mean() for m in metrics])
    power = sps.norm.cdf(np.abs(truth) / se - z)
    hi = _band_hi_rate(p.shape[0], ALPHA)
    near = power <= hi
    assert e["near_null_band"] == pytest.approx(hi)
    assert list(e["near_null"]) == [m for m, n in zip(metrics, near, strict=True) if n]
    assert 0 < near.sum() < len(metrics)  # this world has one
    for m, v in e["near_null"].items():
        assert v == pytest.approx(power[metrics.index(m)], rel=1e-9)
    fdp_near_raw, fdp_near_adj = _fdp(raw, right & ~near), _fdp(adj, right & ~near)
    assert e["false_discovery_proportion_near_null_raw"] == pytest.approx(fdp_near_raw)
    assert e["false_discovery_proportion_near_null_adjusted"] == pytest.approx(fdp_near_adj)
    assert fdp_near_raw > _fdp(raw, right) + 0.05  # the near-null test's rejections were counted as true
    line = next(ln for ln in multiple_lines(ab.summary) if ln.split()[:1] == ["ab"])
    assert (f"false discoveries (no test is null: wrong-sign, type S, share of rejections) "
            f"{_fdp(raw, right):.3f} -> {_fdp(adj, right):.3f}") in line
    assert f"false discovery proportion {fdp_near_raw:.3f} -> {fdp_near_adj:.3f}" in line
    assert f"<= {hi:.3f}, the top of alpha's 99% band" in line


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
