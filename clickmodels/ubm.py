"""User browsing model (UBM) (Dupret & Piwowarski, SIGIR 2008)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from clickmodels import kernels
from clickmodels.base import (
    BoolArray,
    ByGrade,
    ClickModel,
    ClickSample,
    DocParam,
    FloatArray,
    Impressions,
    SpecReader,
    _number,
    check_depth,
    frozen_array,
    register,
)
from onlineeval.errors import ConfigError

__all__ = ["UBM"]


@register("ubm")
@dataclass(frozen=True, eq=False)
class UBM(ClickModel):
    """User browsing model (Dupret & Piwowarski, SIGIR 2008; Chuklin et al. 2015, sec. 3.5).

    Examination of rank :math:`r` depends on the rank :math:`r'` of the previous click:

    .. math:: P(C_r = 1 \\mid C_{<r}) = \\alpha_{q d_r}\\,\\gamma_{r, r'}

    Parameters
    ----------
    attractiveness:
        :math:`\\alpha`, by grade or per (query, doc).
    examination:
        :math:`\\gamma` (K, K): ``examination[r, j]`` for 0-based rank ``r`` and
        ``j = 0`` if there was no click above ``r``, else ``j = r' + 1`` with ``r'`` the
        0-based rank of the last click above (so ``0 <= j <= r``; entries with ``j > r``
        are unused and must be 0). PyClick's ``gamma[r][r - r']`` (rank, distance) maps to
        ``examination[r, r' + 1]``; its "no click" distance ``r + 1`` maps to ``j = 0``.

    Spec: ``{"name": "ubm", "click": [...], "examination": [[g00], [g10, g11], ...]}``,
    row ``r`` listing ``examination[r, 0..r]``.
    """

    attractiveness: DocParam
    examination: NDArray[np.float64]

    example_spec: ClassVar[Mapping[str, Any]] = {
        "name": "ubm",
        "click": [0.1, 0.3, 0.5, 0.7, 0.9],
        "examination": [[0.95], [0.7, 0.9], [0.5, 0.6, 0.85], [0.4, 0.45, 0.6, 0.8], [0.3, 0.35, 0.4, 0.6, 0.8],
                        [0.25, 0.3, 0.35, 0.4, 0.55, 0.75]],
    }

    def __post_init__(self) -> None:
        g = frozen_array(self.examination)
        if g.ndim != 2 or g.shape[0] == 0 or g.shape[0] != g.shape[1]:
            raise ValueError(f"UBM examination must be a square (K, K) array, got shape {g.shape}")
        if np.any(~(g >= 0)) or np.any(g > 1):
            raise ValueError("UBM examination entries must be probabilities")
        if np.any(np.triu(g, 1) != 0):
            raise ValueError("UBM examination[r, j] must be 0 for j > r (unused entries)")
        object.__setattr__(self, "examination", g)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> UBM:
        reader = SpecReader(spec, ("click", "examination"))
        click = reader.vector("click")
        assert click is not None
        rows = reader.raw("examination")
        if rows is None:
            raise ConfigError(("examination",), "is required: rows r = 0..K-1, row r with r + 1 probabilities")
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or not rows:
            raise ConfigError(("examination",), "must be a non-empty list of rows (row r has r + 1 probabilities)")
        k = len(rows)
        gamma = np.zeros((k, k))
        for r, row in enumerate(rows):
            if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != r + 1:
                raise ConfigError(("examination", r),
                                  f"row {r} must list {r + 1} probabilities (no click, then click at rank 1..{r})")
            for j, v in enumerate(row):
                gamma[r, j] = _number(v, ("examination", r, j), 0.0, 1.0, "a probability")
        return cls(ByGrade(click), gamma)

    @property
    def depth(self) -> int:
        return int(self.examination.shape[0])

    def _check(self, imp: Impressions) -> None:
        super()._check(imp)
        check_depth(imp, self.depth, "ubm.examination")

    def _gamma(self, imp: Impressions) -> FloatArray:
        k = imp.shape[1]
        return np.asarray(self.examination[:k, :k])

    def _sample(self, imp: Impressions, rng: np.random.Generator) -> ClickSample:
        a = self.attractiveness.lookup(imp)
        g = self._gamma(imp)
        clicks, examined = kernels.ubm_sample(a, g, rng)
        exam, _ = kernels.ubm_probabilities(a, g)
        valid = imp.valid
        exam[~valid] = 0.0
        examined &= valid
        return ClickSample(clicks, exam, examined)

    def _examination_probabilities(self, imp: Impressions) -> FloatArray:
        exam, _ = kernels.ubm_probabilities(self.attractiveness.lookup(imp), self._gamma(imp))
        exam[~imp.valid] = 0.0
        return exam

    def _click_probabilities(self, imp: Impressions) -> FloatArray:
        _, click = kernels.ubm_probabilities(self.attractiveness.lookup(imp), self._gamma(imp))
        return click

    def _conditional_click_probabilities(self, imp: Impressions, clicks: BoolArray) -> FloatArray:
        return kernels.ubm_conditional(self.attractiveness.lookup(imp), self._gamma(imp), clicks)
