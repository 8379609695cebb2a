"""effect.png draws no line between categories (review 2026-12-02, C.5).

With a categorical plot axis (``users.click_model.preset``) the truth was a line from "navigational" to
"informational", suggesting a trend between categories; it is now a bar-shaped marker per value, while
a numeric axis keeps its line. The figure is read back from ``savefig`` (matplotlib's own objects).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib.figure
import pandas as pd
import pytest

from simulations.sweep_outputs import _plot


def _axes(monkeypatch: pytest.MonkeyPatch, rows: pd.DataFrame, axes: list[str], x: str | None, path: Path) -> object:
    saved = []
    real = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda self, *a, **k: (saved.append(self), real(self, *a, **k)))
    _plot(SimpleNamespace(axes=axes, plot_x=x), rows, path)
    assert path.is_file()
    (ax,) = saved[0].axes
    return ax


def _rows(axis: str, values: list) -> pd.DataFrame:
    return pd.DataFrame([{axis: v, "design": d, "true_effect": 0.01 * (i + 1) + 0.002 * j,
                          "mean_estimate": 0.011 * (i + 1)} for i, v in enumerate(values) for j, d in
                         enumerate(["ab", "td"])])


def test_categorical_axis_has_markers_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    axis = "users.click_model.preset"
    ax = _axes(monkeypatch, _rows(axis, ["navigational", "informational", "perfect"]), [axis], None,
               tmp_path / "effect.png")
    series = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 3]
    assert len(series) == 4  # truth and mean estimate of two designs
    assert all(ln.get_linestyle() == "None" for ln in series)
    truths = [ln for ln in series if ln.get_marker() == "_"]
    assert [list(ln.get_ydata()) for ln in truths] == [[0.01, 0.02, 0.03], [0.012, 0.022, 0.032]]
    assert "bars: truth" in ax.get_ylabel()


def test_numeric_axis_keeps_its_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    axis = "rankers.B.noise"
    ax = _axes(monkeypatch, _rows(axis, [1.1, 0.7, 0.9]), [axis], axis, tmp_path / "effect.png")
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 3 and ln.get_linestyle() == "-"]
    assert len(lines) == 2 and all(list(ln.get_xdata()) == [0.7, 0.9, 1.1] for ln in lines)  # sorted by x
    assert "line: truth" in ax.get_ylabel()
