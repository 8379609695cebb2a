"""Imports point down only. The command line is the outer layer: the library (onlineeval's packages, clickmodels,
simulations) and the Python API (:mod:`onlineeval.api`) never import :mod:`onlineeval.cli`. What both share (the
click-model fits' names and
options, evaluate's output frames, the estimate's warning lines, the number format) lives outside it; before, the
API imported ten helpers from the CLI's modules, so a change to a command's module could break the API. And the core
(onlineeval's packages but the CLI and the API, and
clickmodels) never imports the simulator: ``onlineeval estimate`` reads a log's logging policy through the policies
package its caller passes (``read_logged(path, policies=simulations.policies)``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def _cli(name: str) -> bool:
    return name == "onlineeval.cli" or name.startswith("onlineeval.cli.")


def test_the_library_and_the_api_never_import_the_cli() -> None:
    cli = ROOT / "onlineeval" / "cli"
    files = [p for pkg in ("onlineeval", "clickmodels", "simulations") for p in sorted((ROOT / pkg).rglob("*.py"))
             if cli not in p.parents]
    assert len(files) > 100
    bad = [f"{p.relative_to(ROOT)}:{line}: {name}" for p in files for line, name in _imports(p) if _cli(name)]
    assert not bad, "\n".join(bad)


def test_the_check_sees_every_form_of_importing_the_cli(tmp_path: Path) -> None:
    for line in ("from onlineeval.cli.clicks import fit_name", "import onlineeval.cli", "from onlineeval import cli",
                 "import onlineeval.cli.estimate as e"):
        path = tmp_path / "m.py"
        path.write_text(f"def f():\n    {line}\n")
        assert any(_cli(n) for _, n in _imports(path)), line
    path.write_text("from onlineeval.click_fits import fit_name\nfrom onlineeval import clickless\n")
    assert not any(_cli(n) for _, n in _imports(path))


def test_the_core_never_imports_the_simulator() -> None:
    top = [ROOT / "onlineeval" / "cli", ROOT / "onlineeval" / "api"]
    files = [p for pkg in ("onlineeval", "clickmodels") for p in sorted((ROOT / pkg).rglob("*.py"))
             if not any(t in p.parents for t in top)]
    assert len(files) > 100
    bad = [f"{p.relative_to(ROOT)}:{line}: {name}" for p in files for line, name in _imports(p)
           if name == "simulations" or name.startswith("simulations.")]
    assert not bad, "\n".join(bad)

