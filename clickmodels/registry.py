"""The registry of click-model families: ``name -> class``, filled by :func:`register` as the model modules load.

Below :mod:`clickmodels.base` (it imports no model code), so :mod:`clickmodels.estimation` finds a fitted
model's class here without importing the models' base module, which itself reaches up into estimation for
``ClickModel.fit`` and fitted specs. :mod:`clickmodels.base` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from onlineeval.errors import ConfigError

if TYPE_CHECKING:  # annotations only: no import at run time
    from clickmodels.base import ClickModel

__all__ = ["available", "model_class", "register"]

M = TypeVar("M", bound="ClickModel")

_REGISTRY: dict[str, type[ClickModel]] = {}


def register(name: str) -> Callable[[type[M]], type[M]]:
    """Class decorator: make a model buildable by ``build({"name": name, ...})``."""

    def deco(cls: type[M]) -> type[M]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"click model {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def available() -> list[str]:
    """Names of all registered click models, sorted."""
    return sorted(_REGISTRY)


def model_class(name: str) -> type[ClickModel]:
    """The registered class for ``name`` (``ConfigError`` listing the names if unknown)."""
    if name not in _REGISTRY:
        raise ConfigError(("name",), f"unknown click model {name!r}; available: {', '.join(available())}")
    return _REGISTRY[name]
