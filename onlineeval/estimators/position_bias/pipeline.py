"""Choosing an examination estimator for a log, and the whole-pipeline bootstrap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from onlineeval.errors import ConfigError, InputError, must_be_one_of
from onlineeval.estimators.base import LoggedData, Reward, Target, get_reward
from onlineeval.estimators.position_bias._core import (
    FloatArray,
    IntArray,
    PositionBiasEstimate,
    _positive_int,
)
from onlineeval.estimators.position_bias.em import estimate_em, estimate_harvest
from onlineeval.estimators.position_bias.interventions import (
    estimate_randtop,
    estimate_swap,
)

__all__ = ["METHODS", "SWAP_SHARE", "PipelineInterval", "estimate_examination", "pipeline_bootstrap"]

#: the methods of :func:`estimate_examination` (``"auto"`` picks one, see there)
METHODS = ("swap", "randtop", "harvest", "em")
#: share of the impressions that swap pairs must hold for ``"auto"`` to use ``swap``
SWAP_SHARE = 0.5


def estimate_examination(
    data: LoggedData,
    method: str = "auto",
    *,
    ranker: ArrayLike | None = None,
    n_top: int | None = None,
) -> PositionBiasEstimate:
    """Estimate the relative examination probabilities with ``method``.

    ``method`` is one of :data:`METHODS` or ``"auto"`` (default): ``swap`` when the log is
    a swap experiment (its swap interventions cover every slot *and* hold at least
    :data:`SWAP_SHARE` of the impressions), else ``harvest`` (with ``ranker``, or each
    distinct list of a query as its own ranker), else an :class:`InputError` saying the
    log holds no interventions. A randomised production log (epsilon-greedy, mixtures)
    holds a few incidental swap pairs, seen about once each: on the 400,000-impression log
    of ``configs/counterfactual.yaml`` 195 pairs (about 50 per slot) covered 0.1% of the
    impressions, and the swap estimate from them was off by up to 74% (slot 3: 1.23 for
    0.71), which biased PBM-IPS by 8 standard errors (3 to 43 on eight other seeds); harvesting uses every impression
    and was within 2% there. ``randtop`` is never picked automatically (a uniform
    shuffle cannot be told from other randomisation by looking at the lists); ``em`` is
    not either (without features it is the likelihood of ``harvest`` over all pairs, including
    those one ranker moved, whose relevance may differ between the rankers' traffic).
    ``ranker`` goes to ``harvest``, ``n_top`` to ``randtop``.
    """
    if method == "swap":
        return estimate_swap(data)
    if method == "randtop":
        return estimate_randtop(data, n_top)
    if method == "harvest":
        return estimate_harvest(data, ranker)
    if method == "em":
        return estimate_em(data)
    if method != "auto":
        raise ConfigError(("estimate_with",), must_be_one_of(("auto", *METHODS), method))
    try:
        swap = estimate_swap(data)
        if swap.n_impressions >= SWAP_SHARE * data.n:
            return swap
        swap_err: InputError | str = (f"swap pairs hold only {swap.n_impressions} of {data.n} impressions "
                                      f"(auto needs {SWAP_SHARE:.0%})")
    except InputError as exc:
        swap_err = exc
    try:
        return estimate_harvest(data, ranker)
    except InputError as harvest_err:
        raise InputError(
            f"position bias (auto): neither swap interventions nor harvested ones identify the examination "
            f"probabilities of this log ({swap_err}; {harvest_err}); pass them as known values",
            data.source,
        ) from None


# ---------------------------------------------------------------------------- bootstrap
@dataclass(frozen=True)
class PipelineInterval:
    """Percentile interval of the whole estimate-examination-then-PBM-IPS pipeline.

    Attributes
    ----------
    value:
        PBM-IPS estimate on the full log with its estimated examination.
    ci_low, ci_high:
        The ``alpha/2`` and ``1 - alpha/2`` quantiles of the resampled estimates.
    alpha:
        Two-sided level.
    n_boot:
        Resamples drawn.
    n_failed:
        Resamples on which the examination could not be estimated (e.g. no intervention
        left); they are dropped, and the interval rests on ``n_boot - n_failed``.
    examination:
        ``(k,)`` the examination estimate on the full log.
    replicates:
        ``(n_boot - n_failed,)`` the resampled estimates.
    """

    value: float
    ci_low: float
    ci_high: float
    alpha: float
    n_boot: int
    n_failed: int
    examination: FloatArray
    replicates: FloatArray = field(repr=False)


EstimateFn = Callable[[LoggedData, IntArray], "PositionBiasEstimate | ArrayLike"]


def pipeline_bootstrap(
    data: LoggedData,
    target: Target,
    reward: Reward | str,
    estimate_fn: str | EstimateFn,
    n_boot: int,
    rng: np.random.Generator,
    *,
    alpha: float = 0.05,
    ranker: ArrayLike | None = None,
    click_propensity: str = "empirical",
    max_failed: float = 0.05,
) -> PipelineInterval:
    r"""Cluster-bootstrap interval of PBM-IPS with the examination re-estimated per resample.

    Clusters (``data.user``, else impressions) are drawn with replacement; on each
    resample :math:`b` the examination :math:`\hat\theta^{(b)}` is re-estimated and the
    PBM-IPS value :math:`\hat V^{(b)}` recomputed with it; the interval is the
    :math:`\alpha/2` and :math:`1-\alpha/2` percentiles of :math:`\hat V^{(b)}`. Unlike the
    plug-in interval of :meth:`PBMIPS.estimate` with ``examination`` fixed to an estimate,
    it includes the variance of :math:`\hat\theta`, which dominates when the
    interventions are few.

    Parameters
    ----------
    data, target, reward:
        As for :meth:`onlineeval.estimators.Estimator.estimate` (additive rewards).
    estimate_fn:
        A method name (see :func:`estimate_examination`; ``ranker`` is resampled with
        the rows) or a function ``fn(resampled_log, rows) -> PositionBiasEstimate``
        (or a ``(k,)`` array), where ``rows`` are the resample's row indices into
        ``data`` (to index side information).
    n_boot:
        Resamples (>= 100).
    rng:
        Random generator; the result is a deterministic function of its state.
    alpha:
        Two-sided level (default 0.05).
    ranker:
        ``(n,)`` ranker ids for ``harvest`` when ``estimate_fn`` is a name.
    click_propensity:
        PBM-IPS option (default ``"empirical"``).
    max_failed:
        Largest share of resamples whose estimation may fail (default 0.05) before an
        :class:`InputError` says the log is too small for this interval.

    Notes
    -----
    What is tested (``tests/test_estimators_position_bias.py``): on a 1,500-impression
    swap log (30 queries, 4 slots) the interval is wider than both plug-in intervals
    (about 1.2 times the CLT one); over 24 seeded logs of 800 impressions the 95%
    interval covered the exact value 22 times (the test only asks for at least the
    0.1% binomial quantile at 95%). Nothing more about its coverage is claimed.
    """
    from onlineeval.estimators.pbm_ips import PBMIPS

    n_boot = _positive_int(n_boot, "n_boot")
    if n_boot < 100:
        raise ConfigError(("n_boot",), f"must be >= 100 for a percentile interval, got {n_boot}")
    if not 0.0 < alpha < 1.0:
        raise ConfigError(("alpha",), f"must be in (0, 1), got {alpha!r}")
    rk = None if ranker is None else np.asarray(ranker)
    if rk is not None and rk.shape != (data.n,):
        raise InputError(f"ranker: expected shape ({data.n},), got {rk.shape}", data.source)

    if isinstance(estimate_fn, str):
        method = estimate_fn
        if method not in (*METHODS, "auto"):
            raise ConfigError(("estimate_fn",), must_be_one_of(("auto", *METHODS), method))

        def fn(d: LoggedData, rows: IntArray) -> PositionBiasEstimate | ArrayLike:
            return estimate_examination(d, method, ranker=None if rk is None else rk[rows])
    else:
        fn = estimate_fn

    def theta_of(d: LoggedData, rows: IntArray) -> FloatArray:
        out = fn(d, rows)
        return np.asarray(out.examination if isinstance(out, PositionBiasEstimate) else out, dtype=np.float64)

    def value(d: LoggedData, theta: FloatArray) -> float:
        est = PBMIPS(examination=tuple(float(x) for x in theta), click_propensity=click_propensity)
        t = est.terms(d, target, reward)
        offset = (get_reward(reward, d.k) if isinstance(reward, str) else reward).offset
        return float(offset + t.num.mean())

    all_rows = np.arange(data.n)
    theta_full = theta_of(data, all_rows)
    v_full = value(data, theta_full)
    if data.user is None:
        order = all_rows
        sizes = np.ones(data.n, dtype=np.int64)
    else:
        inv = data.user_groups[0]  # np.unique's inverse, computed once per log
        order = np.argsort(inv, kind="stable")
        sizes = np.bincount(inv)
    starts = np.cumsum(sizes) - sizes
    n_clusters = sizes.size
    reps: list[float] = []
    failed = 0
    for _ in range(n_boot):  # each resample re-runs the (vectorised) estimation
        pick = rng.integers(0, n_clusters, n_clusters)
        size = sizes[pick]
        offset = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)
        rows = order[np.repeat(starts[pick], size) + offset]
        d = data.take(rows)
        try:
            reps.append(value(d, theta_of(d, rows)))
        except InputError:
            failed += 1
    if failed > max_failed * n_boot:
        raise InputError(
            f"pipeline bootstrap: the examination could not be estimated on {failed} of {n_boot} resamples "
            f"(more than {max_failed:.0%}); the log holds too few interventions for this interval",
            data.source,
        )
    arr = np.asarray(reps)
    lo, hi = np.quantile(arr, [alpha / 2.0, 1.0 - alpha / 2.0])
    return PipelineInterval(v_full, float(lo), float(hi), float(alpha), n_boot, failed, theta_full, arr)
