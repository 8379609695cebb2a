"""Derived arrays of a log, computed once and shared by every estimate of the log.

A :class:`~onlineeval.estimators.base.LoggedData` is immutable (its arrays are read-only
and not shared with writable arrays), and targets and rewards are immutable by contract,
so anything computed from a log (and a target, and a reward) can be kept on the log:
the target's propensities of the logged lists and the importance weights built from them,
the slot rewards of the clicks, the first-click indicators, the weight diagnostics of a
cached weight array. :class:`LogCache` holds them; ``LoggedData.cached`` is its entry
point (see there). Every array it hands out is read-only, so no estimator can change what
the next one reads.

Memory: the entries of a target are kept for the :data:`CACHED_TARGETS` most recently
used targets of a log (a log's weights take several ``(n, k)`` float arrays per target);
``LoggedData.clear_cache`` drops everything.

Blockwise kernels. Sums over the slots of each row (:func:`row_sum`, :func:`weighted_row_sum`,
the pseudoinverse's gather) are made slot by slot over blocks of about :data:`BLOCK_VALUES`
values, in numpy's own pairwise order (:func:`add_rows`), and the weight diagnostics' sums
over parts of numpy's own pairwise split of the whole array (:func:`_moments`): the same
bits as ``.sum(axis=1)`` and (from numpy 2.3 on; before, within rounding) ``.sum()``, tested
against numpy, the previous code and the orders written out, with no ``(n, k)`` temporary.
Measured on 10^6 x 10 float64 values (loaded 2-core machine, best of 7): ``(w * r).sum(axis=1)``
41 ms, :func:`weighted_row_sum` 15 ms; ``x.sum(axis=1)`` 26 ms, :func:`row_sum` 11 ms. Fresh
``(n, k)`` temporaries cost more than their arithmetic: every one is new memory whose pages the
kernel must fault in and zero (seen as system CPU time, which grows with the process's
footprint and the machine's load).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = ["BLOCK_VALUES", "CACHED_TARGETS", "LogCache", "add_rows", "block_rows", "freeze", "is_frozen", "row_sum",
           "weight_statistics", "weighted_row_sum"]

T = TypeVar("T")
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

#: how many targets' entries one log keeps (least recently used dropped first); two keep
#: both targets of a difference estimate
CACHED_TARGETS = 2


#: values per block of the blockwise kernels: a block of each operand (a few hundred KB) stays in the
#: CPU's cache while every pass over it is made, instead of one pass over the whole array per operation
BLOCK_VALUES = 1 << 16
#: rows of up to this many slots are added in numpy's own order by :func:`row_sum` (beyond it, numpy adds)
_PAIRWISE_MAX = 128


def add_rows(x: FloatArray, out: FloatArray, acc: FloatArray) -> None:
    """``out[:] = x.sum(axis=1)`` for a block ``x`` of ``k <= 128`` float64 slots, in the order of
    numpy's pairwise summation of a short row (which it uses for every row of an ``(n, k)``
    reduction over the last axis): fewer than 8 values left to right; else 8 accumulators
    (slot ``c`` plus slots ``c + 8, c + 16, ...`` of the whole groups of 8), added as
    ``((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))``, then the remaining ``k mod 8`` slots one by one.
    Numpy starts each row from its identity, so a row of ``-0.0`` adds to ``+0.0`` here too.
    Column by column, so no per-row overhead; ``acc`` is ``(8, >= rows)`` scratch. Rows of more
    than 128 slots (numpy splits them further) are left to numpy."""
    b, k = x.shape
    if k > _PAIRWISE_MAX or k == 0:
        x.sum(axis=1, out=out)
        return
    if k < 8:
        np.copyto(out, x[:, 0])
        for j in range(1, k):
            out += x[:, j]
        out += 0.0  # numpy starts a row's sum from its identity +0.0: a row of -0.0 adds to +0.0
        return
    full = k - k % 8
    if full > 8:
        r = acc[:, :b]
        for c in range(8):
            np.add(x[:, c], x[:, 8 + c], out=r[c])
            for i in range(16, full, 8):
                r[c] += x[:, i + c]
        np.add(r[0], r[1], out=out)
        np.add(r[2], r[3], out=r[2])
        out += r[2]
        np.add(r[4], r[5], out=r[4])
        np.add(r[6], r[7], out=r[6])
    else:
        r = acc[:, :b]
        np.add(x[:, 0], x[:, 1], out=out)
        np.add(x[:, 2], x[:, 3], out=r[2])
        out += r[2]
        np.add(x[:, 4], x[:, 5], out=r[4])
        np.add(x[:, 6], x[:, 7], out=r[6])
    r[4] += r[6]
    out += r[4]
    for i in range(full, k):
        out += x[:, i]
    out += 0.0  # numpy starts a row's sum from its identity +0.0: a row of -0.0 adds to +0.0


def block_rows(k: int) -> int:
    """Rows of ``k`` slots per block of the blockwise kernels."""
    return max(256, BLOCK_VALUES // max(k, 1))


def row_sum(x: FloatArray) -> FloatArray:
    """``x.sum(axis=1)`` of an ``(n, k)`` float matrix, the same numbers (tested bit for bit):
    for float64 rows of up to 128 slots the sums are made in numpy's own order
    (:func:`add_rows`) slot by slot over blocks of rows that stay in the CPU cache, which
    avoids numpy's per-row overhead on a short last axis (about 2.5x faster for ``k = 10``).
    Rows of fewer than 8 slots of another dtype are added as float64 (as before); other
    inputs go to numpy."""
    n, k = x.shape
    if x.dtype != np.float64 and 0 < k < 8:
        x = x.astype(np.float64)
    if k == 0 or k > _PAIRWISE_MAX or x.dtype != np.float64:
        return x.sum(axis=1)
    out = np.empty(n)
    rows = block_rows(k)
    acc = np.empty((8, min(rows, n)))
    for s in range(0, n, rows):
        e = min(n, s + rows)
        add_rows(x[s:e], out[s:e], acc)
    return out


def weighted_row_sum(w: FloatArray, r: FloatArray) -> FloatArray:
    """``row_sum(w * r)`` of two ``(n, k)`` float64 matrices, the same numbers, block by block
    (the product of a block is made in the cache and added at once: no ``(n, k)`` temporary);
    about 2.5x faster than ``(w * r).sum(axis=1)`` for ``k = 10``."""
    n, k = w.shape
    if r.shape != w.shape or k == 0 or k > _PAIRWISE_MAX or w.dtype != np.float64 or r.dtype != np.float64:
        return row_sum(w * r)
    out = np.empty(n)
    rows = block_rows(k)
    tmp = np.empty((min(rows, n), k))
    acc = np.empty((8, min(rows, n)))
    for s in range(0, n, rows):
        e = min(n, s + rows)
        t = tmp[: e - s]
        np.multiply(w[s:e], r[s:e], out=t)
        add_rows(t, out[s:e], acc)
    return out


def is_frozen(arr: Any) -> bool:
    """True when ``arr`` is a plain ndarray that no one can write through numpy: it and every
    array it is a view of are read-only, and the chain ends at an array owning its memory
    (not a foreign buffer such as a writable ``bytearray`` or memory map)."""
    if type(arr) is not np.ndarray:
        return False
    a: Any = arr
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        if a.base is None:
            return True
        a = a.base
    return False


def freeze(value: T) -> T:
    """``value`` with its arrays made read-only (an array, or the array fields of a frozen
    dataclass such as ``Propensities``, or a tuple of them); returned for chaining."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif isinstance(value, tuple):
        for v in value:
            freeze(v)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            v = getattr(value, name)
            if isinstance(v, np.ndarray):
                v.setflags(write=False)
    return value


class LogCache:
    """Entries of one log: plain ones (the log alone, or the log and a reward) and, per
    target, the target's (a bounded least-recently-used set of targets, compared by
    identity: a target is held while its entries are)."""

    __slots__ = ("plain", "targets")

    def __init__(self) -> None:
        self.plain: dict[Hashable, Any] = {}
        self.targets: OrderedDict[int, tuple[Any, dict[Hashable, Any]]] = OrderedDict()

    def section(self, target: Any) -> dict[Hashable, Any]:
        if target is None:
            return self.plain
        key = id(target)
        entry = self.targets.get(key)
        if entry is None or entry[0] is not target:
            entry = (target, {})
            self.targets[key] = entry
            while len(self.targets) > CACHED_TARGETS:
                self.targets.popitem(last=False)
        else:
            self.targets.move_to_end(key)
        return entry[1]

    def get(self, key: Hashable, compute: Callable[[], T], target: Any = None) -> T:
        sec = self.section(target)
        if key in sec:
            return sec[key]  # type: ignore[no-any-return]
        value = freeze(compute())
        # the section may have been evicted by a nested call for another target: fetch again
        self.section(target)[key] = value
        return value

    def clear(self) -> None:
        self.plain.clear()
        self.targets.clear()


def weight_statistics(w: FloatArray, valid: BoolArray, all_valid: bool | None = None) -> tuple[float, ...]:
    """``(ess, max_weight, top1_share, zero_weight_share)`` of :class:`Diagnostics` for list
    weights ``(n,)`` or slot weights ``(n, k)`` (only the slots where ``valid``)."""
    ess = mx = top = math.nan
    if all_valid is None:
        all_valid = bool(valid.all())
    flat = (w.reshape(-1) if all_valid else w[valid]) if w.ndim == 2 else w
    lo = math.nan
    if flat.size:
        s, s2, mx, lo, n_pos = _moments(flat)
        ess = float(s * s / s2) if s2 > 0 else 0.0
        k = max(1, math.ceil(0.01 * flat.size))
        # the largest 1% of the weights; when fewer than 1% are positive (most slot weights of a
        # deterministic target are 0), the positive ones, then zeros, then the largest negatives
        n_pos = n_pos if s > 0 else 0
        if s <= 0:
            top = math.nan
        elif n_pos >= k:
            top = float(_top_k_sum(flat, k) / s)
        else:
            pos = flat[flat > 0]
            rest = k - pos.size - int(np.count_nonzero(flat == 0))
            neg = np.sort(flat[flat < 0])[-rest:].sum() if rest > 0 else 0.0
            top = float((pos.sum() + neg) / s)
    if w.ndim == 1:
        zero = float(np.mean(w == 0))
    elif all_valid and flat.size and lo >= 0:  # no negative weight: a row adds to 0 iff it is all 0,
        zero = float(np.mean(w @ np.ones(w.shape[1]) == 0))  # which a matrix-vector product tells as well
    else:
        zero = float(np.mean((w.sum(axis=1) if all_valid else np.where(valid, w, 0.0).sum(axis=1)) == 0))
    return ess, mx, top, zero


def _moments(flat: FloatArray) -> tuple[float, float, float, float, int]:
    """``(sum, sum of squares, max, min, count of positives)`` of a 1-d float array, the sums
    exactly as ``flat.sum()`` and ``np.square(flat).sum()`` give them from numpy 2.3 on (tested
    bit for bit); with an older numpy, within rounding of them (see below).

    Numpy 2.3 and later add a contiguous float64 array by pairwise summation: halves (the first
    rounded down to a multiple of 8) added recursively, blocks of up to 128 values with 8
    accumulators. A contiguous array is split here the same way down to parts of at most
    :data:`BLOCK_VALUES` values, and each part is summed by numpy, so the sums are the same
    numbers; every statistic of a part is taken while it is in the CPU's cache (one pass over
    memory, and no temporary array of squares). Other arrays (not contiguous, not float64, or
    of at most :data:`BLOCK_VALUES` values) are left to numpy. Numpy before 2.3 adds the pairwise
    sums of chunks of ``np.getbufsize()`` (8192) values one after another, in parts and in the
    whole alike, so there the sums of arrays longer than :data:`BLOCK_VALUES` differ from
    ``.sum()`` by rounding (up to about ``4 * eps * sum(|x|)`` seen on random arrays of up to
    10^6 values, numpy 1.26)."""
    if flat.dtype != np.float64 or not flat.flags.c_contiguous or flat.size <= BLOCK_VALUES:
        return (float(flat.sum()), float(np.square(flat).sum()), float(flat.max()), float(flat.min()),
                int(np.count_nonzero(flat > 0)))
    buf = np.empty(BLOCK_VALUES)
    pos = np.empty(BLOCK_VALUES, dtype=bool)
    maxima: list[float] = []
    minima: list[float] = []
    n_pos = 0

    def visit(part: FloatArray) -> tuple[Any, Any]:
        nonlocal n_pos
        size = part.size
        if size > BLOCK_VALUES:  # numpy's split: half, rounded down to a multiple of 8
            half = size // 2
            half -= half % 8
            a, a2 = visit(part[:half])
            b, b2 = visit(part[half:])
            return a + b, a2 + b2
        sq = buf[:size]
        np.square(part, out=sq)
        maxima.append(part.max())
        minima.append(part.min())
        n_pos += int(np.count_nonzero(np.greater(part, 0.0, out=pos[:size])))
        return part.sum(), sq.sum()

    total, total2 = visit(flat)
    return float(total), float(total2), float(np.max(maxima)), float(np.min(minima)), n_pos


def _top_k_sum(values: FloatArray, k: int) -> float:
    """Exact sum of the ``k`` largest ``values`` in linear time.

    ``np.partition`` of millions of slot weights can take a second (introselect meets its bad
    cases on such data), so for large inputs the ``k``-th largest value ``t`` is bracketed
    between two values ``a <= t < b`` of a sorted, evenly spaced subsample by counting: the
    bracket starts around the subsample's own ``1 - k/n`` quantile (a few standard errors of
    that quantile either side, so two counts usually settle it) and widens until the counts
    confirm it. The sum is every value ``>= b`` plus the largest of the few values in ``[a, b)``
    (partitioned); when ``a`` is a tied value that is itself the ``k``-th largest, every
    value above it plus the missing copies of it.
    """
    n = values.size
    if n <= 400_000:
        return float(np.partition(values, n - k)[n - k:].sum())
    sample = np.sort(values[:: max(1, n // 100_000)])
    size = sample.size
    centre = size - k * size / n  # where t sits in the sorted subsample
    width = 4.0 * math.sqrt(k * size / n) + 8.0
    lo = max(0, math.floor(centre - width))
    at_a = values >= sample[lo]
    while np.count_nonzero(at_a) < k:  # a must have at least k values at or above it
        if lo == 0:  # cannot happen (every subsample value is a value), kept for safety
            return float(np.partition(values, n - k)[n - k:].sum())
        width *= 2  # wider, and below the current value (ties)
        lo = max(0, min(math.floor(centre - width), int(np.searchsorted(sample, sample[lo], "left")) - 1))
        at_a = values >= sample[lo]
    hi = min(size, math.ceil(centre + width))
    while hi < size:  # b must have fewer than k values at or above it
        at_b = values >= sample[hi]
        if np.count_nonzero(at_b) < k:
            break
        at_a, lo = at_b, hi  # a valid a, closer to t
        width *= 2  # wider, and above the current value (ties)
        hi = min(size, max(math.ceil(centre + width), int(np.searchsorted(sample, sample[hi], "right"))))
    a = sample[lo]
    if lo + 1 < size and sample[lo + 1] == a:  # a tied value (few distinct weights): is it the k-th largest?
        over = values > a
        n_over = int(np.count_nonzero(over))
        if n_over < k:  # yes: everything above it, then k - n_over copies of it
            return float(values[over].sum() + np.full(k - n_over, a).sum())
    cand = values[at_a]  # a few times k values: the top k and the bracket
    if hi < size:
        upper = cand >= sample[hi]
        above, between = cand[upper], cand[~upper]
    else:
        above, between = cand[:0], cand
    need = k - above.size  # 1 <= need <= between.size
    if between.min() == between.max():  # all tied (e.g. few distinct weights): the same numbers, no partition
        return float(above.sum() + np.full(need, between[0]).sum())
    return float(above.sum() + np.partition(between, between.size - need)[between.size - need:].sum())
