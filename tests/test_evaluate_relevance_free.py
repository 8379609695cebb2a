"""Review 13, F3: per-metric query sets. Judged@k does not depend on relevance, so under the default conventions
(empty=exclude) its mean counts the queries without a relevant document, as ir_measures' mean does; so do the
other relevance-free metrics (Unjudged@k, NumRet, RBPResidual: ``Metric.relevance_free``). Every other metric's
mean follows the empty rule, and the outputs say how many queries each mean is over when they differ. Paired
tests pair both runs on the metric's own queries.

The review's example: q1 retrieves d1 (judged, relevant) and dX (unjudged); q2, with no relevant document,
retrieves dY, dZ (unjudged) and d1 (judged non-relevant). Judged@3 per query: 1/2 and 1/3 (the slots past a
list's end do not count); ir_measures' mean (1/2 + 1/3) / 2 = 0.4167 (before: 0.5000, q2 left out).
"""

from __future__ import annotations

import io
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from onlineeval.api import evaluate
from onlineeval.cli import app
from onlineeval.metrics.base import REGISTRY

runner = CliRunner()
TREC = Path("/work/shared/data/trec_eval")  # trec_eval's test data (its README says where each file comes from)
LINE = ("queries per mean [j]: 2 for Judged@3 (it does not depend on relevance, so its mean counts the 1 query "
        "without a relevant document too, as ir_measures' means do)")


def judged_at(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], k: int) -> dict[str, float]:
    """ir_measures' Judged@k as its judged provider defines it: the share of the top k (score descending, then
    document id ascending) found in the query's qrels, over the number of documents in that top k; one value per
    run query that has qrels."""
    out = {}
    for q, scores in run.items():
        if q not in qrels:
            continue
        top = sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]
        out[q] = sum(d in qrels[q] for d, _ in top) / len(top)
    return out


def read_trec(path: Path, run: bool) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split()
        out.setdefault(f[0], {})[f[2]] = float(f[4]) if run else int(f[3])
    return out


def test_relevance_free_metrics_are_those_that_read_no_grade() -> None:
    free = sorted(name for name, cls in REGISTRY.items() if cls.relevance_free)
    assert free == ["Judged", "NumRet", "RBPResidual", "Unjudged"]
    assert all(not cls.empty_sensitive for cls in REGISTRY.values() if cls.relevance_free)


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "j.qrels").write_text("q1 0 d1 1\nq2 0 d1 0\n")
    (tmp_path / "j.run").write_text("q1 Q0 d1 1 2 r\nq1 Q0 dX 2 1 r\nq2 Q0 dY 1 3 r\nq2 Q0 dZ 2 2 r\nq2 Q0 d1 3 1 r\n")
    return ["evaluate", "--qrels", str(tmp_path / "j.qrels"), "--run", str(tmp_path / "j.run")]


def test_judged_mean_counts_queries_without_relevant_documents(files: list[str]) -> None:
    default = runner.invoke(app, [*files, "--metrics", "Judged@3"])
    assert default.exit_code == 0, default.output
    assert default.stdout.splitlines()[-1].split()[1] == f"{(1 / 2 + 1 / 3) / 2:.4f}" == "0.4167"
    assert "queries [j]: counted 1, excluded (no relevant) 1" in default.stdout
    assert LINE in default.stdout.splitlines()
    zero = runner.invoke(app, [*files, "--metrics", "Judged@3", "--empty", "zero"])
    assert zero.exit_code == 0, zero.output
    assert zero.stdout.splitlines()[-1].split()[1] == "0.4167"
    assert "queries per mean" not in zero.stdout  # every mean over the 2 counted queries


def test_each_output_gives_each_metric_its_own_queries(files: list[str]) -> None:
    both = [*files, "--metrics", "nDCG@3,Judged@3", "--with-per-query"]
    table = runner.invoke(app, both)
    assert table.exit_code == 0, table.output
    assert LINE + ", 1 for the other metrics (empty=exclude)" in table.stdout.splitlines()
    assert table.stdout.splitlines()[-1].split()[1:] == ["1.0000", "0.4167"]
    doc = json.loads(runner.invoke(app, [*both, "--format", "json"]).stdout)
    recs = doc["systems"][0]["metrics"]
    assert recs["Judged@3"]["n"] == 2 and recs["Judged@3"]["per_query"] == pytest.approx({"q1": 1 / 2, "q2": 1 / 3})
    assert recs["Judged@3"]["mean"] == pytest.approx(5 / 12, rel=1e-15)
    assert recs["nDCG@3"]["n"] == 1 and recs["nDCG@3"]["per_query"] == {"q1": 1.0}
    assert doc["queries_per_metric"] == {"j": {"nDCG@3": 1, "Judged@3": 2}}
    assert doc["relevance_free_note"] == LINE + ", 1 for the other metrics (empty=exclude)"
    csv = runner.invoke(app, [*both, "--format", "csv"])
    frame = pd.read_csv(io.StringIO(csv.stdout))
    agg = frame[frame["query"] == "all"].set_index("metric")
    assert agg.loc["Judged@3", "n"] == 2 and agg.loc["nDCG@3", "n"] == 1
    assert (agg["queries_counted"] == 1).all() and (agg["queries_excluded_empty"] == 1).all()
    per_q = frame[frame["query"].str.startswith("q")]
    assert sorted(per_q.loc[per_q["metric"] == "Judged@3", "query"]) == ["q1", "q2"]
    assert list(per_q.loc[per_q["metric"] == "nDCG@3", "query"]) == ["q1"]
    assert "note: " + LINE in csv.stderr
    # the Python API: the same per-metric counts
    ev = evaluate(Path(files[2]), [Path(files[4])], "nDCG@3,Judged@3")
    run = ev.runs["j"]
    assert run.n("Judged@3") == 2 and run.n("nDCG@3") == 1 and run.counts.counted == 1
    assert ev.aggregate.set_index("metric")["n"].to_dict() == {"nDCG@3": 1, "Judged@3": 2}
    assert ev.mean("j", "Judged@3") == pytest.approx(5 / 12, rel=1e-15)
    wide = run.per_query().set_index("query")
    assert wide.loc["q2", "Judged@3"] == pytest.approx(1 / 3) and math.isnan(wide.loc["q2", "nDCG@3"])


# two systems, q3 and q4 without a relevant document (judged non-relevant d4, d5, d6)
PAIR_QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\nq3 0 d4 0\nq3 0 d5 0\nq4 0 d6 0\n"
PAIR_RUNS = {
    "A": {"q1": ["d1", "x1"], "q2": ["d3", "d9"], "q3": ["d4", "d5", "y"], "q4": ["z1", "z2", "d6"]},
    "B": {"q1": ["x1", "x2"], "q2": ["d3"], "q3": ["y1", "y2", "d4"], "q4": ["d6", "z1"]},
}


def exact_sign_flip_p(d: np.ndarray) -> float:
    """Two-sided exact randomisation p of the mean difference: all 2^n sign vectors."""
    t = abs(d.mean())
    hits = sum(abs((d * np.array(s)).mean()) >= t - 1e-12 for s in itertools.product((1, -1), repeat=d.size))
    return hits / 2 ** d.size


def test_paired_tests_pair_both_runs_on_each_metrics_queries(tmp_path: Path) -> None:
    (tmp_path / "qrels").write_text(PAIR_QRELS)
    for name, docs in PAIR_RUNS.items():
        (tmp_path / f"{name}.run").write_text("".join(
            f"{q} Q0 {d} {i + 1} {10 - i} {name}\n" for q, ds in docs.items() for i, d in enumerate(ds)))
    qrels = read_trec(tmp_path / "qrels", run=False)
    hand = {n: judged_at(qrels, read_trec(tmp_path / f"{n}.run", run=True), 3) for n in PAIR_RUNS}
    assert hand == {"A": pytest.approx({"q1": 1 / 2, "q2": 1 / 2, "q3": 2 / 3, "q4": 1 / 3}),
                    "B": pytest.approx({"q1": 0.0, "q2": 1.0, "q3": 1 / 3, "q4": 1 / 2})}
    args = ["evaluate", "--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "A.run"), "--run",
            str(tmp_path / "B.run"), "--metrics", "P@2,Judged@3", "--permutations", "1000", "--bootstrap", "200"]
    doc = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    cmp = {r["metric"]: r for r in doc["comparisons"]}
    d = np.array([hand["B"][q] - hand["A"][q] for q in ("q1", "q2", "q3", "q4")])
    assert cmp["Judged@3"]["n"] == 4 and cmp["P@2"]["n"] == 2
    assert cmp["Judged@3"]["mean_diff"] == pytest.approx(d.mean(), abs=1e-15)
    assert cmp["Judged@3"]["wins"] == 2 and cmp["Judged@3"]["losses"] == 2
    assert cmp["Judged@3"]["p_randomization"] == pytest.approx(exact_sign_flip_p(d), abs=1e-15)
    assert cmp["P@2"]["mean_diff"] == pytest.approx(((0 + 1 / 2) - (1 / 2 + 1 / 2)) / 2, abs=1e-15)
    assert doc["paired_queries"] == 2 and doc["paired_queries_per_metric"] == {"P@2": 2, "Judged@3": 4}
    table = runner.invoke(app, args).stdout
    assert "paired comparisons vs A (2 queries; Judged@3: 4)" in table
    # --missing drop, B without q4: Judged@3 pairs q1..q3 only; the note names each metric's query sets
    (tmp_path / "B.run").write_text("".join(line + "\n" for line in (tmp_path / "B.run").read_text().splitlines()
                                            if not line.startswith("q4")))
    doc = json.loads(runner.invoke(app, [*args, "--missing", "drop", "--format", "json"]).stdout)
    cmp = {r["metric"]: r for r in doc["comparisons"]}
    assert cmp["Judged@3"]["n"] == 3 and cmp["P@2"]["n"] == 2
    assert cmp["Judged@3"]["mean_diff"] == pytest.approx(d[:3].mean(), abs=1e-15)
    sets = doc["query_sets_differ"]
    assert sets["counted"] == {"A": 4, "B": 3} and sets["shared"] == 3 and set(sets["by_metric"]) == {"Judged@3"}
    assert "(Judged@3: A: 4, B: 3); the paired comparisons use the queries counted for every system (3 for " \
           "Judged@3)" in sets["note"]


def test_segment_means_say_how_many_queries_each_mean_uses(tmp_path: Path) -> None:
    (tmp_path / "qrels").write_text(PAIR_QRELS)
    (tmp_path / "A.run").write_text("".join(
        f"{q} Q0 {d} {i + 1} {10 - i} A\n" for q, ds in PAIR_RUNS["A"].items() for i, d in enumerate(ds)))
    (tmp_path / "seg.tsv").write_text("query\tpart\nq1\tx\nq3\tx\nq2\ty\nq4\ty\n")
    res = runner.invoke(app, ["evaluate", "--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "A.run"),
                              "--metrics", "P@2,Judged@3", "--segments", str(tmp_path / "seg.tsv")])
    assert res.exit_code == 0, res.output
    assert f"  part=x (2 queries) A Judged@3: {(1 / 2 + 2 / 3) / 2:.4f}" in res.stdout
    assert "  part=x (2 queries, 1 in this mean) A P@2: 0.5000" in res.stdout


@pytest.mark.skipif(not (TREC / "qrels.comment.test").exists(), reason=f"trec_eval's test data is not in {TREC}")
@pytest.mark.parametrize("rel_min", [1, 3])
def test_judged_on_trec_data_equals_ir_measures_definition_and_other_metrics_keep_their_queries(
    rel_min: int,
) -> None:
    """qrels.comment.test (31 topics, 2024-36302 without a relevant document; 11 without a grade-3 one) with
    results.comment.test: Judged@10 over all 31 topics, per query equal to ir_measures' definition; the relevance
    metrics over the 30 (20) topics with a relevant document, equal to their values without Judged@10 beside."""
    qrels_path, run_path = TREC / "qrels.comment.test", TREC / "results.comment.test"
    ref = judged_at(read_trec(qrels_path, run=False), read_trec(run_path, run=True), 10)
    assert len(ref) == 31
    mixed = evaluate(qrels_path, [run_path], "nDCG@10,AP,Judged@10,NumQ", rel_min=rel_min)
    alone = evaluate(qrels_path, [run_path], "nDCG@10,AP,NumQ", rel_min=rel_min)
    ev = mixed.runs["results.comment"]
    judged = mixed.per_query[mixed.per_query["metric"] == "Judged@10"].set_index("query")["value"]
    assert judged.to_dict() == ref  # bit for bit
    assert ev.n("Judged@10") == 31 and mixed.mean("results.comment", "Judged@10") == pytest.approx(
        math.fsum(ref.values()) / 31, rel=1e-15)
    counted = {1: 30, 3: 20}[rel_min]
    assert ev.counts.counted == counted and ev.counts.excluded_empty == 31 - counted
    for m in ("nDCG@10", "AP", "NumQ"):
        assert ev.n(m) == counted
        a = mixed.per_query[mixed.per_query["metric"] == m].reset_index(drop=True)
        b = alone.per_query[alone.per_query["metric"] == m].reset_index(drop=True)
        assert a.equals(b)
        assert mixed.mean("results.comment", m) == alone.mean("results.comment", m)


@pytest.mark.skipif(not (TREC / "qrels.comment.test").exists(), reason=f"trec_eval's test data is not in {TREC}")
def test_judged_on_trec_data_equals_ir_measures() -> None:
    import ir_measures as irm
    qrels_path, run_path = TREC / "qrels.comment.test", TREC / "results.comment.test"
    qrels = list(irm.read_trec_qrels(str(qrels_path)))
    run = list(irm.read_trec_run(str(run_path)))
    for k in (5, 10, 100):
        measure = irm.Judged @ k
        theirs = {r.query_id: r.value for r in irm.iter_calc([measure], qrels, run)}
        res = runner.invoke(app, ["evaluate", "--qrels", str(qrels_path), "--run", str(run_path), "--metrics",
                                  f"nDCG@10,Judged@{k}", "--format", "json", "--with-per-query"])
        rec = json.loads(res.stdout)["systems"][0]["metrics"][f"Judged@{k}"]
        assert rec["per_query"] == theirs  # bit for bit, all 31 topics
        assert rec["mean"] == pytest.approx(irm.calc_aggregate([measure], qrels, run)[measure], rel=1e-15)
