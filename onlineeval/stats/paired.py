r"""Paired significance tests for offline evaluation on aligned per-query values.

Two or more systems are scored on the same queries; each non-baseline system is compared
with the baseline on every metric using the per-query differences
:math:`d_q = v_{\text{system},q} - v_{\text{baseline},q}`:

* randomisation (sign-flip) test of :math:`H_0`: the sign of every :math:`d_q` is
  equally likely + or - (Fisher 1935; Smucker, Allan and Carterette 2007, CIKM);
* paired bootstrap confidence interval of the mean difference, percentile and BCa
  (Efron and Tibshirani 1993, ch. 13-14);
* paired t-test;
* Holm's step-down correction over every comparison of one call (systems x metrics);
* effect size :math:`d_z = \bar d / s_d`, wins / losses / ties, and the worst per-query
  losses.

Everything random is driven by one seed: ``SeedSequence(seed).spawn`` gives each
comparison its own streams, assigned in sorted (metric, system) order so the results do
not depend on the order of the input rows.

Segment analysis (:func:`read_segments`, :func:`by_segment`, :func:`compare_segments`)
repeats any table for every value of every attribute of a per-query attribute file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import special as _spc

from onlineeval.errors import InputError
from onlineeval.stats._checks import as_values, check_alpha, check_level
from onlineeval.stats.online import Estimate

__all__ = [
    "RandomizationResult",
    "BootstrapCI",
    "QueryDiff",
    "PairedResult",
    "SegmentView",
    "paired_t_test",
    "randomization_test",
    "paired_bootstrap",
    "holm",
    "compare_systems",
    "results_to_frame",
    "worst_losses_to_frame",
    "read_segments",
    "iter_segments",
    "by_segment",
    "compare_segments",
    "MISSING_SEGMENT",
]

#: Upper bound on the number of cells (resamples x queries) held in memory at once.
_BLOCK_CELLS = 1 << 22
#: Relative tolerance (of sum |d|) under which a resampled statistic counts as equal to the
#: observed one, so that mathematically tied arrangements are not lost to rounding.
_TIE_RTOL = 1e-10
_U64_MAX = np.iinfo(np.uint64).max
#: Accepted names of the first (query id) column of a segment file.
_QUERY_HEADERS = frozenset({"query", "qid", "query_id"})
#: Segment value given to queries that are absent from the attribute file.
MISSING_SEGMENT = "<missing>"


# ----------------------------------------------------------------------------- records


class RandomizationResult(NamedTuple):
    """Outcome of :func:`randomization_test`.

    ``pvalue`` is two-sided; ``n_permutations`` is the number of sign vectors used
    (``2**n`` when ``exact``); ``statistic`` the observed mean difference.
    """

    pvalue: float
    statistic: float
    n_permutations: int
    exact: bool


class BootstrapCI(NamedTuple):
    """Outcome of :func:`paired_bootstrap`: mean difference and its bootstrap intervals.

    ``z0`` is the bias correction and ``acceleration`` the jackknife acceleration of the
    BCa interval; ``se`` the standard deviation of the bootstrap means.
    """

    mean: float
    se: float
    percentile_low: float
    percentile_high: float
    bca_low: float
    bca_high: float
    level: float
    n_bootstrap: int
    z0: float
    acceleration: float


@dataclass(frozen=True, slots=True)
class QueryDiff:
    """One query's values for baseline and system and their difference (system - baseline)."""

    query: str
    baseline: float
    system: float
    diff: float


@dataclass(frozen=True, slots=True)
class PairedResult:
    """Comparison of one system with the baseline on one metric over ``n`` shared queries.

    Differences are ``system - baseline``. ``effect_size`` is :math:`d_z = \\bar d / s_d`
    (mean difference over the sample standard deviation of the differences, ddof 1).
    ``p_randomization_holm`` and ``p_t_holm`` are Holm-adjusted over all comparisons of
    the call (or of the segment, for :func:`compare_segments`); ``significant`` uses the
    Holm-adjusted randomisation p-value. With ``n == 1`` the tests and intervals are
    undefined and reported as NaN. When every difference is 0 (identical values), the
    t statistic, ``p_t`` and ``effect_size`` are 0/0 and NaN (``p_randomization`` is 1).

    With few queries the bootstrap interval is too narrow: its plug-in standard error is
    :math:`\\sqrt{(n-1)/n}` times the usual one and it uses normal rather than t quantiles
    (Hesterberg 2015, The American Statistician 69:371-386), so a nominal 95% interval
    covers about :math:`P(|t_{n-1}| < 1.96 \\sqrt{(n-1)/n})` for normal differences: 0.75
    at n = 3, 0.85 at n = 5, 0.90 at n = 10 (simulated for the BCa interval: 0.73, 0.84,
    0.90; less for skewed differences), and it can exclude 0 where the exact randomisation
    test cannot reject (its smallest p-value is :math:`2^{1-n}`: 0.25 at n = 3).
    ``onlineeval evaluate`` warns below 20 queries.
    """

    metric: str
    system: str
    baseline: str
    n: int
    mean_baseline: float
    mean_system: float
    mean_diff: float
    sd_diff: float
    effect_size: float
    t_statistic: float
    t_df: float
    p_t: float
    p_randomization: float
    randomization_exact: bool
    n_permutations: int
    ci_level: float
    ci_percentile_low: float
    ci_percentile_high: float
    ci_bca_low: float
    ci_bca_high: float
    n_bootstrap: int
    wins: int
    losses: int
    ties: int
    worst: tuple[QueryDiff, ...]
    alpha: float
    p_t_holm: float = math.nan
    p_randomization_holm: float = math.nan
    segment_attribute: str | None = None
    segment_value: str | None = None

    @property
    def significant(self) -> bool:
        """Whether the Holm-adjusted randomisation p-value is below ``alpha``."""
        return bool(self.p_randomization_holm < self.alpha)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dict (``worst`` as a list of dicts), for JSON output."""
        out = asdict(self)
        out["significant"] = self.significant
        return out


# ----------------------------------------------------------------------------- primitives


def _mean_sd(d: NDArray[np.float64]) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof=1``) of ``d`` computed on ``d - d[0]``
    (variance is shift-invariant): identical differences give exactly ``sd = 0`` instead of
    the rounding noise of the naive formula (``0.4 - 0.2`` on every query gave 1e-17)."""
    shifted = d - d[0]
    return float(d[0] + shifted.mean()), float(shifted.std(ddof=1))


def paired_t_test(diffs: ArrayLike, alpha: float = 0.05) -> Estimate:
    r"""Paired t-test of :math:`H_0: E[d] = 0` on per-query differences.

    .. math:: t = \frac{\bar d}{s_d/\sqrt n},\qquad \nu = n - 1,

    with the ``1 - alpha`` interval :math:`\bar d \pm t_{\nu,1-\alpha/2}\, s_d/\sqrt n`
    (Student 1908). When :math:`s_d = 0` and :math:`\bar d \ne 0`, :math:`t = \pm\infty`
    and the p-value is 0; when every difference is 0, :math:`t = 0/0` is undefined and the
    statistic and p-value are NaN (as ``scipy.stats.ttest_rel``). Needs at least 2
    differences. ``alpha`` defaults to 0.05.
    """
    d = as_values(diffs, "diffs", min_size=2)
    alpha = check_alpha(alpha)
    n = d.size
    mean, sd = _mean_sd(d)
    se = sd / math.sqrt(n)
    df = float(n - 1)
    if se > 0:
        stat = mean / se
        p = min(1.0, float(2.0 * _spc.stdtr(df, -abs(stat))))
        q = float(-_spc.stdtrit(df, alpha / 2.0))
        lo, hi = mean - q * se, mean + q * se
    else:
        stat = math.nan if mean == 0 else math.copysign(math.inf, mean)  # 0/0: undefined
        p = math.nan if mean == 0 else 0.0
        lo = hi = mean
    return Estimate(mean, se, lo, hi, p, n, stat, df, "paired-t", alpha)


def _check_rng(rng: np.random.Generator) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed))")
    return rng


def _check_count(value: int, name: str, minimum: int) -> int:
    out = int(value)
    if out != value or out < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return out


def randomization_test(
    diffs: ArrayLike, rng: np.random.Generator, n_permutations: int = 10_000
) -> RandomizationResult:
    r"""Two-sided paired randomisation (sign-flip) test of the mean difference.

    Under :math:`H_0` each difference is equally likely to have either sign, so the
    reference distribution of :math:`T = \sum_q s_q d_q` is over sign vectors
    :math:`s \in \{-1, +1\}^n` (Fisher 1935; Smucker, Allan and Carterette 2007).

    * When :math:`2^n \le` ``n_permutations`` every sign vector is enumerated and the
      p-value is exact: :math:`p = \#\{s : |T(s)| \ge |T_{obs}|\} / 2^n`.
    * Otherwise ``n_permutations`` random sign vectors are drawn (uniform bits, in
      blocks, no Python loop over queries) and :math:`p = (b + 1)/(B + 1)` with
      :math:`b = \#\{|T^*| \ge |T_{obs}|\}`, which is a valid p-value
      (Phipson and Smyth 2010).

    Comparisons use a tolerance of ``1e-10 * sum|d|`` so arrangements that tie the
    observed statistic mathematically are counted despite rounding.

    Parameters
    ----------
    diffs:
        Per-query differences (at least 1).
    rng:
        Random generator (unused when the enumeration is exact).
    n_permutations:
        Number of random sign vectors, >= 1. Default 10,000.
    """
    d = as_values(diffs, "diffs", min_size=1)
    _check_rng(rng)
    n_perm = _check_count(n_permutations, "n_permutations", 1)
    n = d.size
    total = float(d.sum())
    obs = abs(total)
    threshold = obs - _TIE_RTOL * float(np.abs(d).sum())
    mean = total / n
    if n < 63 and (1 << n) <= n_perm:
        codes = np.arange(1 << n, dtype=np.int64)
        bits = ((codes[:, None] >> np.arange(n, dtype=np.int64)) & 1).astype(np.float64)
        stats_ = np.abs(2.0 * (bits @ d) - total)
        count = int(np.count_nonzero(stats_ >= threshold))
        return RandomizationResult(count / (1 << n), mean, 1 << n, True)
    count = 0
    block = max(1, min(n_perm, _BLOCK_CELLS // n))
    n_words = (n + 63) // 64
    for start in range(0, n_perm, block):
        m = min(block, n_perm - start)
        # whole 64-bit words (one generator output each), so the stream does not depend
        # on the block size; unpacked little-endian into sign bits
        words = rng.integers(0, _U64_MAX, size=(m, n_words), dtype=np.uint64, endpoint=True)
        packed = words.astype("<u8", copy=False).view(np.uint8)
        bits = np.unpackbits(packed, axis=1, count=n, bitorder="little").astype(np.float64)
        count += int(np.count_nonzero(np.abs(2.0 * (bits @ d) - total) >= threshold))
    return RandomizationResult((count + 1) / (n_perm + 1), mean, n_perm, False)


def paired_bootstrap(
    diffs: ArrayLike, rng: np.random.Generator, n_bootstrap: int = 10_000, level: float = 0.95
) -> BootstrapCI:
    r"""Bootstrap confidence intervals (percentile and BCa) of the mean difference.

    Queries are resampled with replacement (index matrices drawn in blocks, no Python
    loop over queries); each replicate is the mean of the resampled differences.

    Percentile: the :math:`\alpha/2` and :math:`1-\alpha/2` quantiles of the replicates
    (linear interpolation), :math:`\alpha = 1 -` ``level``.

    BCa (Efron and Tibshirani 1993, sec. 14.3): the quantiles at

    .. math::

        \alpha_{1,2} = \Phi\!\left(\hat z_0 + \frac{\hat z_0 + z_{\alpha/2,\,1-\alpha/2}}
                       {1 - \hat a(\hat z_0 + z_{\alpha/2,\,1-\alpha/2})}\right),\qquad
        \hat z_0 = \Phi^{-1}\!\left(\frac{\#\{\theta^* < \hat\theta\}
                   + \#\{\theta^* \le \hat\theta\}}{2B}\right),

    (replicates equal to :math:`\hat\theta` count half) and the jackknife acceleration,
    which for the mean has the closed form (eq. 14.15 with
    :math:`\hat\theta_{(\cdot)} - \hat\theta_{(i)} = (d_i - \bar d)/(n-1)`)

    .. math:: \hat a = \frac{\sum_i (d_i - \bar d)^3}{6\left(\sum_i (d_i - \bar d)^2\right)^{3/2}}.

    When every difference is equal both intervals collapse to the mean. When no
    replicate lies on one side of :math:`\hat\theta` (tiny ``n``), :math:`\hat z_0` uses
    the proportion clipped to ``[1/(2B), 1 - 1/(2B)]``.

    Parameters
    ----------
    diffs:
        Per-query differences (at least 2).
    rng:
        Random generator.
    n_bootstrap:
        Number of replicates, >= 100. Default 10,000.
    level:
        Confidence level. Default 0.95.
    """
    d = as_values(diffs, "diffs", min_size=2)
    _check_rng(rng)
    n_boot = _check_count(n_bootstrap, "n_bootstrap", 100)
    level = check_level(level)
    n = d.size
    mean = float(d.mean())
    reps = np.empty(n_boot)
    block = max(1, min(n_boot, _BLOCK_CELLS // n))
    for start in range(0, n_boot, block):
        stop = min(start + block, n_boot)
        idx = rng.integers(0, n, size=(stop - start, n))
        reps[start:stop] = d[idx].mean(axis=1)
    centred = d - mean
    ss = float(centred @ centred)
    alpha = 1.0 - level
    se = float(reps.std(ddof=1))
    if ss == 0.0:
        return BootstrapCI(mean, 0.0, mean, mean, mean, mean, level, n_boot, 0.0, 0.0)
    p_lo, p_hi = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    below = np.count_nonzero(reps < mean) + np.count_nonzero(reps <= mean)
    frac = min(max(below / (2.0 * n_boot), 1.0 / (2 * n_boot)), 1.0 - 1.0 / (2 * n_boot))
    z0 = float(_spc.ndtri(frac))
    acc = float((centred**3).sum() / (6.0 * ss**1.5))
    z = _spc.ndtri(np.array([alpha / 2.0, 1.0 - alpha / 2.0]))
    adj = _spc.ndtr(z0 + (z0 + z) / (1.0 - acc * (z0 + z)))
    b_lo, b_hi = np.quantile(reps, adj)
    return BootstrapCI(
        mean, se, float(p_lo), float(p_hi), float(b_lo), float(b_hi), level, n_boot, z0, acc
    )


def holm(pvalues: ArrayLike) -> NDArray[np.float64]:
    r"""Holm's step-down adjusted p-values (Holm 1979, Scand. J. Statist. 6:65-70).

    With the finite p-values sorted ascending, :math:`p_{(1)} \le \dots \le p_{(m)}`,

    .. math:: \tilde p_{(j)} = \min\!\left(1, \max_{i \le j} (m - i + 1)\, p_{(i)}\right).

    NaN entries (undefined tests) stay NaN and do not count in :math:`m`. Returns a new
    array in the input order.
    """
    p = np.array(pvalues, dtype=np.float64, copy=True).ravel()
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size == 0:
        return out
    vals = p[ok]
    if ((vals < 0) | (vals > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(vals, kind="stable")
    m = vals.size
    adj = np.minimum(np.maximum.accumulate((m - np.arange(m)) * vals[order]), 1.0)
    res = np.empty(m)
    res[order] = adj
    out[ok] = res
    return out


# ----------------------------------------------------------------------------- per-query frames

_COLUMNS = ("query", "system", "metric", "value")


def _validate_frame(per_query: pd.DataFrame) -> pd.DataFrame:
    """Checked copy with string ids and float values; errors name the 1-based row."""
    if not isinstance(per_query, pd.DataFrame):
        raise InputError("per_query must be a pandas DataFrame with columns query, system, metric, value")
    missing = [c for c in _COLUMNS if c not in per_query.columns]
    if missing:
        raise InputError(
            f"per_query: missing column(s) {', '.join(missing)}; expected columns query, system, metric, value"
        )
    if len(per_query) == 0:
        raise InputError("per_query: no rows")
    frame = pd.DataFrame(
        {
            "query": per_query["query"].astype(str).to_numpy(),
            "system": per_query["system"].astype(str).to_numpy(),
            "metric": per_query["metric"].astype(str).to_numpy(),
            "value": pd.to_numeric(per_query["value"], errors="coerce").to_numpy(dtype=np.float64),
        }
    )
    bad = ~np.isfinite(frame["value"].to_numpy())
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raw = per_query["value"].iloc[row]
        raise InputError(f"value {raw!r} is not a finite number", None, row + 1)
    dup = frame.duplicated(["query", "system", "metric"])
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        q, s, m = frame.iloc[row][["query", "system", "metric"]]
        raise InputError(f"duplicate value for query {q!r}, system {s!r}, metric {m!r}", None, row + 1)
    return frame


def _first_appearance(values: pd.Series) -> list[str]:
    return list(dict.fromkeys(values.tolist()))


def _aligned(frame: pd.DataFrame, metric: str, systems: Sequence[str]) -> pd.DataFrame:
    """Queries x systems table of one metric, queries sorted; every cell must be present."""
    sub = frame[frame["metric"] == metric]
    table = sub.pivot(index="query", columns="system", values="value").reindex(columns=list(systems))
    table = table.sort_index()
    holes = table.isna().to_numpy()
    if holes.any():
        r, c = np.argwhere(holes)[0]
        raise InputError(
            f"metric {metric!r}: system {systems[c]!r} has no value for query {table.index[r]!r}; "
            "every system needs a value for the same queries (fill or drop queries before comparing)"
        )
    return table


def _compare_one(
    metric: str,
    system: str,
    baseline: str,
    queries: NDArray[Any],
    base: NDArray[np.float64],
    sys_: NDArray[np.float64],
    seeds: tuple[np.random.SeedSequence, np.random.SeedSequence],
    n_permutations: int,
    n_bootstrap: int,
    alpha: float,
    n_worst: int,
    tie_tolerance: float,
) -> PairedResult:
    d = sys_ - base
    n = d.size
    wins = int(np.count_nonzero(d > tie_tolerance))
    losses = int(np.count_nonzero(d < -tie_tolerance))
    order = np.argsort(d, kind="stable")[: min(n_worst, losses)]
    worst = tuple(QueryDiff(str(queries[i]), float(base[i]), float(sys_[i]), float(d[i])) for i in order)
    mean_d = float(d.mean())
    common = dict(
        metric=metric,
        system=system,
        baseline=baseline,
        n=n,
        mean_baseline=float(base.mean()),
        mean_system=float(sys_.mean()),
        mean_diff=mean_d,
        ci_level=1.0 - alpha,
        wins=wins,
        losses=losses,
        ties=n - wins - losses,
        worst=worst,
        alpha=alpha,
    )
    if n < 2:
        nan = math.nan
        return PairedResult(
            sd_diff=nan, effect_size=nan, t_statistic=nan, t_df=nan, p_t=nan, p_randomization=nan,
            randomization_exact=False, n_permutations=0, ci_percentile_low=nan, ci_percentile_high=nan,
            ci_bca_low=nan, ci_bca_high=nan, n_bootstrap=0, **common,
        )  # fmt: skip
    sd = _mean_sd(d)[1]
    effect = mean_d / sd if sd > 0 else (math.nan if mean_d == 0 else math.copysign(math.inf, mean_d))
    t = paired_t_test(d, alpha)
    perm = randomization_test(d, np.random.default_rng(seeds[0]), n_permutations)
    boot = paired_bootstrap(d, np.random.default_rng(seeds[1]), n_bootstrap, 1.0 - alpha)
    return PairedResult(
        sd_diff=sd,
        effect_size=effect,
        t_statistic=t.statistic,
        t_df=t.df,
        p_t=t.pvalue,
        p_randomization=perm.pvalue,
        randomization_exact=perm.exact,
        n_permutations=perm.n_permutations,
        ci_percentile_low=boot.percentile_low,
        ci_percentile_high=boot.percentile_high,
        ci_bca_low=boot.bca_low,
        ci_bca_high=boot.bca_high,
        n_bootstrap=boot.n_bootstrap,
        **common,
    )


def _fresh_root(seed: int | np.random.SeedSequence) -> np.random.SeedSequence:
    """A new ``SeedSequence`` equal to ``seed`` (spawning never mutates the caller's)."""
    if isinstance(seed, np.random.SeedSequence):
        return np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or a numpy SeedSequence, got {seed!r}")
    return np.random.SeedSequence(int(seed))


def _with_holm(results: list[PairedResult]) -> list[PairedResult]:
    p_r = holm([r.p_randomization for r in results])
    p_t = holm([r.p_t for r in results])
    return [
        replace(r, p_randomization_holm=float(a), p_t_holm=float(b)) for r, a, b in zip(results, p_r, p_t)
    ]


def compare_systems(
    per_query: pd.DataFrame,
    baseline: str,
    *,
    seed: int | np.random.SeedSequence,
    n_permutations: int = 10_000,
    n_bootstrap: int = 10_000,
    alpha: float = 0.05,
    n_worst: int = 5,
    tie_tolerance: float = 0.0,
) -> list[PairedResult]:
    """Compare every system with ``baseline`` on every metric (paired, per query).

    Parameters
    ----------
    per_query:
        Long table with columns ``query``, ``system``, ``metric``, ``value`` (one row per
        query, system and metric; other columns are ignored). Ids are compared as strings.
        For each metric every system must have a value for the same queries.
    baseline:
        The system the others are compared with.
    seed:
        Root seed (int or ``SeedSequence``); each comparison gets its own child streams
        via ``SeedSequence.spawn``, assigned in sorted (metric, system) order.
    n_permutations:
        Random sign vectors of the randomisation test (exact enumeration when
        ``2**n <= n_permutations``). Default 10,000.
    n_bootstrap:
        Bootstrap replicates (>= 100). Default 10,000.
    alpha:
        Level of the tests; intervals have coverage ``1 - alpha``. Default 0.05.
    n_worst:
        How many of the largest per-query losses to keep. Default 5.
    tie_tolerance:
        Differences with ``|d| <= tie_tolerance`` count as ties. Default 0 (exact ties).

    Returns
    -------
    list of PairedResult
        In the order metric (first appearance) x system (first appearance, baseline
        excluded), with Holm-adjusted p-values over the whole list.

    Raises
    ------
    InputError
        Missing columns, non-numeric or non-finite values, duplicate rows, an unknown
        baseline, fewer than two systems or misaligned queries.
    """
    frame = _validate_frame(per_query)
    alpha = check_alpha(alpha)
    n_perm = _check_count(n_permutations, "n_permutations", 1)
    n_boot = _check_count(n_bootstrap, "n_bootstrap", 100)
    n_worst = _check_count(n_worst, "n_worst", 0)
    tie_tol = float(tie_tolerance)
    if not (math.isfinite(tie_tol) and tie_tol >= 0):
        raise ValueError(f"tie_tolerance must be finite and >= 0, got {tie_tolerance!r}")
    systems = _first_appearance(frame["system"])
    if str(baseline) not in systems:
        raise InputError(f"baseline {baseline!r} is not among the systems: {', '.join(systems)}")
    baseline = str(baseline)
    if len(systems) < 2:
        raise InputError(f"need at least two systems to compare, got only {baseline!r}")
    others = [s for s in systems if s != baseline]
    metrics = _first_appearance(frame["metric"])
    pairs = [(m, s) for m in metrics for s in others]
    root = _fresh_root(seed)
    children = root.spawn(2 * len(pairs))
    slot = {pair: k for k, pair in enumerate(sorted(pairs))}
    results: list[PairedResult] = []
    for metric in metrics:
        table = _aligned(frame, metric, systems)
        queries = table.index.to_numpy()
        base = table[baseline].to_numpy(dtype=np.float64)
        for system in others:
            k = slot[(metric, system)]
            results.append(
                _compare_one(
                    metric, system, baseline, queries, base, table[system].to_numpy(dtype=np.float64),
                    (children[2 * k], children[2 * k + 1]), n_perm, n_boot, alpha, n_worst, tie_tol,
                )  # fmt: skip
            )
    return _with_holm(results)


_SCALAR_FIELDS = tuple(f.name for f in fields(PairedResult) if f.name != "worst")


def results_to_frame(results: Sequence[PairedResult]) -> pd.DataFrame:
    """One row per comparison, every scalar field plus ``significant`` (``worst`` left out;
    see :func:`worst_losses_to_frame`)."""
    rows = [{name: getattr(r, name) for name in _SCALAR_FIELDS} | {"significant": r.significant} for r in results]
    return pd.DataFrame(rows, columns=[*_SCALAR_FIELDS, "significant"])


def worst_losses_to_frame(results: Sequence[PairedResult]) -> pd.DataFrame:
    """Long table of the worst per-query losses: segment, metric, system, rank (1 = worst),
    query, baseline value, system value, difference."""
    cols = ["segment_attribute", "segment_value", "metric", "system", "rank", "query", "baseline_value",
            "system_value", "diff"]  # fmt: skip
    rows = [
        (r.segment_attribute, r.segment_value, r.metric, r.system, i + 1, w.query, w.baseline, w.system, w.diff)
        for r in results
        for i, w in enumerate(r.worst)
    ]
    return pd.DataFrame(rows, columns=cols)


# ----------------------------------------------------------------------------- segments


def read_segments(path: str | Path) -> pd.DataFrame:
    """Read a per-query attribute file (tab-separated) for segment analysis.

    Format: a header line ``query<TAB>attr1<TAB>attr2 ...`` (first column named ``query``,
    ``qid`` or ``query_id``, any case), then one line per query with a value for every
    attribute, e.g. ``q17<TAB>head<TAB>navigational``. Blank lines and lines starting
    with ``#`` are ignored. Values are kept as strings (bucket numeric attributes such as
    the number of candidates before writing the file).

    Returns
    -------
    pandas.DataFrame
        Index ``query`` (str), one string column per attribute.

    Raises
    ------
    InputError
        With file and line: an empty file, a missing header (first column not named
        ``query``), a header with fewer than 2 columns or repeated or empty names, a row with the wrong number of fields, an empty query id or value,
        a query listed twice, undecodable text.
    """
    p = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", p) from None
    header: list[str] | None = None
    header_line = 0
    ids: list[str] = []
    rows: list[list[str]] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [f.strip() for f in line.split("\t")]
        if header is None:
            if len(parts) < 2:
                raise InputError(
                    "header must be 'query<TAB>attribute[<TAB>attribute...]' (tab-separated, at least 2 columns)",
                    p, lineno,
                )  # fmt: skip
            if parts[0].lower() not in _QUERY_HEADERS:
                raise InputError(
                    f"the first line must be a header whose first column is 'query' (or 'qid'), got {parts[0]!r}; "
                    "expected 'query<TAB>attribute[<TAB>attribute...]'",
                    p, lineno,
                )  # fmt: skip
            names = parts[1:]
            if any(not nm for nm in names):
                raise InputError("header has an empty attribute name", p, lineno)
            if len(set(names)) != len(names):
                raise InputError("header repeats an attribute name", p, lineno)
            header, header_line = parts, lineno
            continue
        if len(parts) != len(header):
            raise InputError(
                f"expected {len(header)} tab-separated fields (query + {len(header) - 1} attribute(s)), "
                f"got {len(parts)}",
                p, lineno,
            )  # fmt: skip
        if not parts[0]:
            raise InputError("empty query id", p, lineno)
        empty = [header[i] for i in range(1, len(parts)) if not parts[i]]
        if empty:
            raise InputError(f"empty value for attribute {empty[0]!r}", p, lineno)
        if parts[0] in seen:
            raise InputError(f"query {parts[0]!r} listed twice (first on line {seen[parts[0]]})", p, lineno)
        seen[parts[0]] = lineno
        ids.append(parts[0])
        rows.append(parts[1:])
    if header is None:
        raise InputError("empty file: expected a header 'query<TAB>attribute...' and one line per query", p)
    if not rows:
        raise InputError("no query lines after the header", p, header_line)
    table = pd.DataFrame(rows, columns=header[1:], index=pd.Index(ids, name="query"), dtype=str)
    return table


class SegmentView(NamedTuple):
    """One segment: an attribute, one of its values, and the queries in it (sorted)."""

    attribute: str
    value: str
    queries: tuple[str, ...]


def iter_segments(segments: pd.DataFrame, queries: Sequence[Hashable]) -> Iterator[SegmentView]:
    """Every (attribute, value) segment of ``queries``, attributes in column order and
    values sorted; queries absent from ``segments`` form the value :data:`MISSING_SEGMENT`.
    Segments with no query are not produced."""
    qs = sorted({str(q) for q in queries})
    for attribute in segments.columns:
        col = segments[attribute]
        mapping = dict(zip(col.index.astype(str), col.astype(str)))
        labels = np.array([mapping.get(q, MISSING_SEGMENT) for q in qs], dtype=object)
        qarr = np.array(qs, dtype=object)
        for value in sorted(set(labels.tolist())):
            yield SegmentView(str(attribute), value, tuple(qarr[labels == value].tolist()))


def by_segment(
    per_query: pd.DataFrame,
    segments: pd.DataFrame,
    table: Callable[[pd.DataFrame], pd.DataFrame],
) -> pd.DataFrame:
    """Apply ``table`` to the rows of every segment and stack the results.

    Parameters
    ----------
    per_query:
        Any frame with a ``query`` column (e.g. the long per-query values).
    segments:
        Attribute table from :func:`read_segments`.
    table:
        Function from a subset of ``per_query`` to a table (e.g. mean per system and
        metric, or ``lambda f: results_to_frame(compare_systems(f, ...))``).

    Returns
    -------
    pandas.DataFrame
        The stacked tables with leading columns ``segment_attribute``,
        ``segment_value`` and ``segment_queries`` (number of queries in the segment).
    """
    if "query" not in per_query.columns:
        raise InputError("per_query: missing column query")
    keys = per_query["query"].astype(str)
    parts = []
    for view in iter_segments(segments, keys.unique()):
        sub = per_query[keys.isin(view.queries).to_numpy()]
        out = table(sub).reset_index(drop=True)
        out.insert(0, "segment_queries", len(view.queries))
        out.insert(0, "segment_value", view.value)
        out.insert(0, "segment_attribute", view.attribute)
        parts.append(out)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def compare_segments(
    per_query: pd.DataFrame,
    segments: pd.DataFrame,
    baseline: str,
    *,
    seed: int | np.random.SeedSequence,
    **options: Any,
) -> list[PairedResult]:
    """:func:`compare_systems` on every segment; records carry their segment.

    Each segment is its own family for the Holm correction (a segment table reads like a
    separate evaluation). The same ``seed`` is used for every segment. ``options`` are
    passed to :func:`compare_systems` (``n_permutations``, ``n_bootstrap``, ``alpha``,
    ``n_worst``, ``tie_tolerance``).
    """
    frame = _validate_frame(per_query)
    out: list[PairedResult] = []
    for view in iter_segments(segments, frame["query"].unique()):
        sub = frame[frame["query"].isin(view.queries).to_numpy()]
        for r in compare_systems(sub, baseline, seed=seed, **options):
            out.append(replace(r, segment_attribute=view.attribute, segment_value=view.value))
    return out
