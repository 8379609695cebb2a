"""The IPS family's blockwise kernels give the numbers of the implementations they replaced, bit for bit.

Row sums (:func:`row_sum`, :func:`weighted_row_sum`) are made slot by slot over blocks of
rows in numpy's own pairwise order, the weight statistics' sums over parts of numpy's own
pairwise split (:func:`_moments`), a deterministic target's propensities are compared block
by block and kept as booleans, the pseudoinverse gathers its per-impression weights block by
block. The references are numpy's own ``.sum(axis=1)`` / ``.sum()``, the previous
implementations, kept here verbatim, and numpy's summation orders written out here
(:func:`pairwise`, :func:`numpy_sum`, :func:`moments_sum`; numpy's ``.sum()`` of a long array
is made in another order before numpy 2.3 than from 2.3 on, so :func:`_moments` gives numpy's
own bits only from 2.3 on); logs span several blocks (the short test logs elsewhere fit in
one), and results are compared as bit patterns (signed zeros included; NaN as NaN).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from onlineeval.errors import InputError
from onlineeval.estimators import DeterministicTarget, LoggedData, Propensities, get_estimator, get_reward
from onlineeval.estimators.derived import (
    BLOCK_VALUES,
    _moments,
    _top_k_sum,
    block_rows,
    row_sum,
    weight_statistics,
    weighted_row_sum,
)
from onlineeval.estimators.pseudoinverse import _cache_for
from onlineeval.estimators.rips import _first_click_slot


def bits(a: np.ndarray) -> np.ndarray:
    """Bit patterns of a float array, every NaN as one value (NaN payloads are not numbers)."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isnan(a), -1, a.view(np.int64))


def same_bits(a: object, b: object) -> bool:
    return bool(np.array_equal(bits(np.asarray(a, dtype=np.float64)), bits(np.asarray(b, dtype=np.float64))))


def awkward(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Floats over 16 orders of magnitude, both signs, many +0.0 and -0.0, whole rows of -0.0."""
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape)
    x[rng.random(shape) < 0.3] = 0.0
    x[rng.random(shape) < 0.1] = -0.0
    if x.ndim == 2:
        x[rng.random(shape[0]) < 0.05] = -0.0
    return x


# ------------------------------------------------------------------------------ row sums
@pytest.mark.parametrize("k", [*range(1, 20), 23, 24, 25, 63, 64, 65, 127, 128, 129, 200])
def test_row_sums_are_numpys_bit_for_bit(k: int) -> None:
    rng = np.random.default_rng(k)
    n = 2 * block_rows(k) + 37  # three blocks, the last one short
    x, w = awkward(rng, (n, k)), awkward(rng, (n, k))
    assert same_bits(row_sum(x), x.sum(axis=1))
    assert same_bits(row_sum(x[:, ::-1]), x[:, ::-1].sum(axis=1))  # not contiguous
    assert same_bits(row_sum(x[5:6]), x[5:6].sum(axis=1))  # one row
    assert same_bits(weighted_row_sum(w, x), (w * x).sum(axis=1))
    with np.errstate(invalid="ignore", over="ignore"):
        x[rng.random(x.shape) < 0.002] = np.inf
        x[rng.random(x.shape) < 0.002] = -np.inf
        x[rng.random(x.shape) < 0.002] = np.nan
        assert same_bits(row_sum(x), x.sum(axis=1))
        assert same_bits(weighted_row_sum(w, x), (w * x).sum(axis=1))


def test_row_sums_of_other_inputs_are_numpys() -> None:
    rng = np.random.default_rng(1)
    x32 = rng.random((1000, 10)).astype(np.float32)
    assert row_sum(x32).dtype == np.float32 and np.array_equal(row_sum(x32), x32.sum(axis=1))
    # fewer than 8 slots of another dtype: added as float64, as the previous row_sum did
    for short in (x32[:, :5], (x32[:, :3] > 0.5), (x32[:, :4] * 100).astype(np.int64)):
        assert row_sum(short).dtype == np.float64
        assert same_bits(row_sum(short), short.astype(np.float64).sum(axis=1))
    x, w = rng.random((1000, 10)), rng.random((1000, 1))  # broadcast weights: numpy's product, then row_sum
    assert same_bits(weighted_row_sum(w, x), (w * x).sum(axis=1))
    assert row_sum(np.zeros((0, 10))).shape == (0,)
    assert weighted_row_sum(np.zeros((0, 3)), np.zeros((0, 3))).shape == (0,)


# ------------------------------------------------------------------------------ weight statistics
#: numpy's ``.sum()`` of a contiguous float64 array is one pairwise summation of the whole array from
#: numpy 2.3 on; before, its reductions went in chunks of ``np.getbufsize()`` values (8192), each summed
#: pairwise and added to the result one after another (numpy gh-27883, "Changes to the main iterator and
#: potential numerical changes" in numpy 2.3's release notes). Checked against numpy itself below.
WHOLE_ARRAY_PAIRWISE = np.lib.NumpyVersion(np.__version__) >= "2.3.0"


def _half(n: int) -> int:
    """Where numpy's pairwise summation splits ``n`` values: half, rounded down to a multiple of 8."""
    return n // 2 - (n // 2) % 8


def _short_sums(blocks: np.ndarray) -> list[float]:
    """numpy's pairwise sum of each row of ``blocks`` (``m`` blocks of ``L <= 128`` values), written out:
    fewer than 8 values added left to right from ``-0.0``; else 8 accumulators (value ``c`` plus values
    ``c + 8, c + 16, ...`` of the whole groups of 8) added as ``((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))``,
    then the rest one by one (vectorised over the blocks; float64 additions are the same in any order
    of blocks)."""
    m, size = blocks.shape
    if size < 8:
        res = np.full(m, -0.0)
        for j in range(size):
            res = res + blocks[:, j]
        return res.tolist()
    full = size - size % 8
    r = blocks[:, :8].copy()
    for i in range(8, full, 8):
        r = r + blocks[:, i:i + 8]
    res = ((r[:, 0] + r[:, 1]) + (r[:, 2] + r[:, 3])) + ((r[:, 4] + r[:, 5]) + (r[:, 6] + r[:, 7]))
    for i in range(full, size):
        res = res + blocks[:, i]
    return res.tolist()


def pairwise(x: np.ndarray) -> float:
    """numpy's pairwise summation (its ``pairwise_sum``) of a 1-d float64 array, written out: more than
    128 values split at :func:`_half` and the two sums added, blocks of up to 128 values by
    :func:`_short_sums`. Independent of the installed numpy (it adds single floats)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    spans: list[tuple[int, int]] = []  # (start, size) of the short blocks, left to right

    def split(start: int, n: int) -> None:
        if n <= 128:
            spans.append((start, n))
        else:
            split(start, _half(n))
            split(start + _half(n), n - _half(n))

    split(0, x.size)
    sums: dict[int, float] = {}
    for size in {n for _, n in spans}:
        starts = np.array([s for s, n in spans if n == size], dtype=np.int64)
        sums.update(zip(starts.tolist(), _short_sums(x[starts[:, None] + np.arange(size)])))

    def add(start: int, n: int) -> float:
        return sums[start] if n <= 128 else add(start, _half(n)) + add(start + _half(n), n - _half(n))

    return add(0, x.size)


def numpy_sum(x: np.ndarray) -> float:
    """``x.sum()`` of a contiguous 1-d float64 array in numpy's order, written out: add's identity
    ``+0.0`` plus the pairwise sum of the whole array (numpy >= 2.3), or plus the pairwise sums of
    successive chunks of ``np.getbufsize()`` values, one after another (numpy < 2.3)."""
    total = 0.0
    step = x.size if WHOLE_ARRAY_PAIRWISE else np.getbufsize()
    for s in range(0, x.size, max(step, 1)):
        total += pairwise(x[s:s + step])
    return total


def moments_sum(x: np.ndarray) -> float:
    """A sum of :func:`_moments` in the order its docstring gives, written out: a contiguous float64
    array of more than ``BLOCK_VALUES`` values split at :func:`_half` down to parts of at most
    ``BLOCK_VALUES`` values, each part summed as numpy sums it (:func:`numpy_sum`), the parts' sums
    added as the split pairs them; any other array as numpy sums it. On numpy >= 2.3 this is
    :func:`numpy_sum` of the whole array (the halves are pairwise summation's own), before it is not."""
    if x.dtype != np.float64 or not x.flags.c_contiguous:
        return float(x.sum())
    if x.size <= BLOCK_VALUES:
        return numpy_sum(x)
    return moments_sum(x[:_half(x.size)]) + moments_sum(x[_half(x.size):])


def summation_tolerance(x: np.ndarray) -> float:
    """A bound on the difference of two float64 sums of ``x`` made in the two orders numpy has used
    (each within ``eps * depth * sum(|x|)`` of the exact sum, ``depth`` the additions a value
    goes through: ``log2(n)`` pairwise levels plus ``n / 8192`` chunks)."""
    depth = math.ceil(math.log2(max(x.size, 2))) + math.ceil(x.size / np.getbufsize())
    return 2.0 * depth * np.finfo(np.float64).eps * float(np.abs(x).sum())


def two_orders(size: int) -> np.ndarray | None:
    """An array of ``size`` values whose sum is ``2**53 + 2`` in pairwise order (the two 1s meet each
    other before they meet ``2**53``) and ``2**53`` in numpy < 2.3's order (each 1, in its own chunk,
    is added to ``2**53`` alone: a tie, rounded to even); None when ``size`` is too short for it."""
    if size < 2 * np.getbufsize() + 2:
        return None
    x = np.zeros(size)
    x[0], x[-1], x[-1 - np.getbufsize()] = 2.0**53, 1.0, 1.0
    return x


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 127, 128, 129, 1000, 8191, 8192, 8193, 3 * 8192 + 5,
                                  BLOCK_VALUES + 1, 3 * BLOCK_VALUES + 13, 1_000_003])
def test_numpys_sum_order_is_the_one_written_out(size: int) -> None:
    """The references below are numpy's ``.sum()`` on the installed numpy (both orders: numpy 1.26
    and 2.4 checked), bit for bit; they are wrong if numpy's order (or WHOLE_ARRAY_PAIRWISE) is."""
    rng = np.random.default_rng(size + 7)
    for x in (awkward(rng, (size,)), rng.random(size), np.full(size, -0.0), -rng.random(size)):
        assert same_bits(numpy_sum(x), x.sum()) and same_bits(numpy_sum(np.square(x)), np.square(x).sum()), size
        if size <= np.getbufsize() or WHOLE_ARRAY_PAIRWISE:
            assert same_bits(pairwise(x) + 0.0, x.sum()), size
    x = two_orders(size)
    if x is not None:  # the two orders differ on it: the test tells them apart
        chunked = sum((pairwise(x[s:s + np.getbufsize()]) for s in range(0, size, np.getbufsize())), 0.0)
        assert pairwise(x) == 2.0**53 + 2 and chunked == 2.0**53
        assert same_bits(numpy_sum(x), x.sum())


@pytest.mark.parametrize("size", [1, 9, BLOCK_VALUES - 1, BLOCK_VALUES, BLOCK_VALUES + 1, 3 * BLOCK_VALUES + 13,
                                  1_000_003])
def test_moments_are_numpys_bit_for_bit(size: int) -> None:
    """:func:`_moments` sums in the order it documents (:func:`moments_sum`), bit for bit on any numpy:
    numpy's own ``.sum()`` from numpy 2.3 on (and for arrays of up to ``BLOCK_VALUES`` values on any
    numpy), within rounding of it before numpy 2.3."""
    rng = np.random.default_rng(size)
    y = two_orders(size)
    if y is not None and size > BLOCK_VALUES:  # split pairwise above BLOCK_VALUES on any numpy: the 1s meet first
        assert _moments(y)[0] == 2.0**53 + 2
    for x in (*([] if y is None else [y]), awkward(rng, (size,)), rng.random(size), np.full(size, -0.0),
              -rng.random(size)):
        got = _moments(x)
        assert same_bits(got[:2], (moments_sum(x), moments_sum(np.square(x)))), size
        assert same_bits(got[2:4], (x.max(), x.min())) and got[4] == int(np.count_nonzero(x > 0)), size
        if size <= BLOCK_VALUES or WHOLE_ARRAY_PAIRWISE:
            assert same_bits(got[:2], (x.sum(), np.square(x).sum())), size
        else:
            assert abs(got[0] - x.sum()) <= summation_tolerance(x), size
            assert abs(got[1] - np.square(x).sum()) <= summation_tolerance(np.square(x)), size
    assert same_bits(_moments(x[::2])[:4], (x[::2].sum(), np.square(x[::2]).sum(), x[::2].max(), x[::2].min()))


def numpys_sums(flat: np.ndarray) -> tuple[float, float]:
    return flat.sum(), np.square(flat).sum()


def moments_sums(flat: np.ndarray) -> tuple[float, float]:
    return moments_sum(flat), moments_sum(np.square(flat))


def old_weight_statistics(w: np.ndarray, valid: np.ndarray, all_valid: bool,
                          sums: Callable[[np.ndarray], tuple[float, float]] = numpys_sums) -> tuple[float, ...]:
    """The previous ``weight_statistics`` (before the one-pass moments), verbatim but for ``sums``: the
    sum and sum of squares of the weights, numpy's by default (as the previous code made them)."""
    ess = mx = top = math.nan
    flat = (w.reshape(-1) if all_valid else w[valid]) if w.ndim == 2 else w
    if flat.size:
        s, s2 = sums(flat)
        ess = float(s * s / s2) if s2 > 0 else 0.0
        mx = float(flat.max())
        k = max(1, math.ceil(0.01 * flat.size))
        n_pos = int(np.count_nonzero(flat > 0)) if s > 0 else 0
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
    elif all_valid and flat.size and flat.min() >= 0:
        zero = float(np.mean(w @ np.ones(w.shape[1]) == 0))
    else:
        zero = float(np.mean((w.sum(axis=1) if all_valid else np.where(valid, w, 0.0).sum(axis=1)) == 0))
    return ess, mx, top, zero


@pytest.mark.parametrize("kind", ["slots", "slots_empty", "slots_negative", "list", "sparse"])
def test_weight_statistics_equal_the_previous_implementation(kind: str) -> None:
    rng = np.random.default_rng(len(kind))
    n, k = 60_000, 10  # 600,000 slot weights: the large-input path of the top-1% sum
    w = rng.lognormal(0.0, 1.5, (n, k))
    valid = np.ones((n, k), dtype=bool)
    if kind == "slots_empty":
        valid[:, 7:] = rng.random((n, 1)) < 0.5
        w = np.where(valid, w, 0.0)
    elif kind == "slots_negative":
        w -= 1.0
    elif kind == "sparse":  # a deterministic target: most slot weights 0
        w[rng.random((n, k)) < 0.995] = 0.0
    elif kind == "list":
        w = w[:, 0].copy()
    all_valid = bool(valid.all())
    got = weight_statistics(w, valid, all_valid)
    # the previous code with the sums in the order _moments documents: the same bits on any numpy
    assert all(same_bits(a, b) for a, b in zip(got, old_weight_statistics(w, valid, all_valid, moments_sums)))
    if WHOLE_ARRAY_PAIRWISE:  # from numpy 2.3 on, _moments' sums are numpy's: the previous code verbatim
        assert all(same_bits(a, b) for a, b in zip(got, old_weight_statistics(w, valid, all_valid)))


# ------------------------------------------------------------------------------ deterministic targets
def old_propensities(target: DeterministicTarget, query: np.ndarray, rankings: np.ndarray) -> Propensities:
    """The previous ``DeterministicTarget.propensities``, verbatim."""
    r = np.asarray(rankings, dtype=np.int64)
    t = target.rankings(query)
    k = r.shape[1]
    if t.shape[1] < k:
        t = np.concatenate([t, np.full((t.shape[0], k - t.shape[1]), -1, dtype=np.int64)], axis=1)
    same = t[:, :k] == r
    item = same.astype(np.float64)
    run = same.copy()
    for j in range(1, k):
        run[:, j] &= run[:, j - 1]
    prefix = run.astype(np.float64)
    return Propensities(prefix[:, -1].copy(), prefix, item)


class Wrapped:
    """A target that is not a :class:`DeterministicTarget` (the generic float path) with its propensities."""

    def __init__(self, inner: DeterministicTarget) -> None:
        self.inner, self.name = inner, inner.name

    def propensities(self, query: np.ndarray, rankings: np.ndarray) -> Propensities:
        return self.inner.propensities(query, rankings)

    def rankings(self, query: np.ndarray) -> np.ndarray:
        return self.inner.rankings(query)


def big_log(seed: int, n: int, k: int = 4, m: int = 6, n_q: int = 40) -> tuple[LoggedData, list[DeterministicTarget]]:
    """A log over several blocks: mostly a production list, else a random one; some queries with
    fewer than ``k`` candidates (empty trailing slots); exact propensities are not needed here."""
    rng = np.random.default_rng(seed)
    prod = np.argsort(rng.random((n_q, m)), axis=1)[:, :k]
    q = rng.integers(0, n_q, n)
    shown = prod[q].copy()
    rand = rng.random(n) < 0.5
    shown[rand] = np.argsort(rng.random((int(rand.sum()), m)), axis=1)[:, :k]
    short = q % 5 == 0
    shown[short, k - 1] = -1
    clicks = (rng.random(shown.shape) < 0.3) & (shown >= 0)
    p = rng.uniform(0.05, 1.0, (n, k))
    log = LoggedData(q, shown, clicks, p_list=p[:, 0], p_prefix=p, p_item=p[:, ::-1], user=rng.integers(0, n // 3, n))
    swapped = prod.copy()
    swapped[::2, [0, 1]] = swapped[::2, [1, 0]]
    return log, [DeterministicTarget(prod, "prod"), DeterministicTarget(swapped, "swapped"),
                 DeterministicTarget(prod[:, : k - 1], "short")]  # a target with fewer slots than the log


def test_deterministic_propensities_equal_the_previous_implementation() -> None:
    log, targets = big_log(2, 3 * block_rows(4) + 11)
    for target in targets:
        new, old = target.propensities(log.query, log.shown), old_propensities(target, log.query, log.shown)
        for a, b in zip((new.list, new.prefix, new.item), (old.list, old.prefix, old.item)):
            assert a.dtype == np.float64 and same_bits(a, b)
        same, run = target.indicators(log.query, log.shown)
        assert np.array_equal(same, old.item == 1.0) and np.array_equal(run, old.prefix == 1.0)
        # one query against many lists: numpy's broadcasting, as before
        one = target.propensities(log.query[:1], log.shown[:7])
        assert same_bits(one.prefix, old_propensities(target, log.query[:1], log.shown[:7]).prefix)
    with pytest.raises(InputError, match="query index outside"):
        targets[0].propensities(np.array([0, 40]), log.shown[:2])


@pytest.mark.parametrize("reward", ["clicks_per_query", "reciprocal_rank", "abandonment"])
def test_log_weights_of_a_deterministic_target_equal_the_generic_path(reward: str) -> None:
    """The booleans of a DeterministicTarget give the weights, terms and diagnostics of the same
    target's float propensities (the generic path any other target takes), bit for bit."""
    log, targets = big_log(3, 2 * block_rows(4) + 5)
    generic, _ = big_log(3, 2 * block_rows(4) + 5)
    for target in targets:
        wrapped = Wrapped(target)
        for level in ("list", "item", "prefix", "list_slots", "prefix_carried"):
            assert same_bits(log.importance_weights(target, level), generic.importance_weights(wrapped, level))
        for name, opts in (("ips", {}), ("iips", {}), ("rips", {}), ("snrips", {}),
                           ("adaptive_ips", {"behaviours": "cascade"})):
            est = get_estimator(name, **opts)
            if get_reward(reward, log.k).kind not in est.rewards:
                continue
            a, b = est.estimate(log, target, reward), est.estimate(generic, wrapped, reward)
            assert all(same_bits(getattr(a, f), getattr(b, f)) for f in ("value", "se", "ci_low", "ci_high")), name
            assert all(same_bits(getattr(a.diagnostics, f), getattr(b.diagnostics, f))
                       for f in ("ess", "max_weight", "top1_share", "zero_weight_share")), name


def test_first_click_slot_equals_the_previous_formula() -> None:
    log, _ = big_log(4, 2 * block_rows(4) + 3)
    c = log.clicks
    assert np.array_equal(_first_click_slot(log), np.where(c.any(axis=1), c.argmax(axis=1), log.k - 1))


# ------------------------------------------------------------------------------ pseudoinverse
def uniform_logger_log(seed: int, n: int, k: int = 3, m: int = 5, n_q: int = 30) -> tuple[LoggedData, object]:
    """Uniformly random ordered k-subsets (exact pair marginals) over several blocks of rows."""
    from onlineeval.estimators.checks import uniform_policy

    rng = np.random.default_rng(seed)
    pol = uniform_policy(n_q, m, k)
    q = rng.integers(0, n_q, n)
    shown = pol.sample(q, rng)
    clicks = rng.random(shown.shape) < 0.3
    p = pol.propensities(q, shown)
    log = LoggedData(q, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item, logger=pol)
    target = DeterministicTarget(np.argsort(rng.random((n_q, m)), axis=1)[:, :k], "t")
    return log, target


def old_pi_gather(log: LoggedData, target: object, rcond: float = 1e-10) -> np.ndarray:
    """The previous per-impression gather of the pseudoinverse (one (n, k) index array, take, sum),
    from the per-query weights the estimator keeps for its (logger, target) pair."""
    k = log.k
    uq, inv = log.query_groups
    cache = _cache_for(log.logger, target)
    hits = [cache[(int(q), k, rcond)] for q in uq]
    width = max(h[0].shape[1] for h in hits)
    table = np.zeros((uq.size, k, width + 1))
    for u, h in enumerate(hits):
        table[u, :, : h[0].shape[1]] = h[0]
    shown = log.shown
    idx = np.where(shown >= 0, shown, width) if not log.all_valid else shown.copy()
    idx += (inv * (k * (width + 1)))[:, None]
    idx += np.arange(0, k * (width + 1), width + 1)[None, :]
    return table.reshape(-1).take(idx).sum(axis=1)


def test_pseudoinverse_gather_equals_the_previous_implementation() -> None:
    n = 3 * block_rows(3) + 17
    log, target = uniform_logger_log(5, n)
    t = get_estimator("pseudoinverse").terms(log, target, "clicks_per_query")
    old = old_pi_gather(log, target)
    assert same_bits(t.weights, old) and same_bits(t.num, old * log.list_rewards(get_reward("clicks_per_query", 3)))
    # empty slots: the short lists' last slot reads the zero column
    shown = log.shown.copy()
    shown[::3, -1] = -1
    short = LoggedData(log.query, shown, log.clicks & (shown >= 0), p_list=log.p_list, p_prefix=log.p_prefix,
                       p_item=log.p_item, logger=log.logger)
    t = get_estimator("pseudoinverse").terms(short, target, "clicks_per_query")
    assert not short.all_valid and same_bits(t.weights, old_pi_gather(short, target))


def test_pseudoinverse_names_the_first_document_outside_the_candidates() -> None:
    n = 2 * block_rows(3) + 9
    log, target = uniform_logger_log(6, n)
    shown = log.shown.copy()
    shown[n - 3, 2] = 7  # in the last block, and a later one
    shown[n - 1, 0] = 9
    bad = LoggedData(log.query, shown, log.clicks, logger=log.logger)
    with pytest.raises(InputError, match=f"impression {n - 3} shows document 7 at slot 2, outside the logger's 5 "
                                         f"candidates of query {int(log.query[n - 3])}"):
        get_estimator("pseudoinverse").terms(bad, target, "clicks_per_query")
