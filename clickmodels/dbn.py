"""Dynamic Bayesian network (DBN) and simplified DBN (SDBN) (Chapelle & Zhang, WWW 2009)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from clickmodels.base import ByGrade, DocParam, Impressions, SpecReader, register
from clickmodels.cascade import Chain, ChainModel, _empty_one, _skip_fill

__all__ = ["DBN", "SDBN"]


def _tables(reader: SpecReader) -> tuple[ByGrade, ByGrade]:
    click = reader.vector("click")
    assert click is not None
    sat = reader.vector("satisfaction", length=len(click))
    assert sat is not None
    return ByGrade(click), ByGrade(sat)


@register("dbn")
@dataclass(frozen=True, eq=False)
class DBN(ChainModel):
    """Dynamic Bayesian network click model (Chapelle & Zhang, WWW 2009).

    An examined document is clicked with probability :math:`\\alpha` (attractiveness);
    after a click the user is satisfied with probability :math:`\\sigma` and stops; an
    unsatisfied user examines the next rank with probability :math:`\\gamma`
    (perseverance):

    .. math::
        P(E_{r+1} \\mid E_r, C_r = 1) = \\gamma (1 - \\sigma_r),\\qquad
        P(E_{r+1} \\mid E_r, C_r = 0) = \\gamma .

    Parameters
    ----------
    attractiveness, satisfaction:
        :math:`\\alpha` and :math:`\\sigma`, by grade or per (query, doc).
    gamma:
        :math:`\\gamma` in [0, 1].

    Spec: ``{"name": "dbn", "click": [...], "satisfaction": [...], "gamma": 0.9}``.
    """

    attractiveness: DocParam
    satisfaction: DocParam
    gamma: float

    example_spec: ClassVar[Mapping[str, Any]] = {
        "name": "dbn", "click": [0.1, 0.3, 0.5, 0.7, 0.9], "satisfaction": [0.05, 0.2, 0.4, 0.6, 0.8], "gamma": 0.8
    }

    def __post_init__(self) -> None:
        if not (0.0 <= float(self.gamma) <= 1.0):
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        object.__setattr__(self, "gamma", float(self.gamma))

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> DBN:
        reader = SpecReader(spec, ("click", "satisfaction", "gamma"))
        click, sat = _tables(reader)
        return cls(click, sat, reader.number("gamma"))

    def _chain(self, imp: Impressions) -> Chain:
        a = self.attractiveness.lookup(imp)
        c1 = self.gamma * (1.0 - self.satisfaction.lookup(imp))
        c0 = _skip_fill(np.full(imp.shape, self.gamma), imp)
        return Chain(a, c1, c0)

    def _grade_chain(self, k: int) -> Chain | None:
        if not (isinstance(self.attractiveness, ByGrade) and isinstance(self.satisfaction, ByGrade)):
            return None
        a = self.attractiveness.table(0.0)
        c1 = self.gamma * (1.0 - self.satisfaction.table(0.0))
        return Chain(a, c1, _empty_one(np.full(a.shape, self.gamma)))


@register("sdbn")
@dataclass(frozen=True, eq=False)
class SDBN(ChainModel):
    """Simplified DBN: the DBN with :math:`\\gamma = 1` (Chapelle & Zhang 2009, sec. 5).

    .. math::
        P(E_{r+1} \\mid E_r, C_r = 1) = 1 - \\sigma_r,\\qquad P(E_{r+1} \\mid E_r, C_r = 0) = 1 .

    Spec: ``{"name": "sdbn", "click": [...], "satisfaction": [...]}``.
    """

    attractiveness: DocParam
    satisfaction: DocParam

    example_spec: ClassVar[Mapping[str, Any]] = {
        "name": "sdbn", "click": [0.1, 0.3, 0.5, 0.7, 0.9], "satisfaction": [0.05, 0.2, 0.4, 0.6, 0.8]
    }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> SDBN:
        reader = SpecReader(spec, ("click", "satisfaction"))
        return cls(*_tables(reader))

    def _chain(self, imp: Impressions) -> Chain:
        return Chain(self.attractiveness.lookup(imp), 1.0 - self.satisfaction.lookup(imp), np.asarray(1.0))

    def _grade_chain(self, k: int) -> Chain | None:
        if not (isinstance(self.attractiveness, ByGrade) and isinstance(self.satisfaction, ByGrade)):
            return None
        a = self.attractiveness.table(0.0)
        return Chain(a, 1.0 - self.satisfaction.table(0.0), np.ones_like(a))
