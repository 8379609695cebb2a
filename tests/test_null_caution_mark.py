"""Review 12, F2: a design whose null check did not flag it but whose evidence of a bias is notable carries '~' on
its days and impressions in the main table (terminal and report.html share the cells), with a legend line."""

from __future__ import annotations

import copy

from simulations.report_null import NULL_CAUTION_LEGEND, null_caution
from simulations.report_sizes import sample_size_cells

ENTRY = {
    "final_day": {"analytic_power": 0.9},
    "days_to_target_power": 3,
    "analytic_required_impressions": 12_345.0,
    "analytic_required_users": 1_000.0,
    "null": {"biased": False, "biased_null_replicates": False, "z": 0.5, "delta": 0.0001,
             "null_mean_test": {"pvalue": 0.4, "mean": 0.0, "se": 0.001, "t": 0.8}},
}


def _with(**null):
    e = copy.deepcopy(ENTRY)
    e["null"].update(null)
    return e


def test_the_mark_follows_the_evidence():
    assert not null_caution(ENTRY)
    plain = sample_size_cells(ENTRY, 10_000)
    assert plain["days"] == "3" and plain["impressions"] == "12,345"
    # the null Delta's z beyond 2 (review 12's quick run: z 3.6, p 3e-4, unflagged below 4)
    z36 = sample_size_cells(_with(z=3.6), 10_000)
    assert z36["days"] == "3~" and z36["impressions"] == "12,345~" and z36["users"] == "1,000"
    assert not null_caution(_with(z=2.0)) and null_caution(_with(z=2.01))
    # the null replicates' mean test below 0.05 but not flagged
    e = _with(null_mean_test={"pvalue": 0.018, "mean": 0.00174, "se": 0.00067, "t": 2.6})
    assert null_caution(e) and sample_size_cells(e, 10_000)["days"] == "3~"
    # a flagged design is 'biased', not '~'; an entry without a null check has no mark
    assert not null_caution(_with(z=5.0, biased=True))
    assert sample_size_cells({k: v for k, v in ENTRY.items() if k != "null"}, 10_000)["days"] == "3"


def test_unstable_and_caution_marks_combine():
    e = _with(z=3.0)
    e["analytic_required_impressions_unstable"] = True
    assert sample_size_cells(e, 10_000)["impressions"] == "12,345?~"
    assert NULL_CAUTION_LEGEND.startswith("'~' = bias not excluded") and "2 SE" in NULL_CAUTION_LEGEND



def test_the_terminal_and_the_page_mark_and_explain_it():
    """A real small run's summary with team_draft's null Delta at z 3.6 (unflagged): the terminal's main table and
    report.html's answer table mark its days and impressions and print the legend; the unedited summary has
    neither."""
    import html

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
    assert isinstance(e.get("null"), dict)
    e["null"].update({"z": 0.5, "biased": False, "biased_null_replicates": False, "null_mean_test": None})
    assert not null_caution(e)
    text, page = terminal_summary(result), html.unescape(str(answer_section(result.summary)))
    assert legend_start not in text and legend_start not in page
    e["null"]["z"] = 3.6
    cells = sample_size_cells(e, result.config.users.population)
    assert cells["days"].endswith("~") and cells["impressions"].endswith("~")
    text, page = terminal_summary(result), html.unescape(str(answer_section(result.summary)))
    row = next(ln for ln in text.splitlines() if ln.lstrip().startswith("td ") and "delta_ab" in ln)
    assert cells["impressions"] in row and legend_start in text.replace("\n  ", " ")
    assert cells["impressions"] in page and legend_start in page
