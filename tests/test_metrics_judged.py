"""Review 10, finding 4: ``Judged@k`` is its own metric (ir_measures' definition: the share of the retrieved top
``k`` found in the qrels, any grade), independent of the relevance threshold, labelled ``Judged@k``.

Hand computation. qrels: q1 a 1, b 0, c -2, d 2; q2 e 1, f 0. Runs (no score ties):
q1 ranks a, x, c, b, y (x, y not in the qrels); q2 ranks e, g, h, f, i, j, k, l, m, n, o, p (12 documents).
Judged@3: q1 a, c (c's grade -2 is a qrels entry) -> 2/3; q2 e -> 1/3.
Judged@10: q1 has 5 documents, judged a, c, b -> 3/5 (divided by the list's length); q2 e, f -> 2/10.
Unjudged@10 (trec_eval's unj: empty slots judged, negative grades unjudged): q1 x, c, y -> 3/10; q2 8/10.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.metrics import Judged, parse_metric
from onlineeval.metrics.names import resolve_metric_list

runner = CliRunner()
QRELS = {"q1": {"a": 1, "b": 0, "c": -2, "d": 2}, "q2": {"e": 2, "f": 0}}
RUN = {"q1": ["a", "x", "c", "b", "y"], "q2": ["e", "g", "h", "f", "i", "j", "k", "l", "m", "n", "o", "p"]}
HAND = {3: {"q1": 2 / 3, "q2": 1 / 3}, 10: {"q1": 3 / 5, "q2": 2 / 10}}


def ir_measures_judged(qrels: dict, run: dict, k: int) -> dict[str, float]:
    """ir_measures' Judged@k as its documentation and judged provider define it: documents of the top k (score
    descending, then document id) that appear in the query's qrels, over the number of documents in that top k."""
    out = {}
    for q, docs in run.items():
        top = docs[:k]
        out[q] = sum(d in qrels[q] for d in top) / len(top)
    return out


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in QRELS.items() for d, g in docs.items()))
    (tmp_path / "run").write_text("".join(f"{q} Q0 {d} {i + 1} {100 - i} r\n" for q, docs in RUN.items()
                                          for i, d in enumerate(docs)))
    return ["--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "run")]


def test_judged_is_its_own_metric_named_judged() -> None:
    assert parse_metric("Judged@10") == Judged(k=10)
    names, done = resolve_metric_list("Judged@10,nDCG@10")
    assert names == ["Judged@10", "nDCG@10"] and done == []


@pytest.mark.parametrize("k", [3, 10])
def test_judged_equals_hand_count_and_ir_measures_definition(files: list[str], k: int) -> None:
    assert ir_measures_judged(QRELS, RUN, k) == pytest.approx(HAND[k], abs=1e-15)
    res = runner.invoke(app, ["evaluate", *files, "--metrics", f"Judged@{k},nDCG@10", "--format", "json",
                              "--with-per-query"])
    assert res.exit_code == 0, res.output  # with nDCG@10 at rel_min 1: no threshold clash
    rec = json.loads(res.stdout)["systems"][0]["metrics"][f"Judged@{k}"]
    assert rec["per_query"] == pytest.approx(HAND[k], abs=1e-15)
    assert rec["mean"] == pytest.approx(np.mean(list(HAND[k].values())), abs=1e-15)


def test_judged_ignores_the_relevance_threshold_and_is_labelled_judged(files: list[str]) -> None:
    texts = [runner.invoke(app, ["evaluate", *files, "--metrics", "Judged@10,P@10,Unjudged@10", *extra]).stdout
             for extra in ((), ("--rel-min", "0"), ("--rel-min", "2"))]
    header = texts[0].splitlines()[-2].split()
    assert header == ["system", "Judged@10", "P@10", "Unjudged@10"]
    judged = [t.splitlines()[-1].split()[1] for t in texts]
    assert judged == [f"{(3 / 5 + 2 / 10) / 2:.4f}"] * 3
    # Unjudged@10 is trec_eval's unj: (3/10 + 8/10) / 2, not 1 - Judged@10 here (short list, negative grade)
    assert texts[0].splitlines()[-1].split()[3] == f"{(3 / 10 + 8 / 10) / 2:.4f}"
    res = runner.invoke(app, ["evaluate", *files, "--metrics", "Judged(rel=0)@10"])
    assert res.exit_code == 2 and "Judged takes no rel parameter" in res.output


def test_judged_is_one_minus_unjudged_on_full_lists_without_negative_grades(tmp_path: Path) -> None:
    """When every list reaches k and no grade is negative, Judged@k = 1 - Unjudged@k exactly (per query)."""
    rng = np.random.default_rng(7)
    qrels, run = [], []
    for q in range(30):
        judged = rng.choice(60, size=25, replace=False)
        qrels += [f"q{q} 0 d{d} {rng.integers(0, 3)}" for d in judged]
        run += [f"q{q} Q0 d{d} {i + 1} {100 - i} r" for i, d in enumerate(rng.permutation(60)[:20])]
    (tmp_path / "q").write_text("\n".join(qrels) + "\n")
    (tmp_path / "r").write_text("\n".join(run) + "\n")
    res = runner.invoke(app, ["evaluate", "--qrels", str(tmp_path / "q"), "--run", str(tmp_path / "r"),
                              "--metrics", "Judged@10,Unjudged@10", "--format", "json", "--with-per-query",
                              "--empty", "zero"])
    assert res.exit_code == 0, res.output
    m = json.loads(res.stdout)["systems"][0]["metrics"]
    for q, v in m["Judged@10"]["per_query"].items():
        assert v == pytest.approx(1 - m["Unjudged@10"]["per_query"][q], abs=1e-15)
