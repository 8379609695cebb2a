r"""Rewards: every supported online metric as per-slot rewards of the click vector.

.. math::

    R = c_0 + \sum_{j=0}^{k-1} r_j(\mathbf c)

with ``offset`` :math:`c_0` (1 for abandonment) and per-slot rewards :math:`r_j`: clicks
(:math:`r_j = c_j`), position-weighted clicks (:math:`r_j = w_j c_j`), the reciprocal rank
of the first click (:math:`r_j = f_j/(j+1)` with :math:`f_j` the first-click indicator) or
minus the first-click indicator (abandonment). See :mod:`onlineeval.estimators.base`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import ConfigError, InputError

__all__ = ["REWARDS", "Reward", "first_click", "get_reward", "metric_range"]

FloatArray = NDArray[np.float64]


# ------------------------------------------------------------------------------ rewards
def first_click(clicks: NDArray[np.bool_]) -> FloatArray:
    """``(n, k)`` float indicator of the first clicked slot of each impression."""
    return _first_click(np.asarray(clicks, dtype=bool)).astype(np.float64)


def _first_click(c: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """:func:`first_click` as booleans."""
    if c.ndim != 2:
        before = np.cumsum(c, axis=1) - c  # clicks strictly above slot j
        return c & (before == 0)  # type: ignore[no-any-return]
    first = np.zeros(c.shape, dtype=bool)
    seen = np.zeros(c.shape[0], dtype=bool)  # a click strictly above slot j (slot by slot: no per-row overhead)
    for j in range(c.shape[1]):
        np.greater(c[:, j], seen, out=first[:, j])
        seen |= c[:, j]
    return first


@dataclass(frozen=True, eq=False)
class Reward:
    r"""An online metric as ``offset + sum_j slot_rewards(clicks)[:, j]``.

    Attributes
    ----------
    name:
        ``clicks_per_query``, ``reciprocal_rank``, ``abandonment`` or a user-given name.
    kind:
        ``"additive"``: :math:`r_j = w_j c_j` (each slot's reward depends on its own click
        only); ``"first_click"``: :math:`r_j = w_j f_j` with :math:`f_j` the first-click
        indicator (depends on the clicks above ``j``, so on the documents above it).
    weights:
        ``(k,)`` position weights :math:`w_j`, or ``None`` for all ones (any ``k``).
    offset:
        The constant :math:`c_0`.
    """

    name: str
    kind: str = "additive"
    weights: FloatArray | None = None
    offset: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("additive", "first_click"):
            raise ConfigError(("reward", "kind"), f"must be 'additive' or 'first_click', got {self.kind!r}")
        if self.weights is not None:
            w = np.array(self.weights, dtype=np.float64, copy=True)
            if w.ndim != 1 or not np.all(np.isfinite(w)):
                raise ConfigError(("reward", "weights"), "must be a 1-d array of finite numbers")
            w.setflags(write=False)
            object.__setattr__(self, "weights", w)

    def position_weights(self, k: int) -> FloatArray:
        """``(k,)`` weights for lists of ``k`` slots."""
        if self.weights is None:
            return np.ones(k)
        if self.weights.size < k:
            raise InputError(f"reward {self.name!r} has {self.weights.size} position weights, lists have {k} slots")
        return np.asarray(self.weights[:k], dtype=np.float64)

    def slot_rewards(self, clicks: ArrayLike) -> FloatArray:
        """``(n, k)`` per-slot rewards of observed clicks (empty slots give 0)."""
        c = np.asarray(clicks, dtype=bool)
        w = self.position_weights(c.shape[1])
        base = c if self.kind == "additive" else _first_click(c)
        if self.weights is None:  # all ones: multiplying by 1.0 changes no number
            return base.astype(np.float64)
        return base * w[None, :]  # the booleans as 0.0 / 1.0 times the weights

    def value(self, clicks: ArrayLike) -> FloatArray:
        """``(n,)`` the metric of each impression: ``offset + slot_rewards.sum(1)``."""
        return self.offset + self.slot_rewards(clicks).sum(axis=1)

    @property
    def bounds_per_slot(self) -> tuple[float, float]:
        """Range of one slot's reward (for the SN-bounded checks)."""
        w = np.asarray(self.weights) if self.weights is not None else np.ones(1)
        return float(min(0.0, w.min())), float(max(0.0, w.max()))

    def describe(self) -> str:
        w = "1" if self.weights is None else "w_j (" + ", ".join(f"{x:g}" for x in self.weights[:4]) + ", ...)"
        base = "c_j" if self.kind == "additive" else "f_j (first click)"
        off = f"{self.offset:g} + " if self.offset else ""
        return f"{self.name}: {off}sum_j {w} * {base}"


REWARDS: dict[str, Callable[[int], Reward]] = {
    "clicks_per_query": lambda k: Reward("clicks_per_query", "additive"),
    "reciprocal_rank": lambda k: Reward("reciprocal_rank", "first_click", 1.0 / np.arange(1, k + 1)),
    "abandonment": lambda k: Reward("abandonment", "first_click", -np.ones(k), offset=1.0),
}


#: the prefix of a metric-user utility reward's name: ``utility:<metric>`` (:func:`utility_reward`)
UTILITY_PREFIX = "utility:"


def utility_reward(metric: str, k: int) -> Reward:
    r"""The metric-user utility of an offline metric with a static C/W/L user (P@k, RBP, DCG@k / nDCG@k's
    discount): the clicks weighted by the metric's C/W/L weights,
    :math:`U = \sum_{j \le k} W(j)\, c_j`, the metric's expected rate of gain with a click as the gain (a
    precision user's clicks per slot, an RBP user's :math:`(1-p) p^{j-1}`-weighted clicks). An additive reward of
    ``k`` slots named ``utility:<metric>``; a metric without a C/W/L user, or whose weights depend on the grades
    (RR, AP, ERR, INST: no click-only utility), is a :class:`ConfigError`."""
    from onlineeval.metrics import parse_metric

    try:
        m = parse_metric(metric)
    except (ValueError, ConfigError) as exc:
        raise ConfigError(("reward",), f"utility:{metric}: {exc}") from None
    probes = np.array([[0] * k, [1] * k, [3] * k, [0, 3] * (k // 2) + [0] * (k % 2)])
    try:
        weights = np.asarray(m.cwl(probes).weight, dtype=np.float64)
    except (TypeError, ValueError, ConfigError):
        raise ConfigError(("reward",), f"utility:{metric}: {m} has no static C/W/L user model, so no metric-user "
                          "utility of clicks (metrics with one: P@k, RBP(p=...), nDCG@k / DCG@k)") from None
    if weights.shape != (probes.shape[0], k) or not np.allclose(weights, weights[0], rtol=0, atol=1e-12):
        raise ConfigError(("reward",), f"utility:{metric}: {m}'s C/W/L weights depend on the grades (an adaptive "
                          "user such as RR's or INST's), so no utility of clicks alone (static ones: P@k, "
                          "RBP(p=...), nDCG@k / DCG@k)")
    return Reward(f"{UTILITY_PREFIX}{m}", "additive", weights[0])


def get_reward(name: str, k: int) -> Reward:
    """The built-in reward ``name`` for lists of ``k`` slots, or ``utility:<metric>`` (:func:`utility_reward`);
    ``ConfigError`` listing the names."""
    if name.startswith(UTILITY_PREFIX):
        return utility_reward(name[len(UTILITY_PREFIX):], k)
    if name not in REWARDS:
        raise ConfigError(("reward",), f"must be one of {', '.join(REWARDS)} or {UTILITY_PREFIX}<metric> (clicks "
                          f"weighted by the metric's C/W/L weights, e.g. utility:RBP(p=0.8)); got {name!r}")
    return REWARDS[name](k)


def metric_range(reward: Reward, k: int) -> tuple[float, float]:
    """The smallest and largest value the metric of one impression can take on lists of ``k`` slots
    (``c_0 + sum_j r_j``: any subset of slots clicked for additive rewards, at most one first click otherwise)."""
    w = np.asarray(reward.position_weights(k), dtype=np.float64)
    if reward.kind == "additive":
        lo, hi = float(np.minimum(w, 0).sum()), float(np.maximum(w, 0).sum())
    else:
        lo, hi = min(0.0, float(w.min())), max(0.0, float(w.max()))
    return reward.offset + lo, reward.offset + hi
