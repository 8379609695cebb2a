"""Versioned preset data files (JSON) for click models, each citing its source.

:func:`load` reads one family's file; the model classes turn its entries into parameters.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["load", "families"]

_FAMILIES = ("cascade", "pbm")


def families() -> tuple[str, ...]:
    """Families that have a preset file."""
    return _FAMILIES


@lru_cache(maxsize=None)
def _read(family: str) -> str:
    return resources.files(__name__).joinpath(f"{family}.json").read_text(encoding="utf-8")


def load(family: str) -> dict[str, Any]:
    """The parsed preset file of ``family`` (a fresh copy each call: callers may not mutate the cache)."""
    if family not in _FAMILIES:
        raise KeyError(f"no preset file for click-model family {family!r}; families: {', '.join(_FAMILIES)}")
    data: dict[str, Any] = json.loads(_read(family))
    return data
