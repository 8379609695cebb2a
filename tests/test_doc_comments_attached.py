"""Every ``#:`` doc comment in the simulations package documents the assignment right below it (review 7, F5:
9165bb9 moved EXTRAPOLATION_FLAG to simulations/analysis.py and left its ``#:`` comment in simulations/report.py
attached to nothing; Sphinx autodoc and readers take a ``#:`` block for the next assignment's documentation)."""

from __future__ import annotations

import ast
from pathlib import Path

import simulations

PACKAGE = Path(simulations.__file__).parent


def _orphans(source: str) -> list[int]:
    """1-based lines ending a ``#:`` block whose next line does not start an assignment."""
    assigned = {n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Assign, ast.AnnAssign))}
    lines = source.splitlines()
    out = []
    for i, line in enumerate(lines, start=1):
        if line.lstrip().startswith("#:") and not (i < len(lines) and lines[i].lstrip().startswith("#:")):
            if i + 1 not in assigned:
                out.append(i)
    return out


def test_the_check_finds_an_orphaned_block() -> None:
    assert _orphans("#: documented\nX = 1\n") == []
    assert _orphans("#: a\n#: b\nY: int = 2\n") == []
    assert _orphans("#: attached to nothing\n\n\ndef f():\n    pass\n") == [1]


def test_no_orphaned_doc_comments_in_the_simulations_package() -> None:
    found = {str(p.relative_to(PACKAGE)): _orphans(p.read_text(encoding="utf-8")) for p in PACKAGE.rglob("*.py")}
    assert {k: v for k, v in found.items() if v} == {}
