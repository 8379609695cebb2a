"""The direct command-line path (:mod:`onlineeval.cli._direct`) against typer itself.

``onlineeval power ...`` with plain options skips building the typer app. Every option it reads
must be one typer declares, every value it accepts must be the one typer would pass, and the
output and exit code must be typer's; whatever it does not understand must go to typer.
"""

from __future__ import annotations

import functools
import inspect
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from onlineeval.cli import _argv, _direct, app, main
from onlineeval.cli.power import COMMANDS

runner = CliRunner()


def _click_command(name: str) -> Any:
    """typer's click command of ``onlineeval power <name>`` (click itself, or the copy of click that newer
    typer releases carry as ``typer._click``: click is no dependency of ours, and not always installed)."""
    root = get_command(app)
    ctx = root.context_class(root)
    power = root.get_command(ctx, "power")  # type: ignore[attr-defined]
    return power.get_command(ctx, name)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_direct_options_are_typers_options(name: str) -> None:
    cmd = _click_command(name)
    typer_names = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    options = _direct.direct_options(COMMANDS[name])
    assert options is not None
    assert set(options) == typer_names
    for p in cmd.params:  # the same parameter and default behind every name
        for opt in p.opts:
            assert options[opt].param == p.name
            assert options[opt].default == (_argv.REQUIRED if p.required else p.default)


def typer_call(func: Callable[..., Any], args: list[str]) -> tuple[int, dict[str, Any], str]:
    """Exit code, the keyword arguments typer hands ``func`` for ``args`` and the output: a one-command
    typer app of a recorder with ``func``'s signature and declarations."""
    seen: dict[str, Any] = {}

    @functools.wraps(inspect.unwrap(func))
    def record(**kwargs: Any) -> None:
        seen.update(kwargs)

    one = typer.Typer(add_completion=False)
    one.command()(record)
    res = CliRunner().invoke(one, args)
    return res.exit_code, seen, res.output


def _typer_kwargs(func: Callable[..., Any], args: list[str]) -> dict:
    """The keyword arguments typer hands ``func`` for ``args`` (it must accept them)."""
    code, seen, output = typer_call(func, args)
    assert code == 0, output
    return seen


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("proportion", ["--baseline", "0.1", "--target", "0.105"]),
        ("proportion", ["--baseline=0.1", "--mde=-0.01", "--alternative", "smaller", "-f", "json"]),
        ("proportion", ["--baseline", ".2", "--relative-mde", "5e-2", "--users", "40000", "--share-b", "0.4",
                        "--sequential", "pocock", "--looks", "7", "--method", "pooled", "--alpha", "0.01",
                        "--power", "0.9", "--impressions-per-user", "2.5"]),
        ("ratio", ["--csv", "users.csv", "--num-col", "clicks", "--den-col", "queries", "--mde", "0.01"]),
        ("ratio", ["--num-mean", "2", "--num-var", "3", "--den-mean", "5", "--den-var", "4", "--cov", "1",
                   "--users", "+20000", "--format", "text"]),
        ("interleaving", ["--delta", "0.02", "--sd", "0.9", "--users", "20000", "--sequential", "msprt",
                          "--looks", "14"]),
        ("interleaving", ["--delta", "1E-2", "--variance", "0.81"]),
    ],
)  # fmt: skip
def test_direct_parse_equals_typers(name: str, args: list[str]) -> None:
    direct = _direct.parse_direct(COMMANDS[name], args)
    assert direct is not None
    typer_params = _typer_kwargs(COMMANDS[name], args)
    assert direct == typer_params
    assert {k: type(v) for k, v in direct.items()} == {k: type(v) for k, v in typer_params.items()}


@pytest.mark.parametrize(
    "args",
    [
        ["--qrels", "q.txt", "--run", "a.run"],
        ["-q", "q.txt", "-r", "a.run", "--run=b.run", "-r", "c.run", "--metrics", "nDCG@10,AP", "-b", "b",
         "--preset", "trec_eval", "--depth", "100", "--with-per-query", "-f", "json", "--alpha", "0.01"],
        ["--letor", "x.svm", "--score-feature", "3", "--score-feature", "1", "--scores", "s.txt",
         "--ties", "expected", "--seed", "7", "--permutations", "1000", "--bootstrap", "100"],
    ],
)  # fmt: skip
def test_direct_parse_of_list_options_and_flags_equals_typers(args: list[str]) -> None:
    from onlineeval.cli.evaluate import evaluate_cmd

    direct = _direct.parse_direct(evaluate_cmd, args)
    assert direct is not None
    typer_params = _typer_kwargs(evaluate_cmd, args)
    assert direct == typer_params
    assert {k: type(v) for k, v in direct.items()} == {k: type(v) for k, v in typer_params.items()}
    names = {o for p in typer.main.get_command(_one_command(evaluate_cmd)).params for o in (*p.opts, *p.secondary_opts)}
    assert set(_direct.direct_options(evaluate_cmd) or {}) == names - {"--help"}


def _one_command(func: Callable[..., Any]) -> typer.Typer:
    one = typer.Typer(add_completion=False)
    one.command()(func)
    return one


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--baseline"],  # no value
        ["--baseline", "0.1", "--baseline", "0.2"],  # repeated
        ["--baseline", "0.1", "--users", "1"],  # below the declared min=2
        ["--baseline", "0.1", "--users", "2.5"],  # not an integer
        ["--baseline", "0.1", "--looks", "many"],
        ["--baseline", "0.1", "--alpha", "nan"],
        ["--baseline", "0.1", "--format", "-x"],
        ["--baseline", "0.1", "--unknown", "1"],
        ["--baseline", "0.1", "extra"],
        ["--target", "0.105"],  # the required --baseline missing
        ["-fjson", "--baseline", "0.1"],
        ["--baseline", "0.1", "--users=", "5"],
    ],
)
def test_what_the_direct_path_does_not_understand_goes_to_typer(args: list[str]) -> None:
    assert _direct.parse_direct(COMMANDS["proportion"], args) is None


def _run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple:
    monkeypatch.setattr(sys, "argv", ["onlineeval", *args])  # typer's usage lines name the program from argv[0]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "args",
    [
        ["power", "proportion", "--baseline", "0.1", "--target", "0.105"],
        ["power", "proportion", "--baseline", "0.1", "--target", "0.105", "--sequential", "obrien_fleming",
         "--looks", "14", "--users", "100000", "-f", "json"],
        ["power", "interleaving", "--delta", "0.02", "--sd", "0.9", "--users", "20000"],
        ["power", "ratio", "--num-mean", "2", "--num-var", "3", "--den-mean", "5", "--den-var", "4", "--cov", "1",
         "--relative-mde", "0.03"],
        # errors our commands raise: the same line and exit code 2 on both paths
        ["power", "proportion", "--baseline", "0.1", "--target", "0.105", "--alpha", "1.5"],
        ["power", "proportion", "--baseline", "0.1", "--target", "0.105", "--sequential", "pocock"],
        ["power", "ratio", "--csv", "no-such-file.csv", "--mde", "0.01"],
        # what only typer parses: the same answer through the fallback
        ["power", "proportion", "--baseline", "0.1", "--users", "1"],
    ],
)  # fmt: skip
def test_main_prints_what_typer_prints(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _run_main(monkeypatch, capsys, args)
    ref = CliRunner().invoke(app, args, prog_name="onlineeval")
    assert code == ref.exit_code
    assert out == ref.stdout
    # under pytest, click names the program after ``python -m pytest`` (the __main__ module), not argv[0]
    err = err.replace("python -m pytest.onlineeval", "onlineeval")
    assert err.strip() == ref.stderr.strip()


def test_power_answers_without_importing_pydantic() -> None:
    code = (
        "import sys; sys.argv = ['onlineeval', 'power', 'proportion', '--baseline', '0.1', '--target', '0.105']\n"
        "from onlineeval.cli import main\nmain()\n"
        "print(sorted(m for m in ('pydantic', 'scipy', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "57,756" in out
    assert out.strip().splitlines()[-1] == "[]"
