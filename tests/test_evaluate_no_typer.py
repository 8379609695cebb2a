"""``onlineeval evaluate``'s direct path without importing typer (and click), and the
output writer it uses instead of ``typer.echo``: the same text, the same streams."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from onlineeval.cli.evaluate import _echo

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_eval"


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


def test_the_direct_path_imports_no_typer_and_matches_typers_app() -> None:
    args = ["evaluate", "--qrels", str(DATA / "qrels.test"), "--run", str(DATA / "results.test"),
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
def test_errors_on_the_direct_path_exit_as_typers_app(extra: list[str]) -> None:
    args = ["evaluate", "--run", str(DATA / "results.test")]
    if "--qrels" not in extra:
        args += ["--qrels", str(DATA / "qrels.test")]
    args += extra
    direct = _run(f"import sys; sys.argv = ['onlineeval', *{args!r}]\nfrom onlineeval.cli import main\nmain()")
    via_app = _run(f"import sys; sys.argv = ['onlineeval', *{args!r}]\nfrom onlineeval.cli import app\napp()")
    assert direct.returncode == via_app.returncode == 2
    assert direct.stderr == via_app.stderr and direct.stderr.startswith("error: ")
    assert direct.stdout == via_app.stdout == ""
