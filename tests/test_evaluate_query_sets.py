"""Review 10, finding 2: with ``--missing drop`` the systems' means can be over different queries while the paired
comparisons use the shared ones; the output must say so and show the paired means.

Hand-made case where the signs disagree: five queries, one relevant document each (``r``). Run A answers q1 and
q2 only (P@1: 0, 1: mean 0.5 over 2); run B answers all five (P@1: 1, 1, 0, 0, 0: mean 0.4 over 5). The table
ranks A ahead (0.5 > 0.4); the paired diff B - A over q1, q2 is (1 - 0 + 1 - 1) / 2 = +0.5 (paired means 0.5, 1.0).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app

runner = CliRunner()


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    qrels = "".join(f"q{i} 0 r 1\nq{i} 0 n 0\n" for i in range(1, 6))
    a = "q1 Q0 n 1 2 A\nq1 Q0 r 2 1 A\nq2 Q0 r 1 2 A\nq2 Q0 n 2 1 A\n"
    b = "".join(f"q{i} Q0 r 1 2 B\nq{i} Q0 n 2 1 B\n" for i in (1, 2))
    b += "".join(f"q{i} Q0 n 1 2 B\nq{i} Q0 r 2 1 B\n" for i in (3, 4, 5))
    for name, text in (("qrels", qrels), ("A.run", a), ("B.run", b)):
        (tmp_path / name).write_text(text)
    return ["--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "A.run"), "--run", str(tmp_path / "B.run"),
            "--metrics", "P@1", "--missing", "drop", "--permutations", "200", "--bootstrap", "200"]


def test_table_says_the_means_are_over_different_queries_and_shows_the_paired_means(files: list[str]) -> None:
    res = runner.invoke(app, ["evaluate", *files])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert next(line for line in lines if line.startswith("A ")).split()[1] == "0.5000"
    assert next(line for line in lines if line.startswith("B ")).split()[1] == "0.4000"
    assert ("note: the systems' means are over different queries (A: 2, B: 5); the paired comparisons use the 2 "
            "queries counted for every system") in res.stdout
    header = next(line for line in lines if line.startswith("segment"))
    assert header.split()[:8] == ["segment", "metric", "system", "n", "base", "mean", "sys", "mean"]
    row = next(line for line in lines if line.startswith("all "))
    assert row.split()[:7] == ["all", "P@1", "B", "2", "0.5000", "1.0000", "0.5000"]


def test_json_and_csv_say_it_too(files: list[str], tmp_path: Path) -> None:
    doc = json.loads(runner.invoke(app, ["evaluate", *files, "--format", "json"]).stdout)
    assert doc["query_sets_differ"]["counted"] == {"A": 2, "B": 5}
    assert doc["query_sets_differ"]["shared"] == 2
    (cmp,) = doc["comparisons"]
    assert (cmp["mean_baseline"], cmp["mean_system"], cmp["mean_diff"]) == (0.5, 1.0, 0.5)
    res = runner.invoke(app, ["evaluate", *files, "--format", "csv", "--comparisons", str(tmp_path / "c.csv")])
    assert res.exit_code == 0, res.output
    assert "note: the systems' means are over different queries (A: 2, B: 5)" in res.stderr


def test_same_query_sets_change_nothing(files: list[str]) -> None:
    res = runner.invoke(app, ["evaluate", *files[:4], "--run", files[5], *files[6:8], "--permutations", "200",
                              "--bootstrap", "200", "--missing", "zero"])
    assert res.exit_code == 0, res.output
    assert "different queries" not in res.stdout and "base mean" not in res.stdout
