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
