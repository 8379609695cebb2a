"""A DataFrame of sessions in the Python API (fit_clicks, evaluate_clicks) is converted by pyarrow and read on whole
columns (onlineeval.api._clicks._frame_sessions, then clickmodels.logs_columns.sessions_from_columns): the same ClickLog
to the bit as its rows read one by one (the reference), for every ``clicks_as``, and the same error naming the row
wherever the reference refuses a frame (then the whole-column reader declines)."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pandas as pd
import pytest

import onlineeval.api._clicks as api_clicks
from onlineeval.errors import InputError

FIELDS = ("query", "docs", "clicks", "click_order", "session_ids", "query_vocab", "doc_vocab", "n_dropped_clicks",
          "source")


def _read(frame: pd.DataFrame, clicks_as: str, monkeypatch: pytest.MonkeyPatch, fast: bool) -> Any:
    """The ClickLog (or ``(message, line)`` of the error) with the whole-column reader on or off, and what it
    returned (None: declined)."""
    seen: list[Any] = []
    real = api_clicks._frame_sessions
    with monkeypatch.context() as m:
        m.setattr(api_clicks, "_frame_sessions",
                  (lambda s, c: seen.append(real(s, c)) or seen[-1]) if fast else (lambda s, c: None))
        try:
            return api_clicks._click_log(frame, clicks_as=clicks_as), seen
        except InputError as exc:
            return (exc.message, exc.line), seen


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    if isinstance(a, tuple):
        assert a == b
        return
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
        else:
            assert x == y, name


def _frame(rng: np.random.Generator, kind: str) -> pd.DataFrame:
    n = int(rng.integers(1, 60))
    int_type = pick(rng, [np.int64, np.uint8])  # one per frame (pyarrow does not mix NumPy dtypes in a column)
    rows = []
    for i in range(n):
        q = int(rng.integers(5))
        docs = [f"d{q}-{j}" for j in rng.permutation(8)[: rng.integers(1, 6)]]
        clicked = [d for d in docs if rng.random() < 0.4]
        clicked += clicked[:1] if rng.random() < 0.2 else []  # a repeated click
        row: dict[str, Any] = {"query": f"q{q}", "docs": docs}
        if kind == "flags":
            row["clicks"] = [d in clicked for d in docs]
        elif kind == "flags or empty":
            row["clicks"] = [d in clicked for d in docs] if rng.random() < 0.8 else pick(rng, [[], None])
        elif kind == "integer flags":  # 0/1 integers (a CSV's column), as lists or numpy arrays
            flags = [int(d in clicked) for d in docs]
            row["clicks"] = flags if rng.random() < 0.5 else np.array(flags, dtype=int_type)
        elif kind == "integer ids":
            row["docs"] = [int(d[1]) * 100 + int(d.split("-")[1]) for d in docs]
            row["query"] = q
            row["clicks"] = [int(d[1]) * 100 + int(d.split("-")[1]) for d in clicked]
        else:
            row["clicks"] = clicked if rng.random() < 0.9 else pick(rng, [[], None])
        rows.append(row)
    frame = pd.DataFrame(rows)
    session = pick(rng, ["none", "strings", "integers", "numpy integers"])
    if session == "strings":
        frame.insert(0, "session", [f"s{i}" for i in range(n)])
    elif session != "none":
        frame.insert(0, "session", np.arange(n) * 3 if session == "numpy integers" else list(range(n)))
    return frame


def pick(rng: np.random.Generator, values: list[Any]) -> Any:
    return values[int(rng.integers(len(values)))]


BAD = [
    lambda f: f.assign(clicks=[["zz"]] + list(f["clicks"][1:])),  # a click on a document not shown
    lambda f: f.assign(docs=[[]] + list(f["docs"][1:])),  # no document
    lambda f: f.assign(docs=[[f["docs"][0][0]] * 2] + list(f["docs"][1:])),  # a document twice
    lambda f: f.assign(docs=[[""]] + list(f["docs"][1:])),  # an empty id
    lambda f: f.assign(query=[None] + list(f["query"][1:])),  # no query: the reference's "None"
    lambda f: f.assign(session=[None] + [f"s{i}" for i in range(1, len(f))]),  # a missing session id
    lambda f: f.assign(clicks=["a,b"] + list(f["clicks"][1:])),  # a comma-separated string
    lambda f: f.assign(clicks=[[True]] + list(f["clicks"][1:])),  # one flag for several documents
    lambda f: f.assign(clicks=[[1, 0]] + list(f["clicks"][1:])),  # integers: ids or flags
    lambda f: f.assign(query=[1.5] + list(f["query"][1:])),
    lambda f: f.assign(docs=[np.array(f["docs"][0], dtype=object)] + list(f["docs"][1:])),  # a numpy cell
    lambda f: f.assign(clicks=[[2] + [0] * (len(f["docs"][0]) - 1)] + list(f["clicks"][1:])),  # a flag 2
    lambda f: f.assign(clicks=[[-1] + [0] * (len(f["docs"][0]) - 1)] + list(f["clicks"][1:])),  # a flag -1
    lambda f: f.assign(clicks=[[True] + [0] * (len(f["docs"][0]) - 1)] + list(f["clicks"][1:])),  # bool and 0
    lambda f: f.assign(clicks=[[1] * (len(f["docs"][0]) + 1)] + list(f["clicks"][1:])),  # one flag too many
]


@pytest.mark.parametrize("kind", ["ids", "flags", "flags or empty", "integer flags", "integer ids"])
@pytest.mark.parametrize("clicks_as", ["auto", "ids", "flags"])
@pytest.mark.parametrize("bad", [None, *range(len(BAD))])
def test_whole_columns_give_the_rows_log_or_error(monkeypatch, kind, clicks_as, bad):
    rng = np.random.default_rng(zlib.crc32(repr((kind, clicks_as, bad)).encode()))
    for _ in range(4):
        frame = _frame(rng, kind)
        if bad is not None:
            frame = BAD[bad](frame)
        got, seen = _read(frame, clicks_as, monkeypatch, fast=True)
        reference, _ = _read(frame, clicks_as, monkeypatch, fast=False)
        _same(got, reference)
        if isinstance(reference, tuple):
            assert seen == [None]  # declined where the rows are refused
        elif bad is None and (kind, clicks_as) in (("ids", "auto"), ("ids", "ids"), ("flags", "auto"),
                                                   ("flags", "flags"), ("flags or empty", "auto"),
                                                   ("integer flags", "flags")):
            assert seen[0] is not None  # read on whole columns
