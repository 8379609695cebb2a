"""Brute-force expected rewards of one list: every click pattern enumerated, its chance from a sequential click
model (each slot's click probability given the clicks above), the reward's weights applied (every click for an
additive reward, the first for a first-click one). The reference of the direct method's value gradients."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np


def pattern_value(k: int, reward, click_chance: Callable[[int, Sequence[int]], float]) -> float:
    """``sum over patterns c of P(c) R(c)``, ``P(c) = prod_s p_s^c_s (1 - p_s)^(1 - c_s)`` with
    ``p_s = click_chance(s, c[:s])`` (the model's chance of a click at slot ``s`` given the clicks above)."""
    w = reward.position_weights(k)
    total = 0.0
    for pattern in itertools.product((0, 1), repeat=k):
        prob = 1.0
        for s, c in enumerate(pattern):
            p = click_chance(s, pattern[:s])
            prob *= p if c else 1.0 - p
        if reward.kind == "additive":
            total += prob * float(np.dot(w, pattern))
        elif any(pattern):
            total += prob * float(w[pattern.index(1)])
    return total


def ubm_chance(alpha: Sequence[float], gamma: np.ndarray) -> Callable[[int, Sequence[int]], float]:
    """A UBM's (a PBM's, with one column of ``gamma``) click chance: ``gamma[s, j] alpha[s]``, ``j`` 0 without a
    click above, else 1 + the previous click's rank."""
    def chance(s: int, above: Sequence[int]) -> float:
        clicked = [r for r, c in enumerate(above) if c]
        j = clicked[-1] + 1 if clicked and gamma.shape[1] > 1 else 0
        return float(gamma[s, j] * alpha[s])
    return chance


def dcm_chance(alpha: Sequence[float], lam: Sequence[float],
               skip: Sequence[float] | float = 1.0) -> Callable[[int, Sequence[int]], float]:
    """A DCM's (an SDBN's, a DBN's) click chance given the clicks above: the chance the user still examines slot
    ``s`` (after a click the continuation ``lam``, after a skip updated by Bayes' rule and times the continuation
    after a skip, ``skip``: 1 for a DCM, a DBN's perseverance) times the relevance (the forward filter)."""
    go_on = np.broadcast_to(np.asarray(skip, dtype=np.float64), (len(alpha),))

    def chance(s: int, above: Sequence[int]) -> float:
        exam = 1.0
        for r, c in enumerate(above):
            p = exam * alpha[r]
            exam = lam[r] if c else (exam * (1.0 - alpha[r]) / (1.0 - p) * go_on[r] if p < 1 else 0.0)
        return exam * float(alpha[s])
    return chance
