"""Help pages without a value placeholder after a flag.

typer 0.29 prints its type, ``<bool>``, after every flag (``--quiet <bool>``, ``--help <bool>``), which reads as
if the flag took a value; ``--quiet true`` then fails (``unexpected argument(s) 'true'``). :class:`RootGroup`, the
root command's class, gives every flag of every command below it, and every command's ``--help``, an empty
metavar, which typer prints as nothing. Options that take a value keep theirs (``<path>``, ``KEY=VALUE``).
"""

from __future__ import annotations

from typing import Any

from onlineeval.cli._usage import OneLineGroup, refuse_repeated_options

__all__ = ["RootGroup", "flags_without_metavar"]


def _is_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False)) and not getattr(param, "count", False)


def flags_without_metavar(command: Any) -> None:
    """Set an empty metavar on every flag of ``command`` and of the commands below it (and on their help
    options, which click makes when a help page or the parser first needs them)."""
    for param in getattr(command, "params", ()):
        if _is_flag(param) and param.metavar is None:
            param.metavar = ""
    make_help_option = getattr(command, "get_help_option", None)
    if make_help_option is not None and not getattr(make_help_option, "_flag_metavar", False):

        def get_help_option(ctx: Any) -> Any:
            option = make_help_option(ctx)
            if option is not None and option.metavar is None:
                option.metavar = ""
            return option

        get_help_option._flag_metavar = True  # type: ignore[attr-defined]
        command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        flags_without_metavar(sub)


class RootGroup(OneLineGroup):
    """:class:`~onlineeval.cli._usage.OneLineGroup` whose commands' flags show no value placeholder."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        flags_without_metavar(self)
        refuse_repeated_options(self)
