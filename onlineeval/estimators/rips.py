r"""Reward-interaction IPS (RIPS; McInerney et al. 2020, Kiyohara et al. 2022), cascade assumption.

Slot ``j``'s reward is reweighted by the ratio of the probabilities of the logged *prefix*
(the documents at slots ``0..j``):

.. math::

    \hat V_{\mathrm{RIPS}} = c_0 + \frac1n \sum_{i=1}^n \sum_{j=0}^{k-1} w_{ij}\, r_{ij},
    \qquad
    w_{ij} = \frac{\pi(s_{i,0..j} \mid q_i)}{\mu(s_{i,0..j} \mid q_i)}.

Assumption (no look-ahead). :math:`\mathbb E[w_{ij} r_{ij}] = \sum_{\mathbf p}
\pi(\mathbf p)\,\mathbb E_\mu[r_{ij} \mid s_{0..j} = \mathbf p]`, which equals the target's
expected slot reward exactly when :math:`\mathbb E[r_j \mid \mathbf s]` depends on the
documents at slots :math:`\le j` only, i.e. users scan top-down and what they do at
slot ``j`` does not depend on the documents below it. That holds

* under the position-based model (PBM) for additive rewards (:math:`P(c_j) = \theta_j
  \alpha(s_j)` depends on slot ``j`` alone) and for first-click rewards
  (:math:`P(f_j = 1) = \theta_j\alpha(s_j)\prod_{l<j}(1 - \theta_l\alpha(s_l))`, a prefix
  function);
* under the cascade model (:math:`P(c_j) = \alpha(s_j)\prod_{l<j}(1-\alpha(s_l))`, and the
  first click is the only click) for both reward kinds;
* under the dependent click model (DCM) and other top-down models (DBN, UBM): the
  examination of slot ``j`` is decided by the clicks above it, which depend on the
  documents above it only.

So RIPS is unbiased for additive and first-click rewards under PBM, cascade and DCM,
given prefix support (the logger shows every target prefix with positive probability).
It is biased when behaviour at a slot depends on documents below it (a user who reads
the whole page before choosing). Variance is between IIPS (item weights) and whole-list
IPS: the weight of slot ``j`` is a list weight of the top ``j + 1`` only.

Self-normalised variant (``snrips``, first-click rewards)
---------------------------------------------------------
.. math::

    \hat V_{\mathrm{SNRIPS}} = c_0 + \frac{\sum_i \sum_j w_{ij} r_{ij}}{\sum_i w_{i\tau_i}},

with :math:`\tau_i` the slot of the first click (the last slot when nothing is clicked).
Under the assumption above :math:`\tau` is a stopping time of the top-down scan and
:math:`w_{ij}` a likelihood-ratio martingale in ``j`` under the logger (the clicks at
slots :math:`\le j` say nothing about the document at ``j + 1`` beyond the prefix), so
:math:`\mathbb E[w_{\tau}] = 1` by optional stopping and the estimator is consistent
(bias :math:`O(1/n)`). A first-click reward lives at :math:`\tau` alone, so each term is
:math:`w_{i\tau_i} (R_i - c_0)`: the estimate is a weighted mean of the realised rewards
and stays within their range.

It is offered for first-click rewards only. A self-normalised estimate within the range
of the observed rewards must be a weighted mean of them (a one-impression log forces
:math:`\mathrm{num}_i = \mathrm{den}_i (R_i - c_0)`), and for additive rewards, where
clicks may follow at any later slot, the weight at a stopping time that comes after every
click is the whole-list weight, which makes it SNIPS. For additive rewards use ``rips`` or
``snips``.

Slots after the end of a short list carry the weight of the whole list (the prefix
beyond the list is the list).

References
----------
McInerney, J., Brost, B., Chandar, P., Mehrotra, R., Carterette, B. (2020).
Counterfactual evaluation of slate recommendations with sequential reward interactions.
*KDD 2020*.
Kiyohara, H., Saito, Y., Matsuhiro, T., Narita, Y., Shimizu, N., Yamamoto, Y. (2022).
Doubly robust off-policy evaluation for ranking policies under the cascade behavior
model. *WSDM 2022*.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onlineeval.estimators.base import (
    Estimator,
    FloatArray,
    IntArray,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)

__all__ = ["RIPS", "SNRIPS", "prefix_weights"]

_FAMILIES = ("pbm", "cascade", "dcm")


def prefix_weights(data: LoggedData, target: Target) -> FloatArray:
    """``(n, k)`` prefix weights :math:`\\pi(s_{0..j})/\\mu(s_{0..j})`, with empty slots
    carrying the weight of the last shown slot (the whole list); read-only, computed once
    per log and target (:meth:`LoggedData.importance_weights` ``"prefix_carried"``)."""
    return data.importance_weights(target, "prefix_carried")


@register_estimator
@dataclass(frozen=True)
class RIPS(Estimator):
    """Reward-interaction IPS: slot rewards weighted by the prefix ratio ``pi(top j+1) / p_prefix``
    (no options); ``Terms.weights`` are the ``(n, k)`` slot weights."""

    name = "rips"
    assumption = (
        "no look-ahead: a slot's expected reward depends only on the documents at and above it "
        "(PBM, cascade, DCM and other top-down click models; additive and first-click rewards)"
    )
    needs = ("p_prefix",)
    support_level = "prefix"
    weights_expectation = 1.0  # pi/mu weights (Diagnostics.mean_weight)
    unbiased_under = tuple((f, kind) for f in _FAMILIES for kind in ("additive", "first_click"))
    biased_under = ()

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        shown_w = data.importance_weights(target, "prefix")  # the carried weights, 0 at empty slots
        return Terms(num=data.slot_weighted_rewards(target, "prefix", reward), weights=shown_w)


@register_estimator
@dataclass(frozen=True)
class SNRIPS(RIPS):
    """Self-normalised RIPS for first-click rewards: normalised by the prefix weight at the
    first click (the last slot without a click); see the module docstring."""

    name = "snrips"
    assumption = (
        "no look-ahead (PBM, cascade, DCM and other top-down click models); first-click rewards; "
        "self-normalised by the prefix weight at the first click (bias O(1/n)), a weighted mean of observed rewards"
    )
    rewards = ("first_click",)
    self_normalised = True
    unbiased_under = tuple((f, "first_click") for f in _FAMILIES)

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = prefix_weights(data, target)
        shown_w = data.importance_weights(target, "prefix")  # w, 0 at empty slots
        num = data.slot_weighted_rewards(target, "prefix", reward)
        tau = data.cached("first_click_slot", lambda: _first_click_slot(data))
        return Terms(num=num, den=w[np.arange(data.n), tau], weights=shown_w)


def _first_click_slot(data: LoggedData) -> IntArray:
    """``(n,)`` the slot of each impression's first click, the last slot when nothing is clicked."""
    c = data.clicks
    tau = np.full(data.n, data.k - 1, dtype=np.int64)
    for j in range(data.k - 2, -1, -1):  # slot by slot from the bottom: the last slot written is the first click
        np.copyto(tau, j, where=c[:, j])  # (3x faster than any + argmax over rows of 10 slots)
    return tau
