"""Click chain model (CCM) (Guo, Liu, Kannan, Minka, Taylor, Wang & Faloutsos, WWW 2009)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from clickmodels.base import ByGrade, DocParam, Impressions, SpecReader, register
from clickmodels.cascade import Chain, ChainModel, _empty_one, _skip_fill

__all__ = ["CCM"]


@register("ccm")
@dataclass(frozen=True, eq=False)
class CCM(ChainModel):
    """Click chain model (Guo et al., WWW 2009; Chuklin et al. 2015, sec. 3.6).

    The attractiveness :math:`\\alpha` is also the relevance that decides whether the
    user goes on after a click:

    .. math::
        P(E_{r+1} \\mid E_r, C_r = 0) = \\tau_1,\\qquad
        P(E_{r+1} \\mid E_r, C_r = 1) = \\tau_2 (1 - \\alpha_r) + \\tau_3 \\alpha_r .

    Spec: ``{"name": "ccm", "click": [...], "tau1": .., "tau2": .., "tau3": ..}``.
    """

    attractiveness: DocParam
    tau1: float
    tau2: float
    tau3: float

    example_spec: ClassVar[Mapping[str, Any]] = {
        "name": "ccm", "click": [0.1, 0.3, 0.5, 0.7, 0.9], "tau1": 0.85, "tau2": 0.7, "tau3": 0.3
    }

    def __post_init__(self) -> None:
        for name in ("tau1", "tau2", "tau3"):
            v = float(getattr(self, name))
            if not (0.0 <= v <= 1.0):
                raise ValueError(f"{name} must be in [0, 1], got {v}")
            object.__setattr__(self, name, v)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> CCM:
        reader = SpecReader(spec, ("click", "tau1", "tau2", "tau3"))
        click = reader.vector("click")
        assert click is not None
        return cls(ByGrade(click), reader.number("tau1"), reader.number("tau2"), reader.number("tau3"))

    def _chain(self, imp: Impressions) -> Chain:
        a = self.attractiveness.lookup(imp)
        c1 = self.tau2 * (1.0 - a) + self.tau3 * a
        return Chain(a, c1, _skip_fill(np.full(imp.shape, self.tau1), imp))

    def _grade_chain(self, k: int) -> Chain | None:
        if not isinstance(self.attractiveness, ByGrade):
            return None
        a = self.attractiveness.table(0.0)
        c1 = self.tau2 * (1.0 - a) + self.tau3 * a
        return Chain(a, c1, _empty_one(np.full(a.shape, self.tau1)))
