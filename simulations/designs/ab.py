"""The A/B test: users split by a salted hash of their id, each arm shows one ranker.

Metrics (each a ratio of per-user sums, analysed at the user level with the delta
method, because the user and not the query is the randomisation unit):

- ``clicks_per_query``: clicks / queries;
- ``abandonment``: queries without a click / queries;
- ``reciprocal_rank``: sum of 1/rank of the first click (0 without a click) / queries;
- ``utility`` (a design whose ``metric`` is ``utility``; the others do not carry it): the offline metric's
  metric-user utility of the clicks, :math:`\\sum_j w_j c_j` with the metric's static C/W/L weights
  (:func:`onlineeval.estimators.rewards.utility_reward`, as the counterfactual designs' ``utility``) / queries.

Each estimate is the difference B - A of the two arms' ratios (``test: delta``), or,
with ``test: welch``, of the two arms' means of per-user ratios, compared with Welch's
unequal-variance t-test (each user weighs the same, whatever their activity). ``test: delta_t``: the delta
method's difference with the bias-reduced (CR2) variance and Student's t with Bell and McCaffrey's degrees of
freedom (:func:`onlineeval.stats.ratio_diff_cr2`: nominal coverage with few users where the delta method's z
falls short) computed at the estimated intra-user correlation of the per-query values
(:meth:`ABDesign.intra_user_correlation`; the design adds up each metric's squares for it, in the compiled batch
step as the NumPy one does, bit for bit), recorded on the rows (``df``) for the daily monitoring's and the
sequential tests' rules.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from simulations.designs.base import Design, TValues, register_design
from simulations.traffic import Batch

__all__ = ["ABDesign", "hash_unit"]

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)

#: metric -> the per-user sum it divides by the user's queries
METRICS = {"clicks_per_query": "clicks", "abandonment": "abandoned", "reciprocal_rank": "rr", "utility": "utility"}
_METRIC_OF = {v: k for k, v in METRICS.items()}


def hash_unit(ids: np.ndarray, salt: int) -> np.ndarray:
    """Map integer ids to [0, 1) with the SplitMix64 finaliser of ``id ^ salt``.

    A stable, well-mixed hash: the same user always lands in the same arm of one
    experiment, and a different salt gives an independent split.
    """
    with np.errstate(over="ignore"):
        z = np.asarray(ids, dtype=np.uint64) ^ np.uint64(salt & 0xFFFFFFFFFFFFFFFF)
        z = (z + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def _click_patterns(depth: int) -> tuple[np.ndarray, ...] | None:
    """``(weights, clicks, abandoned, rr)``: the powers of two that make a ``(n, depth)`` click matrix's
    rows bit patterns, and for every pattern its number of clicks, 1.0 without a click, and the reciprocal
    rank of its first click (0 without), as float64 (the values :meth:`ABDesign._process` adds); None for
    ``depth > 16``."""
    if depth > 16:
        return None
    pattern = np.arange(2**depth)
    bits = (pattern[:, None] >> np.arange(depth)) & 1
    n_clicks = bits.sum(axis=1)
    first = np.argmax(bits, axis=1)
    rr = np.where(n_clicks > 0, 1.0 / (first + 1.0), 0.0)
    return 2.0 ** np.arange(depth), n_clicks.astype(np.float64), (n_clicks == 0).astype(np.float64), rr


def utility_weights(world: Any, depth: int) -> np.ndarray:
    """The offline metric's static C/W/L weights of ranks 1..``depth`` (the ``utility`` metric's): those of the
    counterfactual designs' ``utility`` reward (:func:`simulations.designs.counterfactual.metric.design_reward`)."""
    from simulations.designs.counterfactual.metric import UTILITY, design_reward

    return np.asarray(design_reward(UTILITY, world.offline.metric, depth).position_weights(depth), dtype=np.float64)


def utility_values(clicks: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Each row's utility :math:`\\sum_r w_r c_r` of ``(n, depth)`` boolean clicks, added rank by rank from 0.0 (the
    per-pattern table :func:`utility_patterns` is made by the same additions: the same bits)."""
    out = np.zeros(clicks.shape[0], dtype=np.float64)
    for r in range(clicks.shape[1]):
        out = out + np.where(clicks[:, r], weights[r], 0.0)
    return out


def utility_patterns(weights: np.ndarray) -> np.ndarray | None:
    """Every click pattern's utility (bit ``r`` = rank ``r`` clicked, as :func:`_click_patterns`), None for more
    than 16 ranks."""
    depth = weights.size
    if depth > 16:
        return None
    bits = ((np.arange(2**depth)[:, None] >> np.arange(depth)) & 1).astype(np.bool_)
    return utility_values(bits, weights)


def _click_values(clicks: np.ndarray, by_pattern: tuple[np.ndarray, ...] | None) -> tuple[np.ndarray, ...]:
    """Each impression's ``(clicks, abandoned, rr)`` as float64 from its ``(n, depth)`` boolean clicks: looked up
    by click pattern (:func:`_click_patterns`, ``by_pattern``), or computed row by row when it is None (the same
    values: the same operations)."""
    if by_pattern is not None:
        weights, n_clicks, abandoned, rr = by_pattern
        pattern = (clicks.view(np.uint8) @ weights).astype(np.intp)  # exact: 0/1 times powers of two
        return n_clicks.take(pattern), abandoned.take(pattern), rr.take(pattern)
    n_clicks = clicks.sum(axis=1)
    rr = np.where(n_clicks > 0, 1.0 / (np.argmax(clicks, axis=1) + 1.0), 0.0)
    return n_clicks.astype(np.float64), (n_clicks == 0).astype(np.float64), rr


class CheckpointStats(NamedTuple):
    """What an A/B design's daily checkpoint reports (``test: delta``), from one pass over each arm's users
    (:meth:`ABDesign.checkpoint_stats`); the per-metric entries are None while the estimates are undefined
    (fewer than two users in an arm), ``adjusted`` and ``pooled`` also without a pre-period."""

    n_a: int
    n_b: int
    n_impressions: int
    impressions_a: np.ndarray  # each arm's users' impressions (the SRM checks)
    impressions_b: np.ndarray
    unadjusted: dict[str, Any] | None  # metric -> EstimateValues of ratio_diff (bit for bit)
    adjusted: dict[str, Any] | None  # metric -> EstimateValues of the CUPED estimate
    pooled: dict[str, list[list[float]]] | None  # metric -> pooled within-arm cross-products of [e, f, active]
    n_pre: int  # active users with pre-period activity (0 without a pre-period)


class StepInputs(NamedTuple):
    """What :func:`simulations.kernels.ab_step` reads besides a batch (:func:`step_inputs`)."""

    chains: Any  # the users' grade tables (simulations.users._GradeChains)
    grades: np.ndarray  # (rows, k) int8, C-contiguous
    by_pattern: tuple[np.ndarray, ...]  # _click_patterns of k
    scratch: np.ndarray  # (population,) zeros: the reciprocal ranks' batch totals
    utility: np.ndarray  # per click pattern: the utility (utility_patterns), or empty without the utility metric
    scratch_utility: np.ndarray  # (population,) zeros: the utilities' batch totals (empty without)
    scratch_squares: np.ndarray  # (rows, population) zeros: the squares' batch totals (test: delta_t; no rows without)


#: the compiled step's squares without ``test: delta_t`` (no rows)
NO_SQUARES = np.zeros((0, 0), dtype=np.float64)


def step_inputs(users: Any, grades: np.ndarray, population: int,
                weights: np.ndarray | None = None, squares: int = 0) -> StepInputs | None:
    """The compiled A/B batch step's inputs for shown-grade rows ``grades`` (with the utility's rank weights
    ``weights``, :func:`utility_weights`, when the design carries it; with ``squares`` rows of sums of squares,
    ``test: delta_t``'s), or ``None`` where it does not apply: lists
    longer than 16 ranks, click models without grade tables (:meth:`simulations.users.UserModels.chains`), or (int8)
    grades the models do not know (their own path raises)."""
    by_pattern = _click_patterns(grades.shape[1])
    chains = None if by_pattern is None else users.chains(grades.shape[1])
    if chains is None or grades.dtype != np.int8 or not grades.size or not chains.accepts(grades):
        return None
    utility = np.zeros(0) if weights is None else utility_patterns(weights)
    scratch_utility = np.zeros(0 if weights is None else population, dtype=np.float64)
    scratch_squares = np.zeros((squares, population if squares else 0), dtype=np.float64)
    return StepInputs(chains, np.ascontiguousarray(grades), by_pattern, np.zeros(population, dtype=np.float64),
                      utility, scratch_utility, scratch_squares)


def run_step(step: StepInputs, batch: Batch, in_b: np.ndarray, b_rows: int, rng: np.random.Generator,
             clicks: np.ndarray, abandoned: np.ndarray, rr: np.ndarray, utility: np.ndarray | None = None,
             squares: np.ndarray | None = None) -> bool:
    """One A/B batch step by the compiled loop (:func:`simulations.kernels.ab_step`: row ``query + b_rows *
    in_b[user]`` of ``step.grades``), its clicks, abandonment and reciprocal ranks (and, with ``step.utility``,
    the utilities into ``utility``; with ``step.scratch_squares``' rows, the values' squares into the rows of
    ``squares``: clicks, reciprocal ranks, utilities) added to the per-user sums; ``False`` (nothing drawn) where a
    row's user type or grade is one the kernels cannot sample."""
    counts = step.chains.counts(step.grades[:0], batch.user_type, len(batch))
    if counts is None:
        return False
    from clickmodels.kernels import BLOCK
    from simulations import kernels

    if step.utility.size and utility is None:
        raise ValueError("the step carries the utility: give its per-user sums")
    if squares is None:
        squares = NO_SQUARES
    if squares.shape != step.scratch_squares.shape:
        raise ValueError(f"the step adds up {step.scratch_squares.shape[0]} rows of squares, not {squares.shape[0]}")
    chains = step.chains
    kernels.ab_step(step.grades, batch.query, batch.user, in_b, b_rows, batch.user_type, counts,
                    chains.uniforms(counts, rng), chains.thresholds, chains.width, chains.independent_flags,
                    chains.use_t1, chains.use_t3, BLOCK, *step.by_pattern[1:], clicks, abandoned, rr, step.scratch,
                    step.utility, step.scratch_utility if utility is None else utility, step.scratch_utility,
                    squares, step.scratch_squares)
    return True


@register_design("ab")
class ABDesign(Design):
    accumulators = ("clicks", "abandoned", "rr")
    #: test: delta_t: each metric's per-user sums of its values' squares (set in __init__; None otherwise): views of
    #: the rows of ``_square_rows`` (clicks, rr and, with the utility, utility: the compiled step's order)
    squares: dict[str, np.ndarray] | None = None
    _square_rows: np.ndarray = NO_SQUARES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # metric: utility: a fourth metric sum, the clicks weighted by the offline metric's C/W/L weights
        self.utility_weights: np.ndarray | None = None
        if self.config.metric == "utility":
            self.accumulators = (*type(self).accumulators, "utility")
            self.sums["utility"] = np.zeros(self.population, dtype=np.float64)
            self.utility_weights = utility_weights(self.world, self.world.ranked_labels("A").shape[1])
        # the per-user sums as rows of one (4, population) block (impressions, clicks, abandoned, rr; and utility):
        # a checkpoint gathers an arm's sums in one take; updated in place through the views in self.sums
        self._block = np.zeros((len(self.sums), self.population), dtype=np.float64)
        self.sums = {k: self._block[i] for i, k in enumerate(self.sums)}
        self.ranking_a = self.world.rankings["A"]
        self.ranking_b = self.world.rankings["A" if self.aa else "B"]
        # (Q, depth) grades of each arm's list: a batch's shown grades are rows of these
        # (equal to shown_labels of the shown ranking, element by element)
        self.grades_a = self.world.ranked_labels("A")
        self.grades_b = self.grades_a if self.aa else self.world.ranked_labels("B")
        # both arms' tables stacked (A's rows, then B's): a batch's shown grades in one gather
        self.grades_ab = None if self.aa else np.concatenate([self.grades_a, self.grades_b])
        # per click pattern (bit r = rank r clicked, up to 16 ranks): clicks, abandonment and reciprocal rank of
        # the first click, by the operations of the per-row path (1 / (rank + 1.0)); None for longer lists
        self.by_pattern = _click_patterns(self.grades_a.shape[1])
        salt = int(self.rng.integers(0, 2**63))
        self.in_b = hash_unit(np.arange(self.population), salt) < self.config.share_b
        from simulations.srm import Injection

        # analysis.srm.inject: a deliberately broken split (None normally)
        self.injection = Injection.from_design(self, salt)
        # analysis.cuped: the replicate's pre-period, set by simulations.cuped.attach_pre_periods
        self.pre_period = None
        self._arms: tuple[np.ndarray, ...] | None = None  # active_arms() until the next batch
        self._stats: CheckpointStats | None = None  # checkpoint_stats() until the next batch
        self._kernel: tuple[Any, ...] | None = None  # the compiled batch step's inputs (_kernel_inputs)
        # test: delta_t: each metric's per-user sum of its per-impression values' squares (abandonment is 0/1: its
        # own sum), for the intra-user correlation its df take (onlineeval.stats.intra_user_correlation)
        if self.config.test == "delta_t":
            keys = [k for k in self.accumulators if k != "abandoned"]  # clicks, rr (, utility)
            self._square_rows = np.zeros((len(keys), self.population), dtype=np.float64)
            self.squares = {k: self._square_rows[i] for i, k in enumerate(keys)}

    def active_arms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(users, ia, ib, users_a, users_b)``: the active users (ascending), the positions among them of
        arm A's and arm B's users, and those users' ids (``users[ia]``, ``users[ib]``). Computed once per
        checkpoint for the estimates, the SRM checks and CUPED (kept until the next batch)."""
        if self._arms is None:
            users = np.flatnonzero(self.sums["impressions"] > 0)
            b = self.in_b.take(users)
            ib, ia = np.flatnonzero(b), np.flatnonzero(~b)
            self._arms = (users, ia, ib, users.take(ia), users.take(ib))
        return self._arms

    def checkpoint_stats(self) -> CheckpointStats:
        """The estimates, SRM inputs and CUPED parts of a ``test: delta`` checkpoint, computed once until the
        next batch: each arm's four per-user sums (and pre-period sums) gathered in one ``take`` by the arm's
        user ids (:meth:`active_arms`), and the three metrics in one pass over each arm's users
        (:func:`onlineeval.stats.cuped._cuped_ratio_stacked`; :func:`~onlineeval.stats.cuped._ratio_diff_stacked`
        without a pre-period): the unadjusted estimates are ``ratio_diff_values``'s bit for bit, the CUPED
        parts those of ``cuped_ratio`` and ``pooled_correlations`` to rounding (tested). A checkpoint of
        ``configs/ab.yaml`` with CUPED and SRM rows costs 0.6-0.8 ms on day 1 (4.1k active users) and 0.9-1.1 ms
        on day 14 (15.4k) instead of 1.5-1.6 and 3-4 ms (best of 20, load 7.5 on the 2-core machine). With
        :data:`simulations.stat_kernels.COMPILED` (the default) the statistics come from the compiled kernels
        (:meth:`_compiled_stats`; the same numbers to rounding), this NumPy path being their reference."""
        if self._stats is None:
            from simulations import stat_kernels

            if stat_kernels.COMPILED:
                self._stats = self._compiled_stats()
                return self._stats
            from onlineeval.stats.cuped import _cuped_ratio_stacked, _ratio_diff_stacked

            _, _, _, users_a, users_b = self.active_arms()
            block = self._block
            if any(v.base is not block for v in self.sums.values()):  # sums replaced (or copied): stack them
                block = np.stack(list(self.sums.values()))
            xa, xb = block.take(users_a, axis=1), block.take(users_b, axis=1)
            n_impr = int(block[0].sum())
            pre = self.pre_period
            unadjusted = adjusted = pooled = None
            n_pre = 0
            if pre is not None:
                from simulations.cuped import pre_block

                pre_rows = pre_block(pre, self.accumulators)
                pa, pb = pre_rows.take(users_a, axis=1), pre_rows.take(users_b, axis=1)
                n_pre = int(np.count_nonzero(pa[0]) + np.count_nonzero(pb[0]))
            if users_a.size >= 2 and users_b.size >= 2:  # _has_data
                names = [_METRIC_OF[k] for k in self.accumulators]  # the rows 1.. of the block
                if pre is None:
                    values = _ratio_diff_stacked(xa[1:], xa[0], xb[1:], xb[0], alpha=self.alpha)
                else:
                    values, adj, cross, n_pre = _cuped_ratio_stacked(xa[1:], xa[0], xb[1:], xb[0], pa[1:], pa[0],
                                                                     pb[1:], pb[0], alpha=self.alpha)
                    adjusted, pooled = dict(zip(names, adj, strict=True)), dict(zip(names, cross, strict=True))
                unadjusted = dict(zip(names, values, strict=True))
            self._stats = CheckpointStats(int(users_a.size), int(users_b.size), n_impr, xa[0], xb[0], unadjusted,
                                          adjusted, pooled, n_pre)
        return self._stats

    def _compiled_stats(self) -> CheckpointStats:
        """:meth:`checkpoint_stats` by the compiled kernels (:func:`simulations.stat_kernels.ab_arm_parts`: both
        arms' users found and their statistics computed in passes over the population arrays): the NumPy path's
        numbers to rounding (the sums' order differs; tested to 1e-12 relative)."""
        from onlineeval.stats._checks import check_alpha
        from onlineeval.stats.cuped import _cuped_from_arms, _ratio_diff_from_arms
        from simulations.stat_kernels import ab_arm_parts, scratch_of

        block = self._block
        if any(v.base is not block for v in self.sums.values()):  # sums replaced (or copied): stack them
            block = np.stack(list(self.sums.values()))
        pre = self.pre_period
        pre_rows = None
        if pre is not None:
            from simulations.cuped import pre_block

            pre_rows = pre_block(pre, self.accumulators)
        arms, users_a, users_b, residual = ab_arm_parts(block[0], block[1:], self.in_b, pre_rows, scratch_of(self))
        imp_a, imp_b = block[0].take(users_a), block[0].take(users_b)
        unadjusted = adjusted = pooled = None
        n_pre = 0
        if arms[0] is not None:
            names = [_METRIC_OF[k] for k in self.accumulators]  # the rows 1.. of the block
            alpha = check_alpha(self.alpha)
            if pre_rows is None:
                values = _ratio_diff_from_arms(arms[0], arms[1], alpha)
            else:
                values, adj, cross, n_pre = _cuped_from_arms(arms[0], arms[1], alpha, 0.0, residual)
                adjusted, pooled = dict(zip(names, adj, strict=True)), dict(zip(names, cross, strict=True))
            unadjusted = dict(zip(names, values, strict=True))
        elif pre_rows is not None:
            n_pre = int(np.count_nonzero(pre_rows[0].take(users_a)) + np.count_nonzero(pre_rows[0].take(users_b)))
        return CheckpointStats(int(users_a.size), int(users_b.size), int(block[0].sum()), imp_a, imp_b, unadjusted,
                               adjusted, pooled, n_pre)

    def _checkpoint_values(self, primary: bool = False
                           ) -> tuple[int, int, dict[str, tuple[float, ...]]] | None:
        """The per-batch look's numbers (``primary``: the primary metric's difference, ``test: delta``) by the
        compiled kernels (:func:`simulations.stat_kernels.ab_diff_values`; the NumPy path's numbers to rounding,
        tested), or None: the daily checkpoint (:meth:`checkpoint_stats`), ``test: welch`` / ``delta_t`` and
        :data:`simulations.stat_kernels.COMPILED` off take their own paths."""
        from simulations import stat_kernels

        if not (primary and stat_kernels.COMPILED and self.config.test == "delta"):
            return None
        metric = self.metric_names()[0]
        n_users, values = stat_kernels.ab_diff_values(self, [self.accumulators.index(METRICS[metric]) + 1],
                                                      self.alpha)
        vals = (math.nan,) * 5 if values is None else tuple(values[0])
        return n_users, int(self.sums["impressions"].sum()), {metric: vals}

    def process(self, batch: Batch) -> None:
        self._arms = self._stats = None  # the active users, the split and the sums may change
        super().process(batch)

    def _process(self, batch: Batch) -> None:
        if self.injection is not None:
            self.injection.apply(self.in_b, batch)
        step = self._kernel_inputs()
        b_rows = 0 if self.grades_ab is None else self.grades_a.shape[0]
        # everything after the uniforms' draw in one compiled loop (the same numbers, tested)
        if step is not None and run_step(step, batch, self.in_b, b_rows, self.rng, self.sums["clicks"],
                                         self.sums["abandoned"], self.sums["rr"], self.sums.get("utility"),
                                         self._square_rows):
            return
        q = batch.query
        if self.grades_ab is None:  # A/A: both arms show A
            labels = self.grades_a.take(q, axis=0)
        else:
            row = q + self.in_b.take(batch.user) * self.grades_a.shape[0]  # B's rows after A's
            labels = self.grades_ab.take(row, axis=0)
        clicks = self.users.sample(labels, batch.user_type, self.rng)
        n_clicks, abandoned, rr = _click_values(clicks, self.by_pattern)
        self._add_exact("clicks", batch.user, n_clicks)
        self._add_exact("abandoned", batch.user, abandoned)
        self._add("rr", batch.user, rr)
        utility = None if self.utility_weights is None else utility_values(clicks, self.utility_weights)
        if utility is not None:
            self._add("utility", batch.user, utility)
        if self.squares is not None:
            for key, values in (("clicks", n_clicks), ("rr", rr), ("utility", utility)):
                if values is not None:
                    self.squares[key] += np.bincount(batch.user, weights=values * values, minlength=self.population)

    def _kernel_inputs(self) -> StepInputs | None:
        """:func:`step_inputs` of both arms' stacked grades (A's alone in an A/A test), built on first use."""
        if self._kernel is None:
            grades = self.grades_a if self.grades_ab is None else self.grades_ab
            self._kernel = (step_inputs(self.users, grades, self.population, self.utility_weights,
                                        self._square_rows.shape[0]),)
        return self._kernel[0]

    def checkpoint(self, day: int) -> None:
        """The estimates, then the SRM checks (``srm:`` rows) and, with a pre-period, the CUPED
        estimates (``cuped:`` rows; :mod:`simulations.srm`, :mod:`simulations.cuped`)."""
        from simulations.cuped import cuped_rows
        from simulations.designs.base import CheckpointRow
        from simulations.srm import srm_rows

        if self.config.test != "delta":  # welch, delta_t: Design.checkpoint, whose rows keep the t's df
            super().checkpoint(day)
        else:  # the rows of Design.checkpoint from checkpoint_stats (the same numbers)
            st = self.checkpoint_stats()
            n_users, nan5 = st.n_a + st.n_b, (float("nan"),) * 5
            for i, metric in enumerate(self.metric_names()):
                vals = nan5 if st.unadjusted is None else st.unadjusted[metric]
                self.rows.append(CheckpointRow(self.name, self.aa, day, metric, i == 0, *vals, n_users,
                                               st.n_impressions))
        self.rows += srm_rows(self, day)
        self.rows += cuped_rows(self, day)

    def _active_sums(self, users: np.ndarray) -> dict[str, np.ndarray]:
        # test: delta gathers each arm's sums from the population arrays (_estimates); welch reads these
        return super()._active_sums(users) if self.config.test == "welch" else {}

    def _has_data(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> bool:
        in_b = int(self.in_b[users].sum())
        return in_b >= 2 and users.size - in_b >= 2  # two users per arm for a variance

    def intra_user_correlation(self, metric: str, users_a: np.ndarray, users_b: np.ndarray) -> float:
        """``test: delta_t``: the correlation of a user's impressions of ``metric`` among the arms' users (the arms
        as fixed effects; :func:`onlineeval.stats.intra_user_correlation` of the sums, counts and sums of squares),
        under which its df are computed."""
        from onlineeval.stats.small_sample import intra_user_correlation_values

        assert self.squares is not None
        key = METRICS[metric]
        users = np.concatenate([users_a, users_b])
        num = self.sums[key].take(users)
        square = num if key == "abandoned" else self.squares[key].take(users)
        groups = np.concatenate([np.zeros(users_a.size, dtype=np.int8), np.ones(users_b.size, dtype=np.int8)])
        return intra_user_correlation_values(num, self.sums["impressions"].take(users), square, groups)

    def metric_names(self) -> list[str]:
        carried = [_METRIC_OF[k] for k in self.accumulators]
        return [self.config.metric, *[m for m in carried if m != self.config.metric]]

    def _estimates(self, users: np.ndarray, sums: dict[str, np.ndarray],
                   metrics: list[str] | None = None) -> dict[str, Any]:
        """Each metric's estimate (of ``metrics`` only when given: the per-batch looks' primary metric).
        ``test: delta`` gathers each arm's sums from the population arrays by the arm's user ids
        (:meth:`active_arms`: the values and order of the boolean masks) and takes
        :func:`onlineeval.stats.online.ratio_diff_values`, the lean path of ``ratio_diff`` (the same numbers,
        bit for bit); ``sums`` may then be empty. ``test: delta_t`` gathers them the same way and takes
        :func:`onlineeval.stats.small_sample.ratio_diff_cr2_values` (an :class:`TValues` with its df). ``test:
        welch`` reads ``sums`` (the impressions and the metrics' sums of the active users)."""
        from onlineeval.stats import welch_diff
        from onlineeval.stats.online import ratio_diff_values

        names = self.metric_names() if metrics is None else metrics
        out = {}
        if self.config.test == "welch":
            b = self.in_b.take(users)
            den = sums["impressions"]
            a = ~b
            for metric in names:
                per_user = sums[METRICS[metric]] / den  # every active user has den >= 1
                out[metric] = welch_diff(per_user[a], per_user[b], alpha=self.alpha)
        else:
            active, _, _, users_a, users_b = self.active_arms()
            if active.size != users.size:  # other users than the active ones (not the checkpoint's)
                b = self.in_b.take(users)
                users_a, users_b = users[~b], users[b]
            den = self.sums["impressions"]
            den_a, den_b = den.take(users_a), den.take(users_b)
            for metric in names:
                num = self.sums[METRICS[metric]]
                if self.config.test == "delta_t":
                    from onlineeval.stats.small_sample import ratio_diff_cr2_values

                    icc = self.intra_user_correlation(metric, users_a, users_b)
                    vals, df = ratio_diff_cr2_values(num.take(users_a), den_a, num.take(users_b), den_b,
                                                     alpha=self.alpha, icc=icc)
                    out[metric] = TValues(*vals, df)
                else:
                    out[metric] = ratio_diff_values(num.take(users_a), den_a, num.take(users_b), den_b,
                                                    alpha=self.alpha)
        return out
