"""``onlineeval metrics``: every metric with its parameters, defaults, aliases and the
trec_eval / ir_measures names that translate to it.

Example::

    onlineeval metrics
    onlineeval metrics --format json
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from onlineeval.cli._common import guarded

FORMATS = ("table", "json")


def describe_metrics() -> list[dict[str, Any]]:
    """One record per registered metric: name, description, cut-off rule, parameters
    (name, default, type), aliases, whether it is relevance-free (its mean over every evaluated
    query, not the ``empty`` rule's), the foreign names that map to it and an example."""
    import dataclasses

    from onlineeval.metrics import REGISTRY
    from onlineeval.metrics.names import external_names

    out: list[dict[str, Any]] = []
    for name in sorted(REGISTRY, key=str.lower):
        cls = REGISTRY[name]
        doc = [_plain(line) for line in (cls.__doc__ or "").strip().splitlines()]
        params = [
            {"name": f.name, "default": f.default, "type": type(f.default).__name__ if f.default is not None else "any"}
            for f in dataclasses.fields(cls)
            if f.name != "k"
        ]
        cutoff = {"optional": "optional @k", "required": "required @k", "none": "no @k"}[cls.cutoff]
        example = name + ("@10" if cls.cutoff == "required" else "")
        out.append(
            {
                "name": name,
                "description": doc[0] if doc else "",
                "cutoff": cutoff,
                "parameters": params,
                "aliases": list(cls.aliases),
                "relevance_free": bool(cls.relevance_free),
                **external_names(name),
                "example": example,
            }
        )
    return out


def _plain(text: str) -> str:
    """A docstring line without reStructuredText markup (``x``, :math:`x`)."""
    import re

    text = re.sub(r"\\(bigl|bigr|left|right)", "", text)
    return re.sub(r":math:`([^`]*)`", r"\1", text).replace("``", "").replace("\\", "")


def _default(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return "(" + ",".join(_default(v) for v in value) + ")"
    return repr(value) if isinstance(value, str) else str(value)


@guarded
def metrics_cmd(
    output_format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """List every metric with its parameters, defaults, aliases and trec_eval / ir_measures names."""
    from onlineeval.errors import ConfigError, must_be_one_of

    if output_format not in FORMATS:
        raise ConfigError(("format",), must_be_one_of(FORMATS, output_format))
    records = describe_metrics()
    if output_format == "json":
        typer.echo(json.dumps(records, indent=2, default=lambda v: list(v) if isinstance(v, tuple) else str(v)))
        return
    lines = [
        "Metrics for --metrics (names are case-insensitive; parameters by name, e.g. RBP(p=0.9)@20).",
        "trec_eval and ir_measures names are translated and the output says so; ir_measures' rel=r is the",
        "relevance threshold, one convention (rel_min, --rel-min) for a whole evaluation.",
        "Queries: a metric's mean is over the queries the empty rule (--empty) counts, but a relevance-free",
        "metric's (marked 'every evaluated query') is over every evaluated query: it needs no relevant document.",
    ]
    for r in records:
        lines.append("")
        lines.append(f"{r['name']}  [{r['cutoff']}]  {r['description']}")
        if r["parameters"]:
            lines.append("  parameters: " + ", ".join(f"{p['name']}={_default(p['default'])}" for p in r["parameters"]))
        if r["relevance_free"]:
            lines.append("  queries: every evaluated query (relevance-free: kept under --empty exclude)")
        if r["aliases"]:
            lines.append("  aliases: " + ", ".join(r["aliases"]))
        if r["trec_eval"]:
            lines.append("  trec_eval: " + ", ".join(r["trec_eval"]))
        if r["ir_measures"]:
            lines.append("  ir_measures: " + ", ".join(r["ir_measures"]))
    typer.echo("\n".join(lines))


def register(app: typer.Typer) -> None:
    """Add the ``metrics`` command to the main app."""
    app.command("metrics")(metrics_cmd)
