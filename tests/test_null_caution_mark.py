"""Review 12, F2: a design whose null check did not flag it but whose evidence of a bias is notable carries '~' on
its days and impressions in the main table (terminal and report.html share the cells), on its ratio lines and on
the lines under the table that quote its sizes, with a legend line. The mark's rule is family-wise: the null Delta's
z or the null replicates' mean test with p < 0.05 / (2 x the run's null-checked pairs), so that a run of unbiased
designs carries it with probability at most 0.05 (the per-test rule it replaced, z > 2 or p < 0.05, marks 9.3% of
unbiased designs and 25% of runs of three under exact-null distributions; 11.6% and 30.7% measured on 316 runs of
three team-draft designs at configs/interleaving.yaml's sizes)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from scipy import stats

from simulations.analysis import design_ratios
from simulations.report_null import NULL_CAUTION_LEGEND, null_caution, null_caution_keys
from simulations.report_ratios import _ratio_lines
from simulations.report_sizes import sample_size_cells

ENTRY = {
    "final_day": {"analytic_power": 0.9},
    "days_to_target_power": 3,
    "analytic_required_impressions": 12_345.0,
    "analytic_required_users": 1_000.0,
    "null": {"biased": False, "biased_null_replicates": False, "z": 0.5, "delta": 0.0001, "family_pairs": 1,
             "null_mean_test": {"pvalue": 0.4, "mean": 0.0, "se": 0.001, "t": 0.8}},
}


def _with(**null):
    e = copy.deepcopy(ENTRY)
    e["null"].update(null)
    return e


def _z_at(p: float) -> float:
    """The |z| whose two-sided normal p-value is ``p`` (scipy, independent of the module's erfc)."""
    return float(stats.norm.isf(p / 2.0))


def _mean_test(p: float) -> dict:
    return {"pvalue": p, "mean": 0.001, "se": 0.0005, "t": 2.0}


def test_the_mark_follows_the_evidence():
    assert not null_caution(ENTRY)
    plain = sample_size_cells(ENTRY, 10_000)
    assert plain["days"] == "3" and plain["impressions"] == "12,345"
    # review 12's quick run: balanced's null Delta at z 3.6 (p 3e-4), unflagged below 4, two null-checked pairs
    z36 = sample_size_cells(_with(z=3.6, family_pairs=2), 10_000)
    assert z36["days"] == "3~" and z36["impressions"] == "12,345~" and z36["users"] == "1,000"
    # the family level: 0.05 / (2 tests x pairs) with the mean test, 0.05 / pairs without it
    for pairs, tests in ((1, 2), (2, 2), (3, 2), (1, 1), (4, 1)):
        level = 0.05 / (tests * pairs)
        mean = _mean_test(0.5) if tests == 2 else None
        z = _z_at(level)  # 2.24 (1 pair), 2.50 (2), 2.64 (3), 1.96 (1 test, 1 pair), 2.50 (1 test, 4 pairs)
        assert not null_caution(_with(z=z - 0.01, family_pairs=pairs, null_mean_test=mean))
        assert null_caution(_with(z=z + 0.01, family_pairs=pairs, null_mean_test=mean))
        if tests == 2:
            assert null_caution(_with(family_pairs=pairs, null_mean_test=_mean_test(level * 0.99)))
            assert not null_caution(_with(family_pairs=pairs, null_mean_test=_mean_test(level * 1.01)))
    # the per-test rule's marks that the family level drops: z 2.2 and p 0.03 in a run of two pairs
    assert not null_caution(_with(z=2.2, family_pairs=2)) and not null_caution(
        _with(family_pairs=2, null_mean_test=_mean_test(0.03)))
    # a summary from before family_pairs counts one pair
    old = _with(z=2.3)
    del old["null"]["family_pairs"]
    assert null_caution(old) and not null_caution(_with(z=2.3, family_pairs=2))
    # a flagged design is 'biased', not '~'; an entry without a null check has no mark
    assert not null_caution(_with(z=5.0, biased=True))
    assert not null_caution(_with(z=3.0, biased_null_replicates=True))
    assert sample_size_cells({k: v for k, v in ENTRY.items() if k != "null"}, 10_000)["days"] == "3"


def test_unstable_and_caution_marks_combine():
    e = _with(z=3.0)
    e["analytic_required_impressions_unstable"] = True
    assert sample_size_cells(e, 10_000)["impressions"] == "12,345?~"
    assert NULL_CAUTION_LEGEND.startswith("'~' = bias not excluded") and "0.05 / (2 x the run's null-checked " \
        "pairs)" in NULL_CAUTION_LEGEND.replace("\n", " ")


def test_under_no_bias_a_run_is_marked_at_most_at_the_family_level():
    """Under an exact null the null Delta's z is |N(0, 1)| and the mean test's p-value uniform, independent (the truth's
    Monte Carlo and the null replicates draw from separate streams). 40,000 runs of three unbiased designs: the share
    of runs with some design marked is 1 - (1 - 0.05 / 6)^6 = 0.0490 (Sidak's exact value for six independent tests
    at 0.05 / 6), inside a 4-SE binomial band; the per-test rule it replaced marks 1 - (0.9545 x 0.95)^3 = 0.254."""
    rng = np.random.default_rng(20261202)
    runs, k = 40_000, 3
    z = np.abs(rng.standard_normal((runs, k)))
    p = rng.random((runs, k))
    marked = np.zeros((runs, k), dtype=bool)
    for i in range(runs):
        for j in range(k):
            marked[i, j] = null_caution({"null": {"biased": False, "z": float(z[i, j]), "family_pairs": k,
                                                  "null_mean_test": {"pvalue": float(p[i, j])}}})
    expected_run = 1.0 - (1.0 - 0.05 / (2 * k)) ** (2 * k)
    se_run = np.sqrt(expected_run * (1 - expected_run) / runs)
    assert abs(marked.any(axis=1).mean() - expected_run) < 4 * se_run
    expected_design = 1.0 - (1.0 - 0.05 / (2 * k)) ** 2
    se_design = np.sqrt(expected_design * (1 - expected_design) / (runs * k))  # designs independent here
    assert abs(marked.mean() - expected_design) < 4 * se_design
    # the per-test rule on the same draws: far above (the reason for the family level)
    per_test = (z > 2.0) | (p < 0.05)
    assert per_test.any(axis=1).mean() == pytest.approx(1 - (stats.norm.cdf(2) - stats.norm.cdf(-2)) ** k
                                                        * 0.95 ** k, abs=4 * 0.0022)


def _ratio_entry(metric: str, info: float, n: float, primary: bool = True, **null) -> dict:
    e = {"metric": metric, "primary": primary, "information_last_day": info, "information_last_day_rel_se": 0.05,
         "analytic_required_impressions": n, "analytic_required_impressions_rel_se": 0.05}
    if null:
        e["null"] = {"biased": False, "biased_null_replicates": False, "family_pairs": 2, **null}
    return e


def test_ratio_lines_carry_the_mark_of_either_size():
    designs = {"ab": {"m": _ratio_entry("m", 1.0, 1e6)},
               "td": {"m": _ratio_entry("m", 10.0, 1e5, z=0.3)},
               "bal": {"m": _ratio_entry("m", 17.8, 5.6e4, z=3.6)}}
    r = {"reference": "ab", "last_day": 7, **design_ratios(designs, "ab")}
    keys = null_caution_keys({"designs": designs})
    assert keys == {"bal", "bal/m"}
    plain = "\n".join(_ratio_lines(r, 0.8, True))
    assert "~" not in plain.replace("td ~ bal", "")
    lines = _ratio_lines(r, 0.8, True, caution=keys)
    eff = next(ln for ln in lines if "information per impression" in ln)
    need = next(ln for ln in lines if "impressions needed" in ln)
    assert "bal 17.8x +-7%~" in eff and "td 10.0x +-7%," in eff
    assert "bal 0.0560x +-7% (17.9x fewer)~" in need and "td 0.100x +-7% (10.0x fewer)," in need
    assert "'~': its or the reference's size carries the main table's '~'" in "\n".join(lines)
    # a marked reference marks every ratio
    lines = _ratio_lines(r, 0.8, True, caution={"ab"})
    need = next(ln for ln in lines if "impressions needed" in ln)
    assert "td 0.100x +-7% (10.0x fewer)~" in need and "bal 0.0560x +-7% (17.9x fewer)~" in need


def test_multileaving_ratio_marks_follow_their_pairs():
    pairs = ["delta_B_vs_A", "delta_C_vs_A", "delta_D_vs_A"]
    sizes = {"delta_B_vs_A": 0.244e6, "delta_C_vs_A": 0.613e6, "delta_D_vs_A": 0.765e6}
    ref = {p: _ratio_entry(p, 1.0, 1e6, p == pairs[0]) for p in pairs}
    # pm's B vs A pair (the range's low end, not the median) carries the mark
    pm = {p: _ratio_entry(p, 1.2, sizes[p], p == pairs[0], z=3.0 if p == pairs[0] else 0.1) for p in pairs}
    r = {"reference": "tdm", "last_day": 7, **design_ratios({"tdm": ref, "pm": pm}, "tdm")}
    keys = null_caution_keys({"designs": {"tdm": ref, "pm": pm}})
    assert keys == {"pm", "pm/delta_B_vs_A"}
    need = next(ln for ln in _ratio_lines(r, 0.8, False, caution=keys) if "impressions needed" in ln)
    assert need.endswith("pm 0.613x +-7% [0.244~-0.765 over 3 pairs] (1.63x fewer)")
    # the median's pair marked: the median carries it too
    keys = frozenset({"pm/delta_C_vs_A"})
    need = next(ln for ln in _ratio_lines(r, 0.8, False, caution=keys) if "impressions needed" in ln)
    assert "pm 0.613x +-7% [0.244-0.765 over 3 pairs] (1.63x fewer)~" in need


def test_the_terminal_and_the_page_mark_and_explain_it():
    """A real small run's summary with team_draft's null Delta at z 3.6 (unflagged): the terminal's main table, its
    ratio lines and the '?' / '*' lines under the table, and report.html's answer table, ratios and legend, mark its
    sizes and print the legend; the summary without the evidence has neither."""
    import html
    import re

    from simulations import simulate
    from simulations.config import config_from_mapping
    from simulations.html_report.answer import answer_section
    from simulations.report import terminal_summary

    result = simulate(config_from_mapping({
        "seed": 3, "replicates": 3, "workers": 1, "collection": {"n_queries": 80, "candidates": 10},
        "rankers": {"depth": 5, "A": {"noise": 1.0}, "B": {"noise": 0.4}}, "offline_metric": "nDCG@5",
        "users": {"population": 800}, "traffic": {"days": 2, "queries_per_day": 1500, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query"},
                    {"name": "td", "type": "interleaving", "method": "team_draft"}],
        "analysis": {"aa": False, "truth_impressions": 20_000}}))
    legend_start = NULL_CAUTION_LEGEND[:40]
    e = result.summary["designs"]["td"]["delta_ab"]
    assert isinstance(e.get("null"), dict) and e["null"]["family_pairs"] == 1
    e["null"].update({"z": 0.5, "biased": False, "biased_null_replicates": False, "null_mean_test": None})
    # an unstable size, so that the '?' range line quotes it (the run's own is stable)
    e["analytic_required_impressions_unstable"] = True
    e["analytic_required_impressions_range"] = [1000.0, 2000.0]
    assert not null_caution(e)

    def texts() -> tuple[str, str, list[str], list[str]]:
        text = terminal_summary(result)
        page = html.unescape(str(answer_section(result.summary)))
        ratio = [ln for ln in text.splitlines() if "relative to ab:" in ln]
        items = re.findall(r"<li>(td: information per impression.*?)</li>", page)
        assert len(ratio) == 2 and len(items) == 1
        return text, page, ratio, items

    text, page, ratio, items = texts()
    assert legend_start not in text and legend_start not in page
    assert not any("~" in ln for ln in ratio) and "~" not in items[0]
    assert "td/delta_ab: 1,000 to 2,000" in text and "td/delta_ab: 1,000 to 2,000" in page
    assert "'~': its or the reference's size" not in text + page

    e["null"]["z"] = 3.6
    cells = sample_size_cells(e, result.config.users.population)
    assert cells["days"].endswith("~") and cells["impressions"].endswith("?~")
    text, page, ratio, items = texts()
    row = next(ln for ln in text.splitlines() if ln.lstrip().startswith("td ") and "delta_ab" in ln)
    assert cells["impressions"] in row and legend_start in text.replace("\n  ", " ")
    assert cells["impressions"] in page and legend_start in page
    # the ratio lines: 'td 666x +-15%~' and 'td 0.00150x +-15%?* (666x fewer)~' (numbers of this run)
    r = result.summary["required_impressions_ratio"]
    assert r["reference"] == "ab" and r["ratios"]["td"] < 1
    assert re.search(r"relative to ab: td \S+x \+-\d+%~$", ratio[0]), ratio[0]
    assert re.search(r"relative to ab: td \S+x \+-\d+%\??\*? \(\S+x fewer\)~", ratio[1]), ratio[1]
    assert "'~': its or the reference's size carries the main table's '~'" in text
    assert re.fullmatch(r"td: information per impression \S+x \+-\d+%~ ab's; impressions needed (for 80% power )?"
                        r"\S+x \+-\d+%\??\*? ab's \(\S+x fewer\)~", items[0]), items[0]
    assert "'~': its or the reference's size carries the answer table's '~'" in page
    # the '?' range line under the table quotes the marked size: both ends carry the mark, terminal and page
    assert "td/delta_ab: 1,000~ to 2,000~" in text and "td/delta_ab: 1,000~ to 2,000~" in page
    # the '*' extrapolation line quotes days: marked when the design's are (ab's, unmarked, are not)
    from simulations.report_sizes import _extrapolation_lines, extrapolated_entries

    far = extrapolated_entries(result.summary)
    assert far and all(d == "ab" for d, *_ in far)
    e_far = copy.deepcopy(result.summary)
    e_far["designs"]["ab"]["clicks_per_query"]["null"] = copy.deepcopy(e["null"])
    line = " ".join(_extrapolation_lines(e_far, 2))
    assert re.search(r"ab/clicks_per_query ~\S+ days~ = ", line) and re.search(r"ab/abandonment ~\S+ days = ", line)
