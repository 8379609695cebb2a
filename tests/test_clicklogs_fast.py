"""JSON-lines click logs read on whole columns (clickmodels.logs_columns.jsonl_sessions: parsed by pyarrow) give the
line-by-line reader's ClickLog to the bit, and decline to it wherever it could read a line differently or refuse one
(then its error names the line); JSON nested deeper than pyarrow's parser survives is declined before it parses
(onlineeval.io.logged_scan.deeper_than), in the click-log reader and in estimate's log reader alike."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_clicklogs_parquet import _assert_same, _random_rows

import clickmodels.logs_columns as logs_columns
from clickmodels.logs import read_jsonl
from onlineeval.errors import InputError


def _reference(path: Path, monkeypatch: pytest.MonkeyPatch, read: Any = read_jsonl, fast: str = "jsonl_sessions"):
    """``read(path)`` with the whole-column reader ``clickmodels.logs_columns.<fast>`` declining: line by line."""
    with monkeypatch.context() as m:
        m.setattr(logs_columns, fast, lambda path: None)
        return read(path)


def _watching(path: Path, monkeypatch: pytest.MonkeyPatch, read: Any = read_jsonl, fast: str = "jsonl_sessions"):
    """``read(path)`` and what the whole-column reader ``clickmodels.logs_columns.<fast>`` returned (None:
    declined)."""
    seen = []
    real = getattr(logs_columns, fast)
    with monkeypatch.context() as m:
        m.setattr(logs_columns, fast, lambda p: seen.append(real(p)) or seen[-1])
        return read(path), seen[0]


@pytest.mark.parametrize("ids", ["strings", "integers"])
@pytest.mark.parametrize("clicks", ["ids", "booleans", "none"])
@pytest.mark.parametrize("sessions", ["strings", "some null", "none"])
def test_whole_columns_give_the_line_by_line_log_to_the_bit(tmp_path, monkeypatch, ids, clicks, sessions):
    rng = np.random.default_rng(zlib.crc32(repr((ids, clicks, sessions)).encode()))
    rows = _random_rows(rng, 400, ids, clicks, sessions)
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in rows))
    got, fast = _watching(path, monkeypatch)
    assert fast is not None
    _assert_same(got, _reference(path, monkeypatch))


GOOD = '{"session": "s1", "query": "q1", "docs": ["a", "b"], "clicks": ["b"]}'


@pytest.mark.parametrize(("text", "taken"), [
    (f"\ufeff{GOOD}\n{GOOD}\n", True),  # a byte-order mark
    (f"{GOOD}\r\n{GOOD}", True),  # CRLF, no final line end
    ('{"query": "q1", "docs": ["a"], "clicks": []}\n' * 3, True),  # no click anywhere: a list of nulls to pyarrow
    (f"{GOOD}\n\n{GOOD}\n", False),  # a blank line (the reference numbers the lines)
    ('{"query": "q1", "docs": ["a"]}\n\n{"query": "q2", "docs": ["b"]}\n', False),
    ('{"query": "2026-12-04", "docs": ["a"]}\n', False),  # pyarrow would read a timestamp
    ('{"query": "q1", "docs": ["a", "b"], "clicks": [true, false]}\n{"query": 3, "docs": ["c"]}\n', False),
])
def test_odd_but_valid_logs_read_as_the_line_by_line_reader(tmp_path, monkeypatch, text, taken):
    path = tmp_path / "log.jsonl"
    path.write_bytes(text.encode())
    got, fast = _watching(path, monkeypatch)
    assert (fast is not None) == taken
    _assert_same(got, _reference(path, monkeypatch))


@pytest.mark.parametrize(("line", "fragment"), [
    ('{"query": "q1", "docs": ["a", "a"]}', "shown twice"),
    ('{"query": "q1", "docs": ["a"], "clicks": ["z"]}', "not among the shown documents"),
    ('{"query": "q1", "docs": []}', "at least one document"),
    ('{"query": "q1", "docs": ["a"], "extra": 1}', "unknown key"),
    ('{"query": "q1", "docs": ["a"], "clicks": [true, false]}', "one per shown document"),
    ('{"query": 1.5, "docs": ["a"]}', "must be a string or an integer"),
    ('{"query": "q1", "docs": ["a"]} trailing', "invalid JSON"),
    ('{"query": "q1", "docs": [' + "[" * 30000 + "]" * 30000 + "]}", "nested too deeply"),
    ('{"session": null, "query": "q1", "docs": ["a"]}', "'session' must be a string or an integer, got None"),
    ('{"query": "q1", "docs": ["a"], "clicks": null}', "'docs' and 'clicks' must be lists"),
    # a key twice: the reference read the last one (json.loads's default); refused as estimate's log reader does
    ('{"query": "q1", "query": "q2", "docs": ["a"]}', "key 'query' appears twice in one object"),
])
def test_bad_lines_are_declined_and_refused_naming_their_line(tmp_path, line, fragment):
    path = tmp_path / "log.jsonl"
    path.write_text(f"{GOOD}\n{line}\n{GOOD}\n")
    assert logs_columns.jsonl_sessions(path) is None
    with pytest.raises(InputError, match=fragment) as exc:
        read_jsonl(path)
    assert (exc.value.path, exc.value.line) == (str(path), 2)
