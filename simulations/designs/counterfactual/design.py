r"""The counterfactual design: a randomised logging policy serves the traffic, and
off-policy estimators read its log to compare two rankers that were never shown.

Estimand: the difference of the two targets' online values (``targets``, baseline
first; by default B and A) of the design's ``metric`` under the simulated users,

.. math::

    \Delta = V(B) - V(A), \qquad V(\pi) = \mathbb E_q\, \mathbb E[R \mid q, \pi(q)],

the same quantity an A/B test of ``metric`` estimates, so the run's A/B test,
interleaving and off-policy rows stand side by side on the same traffic (every design
sees the same batches; the A/B and interleaving designs keep their own arms).

Per impression the logger (:mod:`simulations.policies`, randomising over the full
candidate list of ``logger.ranker``) draws the shown list, the users' click models click,
and each estimator's per-impression terms :math:`(\mathrm{num}_i, \mathrm{den}_i)`
(:meth:`onlineeval.estimators.Estimator.terms`) for each target are added to per-user
sums. At a checkpoint the estimate of each estimator is the *paired* difference of the
two ratio estimates from the same log,

.. math::

    \hat\Delta = \hat R_B - \hat R_A, \quad \hat R_t = \frac{\sum_u x_{tu}}{\sum_u y_{tu}},

(the reward's constant offset cancels), with the delta-method standard error over users
from the per-user influence values :math:`e_{tu} = (x_{tu} - \hat R_t y_{tu}) / \bar y_t`
(:func:`onlineeval.stats.ratio_linearization`): :math:`\widehat{\mathrm{se}}^2 =
\sum_u (d_u - \bar d)^2 / (n(n-1))` with :math:`d_u = e_{Bu} - e_{Au}`, and on every day the
interval and two-sided test of Student's t with Bell and McCaffrey's degrees of freedom of the
difference (:meth:`PairedEstimate.with_df`), what ``onlineeval estimate`` prints for that day's log:
the design adds up per user the products of the two targets' weights, from which the degrees of
freedom follow without the weights (:mod:`simulations.designs.counterfactual.products`). Users are
the clusters because they persist (Deng, Knoblich and Lu 2018).

Cost: per impression, one draw from the logger, the clicks, the logging propensities of the shown list (rows that
show a target's list take them from a per-query table computed once, :func:`known_list_propensities`), each
estimator's terms for both targets and their per-user sums (rows of one matrix); at a checkpoint, the paired
difference of each accumulated estimator over the active users. Where the design has the common form (a mixture of
epsilon-greedy loggers, as in ``configs/counterfactual.yaml``, or one epsilon-greedy logger; the IPS family and
adaptive IPS) everything after the logger's draw and the users' uniforms runs in one compiled pass per batch
(:class:`~simulations.designs.counterfactual.step.CompiledStep`: the general path's numbers bit for bit,
``fused_step = False`` runs the general path), and the checkpoints in compiled passes over the sums matrix
(:mod:`simulations.designs.counterfactual.checkpoint`, adaptive IPS's whole-log choice batch chunk by batch chunk: the
NumPy path's numbers to 1e-12 with the same decisions; ``stat_kernels.COMPILED = False`` runs the NumPy path). The
general path (any logger and estimator) keeps the IPS family's terms for both targets in one compiled kernel
(:class:`~simulations.designs.counterfactual.fused.FusedTerms`) and the mixture's propensities in another
(:mod:`simulations.policies.kernels`).
Measured with ``benchmarks/bench_counterfactual.py --replicates 2 --rounds 3`` on ``configs/counterfactual.yaml``
(CPU time of one process, each batch's best of 3 rounds, the 2-core machine at load 0.8-3, ten runs, 2026-12-01,
the last session): this design 3.05-3.40x team-draft's cost per impression (median 3.2; 0.45-0.60 us against
0.14-0.18; 3.5x before the RandTop draw took Fisher-Yates steps, 4.2x and 6.3x in the sessions before); in the
quietest run serving 0.33 (the logger's draw 0.05, the users' uniforms 0.02, the compiled pass 0.18, the rest 0.02),
checkpoints 0.10 (team-draft's 0.03). With one estimator it costs 1.95-2.32x team-draft (by estimator), one
epsilon-greedy logger with one estimator 1.77-1.97x. Why not team-draft's cost: team-draft's draws are table lookups
of precomputed interleavings and its outcome a bit count, where this design draws randomised lists (a uniform for
the component, one for the branch and one per shown slot of a randomised row), computes their propensities, six
estimators' terms for two targets and 16 per-user sums per impression, and its checkpoints compute eight ratio
statistics (five paired differences, the logger's three metrics) where team-draft's compute one. Since its
intervals take Bell and McCaffrey's degrees of freedom (2026-12-06) it also adds up per user the products of the
two targets' weights (21 more per-user sums for the bundled six estimators, adaptive IPS's every pair of behaviours
among them) and computes each difference's degrees of freedom at every checkpoint: measured the same way (load 1.6-2),
the compiled step 0.093 -> 0.18 us per impression, the checkpoints 0.041 -> 0.084, the design 3.9x -> 5.2x
team-draft's in the benchmark's variants table and 4.6x -> 8.1x as the config runs its designs.
Estimators that fit a model on
the whole log (their terms depend on the other impressions: ``dm``, ``dr``, ``dr_list``,
``cascade_dr``, ``adaptive_ips``, ``pbm_ips`` unless it has given examination
probabilities and ``click_propensity`` other than ``empirical``, or any estimator
declaring ``whole_log = True``) are recomputed from the
accumulated log on the last day and every ``refit_days`` days (rows of other days are
undefined). Adaptive IPS keeps its three behaviours' per-row terms batch by batch (each
row's terms depend on that row alone) and only makes its whole-log choice among them
there, with the same numbers as recomputing it on the whole log.

A/A variant: both targets are the baseline, so the paired difference is identically 0
at every checkpoint (no test can reject); the rows say so (estimate 0, SE 0) without
computing it.

Also recorded per checkpoint (not estimates of :math:`\Delta`; the analysis reports
them apart): ``logging:<metric>``, the logger's own online metrics observed on the
traffic it served (the cost of logging, against the production ranker A's exact value),
and ``support:<estimator>:<target>``, the logged impressions whose query's target list
has an event of logging probability 0 at the estimator's support level (such an
estimator cannot evaluate that target there).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onlineeval.errors import ConfigError, InputError
from simulations.designs.base import CheckpointRow, Design, _values, register_design
from simulations.designs.counterfactual.bootstrap import LastDayBootstrap, bootstrap_test
from simulations.designs.counterfactual.fused import FusedTerms, stack_propensities, stacked_indicators
from simulations.designs.counterfactual.paired import (
    PairedEstimate,
    paired_difference,
    paired_differences,
    ratio_means,
)
from simulations.designs.counterfactual.products import (
    ProductLayout,
    adaptive_df,
    add_products,
    batch_weights,
    choice_codes,
    difference_df_of_sums,
    user_products,
)
from simulations.designs.counterfactual.serving import (
    EarlyRefit,
    estimator_error,
    _BatchReward,
    _BatchTarget,
    _one_chunk,
    _row_separable,
    _shared_known,
    _shared_support,
    build_estimators,
    distinct_propensities,
    known_list_propensities,
    refits_on_whole_log,
    shared_policy,
    shared_target,
    stack_known,
)
from simulations.traffic import Batch

__all__ = ["LOGGING_METRICS", "CounterfactualDesign", "bootstrap_test"]  # (bootstrap_test: bootstrap.py)

#: the logger's own online metrics recorded as ``logging:<metric>`` rows
LOGGING_METRICS = ("clicks_per_query", "abandonment", "reciprocal_rank")


def _shown(data: Any, w: Any) -> np.ndarray:
    """``w`` as float64, 0 at empty slots (slot weights; as ``estimate``'s degrees of freedom read them)."""
    from onlineeval.estimators.intervals import _shown as shown

    return shown(data, w)


# ------------------------------------------------------------------------------ the design
@register_design("counterfactual")
class CounterfactualDesign(LastDayBootstrap, Design):
    """See the module docstring."""

    accumulators = ("obs:clicks", "obs:abandoned", "obs:rr")

    #: the replicate's last day (set by the runner): whole-log estimators are computed then
    last_day: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from simulations.designs.counterfactual.metric import design_reward

        cfg = self.config
        self.reward = design_reward(cfg.metric, self.world.offline.metric, self.world.depth)
        self.estimators = build_estimators(cfg)
        self.support_rows: list[tuple[str, str]] = []
        self._log: list[dict[str, np.ndarray]] = []
        if self.aa:
            return  # the paired difference of a target with itself is 0: nothing to serve or log
        self.policy = shared_policy(cfg.logger, self.world)  # type: ignore[arg-type]
        self.target_names = list(cfg.targets)
        self.targets = [_BatchTarget(shared_target(self.world, t)) for t in self.target_names]
        self._batch_reward = _BatchReward(self.reward)
        # the targets' lists with their logging propensities for every query (looked up for
        # the rows that show them); None when a target list does not fit the logger's slots
        self._known: list[tuple[np.ndarray, Any]] | None = None
        if all(np.shape(self.world.rankings[t])[1] == self.policy.k for t in self.target_names):
            self._known = [_shared_known(self.policy, self.world, t) for t in self.target_names]
            self._known_table = stack_known(self._known)
            self._known_lists = np.stack([lists for lists, _ in self._known])  # (T, Q, k)
        self.whole_log = {label: refits_on_whole_log(est) for label, est in self.estimators}
        # whole-log estimators whose per-row statistics do not depend on the rest of the log
        # (adaptive IPS: each behaviour's terms; only the choice among them is whole-log):
        # the statistics are kept batch by batch and combined at a due checkpoint
        self._row_stats: dict[tuple[str, str], list[dict[str, np.ndarray]]] = {
            (label, t): [] for label, est in self.estimators if self.whole_log[label] and _row_separable(est)
            for t in self.target_names
        }
        self._row_meta: list[dict[str, np.ndarray]] = []  # the rows' users and user types, batch by batch
        # the IPS family's terms for both targets at once (the same numbers as their terms)
        self._fused = FusedTerms.build(self.estimators, self.reward, self.whole_log,
                                       {label for label, _ in self._row_stats})
        self._target_p: Any = None  # the targets' propensities of the batch's lists, stacked (fused terms)
        self._masks: dict[tuple[str, str], np.ndarray | None] = {}
        for label, est in self.estimators:
            for t in self.target_names:
                mask = _shared_support(self.policy, self.world, t, getattr(est, "support_level", "item"))
                self._masks[(label, t)] = mask
                if mask is not None:
                    self.support_rows.append((label, t))
        # impressions per query (support violations are counted from them at a checkpoint:
        # the impressions whose query's target list the logger cannot show, exact integers)
        self._query_count = np.zeros(self.world.labels.shape[0], dtype=np.int64)
        self._init_sums()

    def _init_sums(self) -> None:
        """The per-user sums as rows of one ``(V, population)`` matrix, ``self.sums[key]`` a
        view of its row: impressions, the logger's three observed metrics, then four
        blocks of one row per accumulated estimator (numerators for the first target,
        for the second, denominators for the first, for the second), so a checkpoint
        gathers the active users once and reads each block as a contiguous matrix. An
        estimator whose terms have no denominator (all ones) gets the batch's impression
        counts added to its denominator rows (one addition for all such rows; the same
        numbers as counting them one by one)."""
        self._acc_labels = [label for label, _ in self.estimators if not self.whole_log[label]]
        keys = ["impressions", *self.accumulators]
        self._block = len(keys)  # the first row of the estimators' blocks
        for part in ("num", "den"):
            for t in self.target_names:
                keys += [f"{part}:{label}:{t}" for label in self._acc_labels]
        # then the per-user sums of the weights' products (the differences' degrees of freedom, products.py)
        self._products = ProductLayout.build(self.estimators, self.whole_log, self._fused,
                                             {label for label, _ in self._row_stats})
        self._products.first = len(keys)
        keys += self._products.keys()
        self._unweighted: set[str] = set()  # accumulated estimators without weights (df G - 1, as estimate)
        self._rows = {key: i for i, key in enumerate(keys)}
        self._acc = np.zeros((len(keys), self.population))
        self.sums = {key: self._acc[i] for key, i in self._rows.items()}
        self._unit_rows: list[int] = []  # denominator rows of all-ones terms (decided at the first batch)
        self._decided: set[str] = set()

    #: whether a batch is served by :class:`~simulations.designs.counterfactual.step.CompiledStep` where it applies
    #: (one compiled pass after the draws, the same numbers); False always runs the general path (the reference)
    fused_step: bool = True
    _step: Any = False  # the design's CompiledStep, None where it does not apply (False: not decided yet)

    def process(self, batch: Batch) -> None:
        """:meth:`Design.process` with the batch's impression counts kept for the
        denominators of all-ones terms (or :class:`~simulations.designs.counterfactual.step.CompiledStep`)."""
        if len(batch) == 0:
            return
        if self._step is False:
            from simulations.designs.counterfactual.step import CompiledStep

            self._step = CompiledStep.build(self) if self.fused_step else None
        if self._step is not None:
            self._step.run(self, batch)
            return
        counts = np.bincount(batch.user, minlength=self.population)
        self.sums["impressions"] += counts
        self._counts = counts
        self._process(batch)

    def _add_dens(self, user: np.ndarray, dens: dict[str, np.ndarray | None]) -> None:
        """Add a batch's denominators to their rows (after :meth:`process` set the batch's
        impression counts); ``None`` means all ones, i.e. the batch's impression counts,
        added for all such rows at once. A row is all ones from its first batch on until
        an array comes (then it keeps its counts and adds arrays); a ``None`` for a row
        that had an array is added as counts on its own. The same numbers as counting
        each row by itself."""
        for key, den in dens.items():
            row = self._rows[key]
            if key not in self._decided:  # the first batch decides whether the row is all ones
                self._decided.add(key)
                if den is None:
                    self._unit_rows.append(row)
            if den is None:
                if row not in self._unit_rows:  # an array came first: add the counts now
                    self._acc[row] += self._counts
                continue
            if row in self._unit_rows:  # all ones so far, an array now: the counted row stays
                self._unit_rows.remove(row)
            self._add(key, user, den)
        if self._unit_rows:
            counts = self._counts.astype(np.float64)  # exact integers, as the int counts would be added
            for row in self._unit_rows:
                self._acc[row] += counts

    # -------------------------------------------------------------------------- serving
    def _logged(self, batch: Batch) -> Any:
        from onlineeval.estimators import LoggedData

        shown = np.asarray(self.policy.sample(batch.query, self.rng), dtype=np.int64)
        clicks = self._clicks(batch, shown)
        m = self.world.labels.shape[1]
        compiled = self._compiled_logging(batch.query, shown)
        if compiled is not None:
            same, runs, p, self._target_p = compiled
        elif self._known is None:
            p = distinct_propensities(self.policy, batch.query, shown, m)
            same = runs = None
        else:
            # rows of lists[q] for both targets at once, and the running AND over the slots
            same = self._known_lists.take(batch.query, axis=1) == shown
            runs = same.copy()
            for j in range(1, runs.shape[2]):
                runs[:, :, j] &= runs[:, :, j - 1]
            p = known_list_propensities(self.policy, batch.query, shown, m, self._known, [r[:, -1] for r in runs],
                                        self._known_table, sampled=True)
        for own in (shown, clicks, p.list, p.prefix, p.item):
            if isinstance(own, np.ndarray) and own.base is None:  # this batch's own arrays: made read-only,
                own.setflags(write=False)  # the log keeps them without a copy (LoggedData keeps frozen arrays)
        # the logger's own draws (rankings by construction; the whole log's rows are checked again in .log)
        data = LoggedData(batch.query, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item,
                          user=batch.user, user_type=batch.user_type, logger=self.policy, lists_checked=True)
        for target in self.targets:
            target.forget()  # the cache holds one batch (keyed by the arrays' identity)
        if same is not None and runs is not None:  # the targets' lists are the known lists: indicators at hand
            for target, eq, run in zip(self.targets, same, runs, strict=True):
                target.prime(data.query, data.shown, eq, run)
        if self._fused is not None and compiled is None:
            self._target_p = (stacked_indicators(same, runs) if same is not None and runs is not None else
                              stack_propensities([t.propensities(data.query, data.shown) for t in self.targets]))
        return data

    #: whether the logging propensities, the target-list match and the targets' indicators of a mixture of
    #: epsilon-greedy loggers' own lists are computed by the compiled kernel
    #: (:func:`simulations.policies.kernels.logged_propensities`; the same numbers); False runs the NumPy code
    compiled: bool = True

    def _compiled_logging(self, query: np.ndarray, shown: np.ndarray) -> Any:
        """``(same, runs, p, target_p)`` of the batch's lists by the compiled kernel (the same numbers as
        :func:`known_list_propensities` with ``sampled=True``, the running AND of the match and
        :func:`stacked_indicators`), or ``None`` when it does not apply (not :attr:`compiled`, the logger not a
        mixture of epsilon-greedy policies filling the slots, a target list not of the logger's slots, more than
        16 slots, or query ids not int64)."""
        from onlineeval.estimators import Propensities
        from simulations.policies.epsilon_greedy import COMPILED_MAX_K

        if not self.compiled or self._known is None or query.dtype != np.int64 or self.policy.k > COMPILED_MAX_K:
            return None
        stacked = getattr(self.policy, "_stacked", None)
        kernel = stacked() if callable(stacked) else None
        if kernel is None:
            return None
        from simulations.policies import kernels

        same, runs, p_list, p_prefix, p_item, tp_list, tp_prefix, tp_item = kernels.logged_propensities(
            query, shown, *self._known_arrays(), kernel._rank_of, kernel._n_eff, kernel._w_det, kernel._w_rt,
            kernel.det_tab, kernel.rt_tab, kernel._weights, kernel.m, kernel.Q)
        target_p = Propensities(tp_list, tp_prefix, tp_item) if self._fused is not None else None
        return same, runs, Propensities(p_list, p_prefix, p_item), target_p

    def _known_arrays(self) -> tuple[np.ndarray, ...]:
        """The targets' lists ``(T, Q, k)`` int64 and their logging propensities (list, prefix, item) stacked, as
        C-contiguous arrays for the compiled kernels (made once)."""
        kept = self.__dict__.get("_known_flat")
        if kept is None:
            t = self._known_table
            kept = self._known_flat = (np.ascontiguousarray(self._known_lists, dtype=np.int64),
                                       *(np.ascontiguousarray(x, dtype=np.float64) for x in (t.list, t.prefix, t.item)))
        return kept

    def _process(self, batch: Batch) -> None:
        if self.aa:
            return
        data = self._logged(batch)
        self._log.append({
            "query": data.query, "shown": data.shown, "clicks": data.clicks, "user": batch.user,
            "user_type": batch.user_type, "p_list": data.p_list, "p_prefix": data.p_prefix, "p_item": data.p_item,
        })
        n_clicks = data.clicks[:, 0].astype(np.int64)  # clicks.sum(axis=1), slot by slot
        for j in range(1, data.k):
            n_clicks += data.clicks[:, j]
        first = np.argmax(data.clicks, axis=1)
        self._add("obs:clicks", batch.user, n_clicks.astype(np.float64))
        self._add("obs:abandoned", batch.user, (n_clicks == 0).astype(np.float64))
        self._add("obs:rr", batch.user, np.where(n_clicks > 0, 1.0 / (first + 1.0), 0.0))
        self._batch_reward.forget()
        if self._row_stats:
            # the traffic's own type codes (int8: the same values as the log's int64 copy, and
            # the whole-log choice's np.unique over them is several times faster)
            self._row_meta.append({"user": data.user, "user_type": batch.user_type})
        self._query_count += np.bincount(batch.query, minlength=self._query_count.size)
        fused: dict[str, Any] = {}
        behaviours: dict[str, Any] = {}
        if self._fused is not None:
            fused, behaviours = self._fused.compute(data, self._target_p, self._batch_reward)
        dens: dict[str, np.ndarray | None] = {}
        own: dict[tuple[str, int], np.ndarray] = {}  # the weights of the estimators the fused kinds do not cover
        for label, est in self.estimators:
            for i, (t, target) in enumerate(zip(self.target_names, self.targets, strict=True)):
                if self.whole_log[label]:
                    if (label, t) in self._row_stats:
                        if label in behaviours:  # the same arrays as behaviour_terms
                            self._row_stats[(label, t)].append({b: v[i] for b, v in behaviours[label].items()})
                            continue
                        data.require(*est.needs, estimator=est.name)
                        self._row_stats[(label, t)].append(est.behaviour_terms(data, target, self._batch_reward))
                        kinds = self._products.behaviour_kind[label]
                        for b, w in est.slot_weights(data, target).items():
                            own[(kinds[b], i)] = _shown(data, w)
                    continue
                if label in fused:  # the same numbers as est.terms
                    num, den = fused[label]
                    num, den = num[i], (None if den is None else den[i])
                else:
                    try:
                        terms = est.terms(data, target, self._batch_reward)
                    except (InputError, ConfigError) as exc:
                        raise estimator_error(self, est, data.n, exc) from None
                    num, den = terms.num, terms.den
                    if terms.weights is None:
                        self._unweighted.add(label)
                    else:
                        own[(self._products.kind_of[label], i)] = _shown(data, terms.weights)
                self._add(f"num:{label}:{t}", batch.user, num)
                dens[f"den:{label}:{t}"] = den
        self._add_dens(batch.user, dens)
        self._add_products(data, batch.user, own)

    def _add_products(self, data: Any, user: np.ndarray, own: dict[tuple[str, int], np.ndarray]) -> None:
        """Add a batch's products of the two sides' weights to their rows (:mod:`.products`): the fused kinds'
        weights from the targets' propensities of the batch (:func:`batch_weights`), the others' from ``own``
        (their ``Terms.weights`` or behaviours' slot weights, 0 at empty slots)."""
        layout = self._products
        kinds = {k for ka, sa, kb, sb in layout.specs for k, side in ((ka, sa), (kb, sb))
                 if not k.startswith(("own:", "beh:")) and (k, side) not in own}
        weights = dict(own)  # (a fused kind given by an estimator's own terms: the same numbers)
        if kinds and self._target_p is not None:
            weights.update(batch_weights(data, self._target_p, kinds))
        add_products(self._acc, layout, weights, user)  # (an estimator without weights adds none: df G - 1)

    @property
    def violations(self) -> dict[tuple[str, str], int]:
        """Per (estimator, target) with a support mask: the impressions so far whose query's
        target list has an event of logging probability 0 at the estimator's support level."""
        counted: dict[int, int] = {}  # estimators of one support level share their target's mask: counted once
        out: dict[tuple[str, str], int] = {}
        for key in self.support_rows:
            mask = self._masks[key]
            if id(mask) not in counted:
                counted[id(mask)] = int(mask @ self._query_count)  # type: ignore[operator]
            out[key] = counted[id(mask)]
        return out

    def log(self) -> Any:
        """The whole log so far as one :class:`onlineeval.estimators.LoggedData`."""
        from onlineeval.estimators import LoggedData

        if not self._log:
            raise ValueError(f"design {self.name!r} has logged no impression yet")
        if len(self._log) > 1:  # keep one chunk: concatenation cost amortised over checkpoints
            self._log = [{k: np.concatenate([c[k] for c in self._log]) for k in self._log[0]}]
        c = self._log[0]
        if "p_list" not in c:  # the compiled step keeps no propensities: computed now (the same numbers)
            p = self._log_propensities(c["query"], c["shown"])
            c.update(p_list=p.list, p_prefix=p.prefix, p_item=p.item)
        return LoggedData(c["query"], c["shown"], c["clicks"], p_list=c["p_list"], p_prefix=c["p_prefix"],
                          p_item=c["p_item"], user=c["user"], user_type=c["user_type"], logger=self.policy)

    def _log_propensities(self, query: np.ndarray, shown: np.ndarray) -> Any:
        """The logging propensities of the logger's own lists ``shown`` of ``query``, as :meth:`_logged` computes
        them (its compiled kernel, or :func:`known_list_propensities`: the same numbers, tested)."""
        query = np.asarray(query, dtype=np.int64)
        compiled = self._compiled_logging(query, shown) if shown.shape[0] else None
        if compiled is not None:
            return compiled[2]
        known = self._known
        assert known is not None  # the compiled step runs only with the targets' lists known
        return known_list_propensities(self.policy, query, shown, self.world.labels.shape[1], known,
                                       table=self._known_table, sampled=True)

    # -------------------------------------------------------------------------- checkpoint
    def metric_names(self) -> list[str]:
        names = [label for label, _ in self.estimators]
        if self.aa:
            return names
        names += [f"logging:{m}" for m in LOGGING_METRICS]
        return names + [f"support:{label}:{t}" for label, t in self.support_rows]

    def _has_data(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> bool:
        return users.size >= 2

    def checkpoint(self, day: int) -> None:
        """:meth:`Design.checkpoint` with the active users of every per-user sum gathered in
        one step (the rows of the sums matrix) and the accumulated estimators' paired
        differences computed together (:func:`paired_differences`: the same numbers)."""
        self._day = day
        self._boot_kept = None
        try:
            self._checkpoint(day)
        finally:
            self._boot_kept = None  # the bootstrap's resamples are the checkpoint's alone

    def _checkpoint(self, day: int) -> None:
        if self.aa:
            super().checkpoint(day)
            return
        from simulations import stat_kernels

        if stat_kernels.COMPILED:
            from simulations.designs.counterfactual.checkpoint import compiled_checkpoint

            if compiled_checkpoint(self, day):
                return
        impressions = self.sums["impressions"]
        active = impressions > 0
        users = np.flatnonzero(active)
        gathered = self._gathered = self._acc.take(users, axis=1)
        sums = {key: gathered[i] for key, i in self._rows.items()}
        if self._has_data(users, sums):
            estimates = {m: (*_values(e), float(getattr(e, "df", math.inf)))
                         for m, e in self._estimates(users, sums).items()}
        else:
            estimates = {m: (math.nan,) * 5 + (math.inf,) for m in self.metric_names()}
        n_users, n_impr = int(users.size), int(impressions.sum())
        for i, (metric, (est, se, lo, hi, p, df)) in enumerate(estimates.items()):
            self.rows.append(CheckpointRow(self.name, self.aa, day, metric, i == 0, est, se, lo, hi, p, n_users,
                                           n_impr, df))

    def _count_rows(self) -> set[int]:
        """The denominator rows that hold the impression counts (all-ones terms): those :meth:`_add_dens` keeps as
        counts, or those the compiled step adds the counts to (``CompiledStep.units``). Equal to row 0 bit for bit
        (the same integer counts: exact sums; tested after replicates both ways)."""
        rows = set(self._unit_rows)
        if self._step:
            rows.update(int(r) for r in self._step.units)
        return rows

    #: at most this many batches' chunks of adaptive IPS's per-row statistics are read chunk by chunk by the
    #: compiled whole-log choice; more are concatenated first (as the NumPy path does, kept as one chunk)
    max_chunks = 32

    def _due(self, day: int) -> bool:
        every = self.config.refit_days
        return day == self.last_day or (every > 0 and day % every == 0)

    def per_user_sums(self, label: str, target: str) -> tuple[np.ndarray, np.ndarray]:
        """``(num, den)``: the per-user sums of an accumulated estimator's terms for
        ``target`` so far (all users; ``den`` the impression counts when its terms have no
        denominator)."""
        return self.sums[f"num:{label}:{target}"], self.sums[f"den:{label}:{target}"]

    def _estimates(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> dict[str, Any]:
        alpha = self.alpha
        if self.aa:
            return {label: PairedEstimate(0.0, 0.0, alpha) for label, _ in self.estimators}
        day = getattr(self, "_day", None)
        last = self.config.bootstrap and day is not None and day == self.last_day
        # the accumulated estimators together, each row its own paired difference: the four
        # blocks of the gathered sums (numerators A, B, denominators A, B) as they are
        e = len(self._acc_labels)
        x_of: dict[str, list[np.ndarray]] = {}
        paired: dict[str, PairedEstimate] = {}
        if e:
            g = self._gathered
            lo = self._block
            num_a, num_b, den_a, den_b = (g[lo + i * e: lo + (i + 1) * e] for i in range(4))
            paired = dict(zip(self._acc_labels, paired_differences(num_a, den_a, num_b, den_b, alpha), strict=True))
            for i, label in enumerate(self._acc_labels):  # t with the difference's degrees of freedom
                paired[label].with_df(self._pair_df(label, den_a[i], den_b[i], g.__getitem__), alpha)
            x_of = {label: [num_a[i], den_a[i], num_b[i], den_b[i]] for i, label in enumerate(self._acc_labels)}
        out: dict[str, Any] = {}
        whole = None
        for label, est in self.estimators:
            if self.whole_log[label]:
                if day is None or not self._due(day):
                    out[label] = PairedEstimate(math.nan, math.nan, alpha)
                    continue
                if (label, self.target_names[0]) in self._row_stats:
                    codes: list[np.ndarray] = []
                    x = self._row_stat_sums(label, est, users, sums["impressions"], codes)
                    df = adaptive_df(self._products, label, self._gathered, codes, x[1])
                else:
                    whole = self.log() if whole is None else whole
                    weights: list[Any] = []
                    try:
                        x = self._whole_log_sums(est, whole, users, day, weights)
                    except EarlyRefit:  # a refit before the last day on a log it cannot use: undefined that day
                        out[label] = PairedEstimate(math.nan, math.nan, alpha)
                        continue
                    df = self._whole_log_df(weights, whole, users, x)
                out[label] = paired_difference(x[0], x[1], x[2], x[3], alpha).with_df(df, alpha)
            else:
                x = x_of[label]
                out[label] = paired[label]
            if last and math.isfinite(out[label].estimate):
                out[label] = self._bootstrap(out[label], x, self._reselect(label, est, users),
                                             test=bool(est.clt_holds_fixed(self.reward)))
        # the logger's three metrics (ratio_mean's kernel and test, row by row the same numbers)
        obs = np.stack([sums[key] for key in ("obs:clicks", "obs:abandoned", "obs:rr")])
        for metric, est_ in zip(LOGGING_METRICS, ratio_means(obs, sums["impressions"], alpha), strict=True):
            out[f"logging:{metric}"] = est_
        violations = self.violations
        for label, t in self.support_rows:
            out[f"support:{label}:{t}"] = _Count(violations[(label, t)])
        return out

    def _pair_df(self, label: str, den_a: np.ndarray, den_b: np.ndarray, row: Any) -> float:
        """The degrees of freedom of an accumulated estimator's difference from the active users' denominators and
        the product rows of its weights (``row(r)``: the active users' values of row ``r`` of the sums matrix);
        ``G - 1`` for an estimator without weights."""
        if label in self._unweighted:
            return float(den_a.size - 1)
        first = self._products.first
        aa, ab, bb = (row(first + i) for i in self._products.pairs[label])
        return difference_df_of_sums(den_a, den_b, aa, ab, bb)

    def _whole_log_df(self, weights: list[Any], data: Any, users: np.ndarray, x: list[np.ndarray]) -> float:
        """The degrees of freedom of a whole-log estimator's difference from its weights on the whole log (one array
        per target, ``None`` for none: ``G - 1``) and its per-user sums ``x`` (:meth:`_whole_log_sums`)."""
        if any(w is None for w in weights) or np.shape(weights[0]) != np.shape(weights[1]):
            return float(users.size - 1)
        aa, ab, bb = (p.take(users) for p in user_products(weights, data.user, self.population))
        return difference_df_of_sums(x[1], x[3], aa, ab, bb)

    def _whole_log_sums(self, est: Any, data: Any, users: np.ndarray, day: int | None = None,
                        weights: list[Any] | None = None) -> list[np.ndarray]:
        """Per target, the per-user sums of ``est``'s terms on the replicate's whole log (numerators, denominators).
        A log the estimator cannot use (its ``InputError``: PBM-IPS whose examination it does not identify) on a
        refit before the last day (``day``, :attr:`CounterfactualDesign.config` ``refit_days``) raises
        :class:`~simulations.designs.counterfactual.serving.EarlyRefit`: that day's estimate is undefined, as the
        days between refits are, and a later, larger log may serve. On the last day, or with a ``ConfigError`` (a
        logger's ``pair_max_states``: no log of the config serves), the run stops with
        :func:`~simulations.designs.counterfactual.serving.estimator_error`."""
        out = []
        for target in self.targets:
            target.forget()
            try:
                terms = est.terms(data, target.target, self.reward)
            except (InputError, ConfigError) as exc:  # what the estimator cannot use in this log, named by the config
                if isinstance(exc, InputError) and day is not None and day != self.last_day:
                    raise EarlyRefit from None
                raise estimator_error(self, est, data.n, exc) from None
            den = np.ones(data.n) if terms.den is None else terms.den
            if weights is not None:  # the weights, 0 at empty slots (the degrees of freedom: _whole_log_df)
                weights.append(None if terms.weights is None else _shown(data, terms.weights))
            out += [np.bincount(data.user, terms.num, self.population)[users],
                    np.bincount(data.user, den, self.population)[users]]
        return out

    def _row_stat_sums(self, label: str, est: Any, users: np.ndarray, impressions: np.ndarray,
                       codes: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """:meth:`_whole_log_sums` from the per-row statistics kept batch by batch (the
        same rows in the same order as the whole log, so the same numbers); the
        denominators are the users' impression counts. ``codes``: each target's behaviour index of every active
        user (:func:`choice_codes`) appended to it."""
        meta = _one_chunk(self._row_meta)
        fold = self._folds(est, meta["user"], users)
        out = []
        for t in self.target_names:
            stats = _one_chunk(self._row_stats[(label, t)])
            # the reward's candidate behaviours only (a first-click reward: cascade and standard)
            choice, _ = est.select(meta["user_type"], stats, candidates=est.candidates(self.reward), fold=fold)
            if codes is not None:
                codes.append(choice_codes(choice, meta["user"], self.population).take(users))
            out += [np.bincount(meta["user"], est.pick(choice, stats), self.population)[users], impressions]
        return out


class _Count:
    """A count recorded in a checkpoint row's ``estimate`` (no standard error)."""

    __slots__ = ("ci_high", "ci_low", "estimate", "pvalue", "se")

    def __init__(self, count: int) -> None:
        self.estimate = float(count)
        self.se = self.ci_low = self.ci_high = self.pvalue = math.nan

