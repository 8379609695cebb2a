"""Usage errors typer and click raise (a bad, missing or unknown option, an unknown command) are one line
``error: ...`` naming the option as typed, and exit code 2, like every other error of the tool."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.cli._usage import _typed_name

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # below a declared min, above a declared max, not a number: pydantic's bound and the value typed
        (["power", "proportion", "--baseline", "0.1", "--users", "1"], "--users: must be at least 2, got 1"),
        (["power", "interleaving", "--delta", "0.1", "--users=2.5"], "--users: must be an integer, got 2.5"),
        (["power", "ratio", "--num-mean", "x"], "--num-mean: must be a number, got 'x'"),
        (["power", "proportion", "--baseline", "0.1", "--users="], "--users: must be an integer, got ''"),
        (["evaluate", "-q", "q", "-r", "r", "--alpha", "1.5"], "--alpha: must be at most 1, got 1.5"),
        (["evaluate", "-q", "q", "-r", "r", "--bootstrap", "5"], "--bootstrap: must be at least 100, got 5"),
        (["estimate", "-l", "x", "--target", "t", "--seed", "-1"], "--seed: must be at least 0, got -1"),
        # the short name when the user typed the short name
        (["simulate", "-c", "x.yaml", "-r", "0"], "-r: must be at least 1, got 0"),
        (["sweep", "-w", "-1"], "-w: must be at least 0, got -1"),
        # a required option missing
        (["estimate"], "--log: required, not given (see 'onlineeval estimate --help')"),
        (["clicks", "fit"], "--log: required, not given (see 'onlineeval clicks fit --help')"),
        # a value missing, or given to a flag
        (["power", "interleaving", "--users"], "--users: needs a value (see 'onlineeval power interleaving --help')"),
        (["estimate", "-l"], "-l: needs a value (see 'onlineeval estimate --help')"),
        (["evaluate", "-q", "q", "-r", "r", "--with-per-query=3"],
         "--with-per-query: does not take a value (see 'onlineeval evaluate --help')"),
        # unknown options and commands, extra arguments
        (["power", "--users", "1"],
         "--users: no such option for 'onlineeval power'; give a command first: proportion, ratio, interleaving"),
        (["power", "proportion", "--basline", "0.1"],
         "--basline: no such option for 'onlineeval power proportion' (did you mean --baseline?)"),
        (["metrics", "--zzz"], "--zzz: no such option for 'onlineeval metrics' (see 'onlineeval metrics --help')"),
        # click's only close match is --help, never what a mistyped option meant ('did you mean --help?' before)
        (["power", "proportion", "--p1", "0.1"],
         "--p1: no such option for 'onlineeval power proportion' (see 'onlineeval power proportion --help')"),
        (["nosuch"], "no such command 'nosuch' for 'onlineeval'; commands: simulate, evaluate, metrics, validate, "
                     "estimate, sweep, clicks, power, list"),
        # a sub-group's unknown command: the same line, with click's guess
        (["clicks", "fitt"], "no such command 'fitt' for 'onlineeval clicks' (did you mean 'fit'?); commands: fit, "
                             "evaluate"),
        (["power", "interleaving", "--delta", "0.1", "extra"],
         "unexpected argument(s) 'extra' (see 'onlineeval power interleaving --help')"),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line_exit_2(args: list[str], line: str) -> None:
    res = runner.invoke(app, args, prog_name="onlineeval")
    assert res.exit_code == 2, res.output
    assert res.stderr == f"error: {line}\n"
    assert res.stdout == ""


def test_the_console_script_prints_the_same_line() -> None:
    """Through the installed entry point (a real process, argv as a shell passes it)."""
    res = subprocess.run(
        [sys.executable, "-m", "onlineeval.cli", "power", "proportion", "--baseline", "0.1", "--users", "1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr == "error: --users: must be at least 2, got 1\n"


@pytest.mark.parametrize("args", [[], ["power"], ["clicks"]])
def test_a_group_without_a_command_still_prints_its_help(args: list[str]) -> None:
    res = runner.invoke(app, args, prog_name="onlineeval")
    assert res.exit_code == 2
    assert "Usage: onlineeval" in res.output
    assert "error:" not in res.output


def test_help_and_version_are_not_errors() -> None:
    res = runner.invoke(app, ["power", "proportion", "--help"], prog_name="onlineeval")
    assert res.exit_code == 0 and "--baseline" in res.stdout
    res = runner.invoke(app, ["--version"], prog_name="onlineeval")
    assert res.exit_code == 0 and res.stdout.startswith("onlineeval ")


def test_typed_name_reads_the_arguments() -> None:
    class Param:
        param_type_name = "option"
        opts = ["--log", "-l"]
        secondary_opts: list[str] = []
        human_readable_name = "LOG"

    assert _typed_name(Param, ["estimate", "-l", "x"]) == "-l"
    assert _typed_name(Param, ["estimate", "-lx"]) == "-l"
    assert _typed_name(Param, ["estimate", "--log=x"]) == "--log"
    assert _typed_name(Param, ["estimate"]) == "--log"  # not typed: the long name
    assert _typed_name(Param, ["estimate", "--", "-l"]) == "--log"  # after "--" nothing is an option


def _help_pages(command, path):  # noqa: ANN001, ANN202
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _help_pages(sub, [*path, name])


def test_flags_show_no_value_placeholder_in_any_help_page() -> None:
    """Review 12, F10: typer 0.29 printed '<bool>' after every flag (--quiet <bool>, --help <bool>), which reads as
    if it took a value ('--quiet true' is an error); every help page of the tree now shows none, while options
    that take a value keep theirs."""
    import typer.main

    pages = list(_help_pages(typer.main.get_command(app), []))
    assert ["sweep"] in pages and ["clicks", "fit"] in pages and ["list", "estimators"] in pages
    for path in pages:
        res = runner.invoke(app, [*path, "--help"], prog_name="onlineeval", env={"COLUMNS": "200"})
        assert res.exit_code == 0, (path, res.output)
        assert "<bool>" not in res.stdout, path
        assert "--help" in res.stdout
    res = runner.invoke(app, ["sweep", "--help"], prog_name="onlineeval", env={"COLUMNS": "200"})
    rows = {}
    for line in res.stdout.splitlines():
        words = line.strip("│ ").split()
        if words and words[0].lstrip("*") == "" and len(words) > 1:
            words = words[1:]  # the required mark
        if words and words[0].startswith("--"):
            rows[words[0]] = words
    assert rows["--config"][2] == "<path>" and rows["--scheduler"][1] == "<str>" and rows["--set"][1] == "KEY=VALUE"
    assert rows["--quiet"][1:3] == ["-q", "No"]  # the short name, then the help text: no placeholder
    assert rows["--help"][1:3] == ["Show", "this"]
    res = runner.invoke(app, ["sweep", "--quiet", "true", "-c", "x.yaml"], prog_name="onlineeval")
    assert res.exit_code == 2 and res.stderr == "error: unexpected argument(s) 'true' (see 'onlineeval sweep --help')\n"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # click kept the last silently: snips was never estimated, qrels a never read, AP never computed
        (["estimate", "-l", "x", "--target", "t", "--estimator", "snips", "--estimator", "ips"],
         "--estimator: given twice ('snips' and 'ips')"),
        (["evaluate", "--qrels", "a", "--qrels", "b", "-r", "r"], "--qrels: given twice ('a' and 'b')"),
        (["evaluate", "-q", "q", "-r", "r", "--metrics", "AP", "--metrics=nDCG"], "--metrics: given twice ('AP' and "
                                                                                  "'nDCG')"),
        (["evaluate", "-q", "q", "-r", "r", "--format", "json", "-f", "table"], "-f: given twice ('json' and 'table')"),
        (["power", "proportion", "--baseline", "0.3", "--baseline", "0.2"],
         "--baseline: given twice ('0.3' and '0.2')"),
        (["simulate", "-c", "x.yaml", "--output", "a", "--output", "b"], "--output: given twice ('a' and 'b')"),
        (["clicks", "fit", "--log", "l", "--model", "dcm", "--model", "pbm", "--out", "o"],
         "--model: given twice ('dcm' and 'pbm')"),
        (["clicks", "fit", "--log", "l", "--model", "dcm", "--out", "o", "-q", "--quiet"],
         "--quiet: given twice ('-q' and '--quiet')"),
    ],
)
def test_an_option_given_twice_is_refused(args: list[str], line: str) -> None:
    """An option that takes one value, given twice, is refused naming both values (click kept the last without a
    word); repeatable options (--run, --target, --set) are not."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    command = " ".join(a for a in args[:2] if not a.startswith("-"))
    assert result.output.strip() == (f"error: {line} but takes one value; give it once (the later would replace the "
                                      f"earlier) (see 'onlineeval {command} --help')")


def test_repeatable_options_and_values_after_a_double_dash_are_not_repeats(tmp_path) -> None:
    from onlineeval.cli._usage import repeated_option
    from typer.main import get_command

    root = get_command(app)
    estimate = root.commands["estimate"]
    assert repeated_option(estimate, ["--target", "a", "--target", "b", "--option", "x=1", "--option", "y=2"]) is None
    assert repeated_option(estimate, ["--estimator", "ips", "--", "--estimator", "snips"]) is None
    # a value that looks like the option's name is the value, not a second use
    assert repeated_option(estimate, ["--log", "--estimator", "--estimator", "ips"]) is None
    simulate = root.commands["simulate"]
    assert repeated_option(simulate, ["--set", "a=1", "--set", "b=2"]) is None
    # through the evaluate command's direct start-up path (a process), which hands repeated options to typer
    proc = subprocess.run([sys.executable, "-m", "onlineeval.cli", "evaluate", "-q", "q", "-r", "r", "--seed", "1",
                           "--seed", "2"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --seed: given twice ('1' and '2')"), proc.stderr
