r"""The subset dynamic programmes behind a Plackett-Luce logger's item-position and pair marginals.

The next slot's draw depends on the *set* of documents placed above, not on their order, so the
probability of each set of size ``s`` (over :math:`\binom{c}{s}` states, colex order) carries the
marginals forward (see :mod:`simulations.policies.plackett_luce` for the recursion):
:func:`item_marginals` gives :math:`M_{xs} = P(\text{slot } s \text{ shows } x)`, and
:func:`pair_marginals` starts the same programme from the joint event "slot ``j`` shows ``a``" (one
column per ``a``) for :math:`P(\text{slot } j \text{ shows } a, \text{slot } s \text{ shows } b)`.
Both are exact; their cost is :func:`dp_states` (the caller decides up to which size to run them).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import sparse

from simulations.policies.base import BoolArray, FloatArray, IntArray

__all__ = ["dp_states", "item_marginals", "masked_lse", "pair_marginals"]


def dp_states(c: int, k: int) -> int:
    """Number of states of the subset DP for ``c`` candidates and ``k`` slots:
    :math:`\\sum_{s < \\min(k, c)} \\binom{c}{s}`."""
    return sum(math.comb(c, s) for s in range(min(k, c)))


@dataclass(frozen=True)
class Level:
    """Subsets of size ``s`` of ``range(c)`` in colex order and the transitions to size ``s+1``."""

    combos: IntArray  # (N_s, s)
    notin: BoolArray  # (N_s, c)
    src: IntArray  # (E,) subset index
    add: IntArray  # (E,) added candidate
    dst: IntArray  # (E,) index of src + add at level s+1


@lru_cache(maxsize=16)
def levels(c: int, kk: int) -> tuple[Level, ...]:
    """Subset levels ``0..kk-1`` (colex rank :math:`\\sum_i \\binom{a_i}{i+1}` = position)."""
    binom = np.array([[math.comb(n, r) for r in range(kk + 2)] for n in range(c + 1)], dtype=np.int64)
    out = []
    for s in range(kk):
        tuples = list(itertools.combinations(range(c), s))
        combos = np.array(tuples, dtype=np.int64).reshape(len(tuples), s)
        rank = binom[combos, np.arange(1, s + 1)[None, :]].sum(axis=1) if s else np.zeros(1, dtype=np.int64)
        combos = combos[np.argsort(rank)]
        n_s = combos.shape[0]
        notin = np.ones((n_s, c), dtype=bool)
        if s:
            notin[np.repeat(np.arange(n_s), s), combos.ravel()] = False
        if s + 1 < kk:  # transitions S -> S + {x} (none out of the last level)
            src, add = np.nonzero(notin)
            a = combos[src]  # (E, s)
            less = a < add[:, None]
            i = np.arange(s)[None, :]
            part = np.where(less, binom[a, i + 1], binom[a, i + 2]).sum(axis=1) if s else np.zeros(src.size, np.int64)
            dst = part + binom[add, less.sum(axis=1) + 1]
        else:
            src = add = dst = np.zeros(0, dtype=np.int64)
        for arr in (combos, notin, src, add, dst):
            arr.setflags(write=False)
        out.append(Level(combos, notin, src, add, dst))
    return tuple(out)


def masked_lse(logits: FloatArray, avail: BoolArray) -> FloatArray:
    """Row-wise log-sum-exp of ``logits`` over ``avail`` (``-inf`` for an empty row)."""
    lm = np.where(avail, logits, -np.inf)
    mx = lm.max(axis=-1)
    safe = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(lm - safe[..., None]).sum(axis=-1))


def rho(logits: FloatArray, notin: BoolArray) -> FloatArray:
    """``(N, c)``: :math:`\\rho_S(x)` for each subset row (0 for ``x`` in ``S``)."""
    lse = masked_lse(logits[None, :], notin)
    with np.errstate(invalid="ignore"):
        return np.exp(np.where(notin, logits[None, :] - lse[:, None], -np.inf))


def item_marginals(lg: FloatArray, k: int) -> FloatArray:
    """``(c, min(k, c))``: :math:`P(\\text{slot } s \\text{ shows } x)` under Plackett-Luce with logits ``lg``
    (one query's candidates), exactly, over :func:`dp_states` states."""
    c = lg.size
    kk = min(k, c)
    marg = np.zeros((c, kk))
    if not kk:
        return marg
    levs = levels(c, kk)
    p = np.ones(1)
    for s, lev in enumerate(levs):
        if s + 1 < kk:
            r = rho(lg, lev.notin)
            marg[:, s] = p @ r
            p = np.bincount(lev.dst, weights=p[lev.src] * r[lev.src, lev.add], minlength=levs[s + 1].combos.shape[0])
        else:  # the largest level: in chunks of about 2M cells to bound memory
            step = max(1, (1 << 21) // c)
            for a in range(0, lev.notin.shape[0], step):
                marg[:, s] += p[a: a + step] @ rho(lg, lev.notin[a: a + step])
    return marg


def pair_marginals(lg: FloatArray, k: int) -> FloatArray:
    """``(kk, c, kk, c)`` with ``kk = min(k, c)``: ``[j, a, s, b]`` = P(slot ``j`` shows ``a`` and slot ``s`` shows
    ``b``) under Plackett-Luce with logits ``lg`` (one query's candidates), exactly; the diagonal blocks
    ``[j, :, j, :]`` hold the item marginals on their diagonal."""
    c = lg.size
    kk = min(k, c)
    joint = np.zeros((kk, c, kk, c))
    if kk == 0:
        return joint
    levs = levels(c, kk)
    rhos = [rho(lg, lev.notin) for lev in levs]
    trans = []
    for s in range(kk - 1):
        lev = levs[s]
        trans.append(sparse.csr_matrix((rhos[s][lev.src, lev.add], (lev.dst, lev.src)),
                                       shape=(levs[s + 1].combos.shape[0], lev.combos.shape[0])))
    p = np.ones(1)
    for j in range(kk):
        lev = levs[j]
        joint[j, :, j, :] = np.diag(p @ rhos[j])
        if j + 1 < kk:
            # z[T, a]: P(top j+1 set = T and slot j shows a)
            z = sparse.coo_matrix((p[lev.src] * rhos[j][lev.src, lev.add], (lev.dst, lev.add)),
                                  shape=(levs[j + 1].combos.shape[0], c)).toarray()
            for s in range(j + 1, kk):
                pair = z.T @ rhos[s]  # [a, b] = P(slot j shows a, slot s shows b)
                joint[j, :, s, :] = pair
                joint[s, :, j, :] = pair.T
                if s + 1 < kk:
                    z = trans[s] @ z
            p = trans[j] @ p
    return joint
