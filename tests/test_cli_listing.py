"""Review 12, F10: ``onlineeval list estimators|clickmodels|interleavers|metrics`` lists what a config or an
option can name, from the registries themselves (every registered name, the estimators' catalogue word for word),
and the CLI's help still imports none of them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app

runner = CliRunner()


def _json(what: str) -> list[dict]:
    res = runner.invoke(app, ["list", what, "--format", "json"], prog_name="onlineeval")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_estimators_are_the_catalogue() -> None:
    from onlineeval.estimators import available_estimators, catalogue

    records = _json("estimators")
    assert [r["name"] for r in records] == list(available_estimators())
    cat = catalogue()
    for r in records:
        assert {k: r[k] for k in ("assumption", "needs", "rewards", "self_normalised")} == cat[r["name"]]
    assert next(r for r in records if r["name"] == "clipped_ips")["options"] == {"cap": None}
    text = runner.invoke(app, ["list", "estimators"], prog_name="onlineeval").stdout
    flat = " ".join(text.split())
    for name, entry in cat.items():
        assert f"\n{name}\n" in text or f"\n{name}  (self-normalised)\n" in text
        assert " ".join(str(entry["assumption"]).split()) in flat  # wrapped, not cut


def test_clickmodels_are_the_registry_and_their_examples_build() -> None:
    import clickmodels

    from onlineeval.cli.clicks import FIT_MODELS

    records = _json("clickmodels")
    assert [r["name"] for r in records] == clickmodels.available()
    for r in records:
        assert r["description"] and "``" not in r["description"] and ":math:" not in r["description"]
        assert clickmodels.build(r["example"]).name == r["name"]  # the printed spec is a working one
        assert r["fit_as"] is None or r["fit_as"] in FIT_MODELS
    fit = {r["name"]: r["fit_as"] for r in records}
    assert fit["pbm"] == "pbm" and fit["cascade"] == "cm" and fit["rbp"] is None and fit["metric"] is None


def test_interleavers_are_the_registry_with_their_options() -> None:
    from onlineeval.interleaving import available_interleavers, get_interleaver

    records = _json("interleavers")
    assert [r["name"] for r in records] == list(available_interleavers())
    for r in records:
        get_interleaver(r["name"], **r["options"])  # every listed option and default is accepted
    balanced = next(r for r in records if r["name"] == "balanced")
    assert (balanced["min_rankers"], balanced["max_rankers"]) == (2, 2)
    text = runner.invoke(app, ["list", "interleavers"], prog_name="onlineeval").stdout
    assert "balanced\n  what: Balanced interleaving of two rankers.\n  rankers: 2\n  options: prefix_credit=True\n" \
        in text


def test_list_metrics_is_the_metrics_command() -> None:
    a = runner.invoke(app, ["list", "metrics"], prog_name="onlineeval")
    b = runner.invoke(app, ["metrics"], prog_name="onlineeval")
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout and "nDCG" in a.stdout


@pytest.mark.parametrize("what", ["estimators", "clickmodels", "interleavers"])
def test_unknown_format_is_one_line(what: str) -> None:
    res = runner.invoke(app, ["list", what, "--format", "xml"], prog_name="onlineeval")
    assert res.exit_code == 2 and res.stderr == "error: format: must be one of table, json; got 'xml'\n"


def test_help_imports_no_registry() -> None:
    """``--help`` of the root, of ``list`` and of a listing stays lazy: no registry, numpy or numba."""
    heavy = ("numpy", "numba", "scipy", "pandas", "clickmodels", "onlineeval.estimators", "onlineeval.interleaving")
    for args in (["--help"], ["list", "--help"], ["list", "estimators", "--help"]):
        code = ("import sys\nsys.argv = ['onlineeval', *sys.argv[1:]]\nfrom onlineeval.cli import main\n"
                "try:\n    main()\nexcept SystemExit:\n    pass\n"
                f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)")
        res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
        assert res.stderr.strip().splitlines()[-1] == "[]", (args, res.stderr)
        assert "Usage: onlineeval" in res.stdout


def test_list_metrics_marks_the_relevance_free_query_set() -> None:
    """The listing says which metrics' means are over every evaluated query (``Metric.relevance_free``) rather
    than the empty rule's queries, and says it for those alone: the mark follows the flag evaluate uses."""
    from onlineeval.metrics.base import REGISTRY

    records = json.loads(runner.invoke(app, ["list", "metrics", "--format", "json"], prog_name="onlineeval").stdout)
    assert {r["name"]: r["relevance_free"] for r in records} == {n: c.relevance_free for n, c in REGISTRY.items()}
    assert sum(r["relevance_free"] for r in records) >= 4
    text = runner.invoke(app, ["list", "metrics"], prog_name="onlineeval").stdout
    blocks = {b.split()[0]: b for b in text.split("\n\n")[1:]}
    for name, cls in REGISTRY.items():
        assert ("queries: every evaluated query" in blocks[name]) is cls.relevance_free, name
