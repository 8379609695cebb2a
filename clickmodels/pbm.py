"""Position-based model (PBM) and the shared base of independent-click models.

In an independent-click model each slot is examined with probability :math:`e_r` and
clicked with probability :math:`e_r a_r`, independently of the other slots.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

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
    check_depth,
    frozen_array,
    register,
)
from onlineeval.errors import ConfigError

__all__ = ["IndependentModel", "PBM", "noisy_grade_clicks"]


@dataclass(frozen=True, eq=False)
class IndependentModel(ClickModel):
    """Base of models with independent slots; subclasses implement :meth:`_probs`."""

    @abstractmethod
    def _probs(self, imp: Impressions) -> tuple[FloatArray, FloatArray]:
        """``(examination, attractiveness)`` broadcastable to (n, k), 0 in empty slots."""

    def _grade_tables(self, k: int, width: int) -> tuple[FloatArray, FloatArray] | None:
        """``(examination (k,), attractiveness table broadcastable to (k, W))`` when both
        depend on rank and grade only, else ``None``. Columns are grades ``0..W-2`` and the
        empty slot last (0); ``width`` is the least ``W`` the batch needs (top label + 2)."""
        return None

    def _sample(self, imp: Impressions, rng: np.random.Generator) -> ClickSample:
        tables = None
        if imp.labels is not None and imp.docs is None:
            top = int(imp.labels.max()) if imp.labels.size else -1
            tables = self._grade_tables(imp.shape[1], top + 2)
        if tables is not None:
            assert imp.labels is not None
            clicks, examined, prop = kernels.independent_sample_grades(imp.labels, *tables, rng)
            return ClickSample(clicks, prop, examined)
        e, a = self._probs(imp)
        e = np.broadcast_to(e, imp.shape)
        u = kernels.blocked_uniforms(rng, imp.shape[1], imp.shape[0]).T
        # one draw: examined iff u < e; given that, u / e is uniform, so clicked iff u < e a
        clicks = u < e * a
        examined = u < e
        return ClickSample(clicks, np.array(e, dtype=np.float64), examined)

    def _examination_probabilities(self, imp: Impressions) -> FloatArray:
        e, _ = self._probs(imp)
        return np.array(np.broadcast_to(e, imp.shape), dtype=np.float64)

    def _click_probabilities(self, imp: Impressions) -> FloatArray:
        e, a = self._probs(imp)
        return np.array(np.broadcast_to(e * a, imp.shape), dtype=np.float64)

    def _conditional_click_probabilities(self, imp: Impressions, clicks: BoolArray) -> FloatArray:
        return self._click_probabilities(imp)


def noisy_grade_clicks(grades: int, noise: float) -> tuple[float, ...]:
    """Click probability by grade with noise (Ai et al., SIGIR 2018, Sec. 6.1).

    .. math:: P(C = 1 \\mid E = 1, g) = \\epsilon + (1 - \\epsilon)\\,\\frac{2^g - 1}{2^{g_{max}} - 1}
    """
    gmax = grades - 1
    return tuple(noise + (1.0 - noise) * (2.0**g - 1.0) / (2.0**gmax - 1.0) for g in range(grades))


def _rank_row(exam: NDArray[np.float64], valid: BoolArray) -> FloatArray:
    return np.where(valid, exam[None, : valid.shape[1]], 0.0)


@register("pbm")
@dataclass(frozen=True, eq=False)
class PBM(IndependentModel):
    """Position-based model (Craswell et al. 2008; Chuklin et al. 2015, sec. 3.4).

    .. math:: P(C_r = 1) = \\gamma_r\\,\\alpha_{q d_r}

    Parameters
    ----------
    examination:
        :math:`\\gamma` (K,): examination probability by rank (batches may have k <= K).
    attractiveness:
        :math:`\\alpha`: by grade or per (query, doc).

    Spec: ``{"name": "pbm", "examination": [...], "click": [...], "eta": 1.0}`` or
    ``{"name": "pbm", "preset": "ai2018", "eta": 1.0, "noise": 0.1, "grades": 5}``; the
    examination is raised to the power ``eta`` (default 1). With a preset, ``click`` may be
    given instead of ``noise``.
    """

    examination: NDArray[np.float64]
    attractiveness: DocParam

    example_spec: ClassVar[Mapping[str, Any]] = {"name": "pbm", "preset": "ai2018"}

    def __post_init__(self) -> None:
        exam = frozen_array(self.examination)
        if exam.ndim != 1 or exam.size == 0 or np.any(~(exam >= 0)) or np.any(exam > 1):
            raise ValueError("PBM examination must be a non-empty 1-d array of probabilities")
        object.__setattr__(self, "examination", exam)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> PBM:
        reader = SpecReader(spec, ("preset", "examination", "click", "eta", "noise", "grades"))
        eta = reader.number("eta", 1.0, lo=0.0, hi=float("inf"), what="a power")
        if reader.has("preset"):
            data = _presets.load("pbm")["presets"]
            name = reader.raw("preset")
            if not isinstance(name, str) or name not in data:
                raise ConfigError(("preset",), f"unknown pbm preset {name!r}; allowed: {', '.join(data)}")
            if reader.has("examination"):
                raise ConfigError(("examination",), "give either 'preset' or 'examination', not both")
            exam = tuple(data[name]["examination"])
            eta = reader.number("eta", float(data[name]["eta"]), lo=0.0, hi=float("inf"), what="a power")
            if reader.has("click"):
                if reader.has("noise"):
                    raise ConfigError(("noise",), "give either 'click' or 'noise', not both")
                click = reader.vector("click")
            else:
                grades = reader.integer("grades", 5, lo=2, hi=1000)  # (2^g - 1) / (2^gmax - 1) finite
                noise = reader.number("noise", float(data[name]["noise"]))
                click = noisy_grade_clicks(grades, noise)
        else:
            for key in ("noise", "grades"):
                if reader.has(key):
                    raise ConfigError((key,), "only allowed with a 'preset' (otherwise give 'click' by grade)")
            exam = reader.vector("examination")
            click = reader.vector("click")
        assert exam is not None and click is not None
        return cls(np.asarray(exam) ** eta, ByGrade(click))

    def _check(self, imp: Impressions) -> None:
        super()._check(imp)
        check_depth(imp, self.examination.size, "pbm.examination")

    def _probs(self, imp: Impressions) -> tuple[FloatArray, FloatArray]:
        return _rank_row(self.examination, imp.valid), self.attractiveness.lookup(imp)

    def _grade_tables(self, k: int, width: int) -> tuple[FloatArray, FloatArray] | None:
        if not isinstance(self.attractiveness, ByGrade):
            return None
        return self.examination[:k], self.attractiveness.table(0.0)
