"""Review 4's brief, item 6: --fresh (CLI) and ``fresh`` (API) drop a finished run's replicates too, not only an
interrupted run's, and their help says so."""
from __future__ import annotations

from typer.testing import CliRunner

from onlineeval.api import simulate as api_simulate
from onlineeval.cli import app
from simulations.job import FINISHED, PARTIAL, reopen_records


def test_cli_fresh_help_names_the_finished_replicates() -> None:
    res = CliRunner().invoke(app, ["simulate", "--help"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.replace("│", " ").split())
    assert f"a finished run's {FINISHED}" in flat
    assert "an interrupted run's finished replicates" in flat


def test_api_fresh_docstring_names_the_finished_replicates() -> None:
    doc = " ".join((api_simulate.__doc__ or "").split())
    assert f"a finished run's ``{FINISHED}``" in doc


def test_fresh_deletes_the_finished_file_and_ignores_the_partial_one(tmp_path) -> None:
    (tmp_path / FINISHED).write_bytes(b"not read")
    (tmp_path / PARTIAL).write_text("{}\n")
    assert reopen_records(tmp_path, "any fingerprint", fresh=True) == ({}, "")
    assert not (tmp_path / FINISHED).exists()
