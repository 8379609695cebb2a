r"""Whole-list inverse propensity scoring (IPS; Horvitz and Thompson 1952).

Each logged impression is reweighted by how much more (or less) likely the target is
to show the *whole* logged list than the logging policy:

.. math::

    \hat V_{\mathrm{IPS}} = \frac1n \sum_{i=1}^n
        \frac{\pi(\mathbf s_i \mid q_i)}{\mu(\mathbf s_i \mid q_i)}\, R_i,
    \qquad R_i = c_0 + \sum_j r_{ij},

the Horvitz-Thompson form: the weight multiplies the whole reward, offset included (for abandonment,
:math:`R_i = 1[\text{no click}]`), so a target with every weight 0 reads 0 and re-expressing the metric
(abandonment vs 1 - abandonment) does not change the estimate of the other. The terms are
``num = w R - c_0`` (the base class adds :math:`c_0` back): :math:`c_0 + \frac1n\sum_i (w_i R_i - c_0)`.

Unbiased for *any* reward of the shown list (no click-model assumption) whenever the
logger gives positive probability to every list the target can show (support); its
variance grows with the number of possible lists, which is why the slot-level
estimators exist. For a deterministic target the weight is ``1[s_i = target list] /
p_list``.
"""

from __future__ import annotations

from dataclasses import dataclass

from onlineeval.estimators.base import (
    BoolArray,
    Estimator,
    FloatArray,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)
from onlineeval.estimators.derived import row_sum

__all__ = ["IPS", "ht_numerator", "list_rewards", "row_sum"]


def list_rewards(reward: Reward, clicks: BoolArray) -> FloatArray:
    """``(n,)`` the list reward :math:`\\sum_j r_{ij}` of each impression (``reward``'s own
    ``list_rewards`` when it keeps one, as the simulation's per-batch reward does)."""
    own = getattr(reward, "list_rewards", None)
    return own(clicks) if callable(own) else row_sum(reward.slot_rewards(clicks))


@register_estimator
@dataclass(frozen=True)
class IPS(Estimator):
    name = "ips"
    assumption = "none on clicks (any list reward); support: the logger can show every list the target shows"
    needs = ("p_list",)
    support_level = "list"
    weights_expectation = 1.0  # pi/mu weights (Diagnostics.mean_weight)
    unbiased_under = (("any", "additive"), ("any", "first_click"))

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = data.importance_weights(target, "list")
        return Terms(num=ht_numerator(w, data.list_rewards(reward), reward.offset), weights=w)


def ht_numerator(w: FloatArray, r: FloatArray, offset: float) -> FloatArray:
    """The terms' numerator of whole-list IPS in Horvitz-Thompson form: ``w (c0 + r) - c0`` (the estimate's
    ``c0 + mean(num)`` is then ``mean(w R)``), ``w r`` when the reward has no offset."""
    return w * r if offset == 0 else w * r + offset * (w - 1.0)
