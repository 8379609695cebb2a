"""``onlineeval evaluate``'s direct path (:mod:`onlineeval.cli.evaluate_direct`) against typer.

Its static option table must be exactly what :func:`onlineeval.cli._direct.direct_options` reads
from :func:`evaluate_cmd`'s typer declarations, and :func:`run_direct` must hand ``evaluate_cmd``
exactly the arguments typer's app would, by value and type; numbers follow the shared parser
(:mod:`onlineeval.cli._argv`): signs, leading zeros, exponents and bounds at their edges are parsed
directly, as typer parses them, and whatever typer rejects goes to typer.
"""

from __future__ import annotations

from typing import Any

import pytest
import typer.main

from onlineeval.cli import _argv, _direct
from onlineeval.cli import evaluate as evaluate_module
from onlineeval.cli import evaluate_direct
from onlineeval.cli.evaluate import evaluate_cmd
from test_cli_direct import typer_call  # the keyword arguments typer hands a command


def _typer(args: list[str]) -> tuple[int, dict[str, Any]]:
    """Exit code and the keyword arguments typer hands ``evaluate_cmd`` for ``args``."""
    return typer_call(evaluate_cmd, args)[:2]


def _strict(params: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Name, type and repr of every argument: ``==`` would equate 1 and 1.0, -0.0 and 0.0, [] and ()."""
    return sorted((k, type(v).__name__, repr(v)) for k, v in params.items())


def test_static_table_equals_the_declarations_field_by_field() -> None:
    declared = _direct.direct_options(evaluate_cmd)
    assert declared is not None
    table = evaluate_direct._DIRECT_OPTIONS
    assert list(table) == list(declared)  # every name, in declaration order
    for name, spec in declared.items():
        assert table[name] == spec, name
        assert [type(f) for f in table[name]] == [type(f) for f in spec], name  # 0 vs 0.0, None vs False
    # and those are the names typer's app knows for the command (besides --help)
    from onlineeval.cli import app

    click_cmd = typer.main.get_command(app).commands["evaluate"]  # type: ignore[attr-defined]
    names = {o for p in click_cmd.params for o in (*p.opts, *p.secondary_opts)}
    assert set(table) == names - {"--help"}
    for p in click_cmd.params:
        for opt in p.opts:
            if opt != "--help":
                assert table[opt].param == p.name and table[opt].multiple == p.multiple
                assert (table[opt].kind == "flag") == p.is_flag


def _run_direct(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> dict[str, Any] | None:
    """What :func:`evaluate_direct.run_direct` hands ``evaluate_cmd`` (``None``: it went to typer);
    the process-wide allocator and huge-page settings are left alone in the test process."""
    seen: dict[str, Any] = {}
    monkeypatch.setattr(evaluate_module, "evaluate_cmd", lambda **kwargs: seen.update(kwargs))
    monkeypatch.setattr(evaluate_direct, "_keep_freed_memory", lambda: None)
    monkeypatch.setattr(evaluate_direct, "_no_huge_page_advice", lambda: None)
    return seen if evaluate_direct.run_direct(list(args)) else None


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--qrels", "q.txt", "--run", "a.txt"],
        ["-q", "q.txt", "-r", "a.txt", "-r", "b.txt", "--run=c.txt", "-m", "AP,nDCG@10", "--preset", "trec_eval",
         "-b", "a", "-f", "json", "--with-per-query"],
        ["--qrels=q", "--run", "a", "--depth", "5", "--rel-min", "2", "--with-per-query", "--format", "json"],
        ["--letor", "l.txt", "--scores", "s1", "--scores=s2", "--score-feature", "1", "--score-feature=+12",
         "--query-file", "f.query", "--baseline", "s1"],
        ["--qrels", "q", "--run", "a", "--seed", "7", "--permutations", "1", "--bootstrap", "100", "--alpha", "0.1",
         "--ties", "expected", "--empty", "one", "--missing", "zero", "--gain", "1=1,2=3", "--per-query", "pq.csv",
         "--segments", "s.tsv", "--comparisons", "c.csv", "-f", "csv", "-b", "a"],
        # signed and leading-zero integers
        ["--rel-min", "-1", "--depth", "05", "--seed", "+7", "--permutations", "0001", "--bootstrap", "+00100"],
        ["--rel-min=-0", "--seed=-0", "--score-feature", "+01", "--score-feature", "007"],
        ["--rel-min", "+3", "--depth", "999999999999999999"],
        # exponent and other plain floats
        ["--alpha", "1e-3"], ["--alpha", "5E-2"], ["--alpha=.5"], ["--alpha", "1."], ["--alpha", "+0.25e+0"],
        ["--alpha", "1e-400"],
        # bounds at their edges
        ["--alpha", "0"], ["--alpha", "1"], ["--alpha", "1.0"], ["--alpha", "0e5"], ["--alpha", "-0"],
        ["--alpha", "0.1e1"], ["--bootstrap", "100"], ["--bootstrap", "0100"], ["--depth", "1"], ["--seed", "0"],
        ["--permutations", "1"],
    ],
)  # fmt: skip
def test_run_direct_passes_what_typer_passes(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    code, want = _typer(args)
    assert code == 0
    got = _run_direct(monkeypatch, args)
    assert got is not None, "went to typer"
    assert _strict(got) == _strict(want)


@pytest.mark.parametrize(
    "args",
    [
        ["--bootstrap", "99"], ["--bootstrap", "-100"], ["--alpha", "1.0000001"], ["--alpha", "-1e-9"],
        ["--alpha", "1e400"], ["--depth", "0"], ["--depth", "-1"], ["--seed", "-1"], ["--permutations", "0"],
        ["--score-feature", "-1"], ["--score-feature", "0"], ["--score-feature", "-0"],
    ],
)  # fmt: skip
def test_bounds_just_outside_go_to_typer_which_rejects_them(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    assert _typer(args)[0] == 2
    assert _run_direct(monkeypatch, args) is None


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--qrels"],  # no value
        ["--qrels", "q", "--qrels", "p"],  # repeated
        ["--with-per-query", "--with-per-query"],
        ["--qrels", "-r"],  # a value that looks like an option
        ["--qrels", ""],
        ["--depth", "x"],
        ["--with-per-query=1"],
        ["-qq.txt"],  # an attached short value
        ["positional"],
        ["--unknown", "1"],
        ["--alpha", "nan"],
    ],
)
def test_direct_params_leave_unusual_arguments_to_typer(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    assert evaluate_direct.direct_params(args) is None
    assert _run_direct(monkeypatch, args) is None


_NUMBERS = [
    "0", "1", "-1", "+1", "00", "05", "-05", "+005", "99", "100", "101", "0100", "+0100", "1000",
    "1e3", "1E+3", "1e-3", ".5", "5.", "-.5", "+.5e1", "0.05", "1.0", "1.0000001", "-0", "-0.0",
    "1e400", "-1e400", "1e-400", "123456789012345678", "1234567890123456789", "10000000", "+010000000", "10000001",
    "nan", "inf", "-inf", "0x10", "1_000", " 5", "5 ", "", "e3", "1e", ".", "+", "--1", "\uff15", "1/2", "2.5",
]  # fmt: skip


@pytest.mark.parametrize("option", ["--rel-min", "--depth", "--seed", "--permutations", "--bootstrap",
                                    "--score-feature", "--alpha"])  # fmt: skip
def test_every_number_parsed_directly_is_typers(option: str) -> None:
    """Whatever the direct path accepts, typer passes the same; whatever typer rejects, it leaves to typer."""
    accepted = 0
    for text in _NUMBERS:
        args = [f"{option}={text}"] if text.startswith("-") else [option, text]
        direct = evaluate_direct.direct_params(args)
        code, want = _typer(args)
        if direct is None:
            continue
        assert code == 0, (args, direct)
        assert _strict(direct) == _strict(want), args
        accepted += 1
    assert accepted >= 6  # the test compares numbers, not only rejections


def test_the_shared_parser_is_the_one_both_direct_paths_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = _argv.parse_options

    def counting(options: dict[str, _argv.Option], args: list[str]) -> dict[str, Any] | None:
        calls.append(len(args))
        return real(options, args)

    monkeypatch.setattr(evaluate_direct, "parse_options", counting)
    monkeypatch.setattr(_direct, "parse_options", counting)
    assert evaluate_direct.direct_params(["--depth", "3"]) is not None
    assert _direct.parse_direct(evaluate_cmd, ["--depth", "3", "-q", "x"]) is not None
    assert calls == [2, 4]
