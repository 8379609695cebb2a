"""Review 9, F1 and F4: the null check's family, within a run and across a sweep, and its 80%-power detectable bias.

- F1, one run: the null replicates' mean test runs at 0.01 / every null-checked pair of every interleaving design of
  the run (team-draft's one pair + a 3-ranker multileaving design's three = 4 pairs: 0.0025), not 0.01 / the design's
  own pairs; checked on a real run against scipy's ttest_1samp of its own null rows.
- F1, a sweep: the family is every point's pairs. A point flagged at its run's level only (p between 0.01 / checks
  and 0.01) is 'BIASED?' and keeps its sizes in points.csv, the sweep page and the shrinkage study's inputs; the hard
  'BIASED' needs the sweep's level or the 4-SE rule. The expected false flags are exact sums (0.01 x points, 0.01).
- F4: the quoted detectable bias is the 80%-power one: (4 + z_0.8) x SE for the 4-SE rule (exactly 80% by the normal
  law) and nc x SE for the mean test, nc the noncentral t's (scipy's nct gives 80%, and so does a Monte Carlo of
  40,000 experiments; the approximation t_crit + t_0.8,df gives 78.6% at 19 df).

References: scipy.stats (ttest_1samp, t, norm, nct), binomial bands from scipy.stats.binom, and exact arithmetic.
"""

from __future__ import annotations

import math
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulations.analysis import NULL_BIAS_P, null_check, null_mean_test
from simulations.runner import Truth

# ------------------------------------------------------------------------------------------------ one run

RUN = {
    "seed": 11, "replicates": 12, "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 60, "candidates": 10},
    "rankers": {"depth": 4, "others": {"C": {"noise": 0.9}}},
    "users": {"population": 2000, "activity": {"sigma": 0.5}},
    "traffic": {"days": 2, "queries_per_day": 400, "batch_hours": 24},
    "designs": [{"name": "td", "type": "interleaving", "method": "team_draft"},
                {"name": "tdm", "type": "interleaving", "method": "team_draft_multileave",
                 "rankers": ["A", "B", "C"]}],
    "analysis": {"aa": False, "truth_impressions": 20000},
}


@pytest.fixture(scope="module")
def run():
    from simulations.config import config_from_mapping
    from simulations.job import simulate

    return simulate(config_from_mapping(RUN), output=None, workers=1)


def test_a_run_of_two_designs_tests_at_0_01_over_their_pairs_summed(run) -> None:
    rows = run.rows
    null_rows = rows[rows["metric"].astype(str).str.startswith("null:") & ~rows["aa"].astype(bool)]
    pairs = {d: sorted(set(g["metric"])) for d, g in null_rows.groupby("design")}
    assert {d: len(p) for d, p in pairs.items()} == {"td": 1, "tdm": 3}  # 1 + 3 = 4 null-checked pairs
    checked = 0
    for design, metrics in run.summary["designs"].items():
        for metric, e in metrics.items():
            n = e.get("null")
            if not n:
                continue
            checked += 1
            t = n["null_mean_test"]
            assert n["family_pairs"] == 4 and n["rate_excess"]["pairs"] == 4
            assert t["level"] == 0.01 / 4 and n["rate_excess"]["threshold"] == 0.01 / 4  # not 0.01 / 1 for td
            g = null_rows[(null_rows["design"] == design) & (null_rows["metric"] == "null:" + metric)]
            last = g[g["day"] == g["day"].max()]["estimate"].to_numpy()
            ref = stats.ttest_1samp(last, 0.0)
            assert t["pvalue"] == pytest.approx(float(ref.pvalue), rel=1e-9)
            assert t["critical_t"] == pytest.approx(stats.t.isf(0.01 / 8, last.size - 1), rel=1e-12)
            assert n["biased_null_replicates"] == bool(ref.pvalue < 0.0025)
    assert checked == 4
    from simulations.report import conventions

    conv = conventions(run)["null_check"]
    assert "0.01 / the run's number of null-checked pairs" in conv and "design's number of pairs" not in conv
    assert "detected with 80% power ((4 + z_0.8) x the null Delta's SE; nc x the null replicates' mean's SE" in conv


def test_verdict_states_the_run_level() -> None:
    from simulations.report import null_bias_evidence

    # 10 null replicates at mean 0.004, SE 0.001 (t 4.0, 9 df: p 0.0031 < 0.01, > 0.0025)
    z = np.random.default_rng(4).standard_normal(10)
    x = 0.004 + 0.001 * math.sqrt(10) * (z - z.mean()) / z.std(ddof=1)
    rows = pd.DataFrame([{"day": 1, "pvalue": 0.5, "estimate": v} for v in x])
    c = pd.DataFrame({"day": [1], "mean_se": [0.003]})
    t = Truth("td", "null:delta_ab", 0.0, 0.002, "mc")
    p = float(stats.ttest_1samp(x, 0.0).pvalue)
    assert 0.0025 < p < 0.01
    one = null_check(t, c, 0.05, 10, rows, pairs=1)
    four = null_check(t, c, 0.05, 10, rows, pairs=4)
    assert one["biased"] and not four["biased"]  # the same design, alone or with three more pairs in the run
    mant, exp = f"{p:.0e}".split("e")
    assert null_bias_evidence(one).endswith(f", t 4.0, p {mant}e{int(exp)} < 0.01 (the run's one null-checked pair)")
    both = null_check(t, c, 0.05, 10, pd.DataFrame([{"day": 1, "pvalue": 0.5, "estimate": v} for v in x + 0.004]),
                      pairs=4)  # t 8
    assert both["biased"] and null_bias_evidence(both).endswith(" < 0.0025 = 0.01 / 4 null-checked pairs of the run")


def test_ratio_lines_quote_the_same_level_as_the_verdict() -> None:
    """The ratio lines' 'biased (...)' (summary.json required_impressions_ratio.biased) and the null table's BIASED
    verdict quote the same evidence with its level (review 9's consistency check)."""
    from simulations.analysis import design_ratios
    from simulations.report import _ratio_lines, null_biased_verdict

    x = 0.004 + np.linspace(-0.003, 0.003, 30)  # mean 0.004, t about 12: p far below 0.01 / 2
    n = null_check(Truth("bal", "null:delta_ab", 0.0, 0.002, "mc"), pd.DataFrame({"day": [1], "mean_se": [0.003]}),
                   0.05, 30, pd.DataFrame([{"day": 1, "pvalue": 0.5, "estimate": v} for v in x]), pairs=2)
    e = {"metric": "delta_ab", "primary": True, "information_last_day": 9.0, "information_last_day_rel_se": 0.1,
         "analytic_required_impressions": 1e5, "analytic_required_impressions_rel_se": 0.1, "null": n}
    designs = {"ab": {"rr": {"metric": "rr", "primary": True, "information_last_day": 1.0,
                             "information_last_day_rel_se": 0.05, "analytic_required_impressions": 1e6,
                             "analytic_required_impressions_rel_se": 0.05}}, "bal": {"delta_ab": e}}
    r = {"reference": "ab", "last_day": 14, **design_ratios(designs, "ab")}
    evidence = null_biased_verdict(n, "delta_ab")[len("BIASED ("):].split("; favours")[0]
    assert evidence.endswith(" < 0.005 = 0.01 / 2 null-checked pairs of the run")
    lines = [ln for ln in _ratio_lines(r, 0.8, True) if "bal biased" in ln]
    assert len(lines) == 2 and all(f"bal biased ({evidence})" in ln for ln in lines)


def test_any_flag_rate_of_a_run_family_is_at_most_0_01() -> None:
    """4,000 runs of 4 unbiased null-checked pairs (10 normal null replicates each): the share of runs flagging some
    pair is inside the 99.9% binomial band of 1 - (1 - 0.0025)^4 = 0.00998 at 0.01 / 4, and far above it at 0.01 per
    pair (1 - 0.99^4 = 0.0394)."""
    x = np.random.default_rng(20261202).standard_normal((4000, 4, 10))
    for level, want in ((0.01 / 4, 1 - (1 - 0.0025) ** 4), (0.01, 1 - 0.99 ** 4)):
        k = sum(any(null_mean_test(x[i, j], level)["biased"] for j in range(4)) for i in range(4000))
        lo, hi = stats.binom.ppf([0.0005, 0.9995], 4000, want)
        assert lo <= k <= hi, (level, k, lo, hi)


# ------------------------------------------------------------------------------------------------ F4: 80% power

def test_detectable_bias_80_against_scipy() -> None:
    from simulations.report import null_detectable_text

    z = np.random.default_rng(9).standard_normal(20)
    x = 0.0001 + 0.0005 * math.sqrt(20) * (z - z.mean()) / z.std(ddof=1)  # SE 0.0005 exactly, 19 df
    t = null_mean_test(x, 0.01 / 3)
    crit = stats.t.isf(0.01 / 6, 19)
    nc = t["noncentrality_80"]
    assert t["se"] == pytest.approx(0.0005, rel=1e-12)
    assert t["detectable_bias_80"] == pytest.approx(nc * 0.0005, rel=1e-12)
    assert t["detectable_bias"] == pytest.approx(crit * 0.0005, rel=1e-12)  # the 50% figure, kept
    # nc by its definition, with scipy's noncentral t: rejects in 80% of runs (t_crit x SE: about half)
    assert stats.nct.sf(crit, 19, nc) + stats.nct.cdf(-crit, 19, nc) == pytest.approx(0.8, abs=1e-9)
    assert stats.nct.sf(crit, 19, crit) == pytest.approx(0.5, abs=0.03)
    # the normal-theory approximation t_crit + t_0.8,19 falls short of 80% (78.6%): nc is larger
    approx = crit + stats.t.ppf(0.8, 19)
    assert 0.78 < stats.nct.sf(crit, 19, approx) < 0.79 and nc > approx
    # and by Monte Carlo: 40,000 experiments of 20 normal null replicates with mean nc x (true SE 1 / sqrt 20)
    sims = np.random.default_rng(20261202).standard_normal((40_000, 20)) + nc / math.sqrt(20)
    tt = sims.mean(axis=1) / (sims.std(axis=1, ddof=1) / math.sqrt(20))
    share = float(np.mean(np.abs(tt) > crit))
    assert abs(share - 0.8) < 4 * math.sqrt(0.8 * 0.2 / 40_000), share
    rows = pd.DataFrame([{"day": 1, "pvalue": 0.5, "estimate": v} for v in x])
    n = null_check(Truth("td", "null:delta_ab", 0.0003, 0.0017, "mc"), pd.DataFrame({"day": [1], "mean_se": [0.003]}),
                   0.05, 20, rows, pairs=3)
    z8 = stats.norm.ppf(0.8)
    assert n["detectable_bias_80"] == pytest.approx((4 + z8) * 0.0017, rel=1e-12)
    # exactly 80% for a normal z against the 4-SE rule
    d = n["detectable_bias_80"] / 0.0017
    assert stats.norm.sf(4 - d) + stats.norm.cdf(-4 - d) == pytest.approx(0.8, abs=1e-9)
    text = null_detectable_text(n, 0.01)
    m = nc * 0.0005
    assert text == (f"{(4 + z8) * 0.0017:.3g} ({(4 + z8) * 0.17:.0%} of the effect) with 80% power by the 4-SE rule "
                    "on the null Delta ((4 + z_0.8 0.84) x its SE); "
                    f">= {m:.3g} ({m / 0.01:.0%} of the effect) with 80% power by the null replicates' mean test "
                    f"({nc:.2f} x its SE, noncentral t; t_crit {crit:.2g}, 19 df)")
    assert "0.00823 (82% of the effect)" in text and "t_crit 3.4, 19 df" in text
    # a summary from before detectable_bias_80: the same figures from se, level and df
    old = {"se": 0.0017, "null_mean_test": {k: v for k, v in t.items() if k not in (
        "detectable_bias_80", "noncentrality_80", "critical_t", "detectable_bias")}}
    assert null_detectable_text(old, 0.01) == text


# ------------------------------------------------------------------------------------------------ a sweep

P = 20  # points, one interleaving design with one pair each: 20 null checks, sweep level 0.01 / 20 = 0.0005


def _entry(p: float | None, rules: list[str], days: float = 12.5) -> dict:
    """A point's team-draft entry: its null check's mean test at p (flagged below 0.01, its run's level) and the
    sizes its point withheld when flagged."""
    sizes = {"analytic_required_days": days, "analytic_required_impressions": days * 1000.0,
             "analytic_required_impressions_unstable": False, "analytic_required_users": 900.0}
    biased = bool(rules)
    n = {"delta": 0.0001, "se": 0.0005, "z": 0.2, "biased": biased, "bias_rules": rules,
         "biased_null_replicates": "null_replicates_mean" in rules, "family_pairs": 1, "replicates": 20,
         "null_mean_test": {"mean": 0.001, "se": 0.0003, "t": 3.4, "df": 19, "pvalue": p, "level": 0.01,
                            "biased": "null_replicates_mean" in rules}}
    e = {"metric": "delta_ab", "primary": True, "true_effect": 0.01, "true_effect_se": 0.0004, "detectable": True,
         "final_day": {"day": 3, "power": 0.7, "analytic_power": None if biased else 0.72, "mean_impressions": 2400.0},
         "variance_model": {"a": 0.5, "b": 0.0}, "null": n, "biased_estimate": False}
    if biased:
        e.update({k: None for k in sizes})
        e["analytic_if_unbiased"] = {**sizes, "analytic_power": 0.72}
        e["analytic_withheld"] = "biased: ..."
    else:
        e.update(sizes)
    return e


#: point 3: p 0.003, between 0.0005 and 0.01: BIASED?; point 7: p 1e-4 < 0.0005: BIASED; point 9: the 4-SE rule
FLAGS = {3: (0.003, ["null_replicates_mean"]), 7: (1e-4, ["null_replicates_mean"]), 9: (0.4, ["null_delta"])}


def _summaries() -> dict[int, dict]:
    out = {}
    for i in range(P):
        p, rules = FLAGS.get(i, (0.3, []))
        out[i] = {"designs": {"td": {"delta_ab": _entry(p, rules)}}, "offline": {"delta": {"weighted": 0.02}},
                  "config": {"traffic": {"queries_per_day": 800, "days": 3}, "analysis": {"alpha": 0.05}},
                  "conventions": {"target_power": 0.8, "alpha": 0.05, "null_check": "x"}}
    return out


def test_sweep_family_marks_and_expected_false_flags() -> None:
    from simulations.sweep_null import HARD, WEAK, null_family, null_family_text

    f = null_family(_summaries())
    assert f["checks"] == 20 and f["level"] == 0.01 / 20 == 0.0005
    assert {c["point"]: c["mark"] for c in f["cells"] if c["mark"]} == {3: WEAK, 7: HARD, 9: HARD}
    assert (f["flagged"], f["hard"], f["weak"]) == (3, 2, 1)
    # expected false flags if every design were unbiased: 20 x (0.01 + 2 Phi(-4)); hard: 0.01 + 20 x 2 Phi(-4)
    p4 = 2 * stats.norm.sf(4)
    assert NULL_BIAS_P == pytest.approx(p4, rel=1e-12)
    assert f["expected_false_flags"] == pytest.approx(20 * (0.01 + p4), rel=1e-12)
    assert f["expected_false_hard"] == pytest.approx(0.01 + 20 * p4, rel=1e-12)
    text = null_family_text(f)
    assert "3 of 20 null-checked pairs flagged at their run's level (expected if every design were unbiased: 0.20)" \
        in text and "2 BIASED at the sweep's level 0.0005 = 0.01 / 20" in text and "(expected: 0.011)" in text
    assert "1 BIASED? (flagged at its run's level only: sizes kept)" in text


def test_sweep_page_keeps_the_sizes_of_a_biased_question_point() -> None:
    from simulations.html_report.sweep import answer_rows, calibration_section

    points = _summaries()
    summary = {"axes": [], "rows": [{"point": i, "design": "td", "metric": "delta_ab"} for i in range(P)]}
    rows = {int(r[0]): r for r in answer_rows(summary, points)}
    cell = unescape(str(rows[3][1]))
    assert "BIASED?" in cell  # the weak mark, with its sizes: 12,500 impressions, days ~12.5*
    assert "12,500" in unescape(str(rows[3][8])) and "12.5" in unescape(str(rows[3][7]))
    assert "BIASED?" not in unescape(str(rows[7][1])) and "biased" in unescape(str(rows[7][1]))
    assert unescape(str(rows[7][8])).endswith("biased</span>") and "12,500" not in unescape(str(rows[7][8]))
    assert "12,500" in unescape(str(rows[0][8])) and "biased" not in unescape(str(rows[0][1]))
    page = unescape(str(calibration_section(summary, points)))
    assert "BIASED?</span> (null replicates' mean" in page
    assert ("p 3e-3 < 0.01 (the run's one null-checked pair); not < 0.0005 = 0.01 / 20 null-checked pairs of the "
            "sweep: sizes kept)") in page
    assert page.count(">BIASED</span> (null replicates' mean") == 1 and ">BIASED</span> (null Delta" in page
    assert "(expected if every design were unbiased: 0.20)" in page


def test_points_table_terminal_and_shrinkage_inputs(tmp_path: Path) -> None:
    from simulations.sweep import sweep_from_mapping
    from simulations.sweep_outputs import observations, point_rows, terminal_table

    base = {"collection": {"type": "synthetic", "n_queries": 30, "candidates": 10},
            "designs": [{"name": "td", "type": "interleaving", "method": "team_draft"}]}
    sweep = sweep_from_mapping({"base": base, "grid": {"rankers.B.noise": [0.5 + 0.01 * i for i in range(P)]},
                                "output": str(tmp_path / "s"), "seed": 1, "replicates": 4})
    rows = point_rows(sweep, _summaries())
    assert list(rows["null_mark"].fillna("")) == ["BIASED?" if i == 3 else "BIASED" if i in (7, 9) else ""
                                                  for i in range(P)]
    assert list(rows["analytic_withheld"]) == [i in (7, 9) for i in range(P)]
    assert rows.loc[3, "analytic_required_days"] == 12.5 and rows.loc[3, "analytic_required_impressions"] == 12500.0
    assert rows.loc[7, "analytic_required_days"] is None or math.isnan(rows.loc[7, "analytic_required_days"])
    text = terminal_table(rows, ["point", "rankers.B.noise", "design", "analytic_required_days"])
    lines = {int(ln.split()[0]): ln for ln in text.splitlines() if ln.strip()[:1].isdigit() and "td" in ln}
    assert lines[3].endswith("12.5 BIASED?") and lines[7].endswith("biased") and lines[0].endswith("12.5")
    assert "3 of 20 null-checked pairs flagged at their run's level" in text
    obs, _ = observations(sweep, _summaries(), tmp_path)
    # the shrinkage study keeps a BIASED? point (its normal-theory shares, its MDE), as its sizes are shown
    assert list(obs["analytic_withheld"]) == [i in (7, 9) for i in range(P)]


def test_a_real_sweep_writes_its_family(tmp_path: Path) -> None:
    """Two points of team-draft + balanced (2 null-checked pairs per run): the sweep's summary.json, points.csv and
    report.html carry the family of 4 checks at 0.0025, its counts recomputed from the points' own summaries."""
    import json

    from simulations.sweep import run_sweep, sweep_from_mapping

    base = {k: v for k, v in RUN.items() if k not in ("seed", "replicates", "workers")}
    base["designs"] = [{"name": "td", "type": "interleaving", "method": "team_draft"},
                       {"name": "bal", "type": "interleaving", "method": "balanced"}]
    out = tmp_path / "sweep"
    run_sweep(sweep_from_mapping({"base": base, "grid": {"rankers.B.noise": [0.7, 0.9]}, "output": str(out),
                                  "seed": 3, "replicates": 6}), workers=1, progress=False, writers=0)
    s = json.loads((out / "summary.json").read_text())
    f = s["null_family"]
    assert f["checks"] == 4 and f["level"] == 0.0025 and f["points"] == 2
    flagged = weak = 0
    for p in s["points"]:
        point = json.loads((out / p["folder"] / "summary.json").read_text())
        for e in point["designs"].values():
            for m in e.values():
                n = m["null"]
                assert n["family_pairs"] == 2 and n["null_mean_test"]["level"] == 0.005
                flagged += n["biased"]
                weak += bool(n["bias_rules"] == ["null_replicates_mean"] and n["null_mean_test"]["pvalue"] >= 0.0025)
    assert (f["flagged"], f["weak"]) == (flagged, weak)
    assert f["expected_false_flags"] == pytest.approx(2 * 0.01 + 4 * NULL_BIAS_P, rel=1e-12)
    rows = pd.read_csv(out / "points.csv")
    assert set(rows["null_mark"].fillna("")) <= {"", "BIASED", "BIASED?"}
    page = unescape((out / "report.html").read_text())
    assert f"{flagged} of 4 null-checked pairs flagged at their run's level (expected if every design were " \
           "unbiased: 0.02)" in page
