"""Review 4, F5: `onlineeval power interleaving` has no arms and sizes a mean per-user preference, not simulate's
Delta_AB (a ratio over compared impressions, clustered by user); its help and output say so."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from onlineeval.cli import app

runner = CliRunner()


def test_users_help_has_no_arms_and_names_the_estimand() -> None:
    res = runner.invoke(app, ["power", "interleaving", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.replace("│", " ").split())
    assert "both arms" not in flat
    assert "interleaving has no arms" in flat
    assert "simulate's Delta_AB is another quantity" in flat
    assert "se x sqrt(compared impressions)" in flat


def test_output_names_the_estimand_text_and_json() -> None:
    res = runner.invoke(app, ["power", "interleaving", "--delta", "0.02", "--sd", "0.9"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[1].startswith("estimand: mean over users of each user's preference")
    doc = json.loads(runner.invoke(app, ["power", "interleaving", "--delta", "0.02", "--sd", "0.9",
                                         "--format", "json"]).output)
    assert "not simulate's Delta_AB" in doc["estimand"]
    assert doc["required"]["users_total"] == 15_894  # the arithmetic is unchanged (statsmodels 15,893.9)


def test_ab_commands_still_say_both_arms() -> None:
    res = runner.invoke(app, ["power", "proportion", "--help"], env={"COLUMNS": "200"})
    assert "Total users (both arms)" in " ".join(res.output.replace("│", " ").split())
