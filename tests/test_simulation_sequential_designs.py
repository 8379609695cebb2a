"""Each design's own sequential test (designs[i].analysis) and multiple comparisons in the simulator.

- per-batch monitoring: the batch looks at every day's end equal the daily checkpoints; the
  configured mSPRT's A/A rate under per-batch looks is at or below the exact 99% binomial band
  of alpha, while peeking at the same looks is shown above it;
- the decision numbers (power, mean decision day, days saved, fractions, A/A rate) are
  recomputed from the replicate rows; the planned fixed horizon equals the main table's
  analytic required days;
- Holm decisions are recomputed by the step-down definition (onlineeval.stats.multiple itself is
  checked against statsmodels in test_stats_multiple.py); the
  family-wise A/A rate of a multileaving matrix is above the band unadjusted and within it
  under Holm;
- config errors name the key path and the allowed values.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats as sps

from onlineeval.errors import ConfigError
from onlineeval.stats.sequential import (
    group_sequential_test,
    msprt,
    spending_boundaries,
)
from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.report import terminal_summary
from simulations.sequential import BATCH_PREFIX

ALPHA = 0.05
DAYS, BATCH_HOURS = 5, 6
PER_DAY = 24 // BATCH_HOURS
AB = {
    "seed": 7, "replicates": 120,
    "collection": {"n_queries": 60, "candidates": 8}, "rankers": {"depth": 3},
    "users": {"population": 1500, "activity": {"sigma": 0.5}},
    "traffic": {"days": DAYS, "queries_per_day": 500, "batch_hours": BATCH_HOURS},
    "designs": [
        {"name": "ab", "type": "ab", "metric": "clicks_per_query",
         "analysis": {"sequential": "msprt", "monitoring": "batch", "multiple": "holm"}},
        {"name": "gs", "type": "ab", "metric": "clicks_per_query",
         "analysis": {"sequential": "obrien_fleming", "looks": [2, 4, 5]}},
    ],
    "analysis": {"alpha": ALPHA, "truth_impressions": 20000, "null": False},
}
MULTILEAVE = {
    "seed": 3, "replicates": 300,
    "collection": {"n_queries": 60, "candidates": 10},
    "rankers": {"depth": 4, "others": {"C": {"noise": 0.9}, "D": {"noise": 1.1}}},
    "users": {"population": 3000, "activity": {"sigma": 0.5}},
    "traffic": {"days": 3, "queries_per_day": 800, "batch_hours": 24},
    "designs": [{"name": "tdm", "type": "interleaving", "method": "team_draft_multileave",
                 "rankers": ["A", "B", "C", "D"], "analysis": {"multiple": "holm"}}],
    "analysis": {"alpha": ALPHA, "truth_impressions": 20000, "null": False},
}


def exact_band_hi(n: int, p: float, level: float = 0.99) -> int:
    """Upper end of the equal-tailed binomial band, from the binomial cdf directly."""
    k = np.arange(n + 1)
    return int(k[np.searchsorted(sps.binom.cdf(k, n, p), 1 - (1 - level) / 2 - 1e-12)])


def pivot(rows, design: str, metric: str, aa: bool, column: str) -> np.ndarray:
    sub = rows[(rows["design"] == design) & (rows["metric"] == metric) & (rows["aa"] == aa)]
    return sub.pivot(index="replicate", columns="day", values=column).sort_index(axis=1).to_numpy(dtype=float)


@pytest.fixture(scope="module")
def ab():
    return simulate(config_from_mapping(AB), workers=1)


@pytest.fixture(scope="module")
def multileave():
    return simulate(config_from_mapping(MULTILEAVE), workers=1)


def test_batch_looks_at_each_days_end_equal_the_daily_checkpoints(ab) -> None:
    rows = ab.rows
    for aa in (False, True):
        for column in ("estimate", "se", "n_users", "n_impressions"):
            batch = pivot(rows, "ab", BATCH_PREFIX + "clicks_per_query", aa, column)
            daily = pivot(rows, "ab", "clicks_per_query", aa, column)
            assert batch.shape == (AB["replicates"], DAYS * PER_DAY) and daily.shape == (AB["replicates"], DAYS)
            np.testing.assert_array_equal(batch[:, PER_DAY - 1::PER_DAY], daily)
    # only the batch-monitored design records batch looks
    assert not (rows["metric"].str.startswith(BATCH_PREFIX) & (rows["design"] == "gs")).any()


def test_msprt_under_per_batch_monitoring_holds_the_level_and_peeking_does_not(ab) -> None:
    seq = ab.summary["sequential"]["ab"]
    r = AB["replicates"]
    hi = exact_band_hi(r, ALPHA)
    assert seq["monitoring"] == "batch" and seq["looks"] == DAYS * PER_DAY
    assert seq["look_days"][:2] == [0.25, 0.5] and seq["look_days"][-1] == DAYS
    dec = seq["decision"]
    assert dec["rule"] == "msprt"
    assert round(dec["aa_false_positive_rate"] * r) <= hi and dec["aa_within_band_or_below"] is True
    # the same per-batch looks with the fixed-horizon test every time: shown above the band
    assert round(seq["rules"]["peeking"]["aa_false_positive_rate"] * r) > hi
    assert seq["rules"]["peeking"]["aa_within_band_or_below"] is False


def test_msprt_decision_is_recomputed_from_the_batch_rows(ab) -> None:
    seq = ab.summary["sequential"]["ab"]
    rows = ab.rows
    metric = BATCH_PREFIX + "clicks_per_query"
    truth = ab.summary["designs"]["ab"]["clicks_per_query"]["true_effect"]
    est, se = pivot(rows, "ab", metric, False, "estimate"), pivot(rows, "ab", metric, False, "se")
    res = msprt(est, se, tau=seq["tau"], alpha=ALPHA)
    first = est[np.arange(est.shape[0]), np.clip(res.stop_look, 0, None)]
    power = np.mean(res.reject & (np.sign(first) == np.sign(truth)))
    day = np.where(res.reject, (res.stop_look + 1) / PER_DAY, DAYS)
    dec = seq["decision"]
    assert dec["power"] == pytest.approx(power)
    assert dec["mean_decision_day"] == pytest.approx(day.mean())
    assert dec["days_saved_vs_fixed"] == pytest.approx(DAYS - day.mean())
    aa = msprt(pivot(rows, "ab", metric, True, "estimate"), pivot(rows, "ab", metric, True, "se"),
               tau=seq["tau"], alpha=ALPHA)
    assert dec["aa_false_positive_rate"] == pytest.approx(aa.reject.mean())


def test_obrien_fleming_look_schedule_is_recomputed_from_the_daily_rows(ab) -> None:
    seq = ab.summary["sequential"]["gs"]
    assert seq["look_days"] == [2.0, 4.0, 5.0] and seq["monitoring"] == "daily"
    rows = ab.rows
    cols = [1, 3, 4]  # days 2, 4, 5
    est = pivot(rows, "gs", "clicks_per_query", False, "estimate")[:, cols]
    se = pivot(rows, "gs", "clicks_per_query", False, "se")[:, cols]
    mean_se = se.mean(axis=0)
    fractions = mean_se[-1] ** 2 / mean_se**2
    np.testing.assert_allclose(seq["fractions"], fractions, rtol=1e-9)
    res = group_sequential_test(est / se, spending_boundaries(fractions, ALPHA, "obrien_fleming"))
    truth = ab.summary["designs"]["gs"]["clicks_per_query"]["true_effect"]
    first = est[np.arange(est.shape[0]), np.clip(res.stop_look, 0, None)]
    day = np.where(res.reject, np.array([2.0, 4.0, 5.0])[np.clip(res.stop_look, 0, None)], DAYS)
    dec = seq["decision"]
    assert dec["power"] == pytest.approx(np.mean(res.reject & (np.sign(first) == np.sign(truth))))
    assert dec["mean_decision_day"] == pytest.approx(day.mean())
    assert dec["aa_within_band_or_below"] is True


def test_planned_fixed_horizon_is_the_main_tables_analytic_days(ab) -> None:
    for name in ("ab", "gs"):
        plan = ab.summary["sequential"][name]["decision"]["planned"]
        entry = ab.summary["designs"][name]["clicks_per_query"]
        assert plan["fixed_days"] == pytest.approx(entry["analytic_required_days"], rel=1e-9)
        # a sequential design's maximum size is above the fixed horizon's, its expectation under H0 below the max
        assert plan["inflation_factor"] > 1 and plan["max_days"] > plan["fixed_days"]
        assert plan["expected_days_null"] <= plan["max_days"]
        assert plan["days_saved_effect"] == pytest.approx(plan["fixed_days"] - plan["expected_days_effect"])


def _holm_step_down(p: np.ndarray) -> np.ndarray:
    """Holm's procedure by its definition, row by row: with the m defined p-values sorted, reject
    the i-th smallest while p_(i) <= alpha / (m - i + 1) for it and every smaller one."""
    out = np.zeros(p.shape, dtype=bool)
    for r, row in enumerate(p):
        ok = np.flatnonzero(np.isfinite(row))
        m = ok.size
        for i, j in enumerate(ok[np.argsort(row[ok], kind="stable")]):
            if row[j] > ALPHA / (m - i):
                break
            out[r, j] = True
    return out


def test_holm_across_ab_metrics_matches_the_step_down_definition(ab) -> None:
    mult = ab.summary["multiple"]["ab"]
    assert mult["method"] == "holm" and mult["tests"] == 3 and "gs" not in ab.summary["multiple"]
    rows = ab.rows
    metrics = mult["family"]
    for aa, key_raw, key_adj in ((True, "family_wise_rate_raw", "family_wise_rate_adjusted"),
                                 (False, "any_rejection_raw", "any_rejection_adjusted")):
        p = np.column_stack([pivot(rows, "ab", m, aa, "pvalue")[:, -1] for m in metrics])
        ref = _holm_step_down(p)
        got = mult["aa"] if aa else mult
        assert got[key_raw] == pytest.approx(np.mean((p < ALPHA).any(axis=1)))
        assert got[key_adj] == pytest.approx(np.mean(ref.any(axis=1)))
    assert mult["aa"]["adjusted_within_band_or_below"] is True


def test_multileaving_family_wise_rate_holm_within_band_raw_above(multileave) -> None:
    mult = multileave.summary["multiple"]["tdm"]
    r = MULTILEAVE["replicates"]
    hi = exact_band_hi(r, ALPHA)
    assert mult["tests"] == 6
    aa = mult["aa"]
    # six pairwise tests of one A/A matrix read at alpha each: measured above alpha's band
    assert round(aa["family_wise_rate_raw"] * r) > hi and aa["raw_within_band_or_below"] is False
    # Holm keeps the family-wise rate at or below it
    assert round(aa["family_wise_rate_adjusted"] * r) <= hi and aa["adjusted_within_band_or_below"] is True
    rows = multileave.rows
    p = np.column_stack([pivot(rows, "tdm", m, True, "pvalue")[:, -1] for m in mult["family"]])
    assert aa["family_wise_rate_adjusted"] == pytest.approx(np.mean(_holm_step_down(p).any(axis=1)))


def test_report_prints_decisions_and_corrections(ab, multileave) -> None:
    text = terminal_summary(ab)
    assert "Sequential decisions" in text and "msprt (tau" in text and "per 6 h" in text
    assert ("saves" in text or "costs" in text) and "planned for the target power" in text
    assert "Multiple comparisons" in text and "holm over 3 tests" in text
    assert "holm over 6 tests" in terminal_summary(multileave)
    conv = ab.summary if "conventions" in ab.summary else None
    assert conv is None or "sequential_decisions" in conv["conventions"]


def test_multiple_comparisons_block_writes_rates_to_3_decimals(ab, multileave) -> None:
    """Every rate over replicates in the block (family-wise rates and their band, any rejection, false discovery
    proportions, powers) to exactly 3 decimals (report.rate_text: power 0.750, was 0.75 next to the FDP's 0.375),
    read back against the summary."""
    from simulations.multiple import multiple_lines

    def rate(text: str, x: float) -> None:
        assert len(text.split(".")[1]) == 3 and float(text) == pytest.approx(x, abs=5e-4 + 1e-12), (text, x)

    for result in (ab, multileave):
        lines = multiple_lines(result.summary)
        for design, e in result.summary["multiple"].items():
            i = next(k for k, ln in enumerate(lines) if ln.split()[:1] == [design])
            words = lines[i].replace(";", " ").replace("(", " ").replace(")", " ").replace("!", " ").split()
            after = {w: words[k + 1:k + 4] for k, w in enumerate(words) if w in ("rate", "rejection", "proportion")}
            rate(after["rejection"][0], e["any_rejection_raw"])
            rate(after["rejection"][2], e["any_rejection_adjusted"])
            # the first proportion (review 6, F7: labelled the wrong-sign share when no test of the family is null)
            fdp = re.search(r"(?:false discovery proportion|share of rejections\)) (\S+) -> (\S+)", lines[i])
            rate(fdp.group(1), e["false_discovery_proportion_raw"])
            rate(fdp.group(2).rstrip(";"), e["false_discovery_proportion_adjusted"])
            aa = e["aa"]
            if aa is not None and not aa["degenerate"]:
                rate(after["rate"][0], aa["family_wise_rate_raw"])
                rate(after["rate"][2], aa["family_wise_rate_adjusted"])
                band = words[words.index("band") + 1].split("-")
                rate(band[0], aa["binomial_99_band"][0])
                rate(band[1], aa["binomial_99_band"][1])
            powers = lines[i + 1].split("adjusted: ")[1].split(", ")
            assert len(powers) == len(e["per_test"])
            for text, (m, t) in zip(powers, e["per_test"].items(), strict=True):
                name, raw, arrow, adjusted = text.split()
                assert (name, arrow) == (m, "->")
                rate(raw, t["power_raw"])
                rate(adjusted, t["power_adjusted"])


@pytest.mark.parametrize(("analysis", "path", "needle"), [
    ({"sequential": "sprt"}, "designs[0].analysis.sequential",
     "'none', 'msprt', 'confidence_sequence', 'obrien_fleming' or 'pocock'"),
    ({"monitoring": "hourly"}, "designs[0].analysis.monitoring", "'daily' or 'batch'"),
    ({"multiple": "bonferroni"}, "designs[0].analysis.multiple", "'none', 'holm' or 'bh'"),
    ({"sequential": "none", "tau": 0.01}, "designs[0].analysis", "only for sequential msprt or confidence_sequence"),
    ({"sequential": "msprt", "tau": 0}, "designs[0].analysis.tau", "greater than 0"),
    ({"looks": 3}, "designs[0].analysis", "needs a sequential test"),
    ({"sequential": "pocock", "looks": [4, 2]}, "designs[0].analysis", "strictly increasing"),
    ({"sequential": "pocock", "looks": [1.5]}, "designs[0].analysis.looks", "list of positive integers"),
    ({"sequential": "pocock", "looks": 15}, "designs[0].analysis.looks", "allowed: 1 to 14"),
    ({"sequential": "pocock", "looks": [7, 15]}, "designs[0].analysis.looks", "allowed: days 1 to 14"),
    ({"sequential": "pocock", "lookz": 3}, "designs[0].analysis.lookz", "looks, monitoring"),
])
def test_config_errors_name_the_key_and_what_is_allowed(analysis, path, needle) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"designs": [{"name": "ab", "type": "ab", "analysis": analysis}]})
    assert str(err.value).startswith(path + ":") and needle in str(err.value)


def test_config_batch_looks_count_and_effective_config() -> None:
    cfg = config_from_mapping({"traffic": {"days": 2, "batch_hours": 6}, "designs": [
        {"name": "ab", "type": "ab", "analysis": {"sequential": "pocock", "monitoring": "batch", "looks": 8}},
        {"name": "plain", "type": "ab"}]})
    eff = cfg.effective()
    assert eff["designs"][0]["analysis"]["looks"] == 8 and "analysis" not in eff["designs"][1]
    assert config_from_mapping(eff) == cfg
    with pytest.raises(ConfigError, match=r"designs\[0\].analysis.looks: 9 looks, but batch monitoring"):
        config_from_mapping({"traffic": {"days": 2, "batch_hours": 6}, "designs": [
            {"name": "ab", "type": "ab", "analysis": {"sequential": "pocock", "monitoring": "batch", "looks": 9}}]})


def test_batch_looks_of_welch_and_interleaving_designs_equal_their_daily_checkpoints() -> None:
    batch = {"sequential": "pocock", "monitoring": "batch"}
    cfg = {**AB, "replicates": 2, "traffic": {"days": 2, "queries_per_day": 300, "batch_hours": BATCH_HOURS},
           "analysis": {"truth_impressions": 2000, "null": True}, "designs": [
        {"name": "welch", "type": "ab", "test": "welch", "metric": "reciprocal_rank", "analysis": batch},
        {"name": "td", "type": "interleaving", "method": "team_draft", "analysis": batch}]}
    rows = simulate(config_from_mapping(cfg), workers=1).rows
    for design, metric in (("welch", "reciprocal_rank"), ("td", "delta_ab")):
        for column in ("estimate", "se", "pvalue"):
            looks = pivot(rows, design, BATCH_PREFIX + metric, False, column)
            np.testing.assert_array_equal(looks[:, PER_DAY - 1::PER_DAY], pivot(rows, design, metric, False, column))
    # the null variant of an interleaving design records no batch looks
    assert not rows["metric"].str.startswith(BATCH_PREFIX + "null:").any()
