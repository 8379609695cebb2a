r"""The counterfactual design's batch step in one compiled pass (when the design has the common form).

:meth:`CounterfactualDesign._process` serves a batch in some forty calls: the logger's draw and the clicks,
the logging propensities and the targets' indicators (:func:`simulations.policies.kernels.logged_propensities`),
a :class:`~onlineeval.estimators.LoggedData` of the batch, the IPS family's terms of both targets
(:class:`~simulations.designs.counterfactual.fused.FusedTerms`), then one ``np.bincount`` per per-user sum (the
impressions, the logger's three metrics, each accumulated estimator's numerator and denominator per target) and
the impressions per query: each call cheap, together with the ``(T, n, k)`` indicator arrays they pass along
about as much as the logger's draw and the clicks themselves.

:class:`CompiledStep` keeps the logger's draw as it is (``policy.sample`` on the design's generator) and the users'
uniforms (:meth:`~simulations.users._GradeChains.uniforms`: the same NumPy calls in the same order, so the same
stream) and does the rest in one pass over the batch's rows
(:func:`simulations.policies.kernels.counterfactual_step`): the shown grades and the clicks
(:func:`simulations.kernels.grade_clicks`, as :meth:`Design._clicks` samples them) and the slot rewards
(:meth:`~onlineeval.estimators.Reward.slot_rewards`), then for each row the match with the targets' lists, its
logging propensities, its slot and list rewards' weighted sums for each target, the products of the two targets'
weights the differences' degrees of freedom need (:mod:`~simulations.designs.counterfactual.products`: ``specs``,
a product skipped where one side's weights are all +0.0 and the other's finite, which adds exactly nothing), and its
additions to the per-user sums. Before anything is drawn for the clicks, the rows' user types are counted
(:func:`simulations.kernels.shown_row_counts`); a row of an unknown type (or a document outside the grades table)
sends the batch's clicks to ``design._clicks`` as before, and so do click models without grade chains, world grades
the chains do not know, a reward the kernel does not compute and an instance's own ``_clicks`` (the benchmark's
timing wrapper). Every number is the NumPy path's bit for bit (the same IEEE operations in the same order; a batch's
values are summed per user from 0.0 in row order and then added to the design's sums, as ``np.bincount`` and
``+=`` do), tested on whole replicates against the path it replaces (``tests/test_counterfactual_step.py``).

Measured with ``benchmarks/bench_counterfactual.py --replicates 2 --rounds 3`` (its split of ``process``, the
2-core machine quiet, three runs, 2026-12-01): the compiled pass 0.23-0.27 us per impression in a replicate (0.19
on a batch run again with warm caches), ``process`` 0.37-0.43 against the general path's 0.43-0.50 on the same
batches (the logger's draw, 0.10-0.12, and the users' uniforms, 0.02, are in both). Earlier
(CPU time, 2-core machine shared with other jobs at load 3-3.5, same process, alternated): fusing the
clicks and slot rewards saves 0.02-0.03 us per impression (a batch of 4,000 impressions of the design of
``configs/counterfactual.yaml``: best 1.29 against 1.41 ms, paired median ratio 0.93; with one epsilon-greedy
logger 1.03 against 1.11 ms; ``process`` over whole replicates 0.91-0.99 of the unfused step's time), mostly
``shown_labels``, the chains' row counts and the calls' own costs; the uniforms (about 65 us a batch) and the
comparisons stay. ``benchmarks/bench_counterfactual.py``'s serving, per unit of team-draft's in the same run:
4.32-4.58 -> 3.95-4.30 (five alternated runs each).

Then (2026-12-01, 2-core machine at load 0.8-2): the per-user sums flushed user by user over the touched users in
order (acc's column requested 4 users ahead) and the step's own int8 / int32 tables (:func:`_compact`). The kernel in
whole replicates of the benchmark's config (team-draft and checkpoints in between, CPU time, each batch's best of
16 alternated rounds, summed): 0.19-0.20 us per impression against 0.25 before (0.21-0.22 with the new flush only).
``benchmarks/bench_counterfactual.py --replicates 2 --rounds 3``, six runs alternated with the tree before and the
tree with the new flush only: the design's serving 3.12-3.49 times team-draft's (median 3.28) against 3.86-4.23
(4.00) before and 3.45-3.65 (3.57) with the flush only (its split of the compiled pass, best rounds, is too noisy
at this load to compare: 0.20-0.42 in all three). The flush alone on one batch: 0.013 / 0.043 us per impression
(warm / flushed caches) against 0.034 / 0.086. What is left, by removing each part of the kernel (replayed batches,
warm): the targets' terms about a quarter, the flush about a tenth (it reads and writes all of ``acc``, ``(V, P)``:
a user's sums are 24 rows apart), the clicks and the own lists' propensities about a tenth each. Tried and dropped,
not measurably faster (same bits): requesting each row's random reads (its user's slot and row of sums, its query's
rows of the targets' lists and propensities) 8-16 rows ahead (0.90 of the time on replayed batches with flushed
caches, 0.98 warm, but 1.04-1.12 in whole replicates); the coefficients of a row showing a target's list from a
table per (target, query) made at set-up (it skips about 11 divisions a row, about 2% of the pass, and reads 272
bytes a row instead of the propensity rows: 1.0-1.2 times the time); picking the coefficients by index instead of
branches; a scratch zeroed on return instead of at a user's first impression; the match and click counts without
branches.

It applies when the logger is a mixture of epsilon-greedy policies that fill the slots
(:class:`~simulations.policies.epsilon_greedy.StackedEpsilonGreedy`, as in ``configs/counterfactual.yaml``) or a
single epsilon-greedy policy of epsilon strictly between 0 and 1 that fills them (its propensity tables as a
one-component stack, :func:`_single`; it samples by its own code), the
targets' lists have the logger's slots (at most 16), and every estimator is one the fused terms compute (``ips``,
``snips``, ``clipped_ips``, ``rips``, ``iips``, and ``adaptive_ips``, whose behaviours' terms are kept per row for
its whole-log choice); otherwise (or with :attr:`CounterfactualDesign.fused_step` False) the design takes its
general path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulations.traffic import Batch

__all__ = ["CompiledStep"]

_NO_BEHAVIOURS = np.empty((0, 0, 0), dtype=np.float64)
_NO_LABELS = np.empty((0, 0), dtype=np.int8)  # the clicks are given (the kernel samples none)
_NO_U = np.empty(0, dtype=np.float64)
_NO_COUNTS = np.zeros(1, dtype=np.int64)
_NO_TYPES = np.empty(0, dtype=np.int8)
_NO_W = np.empty(0, dtype=np.float64)  # the reward's weights None (or the slot rewards given)
_NO_CHAIN_ARGS = (np.empty((3, 0), dtype=np.float64), 1, np.empty(0, dtype=np.bool_), False, False, 1)


def _compact(a: np.ndarray) -> np.ndarray:
    """The integer table ``a`` in the smallest signed integer type that holds its values (the same values: int8
    for documents and ranks below 128), C-contiguous: fewer cache lines for the kernel's random reads."""
    lo, hi = (int(a.min()), int(a.max())) if a.size else (0, 0)
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return np.ascontiguousarray(a, dtype=dtype)
    return np.ascontiguousarray(a, dtype=np.int64)


def _single(policy: Any) -> Any:
    """The propensity tables of a single epsilon-greedy logger as a one-component
    :class:`~simulations.policies.epsilon_greedy.StackedEpsilonGreedy` (weights ``[1.0]``), or ``None``: the
    policy's own :meth:`~simulations.policies.epsilon_greedy.EpsilonGreedyPolicy.own_stack` (made once; its
    compiled sampler draws by the same tables).

    Only the tables: the logger still samples by its own :meth:`sample` (its own draws, the same stream). The
    numbers are the general path's (:meth:`EpsilonGreedyPolicy._full_propensities`, which
    :func:`known_list_propensities` calls through ``sampled_propensities``) bit for bit: per slot the same
    ``w_det p_det + w_rt p_rt`` and ``w_det det_tab + w_rt rt_tab``, then the mixture's ``1.0 * x``, which is ``x``
    exactly. Epsilon 0 or 1 (one component: the deterministic or the RandTop policy's own arithmetic), queries with
    fewer than ``k`` candidates or a subclass stay on the general path."""
    from simulations.policies.epsilon_greedy import EpsilonGreedyPolicy

    if type(policy) is not EpsilonGreedyPolicy:
        return None
    return policy.own_stack()


def _product_specs(layout: Any, caps: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's ``specs`` ``(S, 4)`` and ``prow`` ``(S,)`` of a design's
    :class:`~simulations.designs.counterfactual.products.ProductLayout` (its fused kinds as the kernel's codes, a
    clipped kind as the index of its cap among ``caps``)."""
    from simulations.policies import kernels

    codes = {"list": kernels.W_LIST, "std": kernels.W_STD, "prefix": kernels.W_PREFIX, "item": kernels.W_ITEM}
    codes.update({f"clipped:{cap!r}": kernels.W_CLIPPED + c for c, cap in reversed(list(enumerate(caps)))})
    specs = np.array([[codes[ka], sa, codes[kb], sb] for ka, sa, kb, sb in layout.specs], dtype=np.int64)
    return specs.reshape(-1, 4), np.arange(layout.first, layout.first + len(layout.specs), dtype=np.int64)


def _reward_tables(reward: Any, k: int) -> tuple[int, np.ndarray]:
    """``(kind, weights)`` of the kernel's slot rewards: ``kind`` 0 additive, 1 first click (the weights ``(k,)``
    float64, or no entries for ``None``), or ``-1`` when the kernel does not compute them (a reward of another type
    than :class:`~onlineeval.estimators.Reward`, or weights that do not cover ``k`` slots: its ``slot_rewards``
    serves, with its error)."""
    from onlineeval.errors import InputError
    from onlineeval.estimators.rewards import Reward

    if type(reward) is not Reward or reward.kind not in ("additive", "first_click"):
        return -1, _NO_W
    kind = 0 if reward.kind == "additive" else 1
    if reward.weights is None:
        return kind, _NO_W
    try:
        w = reward.position_weights(k)
    except InputError:
        return -1, _NO_W
    return kind, np.ascontiguousarray(w, dtype=np.float64)


def _click_tables(design: Any, k: int) -> Any:
    """The users' grade chains (:meth:`simulations.users.UserModels.chains`) when the kernel can sample the clicks
    as :meth:`Design._clicks` does (:func:`~simulations.world.shown_labels` of the world's int8 grades, then
    :meth:`UserModels.sample` by the chains: neither overridden) and the chains know every grade of the world (so
    :func:`~simulations.kernels.row_counts` never refuses a row for its grade: only the user types are counted each
    batch), else ``None`` (``design._clicks`` then serves: the models' own path, or their error)."""
    from simulations.designs.base import Design
    from simulations.users import UserModels

    users, labels = design.users, design.world.labels
    if type(design)._clicks is not Design._clicks or type(users).sample is not UserModels.sample:
        return None
    if not isinstance(labels, np.ndarray) or labels.dtype != np.int8 or labels.ndim != 2 \
            or not labels.flags.c_contiguous:
        return None
    chains = users.chains(k)
    if chains is None or (labels.size and not -1 <= int(labels.min()) <= int(labels.max()) < chains.grades):
        return None
    return chains


class CompiledStep:
    """The tables of :func:`~simulations.policies.kernels.counterfactual_step` for one design (see the module
    docstring); :meth:`build` gives ``None`` where it does not apply."""

    def __init__(self, design: Any, stacked: Any) -> None:
        from simulations.policies import kernels

        fused = design._fused
        self.k = design.policy.k
        lists, self.t_list, self.t_prefix, self.t_item = design._known_arrays()
        self.stacked = stacked
        # the targets' lists and the components' base ranks as int8 (documents below 128), the user map as int32:
        # the same values in a quarter to an eighth of the cache lines
        self.lists = _compact(lists)
        self.rank_of = _compact(stacked._rank_of)
        self.recip = kernels.reciprocals(stacked._n_eff)
        caps = [float(est.cap) for kind, est in fused.fused.values() if kind == "clipped_ips"]
        width = kernels.VAL_CLIPPED + len(caps)
        rows = design._rows
        adds, units = [], []
        clipped = 0
        for label, (kind, _) in fused.fused.items():
            if kind == "clipped_ips":
                entry = kernels.VAL_CLIPPED + clipped
                clipped += 1
            else:
                entry = {"ips": kernels.VAL_HT, "snips": kernels.VAL_IPS, "rips": kernels.VAL_PREFIX,
                         "iips": kernels.VAL_ITEM}[kind]
            for i, target in enumerate(design.target_names):
                adds.append((rows[f"num:{label}:{target}"], i * width + entry))
                if kind == "snips":
                    adds.append((rows[f"den:{label}:{target}"], i * width + kernels.VAL_WEIGHT))
                else:
                    units.append(rows[f"den:{label}:{target}"])
        self.adds = np.array(adds, dtype=np.int64).reshape(-1, 2)
        self.specs, self.prow = _product_specs(design._products, caps)
        self.units = np.array(units, dtype=np.int64)
        self.caps = np.array(caps, dtype=np.float64)
        self.c0 = float(design.reward.offset)  # IPS and clipped IPS weight the whole reward (Horvitz-Thompson)
        self.obs = np.array([rows[key] for key in ("impressions", "obs:clicks", "obs:abandoned", "obs:rr")],
                            dtype=np.int64)
        self.behaviour_labels = list(fused.behaviour_labels)
        self.scratch = np.zeros((0, design._acc.shape[0]), dtype=np.float64)  # grown to the largest batch
        self.slot = np.full(design.population, -1, dtype=np.int32)
        self.touched = np.zeros(0, dtype=np.int64)
        # the clicks and slot rewards in the kernel (the same draws and numbers as design._clicks and
        # reward.slot_rewards) when both apply
        self.reward_kind, self.reward_w = _reward_tables(design.reward, self.k)
        self.chains = _click_tables(design, self.k) if self.reward_kind >= 0 else None
        self.labels = design.world.labels
        if self.chains is not None:
            from clickmodels.kernels import BLOCK

            c = self.chains
            self.chain_args = (c.thresholds, c.width, c.independent_flags, c.use_t1, c.use_t3, BLOCK)

    @classmethod
    def build(cls, design: Any) -> CompiledStep | None:
        """The step of ``design`` (a :class:`~simulations.designs.counterfactual.CounterfactualDesign` that has
        served no batch), or ``None`` when the design does not have the form the kernel computes."""
        from simulations.policies.epsilon_greedy import COMPILED_MAX_K

        if design.aa or not design.compiled or design._known is None or design._fused is None:
            return None
        policy = design.policy
        if policy.k > COMPILED_MAX_K or not getattr(design._fused, "compiled", False):
            return None
        stacked = getattr(policy, "_stacked", None)
        kernel = stacked() if callable(stacked) else None
        if kernel is None:
            kernel = _single(policy)
        if kernel is None:
            return None
        fused = design._fused
        for label, _ in design.estimators:
            if design.whole_log[label]:
                if label not in fused.behaviour_labels:
                    return None
            elif label not in fused.fused:
                return None
        if set(design._row_stats) != {(label, t) for label in fused.behaviour_labels for t in design.target_names}:
            return None
        if any(k.startswith(("own:", "beh:")) for spec in design._products.specs for k in spec[::2]):
            return None  # (products of weights the kernel does not compute)
        return cls(design, kernel)

    def run(self, design: Any, batch: Batch) -> None:
        """Serve and account one non-empty batch (what :meth:`CounterfactualDesign.process` does)."""
        from simulations.policies import kernels

        query = batch.query
        if query.dtype != np.int64:
            query = query.astype(np.int64)
        shown = np.ascontiguousarray(design.policy.sample(query, design.rng), dtype=np.int64)
        n, k = shown.shape
        chains = self.chains
        labels, counts, u, kind = _NO_LABELS, _NO_COUNTS, _NO_U, -1
        if chains is not None and "_clicks" not in design.__dict__:  # (an instance's own _clicks is called)
            from simulations import kernels as sim_kernels

            counts = sim_kernels.shown_row_counts(shown, self.labels.shape[1], batch.user_type, chains.n_types)
            if counts[-1]:  # a row the chains cannot sample: design._clicks as before (nothing drawn yet)
                counts = _NO_COUNTS
            else:
                labels = self.labels
        if labels.shape[0]:  # the uniforms of UserModels.sample (the same calls), the clicks and rewards in the kernel
            u = chains.uniforms(counts, design.rng)
            clicks = np.empty((n, k), dtype=np.bool_)
            r = np.empty((n, k), dtype=np.float64)
            kind, types, chain_args = self.reward_kind, batch.user_type, self.chain_args
        else:
            clicks = np.ascontiguousarray(design._clicks(batch, shown))
            r = np.ascontiguousarray(design.reward.slot_rewards(clicks), dtype=np.float64)
            types, chain_args = _NO_TYPES, _NO_CHAIN_ARGS
        if self.scratch.shape[0] < n:  # kept between batches (fresh memory costs a page fault per 4 KB)
            self.scratch = np.zeros((n, self.scratch.shape[1]), dtype=np.float64)
        if self.touched.shape[0] <= n:  # the kernel's work space: n + 1 entries
            self.touched = np.zeros(max(n, self.scratch.shape[0]) + 1, dtype=np.int64)
        beh = np.empty((3, self.lists.shape[0], n)) if self.behaviour_labels else _NO_BEHAVIOURS
        s = self.stacked
        kernels.counterfactual_step(
            query, batch.user, shown, clicks, r, labels, types, counts, u, *chain_args, kind, self.reward_w,
            self.lists, self.t_list, self.t_prefix, self.t_item, self.rank_of, s._n_eff, s._w_det, s._w_rt,
            s.det_tab, s.rt_tab, s._weights, s.m, s.Q, self.recip, self.caps, self.c0, self.adds, self.units, self.obs,
            design._acc, self.scratch, self.slot, self.touched, design._query_count, beh, self.specs, self.prow)
        for own in (shown, clicks):
            own.setflags(write=False)  # the log keeps them without a copy
        # the log's propensities are computed when the log is asked for (CounterfactualDesign.log: the same numbers)
        design._log.append({"query": batch.query, "shown": shown, "clicks": clicks, "user": batch.user,
                            "user_type": batch.user_type})
        if self.behaviour_labels:
            design._row_meta.append({"user": batch.user, "user_type": batch.user_type})
            for label in self.behaviour_labels:
                for i, t in enumerate(design.target_names):
                    design._row_stats[(label, t)].append(
                        {"independent": beh[0, i], "cascade": beh[1, i], "standard": beh[2, i]})
