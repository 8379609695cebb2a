r"""The counterfactual design's last-day bootstrap (``designs[i].bootstrap``), moved verbatim from
:mod:`simulations.designs.counterfactual.design` (which inherits it and re-exports :func:`bootstrap_test`): the
checkpoint's shared resamples of the active users (:meth:`LastDayBootstrap._resamples`), the percentile interval and,
for an estimator whose delta-method SE holds a choice fixed, the bootstrap test (:meth:`LastDayBootstrap._bootstrap`);
adaptive IPS's choice made again in every resample, cross-fitted over the same folds as ``estimate`` makes them
(:meth:`LastDayBootstrap._reselect`, :meth:`LastDayBootstrap._folds`), and a click model fitted again
(:meth:`LastDayBootstrap._refitted`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from onlineeval.errors import InputError
from simulations.designs.counterfactual.paired import PairedEstimate
from simulations.designs.counterfactual.serving import _one_chunk

__all__ = ["LastDayBootstrap", "bootstrap_test"]


class LastDayBootstrap:
    """The bootstrap methods of :class:`~simulations.designs.counterfactual.CounterfactualDesign` (a mixin: they
    read its ``config``, ``rng``, ``alpha``, ``population``, ``reward``, ``targets`` and its logged rows)."""

    def _folds(self, est: Any, user: np.ndarray, users: np.ndarray) -> np.ndarray | None:
        """Each logged row's fold of a cross-fitted choice (adaptive IPS with ``folds > 1``; else ``None``): the
        rank of its user among the active ``users`` (ascending) modulo the folds, as
        :func:`onlineeval.estimators.model_based.fold_ids` assigns a log's users (so ``onlineeval estimate`` on the
        exported log makes the same folds on the last day); a clear error with fewer users than folds."""
        folds = getattr(est, "folds", 1)
        if folds == 1 or not getattr(est, "chooses_from_log", False):
            return None
        if users.size < folds:
            raise InputError(f"design {self.name!r}: adaptive_ips with folds={folds} (cross-fitting) needs at least "
                             f"{folds} users with impressions, the log has {users.size}")
        position = np.full(self.population, -1, dtype=np.int64)
        position[users] = np.arange(users.size)
        return position[user] % folds

    def _bootstrap(self, est: PairedEstimate, x: list[np.ndarray],
                   resampled: Callable[[np.ndarray], np.ndarray] | None = None, test: bool = False) -> PairedEstimate:
        """Replace the interval by a cluster (user) bootstrap percentile interval: of the paired difference of
        the per-user sums ``x`` (num_a, den_a, num_b, den_b over the active users), or, with ``resampled``, of
        its differences computed from each block's user counts (:meth:`_reselect`; ``x[0]`` then only gives the
        number of users). Every estimator of a checkpoint reads the same resamples (:meth:`_resamples`).

        With ``test`` (an estimator whose delta-method SE holds a data-driven choice fixed:
        ``clt_holds_fixed``, adaptive IPS's behaviours, a click model fitted on the log) the SE and the p-value
        are replaced too, so its power is counted from a valid test: ``se`` = the resamples' SD and ``pvalue`` =
        the percentile bootstrap's two-sided p-value (:func:`bootstrap_test`), below ``alpha`` when the percentile
        interval excludes 0 (up to the quantiles' interpolation and the +1 of the p-value), and its row's ``df`` is
        ``inf`` (no Student t: the daily monitoring and the analytic power read its SE with z). The delta-method SE
        of adaptive IPS was 0.70 of its replicates' SD (review 3, F-A): its p-values rejected in 35% of replicates
        where its own bootstrap interval excluded 0 in 17.5%."""
        n, b = x[0].shape[0], self.config.bootstrap
        stats = np.empty(b)
        for lo, hi, counts in self._resamples(n):
            if resampled is not None:
                stats[lo:hi] = resampled(counts)
                continue
            s = counts @ np.stack(x, axis=1)  # (m, 4): num_a, den_a, num_b, den_b
            with np.errstate(divide="ignore", invalid="ignore"):
                stats[lo:hi] = s[:, 2] / s[:, 3] - s[:, 0] / s[:, 1]
        stats = stats[np.isfinite(stats)]
        if stats.size:
            est.ci_low, est.ci_high = (float(v) for v in np.quantile(stats, [self.alpha / 2, 1 - self.alpha / 2]))
        if test:
            est.se, est.pvalue = bootstrap_test(stats)
            est.df = math.inf  # (no t: the row's p-value is the bootstrap's; the monitoring and analytic power take z)
        return est


    #: the bootstrap's resamples of a checkpoint are kept for its other estimators up to this many counts
    #: (16 M: 128 MB); beyond, each estimator draws them again from the same seed (the same numbers)
    max_kept_counts = 1 << 24

    def _resamples(self, n: int) -> list[tuple[int, int, np.ndarray]] | Iterator[tuple[int, int, np.ndarray]]:
        """The checkpoint's ``config.bootstrap`` resamples of its ``n`` active users as blocks of counts
        (:func:`onlineeval.stats.cluster_resample_counts`), the same for every estimator (their intervals are
        paired, and the users are drawn once): from a generator seeded by one draw of the design's at the
        checkpoint's first bootstrap."""
        from onlineeval.stats import cluster_resample_counts

        kept = self.__dict__.get("_boot_kept")  # reset by every checkpoint, whose active users are the same n
        if kept is None:
            kept = self._boot_kept = (int(self.rng.integers(0, 1 << 63)), None)
        seed, blocks = kept
        if blocks is not None:
            return blocks
        b = self.config.bootstrap
        fresh = cluster_resample_counts(np.random.default_rng(seed), n, b)
        if b * n > self.max_kept_counts:
            return fresh
        blocks = list(fresh)
        self._boot_kept = (seed, blocks)
        return blocks

    def _reselect(self, label: str, est: Any, users: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        """For adaptive IPS's data-driven choice (its per-row behaviour terms kept, ``_row_stats``), the
        bootstrap's differences from the resampled users' counts (``counts`` (m, len(users))), each resample
        choosing the behaviours per user type again on its rows
        (:func:`onlineeval.estimators.adaptive_ips.resampled_values`): the interval then carries the choice's
        own variability, which the per-user sums of the chosen terms leave out. For an estimator that fits a model
        on the log (``refits_in_bootstrap``: the direct method's click model given by name), each resample's log (the
        whole log's rows of each drawn user, as often as drawn) fitted again (its ``resampled_values``), so the
        interval carries the fitting error. ``None`` otherwise."""
        if getattr(est, "refits_in_bootstrap", False):
            return self._refitted(est, users)
        if not est.chooses_from_log or (label, self.target_names[0]) not in self._row_stats:
            return None
        from onlineeval.estimators.adaptive_ips import resampled_values

        meta = _one_chunk(self._row_meta)
        position = np.full(self.population, -1, dtype=np.int64)
        position[users] = np.arange(users.size)
        cluster = position[meta["user"]]
        if (cluster < 0).any():  # a row of a user outside the active users: cannot be (they have impressions)
            raise RuntimeError(f"design {self.name!r}: a logged row's user has no impressions")
        # the estimator's own features (cross-fitted: the whole log's and each fold's own; a fold chooses on the
        # whole's less its own)
        fold = self._folds(est, meta["user"], users)
        features = [est.resampling_features(meta["user_type"], _one_chunk(self._row_stats[(label, t)]), cluster,
                                            users.size, est.candidates(self.reward), fold) for t in self.target_names]

        def differences(counts: np.ndarray) -> np.ndarray:
            (num_a, den_a), (num_b, den_b) = (resampled_values(f, counts) for f in features)
            with np.errstate(divide="ignore", invalid="ignore"):
                return num_b / den_b - num_a / den_a  # type: ignore[no-any-return]

        return differences

    def _refitted(self, est: Any, users: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """:meth:`_reselect`'s differences of an estimator that fits its model again on every resample."""
        whole = self.log()
        targets = [t.target for t in self.targets]
        drawn = np.zeros(self.population, dtype=np.int64)

        def differences(counts: np.ndarray) -> np.ndarray:
            out = np.empty(counts.shape[0])
            for i, c in enumerate(counts):
                drawn[users] = c
                a, b = est.resampled_values(whole, targets, self.reward, drawn[whole.user])
                out[i] = b - a
            return out

        return differences


def bootstrap_test(stats: np.ndarray) -> tuple[float, float]:
    """``(se, pvalue)`` of a difference from its finite bootstrap replicates ``stats``: their SD (ddof 1) and the
    percentile bootstrap's two-sided p-value of 0 (:func:`onlineeval.stats.online.percentile_pvalue`); NaN for both
    with fewer than 2 replicates."""
    stats = np.asarray(stats, dtype=np.float64)
    if stats.size < 2:
        return math.nan, math.nan
    from onlineeval.stats.online import percentile_pvalue

    return float(np.std(stats, ddof=1)), percentile_pvalue(stats)
