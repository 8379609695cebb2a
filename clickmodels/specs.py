"""Reading a click model's spec (:mod:`clickmodels.base`, "Specs"): :class:`SpecReader`, with
:class:`~onlineeval.errors.ConfigError` key paths relative to the spec."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from onlineeval.errors import ConfigError, must_be_one_of


class SpecReader:
    """Reads a model spec (a mapping), raising :class:`ConfigError` with relative key paths.

    Parameters
    ----------
    spec:
        The mapping, e.g. ``{"name": "cascade", "click": [...], "stop": [...]}``.
    allowed:
        Keys this model accepts (besides ``name``); anything else is an error.
    """

    def __init__(self, spec: Mapping[str, Any], allowed: Sequence[str]) -> None:
        self.spec = spec
        self.allowed = ("name", *allowed)
        for key in spec:
            if key not in self.allowed:
                raise ConfigError(
                    (str(key),),
                    f"unknown key for click model {spec.get('name')!r}; allowed: {', '.join(self.allowed)}",
                )

    def has(self, key: str) -> bool:
        return key in self.spec and self.spec[key] is not None

    def raw(self, key: str, default: Any = None) -> Any:
        return self.spec.get(key, default)

    def number(
        self, key: str, default: float | None = None, lo: float = 0.0, hi: float = 1.0, what: str = "a probability"
    ) -> float:
        if key not in self.spec:
            if default is None:
                raise ConfigError((key,), f"is required ({what} in [{lo}, {hi}])")
            return default
        return _number(self.spec[key], (key,), lo, hi, what)

    def vector(
        self, key: str, length: int | None = None, lo: float = 0.0, hi: float = 1.0, required: bool = True
    ) -> tuple[float, ...] | None:
        if key not in self.spec:
            if required:
                raise ConfigError((key,), "is required (a list of probabilities in [0, 1])")
            return None
        value = self.spec[key]
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
            raise ConfigError((key,), f"must be a list of numbers in [{lo}, {hi}], got {value!r}")
        items = list(value)
        if not items:
            raise ConfigError((key,), "must not be empty")
        if length is not None and len(items) != length:
            raise ConfigError((key,), f"must have {length} entries (one per grade), got {len(items)}")
        return tuple(_number(v, (key, i), lo, hi, "a probability") for i, v in enumerate(items))

    def choice(self, key: str, options: Sequence[str], default: str) -> str:
        value = self.spec.get(key, default)
        if value not in options:
            raise ConfigError((key,), must_be_one_of(options, value))
        return str(value)

    def integer(self, key: str, default: int, lo: int = 1, hi: int | None = None) -> int:
        value = self.spec.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo \
                or (hi is not None and value > hi):
            band = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            raise ConfigError((key,), f"must be an integer {band}, got {value!r}")
        return int(value)


def _number(value: Any, path: tuple[str | int, ...], lo: float, hi: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(path, f"must be {what} in [{lo}, {hi}], got {value!r}")
    try:
        v = float(value)
    except OverflowError:  # an integer beyond float64's range
        raise ConfigError(path, f"must be {what} in [{lo}, {hi}], got {value!r}") from None
    if math.isnan(v) or not (lo <= v <= hi):
        raise ConfigError(path, f"must be {what} in [{lo}, {hi}], got {value!r}")
    return v
