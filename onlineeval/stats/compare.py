r"""Comparison of systems with a baseline on aligned per-query values (offline evaluation).

Two or more systems are scored on the same queries; each non-baseline system is compared
with the baseline on every metric using the per-query differences
:math:`d_q = v_{\text{system},q} - v_{\text{baseline},q}` (:func:`compare_systems`), with the paired tests
of :mod:`onlineeval.stats.paired` (randomisation test, paired bootstrap percentile and BCa intervals,
t-test), Holm's correction over every comparison of one call (systems x metrics), the
effect size :math:`d_z = \bar d / s_d`, wins / losses / ties and the worst per-query losses,
in one :class:`PairedResult` each; :func:`results_to_frame` and :func:`worst_losses_to_frame` tabulate them.

Everything random is driven by one seed: each comparison's two streams (randomisation test, bootstrap) are
children of ``SeedSequence(seed)`` keyed by the CRC-32 of its metric, system and baseline names
(:func:`comparison_seeds`), so a comparison's p-value and interval depend neither on the order of the input rows
nor on which other metrics and systems the call compares (``--metrics nDCG@10`` and ``--metrics nDCG@10,AP`` give
nDCG@10 the same numbers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from onlineeval.errors import InputError
from onlineeval.stats._checks import check_alpha
from onlineeval.stats.paired import _check_count, _mean_sd, holm, paired_bootstrap, paired_t_test, randomization_test

__all__ = [
    "QueryDiff",
    "PairedResult",
    "compare_systems",
    "results_to_frame",
    "worst_losses_to_frame",
]


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


def comparison_seeds(root: np.random.SeedSequence, metric: str, system: str,
                     baseline: str) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """The randomisation test's and the bootstrap's streams of one comparison: children of ``root`` whose spawn
    keys extend ``root``'s by the CRC-32 of the metric, system and baseline names and 0 or 1 (as
    ``SeedSequence.spawn`` extends it by a counter), so they are the same whatever else the call compares."""
    import zlib

    key = (*root.spawn_key, *(zlib.crc32(str(name).encode("utf-8")) for name in (metric, system, baseline)))
    return tuple(  # type: ignore[return-value]
        np.random.SeedSequence(root.entropy, spawn_key=(*key, j), pool_size=root.pool_size) for j in (0, 1))


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
        Root seed (int or ``SeedSequence``); each comparison gets its own child streams, keyed by its metric,
        system and baseline names (:func:`comparison_seeds`): the same whatever else is compared.
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
    root = _fresh_root(seed)
    results: list[PairedResult] = []
    for metric in metrics:
        table = _aligned(frame, metric, systems)
        queries = table.index.to_numpy()
        base = table[baseline].to_numpy(dtype=np.float64)
        for system in others:
            results.append(
                _compare_one(
                    metric, system, baseline, queries, base, table[system].to_numpy(dtype=np.float64),
                    comparison_seeds(root, metric, system, baseline), n_perm, n_boot, alpha, n_worst, tie_tol,
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
