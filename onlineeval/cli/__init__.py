"""The ``onlineeval`` command: one sub-command (or sub-app) per area.

Each area lives in its own module with a ``register(app)`` function:
``simulate`` (the main job), ``evaluate`` (offline metrics), ``metrics`` (the metric
names), ``validate``
(interleaving implementations), ``clicks`` (click models on logs), ``estimate``
(off-policy estimates from logged impressions) and ``power`` (sample size without simulating).
"""

from __future__ import annotations

import typer

from onlineeval import __version__

app = typer.Typer(
    name="onlineeval",
    help="Online-evaluation simulator and interleaving toolkit for rankers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"onlineeval {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Online-evaluation simulator and interleaving toolkit for rankers."""


def _register_all() -> None:
    from onlineeval.cli import (
        clicks,
        estimate,
        evaluate,
        metrics,
        power,
        simulate,
        validate,
    )

    for module in (simulate, evaluate, metrics, validate, clicks, estimate, power):
        module.register(app)


_register_all()


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
