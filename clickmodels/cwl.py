"""User models from offline metrics through C/W/L (Moffat et al. 2013, 2017; Azzopardi et al. 2018).

A C/W/L user examines rank 1 and goes on from rank :math:`i` to :math:`i+1` with
probability :math:`C(i)`; an examined document of grade :math:`g` is clicked with
probability ``click[g]`` (the attractiveness map). :math:`C(i)` may depend on the labels of
the ranking (RR, ERR, INST) but not on clicks, so the examination probabilities are

.. math:: P(E_i) = \\prod_{j<i} C(j), \\qquad W(i) = P(E_i) \\big/ \\textstyle\\sum_j P(E_j).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from clickmodels.base import ByGrade, DocParam, Impressions, SpecReader, register
from clickmodels.cascade import Chain, ChainModel, _empty_one, _skip_fill

__all__ = ["RBPUser"]


@register("rbp")
@dataclass(frozen=True, eq=False)
class RBPUser(ChainModel):
    """Rank-biased precision user (Moffat & Zobel, TOIS 2008): continue with probability ``p``.

    .. math:: P(E_i) = p^{i-1},\\qquad P(C_i) = p^{i-1}\\,\\mathrm{click}[g_i]

    Parameters
    ----------
    persistence:
        :math:`p` in [0, 1].
    attractiveness:
        Click probability of an examined document, by grade or per (query, doc).

    Spec: ``{"name": "rbp", "p": 0.8, "click": [...]}``.
    """

    persistence: float
    attractiveness: DocParam

    def __post_init__(self) -> None:
        if not (0.0 <= float(self.persistence) <= 1.0):
            raise ValueError(f"persistence must be in [0, 1], got {self.persistence}")
        object.__setattr__(self, "persistence", float(self.persistence))

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> RBPUser:
        reader = SpecReader(spec, ("p", "click"))
        p = reader.number("p")
        click = reader.vector("click")
        assert click is not None
        return cls(p, ByGrade(click))

    def _chain(self, imp: Impressions) -> Chain:
        cont = _skip_fill(np.full(imp.shape, self.persistence), imp)
        return Chain(self.attractiveness.lookup(imp), cont, cont)

    def _grade_chain(self) -> Chain | None:
        if not isinstance(self.attractiveness, ByGrade):
            return None
        a = self.attractiveness.table(0.0)
        cont = np.full(a.shape, self.persistence)
        return Chain(a, cont, _empty_one(cont))
