"""Review 10, finding 3: ir_measures' ERR (gdeval.pl's) fixes gmax = 4; ours takes the qrels' top grade. The
output's gmax line, the JSON and ``onlineeval metrics`` say so, and ``ERR(gmax=4)@k`` gives their value.

Hand computation, one query ranked d1 (grade 2), d2 (0), d3 (3), qrels' top grade 3:
gdeval / ir_measures (R = (2^g - 1) / 16): 3/16 + (13/16)(7/16)/3 = 0.30598958...;
ours (gmax = 3, R = (2^g - 1) / 8): 3/8 + (5/8)(7/8)/3 = 0.55729166...
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from onlineeval.cli import app

runner = CliRunner()
GDEVAL = 3 / 16 + (13 / 16) * (7 / 16) / 3
OURS = 3 / 8 + (5 / 8) * (7 / 8) / 3


def files(tmp_path: Path) -> list[str]:
    (tmp_path / "q").write_text("q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 3\n")
    (tmp_path / "r").write_text("q1 Q0 d1 1 3 r\nq1 Q0 d2 2 2 r\nq1 Q0 d3 3 1 r\n")
    return ["--qrels", str(tmp_path / "q"), "--run", str(tmp_path / "r")]


def test_err_gmax_line_names_ir_measures_convention_and_values_are_exact(tmp_path: Path) -> None:
    args = files(tmp_path)
    res = runner.invoke(app, ["evaluate", *args, "--metrics", "ERR@10,ERR(gmax=4)@10"])
    assert res.exit_code == 0, res.output
    assert ("ERR@10: gmax = 3 (top grade of the qrels; ir_measures and gdeval fix gmax = 4, so their ERR differs: "
            "ERR(gmax=4)@10 gives theirs)") in res.stdout
    assert res.stdout.splitlines()[-1].split()[1:] == [f"{OURS:.4f}", f"{GDEVAL:.4f}"]
    doc = json.loads(runner.invoke(app, ["evaluate", *args, "--metrics", "ERR@10,ERR(gmax=4)@10",
                                         "--format", "json"]).stdout)
    m = doc["systems"][0]["metrics"]
    assert abs(m["ERR@10"]["mean"] - OURS) < 1e-12 and abs(m["ERR(gmax=4)@10"]["mean"] - GDEVAL) < 1e-12
    assert doc["err_gmax"] == {"ERR@10": 3}
    assert "ERR(gmax=4)@10 gives theirs" in doc["err_gmax_notes"][0]
    csv = runner.invoke(app, ["evaluate", *args, "--metrics", "ERR@10", "--format", "csv"])
    assert "note: ERR@10: gmax = 3 (top grade of the qrels; ir_measures and gdeval fix gmax = 4" in csv.stderr


def test_metrics_listing_gives_ir_measures_gmax() -> None:
    res = runner.invoke(app, ["metrics"])
    assert res.exit_code == 0, res.output
    assert "ir_measures: ERR (ir_measures and gdeval fix gmax = 4, here gmax is the qrels' top grade: " \
           "ERR(gmax=4)@<k> gives their value)" in res.stdout
