"""`onlineeval evaluate` (being built; see the issue tracker)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's command(s) to the main app."""
