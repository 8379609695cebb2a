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

Self-normalised variant (``snrips``)
------------------------------------
:math:`\hat V = c_0 + \sum_i \sum_j w_{ij} r_{ij} / \sum_i \bar w_i`, with a normaliser
:math:`\bar w_i` of expectation 1 under the same assumption, chosen so that the estimate
stays inside the reward's range (consistent, bias :math:`O(1/n)`):

* additive rewards with position weights :math:`v_j`: :math:`\bar w_i = \sum_j |v_j|
  w_{ij} / \sum_j |v_j|`. Since :math:`\sum_{v_j<0} v_j w_{ij} \le \sum_j v_j c_{ij} w_{ij}
  \le \sum_{v_j>0} v_j w_{ij}`, for position weights of one sign the estimate minus
  :math:`c_0` lies in the range of the list reward (:math:`[0, \sum_j v_j]` for
  non-negative weights), and with mixed signs in :math:`[-\sum_j|v_j|, \sum_j|v_j|]`.
* first-click rewards: :math:`\bar w_i = w_{i\tau_i}`, the prefix weight at the first
  click (the last slot when nothing is clicked). :math:`\tau` is a stopping time of the
  top-down scan and :math:`w_{ij}` a likelihood-ratio martingale in ``j`` under the
  assumption above, so :math:`\mathbb E[w_{\tau}] = 1` (optional stopping); the term is
  :math:`w_{i\tau_i} v_{\tau_i}` when a click happened, so the estimate is a weighted mean
  of realised rewards and lies in :math:`[\min(0, v), \max(0, v)]`, the reward's range.

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
    LoggedData,
    Reward,
    Target,
    Terms,
    first_click,
    register_estimator,
)

__all__ = ["RIPS", "SNRIPS", "prefix_weights"]

_FAMILIES = ("pbm", "cascade", "dcm")


def prefix_weights(data: LoggedData, target: Target) -> FloatArray:
    """``(n, k)`` prefix weights :math:`\\pi(s_{0..j})/\\mu(s_{0..j})`, with empty slots
    carrying the weight of the last shown slot (the whole list)."""
    pi_prefix = target.propensities(data.query, data.shown).prefix
    valid = data.valid
    w = np.where(valid, pi_prefix / data.p_prefix, 0.0)
    n_shown = valid.sum(axis=1)
    last = np.maximum(n_shown - 1, 0)
    carried = np.where(n_shown > 0, w[np.arange(data.n), last], 1.0)
    return np.where(valid, w, carried[:, None])


@register_estimator
@dataclass(frozen=True)
class RIPS(Estimator):
    name = "rips"
    assumption = (
        "no look-ahead: a slot's expected reward depends only on the documents at and above it "
        "(PBM, cascade, DCM and other top-down click models; additive and first-click rewards)"
    )
    needs = ("p_prefix",)
    support_level = "prefix"
    unbiased_under = tuple((f, kind) for f in _FAMILIES for kind in ("additive", "first_click"))
    biased_under = ()

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = prefix_weights(data, target)
        shown_w = np.where(data.valid, w, 0.0)
        return Terms(num=(shown_w * reward.slot_rewards(data.clicks)).sum(axis=1), weights=shown_w)


@register_estimator
@dataclass(frozen=True)
class SNRIPS(RIPS):
    name = "snrips"
    assumption = RIPS.assumption + "; self-normalised (bias O(1/n)), stays within the reward's range"
    self_normalised = True

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = prefix_weights(data, target)
        shown_w = np.where(data.valid, w, 0.0)
        num = (shown_w * reward.slot_rewards(data.clicks)).sum(axis=1)
        if reward.kind == "first_click":
            f = first_click(data.clicks)
            clicked = f.any(axis=1)
            tau = np.where(clicked, f.argmax(axis=1), data.k - 1)
            den = w[np.arange(data.n), tau]
        else:
            v = np.abs(reward.position_weights(data.k))
            v = v / v.sum() if v.sum() > 0 else np.full(data.k, 1.0 / data.k)
            den = w @ v
        return Terms(num=num, den=den, weights=shown_w)
