"""Baseline click models: random clicks and click-through rates (global, by rank, by document).

These are the reference points of click-model evaluation (Chuklin, Markov & de Rijke
2015, sec. 3.1): every slot is "examined" (examination probability 1 on non-empty
slots) and clicked independently with the model's click probability.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from clickmodels.base import (
    ByGrade,
    DocParam,
    FloatArray,
    Impressions,
    SpecReader,
    check_depth,
    frozen_array,
    register,
)
from clickmodels.pbm import IndependentModel, _rank_row

__all__ = ["RandomClicks", "GlobalCTR", "RankCTR", "DocumentCTR"]


def _ones(imp: Impressions) -> FloatArray:
    return imp.valid.astype(np.float64)


@register("random")
@dataclass(frozen=True, eq=False)
class RandomClicks(IndependentModel):
    """Random clicks: every non-empty slot is clicked with probability ``p`` (default 0.5).

    Spec: ``{"name": "random", "p": 0.5}``.
    """

    p: float = 0.5

    example_spec: ClassVar[Mapping[str, Any]] = {"name": "random", "p": 0.5}

    def __post_init__(self) -> None:
        if not (0.0 <= float(self.p) <= 1.0):
            raise ValueError(f"p must be in [0, 1], got {self.p}")
        object.__setattr__(self, "p", float(self.p))

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> RandomClicks:
        return cls(SpecReader(spec, ("p",)).number("p", 0.5))

    def _probs(self, imp: Impressions) -> tuple[FloatArray, FloatArray]:
        e = _ones(imp)
        return e, e * self.p

    def _grade_tables(self, k: int, width: int) -> tuple[FloatArray, FloatArray] | None:
        table = np.full(width, self.p)
        table[-1] = 0.0
        return np.ones(k), table


@register("gctr")
@dataclass(frozen=True, eq=False)
class GlobalCTR(RandomClicks):
    """Global CTR: one click probability for every slot, estimated as the overall CTR.

    Same sampling as :class:`RandomClicks`; differs in fitting (``p`` = clicks / slots).
    Spec: ``{"name": "gctr", "p": 0.1}``.
    """

    example_spec: ClassVar[Mapping[str, Any]] = {"name": "gctr", "p": 0.12}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> GlobalCTR:
        return cls(SpecReader(spec, ("p",)).number("p"))


@register("rctr")
@dataclass(frozen=True, eq=False)
class RankCTR(IndependentModel):
    """Rank CTR: click probability by rank, :math:`P(C_r = 1) = \\rho_r`.

    Spec: ``{"name": "rctr", "p": [... one per rank]}``.
    """

    p: NDArray[np.float64]

    example_spec: ClassVar[Mapping[str, Any]] = {
        "name": "rctr", "p": [0.4, 0.2, 0.12, 0.08, 0.06, 0.05, 0.04, 0.03, 0.03, 0.02]}

    def __post_init__(self) -> None:
        p = frozen_array(self.p)
        if p.ndim != 1 or p.size == 0 or np.any(~(p >= 0)) or np.any(p > 1):
            raise ValueError("RankCTR p must be a non-empty 1-d array of probabilities")
        object.__setattr__(self, "p", p)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> RankCTR:
        p = SpecReader(spec, ("p",)).vector("p")
        assert p is not None
        return cls(np.asarray(p))

    def _check(self, imp: Impressions) -> None:
        super()._check(imp)
        check_depth(imp, self.p.size, "rctr.p")

    def _probs(self, imp: Impressions) -> tuple[FloatArray, FloatArray]:
        valid = imp.valid
        return _ones(imp), _rank_row(self.p, valid)

    def _grade_tables(self, k: int, width: int) -> tuple[FloatArray, FloatArray] | None:
        table = np.repeat(self.p[:k, None], width, axis=1)
        table[:, -1] = 0.0
        return np.ones(k), table


@register("dctr")
@dataclass(frozen=True, eq=False)
class DocumentCTR(IndependentModel):
    """Document CTR: click probability per document (by grade or per (query, doc)).

    :math:`P(C_r = 1) = \\rho_{q d_r}`, whatever the rank. Spec: ``{"name": "dctr", "click": [...]}``.
    """

    attractiveness: DocParam

    example_spec: ClassVar[Mapping[str, Any]] = {"name": "dctr", "click": [0.02, 0.1, 0.3, 0.5, 0.7]}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> DocumentCTR:
        click = SpecReader(spec, ("click",)).vector("click")
        assert click is not None
        return cls(ByGrade(click))

    def _probs(self, imp: Impressions) -> tuple[FloatArray, FloatArray]:
        return _ones(imp), self.attractiveness.lookup(imp)

    def _grade_tables(self, k: int, width: int) -> tuple[FloatArray, FloatArray] | None:
        if not isinstance(self.attractiveness, ByGrade):
            return None
        return np.ones(k), self.attractiveness.table(0.0)
