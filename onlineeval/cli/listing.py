"""``onlineeval list estimators|clickmodels|interleavers|metrics``: what a name in a config or an option can be.

Each listing reads its registry (the same one configs and options are checked against) and prints one entry per
name: for estimators the propensities they need, the rewards they support, their options and the assumption they
rest on (:func:`onlineeval.estimators.catalogue`); for click models the first line of the model's description and
a spec that builds it (``users.click_model``; ``onlineeval clicks fit --model`` for those it fits); for
interleaving methods the number of rankers, the options with their defaults and a one-line description
(``designs[].method``). ``--format json`` gives the same records as a JSON list. ``onlineeval list metrics`` is
``onlineeval metrics``. The registries are imported in the command, not when the CLI loads (``--help`` stays
quick).

Example::

    onlineeval list estimators
    onlineeval list clickmodels --format json
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from collections.abc import Callable
from typing import Annotated, Any

import typer

from onlineeval.cli._common import guarded

__all__ = ["describe_clickmodels", "describe_estimators", "describe_interleavers", "register"]

FORMATS = ("table", "json")
WIDTH = 100  # columns of the wrapped text lines


def _first_line(doc: str | None) -> str:
    """A docstring's first paragraph on one line, without reStructuredText markup (``x``, :math:`x`,
    :class:`x`)."""
    paragraph = (doc or "").strip().split("\n\n")[0]
    text = " ".join(paragraph.split())
    text = re.sub(r":(?:math|class|func|mod|data|attr|meth):`~?([^`]*)`", r"\1", text)
    return text.replace("``", "").replace("\\", "")


def _options(init: Callable[..., Any]) -> dict[str, Any]:
    """A constructor's keyword options and their defaults (``None`` for a required one)."""
    params = inspect.signature(init).parameters.values()
    return {p.name: (None if p.default is inspect.Parameter.empty else p.default)
            for p in params if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def describe_estimators() -> list[dict[str, Any]]:
    """One record per registered off-policy estimator: name, assumption, needed propensities, rewards,
    self-normalisation and options (default; ``None`` where the estimator decides or requires one)."""
    from onlineeval.estimators import catalogue, estimator_class

    return [{"name": name, **entry, "options": _options(estimator_class(name).__init__)}
            for name, entry in catalogue().items()]


def describe_clickmodels() -> list[dict[str, Any]]:
    """One record per registered click model: name, description, an example spec and whether ``onlineeval
    clicks fit`` fits it (the name to give ``--model``)."""
    import clickmodels

    from onlineeval.cli.clicks import FIT_MODELS

    fitted = {alias: name for name, (_, aliases) in FIT_MODELS.items() for alias in (name, *aliases)}
    out = []
    for name in clickmodels.available():
        cls = clickmodels.model_class(name)
        out.append({"name": name, "description": _first_line(cls.__doc__), "example": dict(cls.example_spec),
                    "fit_as": fitted.get(name)})
    return out


def describe_interleavers() -> list[dict[str, Any]]:
    """One record per registered interleaving method: name, description, rankers (min, max; ``None``: no
    maximum) and options with their defaults."""
    from onlineeval.interleaving import available_interleavers, interleaver_class

    out = []
    for name in available_interleavers():
        cls = interleaver_class(name)
        out.append({"name": name, "description": _first_line(cls.__doc__),
                    "min_rankers": getattr(cls, "min_rankers", 2), "max_rankers": getattr(cls, "max_rankers", None),
                    "options": _options(cls.__init__)})
    return out


def _wrapped(label: str, text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=f"  {label}: ", subsequent_indent=" " * (len(label) + 4))


def _estimator_lines(records: list[dict[str, Any]]) -> list[str]:
    lines = ["Off-policy estimators: designs[].estimators in a simulate config, --estimator of onlineeval estimate",
             "(options as {name: clipped_ips, cap: 5}, or --option clipped_ips.cap=5)."]
    for r in records:
        lines += ["", r["name"] + ("  (self-normalised)" if r["self_normalised"] else "")]
        lines += _wrapped("logging propensities", ", ".join(r["needs"]) or "none")
        lines += _wrapped("rewards", ", ".join(r["rewards"]))
        if r["options"]:
            lines += _wrapped("options", ", ".join(f"{k}={_value(v)}" for k, v in r["options"].items()))
        lines += _wrapped("assumes", str(r["assumption"]))
    return lines


def _clickmodel_lines(records: list[dict[str, Any]]) -> list[str]:
    lines = ["Click models: users.click_model in a simulate config ({name: ..., ...}); 'fit' gives the name for",
             "onlineeval clicks fit --model."]
    for r in records:
        lines += ["", r["name"], *_wrapped("what", r["description"])]
        lines += _wrapped("example", _value(r["example"]))
        if r["fit_as"]:
            lines += _wrapped("fit", f"--model {r['fit_as']}")
    return lines


def _interleaver_lines(records: list[dict[str, Any]]) -> list[str]:
    lines = ["Interleaving and multileaving methods: designs[].method in a simulate config (options as",
             "designs[].options), onlineeval validate --method."]
    for r in records:
        most = r["max_rankers"]
        rankers = f"{r['min_rankers']}" if most == r["min_rankers"] else (
            f"{r['min_rankers']} or more" if most is None else f"{r['min_rankers']} to {most}")
        lines += ["", r["name"], *_wrapped("what", r["description"]), *_wrapped("rankers", rankers)]
        if r["options"]:
            lines += _wrapped("options", ", ".join(f"{k}={_value(v)}" for k, v in r["options"].items()))
    return lines


def _check_format(output_format: str) -> None:
    """Refuse an unknown ``--format`` before the registry's imports."""
    from onlineeval.errors import ConfigError, must_be_one_of

    if output_format not in FORMATS:
        raise ConfigError(("format",), must_be_one_of(FORMATS, output_format))


def _emit(output_format: str, records: list[dict[str, Any]], lines: Callable[[list[dict[str, Any]]], list[str]]) \
        -> None:
    if output_format == "json":
        typer.echo(json.dumps(records, indent=2, default=lambda v: list(v) if isinstance(v, tuple) else str(v)))
    else:
        typer.echo("\n".join(lines(records)))


FormatOption = Annotated[str, typer.Option("--format", "-f", help="table or json.")]


@guarded
def estimators_cmd(output_format: FormatOption = "table") -> None:
    """List the off-policy estimators: propensities needed, rewards, options and the assumption of each."""
    _check_format(output_format)
    _emit(output_format, describe_estimators(), _estimator_lines)


@guarded
def clickmodels_cmd(output_format: FormatOption = "table") -> None:
    """List the click models: what each is, an example spec, and the name clicks fit takes."""
    _check_format(output_format)
    _emit(output_format, describe_clickmodels(), _clickmodel_lines)


@guarded
def interleavers_cmd(output_format: FormatOption = "table") -> None:
    """List the interleaving and multileaving methods: rankers, options and defaults."""
    _check_format(output_format)
    _emit(output_format, describe_interleavers(), _interleaver_lines)


def register(app: typer.Typer) -> None:
    """Add the ``list`` group (estimators, clickmodels, interleavers, metrics) to the main app."""
    from onlineeval.cli.metrics import metrics_cmd

    group = typer.Typer(
        name="list",
        help="List the names a config or option takes: estimators, clickmodels, interleavers, metrics.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    group.command("estimators")(estimators_cmd)
    group.command("clickmodels")(clickmodels_cmd)
    group.command("interleavers")(interleavers_cmd)
    group.command("metrics")(metrics_cmd)
    app.add_typer(group, name="list")
