"""The registry of interleaving methods: adding a method is one file with one decorator."""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

from onlineeval.errors import ConfigError
from onlineeval.interleaving.base import Interleaver

__all__ = ["available_interleavers", "get_interleaver", "interleaver_class", "register_interleaver"]

_REGISTRY: dict[str, type[Interleaver]] = {}

T = TypeVar("T", bound=type[Interleaver])


def register_interleaver(cls: T) -> T:
    """Class decorator: register ``cls`` under ``cls.name``."""
    name = cls.name
    if not name:
        raise ValueError(f"{cls.__name__} has no registry name")
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"interleaver name {name!r} is already registered by {_REGISTRY[name].__name__}")
    _REGISTRY[name] = cls
    return cls


def available_interleavers() -> tuple[str, ...]:
    """Names of all registered methods, sorted."""
    return tuple(sorted(_REGISTRY))


def interleaver_class(name: str) -> type[Interleaver]:
    """The class registered under ``name`` (``ConfigError`` listing the allowed names otherwise)."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ConfigError(("interleaver",), f"unknown interleaving method {name!r}; allowed: "
                          + ", ".join(available_interleavers()))
    return _REGISTRY[name]


def get_interleaver(name: str, **options: Any) -> Interleaver:
    """Build the method ``name`` with its options as keyword arguments.

    Raises
    ------
    ConfigError
        For an unknown name (the message lists the allowed names) or an unknown
        option (the message lists the method's options).
    """
    cls = interleaver_class(name)
    params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    allowed = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    for key in options:
        if key not in allowed:
            listed = ", ".join(sorted(allowed)) or "none"
            raise ConfigError(("interleaver", key), f"unknown option for {name!r}; allowed: {listed}")
    return cls(**options)
