"""The fast reader of logs that name their logging policy (``logger`` lines; onlineeval.io.logged_fast with
onlineeval.io.logged_scan) against the line-by-line reader, the reference: the same LoggedLog to the bit on random
logger logs of every policy and format variant (and document ids full of JSON's own characters); where a line's
logger is not the one top-level object of its query's first line, byte for byte, it declines and the line-by-line
reader reads the log or names the line of its error. The scan itself against ``json`` on random JSON lines."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import onlineeval.io.logged as logged
from onlineeval.errors import InputError
from onlineeval.io.logged_fast import _read_fast
from onlineeval.io.logged_scan import BAD, first_differing, logger_spans, null_loggers
from simulations import policies
from tests.test_io_logged_fast import _assert_same as _assert_same_but_logger

LOGGERS = [
    {"policy": "plackett_luce", "temperature": 0.7},
    {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 5},
    {"policy": "randtop", "n": 4},
    {"policy": "deterministic"},
    {"policy": "mixture", "components": [{"policy": "epsilon_greedy", "epsilon": 0.2, "n": 4, "weight": 0.7},
                                         {"policy": "randtop", "n": 6, "weight": 0.3}]},
]
#: document ids with JSON's own characters (escaped by json.dumps): the scan must follow strings
ODD = ["d{0}", "d}1", 'd"2', "d\\3", "d[4]", "logger", "d,:6", "d\n7", "dé8", "d\u20ac9"]


def _records(seed: int, n: int, spec: dict[str, Any], *, odd: bool = False, users: bool = True,
             user_type: bool = False, int_queries: bool = False, flags: bool = False) -> list[dict[str, Any]]:
    """Impressions drawn from the logger ``spec`` itself (each query's own scores), so every list has positive
    probability under every policy (the deterministic one shows its own ranking)."""
    rng = np.random.default_rng(seed)
    queries = 12
    out = []
    cands = {}
    for q in range(queries):
        c = int(rng.integers(6, 10))
        ids = (ODD if odd else [f"d{j}" for j in range(10)])[:c]
        cands[q] = {d: float(s) for d, s in zip(ids, rng.normal(size=c))}
    for q in range(queries):
        pol = policies.build_policy(spec, np.array([list(cands[q].values())]), 4)
        cands[q] = (cands[q], pol)
    for _ in range(n):
        q = int(rng.integers(queries))
        scores, pol = cands[q]
        docs = list(scores)
        shown = [docs[j] for j in pol.sample(np.zeros(1, dtype=np.int64), rng)[0] if j >= 0]
        c = rng.random(len(shown)) < 0.3
        rec: dict[str, Any] = {"query": q if int_queries else f"q{q}", "shown": shown,
                               "clicks": [int(x) for x in c] if flags else [d for d, x in zip(shown, c) if x]}
        if users:
            rec["user"] = f"u{int(rng.integers(40))}"
        if user_type:
            rec["user_type"] = int(rng.integers(3))
        rec["logger"] = {**spec, "scores": scores}
        out.append(rec)
    return out


def _assert_same(a: logged.LoggedLog, b: logged.LoggedLog) -> None:
    """Every field equal (tests.test_io_logged_fast's check), the logging policies compared by what they hold and
    answer: their groups of queries, list lengths and descriptions and every query's item-position marginals."""
    import dataclasses

    pa, pb = a.data.logger, b.data.logger
    _assert_same_but_logger(dataclasses.replace(a, data=dataclasses.replace(a.data, logger=None)),
                            dataclasses.replace(b, data=dataclasses.replace(b.data, logger=None)))
    for key in ("_path", "_first_lines", "_query_ids", "_ks", "_cols"):
        assert getattr(pa, key) == getattr(pb, key), key
    for key in ("_group", "_local"):
        np.testing.assert_array_equal(getattr(pa, key), getattr(pb, key))
    assert pa.describe() == pb.describe() and pa.item_methods() == pb.item_methods()
    every = np.arange(len(a.queries))
    np.testing.assert_array_equal(pa.item_position_marginals(every), pb.item_position_marginals(every))


def _write(tmp_path: Path, records: list[Any], *, end: str = "\n", bom: bool = False, name: str = "log.jsonl",
           **dumps: Any) -> Path:
    path = tmp_path / name
    text = end.join(r if isinstance(r, str) else json.dumps(r, **dumps) for r in records) + end
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def _line_by_line(path: Path, monkeypatch: pytest.MonkeyPatch) -> logged.LoggedLog:
    with monkeypatch.context() as m:
        m.setattr(logged, "FAST_MIN_BYTES", 1 << 62)
        return logged.read_logged(path, policies=policies)


@pytest.mark.parametrize("spec", LOGGERS, ids=[s["policy"] for s in LOGGERS])
@pytest.mark.parametrize("variant", ["plain", "odd_ids", "int_queries_flags_types", "no_users_crlf", "bom_spaces",
                                     "ascii_escapes", "gzip", "no_final_newline"])
def test_fast_logger_reader_equals_line_by_line(tmp_path, monkeypatch, spec, variant):
    records = _records(5, 300, spec, odd=variant in ("odd_ids", "ascii_escapes", "bom_spaces"),
                       users=variant != "no_users_crlf", user_type=variant == "int_queries_flags_types",
                       int_queries=variant == "int_queries_flags_types", flags=variant == "int_queries_flags_types")
    kw: dict[str, Any] = {"ensure_ascii": variant == "ascii_escapes"}
    if variant == "bom_spaces":
        kw["separators"] = (" ,  ", " :\t")
    path = _write(tmp_path, records, end="\r\n" if variant == "no_users_crlf" else "\n", bom=variant == "bom_spaces",
                  **kw)
    data = None
    if variant == "no_final_newline":
        path.write_bytes(path.read_bytes()[:-1])
    if variant == "gzip":
        data = path.read_bytes()
        path = tmp_path / "log.jsonl.gz"
        path.write_bytes(gzip.compress(data))
    fast = _read_fast(str(path), policies, data)
    assert fast is not None, variant
    reference = _line_by_line(path, monkeypatch)
    _assert_same(fast, reference)
    assert reference.source == fast.source == "logger:" + spec["policy"]
    # and read_logged takes the fast reader for it (its size above FAST_MIN_BYTES)
    monkeypatch.setattr(logged, "FAST_MIN_BYTES", 0)
    calls = []
    monkeypatch.setattr(logged, "_parse_line", lambda *a: calls.append(a))
    _assert_same(logged.read_logged(path, policies=policies), reference)
    assert not calls


def _base(n: int = 40) -> list[dict[str, Any]]:
    return _records(9, n, LOGGERS[1])


def _edit(records: list[dict[str, Any]], row: int, text: str) -> list[Any]:
    out: list[Any] = [json.dumps(r) for r in records]
    out[row] = text
    return out


def _other_row_of_query(records: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """A row that is not its query's first line (the second line of the first line's query)."""
    q = records[0]["query"]
    row = next(i for i, r in enumerate(records) if i > 0 and r["query"] == q)
    return row, records[row]


def test_declines_a_logger_written_otherwise_and_the_reference_reads_it(tmp_path, monkeypatch):
    """The same logger as its query's first line, written with other bytes (key order, spaces, 1.0 as 1): the
    line-by-line reader compares values and reads it; the fast reader declines (it compares bytes)."""
    records = _base()
    row, rec = _other_row_of_query(records)
    lg = rec["logger"]
    variants = [
        json.dumps({**rec, "logger": {"scores": lg["scores"], **{k: v for k, v in lg.items() if k != "scores"}}}),
        json.dumps(rec).replace('"logger": {', '"logger": {  '),
        json.dumps({**rec, "logger": {**lg, "n": 5.0}}),  # 5.0 == 5
    ]
    for text in variants:
        path = _write(tmp_path, _edit(records, row, text))
        assert _read_fast(str(path), policies) is None, text
        _assert_same(logged.read_logged(path, policies=policies), _line_by_line(path, monkeypatch))


@pytest.mark.parametrize("case", [
    "other_scores", "missing_logger", "logger_string", "logger_null", "logger_list", "two_loggers", "empty_logger",
    "duplicate_score_key", "malformed_logger", "shown_not_scored", "unknown_policy", "both_forms",
    "escaped_key", "not_utf8", "unclosed_line", "nested_logger_only",
])
def test_declines_and_the_reference_names_the_line(tmp_path, monkeypatch, case):
    """Every line whose logger the fast reader does not take makes it decline (None); ``read_logged`` then gives the
    line-by-line reader's error (naming the line) or its reading. The edited line is a later line of the first
    line's query, so a refusal that compared it with that query's logger names it."""
    records = _base()
    row, rec = _other_row_of_query(records)
    dumped = json.dumps(rec)
    lg_text = json.dumps(rec["logger"])
    edits = {
        "other_scores": json.dumps({**rec, "logger": {**rec["logger"], "scores": {
            **rec["logger"]["scores"], "d0": 9.0}}}),
        "missing_logger": json.dumps({k: v for k, v in rec.items() if k != "logger"}),
        "logger_string": dumped.replace(lg_text, '"{}"'),
        "logger_null": dumped.replace(lg_text, "null"),
        "logger_list": dumped.replace(lg_text, "[1, 2, 3, 4]"),
        "two_loggers": dumped[:-1] + ', "logger": ' + lg_text + "}",
        "empty_logger": dumped.replace(lg_text, "{}"),
        "duplicate_score_key": dumped.replace('"scores": {', '"scores": {"d0": 1.0, '),
        "malformed_logger": dumped.replace(lg_text, lg_text[:-1] + ",}"),
        "shown_not_scored": json.dumps({**rec, "shown": [*rec["shown"][:-1], "zz"], "clicks": []}),
        "unknown_policy": dumped.replace('"epsilon_greedy"', '"epsilon_greedie"'),
        "both_forms": json.dumps({**rec, "propensities": {"list": 0.5}}),
        "escaped_key": dumped.replace('"logger":', '"logg\\u0065r":'),
        "not_utf8": None,
        "unclosed_line": dumped[:-1],
        "nested_logger_only": json.dumps({**{k: v for k, v in rec.items() if k != "logger"},
                                          "shown": rec["shown"]}).replace('"query"', '"x": {"logger": {"a": 1}}, '
                                                                                      '"query"'),
    }
    text = edits[case]
    path = _write(tmp_path, _edit(records, row, text or dumped))
    if case == "not_utf8":  # a byte that is not UTF-8 inside the logger's scores
        raw = path.read_bytes().split(b"\n")
        raw[row] = raw[row].replace(b'"d0"', b'"d\xff"', 1)
        path.write_bytes(b"\n".join(raw))
    assert _read_fast(str(path), policies) is None, case
    monkeypatch.setattr(logged, "FAST_MIN_BYTES", 0)
    try:
        got = logged.read_logged(path, policies=policies)
    except InputError as exc:
        ref_error = _reference_error(path, monkeypatch)
        assert exc.message == ref_error.message and exc.line == ref_error.line == row + 1, (case, exc)
        return
    _assert_same(got, _line_by_line(path, monkeypatch))
    assert case == "escaped_key"  # "logg\u0065r" is "logger" to JSON: the reference reads it (the rest refuse)


def _reference_error(path: Path, monkeypatch: pytest.MonkeyPatch) -> InputError:
    with pytest.raises(InputError) as err:
        _line_by_line(path, monkeypatch)
    return err.value


def test_without_the_policies_package_a_logger_log_is_declined_before_pyarrow(tmp_path, monkeypatch):
    import pyarrow.json as pj

    calls = []
    real = pj.read_json
    monkeypatch.setattr(pj, "read_json", lambda *a, **k: calls.append(1) or real(*a, **k))
    path = _write(tmp_path, _base())
    assert _read_fast(str(path), None) is None and not calls
    assert _read_fast(str(path), policies) is not None and calls == [1]


# ---------------------------------------------------------------------------------------------- the scan itself
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 6, 10 ** 6), st.floats(allow_nan=False,
                                                                                         allow_infinity=False),
                     st.text(alphabet=st.sampled_from('ab{}[]":,\\\n\t é€logger'), max_size=12))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["logger", "a", "{", '"', "\\", "b}"]), inner, max_size=4)), max_leaves=20)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.dictionaries(st.sampled_from(["query", "logger", "x", "logger ", "Logger", "{"]),
                                          _values, max_size=5),
                          st.booleans()), min_size=1, max_size=6))
def test_the_scan_finds_each_lines_top_level_logger_object(lines):
    """Per line: count 1 and the span's bytes decoding to the line's ``logger`` value when that is an object;
    ``BAD`` or more when it is another value; 0 without one; with the taken spans replaced by ``null``, each line
    parses to its object with ``logger`` null."""
    texts = [json.dumps(obj, ensure_ascii=ascii_) for obj, ascii_ in lines]
    raw = "\n".join(texts).encode("utf-8")
    buf = np.frombuffer(raw, dtype=np.uint8)
    starts, ends, counts = logger_spans(raw)
    assert counts.size == len(lines)
    for (obj, _), s, e, c in zip(lines, starts, ends, counts, strict=True):
        if "logger" not in obj:
            assert c == 0
        elif isinstance(obj["logger"], dict):
            assert c == 1 and json.loads(raw[s:e].decode("utf-8")) == obj["logger"]
        else:
            assert c >= BAD
    ok = counts == 1
    if ok.any() and (ends[ok] - starts[ok] >= 4).all():
        nulled = null_loggers(buf, starts[ok], ends[ok]).tobytes().decode("utf-8").split("\n")
        for (obj, _), line, taken in zip(lines, nulled, ok, strict=True):
            assert json.loads(line) == ({**obj, "logger": None} if taken else obj)


def test_the_scan_refuses_lines_that_end_open_and_compares_bytes():
    _, _, counts = logger_spans(b'{"logger": {"a": "}\n{"logger": {"a": 1}\n{"logger": {"a": 1}}')
    assert counts[0] >= BAD and counts[1] >= BAD and counts[2] == 1
    raw = b'{"logger": {"a": 1}}\n{"logger": {"a": 1}}\n{"logger": {"a": 2}}'
    buf = np.frombuffer(raw, dtype=np.uint8)
    starts, ends, counts = logger_spans(raw)
    assert (counts == 1).all()
    assert first_differing(buf, starts, ends, np.array([0, 0, 1])) == 2
    assert first_differing(buf, starts, ends, np.array([0, 0, 2])) == -1


def test_a_log_above_the_fast_size_is_read_alike_at_a_users_size(tmp_path, monkeypatch):
    """10,000 Plackett-Luce impressions (above ``FAST_MIN_BYTES``, read_logged's own choice of reader): the whole
    LoggedLog equals the line-by-line reader's."""
    records = _records(21, 10_000, LOGGERS[0], odd=True, user_type=True)
    path = _write(tmp_path, records)
    assert path.stat().st_size > logged.FAST_MIN_BYTES
    calls = []
    real = logged._parse_line
    monkeypatch.setattr(logged, "_parse_line", lambda *a: calls.append(1) or real(*a))
    fast = logged.read_logged(path, policies=policies)
    assert not calls  # the fast reader took it
    _assert_same(fast, _line_by_line(path, monkeypatch))
    assert calls  # (and the reference is the line-by-line reader)


def test_lines_longer_than_pyarrows_block_are_read_fast(tmp_path, monkeypatch):
    """A logger of 60,000 scores makes each line about 2 MB, more than pyarrow's JSON block (1 MB): with the loggers
    replaced by ``null`` pyarrow reads short lines (before, it refused the log and every line was read in Python)."""
    rng = np.random.default_rng(3)
    scores = {f"doc{j}": float(x) for j, x in enumerate(rng.normal(size=60_000))}
    spec = {"policy": "epsilon_greedy", "epsilon": 0.5, "n": 5, "scores": scores}
    top = sorted(scores, key=scores.__getitem__, reverse=True)[:2]  # the policy's own top 2: positive probability
    records = [{"query": "q1", "user": f"u{i % 3}", "shown": top, "clicks": top[1:] if i % 2 else [],
                "logger": spec} for i in range(6)]
    path = _write(tmp_path, records)
    assert min(len(line) for line in path.read_bytes().split(b"\n")[:-1]) > 1 << 20
    fast = _read_fast(str(path), policies)
    assert fast is not None
    _assert_same(fast, _line_by_line(path, monkeypatch))
