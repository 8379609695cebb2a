"""``onlineeval evaluate`` end to end with typer's CliRunner."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.conventions import preset
from onlineeval.io import read_qrels, read_run
from onlineeval.metrics.evaluate import evaluate_run

runner = CliRunner()

QRELS = """q1 0 a 2
q1 0 b 1
q1 0 c 0
q2 0 a 1
q2 0 d 0
q3 0 e 0
q4 0 f 1
"""
RUN_A = """q1 Q0 a 1 3.0 A
q1 Q0 b 2 2.0 A
q1 Q0 c 3 1.0 A
q2 Q0 d 1 2.0 A
q2 Q0 a 2 1.0 A
q3 Q0 e 1 1.0 A
q4 Q0 f 1 1.0 A
q9 Q0 z 1 1.0 A
"""
RUN_B = """q1 Q0 c 1 3.0 B
q1 Q0 b 2 2.0 B
q1 Q0 a 3 1.0 B
q2 Q0 a 1 2.0 B
q2 Q0 d 2 1.0 B
q3 Q0 e 1 1.0 B
q4 Q0 g 1 1.0 B
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in [("qrels.txt", QRELS), ("A.txt", RUN_A), ("B.txt", RUN_B)]:
        p = tmp_path / name
        p.write_text(text)
        out[name] = p
    return out


def invoke(*args: str):
    return runner.invoke(app, ["evaluate", *args])


def test_table_output_reports_conventions_counts_and_means(files) -> None:
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run", str(files["B.txt"]),
                 "--metrics", "nDCG@10,AP,RR", "--permutations", "500", "--bootstrap", "500")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "conventions: name=default, gain=exponential, empty=exclude, missing=error, ties=docno_desc" in out
    # q3 has no relevant document: excluded; q9 is only in run A: ignored
    assert "queries [A]: counted 3, excluded (no relevant) 1" in out
    assert "ignored (not in qrels) 1" in out
    assert "paired comparisons vs A" in out
    ev = evaluate_run(read_qrels(files["qrels.txt"]), read_run(files["A.txt"]), ["AP"])
    assert f"{ev.mean('AP'):.4f}" in out


def test_json_output(files) -> None:
    args = ["--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run", str(files["B.txt"]),
            "--metrics", "nDCG@10,RBP(p=0.8),AP", "--format", "json", "--baseline", "A", "--preset", "trec_eval",
            "--with-per-query", "--permutations", "300", "--bootstrap", "300", "--seed", "3"]
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["conventions"]["name"] == "trec_eval" and data["conventions"]["gain"] == "linear"
    assert data["metrics"] == ["nDCG@10", "RBP(p=0.8)", "AP"]
    sys_a = data["systems"][0]
    assert sys_a["name"] == "A" and sys_a["counts"]["counted"] == 4 and sys_a["counts"]["scored_empty"] == 1
    ev = evaluate_run(read_qrels(files["qrels.txt"]), read_run(files["A.txt"]), ["AP"], preset("trec_eval"))
    assert sys_a["metrics"]["AP"]["mean"] == pytest.approx(ev.mean("AP"))
    assert sys_a["metrics"]["AP"]["n"] == 4
    assert set(sys_a["metrics"]["AP"]["per_query"]) == {"q1", "q2", "q3", "q4"}
    rbp = sys_a["metrics"]["RBP(p=0.8)"]
    resid = evaluate_run(read_qrels(files["qrels.txt"]), read_run(files["A.txt"]), ["RBPResidual(p=0.8)"],
                         preset("trec_eval"))
    assert rbp["residual"] == pytest.approx(resid.mean("RBPResidual(p=0.8)"))
    assert rbp["interval"] == [pytest.approx(rbp["mean"]), pytest.approx(rbp["mean"] + rbp["residual"])]
    comps = data["comparisons"]
    assert {c["metric"] for c in comps} == {"nDCG@10", "RBP(p=0.8)", "AP"}
    for c in comps:
        assert c["system"] == "B" and c["baseline"] == "A" and 0 < c["p_randomization"] <= 1
        assert c["p_randomization_holm"] >= c["p_randomization"]
    # seeded: identical output
    assert invoke(*args).output == res.output


def test_csv_and_per_query_file(files, tmp_path: Path) -> None:
    pq = tmp_path / "pq.csv"
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--metrics", "P@2,RR",
                 "--format", "csv", "--per-query", str(pq), "--empty", "zero")
    assert res.exit_code == 0, res.output
    table = pd.read_csv(io.StringIO(res.output))
    assert list(table["metric"]) == ["P@2", "RR"]
    assert (table["queries_counted"] == 4).all() and (table["convention_empty"] == "zero").all()
    per_query = pd.read_csv(pq)
    assert list(per_query.columns)[:4] == ["query", "system", "metric", "value"]
    assert (per_query["convention_empty"] == "zero").all()
    assert (per_query["convention_name"] == "default+empty=zero").all()
    assert len(per_query) == 8
    rr = per_query[(per_query.metric == "RR")].set_index("query")["value"]
    assert rr["q2"] == 0.5 and rr["q1"] == 1.0


def test_segments(files, tmp_path: Path) -> None:
    seg = tmp_path / "seg.tsv"
    seg.write_text("query\tbucket\nq1\thead\nq2\thead\nq4\ttail\n")
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run", str(files["B.txt"]),
                 "--metrics", "AP", "--segments", str(seg), "--format", "json",
                 "--permutations", "100", "--bootstrap", "200")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    segs = {(c["segment_attribute"], c["segment_value"]) for c in data["comparisons"]}
    assert ("bucket", "head") in segs and ("bucket", "tail") in segs
    means = {(m["segment_value"], m["system"]): m["mean"] for m in data["segment_means"]}
    assert ("head", "A") in means


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--metrics", "nDCG@x"], "cut-off"),
        (["--metrics", "Foo"], "unknown metric"),
        (["--baseline", "C"], "not one of the systems"),
        (["--ties", "random"], "ties"),
        (["--format", "xml"], "format"),
        (["--preset", "nope"], "unknown preset"),
        (["--gain", "expo"], "gain"),
    ],
)
def test_bad_options_exit_2_with_one_line(files, extra: list[str], fragment: str) -> None:
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), *extra)
    assert res.exit_code == 2
    assert fragment in res.output and "Traceback" not in res.output


def test_unimplemented_trec_eval_measure_differs_from_a_typo(files) -> None:
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--metrics", "AP,set_F")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "set_F is a trec_eval measure that onlineeval does not implement" in res.output
    assert "unknown metric" not in res.output and "ndcg_cut_<k>" in res.output
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--metrics", "AP,nDGC@10")
    assert res.exit_code == 2 and "unknown metric 'nDGC' (did you mean nDCG?)" in res.output
    assert "does not implement" not in res.output


def test_malformed_run_names_file_and_line(files, tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("q1 Q0 a 1 3.0 X\nq1 Q0 b 2 oops X\n")
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(bad))
    assert res.exit_code == 2
    assert f"{bad}:2: score must be a number" in res.output


def test_missing_queries_error_then_fill(files) -> None:
    args = ["--qrels", str(files["qrels.txt"]), "--run", str(files["B.txt"]), "--metrics", "RR"]
    # B answers every qrels query; drop q4 from it
    text = files["B.txt"].read_text().replace("q4 Q0 g 1 1.0 B\n", "")
    files["B.txt"].write_text(text)
    res = invoke(*args)
    assert res.exit_code == 2 and "not in the run (q4)" in res.output
    res = invoke(*args, "--missing", "zero", "--format", "json")
    assert res.exit_code == 0
    counts = json.loads(res.output)["systems"][0]["counts"]
    assert counts["filled_missing"] == 1


def test_trec_eval_numbers_through_the_cli(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    res = invoke("--qrels", str(d / "qrels.test"), "--run", str(d / "results.test"), "--metrics", "AP,P@10,RPrec",
                 "--preset", "trec_eval", "--format", "json")
    assert res.exit_code == 0, res.output
    means = {k: v["mean"] for k, v in json.loads(res.output)["systems"][0]["metrics"].items()}
    # trec_eval's own printed values (4 decimals) from its expected output out.test
    printed = {}
    for line in (d / "out.test").read_text().splitlines():
        name, qid, value = line.split()
        if qid == "all" and name in ("map", "P_10", "Rprec"):
            printed[name] = float(value)
    assert len(printed) == 3
    for ours, theirs in (("AP", "map"), ("P@10", "P_10"), ("RPrec", "Rprec")):
        assert abs(means[ours] - printed[theirs]) <= 0.5e-4, ours


def test_letor_input_with_score_files(tmp_path: Path) -> None:
    letor = tmp_path / "test.txt"
    letor.write_text("2 qid:1 1:0.1\n0 qid:1 1:0.2\n1 qid:2 1:0.3\n0 qid:2 1:0.4\n0 qid:3 1:0.5\n")
    a = tmp_path / "a.pred"
    a.write_text("0.9\n0.1\n0.2\n0.8\n0.5\n")
    b = tmp_path / "b.pred"
    b.write_text("0.5\n0.5\n0.5\n0.5\n0.5\n")  # all tied: input order decides under lightgbm
    res = invoke("--letor", str(letor), "--scores", str(a), "--scores", str(b), "--metrics", "nDCG@1",
                 "--preset", "lightgbm", "--format", "json", "--permutations", "100", "--bootstrap", "100")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    means = {s["name"]: s["metrics"]["nDCG@1"]["mean"] for s in data["systems"]}
    # a: q1 right (1), q2 wrong (0), q3 all-zero labels -> 1; b: input order -> q1 1, q2 1, q3 1
    assert means == {"a": pytest.approx(2 / 3), "b": pytest.approx(1.0)}
    assert data["systems"][0]["counts"]["scored_empty"] == 1
    bad = invoke("--letor", str(letor), "--run", str(a))
    assert bad.exit_code == 2 and "--scores" in bad.output


def test_every_csv_table_states_conventions_and_rbp_interval(files, tmp_path: Path) -> None:
    seg = tmp_path / "seg.tsv"
    seg.write_text("query\tbucket\nq1\thead\nq2\thead\nq4\ttail\n")
    cmp_path = tmp_path / "cmp.csv"
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run", str(files["B.txt"]),
                 "--metrics", "AP,RBP(p=0.8)", "--segments", str(seg), "--format", "csv", "--preset", "trec_eval",
                 "--comparisons", str(cmp_path), "--permutations", "100", "--bootstrap", "200")
    assert res.exit_code == 0, res.output
    # one table on stdout (means and segment means), the comparisons in their own file
    tables = [pd.read_csv(io.StringIO(res.stdout)), pd.read_csv(cmp_path)]
    # q3 is counted (trec_eval: empty queries score 0) but has no attributes: said on stderr
    assert "1 evaluated queries without attributes form the segment <missing>" in res.stderr
    for table in tables:
        assert (table["convention_name"] == "trec_eval").all() and (table["convention_gain"] == "linear").all()
    means = tables[0][tables[0]["query"] == "all"].set_index(["system", "metric"])
    resid = evaluate_run(read_qrels(files["qrels.txt"]), read_run(files["A.txt"]), ["RBPResidual(p=0.8)"],
                         preset("trec_eval"))
    row = means.loc[("A", "RBP(p=0.8)")]
    assert row["residual"] == pytest.approx(resid.mean("RBPResidual(p=0.8)"))
    assert pd.isna(means.loc[("A", "AP"), "residual"])


def test_table_names_the_interval_and_holm_family(files) -> None:
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run", str(files["B.txt"]),
                 "--metrics", "AP", "--permutations", "100", "--bootstrap", "200")
    assert res.exit_code == 0, res.output
    assert "paired bootstrap BCa 95% CI" in res.output
    assert "Holm-corrected within each segment table over systems x metrics" in res.output
    assert "d_z" in res.output


def test_table_says_how_many_resamples_and_sign_vectors_and_the_seed(files, tmp_path: Path) -> None:
    """The BCa columns and p_rand depend on the bootstrap's and the randomisation test's draws: the legend names
    their counts and the seed (only the JSON had them), and whether p_rand is exact (all 2^n sign vectors) or
    Monte Carlo (with its largest SE, 0.5 / sqrt(B)), per comparison where they differ (segments)."""
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run", str(files["B.txt"]),
                 "--metrics", "AP", "--permutations", "100", "--bootstrap", "200", "--seed", "7")
    assert res.exit_code == 0, res.output
    assert "paired bootstrap BCa 95% CI (200 resamples of the queries, seed 7);" in res.output
    assert "p_rand = randomisation (sign-flip) test (exact: all 2^n sign vectors);" in res.output
    rng = np.random.default_rng(3)
    qrels, run_a, run_b = [], [], []
    for q in range(12):
        for d in range(5):
            qrels.append(f"q{q} 0 d{d} {int(rng.integers(0, 3))}")
            run_a.append(f"q{q} Q0 d{d} {d + 1} {5 - d} A")
            run_b.append(f"q{q} Q0 d{d} {d + 1} {rng.random():.6f} B")
    for name, lines in (("qrels", qrels), ("A", run_a), ("B", run_b)):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    seg = tmp_path / "seg.tsv"
    seg.write_text("query\tbucket\n" + "".join(f"q{q}\t{'head' if q < 3 else 'tail'}\n" for q in range(12)))
    args = ("--qrels", str(tmp_path / "qrels.txt"), "--run", str(tmp_path / "A.txt"), "--run", str(tmp_path / "B.txt"),
            "--metrics", "nDCG", "--permutations", "400", "--bootstrap", "300", "--seed", "5")
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    assert ("p_rand = randomisation (sign-flip) test (400 random sign vectors, seed 5, Monte Carlo SE of p at most "
            "0.025);") in res.output  # 2^12 > 400
    assert "(300 resamples of the queries, seed 5)" in res.output
    res = invoke(*args, "--segments", str(seg))  # head: 3 queries, 2^3 <= 400: exact; all and tail: drawn
    assert res.exit_code == 0, res.output
    assert ("p_rand = randomisation (sign-flip) test (exact over all 2^n sign vectors where 2^n <= 400, else 400 "
            "random sign vectors, seed 5, Monte Carlo SE of p at most 0.025);") in res.output
    one = tmp_path / "one.txt"
    one.write_text("".join(line + "\n" for line in qrels if line.startswith("q0 ")))
    res = invoke("--qrels", str(one), *args[2:])  # one query: no test, no interval, nothing to name
    assert res.exit_code == 0, res.output
    assert "BCa 95% CI;" in res.output and "p_rand = randomisation (sign-flip) test;" in res.output


def test_segments_that_match_no_evaluated_query_are_an_error(files, tmp_path: Path) -> None:
    seg = tmp_path / "seg.tsv"
    seg.write_text("query\tbucket\n301\thead\n302\ttail\n")  # ids of another collection
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run", str(files["B.txt"]),
                 "--metrics", "AP", "--segments", str(seg), "--permutations", "100", "--bootstrap", "200")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"{seg}: none of its 2 queries is an evaluated query" in res.output


def test_segments_partial_coverage_is_reported(files, tmp_path: Path) -> None:
    seg = tmp_path / "seg.tsv"
    seg.write_text("query\tbucket\nq1\thead\nq2\thead\nq77\ttail\n")
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--metrics", "AP",
                 "--segments", str(seg), "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    # evaluated queries q1, q2, q4 (q3 excluded: no relevant document); q77 is not evaluated
    assert data["segments"] == {"file": str(seg), "attributes": ["bucket"], "queries_in_file": 3,
                                "not_evaluated": 1, "evaluated_without_attributes": 1,
                                "missing_value": "<missing>"}


def test_letor_score_feature_column_as_a_system(tmp_path: Path) -> None:
    letor = tmp_path / "test.txt"
    # feature 2 ranks q1 right and q2 wrong; feature 1 is absent on some lines (sparse: 0)
    letor.write_text("2 qid:1 2:0.9\n0 qid:1 1:0.7 2:0.1\n1 qid:2 2:0.2\n0 qid:2 1:0.4 2:0.8\n")
    a = tmp_path / "a.pred"
    a.write_text("0.9\n0.1\n0.8\n0.2\n")
    res = invoke("--letor", str(letor), "--scores", str(a), "--score-feature", "2", "--score-feature", "1",
                 "--metrics", "nDCG@1", "--preset", "lightgbm", "--format", "json",
                 "--permutations", "100", "--bootstrap", "100")
    assert res.exit_code == 0, res.output
    means = {s["name"]: s["metrics"]["nDCG@1"]["mean"] for s in json.loads(res.stdout)["systems"]}
    assert means == {"a": pytest.approx(1.0), "feature2": pytest.approx(0.5), "feature1": pytest.approx(0.0)}
    bad = invoke("--letor", str(letor), "--score-feature", "-1")
    assert bad.exit_code == 2 and "score-feature" in bad.output
    bad = invoke("--qrels", str(letor), "--run", str(a), "--score-feature", "2")
    assert bad.exit_code == 2 and "--score-feature goes with --letor" in bad.output


def test_per_query_into_a_missing_folder_is_one_clear_error(files, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "pq.csv"
    res = invoke("--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--per-query", str(target))
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"per-query: the folder {target.parent} does not exist" in res.output


def test_err_scale_is_reported_in_every_format(files) -> None:
    base = ["--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--metrics", "ERR@5,ERR(gmax=4)@5,AP"]
    table = invoke(*base)
    assert table.exit_code == 0, table.output
    assert "ERR@5: gmax = 2 (top grade of the qrels; ir_measures and gdeval fix gmax = 4" in table.output
    assert "ERR(gmax=4)@5: gmax" not in table.output  # stated in its name
    data = json.loads(invoke(*base, "--format", "json").stdout)
    assert data["err_gmax"] == {"ERR@5": 2}
    csv = pd.read_csv(io.StringIO(invoke(*base, "--format", "csv").stdout)).set_index("metric")
    assert csv.loc["ERR@5", "err_gmax"] == 2 and csv[["err_gmax"]].drop(index="ERR@5").isna().all().all()


def test_no_query_counted_by_every_system_gives_no_comparison_not_an_error(tmp_path: Path) -> None:
    q = tmp_path / "q.txt"
    q.write_text("q1 0 a 0\nq2 0 b 0\n")  # no relevant document anywhere: all excluded
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("q1 Q0 a 1 1 r\nq2 Q0 b 1 1 r\n")
    b.write_text("q1 Q0 b 1 1 r\nq2 Q0 a 1 1 r\n")
    base = ["--qrels", str(q), "--run", str(a), "--run", str(b), "--metrics", "AP"]
    table = invoke(*base)
    assert table.exit_code == 0, table.output
    assert "paired comparisons vs a: none (no query is counted for every system)" in table.output
    assert "excluded (no relevant) 2" in table.output
    data = json.loads(invoke(*base, "--format", "json").stdout)
    assert data["paired_queries"] == 0 and data["comparisons"] == []
    assert data["systems"][0]["metrics"]["AP"] == {"mean": None, "n": 0}
    csv = invoke(*base, "--format", "csv")
    assert csv.exit_code == 0 and "no query is counted for every system" in csv.stderr


def test_letor_score_file_lines_hold_one_score(tmp_path: Path) -> None:
    """A score file line with two fields ('0.2 0.3', a multi-column prediction file) was read as its first field
    without a word; it is refused naming the line."""
    letor = tmp_path / "l.txt"
    letor.write_text("2 qid:1 1:0.5\n0 qid:1 1:0.2\n1 qid:1 1:0.9\n1 qid:2 1:0.1\n0 qid:2 1:0.3\n")
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("0.5\n0.2\n0.9\n0.1\n0.3\n")
    bad.write_text("0.5\n0.2 0.3\n0.9\n0.1\n0.3\n")
    assert invoke("--letor", str(letor), "--scores", str(good)).exit_code == 0
    res = invoke("--letor", str(letor), "--scores", str(good), "--scores", str(bad))
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"{bad}:2: expected one score per line, got 2 fields ('0.2 0.3'); write the score column alone" in res.output


def test_a_mean_over_no_query_says_why_it_is_nan(tmp_path: Path) -> None:
    """Every judged query without a relevant document (empty=exclude) or missing from the run (missing=drop): the
    means are nan, and a note under the table says which and why (the counts line alone said 'counted 0')."""
    (tmp_path / "q.qrels").write_text("q1 0 d1 0\nq2 0 d2 0\n")
    (tmp_path / "n.run").write_text("q1 Q0 d1 1 3.0 r\nq2 Q0 d2 1 2.0 r\n")
    res = invoke("--qrels", str(tmp_path / "q.qrels"), "--run", str(tmp_path / "n.run"), "-m", "nDCG@10,RR,NumRet")
    assert res.exit_code == 0, res.output
    assert "note: n: nDCG@10, RR averaged over no query, so undefined (nan): 2 judged queries have no relevant " \
           "document and empty=exclude leaves them out (--empty zero, as trec_eval, or one counts them)" in res.output
    assert "NumRet averaged" not in res.output  # a count: summed, 2
    res = invoke("--qrels", str(tmp_path / "q.qrels"), "--run", str(tmp_path / "n.run"), "-m", "nDCG@10",
                 "--empty", "zero")
    assert "averaged over no query" not in res.output
    (tmp_path / "one.qrels").write_text("q1 0 d1 1\n")
    (tmp_path / "other.run").write_text("q9 Q0 d1 1 3.0 r\n")
    res = invoke("--qrels", str(tmp_path / "one.qrels"), "--run", str(tmp_path / "other.run"), "-m", "P@5",
                 "--missing", "drop")
    assert "note: other: P@5 averaged over no query, so undefined (nan): 1 judged query is missing from the run " \
           "and missing=drop leaves it out" in res.output
