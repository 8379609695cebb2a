"""Kernels shared by the cascade family (CM, DCM, SDBN, DBN, CCM).

In all five models the user scans top-down; at an examined slot ``r`` the click happens
with probability :math:`\\alpha_r` and the user goes on to slot ``r+1`` with probability
:math:`c^0_r` after no click and :math:`c^1_r` after a click [CMR15, ch. 3]:

======  ===============  ==================================================
model   :math:`c^0_r`    :math:`c^1_r`
======  ===============  ==================================================
CM      1                0
DCM     1                :math:`\\lambda_r`
SDBN    1                :math:`1 - \\sigma_{qd}`
DBN     :math:`\\gamma`   :math:`\\gamma(1 - \\sigma_{qd})`
CCM     :math:`\\tau_1`   :math:`\\tau_2 (1 - \\alpha_{qd}) + \\tau_3 \\alpha_{qd}`
======  ===============  ==================================================

This is the Markov cascade chain of :mod:`clickmodels.kernels` (note the argument order
there: ``attract, cont_click, cont_skip`` = ``alpha, c1, c0``); a fitted record's exact
marginal and conditional click probabilities, and hence its log-likelihood, come from
:func:`~clickmodels.kernels.chain_examination` and
:func:`~clickmodels.kernels.chain_conditional`, the same kernels the simulator's models
use. Only what EM needs beyond them lives here: the exact posteriors given the observed
clicks (:func:`cascade_posterior`), looping over the ``k`` ranks and vectorised over
sessions. Empty slots must carry ``alpha = 0`` and ``c0 = c1 = 1``.
"""

from __future__ import annotations

import sys
from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from clickmodels import kernels
from clickmodels.estimation._counts import compress, pair_sum, ranks_grid
from clickmodels.estimation.base import ClickModelFit, PairTable, smoothed
from clickmodels.logs import ClickLog

__all__ = [
    "CascadeFamilyFit",
    "CascadePosterior",
    "ChainEMData",
    "cascade_posterior",
    "chain_em_data",
    "attraction_through",
    "prepare_slots",
    "LAST_CLICK_ESTIMATOR",
    "compiled_em_sums",
]

#: the cascade-family EM steps (DCM, SDBN, DBN, CCM): True: one compiled pass per iteration
#: (:func:`clickmodels.estimation._cascade_compiled.cascade_em_sums`); False: NumPy (:func:`cascade_posterior` and
#: the models' steps, the reference the tests compare with); None (default): compiled when numba is already loaded
#: or the distinct sessions hold at least :data:`COMPILE_SLOTS` slots, else NumPy
COMPILED: bool | None = None
#: distinct-session slots from which ``COMPILED=None`` compiles: NumPy's step costs about 150 ns per slot and
#: iteration, so with the usual 30-40 iterations about a second here, what loading numba and the cached kernel
#: costs once per process
COMPILE_SLOTS = 200_000

#: the ``estimator`` label of the DCM and SDBN closed forms (``{ref}``: whose simplification)
LAST_CLICK_ESTIMATOR = ("closed form (last-click approximation, {ref}: the last click is taken as where the user "
                        "stopped; not the maximum-likelihood estimate, biased on data from the model itself); "
                        "the default EM fit (method='em') is the maximum-likelihood one")


def attraction_through(log: ClickLog, stop: np.ndarray, pseudo: float) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form attractiveness when every slot down to ``stop`` counts as examined.

    .. math::
        \\alpha_{qd} = \\frac{\\sum_{s, r \\le f_s} c^{(s)}_r \\mathbb{1}[(q,d)\\text{ at } r]}
                           {|\\{s, r \\le f_s : (q,d)\\text{ at } r\\}|}

    with :math:`f_s` = ``stop[s]`` (the whole list where it is ``-1``): the first click for
    CM, the last click for DCM and SDBN [CMR15, Sec. 4.2]. Returns the smoothed per-pair
    values and the examined-impression counts.
    """
    limit = np.where(stop >= 0, stop, log.depth - 1)
    examined = ranks_grid(log) <= limit[:, None]
    views = pair_sum(log, 1.0, examined)
    return smoothed(pair_sum(log, log.clicks, examined), views, pseudo), views


class ChainEMData(NamedTuple):
    """What the cascade-family EM loops (DCM, DBN, SDBN, CCM) precompute once.

    Attributes
    ----------
    log:
        The log with identical sessions merged (:func:`~clickmodels.estimation._counts.compress`).
    weight:
        ``(n,)`` multiplicity of each merged session; ``w`` is ``weight[:, None]``.
    last:
        ``(n,)`` 0-based rank of the last click (``-1``: none).
    above, before, at_last:
        ``(n, k)`` masks rank ``<=``, ``<`` and ``==`` the last click.
    has_next:
        ``(n, k)`` the slot and the slot below it are shown.
    views, n_clicks:
        ``(m,)`` weighted impressions and clicks per pair.
    n_sessions:
        Sessions of the original log.
    """

    log: ClickLog
    weight: np.ndarray
    w: np.ndarray
    last: np.ndarray
    above: np.ndarray
    before: np.ndarray
    at_last: np.ndarray
    has_next: np.ndarray
    views: np.ndarray
    n_clicks: np.ndarray
    n_sessions: int

    def attraction(self, alpha: np.ndarray, post: CascadePosterior) -> np.ndarray:
        """``(n, k)`` :math:`P(A_r = 1 \\mid C)`: the click itself down to the last click,
        :math:`\\alpha_r (1 - P(E_r = 1 \\mid C))` below it."""
        return np.where(self.above, self.log.clicks.astype(float), alpha * (1.0 - post.exam))


def chain_em_data(log: ClickLog) -> ChainEMData:
    """Merge identical sessions of ``log`` and precompute the masks and counts of :class:`ChainEMData`."""
    n_sessions = log.n_sessions
    log, weight = compress(log)
    w = weight[:, None]
    last = log.last_click
    ranks = ranks_grid(log)
    has_next = np.zeros(log.docs.shape, dtype=bool)
    has_next[:, :-1] = log.shown[:, 1:]
    return ChainEMData(
        log=log,
        weight=weight,
        w=w,
        last=last,
        above=ranks <= last[:, None],
        before=ranks < last[:, None],
        at_last=ranks == last[:, None],
        has_next=has_next,
        views=pair_sum(log, w),
        n_clicks=pair_sum(log, log.clicks * w),
        n_sessions=n_sessions,
    )


def compiled_em_sums(d: ChainEMData) -> bool:
    """Whether the EM of ``d``'s log runs the compiled step (:data:`COMPILED`, :data:`COMPILE_SLOTS`)."""
    if COMPILED is not None:
        return COMPILED
    return "numba" in sys.modules or d.log.docs.size >= COMPILE_SLOTS


class CompiledSums:
    """The arrays of :func:`~clickmodels.estimation._cascade_compiled.cascade_em_sums` for ``d``'s log (made once
    per fit); :meth:`run` is one E-step, returning the weighted log-likelihood with the sums filled."""

    def __init__(self, d: ChainEMData) -> None:
        from clickmodels.estimation._cascade_compiled import cascade_em_sums

        log = d.log
        self._kernel = cascade_em_sums
        self.codes = np.ascontiguousarray(log.pairs.codes, dtype=np.int64)
        self.clicks = np.ascontiguousarray(log.clicks, dtype=np.bool_)
        self.last = np.ascontiguousarray(d.last, dtype=np.int64)
        self.weight = np.ascontiguousarray(d.weight, dtype=np.float64)
        m, k = log.pairs.n_pairs, log.depth
        self.att = np.zeros(m)
        self.sat = np.zeros(m)
        self.cont = np.zeros(k)
        self.gamma_sums = np.zeros(2)
        self.tau_sums = np.zeros(4)
        # above the last click every slot is examined, its attraction is its click and the user went on: the
        # E-step's terms there are constants, summed here once as weighted counts per pair / rank (the kernel
        # starts at the last click); the log-likelihood's terms there, count x log(parameter), in _prefix_ll
        codes, clicks, w = self.codes, self.clicks, d.w
        ranks = np.arange(k)[None, :]
        shown = codes >= 0
        before = shown & (ranks < self.last[:, None])
        below = np.zeros_like(shown)
        below[:, :-1] = shown[:, 1:]
        wb = np.broadcast_to(w, codes.shape)
        self._att0 = np.bincount(codes[shown & (ranks <= self.last[:, None]) & clicks],
                                 weights=wb[shown & (ranks <= self.last[:, None]) & clicks], minlength=m)
        self._cont0 = np.where(before & clicks & below, wb, 0.0).sum(axis=0)
        self._gamma0 = float(np.where(before & below, wb, 0.0).sum())
        click_pair = np.bincount(codes[before & clicks], weights=wb[before & clicks], minlength=m)
        skip_pair = np.bincount(codes[before & ~clicks], weights=wb[before & ~clicks], minlength=m)
        click_rank = np.where(before & clicks, wb, 0.0).sum(axis=0)
        self._click_pairs = np.flatnonzero(click_pair)  # only counted parameters (others may be NaN)
        self._click_pair_n = click_pair[self._click_pairs]
        self._skip_pairs = np.flatnonzero(skip_pair)
        self._skip_pair_n = skip_pair[self._skip_pairs]
        self._click_ranks = np.flatnonzero(click_rank)
        self._click_rank_n = click_rank[self._click_ranks]
        self._skips = float(skip_pair.sum())
        # CCM: a click above the last click with a shown slot below is a chance to go on after a click (tau2 or
        # tau3, by its satisfaction posterior, a function of its pair's alpha); a skip there one for tau1 (taken)
        click_next = np.bincount(codes[before & clicks & below], weights=wb[before & clicks & below], minlength=m)
        self._click_next_n = click_next[self._click_pairs]
        self._skip_next0 = float(np.where(before & ~clicks & below, wb, 0.0).sum())

    def run(self, alpha: np.ndarray, *, lam: np.ndarray | None = None, sigma: np.ndarray | None = None,
            gamma: float = 1.0, tau: tuple[float, float, float] | None = None) -> float:
        """DCM (``lam`` per rank), SDBN / DBN (``sigma`` per pair, ``gamma``) or CCM (``tau``: tau1, tau2, tau3;
        ``sat`` then holds the satisfaction posteriors at the clicks, ``gamma_sums`` tau1's sums and ``tau_sums``
        tau2's and tau3's numerators and denominators)."""
        kind = 0 if lam is not None else 2 if tau is not None else 1
        alpha = np.ascontiguousarray(alpha, dtype=np.float64)
        if tau is not None:
            gamma = float(tau[0])
        ll = float(self._kernel(
            self.codes, self.clicks, self.last, self.weight, alpha, kind,
            np.ascontiguousarray(lam if lam is not None else _NONE, dtype=np.float64),
            np.ascontiguousarray(sigma if sigma is not None else _NONE, dtype=np.float64), float(gamma),
            np.array(tau[1:] if tau is not None else (0.0, 0.0), dtype=np.float64),
            self.att, self.sat, self.cont, self.gamma_sums, self.tau_sums))
        self.att += self._att0
        if kind == 0:
            self.cont += self._cont0
        elif kind == 1:
            self.gamma_sums += self._gamma0
        else:
            self._ccm_prefix(alpha, float(tau[1]), float(tau[2]))
        return ll + self._prefix_ll(alpha, lam, sigma, float(gamma), tau)

    def _ccm_prefix(self, alpha: np.ndarray, t2: float, t3: float) -> None:
        """CCM's sums above the last clicks: a click there was followed by an examined slot, so its satisfaction
        posterior is :math:`\\alpha \\tau_3 / c^1` (:math:`\\alpha` where :math:`c^1 = 0`), the same for every
        click of its pair: counted per pair into ``sat`` and, where a shown slot follows, into tau3's sums (tau2's
        with its complement); the skips there with a shown slot below into tau1's (examined, went on)."""
        a = alpha[self._click_pairs]
        c1 = t2 * (1.0 - a) + t3 * a
        with np.errstate(invalid="ignore", divide="ignore"):
            mid = np.where(c1 > 0, a * t3 / np.where(c1 > 0, c1, 1.0), a)
        self.sat[self._click_pairs] += self._click_pair_n * mid
        on1 = float(np.sum(self._click_next_n * mid))
        on0 = float(np.sum(self._click_next_n * (1.0 - mid)))
        self.tau_sums += (on0, on0, on1, on1)
        self.gamma_sums += self._skip_next0

    def _prefix_ll(self, alpha: np.ndarray, lam: np.ndarray | None, sigma: np.ndarray | None, gamma: float,
                   tau: tuple[float, float, float] | None = None) -> float:
        """The log-likelihood's terms above the last clicks: a click there :math:`\\log \\alpha + \\log c^1`,
        a skip :math:`\\log(1 - \\alpha) + \\log c^0` (``c^0 = \\gamma``, tau1 for CCM), with cascade_posterior's
        clamps."""
        tiny = 1e-300  # sums of products, not BLAS dot products (a threaded dot took 12 ms on a busy machine)
        a = alpha[self._click_pairs]
        ll = np.sum(self._click_pair_n * np.log(np.maximum(a, tiny)))
        ll += np.sum(self._skip_pair_n * np.log(np.maximum(1.0 - alpha[self._skip_pairs], tiny)))
        if lam is not None:
            ll += np.sum(self._click_rank_n * np.log(np.maximum(np.asarray(lam, dtype=float)[self._click_ranks], tiny)))
        elif tau is not None:
            ll += np.sum(self._click_pair_n * np.log(np.maximum(float(tau[1]) * (1.0 - a) + float(tau[2]) * a, tiny)))
        else:
            c1 = gamma * (1.0 - np.asarray(sigma, dtype=float)[self._click_pairs])
            ll += np.sum(self._click_pair_n * np.log(np.maximum(c1, tiny)))
        return float(ll + self._skips * np.log(max(gamma, tiny)))


_NONE = np.zeros(0)


def prepare_slots(
    alpha: np.ndarray, c0: np.ndarray, c1: np.ndarray, shown: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return new arrays with the empty-slot convention (alpha 0, continuation 1) applied."""
    return (
        np.where(shown, alpha, 0.0),
        np.where(shown, np.broadcast_to(c0, shown.shape), 1.0),
        np.where(shown, np.broadcast_to(c1, shown.shape), 1.0),
    )


class CascadePosterior(NamedTuple):
    """Posterior quantities of one E-step.

    Attributes
    ----------
    last:
        ``(n,)`` 0-based rank of the last click, ``-1`` without clicks.
    tail:
        ``(n, k+1)`` :math:`Q_r = P(\\text{no click at } r..k \\mid E_r = 1)`, ``Q_{k+1}=1``.
    after_last:
        ``(n,)`` :math:`Q_{l+1}` (1 without clicks... and at the bottom).
    stop_norm:
        ``(n,)`` :math:`(1-c^1_l) + c^1_l Q_{l+1}` (1 without clicks).
    exam:
        ``(n, k)`` :math:`P(E_r = 1 \\mid C)`.
    log_lik:
        ``(n,)`` :math:`\\log P(C)`.
    """

    last: np.ndarray
    tail: np.ndarray
    after_last: np.ndarray
    stop_norm: np.ndarray
    exam: np.ndarray
    log_lik: np.ndarray


def cascade_posterior(
    alpha: np.ndarray, c0: np.ndarray, c1: np.ndarray, clicks: np.ndarray, last: np.ndarray
) -> CascadePosterior:
    """Exact posteriors given observed clicks (all slots down to the last click are examined).

    .. math::
        Q_r = (1-\\alpha_r)\\,[(1-c^0_r) + c^0_r Q_{r+1}],\\qquad
        P(C) = \\prod_{r<l} \\alpha_r^{c_r}(1-\\alpha_r)^{1-c_r} c^{c_r}_r
               \\cdot \\alpha_l\\,[(1-c^1_l) + c^1_l Q_{l+1}]

    (:math:`P(C) = Q_1` without clicks). Below ``l`` the examination posterior follows
    :math:`P(E_{l+1} \\mid C) = c^1_l Q_{l+1} / [(1-c^1_l) + c^1_l Q_{l+1}]` and
    :math:`P(E_{r+1} \\mid C) = P(E_r \\mid C)\\, c^0_r Q_{r+1} / [(1-c^0_r) + c^0_r Q_{r+1}]`.
    """
    n, k = alpha.shape
    rows = np.arange(n)
    tail = np.ones((n, k + 1))
    for r in range(k - 1, -1, -1):
        tail[:, r] = (1.0 - alpha[:, r]) * ((1.0 - c0[:, r]) + c0[:, r] * tail[:, r + 1])
    has = last >= 0
    li = np.maximum(last, 0)
    q_after = np.where(has, tail[rows, li + 1], 1.0)
    c1_last = c1[rows, li]
    stop_norm = np.where(has, (1.0 - c1_last) + c1_last * q_after, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(has, c1_last * q_after / stop_norm, 1.0)

    ranks = np.arange(k)[None, :]
    above = ranks <= last[:, None]
    log_terms = np.where(
        clicks, np.log(np.maximum(alpha, 1e-300)) + np.log(np.maximum(c1, 1e-300)),
        np.log(np.maximum(1.0 - alpha, 1e-300)) + np.log(np.maximum(c0, 1e-300)),
    )
    before = ranks < last[:, None]
    log_lik = np.where(before, log_terms, 0.0).sum(axis=1)
    log_lik += np.where(has, np.log(np.maximum(alpha[rows, li], 1e-300)) + np.log(np.maximum(stop_norm, 1e-300)),
                        np.log(np.maximum(tail[:, 0], 1e-300)))

    exam = np.where(above, 1.0, 0.0)
    e = w.copy()
    for r in range(k):
        start = r == last + 1
        e = np.where(start, w, e)
        below = r > last
        exam[:, r] = np.where(below, e, exam[:, r])
        nxt = tail[:, r + 1]
        num = c0[:, r] * nxt
        den = (1.0 - c0[:, r]) + num
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
        e = np.where(below, e * step, e)
    return CascadePosterior(last, tail, q_after, stop_norm, exam, log_lik)


@dataclass(frozen=True, eq=False)
class CascadeFamilyFit(ClickModelFit):
    """A fitted cascade-family model; subclasses supply the continuation hook."""

    pair_fields: ClassVar[tuple[str, ...]] = ("attractiveness",)

    attractiveness: PairTable

    @abstractmethod
    def _continuation(self, log: ClickLog, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(c0, c1)`` per slot, each broadcastable to ``(n, k)``."""

    def slot_arrays(self, log: ClickLog) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(alpha, c0, c1)`` as ``(n, k)`` arrays with the empty-slot convention."""
        alpha = self.attractiveness.for_log(log)
        c0, c1 = self._continuation(log, alpha)
        return prepare_slots(alpha, c0, c1, log.shown)

    def _click_probs(self, log: ClickLog) -> np.ndarray:
        alpha, c0, c1 = self.slot_arrays(log)
        return kernels.chain_examination(alpha, c1, c0, alpha.shape) * alpha

    def _conditional_click_probs(self, log: ClickLog) -> np.ndarray:
        alpha, c0, c1 = self.slot_arrays(log)
        return kernels.chain_conditional(alpha, c1, c0, log.clicks)
