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


def test_sweep_terminal_table_names_the_estimated_metric():
    """The sweep's terminal table: a counterfactual design's row is 'snips of clicks_per_query' (points.csv's
    estimated_metric), other rows their metric."""
    import pandas as pd

    from simulations.sweep_outputs import terminal_table

    rows = pd.DataFrame({"point": [0, 0], "design": ["cf", "ab"], "metric": ["snips", "clicks_per_query"],
                         "estimated_metric": ["clicks_per_query", None], "true_effect": [0.01, 0.01]})
    lines = terminal_table(rows, ["point", "design", "metric", "true_effect"]).splitlines()
    assert lines[1].split()[:5] == ["0", "cf", "snips", "of", "clicks_per_query"]
    assert lines[2].split()[:3] == ["0", "ab", "clicks_per_query"] and " of " not in lines[2]


def test_sweep_point_rows_carry_the_estimated_metric():
    """points.csv's estimated_metric: the point summary's counterfactual metric for that design, empty for others."""
    from types import SimpleNamespace

    from simulations.sweep_outputs import point_rows

    entry = {"primary": True, "true_effect": 0.01, "final_day": {}}
    summary = {"designs": {"cf": {"snips": entry}, "ab": {"clicks_per_query": entry}},
               "counterfactual": {"cf": {"metric": "reciprocal_rank"}}, "offline": {"delta": {"weighted": 0.02}}}
    point = SimpleNamespace(index=0, folder_name="point-000", label=lambda a: None, config=SimpleNamespace())
    rows = point_rows(SimpleNamespace(points=[point], axes=[]), {0: summary})
    got = dict(zip(rows["design"], rows["estimated_metric"]))
    assert got["cf"] == "reciprocal_rank" and not isinstance(got["ab"], str)  # (None, or NaN in the frame)
