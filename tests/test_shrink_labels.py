"""The main table's shrinkage and the decomposition's total are two numbers for one pair (review 2026-12-02, 3.4):
online relative improvement over the frequency-weighted offline gain (G6/G1) and over the uniform one (G6/G0).
The terminal labels say which is which, and the decomposition repeats the main table's G6/G1 next to its total.

Reference: the summary's own offline gains: shrink = G6 / ((B_w - A_w) / A_w) with the frequency-weighted
offline values, total = G6 / ((B_u - A_u) / A_u) with the uniform ones, recomputed here from summary["offline"]
and the truth's relative effect; on this world the two differ by more than 5%, so a swapped label would fail.
"""

from __future__ import annotations

import pytest
from test_decomposition import _cascade_types, _config

from simulations.decomposition import FREQ_LABEL, TOTAL_LABEL, decomposition_lines
from simulations.report import SHRINK_HEADER, terminal_summary


@pytest.fixture(scope="module")
def result():
    from simulations.job import simulate

    return simulate(_config(_cascade_types(), seed=12), workers=1)  # frequency-weighted gain 1.57x the uniform


def _cells(line: str, label: str) -> list[float | None]:
    return [None if c == "-" else float(c) for c in line[len("  " + label):].split()]


def test_labels_name_each_shrinkage_and_the_values_are_the_two_gains(result) -> None:
    s = result.summary
    off = s["offline"]
    gain_w = (off["B"]["weighted"] - off["A"]["weighted"]) / off["A"]["weighted"]
    gain_u = (off["B"]["uniform"] - off["A"]["uniform"]) / off["A"]["uniform"]
    assert abs(gain_w / gain_u - 1) > 0.05  # the two shrinkages differ on this world
    text = terminal_summary(result)
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.strip().startswith("design") and SHRINK_HEADER in ln)
    start = header.index(SHRINK_HEADER)
    dec = s["decomposition"]["metrics"]
    names = list(dec)
    total = _cells(next(ln for ln in lines if ln.startswith("  " + TOTAL_LABEL)), TOTAL_LABEL)
    freq = _cells(next(ln for ln in lines if ln.startswith("  " + FREQ_LABEL)), FREQ_LABEL)
    assert len(freq) == len(names) and len(total) == 3 * len(names)
    for i, m in enumerate(names):
        g6 = dec[m]["stages"]["W6"]["relative_improvement"]
        assert freq[i] == pytest.approx(g6 / gain_w, rel=5e-3)  # printed to 3 significant digits
        assert total[3 * i] == pytest.approx(g6 / gain_u, rel=5e-3)
        # the main table's shrink cell, under its header, is the decomposition's G6/G1 (2 decimals)
        row = next(ln for ln in lines if ln[:40].split()[-1:] == [m] and ln.startswith("  "))
        cell = row[start:start + len(SHRINK_HEADER)].strip()
        assert float(cell) == pytest.approx(g6 / gain_w, abs=0.006)
    legend = " ".join(text.split())
    assert f"{SHRINK_HEADER}: online relative *improvement*" in legend
    assert "offline relative gain weighted by query frequency" in legend
    assert "'total vs uniform W0' divides by the gain uniform over queries" in legend
    assert "total vs uniform W0: G6/G0" in legend and "shrink(freq-wtd): G6/G1" in legend


def test_decomposition_rows_without_the_main_tables_value() -> None:
    """An older summary.json without shrinkage_vs_offline in the decomposition prints '-' in that row."""
    from simulations.decomposition import STAGES

    causes = [c for _, c, _ in STAGES[1:]]
    metric = {"stages": {"W0": {"relative_improvement": 0.02}, "W6": {"relative_improvement": 0.004}},
              "sequential": [{"factor": 0.9} for _ in causes],
              "order_averaged": {"scale_uniform": 0.9, "factors": {c: 0.9 for c in causes}, "product": 0.2},
              "one_at_a_time": {c: {"factor": 0.9, "reason": None} for c in causes},
              "total": 0.2, "one_at_a_time_product": 0.2, "residual": 1.0, "sign_changes": []}
    summary = {"decomposition": {"status": "ok", "metrics": {"reciprocal_rank": metric},
                                 "conventions": {"offline_metric": "nDCG@10"}, "dominant_type": "all"}}
    line = next(ln for ln in decomposition_lines(summary) if ln.startswith("  " + FREQ_LABEL))
    assert line.split()[-1] == "-"
    metric["shrinkage_vs_offline"] = 0.25
    line = next(ln for ln in decomposition_lines(summary) if ln.startswith("  " + FREQ_LABEL))
    assert line.split()[-1] == "0.250"  # as the main table writes it (report.value_text)
