"""Review 10, finding 1: a trec_eval name (``ndcg_cut_10``, ``map``) promises trec_eval's number.

Without ``--preset``, a metric list of trec_eval names only is evaluated under the ``trec_eval`` preset (checked
against trec_eval 10.0's expected output ``out.test.aql``, per query and on the all line); a list mixing trec_eval
names with others is refused naming the preset; under other conventions the output says the numbers are not
trec_eval's, and which conventions differ.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app

runner = CliRunner()
TOL = 0.5e-4 + 1e-9  # trec_eval prints 4 decimals


def invoke(*args: str):
    return runner.invoke(app, ["evaluate", *args])


def reference(path: Path, measures: tuple[str, ...]) -> dict[tuple[str, str], float]:
    out = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) != 3:  # the edge-case outputs end with the exit status (rc=0)
            continue
        name, qid, value = fields
        if name in measures:
            out[(name, qid)] = float(value)
    return out


def test_trec_eval_names_without_preset_give_trec_evals_numbers(shared_data: Path, tmp_path: Path) -> None:
    """qrels.rel_level (graded), results.test, -l2: ndcg_cut_10 is 0.2656 in trec_eval (the default preset's
    exponential gain gave 0.2553), map 0.1667; every query too."""
    d = shared_data / "trec_eval"
    ref = reference(d / "out.test.aql", ("map", "ndcg_cut_10"))
    per_query = tmp_path / "pq.csv"
    res = invoke("--qrels", str(d / "qrels.rel_level"), "--run", str(d / "results.test"), "--metrics",
                 "map,ndcg_cut_10", "--rel-min", "2", "--per-query", str(per_query))
    assert res.exit_code == 0, res.output
    assert "conventions: name=trec_eval" in res.stdout
    assert "trec_eval names under conventions trec_eval+rel_min=2 (chosen because every metric is a trec_eval name)" \
        in res.stdout
    row = next(line.split()[1:] for line in res.stdout.splitlines() if line.startswith("results "))
    assert abs(float(row[0]) - ref[("map", "all")]) <= TOL
    assert abs(float(row[1]) - ref[("ndcg_cut_10", "all")]) <= TOL
    import pandas as pd

    pq = pd.read_csv(per_query, dtype={"query": str})
    names = {"AP": "map", "nDCG@10": "ndcg_cut_10"}
    checked = 0
    for _, r in pq.iterrows():
        assert abs(r["value"] - ref[(names[r["metric"]], r["query"])]) <= TOL, r
        checked += 1
    assert checked == 6
    doc = json.loads(invoke("--qrels", str(d / "qrels.rel_level"), "--run", str(d / "results.test"), "--metrics",
                            "ndcg_cut_10", "--format", "json").stdout)
    assert doc["conventions"]["name"] == "trec_eval"
    assert abs(doc["systems"][0]["metrics"]["nDCG@10"]["mean"] - ref[("ndcg_cut_10", "all")]) <= TOL
    assert doc["trec_eval_names"].endswith("they give trec_eval's numbers")


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "q").write_text("q1 0 a 2\nq1 0 b 0\nq1 0 c 1\nq2 0 x 0\n")
    (tmp_path / "r").write_text("q1 Q0 b 1 3 r\nq1 Q0 a 2 2 r\nq1 Q0 c 3 1 r\nq2 Q0 x 1 1 r\n")
    return str(tmp_path / "q"), str(tmp_path / "r")


def test_a_mix_of_trec_eval_names_and_others_is_refused_without_preset(tiny: tuple[str, str]) -> None:
    q, r = tiny
    res = invoke("--qrels", q, "--run", r, "--metrics", "ndcg_cut_10,nDCG@10")
    assert res.exit_code == 2
    assert "ndcg_cut_10 is a trec_eval name and the other metrics are not" in res.output
    assert "--preset trec_eval" in res.output and "--preset default" in res.output
    # with a preset the mix is one evaluation: both names are the same metric under it
    ok = invoke("--qrels", q, "--run", r, "--metrics", "ndcg_cut_10,P@1", "--preset", "trec_eval")
    assert ok.exit_code == 0, ok.output


def test_other_conventions_say_the_numbers_are_not_trec_evals(tiny: tuple[str, str]) -> None:
    """q1: b (0), a (2), c (1); q2 has no relevant document. ndcg_cut_10 by hand:
    trec_eval (linear gain, q2 counts 0): q1 (2/log2 3 + 1/2) / (2 + 1/log2 3) = 0.73981..., mean 0.36991;
    default (exponential gain, q2 excluded): (3/log2 3 + 1/2) / (3 + 1/log2 3) = 0.66556."""
    import math

    q, r = tiny
    lg3 = math.log2(3)
    linear = (2 / lg3 + 0.5) / (2 + 1 / lg3) / 2
    exponential = (3 / lg3 + 0.5) / (3 + 1 / lg3)
    auto = invoke("--qrels", q, "--run", r, "--metrics", "ndcg_cut_10")
    assert auto.exit_code == 0, auto.output
    assert auto.stdout.splitlines()[-1].split()[1] == f"{linear:.4f}"
    res = invoke("--qrels", q, "--run", r, "--metrics", "ndcg_cut_10", "--preset", "default")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[-1].split()[1] == f"{exponential:.4f}"
    assert ("trec_eval names under conventions default: gain exponential (trec_eval: linear), empty exclude "
            "(trec_eval: zero); NOT trec_eval's numbers (--preset trec_eval reproduces trec_eval)") in res.stdout
    over = invoke("--qrels", q, "--run", r, "--metrics", "ndcg_cut_10", "--gain", "exponential")
    assert over.exit_code == 0, over.output
    assert "gain exponential (trec_eval: linear); NOT trec_eval's numbers" in over.stdout
    csv = invoke("--qrels", q, "--run", r, "--metrics", "ndcg_cut_10", "--preset", "default", "--format", "csv")
    assert "note: trec_eval names under conventions default" in csv.stderr


def test_bpref_and_infap_are_trec_eval_names_too(shared_data: Path) -> None:
    """Review 13, F1: bpref and infAP are trec_eval's names spelled as ours. A list of trec_eval names ending in
    bpref is not refused and gives out.test.a's numbers; infAP alone chooses the trec_eval preset (edge case
    qrels.edge.noq3: trec_eval 0.2917, where the default preset's empty=exclude gave 0.5833); with other names of
    ours bpref takes the default preset and the output says its number is not trec_eval's."""
    d = shared_data / "trec_eval"
    e = d / "edge_cases"
    ref = reference(d / "out.test.a", ("map", "P_10", "recip_rank", "bpref", "infAP"))
    res = invoke("--qrels", str(d / "qrels.test"), "--run", str(d / "results.test"), "--metrics",
                 "map,P_10,recip_rank,bpref,infAP")
    assert res.exit_code == 0, res.output
    assert "(chosen because every metric is a trec_eval name): they give trec_eval's numbers" in res.stdout
    row = [float(v) for v in res.stdout.splitlines()[-1].split()[1:]]
    for value, name in zip(row, ("map", "P_10", "recip_rank", "bpref", "infAP"), strict=True):
        assert abs(value - ref[(name, "all")]) <= TOL, name
    edge = reference(e / "out.edge.noq3.q", ("infAP", "bpref"))
    for name in ("infAP", "bpref"):
        alone = invoke("--qrels", str(e / "qrels.edge.noq3"), "--run", str(e / "run.edge"), "--metrics", name)
        assert alone.exit_code == 0, alone.output
        assert "conventions: name=trec_eval" in alone.stdout
        assert abs(float(alone.stdout.splitlines()[-1].split()[1]) - edge[(name, "all")]) <= TOL, name
    assert edge[("infAP", "all")] == 0.2917
    mixed = invoke("--qrels", str(e / "qrels.edge.noq3"), "--run", str(e / "run.edge"), "--metrics", "bpref,nDCG@10")
    assert mixed.exit_code == 0, mixed.output
    assert "conventions: name=default" in mixed.stdout
    assert "trec_eval names under conventions default: " in mixed.stdout and "NOT trec_eval's numbers" in mixed.stdout
    refused = invoke("--qrels", str(e / "qrels.edge.noq3"), "--run", str(e / "run.edge"), "--metrics",
                     "map,bpref,nDCG@10")
    assert refused.exit_code == 2
    assert "map is a trec_eval name and the other metrics are not" in refused.output


def test_the_trec_eval_line_names_the_flags_of_depth_rel_min_and_missing(shared_data: Path) -> None:
    """Review 13, F4: --depth, --rel-min and --missing zero are trec_eval options (-M, -l, -c): the line names the
    flags whose trec_eval run gives the numbers. out.test.aqcM is `trec_eval -q -c -M100 qrels.test results.trunc`
    (map 0.0947), out.test.aql `-l2` on qrels.rel_level (map 0.1667); --missing drop (no 10.0 option) averages
    out.test.aqc's per-query map over the two queries results.trunc answers."""
    d = shared_data / "trec_eval"
    cases = [
        (("--qrels", str(d / "qrels.test"), "--run", str(d / "results.trunc"), "--depth", "100", "--missing", "zero"),
         "they give trec_eval -c -M100's numbers", reference(d / "out.test.aqcM", ("map",))[("map", "all")]),
        (("--qrels", str(d / "qrels.rel_level"), "--run", str(d / "results.test"), "--rel-min", "2"),
         "they give trec_eval -l2's numbers", reference(d / "out.test.aql", ("map",))[("map", "all")]),
    ]
    per_query = reference(d / "out.test.aqc", ("map",))
    cases.append((("--qrels", str(d / "qrels.test"), "--run", str(d / "results.trunc"), "--missing", "drop"),
                  "they give trec_eval's numbers on the queries the run answers; missing=drop has no trec_eval 10.0 "
                  "option", (per_query[("map", "301")] + per_query[("map", "303")]) / 2))
    for args, line, expected in cases:
        res = invoke(*args, "--metrics", "map")
        assert res.exit_code == 0, res.output
        assert line in res.stdout, res.stdout
        assert abs(float(res.stdout.splitlines()[-1].split()[1]) - expected) <= TOL, args
    depth = invoke("--qrels", str(d / "qrels.test"), "--run", str(d / "results.test"), "--metrics", "map",
                   "--depth", "10")
    assert "they give trec_eval -M10's numbers" in depth.stdout
