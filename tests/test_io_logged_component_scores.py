"""A logged mixture whose components randomise around their own rankers (intervention harvesting, Agarwal et al.
2019): each component may carry its own ``scores`` of the logger's candidates. The propensities against the
analytic mixture (a deterministic component around B's scores, RandTop around the logger's), the sharing of one
policy by queries whose loggers differ only in scores, the refusals naming the line, and the Parquet form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from onlineeval.errors import InputError
from onlineeval.io.logged import read_logged
from simulations import policies

DOCS = ["a", "b", "c", "d"]
#: per query: the logger's scores (ranker A) and B's, in another order
A_SCORES = {"q1": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}, "q2": {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}}
B_SCORES = {"q1": {"a": 1.0, "b": 4.0, "c": 3.0, "d": 2.0}, "q2": {"a": 3.0, "b": 1.0, "c": 4.0, "d": 2.0}}
W_DET = 0.4


def _logger(q: str, own: dict[str, Any] | None = None) -> dict[str, Any]:
    det: dict[str, Any] = {"policy": "deterministic", "weight": W_DET, "scores": B_SCORES[q] if own is None else own}
    return {"policy": "mixture", "scores": A_SCORES[q],
            "components": [det, {"policy": "randtop", "n": 4, "weight": 1 - W_DET}]}


def _write(tmp_path: Path, records: list[dict[str, Any]], name: str = "log.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _records(n: int = 60, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        q = "q1" if i % 2 else "q2"
        b_top = sorted(DOCS, key=lambda d: -B_SCORES[q][d])[:2]
        shown = b_top if rng.random() < 0.3 else [str(x) for x in rng.permutation(DOCS)[:2]]
        out.append({"query": q, "user": f"u{i % 7}", "shown": shown, "clicks": [], "logger": _logger(q)})
    return out


def _expected(q: str, shown: list[str]) -> tuple[float, list[float], list[float]]:
    """The mixture's probabilities by hand: the deterministic component shows B's top 2 (probability 1 for that
    list, its prefix and its items, 0 otherwise), RandTop-4 over 4 candidates an ordered pair uniformly (1/12; a
    document at a slot 1/4)."""
    b = sorted(DOCS, key=lambda d: -B_SCORES[q][d])
    det_pre = [float(shown[: j + 1] == b[: j + 1]) for j in range(2)]
    det_item = [float(shown[j] == b[j]) for j in range(2)]
    rt_pre, rt_item = [1 / 4, 1 / 12], [1 / 4, 1 / 4]
    pre = [W_DET * x + (1 - W_DET) * y for x, y in zip(det_pre, rt_pre)]
    item = [W_DET * x + (1 - W_DET) * y for x, y in zip(det_item, rt_item)]
    return pre[-1], pre, item


def test_component_scores_give_the_mixture_of_each_components_own_ranking(tmp_path: Path) -> None:
    recs = _records()
    log = read_logged(_write(tmp_path, recs), policies=policies)
    d = log.data
    hit_b = 0
    for i, rec in enumerate(recs):
        plist, pre, item = _expected(rec["query"], rec["shown"])
        hit_b += pre[0] > (1 - W_DET) / 4
        assert d.p_list[i] == pytest.approx(plist, rel=1e-12)
        np.testing.assert_allclose(d.p_prefix[i, :2], pre, rtol=1e-12)
        np.testing.assert_allclose(d.p_item[i, :2], item, rtol=1e-12)
    assert hit_b > 10  # B's own top document is shown first often: the component's scores are used
    # the two queries' loggers differ only in scores: one policy over both, described with its own-score component
    assert len(d.logger.policies) == 1
    (text,) = d.logger.describe()
    assert text.startswith("mixture") and text.endswith(" (component 1 with its own logged scores, the others "
                                                        "with the logger's)")
    # the deterministic component puts B's top pair at (0, 1) with probability W_DET + RandTop's 1/12
    q1 = log.queries.index("q1")
    col = {doc: j for j, doc in enumerate(log.docs[q1])}
    pairs = d.logger.pair_marginals(q1)
    assert pairs[0, col["b"], 1, col["c"]] == pytest.approx(W_DET + (1 - W_DET) / 12, rel=1e-12)
    assert pairs[0, col["a"], 1, col["b"]] == pytest.approx((1 - W_DET) / 12, rel=1e-12)


def test_component_scores_equal_to_the_loggers_read_as_a_component_without_them(tmp_path: Path) -> None:
    with_own = [r | {"logger": _logger(r["query"], own=A_SCORES[r["query"]])} for r in _records()]
    without = [r | {"logger": {**r["logger"], "components": [
        {k: v for k, v in r["logger"]["components"][0].items() if k != "scores"}, r["logger"]["components"][1]]}}
        for r in with_own]
    a = read_logged(_write(tmp_path, with_own, "own.jsonl"), policies=policies).data
    b = read_logged(_write(tmp_path, without, "plain.jsonl"), policies=policies).data
    for form in ("p_list", "p_prefix", "p_item"):
        np.testing.assert_array_equal(getattr(a, form), getattr(b, form))
    assert "own logged scores" in a.logger.describe()[0] and "own logged scores" not in b.logger.describe()[0]


@pytest.mark.parametrize(("own", "message"), [
    ({"a": 1.0, "b": 2.0, "c": 3.0}, r"logger\.components\[0\]\.scores must score the logger's candidates, those "
                                    r"of logger\.scores: it misses 'd'"),
    ({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0}, r"it scores 'e', which logger\.scores does not"),
    ({"a": 1.0, "b": "x", "c": 3.0, "d": 4.0}, r"logger\.components\[0\]\.scores\['b'\] must be a finite number"),
    ("B", r"logger\.components\[0\]\.scores must be an object \{doc id: score\} of the logger's candidates"),
    ({}, r"logger\.components\[0\]\.scores must be an object"),
])
@pytest.mark.parametrize("fast", [True, False], ids=["whole-file reader", "line by line"])
def test_bad_component_scores_are_refused_naming_the_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           own: Any, message: str, fast: bool) -> None:
    import onlineeval.io.logged as logged

    monkeypatch.setattr(logged, "FAST_MIN_BYTES", 0 if fast else 1 << 62)
    recs = _records(6)
    recs[3] = recs[3] | {"logger": _logger(recs[3]["query"], own=own)}
    with pytest.raises(InputError, match=message) as err:
        read_logged(_write(tmp_path, recs), policies=policies)
    assert err.value.line == 4, err.value


def test_the_whole_file_reader_reads_component_scores_as_the_line_by_line_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import onlineeval.io.logged as logged
    from onlineeval.io.logged_fast import _read_fast

    path = _write(tmp_path, _records(400))
    fast = _read_fast(str(path), policies, None)
    assert fast is not None  # it does not decline this log
    monkeypatch.setattr(logged, "FAST_MIN_BYTES", 1 << 62)
    slow = read_logged(path, policies=policies)
    for form in ("p_list", "p_prefix", "p_item", "shown", "query"):
        np.testing.assert_array_equal(getattr(fast.data, form), getattr(slow.data, form))


def test_the_parquet_form_reads_component_scores_as_the_json_log(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    recs = _records()
    jsonl = read_logged(_write(tmp_path, recs), policies=policies).data
    for as_text in (True, False):
        rows = [r | {"logger": json.dumps(r["logger"])} if as_text else r for r in recs]
        path = tmp_path / f"log_{as_text}.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
        data = read_logged(path, policies=policies).data
        for form in ("p_list", "p_prefix", "p_item"):
            np.testing.assert_array_equal(getattr(data, form), getattr(jsonl, form))
