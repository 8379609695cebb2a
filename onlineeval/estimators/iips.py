r"""Item-position IPS (IIPS; Li et al. 2018), under the independence assumption.

Each slot's reward is reweighted by how much more likely the target is to put the
logged document at that slot than the logging policy:

.. math::

    \hat V_{\mathrm{IIPS}} = c_0 + \frac1n \sum_{i=1}^n \sum_{j=0}^{k-1}
        \frac{\pi(s_{ij} \text{ at } j \mid q_i)}{\mu(s_{ij} \text{ at } j \mid q_i)}\, r_{ij}.

Estimand and assumption. :math:`\mathbb E[w_{ij} r_{ij}] = \sum_d \pi(d \text{ at } j)\,
\mathbb E_\mu[r_{ij} \mid s_{ij} = d]`, which equals the target's expected slot reward
exactly when :math:`\mathbb E[r_j \mid \mathbf s] = g_j(s_j)` depends on the document at
``j`` only (the documents elsewhere do not matter). That holds for additive rewards
under the position-based model (PBM: :math:`P(c_j = 1 \mid \mathbf s) = \theta_j
\alpha(s_j)`, clicks independent across slots), so IIPS is unbiased there given support
(the logger shows every target document at the target's slot with positive probability).
It fails when a slot's reward depends on the documents above it: the cascade model
(examination stops at the first click, so :math:`P(c_j)` depends on the attractiveness
of the documents above) and first-click rewards (reciprocal rank, abandonment) under any
click model where the slots above can be clicked, PBM included. Its variance is far
below whole-list IPS because the weights are per document, not per list.

Reference
---------
Li, S., Abbasi-Yadkori, Y., Kveton, B., Muthukrishnan, S., Vinay, V., Wen, Z. (2018).
Offline evaluation of ranking policies with click models. *KDD 2018*.
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

__all__ = ["IIPS"]


@register_estimator
@dataclass(frozen=True)
class IIPS(Estimator):
    """Item-position IPS: slot rewards weighted by ``pi(doc at j) / p_item`` (no options);
    ``Terms.weights`` are the ``(n, k)`` slot weights."""

    name = "iips"
    assumption = (
        "item-position independence: a slot's expected reward depends only on the document at that slot "
        "(additive rewards under PBM); biased under cascade clicks and for first-click rewards"
    )
    needs = ("p_item",)
    support_level = "item"
    weights_expectation = 1.0  # pi/mu weights (Diagnostics.mean_weight)
    unbiased_under = (("pbm", "additive"),)
    biased_under = (("pbm", "first_click"), ("cascade", "additive"), ("cascade", "first_click"),
                    ("dcm", "additive"), ("dcm", "first_click"))

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = data.importance_weights(target, "item")
        return Terms(num=data.slot_weighted_rewards(target, "item", reward), weights=w)
