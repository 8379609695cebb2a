"""Review 16, F5: a metric with no paired query stays in the comparisons. Under empty=exclude, when no query has a
relevant document, P@2 has no query to pair while Judged@2 (relevance-free) has every query; P@2's comparison used
to vanish, and the header and JSON gave Judged's count as the general one. Now P@2 keeps a row with n 0, no values
and the reason, in the terminal, the JSON, the --comparisons csv, the csv stream's notes and the Python API; the
same for a segment in which P@2 has no query while Judged@2 has some.

Data: q1 judges d1, d2 and q2 judges d3, d4, every grade 0 (QRELS_NONE); A retrieves q1 [d1, d9], q2 [d3, d8];
B retrieves q1 [d2, d9], q2 [d4, d3]. Judged@2 by hand: A 1/2, 1/2; B 1/2, 1; paired differences 0, 1/2.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.api import evaluate
from onlineeval.cli import app
from onlineeval.errors import ConfigError

runner = CliRunner()
QRELS_NONE = "q1 0 d1 0\nq1 0 d2 0\nq2 0 d3 0\nq2 0 d4 0\n"
QRELS_SEG = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 0\nq2 0 d4 0\n"  # q1 relevant (segment x), q2 not (segment y)
RUNS = {"A": {"q1": ["d1", "d9"], "q2": ["d3", "d8"]}, "B": {"q1": ["d2", "d9"], "q2": ["d4", "d3"]}}
REASON = "no queries to compare (empty=exclude: no query has a relevant document)"
REASON_SEG = "no queries to compare (empty=exclude: no query of this segment has a relevant document)"


def _files(tmp_path: Path, qrels: str) -> list[str]:
    (tmp_path / "qrels").write_text(qrels)
    for name, docs in RUNS.items():
        (tmp_path / f"{name}.run").write_text("".join(
            f"{q} Q0 {d} {i + 1} {10 - i} {name}\n" for q, ds in docs.items() for i, d in enumerate(ds)))
    return ["evaluate", "--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "A.run"), "--run",
            str(tmp_path / "B.run"), "--metrics", "P@2,Judged@2"]


def test_metric_without_queries_keeps_its_comparison(tmp_path: Path) -> None:
    args = _files(tmp_path, QRELS_NONE)
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "paired comparisons vs A (no query for P@2; Judged@2: 2)" in res.stdout
    assert "(2 queries)" not in res.stdout  # Judged's count is not given as everyone's
    rows = [line.split() for line in res.stdout.splitlines() if line.startswith("all ")]
    assert [r[:4] for r in rows] == [["all", "Judged@2", "B", "2"], ["all", "P@2", "B", "0"]]
    assert rows[0][4] == "0.2500"  # Judged@2's mean difference, by hand ((1/2 - 1/2) + (1 - 1/2)) / 2
    p2_line = next(line for line in res.stdout.splitlines() if line.startswith("all ") and " P@2 " in line)
    assert p2_line.endswith(REASON)

    doc = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert doc["paired_queries"] == 0 and doc["paired_queries_per_metric"] == {"P@2": 0, "Judged@2": 2}
    cmp = {r["metric"]: r for r in doc["comparisons"]}
    assert cmp["Judged@2"]["n"] == 2 and cmp["Judged@2"]["mean_diff"] == pytest.approx(0.25, abs=1e-15)
    p2 = cmp["P@2"]
    assert p2["n"] == 0 and p2["reason"] == REASON and p2["system"] == "B" and p2["baseline"] == "A"
    assert p2["mean_diff"] is None and p2["p_randomization"] is None and p2["ci_bca_low"] is None
    assert set(p2) >= set(cmp["Judged@2"])  # the same fields, null
    assert any(n.startswith("P@2: " + REASON) for n in doc["comparison_notes"])

    res = runner.invoke(app, [*args, "--format", "csv", "--comparisons", str(tmp_path / "cmp.csv")])
    assert res.exit_code == 0, res.output
    assert f"note: P@2: {REASON}; it has no paired comparison (n = 0)" in res.stderr
    with open(tmp_path / "cmp.csv", newline="") as fh:
        table = {r["metric"]: r for r in csv.DictReader(fh)}
    assert table["P@2"]["n"] == "0" and table["P@2"]["reason"] == REASON and table["P@2"]["mean_diff"] == ""
    assert table["Judged@2"]["reason"] == "" and table["Judged@2"]["wins"] == "1"  # counts stay integers
    res = runner.invoke(app, [*args, "--format", "csv"])  # no comparisons computed: the note still names P@2
    assert "note: P@2: no query is paired across the systems (n = 0)" in res.stderr


def test_api_names_the_unpaired_metric(tmp_path: Path) -> None:
    _files(tmp_path, QRELS_NONE)
    ev = evaluate(tmp_path / "qrels", [tmp_path / "A.run", tmp_path / "B.run"], "P@2,Judged@2")
    assert ev.paired_queries == 0 and ev.paired_queries_per_metric == {"P@2": 0, "Judged@2": 2}
    assert ev.comparison("B", "Judged@2").n == 2
    with pytest.raises(ConfigError, match="no query has a relevant document"):
        ev.comparison("B", "P@2")
    frame = ev.comparisons_frame().set_index("metric")
    assert frame.loc["P@2", "n"] == 0 and frame.loc["P@2", "reason"] == REASON
    assert frame.loc["Judged@2", "n"] == 2


def test_segment_without_relevant_query_keeps_its_row(tmp_path: Path) -> None:
    args = _files(tmp_path, QRELS_SEG)
    (tmp_path / "seg.tsv").write_text("query\tpart\nq1\tx\nq2\ty\n")
    doc = json.loads(runner.invoke(app, [*args, "--segments", str(tmp_path / "seg.tsv"), "--format", "json"]).stdout)
    assert doc["paired_queries"] == 1 and doc["paired_queries_per_metric"] == {"P@2": 1, "Judged@2": 2}
    got = {(r["segment_value"], r["metric"]): (r["n"], r.get("reason")) for r in doc["comparisons"]}
    assert got == {(None, "P@2"): (1, None), (None, "Judged@2"): (2, None), ("x", "P@2"): (1, None),
                   ("x", "Judged@2"): (1, None), ("y", "Judged@2"): (1, None), ("y", "P@2"): (0, REASON_SEG)}
    res = runner.invoke(app, [*args, "--segments", str(tmp_path / "seg.tsv")])
    line = next(x for x in res.stdout.splitlines() if x.startswith("part=y ") and " P@2 " in x)
    assert line.split()[3] == "0" and line.endswith(REASON_SEG)


def test_every_metric_paired_has_no_reason(tmp_path: Path) -> None:
    args = _files(tmp_path, "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\nq2 0 d4 0\n")
    doc = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert doc["paired_queries"] == 2 and "paired_queries_per_metric" not in doc
    assert all("reason" not in r for r in doc["comparisons"])
    assert "paired comparisons vs A (2 queries)" in runner.invoke(app, args).stdout
