"""Run files that share a stem get short unique names, and --baseline accepts them."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from onlineeval.cli import app

QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n"
RUN = "1 Q0 d1 1 2.0 r\n1 Q0 d2 2 1.0 r\n2 Q0 d3 1 1.0 r\n"


def _files(tmp_path: Path, *names: str) -> list[str]:
    (tmp_path / "q.txt").write_text(QRELS)
    out = []
    for name in names:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(RUN)
        out.append(str(path))
    return out


def _evaluate(tmp_path: Path, runs: list[str], *extra: str) -> str:
    args = ["evaluate", "--qrels", str(tmp_path / "q.txt"), "--metrics", "P@1", "--format", "json", *extra]
    for r in runs:
        args += ["--run", r]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


def test_shared_stems_use_file_names_and_baseline_accepts_them(tmp_path: Path) -> None:
    runs = _files(tmp_path, "results.test", "results.trunc")
    out = _evaluate(tmp_path, runs, "--baseline", "results.trunc")
    assert '"name": "results.test"' in out and '"name": "results.trunc"' in out
    assert '"baseline": "results.trunc"' in out


def test_same_file_name_in_two_folders_uses_the_folder(tmp_path: Path) -> None:
    runs = _files(tmp_path, "x/run.txt", "y/run.txt")
    out = _evaluate(tmp_path, runs, "--baseline", runs[1])
    assert '"name": "x/run.txt"' in out and '"baseline": "y/run.txt"' in out


def test_missing_queries_error_spells_the_cli_option(tmp_path: Path) -> None:
    (tmp_path / "q.txt").write_text(QRELS + "3 0 d9 1\n")
    run = tmp_path / "r.txt"
    run.write_text(RUN)
    result = CliRunner().invoke(app, ["evaluate", "--qrels", str(tmp_path / "q.txt"), "--run", str(run)])
    assert result.exit_code == 2
    assert "--missing zero" in result.output and "--missing drop" in result.output
