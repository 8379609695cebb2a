"""Cascade-family models: the shared Markov-chain base, the cascade user and CM.

:class:`ChainModel` is the base of every model whose user scans top-down and decides to
go on after each rank (CM, cascade presets, DCM, CCM, DBN, SDBN, RBP and C/W/L users):
a subclass only maps a batch to the per-slot arrays ``(attract, cont_click, cont_skip)``
of :mod:`clickmodels.kernels`; sampling, exact probabilities and likelihoods follow.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import NDArray

from clickmodels import kernels
from clickmodels import presets as _presets
from clickmodels.base import (
    BoolArray,
    ByGrade,
    ClickModel,
    ClickSample,
    DocParam,
    FloatArray,
    Impressions,
    SpecReader,
    register,
)
from onlineeval.errors import ConfigError, must_be_one_of

__all__ = ["Chain", "ChainModel", "Cascade", "CM", "STOP_MODES", "cascade_preset"]

STOP_MODES = ("after_click", "every_rank")


class Chain(NamedTuple):
    """Per-slot arrays of the Markov cascade chain, each broadcastable to (n, k).

    ``attract`` must be 0 and ``cont_skip`` 1 in empty slots (the slot is passed over).
    """

    attract: NDArray[np.float64]
    cont_click: NDArray[np.float64]
    cont_skip: NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class ChainModel(ClickModel):
    """Base of Markov-cascade models; subclasses implement :meth:`_chain` only."""

    @abstractmethod
    def _chain(self, imp: Impressions) -> Chain:
        """Per-slot chain arrays for the batch (validated already)."""

    def _grade_chain(self, k: int) -> Chain | None:
        """Tables broadcastable to (k, G + 1) (rank, grade; last column for empty slots)
        when every chain parameter depends on grade and rank only, else ``None``; enables
        the fast sampler :func:`~clickmodels.kernels.chain_sample_grades`."""
        return None

    def _sample(self, imp: Impressions, rng: np.random.Generator) -> ClickSample:
        tables = self._grade_chain(imp.shape[1]) if imp.labels is not None and imp.docs is None else None
        if tables is not None:
            assert imp.labels is not None
            clicks, examined, exam = kernels.chain_sample_grades(imp.labels, *tables, rng)
            return ClickSample(clicks, exam, examined)
        ch = self._chain(imp)
        clicks, examined = kernels.chain_sample(ch.attract, ch.cont_click, ch.cont_skip, rng, imp.shape)
        valid = imp.valid
        exam = kernels.chain_examination(ch.attract, ch.cont_click, ch.cont_skip, imp.shape)
        exam[~valid] = 0.0
        examined &= valid
        return ClickSample(clicks, exam, examined)

    def _examination_probabilities(self, imp: Impressions) -> FloatArray:
        ch = self._chain(imp)
        exam = kernels.chain_examination(ch.attract, ch.cont_click, ch.cont_skip, imp.shape)
        exam[~imp.valid] = 0.0
        return exam

    def _click_probabilities(self, imp: Impressions) -> FloatArray:
        ch = self._chain(imp)
        exam = kernels.chain_examination(ch.attract, ch.cont_click, ch.cont_skip, imp.shape)
        return exam * np.broadcast_to(ch.attract, imp.shape)

    def _conditional_click_probabilities(self, imp: Impressions, clicks: BoolArray) -> FloatArray:
        ch = self._chain(imp)
        return kernels.chain_conditional(ch.attract, ch.cont_click, ch.cont_skip, clicks)

    def continuation_probabilities(self, batch: Any) -> FloatArray:
        """(n, k) :math:`P(E_{r+1} \\mid E_r)`: the implied C/W/L continuation C(r)."""
        imp = self._prepare(batch)
        ch = self._chain(imp)
        a = np.broadcast_to(ch.attract, imp.shape)
        return a * np.broadcast_to(ch.cont_click, imp.shape) + (1.0 - a) * np.broadcast_to(ch.cont_skip, imp.shape)


def _skip_fill(values: FloatArray, imp: Impressions) -> FloatArray:
    """``values`` with 1.0 in empty slots (an empty slot does not end the scan)."""
    valid = imp.valid
    if valid.all():
        return values
    return np.where(valid, values, 1.0)


def _empty_one(table: FloatArray) -> FloatArray:
    """A grade table with its empty-slot entry (the last) set to 1."""
    out = np.array(table, dtype=np.float64)
    out[-1] = 1.0
    return out


def cascade_preset(name: str, grades: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(click, stop)`` of a cascade preset for ``grades`` in {2, 3, 5} (see presets/cascade.json)."""
    data = _presets.load("cascade")["presets"]
    entry = data[name][str(grades)]
    return tuple(entry["click"]), tuple(entry["stop"])


def _cascade_tables(reader: SpecReader) -> tuple[ByGrade, ByGrade]:
    data = _presets.load("cascade")["presets"]
    if reader.has("preset"):
        if reader.has("click") or reader.has("stop"):
            key = "click" if reader.has("click") else "stop"
            raise ConfigError((key,), "give either 'preset' or 'click' and 'stop', not both")
        name = reader.raw("preset")
        if not isinstance(name, str) or name not in data:
            raise ConfigError(("preset",), f"unknown cascade preset {name!r}; allowed: {', '.join(data)}")
        grades = reader.raw("grades", 5)
        if str(grades) not in data[name] or isinstance(grades, bool):
            raise ConfigError(("grades",), f"preset {name!r} exists for grades {', '.join(data[name])}, got {grades!r}")
        click, stop = cascade_preset(name, int(grades))
        return ByGrade(click), ByGrade(stop)
    click = reader.vector("click")
    assert click is not None
    if reader.has("grades") and reader.raw("grades") != len(click):
        raise ConfigError(("grades",), f"must equal the length of 'click' ({len(click)}), got {reader.raw('grades')!r}")
    stop = reader.vector("stop", length=len(click))
    assert stop is not None
    return ByGrade(click), ByGrade(stop)


@register("cascade")
@dataclass(frozen=True, eq=False)
class Cascade(ChainModel):
    """Cascade user with per-grade click and stop probabilities.

    The user scans top-down and clicks an examined document with probability
    ``attractiveness``. With ``stop_mode="after_click"`` (default; Oosterhuis & de Rijke
    2018, and Guo et al. 2009's DCM-style satisfaction) the user stops with probability
    ``stop`` only after a click; with ``stop_mode="every_rank"`` the user stops with
    probability ``stop`` after every examined rank, clicked or not.

    .. math::
        P(E_{r+1}\\mid E_r, C_r) = \\begin{cases}1 - s(g_r) & C_r = 1\\\\
        1 \\text{ (after_click) or } 1 - s(g_r) \\text{ (every_rank)} & C_r = 0\\end{cases}

    Parameters
    ----------
    attractiveness:
        :math:`P(C_r = 1 \\mid E_r = 1)`, by grade or per (query, doc).
    stop:
        :math:`s`: probability of stopping (see ``stop_mode``).
    stop_mode:
        ``"after_click"`` or ``"every_rank"``.

    Spec: ``{"name": "cascade", "preset": "navigational", "grades": 5, "stop_mode": ...}``
    or ``{"name": "cascade", "click": [...], "stop": [...]}``.
    """

    attractiveness: DocParam
    stop: DocParam
    stop_mode: str = "after_click"

    example_spec: ClassVar[Mapping[str, Any]] = {"name": "cascade", "preset": "navigational"}

    def __post_init__(self) -> None:
        if self.stop_mode not in STOP_MODES:
            raise ValueError(must_be_one_of(STOP_MODES, self.stop_mode, "stop_mode"))

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Cascade:
        reader = SpecReader(spec, ("preset", "grades", "click", "stop", "stop_mode"))
        click, stop = _cascade_tables(reader)
        return cls(click, stop, reader.choice("stop_mode", STOP_MODES, "after_click"))

    def fit(self, log: Any, **options: Any) -> Cascade:
        """Fit to a click log: the ``after_click`` cascade is the SDBN, fitted as such.

        ``every_rank`` stopping has no estimator (its stop after a skip is not
        identifiable from clicks alone); it raises :class:`ConfigError`.
        """
        if self.stop_mode != "after_click":
            raise ConfigError(("stop_mode",), "only the after_click cascade can be fitted (it is the SDBN)")
        from clickmodels import estimation

        sdbn = estimation.fit("sdbn", log, **options)
        return Cascade(sdbn.attractiveness, sdbn.satisfaction, "after_click")

    def _chain(self, imp: Impressions) -> Chain:
        a = self.attractiveness.lookup(imp)
        go = 1.0 - self.stop.lookup(imp)
        if self.stop_mode == "after_click":
            return Chain(a, go, np.asarray(1.0))
        return Chain(a, go, _skip_fill(go, imp))

    def _grade_chain(self, k: int) -> Chain | None:
        if not (isinstance(self.attractiveness, ByGrade) and isinstance(self.stop, ByGrade)):
            return None
        a = self.attractiveness.table(0.0)
        go = 1.0 - self.stop.table(0.0)
        if self.stop_mode == "after_click":
            return Chain(a, go, np.ones_like(go))
        return Chain(a, go, _empty_one(go))


@register("cm")
@dataclass(frozen=True, eq=False)
class CM(ChainModel):
    """The cascade model (Craswell, Zoeter, Taylor & Ramsey, WSDM 2008).

    The user scans top-down, clicks an examined document with probability
    :math:`\\alpha`, and stops after the first click:

    .. math:: P(C_r = 1) = \\alpha_r \\prod_{i<r} (1 - \\alpha_i).

    Spec: ``{"name": "cm", "click": [...]}`` (attractiveness by grade).
    """

    attractiveness: DocParam

    example_spec: ClassVar[Mapping[str, Any]] = {"name": "cm", "click": [0.05, 0.3, 0.5, 0.7, 0.95]}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> CM:
        reader = SpecReader(spec, ("click",))
        click = reader.vector("click")
        assert click is not None
        return cls(ByGrade(click))

    def _chain(self, imp: Impressions) -> Chain:
        return Chain(self.attractiveness.lookup(imp), np.asarray(0.0), np.asarray(1.0))

    def _grade_chain(self, k: int) -> Chain | None:
        if not isinstance(self.attractiveness, ByGrade):
            return None
        a = self.attractiveness.table(0.0)
        return Chain(a, np.zeros_like(a), np.ones_like(a))
