"""The report page's ratio items carry the terminal's '?' and '*' (closing note: 'the HTML ratio text leaves out
'?' and '*''): a size ratio whose either size is unstable earns '?' (unless its relative SE already did) and one
whose either size is extrapolated beyond EXTRAPOLATION_FLAG x the simulated days earns '*', in both outputs, from
one function (simulations.report_ratios.ratio_size_marks); the page's lead then explains '*'."""

from __future__ import annotations

import copy
import dataclasses
import html
import re

import pytest

from simulations import simulate
from simulations.config import config_from_mapping
from simulations.html_report.answer import answer_section
from simulations.report import terminal_summary


@pytest.fixture(scope="module")
def result():
    return simulate(config_from_mapping({
        "seed": 3, "replicates": 2, "workers": 1, "collection": {"n_queries": 60, "candidates": 8},
        "rankers": {"depth": 5, "A": {"noise": 1.0}, "B": {"noise": 0.4}}, "offline_metric": "nDCG@5",
        "users": {"population": 500}, "traffic": {"days": 2, "queries_per_day": 800, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query"},
                    {"name": "td", "type": "interleaving", "method": "team_draft"}],
        "analysis": {"aa": False, "null": False, "truth_impressions": 10_000}}))


def _marks(result, unstable: bool, far: bool) -> tuple[str, str]:
    s = copy.deepcopy(result.summary)
    r = dataclasses.replace(result, summary=s)
    e = s["designs"]["td"]["delta_ab"]
    assert e["primary"] and isinstance(s["required_impressions_ratio"]["ratios"].get("td"), float)
    s["required_impressions_ratio"].setdefault("ratios_rel_se", {})["td"] = 0.05  # '?' only from the size
    e["analytic_required_impressions_unstable"] = unstable
    e["analytic_required_impressions_extrapolated"] = far
    for ref in s["designs"]["ab"].values():  # the reference's own size neither
        ref["analytic_required_impressions_unstable"] = ref["analytic_required_impressions_extrapolated"] = False
    text = terminal_summary(r)
    line = next(ln for ln in text.splitlines() if "impressions needed for" in ln and "relative to ab" in ln)
    term = re.search(r"td [0-9.,]+x \+-5%([?*]*)", line)
    page = html.unescape(str(answer_section(s)))
    item = re.search(r"impressions needed (?:for \d+% power )?[0-9.,]+x \+-5%([?*]*)", page)
    assert term and item, (line, page[:2000])
    lead = "'*': a size ratio from a size extrapolated" in page
    assert lead is far
    return term.group(1), item.group(1)


@pytest.mark.parametrize(("unstable", "far", "marks"), [(False, False, ""), (True, False, "?"), (False, True, "*"),
                                                         (True, True, "?*")])
def test_page_and_terminal_mark_the_size_ratio_alike(result, unstable: bool, far: bool, marks: str) -> None:
    assert _marks(result, unstable, far) == (marks, marks)
