r"""What the Monte Carlo error of estimated item marginals does to an estimate.

Where a policy's item-position marginals are Monte Carlo estimates (Plackett-Luce above
its DP budget), an item-level estimator divides by noisy propensities. This module
measures the effect by *re-drawing*: the estimate is recomputed with ``draws``
independent re-draws of the marginals (the same policy with other Monte Carlo seeds)
and the spread of those re-computed estimates is reported,

.. math::

    \mathrm{sd}_{\mathrm{MC}} = \mathrm{SD}_r\bigl(\hat V(\hat M^{(r)})\bigr),

which to first order equals the delta-method value
:math:`\sqrt{\nabla_M \hat V^\top \, \mathrm{Cov}(\hat M)\, \nabla_M \hat V}` including
the correlations between the cells of one query (the re-draw needs neither the gradient
nor the covariance). It is the extra error the estimate carries *on top of* its sampling
standard error, with which it is reported; the shift of the estimate's centre by the
Monte Carlo noise (a second-order effect of :math:`1/\hat M`) is not in it.

The default statistic is item-level IPS with a deterministic target,

.. math::

    \hat V = c_0 + \frac1n \sum_i \sum_j
        \frac{\pi(s_{ij} \text{ at } j \mid q_i)}{\hat M_{s_{ij} j}(q_i)}\, r_{ij};

an :class:`onlineeval.estimators.base.Estimator` may be given instead (it then reads the
re-drawn propensities from the log).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from onlineeval.errors import InputError
from onlineeval.estimators.base import LoggedData, Reward, Target, get_reward
from simulations.policies.base import FloatArray, LoggingPolicy

__all__ = ["MarginalErrorEffect", "marginal_error_effect"]


@dataclass(frozen=True)
class MarginalErrorEffect:
    """The Monte Carlo error of the marginals, seen in an estimate.

    Attributes
    ----------
    value:
        The estimate with the policy's own marginals.
    sampling_se:
        The estimate's own standard error (over impressions / clusters).
    redraws:
        ``(draws,)`` the estimate recomputed with independently re-drawn marginals.
    sd:
        Their standard deviation: the Monte Carlo error propagated to the estimate
        (0 when every impression's marginals are exact).
    ratio:
        ``sd / sampling_se`` (how much the marginal error adds relative to the sampling error).
    exact_share:
        Share of impressions whose item marginals are exact.
    method:
        What was computed.
    """

    value: float
    sampling_se: float
    redraws: FloatArray
    sd: float
    ratio: float
    exact_share: float
    method: str


def _item_ips(policy: LoggingPolicy, query: Any, shown: Any, clicks: Any, target: Target,
              reward: Reward) -> tuple[float, float]:
    uq, inv = np.unique(query, return_inverse=True)
    marg = policy.item_position_marginals(uq)  # (U, m, k): the item propensities of every shown entry
    valid = shown >= 0
    p_item = marg[inv[:, None], np.maximum(shown, 0), np.arange(shown.shape[1])[None, :]]
    pi = target.propensities(query, shown).item
    if np.any(valid & (p_item <= 0)):
        raise InputError("item-level IPS: a shown document has item propensity 0 under the logging policy "
                         "(a Monte Carlo marginal of 0: raise mc_samples, or use item_method: quadrature)")
    w = np.where(valid, pi / np.where(valid, p_item, 1.0), 0.0)
    terms = (w * reward.slot_rewards(clicks)).sum(axis=1)
    n = terms.size
    se = float(terms.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return reward.offset + float(terms.mean()), se


def marginal_error_effect(
    policy: LoggingPolicy,
    query: ArrayLike,
    shown: ArrayLike,
    clicks: ArrayLike,
    target: Target,
    rng: np.random.Generator,
    *,
    reward: Reward | str = "clicks_per_query",
    estimator: Any = None,
    draws: int = 20,
) -> MarginalErrorEffect:
    """Recompute an estimate with ``draws`` independent re-draws of the Monte Carlo marginals.

    Parameters
    ----------
    policy:
        The logging policy (its ``with_mc_seed`` gives the re-draws).
    query, shown, clicks:
        The log: ``(n,)`` query indices, ``(n, k)`` shown lists, ``(n, k)`` clicks.
    target:
        The evaluated policy (:class:`onlineeval.estimators.base.Target`).
    rng:
        Draws the re-draw seeds.
    reward:
        Reward name or :class:`Reward` (default ``"clicks_per_query"``).
    estimator:
        ``None``: item-level IPS (module docstring); else an
        :class:`onlineeval.estimators.base.Estimator` run on a :class:`LoggedData` carrying
        the policy's list, prefix and (re-drawn) item propensities.
    draws:
        Number of re-draws (>= 2; default 20).
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 2:
        raise InputError(f"draws must be an integer >= 2, got {draws!r}")
    q = np.asarray(query, dtype=np.int64)
    s = np.asarray(shown, dtype=np.int64)
    c = np.asarray(clicks, dtype=bool)
    k = s.shape[1] if s.ndim == 2 else 0
    rw = get_reward(reward, k) if isinstance(reward, str) else reward

    def run(pol: LoggingPolicy) -> tuple[float, float]:
        if estimator is None:
            return _item_ips(pol, q, s, c, target, rw)
        p = pol.propensities(q, s)
        data = LoggedData(q, s, c, p_list=p.list, p_prefix=p.prefix, p_item=p.item, logger=pol)
        est = estimator.estimate(data, target, rw)
        return float(est.value), float(est.se)

    value, se = run(policy)
    seeds = rng.integers(0, 2**62, size=int(draws))
    redraws = np.array([run(policy.with_mc_seed(int(sd)))[0] for sd in seeds])
    sd = float(redraws.std(ddof=1))
    name = "item-level IPS" if estimator is None else f"estimator {getattr(estimator, 'name', estimator)!r}"
    exact = float(policy.marginals_exact(q).mean()) if q.size else 1.0
    return MarginalErrorEffect(
        value, se, redraws, sd, sd / se if se > 0 else math.nan, exact,
        f"{name} recomputed with {draws} independent re-draws of the Monte Carlo item marginals; sd = their spread",
    )
