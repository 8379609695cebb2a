"""report.html's daily monitoring table gives a design whose A/A is identically 0 (probabilistic interleaving: every
A/A comparison a tie) each rule's rate on its null-variant replicates, as the terminal's table does (review 6, F3):
'null 0.160' with '!' above alpha's 99% band, and the note saying what the rate is. The reference is the run's own
summary.json (sequential[design].null_monitoring, whose rates tests/test_sequential_review6.py recomputes from the
null rows by hand); the page is read back with html.parser."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from test_sequential_review6 import PROB  # a 100-replicate probabilistic world whose peeking null rate is 0.16

from simulations.config import config_from_mapping
from simulations.job import simulate

RULES = ("fixed", "peeking", "msprt", "obrien_fleming")


class _Tables(HTMLParser):
    """Every table as (caption, rows of (cell text, whether the cell holds a flag span)), and the notes' text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[tuple[str, bool]]]]] = []
        self.notes: list[str] = []
        self._cell: list[str] | None = None
        self._flag = False
        self._caption: list[str] | None = None
        self._note: list[str] | None = None
        self._note_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self.tables.append(("", []))
        elif tag == "caption":
            self._caption = []
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell, self._flag = [], False
        elif tag == "span" and a.get("class") == "flag" and self._cell is not None:
            self._flag = True
        if tag == "p" and a.get("class") == "note":
            self._note = []
        if self._note is not None:
            self._note_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "caption" and self._caption is not None:
            self.tables[-1] = ("".join(self._caption), self.tables[-1][1])
            self._caption = None
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append(("".join(self._cell), self._flag))
            self._cell = None
        if self._note is not None:
            self._note_depth -= 1
            if self._note_depth == 0:
                self.notes.append("".join(self._note))
                self._note = None

    def handle_data(self, data: str) -> None:
        for buf in (self._cell, self._caption, self._note):
            if buf is not None:
                buf.append(data)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("prob") / "run"
    simulate(config_from_mapping(PROB), output=out, workers=1)  # writes summary.json and report.html
    return out


def test_html_monitoring_table_gives_the_null_variant_rates_with_their_marks_and_note(folder: Path) -> None:
    summary: dict[str, Any] = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    parser = _Tables()
    parser.feed((folder / "report.html").read_text(encoding="utf-8"))
    caption, rows = next(t for t in parser.tables if t[0].startswith("Daily monitoring"))
    row = next(r for r in rows if r and r[0][0] == "prob")
    mon = summary["monitoring"]["prob"]["rules"]
    nm = summary["sequential"]["prob"]["null_monitoring"]["rules"]
    assert all(mon[r]["aa_degenerate"] for r in RULES)  # the A/A is identically 0: its '-' said nothing
    marks = []
    for k, rule in enumerate(RULES):
        text, flagged = row[2 + k]
        rate, above = nm[rule]["false_positive_rate"], not nm[rule]["within_band_or_below"]
        power, day = mon[rule]["power"], mon[rule]["mean_decision_day"]
        assert text == f"null {rate:.3f}{'!' if above else ''} / {power:.3f} / {day:.1f}", (rule, text)
        assert flagged is above, rule  # the '!' is the page's flag mark
        marks.append(above)
    assert any(marks) and not all(marks)  # this world has both: peeking's 0.160 is above the band 0.000-0.110
    band = nm["fixed"]["binomial_99_band"]
    note = next(n for n in parser.notes if n.startswith("null (prob): "))
    assert "the design's A/A compares A with itself and is identically 0" in note
    assert f"'!' above the 99% binomial band of alpha {band[0]:.3f}-{band[1]:.3f}" in note
    assert not any(n.startswith("A/A '-'") for n in parser.notes)  # no design is left with a '-'
