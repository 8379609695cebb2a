r"""Self-normalised whole-list IPS (SNIPS; Swaminathan and Joachims 2015).

.. math::

    \hat V_{\mathrm{SNIPS}} = c_0 + \frac{\sum_i w_i \sum_j r_{ij}}{\sum_i w_i},
    \qquad w_i = \frac{\pi(\mathbf s_i \mid q_i)}{\mu(\mathbf s_i \mid q_i)}.

Consistent (bias of order 1/n) where IPS is unbiased, always within the range of the
observed rewards, and usually of much lower variance. Undefined when no logged list
has positive target probability (all weights 0): an error, not a number.
"""

from __future__ import annotations

from dataclasses import dataclass

from onlineeval.estimators.base import (
    Estimator,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)

__all__ = ["SNIPS"]


@register_estimator
@dataclass(frozen=True)
class SNIPS(Estimator):
    name = "snips"
    assumption = "none on clicks (any list reward); support as IPS; self-normalised (bias O(1/n))"
    needs = ("p_list",)
    self_normalised = True
    support_level = "list"
    weights_expectation = 1.0  # pi/mu weights (Diagnostics.mean_weight)
    unbiased_under = (("any", "additive"), ("any", "first_click"))

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = data.importance_weights(target, "list")
        return Terms(num=w * data.list_rewards(reward), den=w, weights=w)
