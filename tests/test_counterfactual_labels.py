"""A counterfactual design's rows in the answer table are estimators of the design's metric, not metrics: the
terminal says which metric they estimate under the table, the HTML report's metric cell names it under the estimator,
and the ratio lines (information per impression, impressions needed relative to the A/B test), which read the
design's first estimator, name that estimator."""

from __future__ import annotations

import re

import pytest
from test_simulation_counterfactual import _config, _run


@pytest.fixture(scope="module")
def labelled_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("labels")
    cf = {"name": "cf", "type": "counterfactual", "metric": "reciprocal_rank",
          "logger": {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 12, "ranker": "A"},
          "estimators": ["rips", "snips"]}
    cfg = _config(replicates=4, designs=[{"name": "ab", "type": "ab", "metric": "clicks_per_query"}, cf])
    return _run(cfg, output=out), out


def test_terminal_names_the_estimated_metric_and_the_ratio_lines_the_estimator(labelled_run):
    from simulations.report import terminal_summary

    run, _ = labelled_run
    lines = terminal_summary(run).splitlines()
    assert "  cf: each row an off-policy estimator of reciprocal_rank (V(B) - V(A) from the logger's log; the " \
           "counterfactual section below)" in lines
    ratio = [ln for ln in lines if ln.startswith(("  information per impression", "  impressions needed for"))]
    assert len(ratio) == 2 and all(" relative to ab: cf (rips) " in ln for ln in ratio), ratio
    assert not any(re.search(r"\bcf \d", ln) for ln in ratio)  # (before: 'cf 0.71x', its estimator unnamed)


def test_html_answer_table_and_ratios_name_them_too(labelled_run):
    _, out = labelled_run
    page = (out / "report.html").read_text(encoding="utf-8")
    answer = page.split("Per design")[1].split("</table>")[0]
    for estimator in ("rips", "snips"):
        assert f"{estimator}<br><small>of reciprocal_rank</small>" in answer
    assert "clicks_per_query<br>" not in answer  # the A/B design's rows are its metrics
    assert re.search(r"<li>cf \(rips\): information per impression", page)


def test_sweep_answer_table_names_the_estimated_metric():
    """The sweep report's per-point rows of a counterfactual design (its primary estimator) say which metric the
    estimator estimates, from the point's own summary; other designs' rows are their metrics."""
    from simulations.html_report.sweep import answer_rows

    summary = {"axes": ["x"], "rows": [
        {"point": 0, "x": 1.0, "design": "cf", "metric": "snips", "offline_delta": 0.02, "true_effect": 0.01},
        {"point": 0, "x": 1.0, "design": "ab", "metric": "clicks_per_query", "offline_delta": 0.02,
         "true_effect": 0.01}]}
    points = {0: {"counterfactual": {"cf": {"metric": "reciprocal_rank"}}, "designs": {}}}
    cells = [str(r[3]) for r in answer_rows(summary, points)]
    assert cells == ["snips<br><small>of reciprocal_rank</small>", "clicks_per_query"]
