"""The sweep report's per-point table prints the point report's (and the terminal's) sample-size cells.

Review 2026-12-02 (second), C.1: the sweep page printed an unstable 97-year extrapolation as ``~35625*`` and
``14,250,028`` and "600 users needed" for a population of 600, where the point's own report and the terminal
print ``> 1 year?``, ``14,250,028?`` and ``whole population``. The folder here is written by hand (a sweep
summary and two points' summaries with the values of that run), so every expected cell is known exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_html_report import parse

from simulations.html_report import write_simulate_report, write_sweep_report

POPULATION = 600


def _entry(days: Any, analytic_days: Any, impressions: Any, users: Any, unstable: bool, **extra: Any) -> dict[str, Any]:
    return {"primary": True, "true_effect": -0.0005, "final_day": {"power": 0.04, "analytic_power": 0.03},
            "days_to_target_power": days, "analytic_required_days": analytic_days,
            "analytic_required_impressions": impressions, "analytic_required_users": users,
            "analytic_required_impressions_unstable": unstable, "detectable": True, **extra}


#: point 0: ab far beyond a year, unstable, every user needed; td unstable within the horizon
#: point 1: ab biased (null check), td not detectable
POINTS = {
    0: {"ab": {"reciprocal_rank": _entry(None, 35625.07, 14250027.89, 599.5, True)},
        "td": {"delta_ab": _entry(None, 19.71, 7883.2, 558.3, True)}},
    1: {"ab": {"reciprocal_rank": _entry(2, 1.5, 600.0, 300.0, False, null={"biased": True, "delta": 0.01})},
        "td": {"delta_ab": _entry(None, None, None, None, False, detectable=False)}},
}
EXPECTED = {  # (point, design): (days, impressions, users), as the point report and the terminal print them
    (0, "ab"): ("> 1 year?", "14,250,028?", "whole population"),
    (0, "td"): ("~19.7*?", "7,883?", "558"),
    (1, "ab"): ("-", "biased", "-"),
    (1, "td"): ("-", "no detectable effect", "-"),
}


def _row(point: int, design: str, metric: str, e: dict[str, Any]) -> dict[str, Any]:
    """The row of the sweep's summary.json (= points.csv) for one point and design."""
    biased = bool((e.get("null") or {}).get("biased"))
    return {"point": point, "folder": f"points/point-00{point}", "rankers.B.noise": 0.7 + 0.2 * point,
            "design": design, "metric": metric, "replicates": 120, "offline_delta": -0.008,
            "true_effect": e["true_effect"], "true_effect_se": 0.0, "power_last_day": 0.04,
            "days_to_target_power": e["days_to_target_power"],
            "analytic_required_days": None if biased else e["analytic_required_days"],
            "analytic_required_impressions": None if biased else e["analytic_required_impressions"],
            "analytic_required_impressions_unstable": e["analytic_required_impressions_unstable"],
            "analytic_withheld": biased, "detectable": e["detectable"], "aa_false_positive_rate": 0.05}


def _sweep_folder(root: Path) -> Path:
    rows, points = [], []
    for p, designs in POINTS.items():
        folder = root / "points" / f"point-00{p}"
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({
            "conventions": {"target_power": 0.8, "alpha": 0.05},
            "config": {"users": {"population": POPULATION}}, "designs": designs}))
        points.append({"point": p, "folder": f"points/point-00{p}", "overrides": {"rankers.B.noise": 0.7 + 0.2 * p}})
        rows += [_row(p, d, m, e) for d, ms in designs.items() for m, e in ms.items()]
    (root / "summary.json").write_text(json.dumps({"axes": ["rankers.B.noise"], "points": points, "rows": rows}))
    return root


def _cells(page_path: Path, keys: tuple[str, ...]) -> dict[tuple[Any, ...], tuple[str, str, str]]:
    header, *rows = parse(page_path).tables["answer-table"]
    col = {h: k for k, h in enumerate(header)}
    days = next(h for h in header if h.startswith("days to"))
    return {tuple(row[col[k]].split()[0] for k in keys):
            (row[col[days]], row[col["impressions needed"]], row[col["users needed"]]) for row in rows}


def test_sweep_table_has_the_point_reports_cells(tmp_path: Path) -> None:
    folder = _sweep_folder(tmp_path / "sweep")
    got = _cells(write_sweep_report(folder), ("point", "design"))
    assert got == {(str(p), d): v for (p, d), v in EXPECTED.items()}
    for p in POINTS:  # the very cells of the point's own report
        own = _cells(write_simulate_report(folder / "points" / f"point-00{p}"), ("design",))
        assert own == {(d,): v for (q, d), v in EXPECTED.items() if q == p}


def test_sweep_table_without_a_points_summary_keeps_the_caveats(tmp_path: Path) -> None:
    """A point whose own summary.json is gone: the sweep row's flags still give '?' and '> 1 year',
    'biased' and 'no detectable effect'; the users needed (not in the row) are '-'."""
    folder = _sweep_folder(tmp_path / "sweep")
    for p in POINTS:
        (folder / "points" / f"point-00{p}" / "summary.json").unlink()
    got = _cells(write_sweep_report(folder), ("point", "design"))
    assert got == {(str(p), d): (days, impr, "-") for (p, d), (days, impr, _) in EXPECTED.items()}
