"""Review 13, F3: Judged@k does not depend on relevance, but under the default conventions (empty=exclude) its mean
leaves out the queries without a relevant document, which ir_measures' mean counts. The output says so.

Two queries (the review's example): q1 retrieves d1 (judged, relevant) and dX (unjudged); q2, with no relevant
document, retrieves dY, dZ (unjudged) and d1 (judged non-relevant). Judged@3 per query: 1/2 and 1/3 (the slots
past a list's end do not count); ir_measures' mean (1/2 + 1/3) / 2 = 0.4167; with q2 excluded, 0.5000.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app

runner = CliRunner()
NOTE = ("Judged@3 does not depend on relevance, yet empty=exclude leaves the 1 query without a relevant document out "
        "of its mean; ir_measures' means count those queries (--empty zero gives those means")


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "j.qrels").write_text("q1 0 d1 1\nq2 0 d1 0\n")
    (tmp_path / "j.run").write_text("q1 Q0 d1 1 2 r\nq1 Q0 dX 2 1 r\nq2 Q0 dY 1 3 r\nq2 Q0 dZ 2 2 r\nq2 Q0 d1 3 1 r\n")
    return ["evaluate", "--qrels", str(tmp_path / "j.qrels"), "--run", str(tmp_path / "j.run")]


def test_judged_mean_over_excluded_queries_is_noted(files: list[str]) -> None:
    default = runner.invoke(app, [*files, "--metrics", "Judged@3"])
    assert default.exit_code == 0, default.output
    assert default.stdout.splitlines()[-1].split()[1] == f"{1 / 2:.4f}"
    assert NOTE in default.stdout
    zero = runner.invoke(app, [*files, "--metrics", "Judged@3", "--empty", "zero"])
    assert zero.exit_code == 0, zero.output
    assert zero.stdout.splitlines()[-1].split()[1] == f"{(1 / 2 + 1 / 3) / 2:.4f}" == "0.4167"
    assert "does not depend on relevance" not in zero.stdout
    csv = runner.invoke(app, [*files, "--metrics", "Judged@3", "--format", "csv"])
    assert "note: " + NOTE in csv.stderr
    doc = json.loads(runner.invoke(app, [*files, "--metrics", "Judged@3", "--format", "json"]).stdout)
    assert doc["relevance_free_note"].startswith(NOTE)
    # a relevance metric alone: its mean rightly follows the empty rule, no note
    plain = runner.invoke(app, [*files, "--metrics", "nDCG@3"])
    assert plain.exit_code == 0 and "does not depend on relevance" not in plain.stdout
