"""trec_eval and ir_measures measure names translated to our metrics.

The translated metric must *equal* the foreign measure: every trec_eval name is checked
per query against pytrec_eval (an independent implementation: trec_eval's C code) on
trec_eval's own test collection under the ``trec_eval`` conventions preset; ``rel=``
against pytrec_eval's ``relevance_level``; ``Judged@k`` against a direct count.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.conventions import preset
from onlineeval.errors import ConfigError
from onlineeval.io import read_qrels, read_run
from onlineeval.metrics import parse_metric, parse_metrics
from onlineeval.metrics.evaluate import evaluate_run
from onlineeval.metrics.names import (
    common_rel_min,
    resolve_metric_list,
    split_metric_list,
    translate,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_eval"
runner = CliRunner()

# trec_eval measure requests (pytrec_eval spelling) and what they are in our names
REQUESTS = ["P.5,10,30", "ndcg_cut.10,20", "ndcg", "map", "map_cut.100,1000", "recall.100,1000", "recip_rank",
            "Rprec", "bpref", "infAP", "iprec_at_recall.0.00,0.50,1.00", "11pt_avg", "success.1,5,10", "set_P",
            "set_recall", "num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret",
            "Rprec_mult.0.20,2.00"]


@pytest.mark.parametrize(
    ("given", "ours"),
    [
        ("P_10", "P@10"), ("P.10", "P@10"), ("ndcg_cut_10", "nDCG@10"), ("ndcg", "nDCG"), ("map", "AP"),
        ("map_cut_100", "AP@100"), ("recall_100", "Recall@100"), ("recip_rank", "RR"), ("Rprec", "RPrec"),
        ("bpref", "bpref"), ("infAP", "infAP"), ("iprec_at_recall_0.50", "IPrec(recall=0.5)"),
        ("11pt_avg", "IPrecAvg"), ("success_10", "Success@10"), ("ERR", "ERR"), ("set_P", "P"),
        ("Rprec_mult_0.20", "RPrecMult(mult=0.2)"), ("11pt_avg.0.25,0.5", "IPrecAvg(levels=(0.25,0.5))"),
        ("ndcg.1=3,2=9", "nDCG(gain='1=3,2=9')"), ("unj_5", "Unjudged@5"), ("unj.5", "Unjudged@5"),
        ("num_q", "NumQ"), ("num_nonrel_judged_ret", "NumNonRelJudgedRet"), ("num_rel_ret", "NumRelRet"),
        # ir_measures
        ("nDCG@10", "nDCG@10"), ("P@10", "P@10"), ("AP@100", "AP@100"), ("R@100", "Recall@100"), ("RR", "RR"),
        ("ERR@10", "ERR@10"), ("RBP(p=0.8)", "RBP(p=0.8)"), ("IPrec@0.5", "IPrec(recall=0.5)"),
        ("Success@10", "Success@10"), ("Bpref", "bpref"), ("SetP", "P"), ("RBP(p=0.5)@10", "RBP(p=0.5)@10"),
        ("NumQ", "NumQ"),
    ],
)
def test_single_names(given: str, ours: str) -> None:
    assert parse_metric(given) == parse_metric(ours)


def test_families_expand_and_lists_keep_their_parameters() -> None:
    assert split_metric_list("P.5,10,nDCG@3,RBP(p=0.8,graded=True),ndcg.1=3,2=9") == [
        "P.5,10", "nDCG@3", "RBP(p=0.8,graded=True)", "ndcg.1=3,2=9"]
    got = [str(m) for m in parse_metrics("P.5,10,ndcg_cut.10,20,11pt_avg..25,.5,.75")]
    assert got == ["P@5", "P@10", "nDCG@10", "nDCG@20", "IPrecAvg(levels=(0.25, 0.5, 0.75))"]
    with pytest.raises(ConfigError, match="P_10' is P@10 again"):
        parse_metrics("P.5,10,P_10")
    with pytest.raises(ConfigError, match="stands for 2 metrics"):
        parse_metric("P.5,10")


def test_translations_are_reported_and_own_names_are_not() -> None:
    names, done = resolve_metric_list("nDCG@10,P_10,recip_rank,P(rel=2)@5,Judged@10,MAP")
    assert names == ["nDCG@10", "P@10", "RR", "P@5", "Judged@10", "AP"]
    described = [t.describe() for t in done]
    assert described == [
        "P_10 -> P@10 (trec_eval name)",
        "recip_rank -> RR (trec_eval name)",
        "P(rel=2)@5 -> P@5 (ir_measures name; relevance threshold rel_min = 2)",
        "MAP -> AP (alias)",
    ]


def test_relevance_thresholds_must_agree() -> None:
    _, done = resolve_metric_list("P(rel=2)@10,AP(rel=2)")
    assert common_rel_min(done, 2, 1) == 2
    _, done = resolve_metric_list("P(rel=2)@10,AP")
    with pytest.raises(ConfigError, match="applies to every metric"):
        common_rel_min(done, 2, 1)
    _, done = resolve_metric_list("P(rel=1)@10,AP")
    assert common_rel_min(done, 2, 1) == 1  # asks for the threshold in force: nothing changes
    _, done = resolve_metric_list("P(rel=2)@10")
    with pytest.raises(ConfigError, match="--rel-min is 1"):
        common_rel_min(done, 1, 1, fixed=True)
    with pytest.raises(ConfigError, match="rel_min=2 \\(--rel-min 2\\)"):
        parse_metric("P(rel=2)@10")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("gm_map", "geometric mean"),
        ("nDCG(dcg='exp-log2')@10", "unknown parameter 'dcg' for nDCG; allowed: gain"),  # our name: our message
        ("R(judged_only=True)@10", "parameter 'judged_only' of R has no counterpart here; allowed: rel"),
        ("RBP(q=0.5)", "unknown parameter 'q' for RBP"),
        ("IPrec(rel=1)", "needs a recall level"),
        ("P.x", "not a number"),
        ("P_0", "positive integer"),
        ("ndcg_cut.10.5", "positive integer"),
        ("P(rel=1.5)@10", "rel must be an integer"),
        ("ndcg.a", "gain table"),
        ("nosuch_10", "unknown metric 'nosuch_10'.*onlineeval metrics"),
    ],
)
def test_bad_foreign_names_are_clear_errors(bad: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_metrics(bad)


NOT_IMPLEMENTED = "a trec_eval measure that onlineeval does not implement; the trec_eval measures onlineeval translates"


@pytest.mark.parametrize(
    ("given", "measure"),
    [("utility", "utility"), ("set_F", "set_F"), ("Rndcg", "Rndcg"), ("rndcg", "Rndcg"), ("binG", "binG"),
     ("G", "G"), ("relative_P_5", "relative_P"), ("set_F.0.5", "set_F"), ("P_avgjg_10", "P_avgjg"),
     ("Rprec_mult_avgjg_0.20", "Rprec_mult_avgjg"), ("prefs_avgjg_Rnonrel_ret", "prefs_avgjg_Rnonrel_ret"),
     ("yaap", "yaap"), ("map_avgjg", "map_avgjg"), ("set_relative_P", "set_relative_P")],
)
def test_trec_eval_measures_not_implemented_say_so(given: str, measure: str) -> None:
    # measures.c of trec_eval 10.0 lists them; before, each was an 'unknown metric' like a typo
    with pytest.raises(ConfigError) as info:
        parse_metrics(given)
    text = str(info.value)
    assert f"{measure} is {NOT_IMPLEMENTED}: map, Rprec, bpref" in text
    assert "P_<k>, recall_<k>" in text and "ndcg_cut_<k>" in text and "unknown metric" not in text
    with pytest.raises(ConfigError, match=NOT_IMPLEMENTED):
        resolve_metric_list(f"AP,{given}")


def test_trec_eval_measure_group_is_named_as_such() -> None:
    with pytest.raises(ConfigError, match=r"all_trec is trec_eval's name for a group of measures \(-m all_trec\); "
                       "name the measures one by one; the trec_eval measures onlineeval translates: map"):
        parse_metrics("all_trec")


@pytest.mark.parametrize(
    ("typo", "hint"),
    [("nDGC@10", "unknown metric 'nDGC' (did you mean nDCG?)"), ("recip_rnak", "(did you mean recip_rank?)"),
     ("ndcg_cutt_10", "unknown metric 'ndcg_cutt_10' (did you mean ndcg_cut"), ("mapp", "(did you mean map?)"),
     ("Utilty", "unknown metric 'Utilty'")],
)
def test_typo_is_an_unknown_metric_with_the_closest_names(typo: str, hint: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_metrics(typo)
    assert hint in str(info.value) and "onlineeval does not implement" not in str(info.value)


def test_unknown_metric_without_close_name_has_no_guess() -> None:
    with pytest.raises(ConfigError) as info:
        parse_metrics("Foo")
    assert "unknown metric 'Foo'; known: AP" in str(info.value)


def test_native_names_win() -> None:
    assert translate("nDCG@10") is not None  # ir_measures knows it too ...
    _, done = resolve_metric_list("nDCG@10,P@10,RR")
    assert done == []  # ... but it is ours, so nothing is translated


# ------------------------------------------------------------------ against pytrec_eval


def _dicts(qrels_path: Path, run_path: Path) -> tuple[dict, dict]:
    q = read_qrels(qrels_path)
    r = read_run(run_path)
    qrels: dict[str, dict[str, int]] = {}
    for qid, doc, grade in zip(q["query"].astype(str), q["doc"].astype(str), q["grade"]):
        qrels.setdefault(qid, {})[doc] = int(grade)
    run: dict[str, dict[str, float]] = {}
    for qid, doc, score in zip(r["query"].astype(str), r["doc"].astype(str), r["score"]):
        run.setdefault(qid, {})[doc] = float(score)
    return qrels, run


@pytest.fixture(scope="module")
def collection() -> tuple[Path, Path]:
    if not (DATA / "qrels.test").is_file():
        pytest.skip(f"trec_eval test data absent ({DATA}); it is not part of the repository")
    return DATA / "qrels.test", DATA / "results.test"


@pytest.mark.parametrize("relevance_level", [1, 2])
def test_trec_eval_names_equal_pytrec_eval(collection: tuple[Path, Path], relevance_level: int) -> None:
    import pytrec_eval
    qrels_path, run_path = collection
    qrels, run = _dicts(qrels_path, run_path)
    if relevance_level == 2:  # a graded copy: grade 2 for every other relevant document
        for docs in qrels.values():
            for i, d in enumerate(sorted(d for d, g in docs.items() if g > 0)):
                docs[d] = 2 if i % 2 == 0 else 1
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(REQUESTS), relevance_level=relevance_level)
    expected = evaluator.evaluate(run)
    printed = sorted(next(iter(expected.values())))
    assert len(printed) == 31
    # the requests as a --metrics list give exactly the printed measures
    requested = parse_metrics(",".join(REQUESTS))
    assert sorted(map(str, requested)) == sorted(str(parse_metric(p)) for p in printed)
    import pandas as pd

    q_frame = pd.DataFrame(
        [(qid, d, g) for qid, docs in qrels.items() for d, g in docs.items()], columns=["query", "doc", "grade"]
    )
    conv = preset("trec_eval").with_(rel_min=relevance_level)
    ev = evaluate_run(q_frame, read_run(run_path), [parse_metric(p) for p in printed], conv)
    queries = [str(x) for x in ev.queries]
    assert sorted(queries) == sorted(expected)
    mismatched = []
    # pytrec_eval bundles trec_eval 9.0.x, whose interpolated precision at recall levels such
    # as 0.1 differs from trec_eval 10.0's in the 4th decimal (301: 0.2096 vs 0.2098), and so
    # does its 11pt_avg: that name is checked against trec_eval 10.0's own output below
    for name in [p for p in printed if p != "11pt_avg"]:
        ours = ev.values[parse_metric(name)]
        theirs = np.array([expected[qid][name] for qid in queries])
        if not np.allclose(ours, theirs, rtol=0, atol=1e-9):
            mismatched.append(name)
    assert mismatched == [], mismatched


def test_rel_and_judged_through_the_cli(collection: tuple[Path, Path], tmp_path: Path) -> None:
    import pytrec_eval
    qrels_path, run_path = collection
    qrels, run = _dicts(qrels_path, run_path)
    for docs in qrels.values():  # grades 0, 1, 2
        for i, d in enumerate(sorted(d for d, g in docs.items() if g > 0)):
            docs[d] = 2 if i % 3 == 0 else 1
    graded = tmp_path / "qrels.graded"
    graded.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    res = runner.invoke(app, ["evaluate", "--qrels", str(graded), "--run", str(run_path), "--preset", "trec_eval",
                              "--metrics", "P(rel=2)@10,AP(rel=2),R(rel=2)@100", "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["conventions"]["rel_min"] == 2
    assert [n["given"] for n in doc["names"]] == ["P(rel=2)@10", "AP(rel=2)", "R(rel=2)@100"]
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"P.10", "map", "recall.100"}, relevance_level=2).evaluate(run)
    means = doc["systems"][0]["metrics"]
    for ours, theirs in (("P@10", "P_10"), ("AP", "map"), ("Recall@100", "recall_100")):
        assert means[ours]["mean"] == pytest.approx(np.mean([v[theirs] for v in expected.values()]), abs=1e-12)
    # Judged@k: the share of the top k that carries a judgement (a direct count; every list has >= 50 documents)
    res = runner.invoke(app, ["evaluate", "--qrels", str(graded), "--run", str(run_path), "--preset", "trec_eval",
                              "--metrics", "Judged@10,Judged@50", "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    for k in (10, 50):
        direct = []
        for qid, scores in run.items():
            top = sorted(scores, key=lambda d: (-scores[d], tuple(-b for b in d.encode())))[:k]
            direct.append(sum(d in qrels[qid] for d in top) / k)
        assert min(len(scores) for scores in run.values()) >= k
        assert doc["systems"][0]["metrics"][f"Judged@{k}"]["mean"] == pytest.approx(np.mean(direct), abs=1e-12)
    table = runner.invoke(app, ["evaluate", "--qrels", str(graded), "--run", str(run_path), "--metrics", "P_10"])
    header = table.stdout.split("\n\n")[0].splitlines()  # the lines above the table
    assert "names: P_10 -> P@10 (trec_eval name)" in header
    mixed = runner.invoke(app, ["evaluate", "--qrels", str(graded), "--run", str(run_path),
                                "--metrics", "P(rel=2)@10,AP"])
    assert mixed.exit_code == 2 and "applies to every metric" in mixed.output


def test_interpolated_precision_names_equal_trec_eval_10(collection: tuple[Path, Path]) -> None:
    """11pt_avg and iprec_at_recall_* against trec_eval 10.0's per-query output (``-q``)."""
    qrels_path, run_path = collection
    expected: dict[str, dict[str, float]] = {}
    for line in (DATA / "out.test.aq").read_text().splitlines():
        name, qid, value = line.split()
        if qid != "all" and (name == "11pt_avg" or name.startswith("iprec_at_recall_")):
            expected.setdefault(name, {})[qid] = float(value)
    assert len(expected) == 12
    ev = evaluate_run(read_qrels(qrels_path), read_run(run_path), [parse_metric(n) for n in expected],
                      preset("trec_eval"))
    for name, per_query in expected.items():
        ours = dict(zip(map(str, ev.queries), ev.values[parse_metric(name)]))
        for qid, value in per_query.items():
            assert abs(ours[qid] - value) <= 0.5e-4 + 1e-9, (name, qid)  # printed to 4 decimals


# ------------------------------------------------------------------- onlineeval metrics


def test_metrics_command_lists_every_metric_and_every_listed_name_parses_to_it() -> None:
    from onlineeval.metrics import REGISTRY

    res = runner.invoke(app, ["metrics", "--format", "json"])
    assert res.exit_code == 0, res.output
    records = json.loads(res.stdout)
    assert [r["name"] for r in records] == sorted(REGISTRY, key=str.lower)
    fill = {"<k>": "10", "<x>": "0.5", "<recall>": "0.5", "<level>": "0.5"}
    for r in records:
        cls = REGISTRY[r["name"]]
        import dataclasses

        fields = {f.name: f.default for f in dataclasses.fields(cls) if f.name != "k"}
        assert {p["name"]: p["default"] for p in r["parameters"]} == {
            k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
        assert type(parse_metric(r["example"])) is cls
        for alias in r["aliases"]:
            assert type(parse_metric(alias + ("@10" if cls.cutoff == "required" else ""))) is cls
        for name in r["trec_eval"] + r["ir_measures"]:
            spelled = name.split(" (")[0]
            for key, value in fill.items():
                spelled = spelled.replace(key, value)
            spelled = spelled.replace("[,0.5...]", ",0.7").replace("[,10...]", ",20").replace("[,...]", "")
            spelled = spelled.replace("<grade>=<gain>", "1=3")
            ours, _ = resolve_metric_list(spelled)
            assert ours and all(type(parse_metric(m)) is cls for m in ours), (r["name"], name, spelled)
    table = runner.invoke(app, ["metrics"])
    assert table.exit_code == 0 and "P_<k>, P.<k>[,<k>...]" in table.stdout and "``" not in table.stdout
    assert runner.invoke(app, ["metrics", "--format", "yaml"]).exit_code == 2


@pytest.mark.parametrize("given", ["iprec_at_recall_0.00", "IPrec@0", "iprec_at_recall.0,0.5", "Rprec_mult_1.00",
                                   "11pt_avg.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1", "P.5,10"])
def test_names_line_labels_are_the_result_columns(tmp_path: Path, given: str) -> None:
    """Review 2, F.2: ``iprec_at_recall_0.00`` printed ``-> IPrec(recall=0)`` but the CSV/JSON column was ``IPrec``
    (a default parameter dropped). The translation now gives the results' labels, and IPrec keeps its recall."""
    names, done = resolve_metric_list(given)
    assert done[0].metrics == tuple(names) == tuple(str(m) for m in parse_metrics(given))
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("q1 0 a 1\nq1 0 b 0\nq1 0 c 1\n")
    run.write_text("q1 Q0 b 1 3 S\nq1 Q0 a 2 2 S\nq1 Q0 c 3 1 S\n")
    res = runner.invoke(app, ["evaluate", "--qrels", str(qrels), "--run", str(run), "--metrics", given,
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["metrics"] == list(doc["names"][0]["metrics"]) == list(names)
    if given.lower().startswith("iprec") and "0.5" not in given:
        assert names == ["IPrec(recall=0)"]
