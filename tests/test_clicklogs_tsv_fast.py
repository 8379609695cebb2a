"""TSV click logs read on whole columns (clickmodels.logs_columns.tsv_sessions: parsed by pyarrow's CSV reader) give
the line-by-line reader's ClickLog to the bit (ids stripped of Unicode whitespace as str.strip strips them, repeated
clicks, empty click fields, CRLF line ends, a byte-order mark), and decline to it wherever it could read a line
differently or refuse one (then its error names the line)."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from test_clicklogs_fast import _reference as line_by_line
from test_clicklogs_fast import _watching as watching
from test_clicklogs_parquet import _assert_same, _random_rows

import clickmodels.logs_columns as logs_columns
from clickmodels.logs import read_tsv
from onlineeval.errors import InputError

#: whitespace str.strip removes (ASCII and Unicode: no-break space, em space, unit separator, line separator)
PADDING = ["", " ", "  ", "\u00a0", "\u2003", "\x1f", "\u2028", "\x0b"]


def _reference(path: Path, monkeypatch: pytest.MonkeyPatch):
    return line_by_line(path, monkeypatch, read_tsv, "tsv_sessions")


def _watching(path: Path, monkeypatch: pytest.MonkeyPatch):
    """``read_tsv(path)`` and what the whole-column reader returned (None: declined)."""
    return watching(path, monkeypatch, read_tsv, "tsv_sessions")


def _padded(rng: np.random.Generator, value: str) -> str:
    return str(rng.choice(PADDING)) + value + str(rng.choice(PADDING))


@pytest.mark.parametrize("clicks", ["ids", "none"])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_whole_columns_give_the_line_by_line_log_to_the_bit(tmp_path, monkeypatch, clicks, padding, line_end):
    rng = np.random.default_rng(zlib.crc32(repr((clicks, padding, line_end)).encode()))
    rows = _random_rows(rng, 400, "strings", clicks, "strings")
    pad = (lambda v: _padded(rng, v)) if padding else (lambda v: v)
    lines = []
    for r in rows:
        shown = ",".join(pad(d) for d in r["docs"])
        clicked = ",".join(pad(d) for d in (r.get("clicks") or []))
        if not clicked and padding and rng.random() < 0.5:
            clicked = pad("")  # a blank clicks field: no click
        lines.append("\t".join([pad(r["session"]), pad(r["query"]), shown, clicked]))
    path = tmp_path / "log.tsv"
    path.write_bytes((line_end.join(lines) + (line_end if rng.random() < 0.5 else "")).encode())
    got, fast = _watching(path, monkeypatch)
    assert fast is not None
    _assert_same(got, _reference(path, monkeypatch))
    assert got.n_sessions == 400 and got.clicks.any() == (clicks == "ids")


GOOD = "s1\tq1\ta,b\tb"


@pytest.mark.parametrize(("text", "taken"), [
    (f"\ufeff{GOOD}\n{GOOD}\n", True),  # a byte-order mark
    (f"{GOOD}\r\n{GOOD}", True),  # CRLF, no final line end
    ("s1\tq1\ta\t\n" * 3, True),  # no click anywhere
    ('s"1\tq "x"\t"a",b\t"a"\n', True),  # quotes are characters of the ids
    ("s1\tNULL\tNA,null\t\n", True),  # no null values
    (f"{GOOD}\n\n{GOOD}\n", False),  # a blank line (skipped: the reference numbers the lines)
    (f"# a comment\n{GOOD}\n", False),
    (f"  #\tcomment\tof four\tfields\n{GOOD}\n", False),
    (f"# s0\tq0\ta\t\n{GOOD}\n", False),  # a comment that would read as a session
    (f"\t\t\t\n{GOOD}\n", False),  # a line of empty fields: blank to the reference
    (f"{GOOD}\r\r\n", False),  # two carriage returns before the line end (the reference strips both)
    (f"{GOOD}\ns2\tq1\ta\rb\t\n", False),  # a carriage return inside an id (kept by the reference)
    ("s1\tq1\ta,b\t b , a , b \n", True),  # repeated clicks, padded
])
def test_odd_but_valid_logs_read_as_the_line_by_line_reader(tmp_path, monkeypatch, text, taken):
    path = tmp_path / "log.tsv"
    path.write_bytes(text.encode())
    got, fast = _watching(path, monkeypatch)
    assert (fast is not None) == taken
    _assert_same(got, _reference(path, monkeypatch))


@pytest.mark.parametrize(("line", "fragment"), [
    ("s2\tq1\ta,a\t", "shown twice"),
    ("s2\tq1\ta\tz", "not among the shown documents"),
    ("s2\tq1\t \t", "at least one document"),
    ("s2\tq1\ta,,b\t", "empty document id"),
    ("s2\tq1\ta,b\ta,", "empty id in the click list"),
    ("s2\tq1\ta,b\t,a", "empty id in the click list"),
    ("s2\tq1\ta,b", "expected 4 tab-separated fields"),
    ("s2\tq1\ta,b\ta\tb", "expected 4 tab-separated fields"),
    (" \tq1\ta\t", "must not be empty"),
    ("s2\t\u00a0\ta\t", "must not be empty"),
])
def test_bad_lines_are_declined_and_refused_naming_their_line(tmp_path, line, fragment):
    path = tmp_path / "log.tsv"
    path.write_text(f"{GOOD}\n{line}\n{GOOD}\n")
    assert logs_columns.tsv_sessions(path) is None
    with pytest.raises(InputError, match=fragment) as exc:
        read_tsv(path)
    assert (exc.value.path, exc.value.line) == (str(path), 2)


def test_invalid_utf8_is_declined_and_refused_naming_its_line(tmp_path):
    path = tmp_path / "log.tsv"
    path.write_bytes(f"{GOOD}\n".encode() + b"s2\tq\xff\ta\t\n")
    assert logs_columns.tsv_sessions(path) is None
    with pytest.raises(InputError, match="not UTF-8") as exc:
        read_tsv(path)
    assert exc.value.line == 2
