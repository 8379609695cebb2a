"""Review 17, F2: the '~' legend states the level the mark's rule used in this run, not a formula that holds for
some runs only. The rule (:func:`simulations.report_null.null_caution_level`) is 0.05 / (2 x the run's null-checked
pairs) when the null replicates' mean test ran, 0.05 / pairs when only the null Delta's z did (one null replicate),
and a summary from before ``family_pairs`` counts one pair. The legend used to say 0.05 / (2 x pairs) for all three;
now each marked entry's level is in it, and an entry is marked exactly when its p is below the level the legend
states (the z's two-sided p from scipy, independent of the module's erfc)."""

from __future__ import annotations

import re

import pytest
from scipy import stats

from simulations.report import terminal_summary
from simulations.report_null import null_caution, null_caution_legend

CASES = [  # (family_pairs or None, whether the null replicates' mean test ran, the level the legend must state)
    (1, True, 0.05 / 2), (3, True, 0.05 / 6), (1, False, 0.05), (3, False, 0.05 / 3), (None, False, 0.05),
    (None, True, 0.05 / 2),
]


def _entry(pairs: int | None, mean_test: bool, p: float) -> dict:
    null = {"biased": False, "biased_null_replicates": False, "z": float(stats.norm.isf(p / 2.0))}
    if pairs is not None:
        null["family_pairs"] = pairs
    if mean_test:
        null["null_mean_test"] = {"pvalue": 0.9, "mean": 0.0, "se": 0.001, "t": 0.1}
    return {"null": null}


def _stated(legend: str) -> list[float]:
    return [float(x) for x in re.findall(r"\) = ([0-9.e-]+)|pairs? = ([0-9.e-]+)|/ [12] = ([0-9.e-]+)", legend)
            for x in x if x]


@pytest.mark.parametrize(("pairs", "mean_test", "level"), CASES)
def test_the_legend_states_the_level_the_mark_uses(pairs: int | None, mean_test: bool, level: float) -> None:
    marked = _entry(pairs, mean_test, level * 0.9)
    summary = {"designs": {"td": {"delta_ab": marked}}}
    legend = null_caution_legend(summary)
    assert _stated(legend) == [float(f"{level:.2g}")], legend
    # marked just below the stated level, not just above it
    assert null_caution(marked) and not null_caution(_entry(pairs, mean_test, level * 1.1))
    if pairs is None:
        assert "one pair assumed" in legend and "does not record" in legend
    else:
        assert "assumed" not in legend
    if not mean_test:
        assert "the null Delta's z alone" in legend


def test_a_run_with_two_rules_states_both() -> None:
    """Entries with and without the mean test in one run: both levels, each once."""
    summary = {"designs": {"a": {"m": _entry(3, True, 0.001)}, "b": {"m": _entry(3, False, 0.001)},
                           "c": {"m": _entry(3, True, 0.5)}}}  # c is not marked: its rule is a's anyway
    assert sorted(_stated(null_caution_legend(summary))) == [float(f"{0.05 / 6:.2g}"), float(f"{0.05 / 3:.2g}")]


def test_a_mark_without_the_mean_test_states_its_level() -> None:
    """The legend of a run whose marked design had no mean test says 0.05 / pairs (it said
    0.05 / (2 x pairs) before: a mark at p = 0.012 in a run of 3 pairs under a stated level of 0.0083)."""
    e = _entry(3, False, 0.012)
    assert null_caution(e)
    legend = null_caution_legend({"designs": {"td": {"delta_ab": e}}})
    assert "0.05 / 3 null-checked pairs = 0.017" in legend and "0.0083" not in legend


def test_terminal_and_page_print_the_summarys_legend() -> None:
    """On a real small run with its team-draft design's null check turned into a mark without a mean test, the
    terminal and the report page both print the legend of that summary."""
    import html

    from simulations import simulate
    from simulations.config import config_from_mapping
    from simulations.html_report.answer import answer_section

    result = simulate(config_from_mapping({
        "seed": 3, "replicates": 2, "workers": 1, "collection": {"n_queries": 60, "candidates": 8},
        "rankers": {"depth": 5, "A": {"noise": 1.0}, "B": {"noise": 0.4}}, "offline_metric": "nDCG@5",
        "users": {"population": 500}, "traffic": {"days": 2, "queries_per_day": 800, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query"},
                    {"name": "td", "type": "interleaving", "method": "team_draft"}],
        "analysis": {"aa": False, "truth_impressions": 10_000}}))
    e = result.summary["designs"]["td"]["delta_ab"]
    assert isinstance(e.get("null"), dict)
    e["null"].update({"z": float(stats.norm.isf(0.012 / 2)), "biased": False, "biased_null_replicates": False,
                      "null_mean_test": None, "family_pairs": 3})
    text = " ".join(terminal_summary(result).split())
    page = " ".join(html.unescape(str(answer_section(result.summary))).split())
    for out in (text, page):
        assert "0.05 / 3 null-checked pairs = 0.017 (the null Delta's z alone" in out
