"""Goal-sensitive adaptive C/W/L metrics INSQ and INST (Moffat et al.).

Both are expected rates of gain :math:`\\sum_i W(i) r_i` with binary gains
:math:`r_i` (grade >= rel_min) and weights normalised over *all* ranks: past the end of
the list the gains are 0 and the continuation keeps its form, so the tail mass has a
closed form with the trigamma function :math:`\\psi_1`:

.. math::

    \\sum_{i > d} \\prod_{j<i} C(j) = \\Bigl(\\prod_{j \\le d} C(j)\\Bigr)\\, (d + a)^2\\, \\psi_1(d + a)

for :math:`C(i) = ((i + a - 1)/(i + a))^2` beyond rank ``d``.

References
----------
A. Moffat, F. Scholer, P. Thomas. "Models and metrics: IR evaluation as a user process".
ADCS 2012 (INSQ). A. Moffat, P. Bailey, F. Scholer, P. Thomas. "INST: An adaptive metric
for information retrieval evaluation". ADCS 2015; TOIS 35(3), 2017.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from onlineeval.errors import ConfigError
from onlineeval.metrics._kernels import cwl_profile, reach_after, tie_average
from onlineeval.metrics.base import CWL, EvalContext, LabelBatch, Metric, plain, register

__all__ = ["INSQ", "INST"]


def _tail(past: np.ndarray, d: int, a: np.ndarray) -> np.ndarray:
    # imported here, not at module level: scipy costs a quarter second of every start-up
    from scipy.special import polygamma

    x = d + a
    return past * x**2 * polygamma(1, x)


@dataclass(frozen=True)
class _Adaptive(Metric):
    T: float = 1.0
    cutoff: ClassVar[str] = "none"

    def _validate(self) -> None:
        if not (isinstance(self.T, (int, float)) and self.T > 0):
            raise ConfigError(("metrics", type(self).name, "T"), f"target T must be > 0, got {plain(self.T)!r}")

    def _offset(self, gains: np.ndarray) -> np.ndarray:
        """``(q, d)`` offset ``a_i`` with :math:`C(i) = ((i + a_i - 1)/(i + a_i))^2`."""
        raise TypeError  # pragma: no cover

    def _cwl(self, codes: np.ndarray, ctx: EvalContext) -> CWL:
        gains = self._cwl_gains(codes, ctx)
        q, d = codes.shape
        a = self._offset(gains)
        c = np.arange(1, d + 1, dtype=np.float64)[None, :] + a
        cont = ((c - 1.0) / c) ** 2
        a_end = a[:, -1] if d else np.full(q, 2.0 * self.T)
        return cwl_profile(cont, _tail(reach_after(cont), d, a_end))

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        prof = self._cwl(batch.codes, ctx)
        return (prof.weight * self._cwl_gains(batch.codes, ctx)).sum(axis=1)


@register
@dataclass(frozen=True)
class INSQ(_Adaptive):
    """INSQ with target ``T``: :math:`C(i) = \\bigl((i + 2T - 1)/(i + 2T)\\bigr)^2`.

    Closed form: :math:`W(i) = 1 / \\bigl((i + 2T - 1)^2\\, \\psi_1(2T)\\bigr)`.
    """

    name: ClassVar[str] = "INSQ"
    tie_expectation: ClassVar[bool] = True  # weights do not depend on the gains
    shown_params: ClassVar[tuple[str, ...]] = ("T",)
    aliases: ClassVar[tuple[str, ...]] = ()

    def _offset(self, gains: np.ndarray) -> np.ndarray:
        return np.full(gains.shape, 2.0 * self.T)

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        prof = self._cwl(batch.codes, ctx)
        gains = self._cwl_gains(batch.codes, ctx)
        if batch.groups is not None:
            gains = tie_average(gains, batch.groups)
        return (prof.weight * gains).sum(axis=1)


@register
@dataclass(frozen=True)
class INST(_Adaptive):
    """INST with target ``T``: :math:`C(i) = \\bigl((i + T + T_i - 1)/(i + T + T_i)\\bigr)^2`.

    :math:`T_i = T - \\sum_{j \\le i} r_j` is the gain still wanted after rank ``i``.
    """

    name: ClassVar[str] = "INST"
    shown_params: ClassVar[tuple[str, ...]] = ("T",)
    aliases: ClassVar[tuple[str, ...]] = ()

    def _offset(self, gains: np.ndarray) -> np.ndarray:
        return 2.0 * self.T - np.cumsum(gains, axis=1)
