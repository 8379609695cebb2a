"""The ``onlineeval`` command: one sub-command (or sub-app) per area.

Each area lives in its own module with a ``register(app)`` function:
``simulate`` (the main job), ``evaluate`` (offline metrics), ``metrics`` (the metric
names), ``validate``
(interleaving implementations), ``clicks`` (click models on logs), ``estimate``
(off-policy estimates from logged impressions), ``power`` (sample size without simulating),
``sweep`` (a config at many points) and ``list`` (the estimators, click models, interleaving
methods and metrics a config or option can name).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import typer

__all__ = ["app", "main"]

_APP: typer.Typer | None = None


def _version_callback(value: bool) -> None:
    import typer

    from onlineeval import __version__

    if value:
        typer.echo(f"onlineeval {__version__}")
        raise typer.Exit()


def _build_app() -> typer.Typer:
    """The typer app with every area registered (built on first use: ``evaluate``'s direct
    path in :func:`main` never needs it)."""
    import typer

    from onlineeval.cli import (
        clicks,
        estimate,
        evaluate,
        listing,
        metrics,
        power,
        simulate,
        sweep,
        validate,
    )
    from onlineeval.cli._help import RootGroup

    app = typer.Typer(
        # usage errors (a bad, missing or unknown option) as one line and exit 2; flags without '<bool>' in --help
        cls=RootGroup,
        name="onlineeval",
        help="Online-evaluation simulator and interleaving toolkit for rankers.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(
            False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
        ),
    ) -> None:
        """Online-evaluation simulator and interleaving toolkit for rankers."""

    for module in (simulate, evaluate, metrics, validate, clicks, estimate, power, sweep, listing):
        module.register(app)
    return app


def __getattr__(name: str) -> Any:
    global _APP
    if name == "app":
        if _APP is None:
            _APP = _build_app()
        return _APP
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point.

    ``onlineeval evaluate`` and ``onlineeval power ...`` with plain options (the common case)
    are parsed directly and skip building the whole typer app (its per-option validators
    import pydantic; :mod:`onlineeval.cli._direct`); anything else (``--help``, an unknown or
    malformed option) goes through typer.
    """
    argv = sys.argv[1:]
    if argv[:1] == ["evaluate"]:
        from onlineeval.cli.evaluate import run_direct

        if run_direct(argv[1:]):
            return
    if argv[:1] == ["power"] and len(argv) > 1:
        from onlineeval.cli import _direct
        from onlineeval.cli.power import COMMANDS

        command = COMMANDS.get(argv[1])
        if command is not None and _direct.run_direct(command, argv[2:]):
            return
    __getattr__("app")()
