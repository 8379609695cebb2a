r"""Sample ratio mismatch (SRM): does the observed split of traffic match the planned one?

Estimand and assumption
-----------------------
Under correct randomisation each user lands in arm :math:`j` independently with the planned
probability :math:`\pi_j`, and the treatment does not change who arrives. A split of users far
from :math:`\pi` (a bug in assignment, bots caught by one arm, a redirect that loses users)
invalidates the experiment's estimates, so it is checked before anything is read
(Fabijan et al. 2019, "Diagnosing sample ratio mismatch in online controlled experiments",
KDD; the conventional threshold is :math:`p < 0.001`).

* :func:`srm_chisquare`: Pearson's goodness-of-fit test of counts per arm against the planned
  shares. For **users** it is exact in the asymptotic sense. For **impressions** it treats
  impressions as independent units, which they are not (a user brings many), so it fires far
  too often on correctly randomised traffic with heavy users; use it on impressions only as
  the naive check.
* :func:`srm_impressions`: the randomisation-based test of the impression split for two
  arms, clustered by user: conditional on the users and their impression counts
  :math:`m_i`, :math:`T = \sum_i Z_i m_i` (:math:`Z_i = 1` in B) has mean
  :math:`\pi_B \sum m_i` and variance :math:`\pi_B(1-\pi_B)\sum m_i^2`. (If the treatment
  legitimately changes how many impressions a user makes, this test fires too: that is
  an effect, not a broken split — read it with the user-level test.)

Both are vectorised over leading axes (replicates x checkpoints).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special as _spc

from onlineeval.errors import InputError
from onlineeval.stats._checks import check_alpha

__all__ = ["SrmResult", "srm_chisquare", "srm_impressions"]


@dataclass(frozen=True)
class SrmResult:
    """Outcome of an SRM test, batch shape ``(...)``.

    Attributes
    ----------
    statistic:
        Pearson's :math:`\\chi^2` (for :func:`srm_impressions`, :math:`z^2`).
    pvalue:
        Upper-tail p-value of :math:`\\chi^2_{df}`.
    df:
        Degrees of freedom (arms - 1).
    observed, expected:
        Shape ``(..., arms)``: observed and expected counts (users, impressions).
    alpha:
        The threshold below which :attr:`flagged` is True (default 0.001).
    method:
        ``"chisquare"`` or ``"clustered-impressions"``.
    """

    statistic: NDArray[np.float64]
    pvalue: NDArray[np.float64]
    df: int
    observed: NDArray[np.float64]
    expected: NDArray[np.float64]
    alpha: float
    method: str

    @property
    def flagged(self) -> NDArray[np.bool_]:
        """``pvalue < alpha``: the split is inconsistent with the plan."""
        return np.asarray(self.pvalue < self.alpha)

    @property
    def observed_share(self) -> NDArray[np.float64]:
        """Observed share of each arm, shape ``(..., arms)``."""
        tot = self.observed.sum(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(tot > 0, self.observed / np.where(tot > 0, tot, 1.0), np.nan)


def _shares(shares: ArrayLike | None, k: int) -> NDArray[np.float64]:
    if shares is None:
        return np.full(k, 1.0 / k)
    s = np.asarray(shares, dtype=np.float64).ravel()
    if s.size != k:
        raise InputError(f"shares: {s.size} planned shares for {k} arms; give one share per arm")
    if not np.isfinite(s).all() or (s <= 0).any():
        raise InputError(f"shares: planned shares must be finite and > 0; got {s.tolist()}")
    return s / s.sum()


def srm_chisquare(counts: ArrayLike, shares: ArrayLike | None = None, *, alpha: float = 0.001) -> SrmResult:
    r"""Pearson :math:`\chi^2` test of counts per arm against the planned split.

    Parameters
    ----------
    counts:
        Shape ``(..., arms)``: users (or impressions) per arm, non-negative, at least 2 arms.
    shares:
        Planned share of each arm (any positive weights, normalised to sum 1). Default
        ``None``: equal split.
    alpha:
        Flagging threshold. Default 0.001.

    Notes
    -----
    .. math::

        \chi^2 = \sum_j \frac{(O_j - N\pi_j)^2}{N\pi_j},\qquad p = P(\chi^2_{J-1} \ge \chi^2),

    with :math:`N = \sum_j O_j`. A row with :math:`N = 0` has statistic 0 and p-value 1.
    """
    a = check_alpha(alpha)
    try:
        obs = np.array(counts, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise InputError("counts: expected an array of counts with arms on the last axis") from None
    if obs.ndim == 0 or obs.shape[-1] < 2:
        raise InputError("counts: expected at least 2 arms on the last axis")
    if not np.isfinite(obs).all() or (obs < 0).any():
        raise InputError("counts: counts must be finite and >= 0")
    pi = _shares(shares, obs.shape[-1])
    n = obs.sum(axis=-1, keepdims=True)
    exp = n * pi
    with np.errstate(invalid="ignore", divide="ignore"):
        stat = np.where(n[..., 0] > 0, ((obs - exp) ** 2 / np.where(exp > 0, exp, 1.0)).sum(axis=-1), 0.0)
    df = obs.shape[-1] - 1
    p = _spc.chdtrc(df, stat)
    return SrmResult(np.asarray(stat), np.asarray(p), df, obs, exp, a, "chisquare")


def srm_impressions(
    imp_a: ArrayLike, imp_b: ArrayLike, share_b: float = 0.5, *, alpha: float = 0.001
) -> SrmResult:
    r"""Randomisation test of the impression split between two arms, clustered by user.

    Parameters
    ----------
    imp_a, imp_b:
        Impressions per user in A and B, shapes ``(..., n_a)`` and ``(..., n_b)`` (leading
        shapes broadcast); users with 0 impressions may be included or left out.
    share_b:
        Planned probability of a user being in B. Default 0.5.
    alpha:
        Flagging threshold. Default 0.001.

    Notes
    -----
    With :math:`M = \sum_i m_i` over both arms and :math:`T` the impressions in B,

    .. math::

        z = \frac{T - \pi_B M}{\sqrt{\pi_B(1 - \pi_B)\sum_i m_i^2}},\qquad
        p = P(\chi^2_1 \ge z^2),

    exact in mean and variance under Bernoulli assignment of users, conditional on their
    impression counts (a design-based test; normal approximation for the distribution).
    """
    a = check_alpha(alpha)
    pb = float(share_b)
    if not 0.0 < pb < 1.0:
        raise InputError(f"share_b must be in (0, 1), got {share_b!r}")
    arrs = []
    for name, val in (("imp_a", imp_a), ("imp_b", imp_b)):
        try:
            arr = np.asarray(val, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{name}: expected an array of impression counts per user") from None
        if arr.ndim == 0:
            raise InputError(f"{name}: expected users on the last axis, got a scalar")
        if not np.isfinite(arr).all() or (arr < 0).any():
            raise InputError(f"{name}: impression counts must be finite and >= 0")
        arrs.append(arr)
    ma, mb = arrs
    try:
        ta, tb = np.broadcast_arrays(ma.sum(axis=-1), mb.sum(axis=-1))
    except ValueError:
        raise InputError(f"imp_a and imp_b: leading shapes {ma.shape[:-1]} and {mb.shape[:-1]} do not "
                         "broadcast") from None
    ss = (ma * ma).sum(axis=-1) + (mb * mb).sum(axis=-1)
    tot = ta + tb
    var = pb * (1.0 - pb) * ss
    with np.errstate(invalid="ignore", divide="ignore"):
        z2 = np.where(var > 0, (tb - pb * tot) ** 2 / np.where(var > 0, var, 1.0), 0.0)
    p = _spc.chdtrc(1, z2)
    obs = np.stack([ta, tb], axis=-1)
    exp = np.stack([(1.0 - pb) * tot, pb * tot], axis=-1)
    return SrmResult(np.asarray(z2), np.asarray(p), 1, obs, exp, a, "clustered-impressions")
