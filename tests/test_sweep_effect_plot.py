"""effect.png: one panel per design, no line between categories (review 2026-12-02, C.5; review 12, finding 7).

With a categorical plot axis (``users.click_model.preset``) the truth was a line from "navigational" to
"informational", suggesting a trend between categories; it is now a bar-shaped marker per value, while
a numeric axis keeps its line. The A/B metric's difference and an interleaving Delta_AB were drawn on one y axis,
inviting a comparison the package calls invalid (their scales differ): each design now has its own panel and y
axis, titled with the design and its metric. The figure is read back from ``savefig`` (matplotlib's own objects).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib.figure
import pandas as pd
import pytest

from simulations.sweep_outputs import _plot

_METRIC = {"ab": "reciprocal_rank", "td": "delta_ab"}


def _axes(monkeypatch: pytest.MonkeyPatch, rows: pd.DataFrame, axes: list[str], x: str | None,
          path: Path) -> list:
    saved = []
    real = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda self, *a, **k: (saved.append(self), real(self, *a, **k)))
    _plot(SimpleNamespace(axes=axes, plot_x=x), rows, path)
    assert path.is_file()
    return [ax for ax in saved[0].axes if ax.get_visible()]


def _rows(axis: str, values: list, extra: dict | None = None) -> pd.DataFrame:
    # the interleaving effect 10x the A/B one, as a Delta_AB against a reciprocal-rank difference can be
    return pd.DataFrame([{axis: v, **(extra or {}), "design": d, "metric": _METRIC[d],
                          "true_effect": (0.01 * (i + 1) + 0.002 * j) * (10 if d == "td" else 1),
                          "mean_estimate": 0.011 * (i + 1)} for i, v in enumerate(values) for j, d in
                         enumerate(["ab", "td"])])


def test_categorical_axis_has_markers_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    axis = "users.click_model.preset"
    panels = _axes(monkeypatch, _rows(axis, ["navigational", "informational", "perfect"]), [axis], None,
                   tmp_path / "effect.png")
    assert len(panels) == 2
    truths = []
    for ax in panels:
        series = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 3]
        assert len(series) == 2  # the design's truth and mean estimate
        assert all(ln.get_linestyle() == "None" for ln in series)
        truths += [list(ln.get_ydata()) for ln in series if ln.get_marker() == "_"]
        assert "bars: truth" in ax.get_ylabel()
    assert truths == [pytest.approx([0.01, 0.02, 0.03]), pytest.approx([0.12, 0.22, 0.32])]


def test_numeric_axis_keeps_its_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    axis = "rankers.B.noise"
    panels = _axes(monkeypatch, _rows(axis, [1.1, 0.7, 0.9]), [axis], axis, tmp_path / "effect.png")
    for ax in panels:
        lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 3 and ln.get_linestyle() == "-"]
        assert len(lines) == 1 and list(lines[0].get_xdata()) == [0.7, 0.9, 1.1]  # sorted by x
        assert "line: truth" in ax.get_ylabel()


def test_one_panel_and_y_axis_per_design(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    axis, other = "rankers.B.noise", "users.click_model.preset"
    rows = pd.concat([_rows(axis, [0.7, 0.9, 1.1], {other: p}) for p in ("navigational", "informational")])
    panels = _axes(monkeypatch, rows, [axis, other], axis, tmp_path / "effect.png")
    assert [ax.get_title() for ax in panels] == ["ab: reciprocal_rank", "td: delta_ab"]
    ylabels = [ax.get_ylabel().split("\n")[0] for ax in panels]
    assert ylabels == ["online effect, reciprocal_rank", "online effect, delta_ab"]
    for ax, design in zip(panels, ("ab", "td"), strict=True):
        mine = rows[rows["design"] == design]
        ys = sorted(float(y) for ln in ax.get_lines() if ln.get_linestyle() == "-" and len(ln.get_xdata()) == 3
                    for y in ln.get_ydata())
        assert ys == pytest.approx(sorted(mine["true_effect"]))  # only this design's truths
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"{other}=navigational",
                                                                       f"{other}=informational"]
    (ab_lo, ab_hi), (td_lo, td_hi) = panels[0].get_ylim(), panels[1].get_ylim()
    assert ab_hi < 0.05 < td_hi  # own y axes: the A/B panel is not stretched to the interleaving scale


def test_axes_with_one_value_are_neither_x_nor_legend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a grid whose numeric axis has one value and whose varying axis is a logger spec (shown as JSON text): the
    # numeric axis was taken as x (every point at one x) and every line's legend label carried the constant
    # axes' long texts, which squeezed the panels to nothing ("constrained_layout not applied")
    logger, days = "designs[2].logger", "traffic.days"
    specs = ['{"policy": "epsilon_greedy", "ranker": "A", "epsilon": 0.2, "n": 20}',
             '{"policy": "randtop", "ranker": "A", "n": 5}']
    panels = _axes(monkeypatch, _rows(logger, specs, {days: 2}), [logger, days], None, tmp_path / "effect.png")
    for ax in panels:
        assert ax.get_xlabel() == logger
        assert ax.get_legend() is None
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert len(ticks) == 2 and all(max(len(line) for line in t.split("\n")) <= 28 for t in ticks)
