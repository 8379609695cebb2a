"""Typer's usage errors (a bad, missing or unknown option, an unknown command) as one line and exit 2.

Every other error of the tool is one line ``error: ...`` on stderr and exit code 2
(:func:`onlineeval.cli._common.guarded`); without this module, an option value typer rejects
(``onlineeval power proportion --users 1``) printed typer's boxed usage panel. :class:`OneLineGroup`,
the root command's class, catches click's ``UsageError`` (and its subclasses ``BadParameter``,
``MissingParameter``, ``NoSuchOption``, ``BadOptionUsage``) wherever it is raised below the root,
prints one line naming the option as the user typed it (and a rejected value, as the config errors do),
and exits with the error's code (2)::

    error: --users: must be at least 2, got 1
    error: --users: must be an integer, got 2.5
    error: --log: required, not given (see 'onlineeval estimate --help')
    error: --bogus: no such option for 'onlineeval power proportion' (did you mean --baseline?)

``onlineeval`` and a group run without a command still print their help (click's ``NoArgsIsHelpError``).
Newer typer releases carry their own copy of click (``typer._click``), older ones use click itself: the
exceptions come from whichever the installed typer uses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from onlineeval.errors import must_be

try:  # typer >= 0.2x: its own copy of click
    from typer._click import exceptions as _click_exceptions
except ImportError:  # pragma: no cover - older typer on click itself
    from click import exceptions as _click_exceptions  # type: ignore[no-redef]

__all__ = ["OneLineGroup", "refuse_repeated_options", "repeated_option", "usage_message"]

_UsageError = _click_exceptions.UsageError
# click >= 8.2 raises it for a group run without arguments; it prints the help, not an error
_NoArgsIsHelp: tuple[type, ...] = tuple(
    c for c in (getattr(_click_exceptions, "NoArgsIsHelpError", None),) if c is not None
)
_ARGV = "onlineeval.argv"  # ctx.meta key: the arguments the root command was given


def _got(value: Any) -> str:
    """The value typed: a number as typed, anything else quoted (``2.5``, ``'x'``, ``''``)."""
    text = str(value)
    try:
        float(text)
    except ValueError:
        return repr(text)
    return text if text == text.strip() else repr(text)


# pydantic error types (typer >= 0.2x validates option values with pydantic) and what they say
def _lower_first(text: str) -> str:
    """A click or pydantic sentence as the rest of a one-line error: lower-case start, no final full stop,
    "input should be" said as "must be"."""
    text = text.strip().rstrip(".")
    text = re.sub(r"^(?:Input|Value) should be\b", "must be", text, flags=re.IGNORECASE)
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _bad_value(exc: Any) -> str:
    """What is wrong with a rejected value, from pydantic's first error when typer gives it (the bound or
    kind and the value typed), else click's own sentence."""
    errors = getattr(exc.__cause__, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (IndexError, TypeError, ValueError):  # pragma: no cover - an error without details
            first = None
        if first is not None:
            kind, ctx = first.get("type", ""), first.get("ctx") or {}
            got = f", got {_got(first['input'])}" if "input" in first else ""
            return must_be(kind, ctx, got) or f"{_lower_first(str(first.get('msg', exc.message)))}{got}"
    return _lower_first(exc.message)


def _typed_name(param: Any, argv: Sequence[str]) -> str:
    """The name of ``param`` as the user typed it (``-l`` or ``--log``), else its main (longest) name; an
    argument's metavar."""
    names = [*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())]
    if getattr(param, "param_type_name", "") != "option" or not names:
        return str(param.human_readable_name)
    for token in argv:
        if token == "--":
            break
        if token.startswith("--"):
            head = token.partition("=")[0]
            if head in names:
                return head
        elif token.startswith("-") and token[:2] in names:
            return token[:2]
    return max(names, key=len)


def _commands(ctx: Any) -> list[str]:
    command = getattr(ctx, "command", None)
    if command is None or not hasattr(command, "list_commands"):
        return []
    return [name for name in command.list_commands(ctx) if not getattr(command.get_command(ctx, name), "hidden", 0)]


def _command_path(ctx: Any, argv: Sequence[str]) -> str:
    """The command the user ran: ``ctx``'s, or a deeper one named in ``argv`` (click's option parser raises
    its errors before the sub-command's context exists, with the parent's)."""
    if ctx is None:
        return "onlineeval"
    path, command = [ctx.command_path], ctx.command
    words = [token for token in argv if not token.startswith("-")]
    start = ctx.command_path.count(" ")  # the words of argv already in ctx's path
    for word in words[start:]:
        sub = command.get_command(ctx, word) if hasattr(command, "get_command") else None
        if sub is None:
            break
        path.append(word)
        command = sub
    return " ".join(path)


def usage_message(exc: Any, argv: Sequence[str] = (), root: Any = None) -> str:
    """The one line (without ``error: ``) for a click usage error ``exc`` of a run given ``argv``; ``root``:
    the root command's context, for an error raised without one (by click's option parser)."""
    ctx = exc.ctx if exc.ctx is not None else root
    path = _command_path(ctx, argv)
    see = f"see '{path} --help'"
    if isinstance(exc, _click_exceptions.NoSuchOption):
        text = f"{exc.option_name}: no such option for '{path}'"
        # click's close matches, but --help (every command has it, and a mistyped option is never it: '--p1' was
        # answered 'did you mean --help?')
        close = sorted(p for p in exc.possibilities or () if p != "--help")
        if close:
            return f"{text} (did you mean {' or '.join(close)}?)"
        commands = _commands(ctx)
        if commands:
            return f"{text}; give a command first: {', '.join(commands)}"
        return f"{text} ({see})"
    if isinstance(exc, _click_exceptions.BadOptionUsage):
        said = re.fullmatch(r"Option '.*?' (.*?)\.?", exc.message)  # "requires an argument", "does not take a value"
        what = _lower_first(said.group(1) if said else exc.message).replace("requires an argument", "needs a value")
        return f"{exc.option_name}: {what} ({see})"
    if isinstance(exc, _click_exceptions.MissingParameter) and exc.param is not None:
        return f"{_typed_name(exc.param, argv)}: required, not given ({see})"
    if isinstance(exc, _click_exceptions.BadParameter):
        if exc.param is not None:
            return f"{_typed_name(exc.param, argv)}: {_bad_value(exc)}"
        hint = f"{exc.param_hint}: " if isinstance(exc.param_hint, str) else ""
        return f"{hint}{_bad_value(exc)}"
    unknown = re.fullmatch(r"No such command '(.*?)'\.?(?:\s*Did you mean (.*?)\?)?", exc.message, re.S)
    if unknown:  # click adds 'Did you mean ...?' in sub-groups: the same line, with the guess
        commands = _commands(ctx)
        guess = f" (did you mean {unknown.group(2)}?)" if unknown.group(2) else ""
        listed = f"; commands: {', '.join(commands)}" if commands else f" ({see})"
        return f"no such command '{unknown.group(1)}' for '{path}'{guess}{listed}"
    extra = re.fullmatch(r"Got unexpected extra arguments?(?:\(s\))? \((.*)\)\.?", exc.message)
    if extra:
        return f"unexpected argument(s) {extra.group(1)!r} ({see})"
    return f"{_lower_first(exc.message)} ({see})"


def repeated_option(command: Any, args: Sequence[str]) -> tuple[str, str, str] | None:
    """The first option of ``command`` that ``args`` (its own arguments) give twice though it takes one value, as
    ``(name as typed the second time, first value, second value)``, or ``None``. click keeps the last silently
    (``--estimator snips --estimator ips`` estimated ips alone; ``--qrels a --qrels b`` read b). Repeatable
    options (``--target``, ``--run``, ``--set``) and counters are not checked; the scan stops at ``--``."""
    names: dict[str, Any] = {}
    for param in getattr(command, "params", ()):
        if getattr(param, "param_type_name", "") != "option" or getattr(param, "multiple", False) \
                or getattr(param, "count", False):
            continue
        for name in (*param.opts, *param.secondary_opts):
            names[name] = param
    seen: dict[int, str] = {}
    i = 0
    while i < len(args):
        token = str(args[i])
        i += 1
        if token == "--":
            break
        if not token.startswith("-") or token == "-":
            continue
        head, eq, value = token.partition("=") if token.startswith("--") else (token[:2], "", token[2:])
        param = names.get(head)
        if param is None:
            continue
        takes_value = not getattr(param, "is_flag", False)
        if takes_value and not eq and not value:
            value = str(args[i]) if i < len(args) else ""
            i += 1
        shown = value if takes_value else head
        if id(param) in seen:
            return head, seen[id(param)], shown
        seen[id(param)] = shown
    return None


def refuse_repeated_options(command: Any) -> None:
    """Make every command below ``command`` refuse an option given twice that takes one value
    (:func:`repeated_option`): a usage error, one line (``error: --estimator: given twice ...``)."""
    subs = getattr(command, "commands", None)
    if subs is not None:
        for sub in subs.values():
            refuse_repeated_options(sub)
        return
    if getattr(command.parse_args, "_refuses_repeats", False):
        return
    parse = command.parse_args

    def parse_args(ctx: Any, args: list[str]) -> Any:
        found = repeated_option(command, args)
        if found is not None:
            name, first, second = found
            raise _click_exceptions.BadOptionUsage(
                name, f"given twice ({first!r} and {second!r}) but takes one value; give it once (the later "
                "would replace the earlier)", ctx=ctx)
        return parse(ctx, args)

    parse_args._refuses_repeats = True  # type: ignore[attr-defined]
    command.parse_args = parse_args


def _report(exc: Any, argv: Sequence[str], root: Any = None) -> typer.Exit:
    typer.echo(f"error: {usage_message(exc, argv, root)}", err=True)
    return typer.Exit(exc.exit_code)


class OneLineGroup(TyperGroup):
    """The root command: a usage error anywhere below it is one line on stderr and its exit code (2)."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        argv = list(args)
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except _UsageError as exc:
            if isinstance(exc, _NoArgsIsHelp):
                raise
            raise _report(exc, argv) from None
        ctx.meta[_ARGV] = argv
        return ctx

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as exc:
            if isinstance(exc, _NoArgsIsHelp):
                raise
            raise _report(exc, ctx.meta.get(_ARGV, ()), ctx) from None
