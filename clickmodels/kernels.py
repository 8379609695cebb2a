"""Numpy kernels over per-slot parameter arrays (no model objects, no validation).

Every function takes arrays broadcastable to (n, k) (one row per impression, one column
per rank, 0-based) and loops at most over the ``k`` ranks, never over impressions.
Callers (the model classes, and estimation code) are responsible for validation and for
setting empty slots to ``attract = 0`` and ``cont_skip = 1`` (an empty slot is passed over).

Markov cascade chain
--------------------
The user examines rank 1; at an examined rank :math:`r` they click with probability
:math:`a_r`, then examine rank :math:`r+1` with probability :math:`c^{1}_r` after a click or
:math:`c^{0}_r` after no click; an unexamined rank ends the session. This one chain covers
CM (:math:`c^1=0, c^0=1`), DCM (:math:`c^1=\\lambda_r, c^0=1`), CCM
(:math:`c^0=\\tau_1, c^1=\\tau_2(1-\\alpha)+\\tau_3\\alpha`), DBN
(:math:`c^1=\\gamma(1-\\sigma), c^0=\\gamma`), SDBN (:math:`\\gamma=1`) and every C/W/L user
(:math:`c^1=c^0=C(r)`) (Chuklin, Markov & de Rijke 2015, *Click Models for Web Search*,
ch. 3).

.. math::
    P(E_1) = 1,\\qquad P(E_{r+1}) = P(E_r)\\,\\bigl(a_r c^1_r + (1-a_r) c^0_r\\bigr),
    \\qquad P(C_r) = P(E_r)\\,a_r .

Sampling uses one uniform :math:`U` per slot: click iff :math:`U < a`; given a click
:math:`U/a` is again uniform, given no click :math:`(U-a)/(1-a)` is, so the continuation is
decided by the same draw: continue iff :math:`U < a c^1` or
:math:`a \\le U < a + (1-a) c^0`. The first rank at which the user stops is found with an
``argmax`` over the batch.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "chain_thresholds",
    "chain_sample",
    "chain_sample_grades",
    "chain_sample_thresholds",
    "blocked_uniforms",
    "BLOCK",
    "chain_examination",
    "chain_conditional",
    "independent_sample",
    "independent_sample_grades",
    "ubm_sample",
    "ubm_probabilities",
    "ubm_conditional",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


#: Impressions per block of uniform draws (and per cache-sized chunk of work).
BLOCK = 16384


def blocked_uniforms(rng: np.random.Generator, k: int, n: int, block: int = BLOCK) -> FloatArray:
    """(k, n) uniforms drawn block by block: ``rng.random((k, b))`` for each block of
    ``b <= block`` impressions, left to right (the order every chain sampler uses)."""
    out = np.empty((k, n), dtype=np.float64)
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        out[:, lo:hi] = rng.random((k, hi - lo))
    return out


def chain_thresholds(
    attract: ArrayLike, cont_click: ArrayLike, cont_skip: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Thresholds ``(t1, t2, t3) = (a c1, a, a + (1 - a) c0)`` of the one-draw sampler."""
    a = np.asarray(attract, dtype=np.float64)
    c1 = np.asarray(cont_click, dtype=np.float64)
    c0 = np.asarray(cont_skip, dtype=np.float64)
    return a * c1, a, a + (1.0 - a) * c0


def chain_sample_thresholds(
    u: FloatArray, t1: ArrayLike, t2: ArrayLike, t3: ArrayLike
) -> tuple[BoolArray, BoolArray]:
    """Clicks and realised examination from uniforms ``u`` (n, k) and thresholds.

    Returns
    -------
    clicks, examined:
        (n, k) bool each.
    """
    n, k = u.shape
    click = u < t2
    go = (~click | (u < t1)) & (click | (u < t3))
    examined = np.empty((n, k), dtype=bool)
    if k:
        examined[:, 0] = True
    for r in range(1, k):
        np.logical_and(examined[:, r - 1], go[:, r - 1], out=examined[:, r])
    click &= examined
    return click, examined


def chain_sample(
    attract: ArrayLike, cont_click: ArrayLike, cont_skip: ArrayLike, rng: np.random.Generator, shape: tuple[int, int]
) -> tuple[BoolArray, BoolArray]:
    """Sample the Markov cascade chain: ``(clicks, examined)``, each (n, k) bool.

    Draws one uniform per slot with :func:`blocked_uniforms`, so it gives the same clicks
    as :func:`chain_sample_grades` for the same generator state.
    """
    t1, t2, t3 = chain_thresholds(attract, cont_click, cont_skip)
    u = blocked_uniforms(rng, shape[1], shape[0]).T
    return chain_sample_thresholds(u, t1, t2, t3)


def chain_sample_grades(
    labels: NDArray[np.integer],
    attract: ArrayLike,
    cont_click: ArrayLike,
    cont_skip: ArrayLike,
    rng: np.random.Generator,
    chunk: int | None = None,
) -> tuple[BoolArray, BoolArray, FloatArray]:
    """Fast path when every chain parameter depends on the grade (and rank) only.

    Parameters
    ----------
    labels:
        (n, k) grades, ``-1`` for an empty slot.
    attract, cont_click, cont_skip:
        Tables broadcastable to (k, G + 1): entry ``[r, g]`` for rank ``r`` and grade
        ``g``; the last column is used for empty slots (label ``-1``) and must have
        ``attract = 0`` (``cont_skip = 1`` passes an empty slot over; a value below 1 lets
        the user stop there, for models where an empty slot counts as a position).
        A (G + 1,) table applies to every rank.
    rng:
        Generator; draws the uniforms of :func:`blocked_uniforms`, as :func:`chain_sample`.
    chunk:
        Impressions processed at a time (keeps the work arrays in cache); must be
        :data:`BLOCK` for the draws to match :func:`chain_sample`.

    Returns
    -------
    clicks, examined, propensity:
        (n, k) arrays (transposed views of rank-major work arrays). ``propensity`` is the
        exact examination probability (0 in empty slots).
    """
    n, k = labels.shape
    a = np.asarray(attract, dtype=np.float64)
    width = a.shape[-1]
    shape = (k, width)

    def flat(t: NDArray[np.float64]) -> NDArray[np.float64]:
        # empty-slot column first, so that grade g sits at column g + 1 and -1 at column 0
        return np.roll(np.broadcast_to(t, shape), 1, axis=1).ravel()

    t1, t2, t3 = (flat(t) for t in chain_thresholds(attract, cont_click, cont_skip))
    step = t1 + t3 - t2  # a c1 + (1 - a) c0
    use_t1 = bool(np.any(t1 > 0))
    use_t3 = bool(np.any(t3 < 1.0))
    offset = (np.arange(k, dtype=np.intp) * width + 1)[:, None]
    chunk = BLOCK if chunk is None else chunk
    clicks = np.empty((k, n), dtype=bool)
    examined = np.empty((k, n), dtype=bool)
    exam = np.empty((k, n), dtype=np.float64)
    lab_t = labels.T
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        grade = lab_t[:, lo:hi]
        idx = grade + offset  # int64: rank r, grade g -> r * width + g + 1
        u = rng.random((k, hi - lo))
        click = u < t2.take(idx)
        go = ~click  # continue after this rank?
        if use_t1:
            go |= u < t1.take(idx)
        if use_t3:
            go &= click | (u < t3.take(idx))
        ex = examined[:, lo:hi]
        st = step.take(idx)
        e = exam[:, lo:hi]
        if k:
            ex[0] = True
            e[0] = 1.0
        for r in range(1, k):
            np.logical_and(ex[r - 1], go[r - 1], out=ex[r])
            np.multiply(e[r - 1], st[r - 1], out=e[r])
        np.logical_and(click, ex, out=clicks[:, lo:hi])
        empty = grade < 0
        if np.any(empty):
            e[empty] = 0.0
            ex &= ~empty
    return clicks.T, examined.T, exam.T


def chain_examination(attract: ArrayLike, cont_click: ArrayLike, cont_skip: ArrayLike,
                      shape: tuple[int, int]) -> FloatArray:
    """(n, k) exact examination probabilities of the chain (cumulative product)."""
    a = np.broadcast_to(np.asarray(attract, dtype=np.float64), shape)
    c1 = np.broadcast_to(np.asarray(cont_click, dtype=np.float64), shape)
    c0 = np.broadcast_to(np.asarray(cont_skip, dtype=np.float64), shape)
    step = a * c1 + (1.0 - a) * c0
    exam = np.ones(shape, dtype=np.float64)
    if shape[1] > 1:
        np.cumprod(step[:, :-1], axis=1, out=exam[:, 1:])
    return exam


def chain_conditional(
    attract: ArrayLike, cont_click: ArrayLike, cont_skip: ArrayLike, clicks: BoolArray
) -> FloatArray:
    """(n, k) :math:`P(C_r = 1 \\mid C_{<r})` of the chain given observed clicks.

    Forward filtering of the examination state :math:`e_r = P(E_r = 1 \\mid C_{<r})`:

    .. math::
        e_1 = 1,\\quad
        e_{r+1} = \\begin{cases} c^1_r & C_r = 1\\\\
        c^0_r\\,\\dfrac{e_r (1-a_r)}{1 - e_r a_r} & C_r = 0 \\end{cases},\\quad
        P(C_r = 1 \\mid C_{<r}) = e_r a_r .
    """
    shape = clicks.shape
    a = np.broadcast_to(np.asarray(attract, dtype=np.float64), shape)
    c1 = np.broadcast_to(np.asarray(cont_click, dtype=np.float64), shape)
    c0 = np.broadcast_to(np.asarray(cont_skip, dtype=np.float64), shape)
    n, k = shape
    out = np.empty(shape, dtype=np.float64)
    e = np.ones(n, dtype=np.float64)
    for r in range(k):
        p = e * a[:, r]
        out[:, r] = p
        denom = 1.0 - p
        with np.errstate(invalid="ignore", divide="ignore"):
            post_skip = np.where(denom > 0, e * (1.0 - a[:, r]) / np.where(denom > 0, denom, 1.0), 0.0)
        e = np.where(clicks[:, r], c1[:, r], c0[:, r] * post_skip)
    return out


def independent_sample_grades(
    labels: NDArray[np.integer], exam: ArrayLike, attract: ArrayLike, rng: np.random.Generator, chunk: int | None = None
) -> tuple[BoolArray, BoolArray, FloatArray]:
    """Fast path of independent-click models whose parameters depend on rank and grade.

    Parameters
    ----------
    labels:
        (n, k) grades, ``-1`` for an empty slot.
    exam:
        (k,) examination probability by rank.
    attract:
        Table broadcastable to (k, G + 1), last column for empty slots (must be 0).
    rng:
        Generator; draws :func:`blocked_uniforms`. Examined iff :math:`U < e_r`, clicked
        iff :math:`U < e_r a`.

    Returns
    -------
    clicks, examined, propensity:
        (n, k) arrays; ``propensity`` is :math:`e_r` (0 in empty slots).
    """
    n, k = labels.shape
    e = np.asarray(exam, dtype=np.float64)[:k]
    a = np.asarray(attract, dtype=np.float64)
    width = a.shape[-1]
    p = np.roll(np.broadcast_to(e[:, None] * a, (k, width)), 1, axis=1).ravel()
    offset = (np.arange(k, dtype=np.intp) * width + 1)[:, None]
    chunk = BLOCK if chunk is None else chunk
    clicks = np.empty((k, n), dtype=bool)
    examined = np.empty((k, n), dtype=bool)
    lab_t = labels.T
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        grade = lab_t[:, lo:hi]
        u = rng.random((k, hi - lo))
        np.less(u, p.take(grade + offset), out=clicks[:, lo:hi])
        ex = examined[:, lo:hi]
        np.less(u, e[:, None], out=ex)
        ex &= grade >= 0
    prop = np.where(labels >= 0, e[None, :], 0.0)
    return clicks.T, examined.T, prop


def independent_sample(p_click: ArrayLike, rng: np.random.Generator, shape: tuple[int, int]) -> BoolArray:
    """Independent Bernoulli clicks with per-slot probabilities (PBM, CTR baselines)."""
    return rng.random(shape) < np.asarray(p_click, dtype=np.float64)


def ubm_sample(
    attract: FloatArray, gamma: FloatArray, rng: np.random.Generator
) -> tuple[BoolArray, BoolArray]:
    """Sample UBM: ``(clicks, examined)``.

    ``gamma[r, j]`` is the examination probability of rank ``r`` when the previous click
    was at rank ``j - 1`` (``j = 0``: no click yet), for ``0 <= j <= r``. One uniform
    per slot (``rng.random((k, n))``): examined iff :math:`U < \\gamma`, clicked iff
    :math:`U < \\gamma a`.
    """
    n, k = attract.shape
    u = rng.random((k, n))
    a_t = np.ascontiguousarray(attract.T)
    clicks = np.empty((k, n), dtype=bool)
    examined = np.empty((k, n), dtype=bool)
    last = np.zeros(n, dtype=np.intp)
    for r in range(k):
        g = gamma[r].take(last)
        np.less(u[r], g, out=examined[r])
        np.less(u[r], g * a_t[r], out=clicks[r])
        last[clicks[r]] = r + 1
    return clicks.T, examined.T


def ubm_probabilities(attract: FloatArray, gamma: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Exact UBM examination and click probabilities by dynamic programming.

    With :math:`L_r(j)` the probability that the last click above rank :math:`r` is at
    :math:`j` (0 = none):

    .. math::
        P(E_r) = \\sum_j L_r(j)\\gamma_{r j},\\quad P(C_r) = a_r P(E_r),\\quad
        L_{r+1}(j) = L_r(j)(1 - a_r\\gamma_{rj}),\\ L_{r+1}(r+1) = P(C_r).
    """
    n, k = attract.shape
    a_t = np.ascontiguousarray(attract.T)
    dist = np.zeros((k + 1, n), dtype=np.float64)
    dist[0] = 1.0
    exam = np.empty((k, n), dtype=np.float64)
    click = np.empty((k, n), dtype=np.float64)
    for r in range(k):
        g = np.ascontiguousarray(gamma[r, : r + 1])
        np.dot(g, dist[: r + 1], out=exam[r])
        np.multiply(exam[r], a_t[r], out=click[r])
        dist[: r + 1] *= 1.0 - g[:, None] * a_t[r][None, :]
        dist[r + 1] = click[r]
    return exam.T, click.T


def ubm_conditional(attract: FloatArray, gamma: FloatArray, clicks: BoolArray) -> FloatArray:
    """(n, k) :math:`P(C_r=1 \\mid C_{<r}) = a_r\\,\\gamma_{r, j(r)}` with :math:`j(r)` the last click above."""
    n, k = attract.shape
    out = np.empty((n, k), dtype=np.float64)
    last = np.zeros(n, dtype=np.intp)
    for r in range(k):
        out[:, r] = attract[:, r] * gamma[r, last]
        last[clicks[:, r]] = r + 1
    return out
