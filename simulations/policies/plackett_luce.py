r"""Plackett-Luce over the scores (Plackett 1975; Luce 1959): a softmax draw without
replacement, slot by slot.

With logits :math:`\ell_d = s_d / \tau` (temperature :math:`\tau > 0`) over the query's
candidates :math:`C`, the top ``k`` list :math:`(d_0, \dots, d_{k-1})` has

.. math::

    p_{\mathrm{prefix}, j} = \prod_{i=0}^{j}
        \frac{e^{\ell_{d_i}}}{\sum_{d \in C \setminus \{d_0, \dots, d_{i-1}\}} e^{\ell_d}},

computed in log space (log-sum-exp over the remaining candidates at each slot), so it is
exact even when the scores differ by thousands. Sampling draws slot by slot, one uniform per
slot inverting the softmax over the candidates left (compiled; ``k`` uniforms an impression where
the Gumbel top-k trick, kept for the Monte Carlo marginals below, draws one key per candidate).

Item-position marginals :math:`M_{dj} = P(\text{slot } j \text{ shows } d)` have no
closed form. They are computed exactly by a dynamic programme over the *set* of
documents placed above (the order above does not matter for what comes next):

.. math::

    P_{s+1}(S \cup \{x\}) \mathrel{+}= P_s(S)\, \rho_S(x), \quad
    \rho_S(x) = \frac{e^{\ell_x}}{\sum_{d \notin S} e^{\ell_d}}, \qquad
    M_{x s} = \sum_{|S| = s} P_s(S)\, \rho_S(x),

over :math:`\sum_{s < k} \binom{c}{s}` states (``dp_max_states``, default 50,000; e.g.
all of ``c = 20, k = 6``; ``c = 100, k = 3``). Pair marginals start the same programme
from the joint event "slot ``j`` shows ``a``" (one column per ``a``) and are exact up to
``pair_max_states`` (default 20,000) states; above it :meth:`pair_marginals` raises a
:class:`ConfigError`. Both programmes are in :mod:`simulations.policies.pl_subsets`.

Above ``dp_max_states`` the marginals are, by default (``item_method: quadrature``), the one-dimensional
integral of the exponential race (:mod:`simulations.policies.pl_quadrature`: a trapezoidal rule whose error is
about 1e-13 relative, checked against enumeration; ``O(c N k^2)``, compiled: about 4 ms a query at 90 candidates
and k = 10, 50 ms at 1,000, faster than the Monte Carlo estimate), exact for every use here and marked so.
With ``item_method: monte_carlo`` (the only way before it) they are a seeded Monte Carlo estimate: ``mc_samples``
(default 2,000) Gumbel top-k prefixes are drawn per query (seed from ``mc_seed`` and the
query index, so a query's estimate does not depend on the batch) and each contributes
the *conditional* probabilities given its sampled prefix,

.. math::

    \hat M_{x s} = \frac1R \sum_{t=1}^{R} 1[x \notin S_t]\, \rho_{S_t}(x),

an unbiased (Rao-Blackwellised) estimate whose standard error is the sample SD over
:math:`\sqrt R` (slot 0 is exact). Its sums need only the ``k - 1`` placed documents of
each sample (``O(R k)`` after the ``O(R c)`` Gumbel draws; about 0.25 s per query at
1,000 candidates, k = 10). It can be 0 for a document that is in every sampled
prefix: raise ``mc_samples`` then. :meth:`marginals_exact`, :meth:`marginal_se`,
:meth:`item_se` and :meth:`conventions` say which queries are Monte Carlo;
:func:`simulations.policies.mc_error.marginal_error_effect` tells what that error does to
an estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from onlineeval.errors import ConfigError
from simulations.policies.pl_subsets import dp_states, item_marginals, masked_lse, pair_marginals
from simulations.policies.settings import PROPENSITY_PROGRESS, PROPENSITY_THREADS
from simulations.policies.base import (
    BoolArray,
    FloatArray,
    IntArray,
    LoggingPolicy,
    MarginalTable,
    SpecReader,
    register_policy,
)

__all__ = ["PlackettLucePolicy", "dp_states"]


def _rb_moments_direct(lg: FloatArray, prefix: IntArray, kk: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    r"""Rao-Blackwellised marginals from sampled prefixes, computed cell by cell.

    ``prefix`` ``(R, kk-1)`` holds ordered sampled prefixes; for each sample and slot
    ``s`` the conditional :math:`1[x \notin S]\, \rho_S(x)` of every candidate is formed
    (``O(R c k)``; log space when some weight underflows). Returns the ``(c, kk)`` means,
    their standard errors and the ``(c,)`` standard errors of the shown probabilities.
    """
    R, c = prefix.shape[0], lg.size
    rows = np.arange(R)
    marg = np.zeros((c, kk))
    se = np.zeros((c, kk))
    total = np.zeros((R, c))
    e = np.exp(lg - lg.max())
    fast = bool(e.min() > 1e-290)  # exp space unless some weight is (nearly) underflowed
    avail = np.ones((R, c))
    lgr = np.broadcast_to(lg, (R, c))
    for s in range(kk):
        if fast:  # (R, c) conditional P(x at slot s | sampled prefix) = e_x / remaining mass
            cond = avail * (e[None, :] / (avail @ e)[:, None])
        else:
            lse = masked_lse(lgr, avail > 0)
            cond = np.exp(np.where(avail > 0, lgr - lse[:, None], -np.inf))
        if s == 0:  # the first slot is the softmax itself: exact
            marg[:, 0] = cond[0]
        else:
            mean = cond.mean(axis=0)
            marg[:, s] = mean
            ss = np.einsum("rc,rc->c", cond, cond) - R * mean**2
            se[:, s] = np.sqrt(np.maximum(ss, 0.0) / (R - 1) / R)
        total += cond
        if s + 1 < kk:
            avail[rows, prefix[:, s]] = 0.0
    return marg, se, total.std(axis=0, ddof=1) / math.sqrt(R)


def _rb_moments_fast(lg: FloatArray, prefix: IntArray, kk: int) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    r"""The same moments as :func:`_rb_moments_direct` in ``O(R k + c k)`` (given the prefixes).

    With weights :math:`e_x` and a sample's remaining mass :math:`\mathrm{rem}_{rs}` at
    slot ``s`` (total minus the placed weights), the conditional is
    :math:`e_x / \mathrm{rem}_{rs}` unless ``x`` is in the sample's prefix, so

    .. math::

        \sum_r \mathrm{cond}_{rsx} = e_x \Bigl(\sum_r \mathrm{rem}_{rs}^{-1}
            - \sum_{r:\ x \in S_{rs}} \mathrm{rem}_{rs}^{-1}\Bigr),

    the second sum running over only ``s`` placed documents per sample (likewise for the
    squares and for the shown totals, where a document placed at slot ``t`` of sample
    ``r`` contributes :math:`e_x \sum_{s \le t} \mathrm{rem}_{rs}^{-1}`). ``None`` when the
    subtraction could lose precision (a remaining mass below 1e-6 of the total) or a
    weight underflows: the caller then uses the direct form.
    """
    R, c = prefix.shape[0], lg.size
    e = np.exp(lg - lg.max())
    if not e.min() > 1e-290:
        return None
    total = e.sum()
    w = e[prefix]  # (R, kk-1)
    before = np.zeros((R, kk))
    if kk > 1:
        before[:, 1:] = np.cumsum(w, axis=1)
    rem = total - before
    if not (rem >= 1e-6 * total).all():
        return None
    inv = 1.0 / rem
    inv2 = inv * inv
    marg = np.zeros((c, kk))
    se = np.zeros((c, kk))
    marg[:, 0] = e / total
    for s in range(1, kk):
        placed = prefix[:, :s].ravel()
        b1 = np.bincount(placed, weights=np.repeat(inv[:, s], s), minlength=c)
        b2 = np.bincount(placed, weights=np.repeat(inv2[:, s], s), minlength=c)
        mean = e * (inv[:, s].sum() - b1) / R
        ss = e * e * (inv2[:, s].sum() - b2) - R * mean**2
        marg[:, s] = mean
        se[:, s] = np.sqrt(np.maximum(ss, 0.0) / (R - 1) / R)
    # shown totals: H_r for documents never placed, G_r(t) = sum_{s <= t} inv_rs for one placed at slot t
    h = inv.sum(axis=1)
    gcum = np.cumsum(inv, axis=1)[:, : kk - 1]
    corr = np.bincount(prefix.ravel(), weights=(h[:, None] ** 2 - gcum**2).ravel(), minlength=c)
    s2 = e * e * ((h**2).sum() - corr)
    shown = marg.sum(axis=1)
    shown_se = np.sqrt(np.maximum(s2 - R * shown**2, 0.0) / (R - 1) / R)
    return marg, se, shown_se


@register_policy
class PlackettLucePolicy(LoggingPolicy):
    """Plackett-Luce over ``scores / temperature`` (spec ``{"policy": "plackett_luce",
    "temperature": 1.0}``; options ``dp_max_states`` (50,000), ``item_method`` (``quadrature`` or
    ``monte_carlo`` above ``dp_max_states``), ``pair_max_states`` (20,000), ``mc_samples`` (2,000),
    ``mc_seed`` (0); see the module docstring)."""

    name = "plackett_luce"
    ITEM_METHODS = ("quadrature", "monte_carlo")

    def __init__(self, scores: Any, k: int, temperature: float = 1.0, *, dp_max_states: int = 50_000,
                 pair_max_states: int = 20_000, mc_samples: int = 2_000, mc_seed: int = 0,
                 item_method: str = "quadrature") -> None:
        super().__init__(scores, k)
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
            raise ConfigError(("temperature",), f"must be a finite number > 0, got {temperature!r}")
        if mc_samples < 2:
            raise ConfigError(("mc_samples",), f"must be an integer >= 2, got {mc_samples!r}")
        if item_method not in self.ITEM_METHODS:
            raise ConfigError(("item_method",), f"must be one of {', '.join(self.ITEM_METHODS)}, got {item_method!r}")
        self.item_method = str(item_method)
        self.temperature = float(temperature)
        self.dp_max_states = int(dp_max_states)
        self.pair_max_states = int(pair_max_states)
        self.mc_samples = int(mc_samples)
        self.mc_seed = int(mc_seed)
        self.logits: FloatArray = self.scores / self.temperature
        self.logits.setflags(write=False)
        self._tables: dict[int, MarginalTable] = {}
        # every computed table's marginals and shown probabilities also in one dense (Q, m, k) / (Q, m) array, when
        # that holds at most DENSE_MAX_BYTES (:meth:`_dense`): a batch's lookups are then one gather, not one
        # Python call per distinct query
        self._dense_mean: FloatArray | None = None
        self._dense_shown: FloatArray | None = None
        self._dense_seen: np.ndarray | None = None
        # the pair marginals computed so far (read-only), up to PAIR_CACHE_BYTES: an estimator asks once per
        # target (the pseudoinverse), and each is a dynamic programme (about 8 ms at 20 candidates and 5 slots)
        self._pair_cache: dict[int, FloatArray] = {}
        self._pair_bytes = 0

    #: the largest dense copy of the tables (:meth:`_dense`) in bytes; worlds whose ``Q m (k + 1)`` floats exceed it
    #: look each distinct query's table up in a Python loop (the same numbers)
    DENSE_MAX_BYTES = 64 << 20
    #: the most bytes of pair marginals kept (:meth:`_pairs`); beyond it a query's are computed on every call
    PAIR_CACHE_BYTES = 128 << 20

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()  # the dense copy is rebuilt where the policy is used, never shipped
        state["_dense_mean"] = state["_dense_shown"] = state["_dense_seen"] = None
        state.pop("_sampler", None)  # the sampler's and the prefix's tables too (made again on first use)
        state.pop("_prefix_tab", None)
        state.pop("_lgc", None)
        state["_pair_cache"], state["_pair_bytes"] = {}, 0  # computed again where needed
        return state

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], scores: Any, k: int,
                  path: Sequence[str | int] = ()) -> PlackettLucePolicy:
        rd = SpecReader(spec, path)
        s = rd.scores(scores)
        t = rd.number("temperature", 1.0, low=0.0, low_open=True)
        dp = rd.integer("dp_max_states", 50_000, low=0)
        pair = rd.integer("pair_max_states", 20_000, low=0)
        mc = rd.integer("mc_samples", 2_000, low=2)
        seed = rd.integer("mc_seed", 0, low=0)
        method = rd.choice("item_method", cls.ITEM_METHODS, "quadrature")
        rd.finish()
        return cls(s, k, t, dp_max_states=dp, pair_max_states=pair, mc_samples=mc, mc_seed=seed,
                   item_method=method)

    @property
    def may_be_monte_carlo(self) -> bool:  # type: ignore[override]
        """True when item marginals above ``dp_max_states`` are Monte Carlo (``item_method: monte_carlo``)."""
        return self.item_method == "monte_carlo"

    def with_mc_seed(self, seed: int) -> PlackettLucePolicy:
        out = PlackettLucePolicy(self.scores, self.k, self.temperature, dp_max_states=self.dp_max_states,
                                 pair_max_states=self.pair_max_states, mc_samples=self.mc_samples, mc_seed=int(seed),
                                 item_method=self.item_method)
        out._tables.update({q: t for q, t in self._tables.items() if t.exact})
        out._pair_cache.update(self._pair_cache)  # exact: no Monte Carlo
        out._pair_bytes = self._pair_bytes
        return out

    def describe(self) -> str:
        return (f"plackett_luce: softmax draws without replacement over scores / {self.temperature:g}, top {self.k} "
                "shown (Plackett 1975; sampled slot by slot)")

    def conventions(self) -> dict[str, Any]:
        return {
            **super().conventions(),
            "temperature": self.temperature,
            "list": "exact: product of softmax ratios over the remaining candidates (log space)",
            "prefix": "exact: product of softmax ratios over the remaining candidates (log space)",
            "item": (f"exact by a subset dynamic programme when sum_(s<k) C(c, s) <= {self.dp_max_states} states "
                     "(c = the query's candidates), else "
                     + ("by the exponential race's one-dimensional integral (trapezoidal rule, relative error about "
                        "1e-13; each slot's marginals checked to sum to 1 within 1e-10)"
                        if self.item_method == "quadrature" else
                        f"Monte Carlo: {self.mc_samples} Gumbel top-k prefixes per query, Rao-Blackwellised, seed "
                        f"({self.mc_seed}, query index); standard errors from marginal_se / item_se, exactness from "
                        "marginals_exact")),
            "item_method": self.item_method,
            "shown_probability": "sum over slots of the item marginals (same exactness)",
            "pair_marginals": f"exact by a dynamic programme up to {self.pair_max_states} states, else an error",
            "dp_max_states": self.dp_max_states,
            "pair_max_states": self.pair_max_states,
            "mc_samples": self.mc_samples,
            "mc_seed": self.mc_seed,
        }

    # ------------------------------------------------------------------ sampling and lists
    def _sample(self, q: IntArray, rng: np.random.Generator) -> IntArray:
        """Slot by slot: ``k`` uniforms per impression (``rng.random((n, k))``), each inverting the softmax over
        the candidates left, walked by descending weight (:func:`simulations.policies.pl_kernels.pl_sample`,
        compiled; tested against a plain-Python reference in tests/test_plackett_luce_kernels.py). Drawing ``m``
        Gumbel keys per impression and keeping the ``k`` largest (the sampler of stream versions up to 7) cost
        1.3 us an impression at 20 candidates, k = 5 (the Gumbel draws 0.5 of it)."""
        from simulations.policies import pl_kernels

        weights, order, totals = self._sampler_tables()
        u = rng.random((q.size, self.k))
        out = np.empty((q.size, self.k), dtype=np.int64)
        pl_kernels.pl_sample(np.ascontiguousarray(q, dtype=np.int64), u, weights, order, totals, self._logits_c(), out)
        return out

    def _sampler_tables(self) -> tuple[FloatArray, IntArray, FloatArray]:
        """``(weights, order, totals)`` of :func:`~simulations.policies.pl_kernels.pl_sample`, made once:
        ``exp(logits - max)`` per query (0 for non-candidates), the candidates by descending weight (ties by
        column) then ``-1``, and the weights summed in that order."""
        kept = self.__dict__.get("_sampler")
        if kept is None:
            lg = self.logits
            fin = np.isfinite(lg)
            top = np.where(fin.any(axis=1), np.max(np.where(fin, lg, -np.inf), axis=1), 0.0)
            w = np.ascontiguousarray(np.where(fin, np.exp(np.where(fin, lg - top[:, None], 0.0)), 0.0))
            order = np.argsort(np.where(fin, -w, np.inf), axis=1, kind="stable")
            order = np.ascontiguousarray(np.where(np.take_along_axis(fin, order, axis=1), order, -1), dtype=np.int64)
            totals = np.zeros(lg.shape[0])
            for a in range(lg.shape[1]):  # left to right in that order, as the kernel sums
                c = order[:, a]
                totals = totals + np.where(c >= 0, np.take_along_axis(w, np.maximum(c, 0)[:, None], 1)[:, 0], 0.0)
            kept = self._sampler = (w, order, totals)
        return kept

    def _logits_c(self) -> FloatArray:
        lg = self.__dict__.get("_lgc")
        if lg is None:
            lg = self._lgc = np.ascontiguousarray(self.logits, dtype=np.float64)
        return lg

    #: whether :meth:`_prefix` runs its fast path compiled (:func:`simulations.policies.pl_kernels.pl_prefix`: the same
    #: operations, the same numbers); False runs the NumPy code (the tested reference)
    compiled_prefix: bool = True

    def _prefix(self, q: IntArray, r: IntArray, ranks: IntArray) -> FloatArray:
        """Products of softmax ratios. Fast path: the remaining mass is the query's total
        minus the weights already placed (``O(n k)`` after one ``exp`` per candidate); rows
        where that subtraction could lose more than ~1e-9 relative precision (remaining mass
        below 1e-6 of the total, or underflowed weights) are recomputed exactly in log space.
        Compiled (:attr:`compiled_prefix`) the fast path reads each query's weights and total from tables made once
        (the same elementwise ``exp`` and row sums as on the batch's distinct queries): 0.55 -> 0.05 us an
        impression at 20 candidates, k = 5."""
        if self.compiled_prefix and q.dtype == np.int64 and r.dtype == np.int64:
            from simulations.policies import pl_kernels

            e, total = self._prefix_tables()
            out = np.empty((q.size, self.k))
            risky = np.empty(q.size, dtype=bool)
            pl_kernels.pl_prefix(np.ascontiguousarray(q), np.ascontiguousarray(r), np.ascontiguousarray(ranks),
                              e, total, out, risky)
            if risky.any():
                idx = np.flatnonzero(risky)
                out[idx] = self._prefix_logspace(q[idx], r[idx])
            return out
        return self._prefix_numpy(q, r, ranks)

    def _prefix_tables(self) -> tuple[FloatArray, FloatArray]:
        """``(e, total)``: :meth:`_prefix_numpy`'s weights ``exp(logits - max)`` of every query and their row sums
        (numpy's, row by row the same as on any subset of the rows), made once."""
        kept = self.__dict__.get("_prefix_tab")
        if kept is None:
            e = self._sampler_tables()[0]  # the same elementwise formula
            kept = self._prefix_tab = (e, np.ascontiguousarray(e.sum(axis=1)))
        return kept

    def _prefix_numpy(self, q: IntArray, r: IntArray, ranks: IntArray) -> FloatArray:
        """:meth:`_prefix` in NumPy (the reference of the compiled fast path)."""
        uq, inv = np.unique(q, return_inverse=True)
        lg_u = self.logits[uq]
        fin = np.isfinite(lg_u)
        top_u = np.where(fin.any(axis=1), np.max(np.where(fin, lg_u, -np.inf), axis=1), 0.0)
        e_u = np.where(fin, np.exp(np.where(fin, lg_u - top_u[:, None], 0.0)), 0.0)
        total = e_u.sum(axis=1)[inv]
        ok = ranks >= 0  # a candidate (repeats are zeroed by the caller's validity mask)
        w = np.where(ok, e_u[inv[:, None], np.maximum(r, 0)], 0.0)
        before = np.cumsum(w, axis=1) - w
        rem = total[:, None] - before
        pos = rem > 0
        step = np.where(ok & pos, w / np.where(pos, rem, 1.0), np.where(r < 0, 1.0, 0.0))
        out = np.cumprod(step, axis=1)
        risky = ((rem < 1e-6 * total[:, None]) & (r >= 0)).any(axis=1) | ((w == 0) & ok).any(axis=1)
        if risky.any():
            idx = np.flatnonzero(risky)
            out[idx] = self._prefix_logspace(q[idx], r[idx])
        return out

    def _prefix_logspace(self, q: IntArray, r: IntArray) -> FloatArray:
        """Exact prefix probabilities with a masked log-sum-exp per slot (``O(n m k)``)."""
        logits = self.logits[q]
        avail = np.isfinite(logits)
        rows = np.arange(q.size)
        logp = np.zeros(q.size)
        out = np.empty((q.size, self.k))
        for j in range(self.k):
            d = r[:, j]
            has = d >= 0
            dd = np.maximum(d, 0)
            num = np.where(has & avail[rows, dd], logits[rows, dd], -np.inf)
            lse = masked_lse(logits, avail)
            step = np.where(has, num - np.where(np.isfinite(lse), lse, 0.0), 0.0)
            logp = logp + step
            out[:, j] = np.exp(logp)
            avail[rows[has], dd[has]] = False
        return out

    # ------------------------------------------------------------------ marginals
    def _dp_q(self, q: int) -> bool:
        return dp_states(int(self.n_candidates[q]), self.k) <= self.dp_max_states

    def _exact_q(self, q: int) -> bool:
        return self.item_method == "quadrature" or self._dp_q(q)

    def table(self, query_one: int) -> MarginalTable:
        """Item-position marginals of one query with standard errors (cached)."""
        q = self._query_one(query_one)
        if q not in self._tables:
            self._tables[q] = (self._dp_table(q) if self._dp_q(q) else self._quad_table(q)
                               if self.item_method == "quadrature" else self._mc_table(q))
        return self._tables[q]

    def _cand(self, q: int) -> tuple[IntArray, FloatArray]:
        cand = np.flatnonzero(np.isfinite(self.logits[q]))
        return cand, np.asarray(self.logits[q, cand], dtype=np.float64)

    def _embed(self, cand: IntArray, marg: FloatArray, se: FloatArray, shown_se: FloatArray, exact: bool,
               method: str) -> MarginalTable:
        kk = marg.shape[1]
        mean = np.zeros((self.m, self.k))
        s = np.zeros((self.m, self.k))
        mean[cand, :kk] = marg
        s[cand, :kk] = se
        shown = mean.sum(axis=1)
        sh_se = np.zeros(self.m)
        sh_se[cand] = shown_se
        for a in (mean, s, shown, sh_se):
            a.setflags(write=False)
        return MarginalTable(mean, s, shown, sh_se, exact, method)

    def _dp_table(self, q: int) -> MarginalTable:
        cand, lg = self._cand(q)
        marg = item_marginals(lg, self.k)
        zeros = np.zeros_like(marg)
        return self._embed(cand, marg, zeros, np.zeros(cand.size), True, "exact subset dynamic programme")

    def _quad_table(self, q: int) -> MarginalTable:
        from simulations.policies.pl_quadrature import race_marginals

        cand, lg = self._cand(q)
        kk = min(self.k, cand.size)
        if kk == 0:
            marg, h = np.zeros((cand.size, 0)), 0.0
        else:
            marg, h = race_marginals(lg, kk)
        zeros = np.zeros(marg.shape)
        return self._embed(cand, marg, zeros, np.zeros(cand.size), True,
                           f"exponential-race quadrature (trapezoidal, step {h:g})")

    def _mc_table(self, q: int) -> MarginalTable:
        cand, lg = self._cand(q)
        c = cand.size
        kk = min(self.k, c)
        R = self.mc_samples
        rng = np.random.default_rng(np.random.SeedSequence([self.mc_seed, q]))
        g = lg[None, :] + rng.gumbel(size=(R, c))
        npre = max(kk - 1, 0)
        if 0 < npre < c:
            part = np.argpartition(-g, npre - 1, axis=1)[:, :npre]
            prefix = np.take_along_axis(part, np.argsort(-np.take_along_axis(g, part, axis=1), axis=1), axis=1)
        else:
            prefix = np.argsort(-g, axis=1)[:, :npre]
        moments = _rb_moments_fast(lg, prefix, kk)
        if moments is None:
            moments = _rb_moments_direct(lg, prefix, kk)
        marg, se, shown_se = moments
        return self._embed(cand, marg, se, shown_se, False,
                           f"Monte Carlo, {R} Rao-Blackwellised Gumbel top-k prefixes, seed ({self.mc_seed}, {q})")

    def _ensure_tables(self, queries: Sequence[int]) -> None:
        """The tables of ``queries`` (valid indexes) computed where missing, each reported to
        :data:`~simulations.policies.settings.PROPENSITY_PROGRESS` when set (a long estimate on a log of many queries
        of many candidates: 4 ms a query at 90 candidates and k = 10 by quadrature)."""
        missing = list(dict.fromkeys(int(u) for u in queries if int(u) not in self._tables))
        report = PROPENSITY_PROGRESS.get()
        what = f"Plackett-Luce item propensities of {len(missing)} queries"
        done = 0
        threads = PROPENSITY_THREADS.get()
        quad = [u for u in missing if self.item_method == "quadrature" and not self._dp_q(u)]
        if threads > 1 and len(quad) > 1:  # the compiled quadrature releases the GIL: its queries side by side
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(threads, len(quad)), thread_name_prefix="onlineeval-pl") as pool:
                for u, table in zip(quad, pool.map(self._quad_table, quad)):
                    self._tables[u] = table
                    done += 1
                    if report is not None:
                        report(what, done, len(missing))
        for u in missing:
            if u not in self._tables:
                self.table(u)
                done += 1
                if report is not None:
                    report(what, done, len(missing))

    def _stack(self, uq: IntArray, what: str) -> FloatArray:
        self._ensure_tables(uq.tolist())
        return np.stack([getattr(self.table(int(u)), what) for u in uq]) if uq.size else \
            np.zeros((0, self.m, self.k) if what in ("mean", "se") else (0, self.m))

    def _marginals(self, uq: IntArray) -> FloatArray:
        return self._stack(uq, "mean")

    def _dense(self, q: IntArray) -> tuple[FloatArray, FloatArray] | None:
        """``(mean, shown)``: every table of the queries ``q`` (valid query indexes) copied into the dense
        ``(Q, m, k)`` and ``(Q, m)`` arrays (the tables computed, and cached, where missing), or ``None`` when those
        would exceed :data:`DENSE_MAX_BYTES`. Rows of queries not yet asked for are zeros, never read."""
        n_q = self.logits.shape[0]
        if 8 * n_q * self.m * (self.k + 1) > self.DENSE_MAX_BYTES:
            return None
        if self._dense_mean is None or self._dense_shown is None or self._dense_seen is None:
            self._dense_mean = np.zeros((n_q, self.m, self.k))
            self._dense_shown = np.zeros((n_q, self.m))
            self._dense_seen = np.zeros(n_q, dtype=bool)
        seen = self._dense_seen
        if q.size and not seen[q].all():
            missing = np.unique(q[~seen[q]]).tolist()
            self._ensure_tables(missing)
            for u in missing:
                t = self.table(u)
                self._dense_mean[u] = t.mean
                self._dense_shown[u] = t.shown
                seen[u] = True
        return self._dense_mean, self._dense_shown

    def _grouped(self, q: IntArray, fill: Any) -> None:
        """Call ``fill(rows, table)`` once per distinct query."""
        uq, inv = np.unique(q, return_inverse=True)
        self._ensure_tables(uq.tolist())
        order = np.argsort(inv, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(inv, minlength=uq.size))])
        for i, u in enumerate(uq):
            fill(order[bounds[i]: bounds[i + 1]], self.table(int(u)))

    def _item(self, q: IntArray, r: IntArray, ranks: IntArray) -> FloatArray:
        j = np.arange(self.k)[None, :]
        rr = np.maximum(r, 0)
        dense = self._dense(q)
        if dense is not None:  # the tables' values gathered at once (the loop below, without it)
            return dense[0][q[:, None], rr, j]
        out = np.zeros((q.size, self.k))

        def fill(rows: IntArray, t: MarginalTable) -> None:
            out[rows] = t.mean[rr[rows], j]

        self._grouped(q, fill)
        return out

    def _shown(self, q: IntArray, d: IntArray, valid: BoolArray) -> FloatArray:
        dd = np.maximum(d, 0)
        dense = self._dense(q)
        if dense is not None:
            return dense[1][q[:, None], dd]
        out = np.zeros(d.shape)

        def fill(rows: IntArray, t: MarginalTable) -> None:
            out[rows] = t.shown[dd[rows]]

        self._grouped(q, fill)
        return out

    def marginals_exact(self, query: ArrayLike) -> BoolArray:
        q = self._queries(query)
        uq, inv = np.unique(q, return_inverse=True)
        return np.array([self._exact_q(int(u)) for u in uq], dtype=bool)[inv] if q.size else np.ones(0, bool)

    def marginal_se(self, query: ArrayLike) -> FloatArray:
        q = self._queries(query)
        uq, inv = np.unique(q, return_inverse=True)
        return self._stack(uq, "se")[inv]

    def shown_se(self, query: ArrayLike, docs: ArrayLike) -> FloatArray:
        """``(n, k)`` standard errors of :meth:`shown_probability` (0 where exact)."""
        q = self._queries(query)
        d = self._lists(q, docs, "docs")
        out = np.zeros(d.shape)
        dd = np.maximum(d, 0)

        def fill(rows: IntArray, t: MarginalTable) -> None:
            out[rows] = np.where(d[rows] >= 0, t.shown_se[dd[rows]], 0.0)

        self._grouped(q, fill)
        return out

    # ------------------------------------------------------------------ pairs
    def _pairs(self, q: int) -> FloatArray:
        """The pair marginals of query ``q`` (read-only), kept up to :attr:`PAIR_CACHE_BYTES`."""
        hit = self._pair_cache.get(q)
        if hit is not None:
            return hit
        out = self._compute_pairs(q)
        out.setflags(write=False)
        if self._pair_bytes + out.nbytes <= self.PAIR_CACHE_BYTES:
            self._pair_cache[q] = out
            self._pair_bytes += out.nbytes
        return out

    def _compute_pairs(self, q: int) -> FloatArray:
        cand, lg = self._cand(q)
        c = cand.size
        kk = min(self.k, c)
        states = dp_states(c, self.k)
        if states > self.pair_max_states:
            raise ConfigError(("pair_max_states",), f"Plackett-Luce pair marginals are exact only up to "
                              f"{self.pair_max_states} DP states; query {q} has {c} candidates and k = {self.k}, "
                              f"{states} states (raise pair_max_states, or use a policy with closed-form pairs)")
        out = np.zeros((self.k, self.m, self.k, self.m))
        if kk:
            out[np.ix_(np.arange(kk), cand, np.arange(kk), cand)] = pair_marginals(lg, self.k)
        return out
