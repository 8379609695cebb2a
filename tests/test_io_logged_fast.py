"""The pyarrow reader of logged impressions (onlineeval.io.logged_fast._read_fast) against the line-by-line reader (the
reference): on random logs with every variant of the format it accepts, the same LoggedLog to the bit; on logs the
line-by-line reader would refuse or read otherwise, it declines (None). tests/test_io_logged.py runs every one of its
tests through both readers too."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import onlineeval.io.logged as logged
from onlineeval.io.logged_fast import _read_fast


def _records(seed: int, n: int, clicks: str, users: str, user_type: bool, forms: tuple[str, ...],
             int_queries: bool) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        q = int(rng.integers(0, 30))
        k = int(rng.integers(1, 6))
        docs = [f"d{x}" for x in rng.choice(40, size=k, replace=False) + q]
        c = rng.random(k) < 0.3
        rec: dict[str, Any] = {"query": q if int_queries else f"q{q}", "shown": docs}
        if clicks == "ids":
            picked = [d for d, x in zip(docs, c) if x]
            rec["clicks"] = [picked[j] for j in rng.permutation(len(picked))]  # any order
        elif clicks == "flags":
            rec["clicks"] = [int(x) for x in c] if rng.random() < 0.8 else []
        else:
            rec["clicks"] = [bool(x) for x in c]
        if users == "some" and rng.random() < 0.7:
            rec["user"] = f"u{int(rng.integers(0, 50))}"
        elif users == "int":
            rec["user"] = int(rng.integers(0, 50))
        if user_type:
            rec["user_type"] = int(rng.integers(0, 3))
        pre = np.cumprod(rng.uniform(0.2, 1.0, k))
        item = np.maximum(pre, rng.uniform(0.2, 1.0, k))
        item[0] = pre[0]
        p = {"list": float(pre[-1]), "prefix": pre.tolist(), "item": item.tolist()}
        rec["propensities"] = {f: p[f] for f in forms}
        out.append(rec)
    return out


def _write(tmp_path: Path, records: list[Any], newline_at_end: bool = True) -> Path:
    path = tmp_path / "log.jsonl"
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records)
    path.write_text(text + ("\n" if newline_at_end else ""), encoding="utf-8")
    return path


def _line_by_line(path: Path, monkeypatch: pytest.MonkeyPatch) -> logged.LoggedLog:
    monkeypatch.setattr(logged, "FAST_MIN_BYTES", 1 << 62)
    return logged.read_logged(path)


def _assert_same(a: logged.LoggedLog, b: logged.LoggedLog) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "data":
            for g in dataclasses.fields(x):
                u, v = getattr(x, g.name), getattr(y, g.name)
                if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
                    assert u is not None and v is not None and u.dtype == v.dtype, g.name
                    np.testing.assert_array_equal(u, v, err_msg=g.name)
                else:
                    assert u == v, g.name
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name


@pytest.mark.parametrize(("clicks", "users", "user_type", "forms", "int_queries"), [
    ("ids", "some", False, ("list", "prefix", "item"), False),
    ("flags", "none", True, ("prefix",), True),
    ("bools", "int", False, ("item", "list"), False),
    ("ids", "int", True, ("list",), True),
])
@pytest.mark.parametrize("end", [True, False])
def test_fast_reader_equals_line_by_line(tmp_path, monkeypatch, clicks, users, user_type, forms, int_queries, end):
    path = _write(tmp_path, _records(7, 600, clicks, users, user_type, forms, int_queries), newline_at_end=end)
    fast = _read_fast(str(path), None)
    assert fast is not None
    _assert_same(fast, _line_by_line(path, monkeypatch))


GOOD = {"query": "q1", "shown": ["a", "b"], "clicks": ["b"], "propensities": {"list": 0.25, "prefix": [0.5, 0.25]}}


@pytest.mark.parametrize("bad", [
    [GOOD, ""],  # a blank line: line numbers would shift
    [GOOD, {**GOOD, "query": ""}],
    [GOOD, {**GOOD, "query": 1.5}],
    [GOOD, {**GOOD, "shown": ["a", "a"]}],
    [GOOD, {**GOOD, "shown": []}],
    [GOOD, {**GOOD, "clicks": ["c"]}],
    [GOOD, {**GOOD, "clicks": ["b", "b"]}],
    [{**GOOD, "clicks": [0, 1]}, {**GOOD, "clicks": [1]}],
    [{**GOOD, "clicks": [0, 2]}],
    [{**GOOD, "user_type": 1}, GOOD],
    [{**GOOD, "user_type": -1}],
    [GOOD, {**GOOD, "propensities": {"list": 0.25}}],  # forms differ
    [{**GOOD, "propensities": {"list": 0.25, "prefix": None}}],
    [{**GOOD, "propensities": {"list": 0.25, "prefix": [0.5]}}],
    [{**GOOD, "propensities": {"list": 0.25, "lst": 0.3}}],
    [{**GOOD, "logger": {"policy": "deterministic", "scores": {"a": 1.0}}}],
    [{**GOOD, "extra": 1}],  # other keys: line by line
    ['{"query": "q1", "query": "q2", "shown": ["a"], "clicks": [], "propensities": {"list": 1}}'],
    [GOOD, '{"query": "q1", "shown": ["a"'],
    [GOOD, {**GOOD, "user": ""}],
    [GOOD, {**GOOD, "user": True}],
])
def test_fast_reader_declines_what_it_could_read_otherwise(tmp_path, bad):
    assert _read_fast(str(_write(tmp_path, bad)), None) is None


@pytest.mark.parametrize("variant", ["crlf", "bom"])
def test_fast_reader_equals_line_by_line_on_windows_line_ends_and_a_byte_order_mark(tmp_path, monkeypatch, variant):
    records = _records(3, 400, "ids", "some", True, ("list", "prefix", "item"), False)
    path = tmp_path / "log.jsonl"
    if variant == "crlf":
        path.write_bytes(("\r\n".join(json.dumps(r) for r in records) + "\r\n").encode("utf-8"))
    else:
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8-sig")
    fast = _read_fast(str(path), None)
    assert fast is not None
    _assert_same(fast, _line_by_line(path, monkeypatch))


@pytest.mark.parametrize("gzipped", [False, True])
def test_a_logger_log_is_declined_before_pyarrow_parses_it(tmp_path, monkeypatch, gzipped):
    """The first line names a ``logger`` and no policies package is given (the line-by-line reader's error), or the
    first line has another key the fast reader does not read: declined from that line, without a whole-file parse by
    pyarrow; a plain log still reaches pyarrow (a logger log with the package: tests/test_io_logged_fast_logger.py)."""
    import gzip

    import pyarrow.json as pj

    calls = []
    real = pj.read_json
    monkeypatch.setattr(pj, "read_json", lambda *a, **k: calls.append(1) or real(*a, **k))
    logger = {**GOOD, "logger": {"policy": "deterministic", "scores": {"a": 1.0, "b": 0.5}}}
    for records, parsed in (([logger, GOOD], 0), ([{**GOOD, "extra": 1}], 0), ([GOOD, logger], 1), ([GOOD], 1)):
        path = _write(tmp_path, records)
        data = gzip.decompress(gzip.compress(path.read_bytes())) if gzipped else None
        calls.clear()
        assert _read_fast(str(path), None, data) is None or records == [GOOD]
        assert len(calls) == parsed, records
