"""The report's figures as a reader sees them (review 12, finding 6).

- offline_vs_online: every text and the legend inside the figure (the legend, centred under the right panel,
  ran past the right edge), long tick labels wrapped;
- power_vs_days: an A/A line that is 0 by construction (every comparison a tie, the summary's
  ``aa.degenerate``) is not drawn as if perfectly calibrated: left out, with a note saying why; an A/A line that
  is 0 by chance is drawn;
- assumption_sweep: an estimator far off the others gets a panel with its own y axis (clipped IPS's -0.2 set
  the y range and flattened IIPS's trend); the x label names the user type whose share moves.

"Inside" is measured with matplotlib's renderer: each visible text's and legend's window extent after a draw,
against the figure's bounding box; a deliberately misplaced legend is caught by the same check.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import matplotlib.text
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend

from simulations.plots import (
    aa_ties,
    assumption_sweep_figure,
    far_off_estimators,
    offline_online_figure,
    power_figure,
    swept_parameter_label,
)


def _outside(fig: Figure, dpi: float = 110) -> list[str]:
    """What of ``fig`` leaves the figure (1 px tolerance): the drawn artists' tight bounding box against the
    figure's (what ``bbox_inches="tight"`` would grow to), named by the visible legends and texts that leave it."""
    fig.set_dpi(dpi)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    w, h = fig.bbox.width, fig.bbox.height
    tight = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)  # inches -> pixels

    def out(b: Any) -> bool:
        return b.x0 < -1 or b.y0 < -1 or b.x1 > w + 1 or b.y1 > h + 1

    if not out(tight):
        return []
    named = [a for a in fig.legends + [ax.get_legend() for ax in fig.axes] if a is not None and a.get_visible()]
    named += [t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label)] + fig.texts
    bad = [a.get_text() if isinstance(a, matplotlib.text.Text) else "legend" for a in named
           if a.get_visible() and (not isinstance(a, matplotlib.text.Text) or a.get_text())
           and out(a.get_window_extent(renderer))]
    return bad or [f"something: {tight}"]


@pytest.mark.filterwarnings("ignore:constrained_layout not applied")
def test_the_check_catches_a_legend_past_the_edge() -> None:
    fig = Figure(figsize=(4, 3), constrained_layout=True)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], label="a line with a label long enough to run past the right edge of the figure")
    ax.plot([0, 1], [1, 0], label="another line with a long label")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)  # review 12's offline_vs_online legend
    assert "legend" in _outside(fig)
    fig = Figure(figsize=(4, 3), constrained_layout=True)
    fig.subplots().set_xlabel("an x label long enough to run past both edges of a figure four inches wide")
    assert _outside(fig) == ["an x label long enough to run past both edges of a figure four inches wide"]


_LONG = "abandonment"


def _entry(true: float, rel: float | None, se: float, **extra: Any) -> dict[str, Any]:
    return {"true_effect": true, "relative_effect": rel, "primary": True,
            "final_day": {"mean_se": se, "sd_estimate": se, "mean_estimate": true}, **extra}


def _result(aa: dict[str, list[float]], degenerate: set[str]) -> SimpleNamespace:
    designs_cfg = [SimpleNamespace(name="ab", type="ab"), SimpleNamespace(name="team_draft", type="interleaving"),
                   SimpleNamespace(name="balanced", type="interleaving")]
    metric = {"ab": "reciprocal_rank", "team_draft": "delta_ab", "balanced": "delta_ab"}
    rows = []
    for d in designs_cfg:
        for day in (1, 2, 3):
            rows.append({"design": d.name, "metric": metric[d.name], "aa": False, "primary": True, "day": day,
                         "power": 0.2 * day, "power_se": 0.05, "rejection_rate": 0.2 * day, "replicates": 40})
            rows.append({"design": d.name, "metric": metric[d.name], "aa": True, "primary": True, "day": day,
                         "power": 0.0, "power_se": 0.0, "rejection_rate": aa[d.name][day - 1], "replicates": 40})
    summary = {
        "offline": {"metric": "nDCG@10", "relative_gain_weighted": 0.018, "A": {"uniform": 0.8, "weighted": 0.84},
                    "B": {"uniform": 0.82, "weighted": 0.86}, "delta": {"uniform": 0.02, "weighted": 0.015},
                    "by_segment": {"head": {"A": 0.8, "B": 0.81}, "tail": {"A": 0.7, "B": 0.72}}},
        "designs": {
            "ab": {"reciprocal_rank": _entry(0.00275, 0.003, 0.002, aa={"degenerate": "ab" in degenerate}),
                   _LONG: {**_entry(-0.000147, -0.077, 0.0003), "primary": False}},
            "team_draft": {"delta_ab": _entry(0.0058, None, 0.0014, aa={"degenerate": "team_draft" in degenerate},
                                              null={"delta": -0.0005, "biased": False, "replicates": 40,
                                                    "rejection_rate": [0.05, 0.05, 0.075]})},
            "balanced": {"delta_ab": _entry(0.007, None, 0.0012, aa={"degenerate": "balanced" in degenerate},
                                            null={"delta": 0.004, "biased": True, "replicates": 40,
                                                  "rejection_rate": [0.3, 0.5, 0.8]})},
        },
    }
    config = SimpleNamespace(designs=designs_cfg, analysis=SimpleNamespace(alpha=0.05, power=0.8),
                             traffic=SimpleNamespace(days=3))
    world = SimpleNamespace(offline=SimpleNamespace(weighted={"A": 0.84, "B": 0.86}))
    return SimpleNamespace(config=config, summary=summary, curves=pd.DataFrame(rows), world=world)


def test_offline_vs_online_fits_the_figure() -> None:
    res = _result({"ab": [0.05, 0.05, 0.05], "team_draft": [0.0] * 3, "balanced": [0.0] * 3}, {"balanced"})
    fig = offline_online_figure(res)
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    long = next(t for t in labels if t.startswith("ab: abandonment"))
    assert "tiny 0.19% base rate: improvement, lower is better)" in long.replace("\n", " ")  # the full label, wrapped
    assert long.count("\n") >= 1 and all(len(line) <= 46 for t in labels for line in t.split("\n"))
    assert len(fig.legends) == 1 and fig.axes[1].get_legend() is None  # the figure's legend, not the panel's
    assert _outside(fig) == []


def _right_panel(fig: Figure) -> tuple[list[str], str]:
    ax = fig.axes[1]
    return [ln.get_label() for ln in ax.get_lines()], ax.get_xlabel()


def test_aa_of_ties_left_out_with_a_note() -> None:
    res = _result({"ab": [0.05, 0.025, 0.05], "team_draft": [0.0] * 3, "balanced": [0.0] * 3}, {"balanced"})
    fig = power_figure(res)
    lines, xlabel = _right_panel(fig)
    assert "balanced A/A (simulated)" not in lines  # 0 by construction: no calibration line
    assert "team_draft A/A (simulated)" in lines  # 0 on these days by chance: drawn
    assert "ab A/A (simulated)" in lines
    assert any(s.startswith("balanced null user") for s in lines)  # the design's null user is still drawn
    assert "A/A of balanced not drawn: every comparison a tie" in xlabel.replace("\n", " ")
    assert _outside(fig) == []
    # without ties: every A/A drawn, no note
    lines, xlabel = _right_panel(power_figure(_result({k: [0.0] * 3 for k in ("ab", "team_draft", "balanced")},
                                                      set())))
    assert {"ab A/A (simulated)", "team_draft A/A (simulated)", "balanced A/A (simulated)"} <= set(lines)
    assert xlabel == "days"
    assert aa_ties({"aa": {"degenerate": True}}) and not aa_ties({"aa": {"degenerate": False}}) and not aa_ties({})


def test_null_user_legend_says_an_exact_delta_as_the_tables_do() -> None:
    """The null user's Delta reads as the null check's table writes it (three figures; it was four decimals): '0' for
    an exact zero (it was '+0.0000', which reads as a rounded Monte Carlo value) with 'exact' after an exact one."""
    res = _result({k: [0.05] * 3 for k in ("ab", "team_draft", "balanced")}, set())
    designs = res.summary["designs"]
    lines, _ = _right_panel(power_figure(res))
    assert "team_draft null user (simulated; Delta -0.000500)" in lines  # Monte Carlo: no 'exact'
    assert "balanced null user (simulated; Delta +0.00400, biased)" in lines
    designs["team_draft"]["delta_ab"]["null"].update(delta=0.0, exact=True)
    designs["balanced"]["delta_ab"]["null"].update(delta=0.00362, exact=True)
    lines, _ = _right_panel(power_figure(res))
    assert "team_draft null user (simulated; Delta 0 exact)" in lines
    assert "balanced null user (simulated; Delta +0.00362 exact, biased)" in lines


def test_both_panels_share_a_day_axis_ticked_on_whole_days() -> None:
    """A right panel with nothing drawn (every A/A a tie) ran from 0 to 1, and a short run was ticked 1.0, 1.2, ...:
    both panels show the run's days, on whole-day ticks."""
    tied = {k: [0.0] * 3 for k in ("ab", "team_draft", "balanced")}
    fig = power_figure(_result(tied, {"ab", "team_draft", "balanced"}))
    left, right = fig.axes[:2]
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    assert right.get_xlim() == left.get_xlim() and left.get_xlim()[0] < 1 and left.get_xlim()[1] > 3
    ticks = [t for t in left.get_xticks() if left.get_xlim()[0] <= t <= left.get_xlim()[1]]
    assert ticks == [1.0, 2.0, 3.0], ticks


def _sweep(clipped: bool) -> dict[str, Any]:
    est = {"snips": {"bias": [0.005, 0.004, -0.003], "se": [0.003, 0.003, 0.003]},
           "rips": {"bias": [0.002, 0.001, 0.003], "se": [0.003, 0.003, 0.003]},
           "iips": {"bias": [0.004, 0.018, 0.032], "se": [0.003, 0.003, 0.003]}}
    if clipped:
        est["clipped_ips(cap=5)"] = {"bias": [-0.18, -0.21, -0.25], "se": [0.005, 0.005, 0.005]}
    return {"parameter": "users.types[1].share", "values": [0.0, 0.5, 1.0], "impressions": 300000,
            "metric": "clicks_per_query", "estimators": est}


_CONFIG = SimpleNamespace(users=SimpleNamespace(types=[
    SimpleNamespace(name="pbm", click_model={"name": "pbm", "preset": "ai2018"}),
    SimpleNamespace(name="cascade", click_model={"name": "cascade", "preset": "navigational"})]))


def test_far_off_estimator_gets_its_own_axis() -> None:
    fig = assumption_sweep_figure(_sweep(True), _CONFIG)
    main, far = fig.axes
    assert [t.get_text() for t in main.get_legend().get_texts()] == ["snips", "rips", "iips"]
    assert [t.get_text() for t in far.get_legend().get_texts()] == ["clipped_ips(cap=5)"]
    lo, hi = main.get_ylim()
    assert lo > -0.05 and hi < 0.06  # IIPS's +0.004 to +0.032 fills the main panel
    assert far.get_ylim()[0] < -0.25
    assert "'cascade' users (cascade navigational clicks)" in fig.get_supxlabel()
    assert _outside(fig) == []
    fig = assumption_sweep_figure(_sweep(False), _CONFIG)
    (ax,) = fig.axes  # nothing far off: one panel
    assert ax.get_xlabel().startswith("share of the 'cascade' users") and _outside(fig) == []


def test_far_off_rule() -> None:
    assert far_off_estimators(_sweep(True)["estimators"]) == ["clipped_ips(cap=5)"]
    assert far_off_estimators(_sweep(False)["estimators"]) == []
    two = {k: v for k, v in _sweep(True)["estimators"].items() if k in ("rips", "clipped_ips(cap=5)")}
    assert far_off_estimators(two) == []  # the main panel keeps at least two estimators


@pytest.mark.parametrize(("parameter", "want"), [
    ("users.types[1].share", "share of the 'cascade' users (cascade navigational clicks): users.types[1].share"),
    ("users.types[0].click_model.eta", "users.types[0].click_model.eta (user type 'pbm' users (pbm ai2018 clicks))"),
    ("users.types[5].share", "users.types[5].share"),
    ("users.click_model.eta", "users.click_model.eta"),
])
def test_swept_parameter_label(parameter: str, want: str) -> None:
    assert swept_parameter_label(parameter, _CONFIG) == want
    assert swept_parameter_label(parameter, None) == parameter


def test_rmse_plot_marks_estimators_the_tables_mark() -> None:
    """counterfactual_rmse.png drew a biased estimator (clipped IPS) or one whose target leaves the logger's support
    like the others; its legend now says what the tables say ([biased], [no support])."""
    from simulations.plots import counterfactual_figures

    def by_day(rmse: float) -> list[dict[str, float]]:
        return [{"impressions": 4000.0 * d, "rmse": rmse / d} for d in (1, 2, 3)]

    summary = {
        "counterfactual": {"cf": {"metric": "clicks_per_query", "estimators": {
            "snips": {"by_day": by_day(0.05)}, "clipped_ips(cap=5)": {"by_day": by_day(0.2)},
            "ips": {"by_day": by_day(0.08)}}}},
        "designs": {"cf": {"snips": {}, "clipped_ips(cap=5)": {"biased_estimate": True},
                           "ips": {"no_support": {"B": {"share": 0.4}}}}},
    }
    fig = counterfactual_figures(SimpleNamespace(summary=summary))["counterfactual_rmse"]
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels == ["snips", "clipped_ips(cap=5) [biased]", "ips [no support]"]
