"""A log with ``logger`` lines keeps one logger (options, scores) per query, not one per line (review 18: 10^6 lines
of 30 scores each held 9 GB while read), and still refuses a query whose logger differs on a later line, naming it,
comparing values (a score 1 and a score 1.0 are the same logger)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import onlineeval.io.logged as logged
import onlineeval.io.logged_json as logged_json
from onlineeval.errors import InputError
from onlineeval.io.logged import read_logged
from simulations import policies


def _log(tmp_path: Path, n: int = 600, change: tuple[int, dict[str, Any]] | None = None) -> Path:
    rng = np.random.default_rng(18)
    docs = [f"d{j}" for j in range(6)]
    scores = {f"q{i}": {d: float(s) for d, s in zip(docs, rng.normal(size=6))} for i in range(3)}
    lines = []
    for i in range(n):
        q = f"q{i % 3}"
        order = list(rng.permutation(docs)[:3])
        spec = {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 6, "scores": dict(scores[q])}
        if change is not None and i == change[0]:
            spec["scores"] |= change[1]
        lines.append(json.dumps({"query": q, "user": f"u{i % 50}", "shown": order, "clicks": [order[0]],
                                 "logger": spec}))
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_one_logger_object_per_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real = logged._logger_policy

    def spy(rows: Any, *args: Any, **kw: Any) -> Any:
        seen.append(list(rows))
        return real(rows, *args, **kw)

    monkeypatch.setattr(logged, "_logger_policy", spy)
    log = read_logged(_log(tmp_path), policies=policies)
    rows = seen[0]
    assert len(rows) == 600 and len({id(r) for r in rows}) == 3  # one per query (each line its own before)
    assert len({id(r[1]) for r in rows}) == 3
    # the propensities are those of the query's logger: the top-1 slot's item propensity of an epsilon-greedy
    # policy over all 6 candidates is 0.7 + 0.3 / 6 at its own first document, 0.3 / 6 at another
    p = np.asarray(log.data.p_item)[:, 0]
    assert set(np.round(p, 12)) == {round(0.7 + 0.3 / 6, 12), round(0.3 / 6, 12)}


@pytest.mark.parametrize("change", [{"d0": 5.0}, {"zz": 1.0}])
def test_a_later_differing_logger_is_refused_with_its_line(tmp_path: Path, change: dict[str, float]) -> None:
    with pytest.raises(InputError, match=r":401: the logger \(spec or scores\) differs from line 2 ") as err:
        read_logged(_log(tmp_path, change=(400, change)), policies=policies)
    assert err.value.line == 401


def test_int_and_float_scores_are_the_same_logger(tmp_path: Path) -> None:
    """A score written 1 on one line and 1.0 on another is the same policy (the reader compares values, not canonical
    JSON as it once did, which refused this log); 1 and 1.0001 still differ and are refused, naming both lines."""
    path = _log(tmp_path, n=6)
    lines = path.read_text(encoding="utf-8").splitlines()

    def with_scores(first: float, second: float) -> None:
        for i, value in ((0, first), (3, second)):  # q0's two lines
            obj = json.loads(lines[i])
            obj["logger"]["scores"]["d0"] = value
            lines[i] = json.dumps(obj)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    with_scores(1, 1.0)
    assert '"d0": 1,' in path.read_text(encoding="utf-8") and '"d0": 1.0,' in path.read_text(encoding="utf-8")
    lg = read_logged(path, policies=policies)
    assert lg.data.n == 6 and np.all(lg.data.p_list > 0)
    with_scores(1, 1.0001)
    with pytest.raises(InputError, match=r":4: the logger \(spec or scores\) differs from line 1 "):
        read_logged(path, policies=policies)


def test_a_later_line_with_the_same_logger_still_has_its_shown_documents_checked(tmp_path: Path) -> None:
    """A line whose logger equals its query's first one skips the logger's own checks (done on that first line)
    but not the check of its shown documents against the logger's candidates."""
    path = _log(tmp_path, n=9)
    lines = path.read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[6])  # q0's third line
    obj["shown"][1] = "zz"
    lines[6] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r":7: shown document 'zz' is not among the logger's scored candidates"):
        read_logged(path, policies=policies)


def _arrays(lg: Any) -> dict[str, Any]:
    d = lg.data
    return {name: getattr(d, name) for name in ("query", "shown", "clicks", "p_list", "p_prefix", "p_item", "user")}


def test_kept_logger_texts_give_the_whole_decode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A logger's text is decoded once and given back to the later lines that repeat it (the lines decoded with a
    sentinel in its place): the log read so equals the log read decoding every line whole, array for array; the
    kept path runs (most lines decode without their logger); a top-level logger whose text differs (one score)
    is decoded whole and still refused naming its line."""
    path = _log(tmp_path)
    decoded: list[bool] = []  # per decode call: whether the line's logger was replaced by the sentinel
    real = logged_json.DECODER

    class Counting:
        def decode(self, line: str) -> Any:
            decoded.append("onlineeval kept logger" in line)
            return real.decode(line)

        def raw_decode(self, line: str, start: int) -> Any:
            return real.raw_decode(line, start)

    monkeypatch.setattr(logged_json, "DECODER", Counting())
    fast = read_logged(path, policies=policies)
    # one decode per line, none decoded twice: the 3 queries' first lines whole, the other 597 with the sentinel
    assert len(decoded) == 600 and sum(decoded) == 597
    monkeypatch.setattr(logged_json, "DECODER", real)
    monkeypatch.setattr(logged_json.LoggerTexts, "decode", lambda self, line: logged_json.DECODER.decode(line))
    whole = read_logged(path, policies=policies)
    for name, a in _arrays(fast).items():
        b = _arrays(whole)[name]
        assert (a is None and b is None) or np.array_equal(a, b), name
    monkeypatch.undo()
    with pytest.raises(InputError, match=r"log.jsonl:8\b"):
        read_logged(_log(tmp_path, change=(7, {"d0": 9.5})), policies=policies)


def test_kept_logger_texts_keep_errors_and_nested_keys(tmp_path: Path) -> None:
    """A later line that repeats a kept logger but is malformed elsewhere names its own column (as decoded whole);
    an object holding a nested "logger" key before the top-level one is read as written (its own logger used)."""
    spec = {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 3, "scores": {"a": 1.0, "b": 0.5, "c": 0.1}}
    good = json.dumps({"query": "q", "shown": ["a", "b"], "clicks": ["a"], "logger": spec})
    bad = json.dumps({"query": "q", "shown": ["a", "b"], "clicks": ["a"], "logger": spec})[:-1] + ', "x": }'
    path = tmp_path / "bad.jsonl"
    path.write_text(good + "\n" + bad + "\n")
    with pytest.raises(json.JSONDecodeError) as whole:
        json.loads(bad)
    with pytest.raises(InputError, match=rf"bad.jsonl:2: malformed JSON: .*\(column {whole.value.colno}\)"):
        read_logged(path, policies=policies)
    other = dict(spec, scores={"a": 0.1, "b": 0.5, "c": 1.0})
    nested = json.dumps({"meta": {"logger": spec}, "query": "q", "shown": ["c", "b"], "clicks": [],
                         "logger": other})
    path = tmp_path / "nested.jsonl"
    path.write_text(json.dumps({"query": "q", "shown": ["c", "b"], "clicks": [], "logger": other}) + "\n"
                    + json.dumps({"query": "r", "shown": ["a", "b"], "clicks": [], "logger": spec}) + "\n"
                    + nested + "\n")
    # the third line's first '"logger":' is meta's, whose text is query r's kept logger: had that been taken as the
    # line's logger, query q would have two loggers and be refused; its own top-level one is read
    lg = read_logged(path, policies=policies)
    assert lg.data.p_list.size == 3
