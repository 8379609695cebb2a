"""The results of the off-policy estimation contract (:mod:`onlineeval.estimators.base`, which
re-exports them): an estimator hook's per-impression :class:`Terms` and the
:class:`OffPolicyEstimate` with its intervals and diagnostics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from onlineeval.estimators._arrays import FloatArray
from onlineeval.estimators.diagnostics import Diagnostics


@dataclass(frozen=True)
class Terms:
    """What an estimator's hook returns.

    Attributes
    ----------
    num, den:
        ``(n,)`` per-impression numerator and denominator: :math:`\\hat V - c_0 =
        \\sum num / \\sum den` (``den = None``: all ones).
    weights:
        The importance weights the estimate rests on, ``(n,)`` (list-level) or ``(n, k)``
        (slot-level; empty slots 0), for the diagnostics; ``None`` for the direct method.
    notes:
        Estimator-specific diagnostics (e.g. ``clipping_bias_bound``), JSON-able.
    """

    num: FloatArray
    den: FloatArray | None = None
    weights: FloatArray | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OffPolicyEstimate:
    """An off-policy estimate of a target's value with intervals and diagnostics."""

    estimator: str
    target: str
    reward: str
    value: float
    se: float
    ci_low: float
    ci_high: float
    boot_low: float
    boot_high: float
    alpha: float
    n: int
    clusters: int
    assumption: str
    diagnostics: Diagnostics

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)
