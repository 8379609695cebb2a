"""Dependent click model (DCM) (Guo, Liu & Wang, WSDM 2009)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from clickmodels.base import ByGrade, DocParam, Impressions, SpecReader, check_depth, frozen_array, register
from clickmodels.cascade import Chain, ChainModel

__all__ = ["DCM"]


@register("dcm")
@dataclass(frozen=True, eq=False)
class DCM(ChainModel):
    """Dependent click model (Guo, Liu & Wang, WSDM 2009).

    A cascade in which the user may go on after a click: after a click at rank
    :math:`r` the next rank is examined with probability :math:`\\lambda_r`; after no
    click it always is.

    .. math::
        P(E_{r+1} \\mid E_r, C_r = 1) = \\lambda_r,\\qquad P(E_{r+1} \\mid E_r, C_r = 0) = 1

    Parameters
    ----------
    attractiveness:
        :math:`\\alpha`, by grade or per (query, doc).
    continuation:
        :math:`\\lambda` (K,) by rank (batches may have k <= K).

    Spec: ``{"name": "dcm", "click": [...], "continuation": [... one per rank]}``.
    """

    attractiveness: DocParam
    continuation: NDArray[np.float64]

    example_spec: ClassVar[Mapping[str, Any]] = {
        "name": "dcm", "click": [0.1, 0.3, 0.5, 0.7, 0.9],
        "continuation": [0.6, 0.65, 0.7, 0.75, 0.8, 0.8, 0.85, 0.85, 0.9, 0.9]
    }

    def __post_init__(self) -> None:
        lam = frozen_array(self.continuation)
        if lam.ndim != 1 or lam.size == 0 or np.any(~(lam >= 0)) or np.any(lam > 1):
            raise ValueError("DCM continuation must be a non-empty 1-d array of probabilities")
        object.__setattr__(self, "continuation", lam)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> DCM:
        reader = SpecReader(spec, ("click", "continuation"))
        click = reader.vector("click")
        lam = reader.vector("continuation")
        assert click is not None and lam is not None
        return cls(ByGrade(click), np.asarray(lam))

    def _check(self, imp: Impressions) -> None:
        super()._check(imp)
        check_depth(imp, self.continuation.size, "dcm.continuation")

    def _chain(self, imp: Impressions) -> Chain:
        k = imp.shape[1]
        return Chain(self.attractiveness.lookup(imp), self.continuation[None, :k], np.asarray(1.0))

    def _grade_chain(self, k: int) -> Chain | None:
        if not isinstance(self.attractiveness, ByGrade):
            return None
        a = self.attractiveness.table(0.0)
        return Chain(a, self.continuation[:k, None], np.ones_like(a))
