r"""CUPED in the simulator: a pre-period before the experiment and the adjusted A/B estimates.

Pre-period
----------
An A/B design with ``analysis.cuped: {pre_days: N}`` gets, in every replicate, ``N`` simulated
days *before* the experiment (hours ``-24 N .. -1``, with the same diurnal and weekly pattern):
the same users (the replicate's activities and user types), the same traffic model and click
models, and every impression served ranker A (both future arms see A). Each user's per-user
sums there (queries, clicks, abandoned queries, reciprocal ranks) are the covariate of CUPED /
regression adjustment (Deng, Xu, Kohavi and Walker 2013) of the same user's experiment metric.

The pre-period is drawn from its own child stream of the replicate's SeedSequence (key
``(3, "pre_period", N)``; the traffic is on ``(0,)`` and the designs on ``(1, ...)``), so the
experiment's traffic, clicks and unadjusted estimates are bit-identical with and without it.
Designs with the same ``pre_days`` share one pre-period per replicate (it is the same history).

Estimates (side rows of each daily checkpoint)
----------------------------------------------
For the users active in the experiment so far:

- ``cuped:<metric>``: the CUPED estimate of ``B - A`` with its standard error, CI and p-value
  (:func:`onlineeval.stats.cuped.cuped_ratio`, delta method and z, for ``test: delta``;
  :func:`onlineeval.stats.cuped.cuped_mean` of per-user ratios, a Welch-type t whose df the row
  records, for ``test: welch``);
- ``cuped_R:<metric>``: ``estimate`` = :math:`R`, the multiple correlation of the experiment
  value with the covariates (pre-period value and the indicator of pre-period activity),
  pooled within arms; ``n_users`` = the active users *with* pre-period activity;
- ``cuped_rho:<metric>``: ``estimate`` = :math:`\rho`, the pooled within-arm correlation of the
  experiment value with the pre-period value alone (0 for users without pre-period activity).

Conventions: for ``test: delta`` the values correlated are the per-user delta-method influence
values of the arm's ratio, :math:`e_i = (x_i - \hat R_j y_i)/\bar y_j` (experiment) and
:math:`f_i` (the same with the pre-period sums and the arm's pre-period ratio); for
``test: welch`` the per-user ratios. **Users without pre-period activity** (no query in the
pre-period) get pre value 0 and the indicator covariate "has pre-period activity" (the stats
module's convention), so they are adjusted by their group mean.

With the optimal coefficient the adjusted variance is :math:`(1 - R^2)` times the unadjusted
(:math:`1 - \rho^2` with one covariate); :func:`cuped_summary` checks this against the
variance across replicates and checks that the adjusted estimate is unbiased for the exact
truth (which CUPED does not change).
"""

from __future__ import annotations

import copy
import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from simulations.sampling import child_seed

__all__ = [
    "CUPED_PREFIX",
    "RHO_PREFIX",
    "R_PREFIX",
    "PrePeriod",
    "attach_pre_periods",
    "cuped_lines",
    "cuped_rows",
    "cuped_summary",
    "pooled_correlations",
    "simulate_pre_period",
]

CUPED_PREFIX = "cuped:"

#: the adjusted estimate's test by the design's ``test`` (summary.json ``cuped.<design>.test``)
ADJUSTED_TEST = {"delta": "the delta method's z", "welch": "a Welch-type t (onlineeval.stats.cuped_welch)",
                 "delta_t": "the CR2 t with Bell and McCaffrey's df (onlineeval.stats.cuped_ratio_cr2)"}
R_PREFIX = "cuped_R:"
RHO_PREFIX = "cuped_rho:"
_PRE_KEY = 3
#: the metric sums of an A/B design (as simulations.designs.ab.METRICS) kept for the pre-period
_SUMS = ("clicks", "abandoned", "rr")
#: Monte Carlo standard errors allowed between the replicate reduction and R^2, and for the bias
CHECK_SE = 4.0
_BOOTSTRAP = 2000


@dataclass(frozen=True)
class PrePeriod:
    """Per-user sums of a replicate's pre-period (every user served ranker A).

    Attributes
    ----------
    days:
        Length of the pre-period.
    sums:
        ``impressions``, ``clicks``, ``abandoned``, ``rr`` (and ``utility`` for a design whose metric is
        ``utility``): arrays of shape ``(population,)``.
    """

    days: int
    sums: dict[str, np.ndarray]
    #: ``(4, population)``: the rows ``impressions``, ``clicks``, ``abandoned``, ``rr`` (``sums`` holds views of them;
    #: None when built from separate arrays: :func:`pre_block` stacks them)
    block: np.ndarray | None = None


def pre_block(pre: PrePeriod, accumulators: tuple[str, ...] = _SUMS) -> np.ndarray:
    """The pre-period's rows ``impressions`` and ``accumulators`` (by default ``clicks``, ``abandoned``, ``rr``: an
    A/B design's :attr:`~simulations.designs.ab.ABDesign.accumulators`), ``(1 + len(accumulators), population)``:
    its block, or the sums stacked when they are not the block's rows (or not all of them)."""
    keys = ("impressions", *accumulators)
    if (pre.block is not None and len(pre.block) == len(keys)
            and all(pre.sums[k].base is pre.block and np.shares_memory(pre.sums[k], pre.block[i])
                    for i, k in enumerate(keys))):
        return pre.block
    return np.stack([pre.sums[k] for k in keys])


def simulate_pre_period(traffic: Any, world: Any, users: Any, days: int, rng: np.random.Generator,
                        utility: bool = False) -> PrePeriod:
    """Simulate ``days`` days before hour 0 with ranker A for everyone (``utility``: also each user's sum of the
    ``utility`` metric, :func:`simulations.designs.ab.utility_values`; no other number changes).

    ``traffic`` (:class:`simulations.traffic.TrafficModel`) supplies the users' activities and
    types and the arrival model; a shallow copy draws the arrivals from ``rng``, which also
    samples the clicks, so the replicate's own traffic stream is not touched.
    """
    from simulations.designs.ab import (
        _click_patterns,
        _click_values,
        run_step,
        step_inputs,
        utility_values,
        utility_weights,
    )

    model = copy.copy(traffic)
    model.rng = rng
    population = traffic.population
    keys = ("impressions", *_SUMS, *(("utility",) if utility else ()))
    block = np.zeros((len(keys), population), dtype=np.float64)
    sums = {k: block[i] for i, k in enumerate(keys)}  # rows of one block: one gather per arm
    grades_a = world.ranked_labels("A")  # (Q, depth): rows equal to shown_labels of A's lists
    by_pattern = _click_patterns(grades_a.shape[1])
    weights = utility_weights(world, grades_a.shape[1]) if utility else None
    step = traffic.batch_hours
    # the A/A batch step's compiled loop (the same draws and sums)
    fused = step_inputs(users, grades_a, population, weights)
    no_b = np.zeros(population, dtype=np.bool_)
    for hour in range(-24 * days, 0, step):
        batch = model.batch(hour, step)
        if len(batch) == 0:
            continue
        if fused is not None and run_step(fused, batch, no_b, 0, rng, sums["clicks"], sums["abandoned"], sums["rr"],
                                          sums.get("utility")):
            from simulations import kernels

            kernels.add_ones(sums["impressions"], batch.user)
            continue
        # as the A/B batch step: one gather of the grades, the per-impression values, the counts added in place
        # (exact partial sums: the bincount's bits), the reciprocal ranks by the bincount
        clicks = users.sample(grades_a.take(batch.query, axis=0), batch.user_type, rng)
        n_clicks, abandoned, rr = _click_values(clicks, by_pattern)
        np.add.at(sums["impressions"], batch.user, 1.0)
        np.add.at(sums["clicks"], batch.user, n_clicks)
        np.add.at(sums["abandoned"], batch.user, abandoned)
        sums["rr"] += np.bincount(batch.user, weights=rr, minlength=population)
        if weights is not None:
            sums["utility"] += np.bincount(batch.user, weights=utility_values(clicks, weights), minlength=population)
    return PrePeriod(days, sums, block)


def attach_pre_periods(traffic: Any, designs: list[Any], seq: np.random.SeedSequence) -> None:
    """Give every A/B design with ``analysis.cuped`` its replicate's pre-period (attribute
    ``pre_period``), one simulation per distinct ``pre_days`` on key ``(3, "pre_period", N)`` (with the
    ``utility`` sums when a design of those days has ``metric: utility``: the same draws and other sums)."""
    done: dict[int, PrePeriod] = {}
    cuped = [d for d in designs if d.kind == "ab" and getattr(d.config.analysis, "cuped", None) is not None]
    for design in cuped:
        n = design.config.analysis.cuped.pre_days
        if n not in done:
            rng = np.random.default_rng(child_seed(seq, _PRE_KEY, "pre_period", n))
            utility = any(d.config.metric == "utility" and d.config.analysis.cuped.pre_days == n for d in cuped)
            done[n] = simulate_pre_period(traffic, design.world, design.users, n, rng, utility)
        design.pre_period = done[n]


# ----------------------------------------------------------------------------- per checkpoint
def pooled_correlations(
    y: np.ndarray, x: np.ndarray, active: np.ndarray, in_b: np.ndarray
) -> tuple[float, float]:
    r"""``(R, rho)`` pooled within the arms.

    ``rho``: correlation of ``y`` with ``x`` after centring each within its arm.
    ``R``: multiple correlation of ``y`` with ``(x, active)`` (``active`` the 0/1 indicator of
    pre-period activity), :math:`R^2 = s^\top S^{+} s / S_{yy}` from the pooled within-arm
    cross-products (a constant or collinear covariate drops out through the pseudo-inverse).
    """
    cols = np.stack([y, x, active.astype(np.float64)], axis=1)
    centred = np.empty_like(cols)
    for arm in (in_b, ~in_b):
        centred[arm] = cols[arm] - cols[arm].mean(axis=0)
    return _correlations(centred)


def _correlations(centred: np.ndarray) -> tuple[float, float]:
    """``(R, rho)`` from the within-arm centred ``[y, x, active]`` columns (:func:`pooled_correlations`)."""
    return _correlations_s(centred.T @ centred)


def _correlations_s(s: np.ndarray) -> tuple[float, float]:
    """:func:`_correlations` from the cross-products ``s = centred.T @ centred`` (3 x 3)."""
    syy = s[0, 0]
    if not syy > 0:
        return math.nan, math.nan
    rho = s[0, 1] / math.sqrt(syy * s[1, 1]) if s[1, 1] > 0 else 0.0
    r2 = float(s[0, 1:] @ np.linalg.pinv(s[1:, 1:]) @ s[1:, 0]) / syy
    return math.sqrt(min(max(r2, 0.0), 1.0)), float(rho)


#: :func:`_r2_closed` inverts the covariates' 2 x 2 cross-products in closed form above this ratio of its smaller to
#: its larger eigenvalue (rounding then ~1e-16 x the condition number, as the SVD's); below it np.linalg.pinv
_CLOSED_COND = 1e-3


def _r2_closed(s: list[list[float]]) -> float | None:
    """``c' pinv(S) c`` of the cross-products ``s`` (3 x 3 of ``[y, x, active]``; ``S = s[1:, 1:]``, ``c = s[1:, 0]``)
    in closed form where the pseudo-inverse is an inverse of a well-conditioned matrix (eigenvalue ratio above
    :data:`_CLOSED_COND`) or of a diagonal one (pinv's cut-off 1e-15 of the largest entry); None otherwise (and for
    non-finite entries): :func:`np.linalg.pinv` then. The same value to rounding (tested against pinv); no LAPACK
    call, whose cost in a replicate (cold caches) was ~0.2 ms a checkpoint."""
    (_, c1, c2), (_, a, b), (_, _, d) = s
    if not all(math.isfinite(v) for v in (c1, c2, a, b, d)):
        return None
    if b == 0.0 and a >= 0.0 and d >= 0.0:  # diagonal: the singular values are a and d
        cut = 1e-15 * max(a, d)
        r2 = (c1 * c1 / a if a > cut else 0.0) + (c2 * c2 / d if d > cut else 0.0)
        return r2 if math.isfinite(r2) else None
    det = a * d - b * b
    if a > 0.0 and d > 0.0 and det > _CLOSED_COND * ((a + d) * (a + d)):  # smallest / largest eigenvalue > it
        r2 = (d * c1 * c1 - 2.0 * b * c1 * c2 + a * c2 * c2) / det
        return r2 if math.isfinite(r2) else None  # (a * d overflowing makes (a + d)^2 overflow: no closed form)
    return None


def _correlations_many(pooled: list[list[list[float]]]) -> list[tuple[float, float]]:
    """:func:`_correlations` of each metric's pooled within-arm cross-products ``s`` (3 x 3, of ``[y, x,
    active]``: ``centred.T @ centred``): ``R^2`` in closed form (:func:`_r2_closed`), or by the pseudo-inverses
    of the others in one stacked call."""
    out: list[tuple[float, float]] = [(math.nan, math.nan)] * len(pooled)
    defined = [i for i, s in enumerate(pooled) if s[0][0] > 0]
    if not defined:
        return out
    r2: list[Any] = [_r2_closed(pooled[i]) for i in defined]
    rest = [j for j, v in enumerate(r2) if v is None]
    if rest:
        s = np.array([pooled[defined[j]] for j in rest])
        if not np.isfinite(s).all():  # as _correlations would (pinv of a non-finite matrix raises)
            for i in defined:
                out[i] = _correlations_s(np.array(pooled[i]))
            return out
        by_pinv = np.einsum("ki,kij,kj->k", s[:, 0, 1:], np.linalg.pinv(s[:, 1:, 1:]), s[:, 1:, 0]).tolist()
        for j, v in zip(rest, by_pinv, strict=True):
            r2[j] = v
    for j, i in enumerate(defined):
        (syy, sxy, _), (_, sxx, _), _ = pooled[i]
        rho = np.float64(sxy) / np.sqrt(np.float64(syy) * sxx) if sxx > 0 else 0.0  # float64: as _correlations
        out[i] = (math.sqrt(min(max(r2[j] / syy, 0.0), 1.0)), float(rho))
    return out


def _pooled_arms(arm_cols: list[tuple[np.ndarray, list[np.ndarray]]], n: int) -> tuple[float, float]:
    """:func:`pooled_correlations` from each arm's positions among the ``n`` users and its ``[y, x, active]``
    values (in the order of those positions; ``active`` 0/1): the same centred matrix, so the same bits
    (tested). ``cols[arm].mean(axis=0)`` of :func:`pooled_correlations` reduces a C-ordered ``(n, 3)`` array
    over its rows, adding row after row: each column's mean is its running sum's last value / n (a cumsum,
    4x faster than the strided reduction); the 0/1 column's sum is exact in any order (``sum``). Each centred
    column is written into its column of the matrix at the arm's positions (no ``(n, 3)`` stack, no flat
    positions)."""
    centred = np.empty((n, 3), dtype=np.float64)
    for idx, (y, x, active) in arm_cols:
        for j, v in enumerate((y, x)):
            centred[:, j][idx] = v - np.cumsum(v)[-1] / v.size
        centred[:, 2][idx] = active - active.sum() / active.size
    return _correlations(centred)


def cuped_rows(design: Any, day: int) -> list[Any]:
    """The ``cuped:``, ``cuped_R:`` and ``cuped_rho:`` rows of ``design`` at checkpoint ``day``
    (none when it has no pre-period); NaN where the estimates are not defined yet.

    ``test: delta``: the numbers of ``design.checkpoint_stats()`` (one pass over each arm's users for the three
    metrics, :func:`onlineeval.stats.cuped._cuped_ratio_stacked`): the adjusted estimates of
    :func:`onlineeval.stats.cuped.cuped_ratio` and the correlations of :func:`pooled_correlations` to rounding
    (tested to 1e-12 against the previous code). ``test: welch``: each arm's values gathered once per
    checkpoint by the arm's user ids (``design.active_arms()``), :func:`onlineeval.stats.cuped.cuped_mean` and
    the correlations arm by arm (:func:`_pooled_arms`, the bits of :func:`pooled_correlations`)."""
    pre: PrePeriod | None = getattr(design, "pre_period", None)
    if pre is None:
        return []
    from simulations.designs.base import CheckpointRow

    names = design.metric_names()
    nan5 = (math.nan,) * 5
    if design.config.test == "delta_t":
        adjusted, dfs, corr, n_users, n_impr, n_pre = _cr2_parts(design, pre, names)
    elif design.config.test != "welch":
        st = design.checkpoint_stats()
        n_users, n_impr, n_pre = st.n_a + st.n_b, st.n_impressions, st.n_pre
        if st.adjusted is not None and st.pooled is not None:
            adjusted = [st.adjusted[m] for m in names]
            corr = _correlations_many([st.pooled[m] for m in names])
        else:
            adjusted, corr = [nan5] * len(names), [(math.nan, math.nan)] * len(names)
        dfs = [math.inf] * len(names)  # the delta method's z
    else:
        adjusted, dfs, corr, n_users, n_impr, n_pre = _welch_parts(design, pre, names)
    rows = []
    for i, metric in enumerate(names):
        r, rho = corr[i]
        rows.append(CheckpointRow(design.name, design.aa, day, CUPED_PREFIX + metric, i == 0, *adjusted[i], n_users,
                                  n_impr, dfs[i]))
        rows.append(CheckpointRow(design.name, design.aa, day, R_PREFIX + metric, False, r, *nan5[:4], n_pre, n_impr))
        rows.append(CheckpointRow(design.name, design.aa, day, RHO_PREFIX + metric, False, rho, *nan5[:4], n_users,
                                  n_impr))
    return rows


def _welch_parts(design: Any, pre: PrePeriod, names: list[str]) -> tuple[list[Any], list[float],
                                                                         list[tuple[float, float]], int, int, int]:
    """``(adjusted values, their df, (R, rho), n_users, n_impressions, n_pre)`` per metric of a ``test: welch``
    design (the df of :func:`onlineeval.stats.cuped.cuped_mean`'s Welch-type t)."""
    from onlineeval.stats.cuped import cuped_mean
    from simulations.designs.ab import METRICS

    imp = design.sums["impressions"]
    users, ia, ib, _, _ = design.active_arms()
    n_users, n_impr = int(users.size), int(imp.sum())
    pre_den = pre.sums["impressions"].take(users)
    active = pre_den > 0
    n_pre = int(active.sum())
    if not design._has_data(users, {}):
        return ([(math.nan,) * 5] * len(names), [math.nan] * len(names), [(math.nan, math.nan)] * len(names), n_users,
                n_impr, n_pre)
    act_a, act_b = active.take(ia), active.take(ib)
    den = imp.take(users)
    adjusted, dfs, corr = [], [], []
    for metric in names:
        key = METRICS[metric]
        y = design.sums[key].take(users) / den
        pnum = pre.sums[key].take(users)
        x = np.where(active, pnum / np.where(active, pre_den, 1.0), 0.0)
        ya, yb, xa, xb = y.take(ia), y.take(ib), x.take(ia), x.take(ib)
        e = cuped_mean(ya, xa, yb, xb, pre_active_a=act_a, pre_active_b=act_b, alpha=design.alpha).adjusted
        adjusted.append((float(e.estimate), float(e.se), float(e.ci_low), float(e.ci_high), float(e.pvalue)))
        dfs.append(float(e.df))
        corr.append(_pooled_arms([(ib, [yb, xb, act_b.astype(np.float64)]), (ia, [ya, xa, act_a.astype(np.float64)])],
                                 users.size))
    return adjusted, dfs, corr, n_users, n_impr, n_pre


def _cr2_parts(design: Any, pre: PrePeriod, names: list[str]) -> tuple[list[Any], list[float],
                                                                       list[tuple[float, float]], int, int, int]:
    """:func:`_welch_parts` of a ``test: delta_t`` design: :func:`onlineeval.stats.cuped_cr2.cuped_ratio_cr2_values`
    at the design's intra-user correlation of the metric (its own rows' working model), ``R`` the square root of
    the share of the users' residual sums of squares the covariates remove, ``rho`` the same with the pre-period
    ratio alone (signed as its coefficient)."""
    from onlineeval.stats.cuped_cr2 import covariates, cuped_ratio_cr2_values, explained_share
    from simulations.designs.ab import METRICS

    imp = design.sums["impressions"]
    users, ia, ib, users_a, users_b = design.active_arms()
    n_users, n_impr = int(users.size), int(imp.sum())
    pre_den = pre.sums["impressions"].take(users)
    n_pre = int((pre_den > 0).sum())
    nan = [math.nan] * len(names)
    if not design._has_data(users, {}):
        return [(math.nan,) * 5] * len(names), nan, [(math.nan, math.nan)] * len(names), n_users, n_impr, n_pre
    in_b = np.zeros(users.size, dtype=bool)
    in_b[ib] = True
    y = imp.take(users)
    adjusted, dfs, corr = [], [], []
    for metric in names:
        key = METRICS[metric]
        x = design.sums[key].take(users)
        z = covariates(pre.sums[key].take(users), pre_den)
        icc = design.intra_user_correlation(metric, users_a, users_b)
        vals, df, _, explained = cuped_ratio_cr2_values(x, y, in_b, z, design.alpha, icc=icc)
        alone, theta1 = explained_share(x, y, in_b, z[:, :1])
        adjusted.append(vals)
        dfs.append(df)
        corr.append((math.sqrt(max(explained, 0.0)) if math.isfinite(explained) else math.nan,
                     math.copysign(math.sqrt(max(alone, 0.0)), theta1[0]) if math.isfinite(alone) else math.nan))
    return adjusted, dfs, corr, n_users, n_impr, n_pre


# ----------------------------------------------------------------------------- summary
def _last(rows: pd.DataFrame, design: str, aa: bool, metric: str) -> pd.DataFrame:
    sub = rows[(rows["design"] == design) & (rows["aa"] == aa) & (rows["metric"] == metric)]
    if not len(sub):
        return sub
    return sub[sub["day"] == sub["day"].max()].sort_values("replicate")


def _reduction_check(u: np.ndarray, v: np.ndarray, r2: np.ndarray, seed: int) -> dict[str, float]:
    """Replicate variance reduction ``1 - var(v)/var(u)`` (paired replicates), the mean R^2, and
    the bootstrap SE over replicates of each and of their difference."""
    def stats(idx: np.ndarray) -> np.ndarray:
        vu = u[idx].var(axis=-1, ddof=1)
        vv = v[idx].var(axis=-1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):  # a resample of one repeated value: NaN, dropped
            red = np.where(vu > 0, 1.0 - vv / np.where(vu > 0, vu, 1.0), np.nan)
        return np.stack([red, r2[idx].mean(axis=-1), red - r2[idx].mean(axis=-1)])

    point = stats(np.arange(u.size)[None, :])[:, 0]
    rng = np.random.default_rng(seed)
    boot = stats(rng.integers(0, u.size, size=(_BOOTSTRAP, u.size)))
    boot = boot[:, np.isfinite(boot).all(axis=0)]
    se = boot.std(axis=1, ddof=1) if boot.shape[1] > 1 else np.full(3, np.nan)
    return {"replicates": float(point[0]), "replicates_se": float(se[0]), "theoretical_R2": float(point[1]),
            "theoretical_R2_se": float(se[1]), "difference": float(point[2]), "difference_se": float(se[2])}


def cuped_summary(
    rows: pd.DataFrame, side_rows: pd.DataFrame, designs: dict[str, Any], truths: dict[tuple[str, str], Any],
    config: Any,
) -> dict[str, Any]:
    """Per A/B design with a pre-period and per metric, on the last day: the variance reduction
    across replicates (``1 - var_adj / var_unadj`` with its bootstrap SE over replicates) and
    within replicates (``1 - mean se_adj^2 / mean se^2``), the mean :math:`\\rho` and :math:`R`,
    the theoretical reduction :math:`R^2` (= :math:`\\rho^2` with one covariate) and the check
    that the two agree within 4 SE, the adjusted estimator's bias against the exact truth
    (within 4 SE), its A/A rate, and the required impressions / days / users with CUPED: from the same
    :math:`se^2 = a/N + b` fit as the main table's, with its spread and 'unstable' flag from the fit refitted on
    bootstrap resamples of the replicates (:func:`simulations.analysis.required_impressions_uncertainty`, seeded
    by the design and ``cuped:<metric>``), withheld (``required: {"withheld": reason}``, the values under
    ``required_if_unbiased``) when the adjusted estimate or the A/B estimate is biased."""
    from onlineeval.stats import binomial_band
    from simulations.analysis import (
        df_model,
        expected_distinct_users,
        extrapolation_factor,
        is_extrapolated,
        replicate_arrays,
        required_impressions,
        required_impressions_uncertainty,
        size_seed,
        variance_model,
    )

    alpha, target = config.analysis.alpha, config.analysis.power
    out: dict[str, Any] = {}
    for design in config.designs:
        if design.type != "ab" or design.analysis.cuped is None or design.name not in designs:
            continue
        entry: dict[str, Any] = {"pre_days": design.analysis.cuped.pre_days, "simulated_days": int(config.traffic.days),
                                 "test": ADJUSTED_TEST[design.test or "delta"], "metrics": {}}
        for metric, main in designs[design.name].items():
            plain = _last(rows, design.name, False, metric)
            adj = _last(side_rows, design.name, False, CUPED_PREFIX + metric)
            rr = _last(side_rows, design.name, False, R_PREFIX + metric)
            rho = _last(side_rows, design.name, False, RHO_PREFIX + metric)
            ok = (np.isfinite(plain["estimate"].to_numpy()) & np.isfinite(adj["estimate"].to_numpy())
                  & np.isfinite(rr["estimate"].to_numpy()))
            n = int(ok.sum())
            if n < 3:
                continue
            u, v = plain["estimate"].to_numpy()[ok], adj["estimate"].to_numpy()[ok]
            r = rr["estimate"].to_numpy()[ok]
            truth = truths[(design.name, metric)].value
            seed = zlib.crc32(f"{config.seed}:{design.name}:{metric}".encode())
            red = _reduction_check(u, v, r**2, seed)
            se_u, se_v = plain["se"].to_numpy()[ok], adj["se"].to_numpy()[ok]
            bias, bias_se = float(v.mean() - truth), float(v.std(ddof=1) / math.sqrt(n))
            m: dict[str, Any] = {
                "replicates": n,
                "day": int(adj["day"].iloc[0]),
                "true_effect": truth,
                "unadjusted": {"mean_estimate": float(u.mean()), "sd_estimate": float(u.std(ddof=1)),
                               "mean_se": float(se_u.mean())},
                "adjusted": {"mean_estimate": float(v.mean()), "sd_estimate": float(v.std(ddof=1)),
                             "mean_se": float(se_v.mean())},
                "rho": float(np.nanmean(rho["estimate"].to_numpy()[ok])),
                "R": float(r.mean()),
                "users_with_pre_period": float(rr["n_users"].to_numpy()[ok].mean() / plain["n_users"].to_numpy()[ok]
                                               .mean()),
                "variance_reduction": {
                    "replicates": red["replicates"],
                    "replicates_se": red["replicates_se"],
                    "within_replicate": float(1.0 - np.mean(se_v**2) / np.mean(se_u**2)),
                    "theoretical_R2": red["theoretical_R2"],
                    "theoretical_R2_se": red["theoretical_R2_se"],
                    "difference_se": red["difference_se"],
                    "matches": bool(abs(red["difference"]) <= CHECK_SE * red["difference_se"]),
                },
                "bias": bias,
                "bias_se": bias_se,
                "unbiased": bool(abs(bias) <= CHECK_SE * bias_se),
            }
            days = side_rows[(side_rows["design"] == design.name) & (~side_rows["aa"])
                             & (side_rows["metric"] == CUPED_PREFIX + metric)]
            by_day = days.groupby("day").agg(se=("se", "mean"), imp=("n_impressions", "mean"),
                                             df=("df", "median")).sort_index()
            fit = variance_model(by_day["imp"].to_numpy(), by_day["se"].to_numpy())
            # test: welch: the Welch-type t's size at the days' df, as the main table's unadjusted t rows (z: None)
            dfm = df_model(by_day["imp"].to_numpy(), by_day["df"].to_numpy())
            detectable = main.get("detectable", True)
            n_req = required_impressions(fit, truth, alpha, target, dfm) if detectable else math.inf
            finite = math.isfinite(n_req)
            qpd = config.traffic.queries_per_day
            # review 6, F6: CUPED's days are analytic from the a/N + b fit, extrapolated past the simulated days like
            # the main table's '*' sizes: the factor (days / simulated days), flagged beyond EXTRAPOLATION_FLAG
            factor = extrapolation_factor(n_req, qpd, config.traffic.days)
            m["required"] = {
                "impressions": n_req if finite else None,
                "days": n_req / qpd if finite else None,
                "days_extrapolation": factor,
                "extrapolated": is_extrapolated(factor),
                "unadjusted_days_extrapolation": main.get("analytic_required_days_extrapolation"),
                "users": float(expected_distinct_users(n_req, config.users.population, config.users.activity.sigma))
                if finite else None,
                "unadjusted_impressions": main.get("analytic_required_impressions"),
                "unadjusted_days": main.get("analytic_required_days"),
                "unadjusted_users": main.get("analytic_required_users"),
                "unadjusted_unstable": bool(main.get("analytic_required_impressions_unstable")),
            }
            if detectable:
                # the same a/N + b fit as the main table's, so the same ill-conditioning near the floor: its
                # refits on bootstrap resamples of the replicates (seeded by design and 'cuped:<metric>')
                wide_se, wide_n = replicate_arrays(days)
                unc = required_impressions_uncertainty(
                    fit, wide_se, wide_n, truth, float(truths[(design.name, metric)].se), alpha, target,
                    size_seed(config.seed, design.name, CUPED_PREFIX + metric), dfm=dfm)
                lo_hi = unc["range"]
                m["required"].update({
                    "impressions_rel_se": unc["rel_se"], "impressions_range": lo_hi,
                    "days_range": None if lo_hi is None else [v / qpd for v in lo_hi],
                    "unreachable_share": unc["unreachable_share"], "variance_floor_to_target": unc["floor_ratio"],
                    "variance_floor_fitted": unc["floor_fitted"],
                    # as the main table's '?': the refits' rule, or extrapolated beyond EXTRAPOLATION_FLAG
                    "unstable": bool(unc["unstable"] or m["required"]["extrapolated"])})
            if main.get("analytic_withheld") or not m["unbiased"]:
                # the A/B estimate or the adjusted one is biased: days computed as if unbiased are withheld
                m["required_if_unbiased"] = m["required"]
                m["required"] = {"withheld": "biased: " + ("the adjusted estimate misses the exact truth by more "
                                                           "than 4 SE" if not m["unbiased"] else
                                                           "the A/B estimate is biased (main table)")}
            aa = _last(side_rows, design.name, True, CUPED_PREFIX + metric)
            p = aa["pvalue"].to_numpy() if len(aa) else np.array([])
            if p.size:
                band = binomial_band(p.size, alpha, 0.99)
                k = int(np.sum(p < alpha))
                m["aa"] = {"false_positive_rate": k / p.size, "replicates": int(p.size),
                           "binomial_99_band": [band.lo_rate, band.hi_rate], "within_band": band.contains(k)}
            entry["metrics"][metric] = m
        out[design.name] = entry
    return out


def cuped_lines(summary: dict[str, Any]) -> list[str]:
    """The terminal block of :func:`cuped_summary`."""
    from simulations.report_numbers import rate_text
    from simulations.report_sizes import extrapolated_range_note

    cup = summary.get("cuped") or {}
    if not cup:
        return []
    lines = ["", ("CUPED (pre-period: the same users on ranker A; covariate = each user's pre-period metric, delta-"
                  "method influence values for ratios; users without pre-period activity: value 0 + an indicator; "
                  "last day; reduction = 1 - var_adj/var_unadj across replicates +- bootstrap SE, within = 1 - "
                  "mean se_adj^2/se^2, R^2 = theory (rho: pre value alone); bias vs the exact truth; '!' = "
                  "beyond 4 SE):"),
             (f"  {'design':10s} {'metric':17s} {'pre':>4s} {'with pre':>8s} {'rho':>6s} {'R^2':>6s} "
              f"{'reduction':>15s} {'within':>7s} {'bias/SE':>8s} {'A/A':>6s}  days needed (unadjusted)")]
    unstable: list[str] = []
    starred = False
    for design, e in cup.items():
        for metric, m in e["metrics"].items():
            vr = m["variance_reduction"]
            red = f"{rate_text(vr['replicates'])}+-{rate_text(vr['replicates_se'])}" + ("" if vr["matches"] else "!")
            z = m["bias"] / m["bias_se"] if m["bias_se"] > 0 else 0.0
            aa = m.get("aa")
            aa_s = "-" if aa is None else f"{aa['false_positive_rate']:.3f}" + ("" if aa["within_band"] else "!")
            req = m["required"]
            if req.get("withheld"):
                days, base = "biased", "-"
            else:
                q, q0 = "?" if req.get("unstable") else "", "?" if req.get("unadjusted_unstable") else ""
                days = ("not reachable" + q if req["days"] is None else
                        _days_cell(req["days"], req.get("days_extrapolation"), q))
                base = "-" if req["unadjusted_days"] is None else _days_cell(
                    req["unadjusted_days"], req.get("unadjusted_days_extrapolation"), q0)
                starred |= "*" in days + base
                if q:
                    unstable.append(f"{design}/{metric} " + _days_range(req) + (
                        extrapolated_range_note(req["days_extrapolation"]) if req.get("extrapolated") else ""))
            with_pre = rate_text(m["users_with_pre_period"])
            lines.append(f"  {design:10s} {metric:17s} {e['pre_days']:>3d}d {with_pre:>8s} "
                         f"{m['rho']:>6.3f} {rate_text(vr['theoretical_R2']):>6s} {red:>15s} "
                         f"{rate_text(vr['within_replicate']):>7s} "
                         f"{z:>7.1f}{'' if m['unbiased'] else '!'} {aa_s:>6s}  {days} ({base})")
    if starred:
        from simulations.report_sizes import extrapolation_note

        days = {e.get("simulated_days") for e in cup.values()}
        lines.append("  days needed: analytic from se^2 = a/N + b as the main table's; '*' beyond the simulated days, "
                     "with the " + extrapolation_note(days.pop() if len(days) == 1 else "").replace("  ", " "))
    if unstable:
        from simulations.analysis import SIZE_BOOTSTRAP

        lines.append(f"  '?' unstable days needed (90% range of the a/N + b fit on {SIZE_BOOTSTRAP} bootstrap "
                     "resamples of the replicates; unadjusted: the main table's range): " + "; ".join(unstable))
    over = [(design, metric) for design, e in cup.items() for metric, m in e["metrics"].items()
            if _aa_above_band(m.get("aa"))]
    if over:
        tests = {design: cup[design].get("test", ADJUSTED_TEST["delta"]) for design, _ in over}
        lines.append("  '!' A/A above its band (" + ", ".join(f"{d}/{m}" for d, m in over) + "): the adjusted test ("
                     + "; ".join(f"{d}: {t}" for d, t in tests.items()) + ") rejects too often"
                     + ("; with few users test: delta_t takes CUPED's CR2 form (onlineeval.stats.cuped_ratio_cr2)"
                        if any(t == ADJUSTED_TEST["delta"] for t in tests.values()) else ""))
    if any(m["required"].get("withheld") for e in cup.values() for m in e["metrics"].values()):
        lines.append("  biased: the A/B estimate or the adjusted one misses the exact truth ('!'), so no days are "
                     "given (summary.json: required_if_unbiased)")
    return lines


def _aa_above_band(aa: dict[str, Any] | None) -> bool:
    """Whether a CUPED metric's adjusted A/A rate is above its 99% band (not below it: a conservative test)."""
    return bool(aa) and not aa["within_band"] and aa["false_positive_rate"] > aa["binomial_99_band"][1]


def _days_cell(days: float, factor: float | None, unstable: str) -> str:
    """A CUPED days-needed cell, marked as the main table's: within the simulated days the days alone (with
    ``unstable``, '?' or ''), beyond them '*', ``unstable`` and the factor (days / simulated days) with '!'
    beyond :data:`simulations.analysis.EXTRAPOLATION_FLAG`: '107.2*? 7.7x!'."""
    from simulations.report_numbers import days_text
    from simulations.report_sizes import extrapolation_factor_text

    if factor is None or not math.isfinite(factor) or factor <= 1.0:
        return days_text(days) + unstable
    return f"{days_text(days)}*{unstable} {extrapolation_factor_text(factor)}"


def _days_range(req: dict[str, Any]) -> str:
    """CUPED's days needed: the refits' 90% range, relative SE, floor ratio and unreachable share."""
    from simulations.analysis import spread_text

    from simulations.report_numbers import days_text

    return spread_text(req.get("days_range"), lambda v: f"{days_text(v)} days", req.get("impressions_rel_se"),
                       req.get("variance_floor_to_target"), req.get("unreachable_share"),
                       floor_fitted=req.get("variance_floor_fitted", True))
