"""``onlineeval evaluate``'s direct path without importing typer (and click), and the
output writer it uses instead of ``typer.echo``: the same text, the same streams."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from onlineeval.cli.evaluate import _echo



@pytest.fixture
def trec_files(tmp_path: Path) -> tuple[Path, Path]:
    """A small qrels and run (3 queries, graded, a tie and an unjudged document): the tests need
    no reference data, so they run on a fresh clone too."""
    qrels = tmp_path / "qrels.test"
    qrels.write_text("q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 1\nq2 0 d1 1\nq2 0 d4 3\nq3 0 d2 1\n", encoding="utf-8")
    run = tmp_path / "results.test"
    lines = [f"q1 Q0 d{i} {i} {2.0 - 0.25 * i} sys" for i in range(1, 6)]
    lines += ["q2 Q0 d4 1 1.5 sys", "q2 Q0 d2 2 1.5 sys", "q2 Q0 d1 3 0.5 sys", "q3 Q0 d5 1 3 sys", "q3 Q0 d2 2 2 sys"]
    run.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return qrels, run


@pytest.mark.parametrize(
    "message", ["", "plain", "two\nlines\n", "tab\tand  spaces", "caf\u00e9 \u2013 non-ASCII", "\x1b[1mbold\x1b[0m"]
)
@pytest.mark.parametrize("err", [False, True])
@pytest.mark.parametrize("nl", [True, False])
def test_echo_writes_what_typer_echo_writes(capsys, message: str, err: bool, nl: bool) -> None:
    typer.echo(message, err=err, nl=nl)
    ref = capsys.readouterr()
    _echo(message, err=err, nl=nl)
    got = capsys.readouterr()
    assert (got.out, got.err) == (ref.out, ref.err)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_the_direct_path_imports_no_typer_and_matches_typers_app(trec_files: tuple[Path, Path]) -> None:
    qrels, run = trec_files
    args = ["evaluate", "--qrels", str(qrels), "--run", str(run),
            "--preset", "trec_eval", "--metrics", "ndcg_cut_10,map,recip_rank,P_10,ERR@10,RBP(p=0.8)"]
    direct = _run(
        f"import sys; sys.argv = ['onlineeval', *{args!r}]\n"
        "from onlineeval.cli import main\nmain()\n"
        "print('typer' in sys.modules, 'click' in sys.modules, file=sys.stderr)"
    )
    assert direct.returncode == 0, direct.stderr
    assert direct.stderr == "False False\n"
    via_app = _run(f"import sys; sys.argv = ['onlineeval', *{args!r}]\nfrom onlineeval.cli import app\napp()")
    assert via_app.returncode == 0 and via_app.stdout == direct.stdout and "nDCG@10" in direct.stdout


@pytest.mark.parametrize(
    "extra", [["--format", "nope"], ["--qrels", "/nonexistent/qrels"], ["--metrics", "no_such_metric"]]
)
def test_errors_on_the_direct_path_exit_as_typers_app(extra: list[str], trec_files: tuple[Path, Path]) -> None:
    qrels, run = trec_files
    args = ["evaluate", "--run", str(run)]
    if "--qrels" not in extra:
        args += ["--qrels", str(qrels)]
    args += extra
    direct = _run(f"import sys; sys.argv = ['onlineeval', *{args!r}]\nfrom onlineeval.cli import main\nmain()")
    via_app = _run(f"import sys; sys.argv = ['onlineeval', *{args!r}]\nfrom onlineeval.cli import app\napp()")
    assert direct.returncode == via_app.returncode == 2
    assert direct.stderr == via_app.stderr and direct.stderr.startswith("error: ")
    assert direct.stdout == via_app.stdout == ""
