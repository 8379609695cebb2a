r"""Click-model fits for the model-based estimators, from counts aggregated over the log.

The direct method and the doubly robust estimators (:mod:`~onlineeval.estimators.dm`,
:mod:`~onlineeval.estimators.dr`, :mod:`~onlineeval.estimators.cascade_dr`) fit a click
model on the log. :mod:`clickmodels.estimation` fits from a :class:`clickmodels.logs.ClickLog`
and runs every EM iteration over every slot of every (distinct) session. Here the log is
aggregated once into its *sufficient statistics* and the fit runs on those:

==========  =====================================================  =========================
model       sufficient statistics                                  fit
==========  =====================================================  =========================
``pbm``     shows :math:`N` and clicks :math:`C` per (pair, rank)   EM, O(cells) per iteration
``ubm``     :math:`N, C` per (pair, rank, rank of the click above)  EM, O(cells) per iteration
``cm``      shows and clicks per pair down to the first click      closed form
``dcm``     the same down to the last click; clicks and last       closed form (on request)
            clicks per rank
``dctr``    shows and clicks per pair                              closed form
``rctr``    shows and clicks per rank                              closed form
``gctr``    shown slots and clicks                                 closed form
==========  =====================================================  =========================

(a *pair* is a (query, document) pair of the log; *cells* are the distinct keys with at
least one show). The E-step of the examination hypothesis (PBM, UBM) depends on a slot
only through its pair, its examination index (rank; rank and previous click) and its
click, so summing the posteriors of a cell's :math:`C` clicked and :math:`N - C` skipped
slots gives exactly the per-slot sums of :mod:`clickmodels.estimation` (and the same
log-likelihood, :math:`\sum C\log p + (N - C)\log(1-p)`): the same iterations, the same
stopping rule (:func:`clickmodels.estimation._em.run_em`), the same parameters up to
floating-point summation order. The closed forms are the same ratios of the same counts.

Cost: one O(n k) pass to index the pairs and count (no sort when the (query, document)
grid is small enough for a lookup table, else one sort of the slot keys), then O(cells)
per EM iteration, against O(n k) per iteration before. A PBM / UBM iteration runs one
compiled pass over the cells (numba, loaded at the first compiled fit, not with the package;
:data:`COMPILED`) and NumPy's ``log``, ``log1p`` and ``einsum`` for the log-likelihood: the
same numbers as the NumPy step to the bit (parameters, log-likelihoods, iterations). On one
replicate's log of ``configs/counterfactual.yaml`` (27,848 impressions, k = 5, 11,673 pairs,
20,206 listed (pair, rank) cells) a PBM iteration took 168 us against 482 us with the NumPy
step and the fit with pseudo-count 0 (316 iterations) 53 ms against 152 ms; UBM (29,957
cells, 406 iterations) 272 against 766 us per iteration; on the dense grid of
``benchmarks/bench_dm.py`` (200,000 cells) 2.2 against 4.0 ms (CPU time, best of 7, a
2-core machine under load 6-7). About half of the compiled iteration is NumPy's
log-likelihood, kept for its bits; the pass itself is bound by the per-cell division and the
in-order sums. Loading numba and the cached kernel costs about 0.5-2 s once per process, so
by default small one-off fits stay on the NumPy step (:data:`COMPILE_AFTER`). The fitted model is returned as
the :class:`clickmodels.ClickModel` that :func:`clickmodels.estimation.fit` would return
(same class, same parameter tables, same default for unseen pairs); DCM and SDBN by EM, DBN
and CCM (whose E-steps depend on whole sessions) are fitted by
:mod:`clickmodels.estimation` as before. DCM's closed form here is the last-click approximation,
not the maximum likelihood and biased on data from DCM itself; the estimators use it only with
``method="closed_form"`` and fit DCM by EM by default (review 15, F5: the direct method's clicks
per query 0.18 low, 190 SE, on the DCM check world; ``tests/test_dm_dcm_world.py``).

The per-log pair index, counts and fits are kept in the log's cache
(:meth:`~onlineeval.estimators.base.LoggedData.cached`: one fit per log and options,
shared by every target and estimator of the log).
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onlineeval.errors import InputError
from onlineeval.estimators.base import FloatArray, IntArray, LoggedData, Reward

__all__ = ["FAST_MODELS", "AggregatedFit", "PairIndex", "aggregated_fit", "check_fittable", "logged_probabilities",
           "pair_index"]

#: models fitted here from aggregated counts (the rest by :mod:`clickmodels.estimation`)
FAST_MODELS: tuple[str, ...] = ("pbm", "ubm", "cm", "dcm", "dctr", "rctr", "gctr")
#: closed-form models among them (EM options do not apply)
_CLOSED_FORM = ("cm", "dcm", "dctr", "rctr", "gctr")
#: the largest (distinct queries x document id range) grid indexed by a lookup table
_DENSE_LIMIT = 1 << 24
#: PBM and UBM's EM step: True: compiled (:func:`_compiled_sparse_step`, :func:`_compiled_dense_step`); False:
#: NumPy (:func:`_sparse_step`, :func:`_dense_step`: the reference the tests compare with; the same numbers to the
#: bit); None (default): NumPy until the process has done :data:`COMPILE_AFTER` cell-iterations of it or has
#: numba loaded, then compiled, switching within a fit if need be (see :func:`_chosen_step`)
COMPILED: bool | None = None
#: cell-iterations of NumPy EM steps (about a second of them) after which ``COMPILED=None`` switches to the
#: compiled step: loading numba and the kernel costs about 0.5-1 s once per process (measured: import 0.25-0.4 s,
#: the first call of the cached kernel 0.4-2 s on a busy 2-core machine), more than a small fit's whole EM
COMPILE_AFTER = 40_000_000
_numpy_work = 0  # cell-iterations of NumPy steps run by this process (approximate under threads: a heuristic)


@dataclass(frozen=True, eq=False)
class PairIndex:
    """The (query, document) pairs of a log.

    Attributes
    ----------
    qi, doc:
        ``(m,)`` each pair's query (index into ``uq``) and document id, sorted by (query, document).
    width:
        One more than the largest document id of the log (pair keys are ``qi * width + doc``).
    code:
        ``(n, k)`` pair code of every slot (``-1``: empty).
    shows:
        ``(m,)`` slots showing each pair.
    uq, qinv, n_q:
        Distinct queries (sorted), each impression's index among them, impressions per query.
    all_valid:
        Whether every slot of the log shows a document.
    """

    qi: IntArray
    doc: IntArray
    width: int
    code: IntArray
    shows: IntArray
    uq: IntArray
    qinv: IntArray
    n_q: IntArray
    all_valid: bool

    @property
    def n_pairs(self) -> int:
        return int(self.qi.shape[0])

    @property
    def query(self) -> IntArray:
        """``(m,)`` each pair's query id."""
        return self.uq[self.qi]

    def lookup(self, qi: IntArray, docs: IntArray) -> IntArray:
        """Pair codes of ``docs`` ``(r, k)`` for the query indices ``qi`` ``(r,)`` (``-1``:
        empty, or a pair the log never shows)."""
        d = np.asarray(docs, dtype=np.int64)
        keys = self.qi * self.width + self.doc
        inside = (d >= 0) & (d < self.width)
        want = np.asarray(qi, dtype=np.int64)[:, None] * self.width + np.where(inside, d, 0)
        if keys.size == 0:
            return np.full(d.shape, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
        return np.where(inside & (keys[pos] == want), pos, -1)


def pair_keys(query: IntArray, doc: IntArray) -> IntArray:
    """``query << 32 | doc`` for ids in ``[0, 2**31)``: sorted like (query, doc)."""
    return (np.asarray(query, dtype=np.int64) << 32) | np.asarray(doc, dtype=np.int64)


def check_fittable(data: LoggedData) -> None:
    """Raise :class:`InputError` on what :func:`clickmodels.logs.from_arrays` and
    :class:`clickmodels.logs.ClickLog` refuse: query ids below 0, document ids below ``-1``,
    ids from ``2**31``, an empty slot above a shown one."""
    idx = pair_index(data)
    if idx.uq[0] < 0 or idx.uq[-1] >= 2**31 or idx.width > 2**31:
        raise InputError("a fitted click model needs query ids in 0 .. 2**31 - 1 and document ids below 2**31",
                         data.source)
    if not idx.all_valid:
        shown = data.shown
        if shown.min() < -1:
            raise InputError("model-based estimators need document ids >= -1 (-1: empty slot)", data.source)
        valid = shown >= 0
        if shown.shape[1] > 1 and np.any(~valid[:, :-1] & valid[:, 1:]):
            raise InputError("empty slots must be at the end of a result list", data.source)


def pair_index(data: LoggedData) -> PairIndex:
    """The pair index of ``data`` (computed once per log; see :class:`PairIndex`).

    One O(n k) pass: a lookup table over the (distinct query, document id) grid when it
    has at most ``max(n k, 2**24)`` cells, else one sort of the slot keys.
    """
    return data.cached(("model_fit", "pair_index"), lambda: _build_index(data))  # type: ignore[no-any-return]


def _build_index(data: LoggedData) -> PairIndex:
    shown = data.shown
    valid = shown >= 0
    all_valid = bool(valid.all())
    uq, qinv = data.query_groups
    n_q = np.bincount(qinv, minlength=uq.size)
    width = max(int(shown.max()) + 1, 1)
    if width >= 2**62 // max(uq.size, 1):
        raise InputError(f"document ids up to {width - 1} are too large to index", data.source)
    if uq.size * width <= max(_DENSE_LIMIT, data.n * data.k):
        cell = qinv[:, None] * width + np.maximum(shown, 0)
        counts = np.bincount(cell.ravel() if all_valid else cell[valid], minlength=uq.size * width)
        present = np.flatnonzero(counts)
        lut = np.full(uq.size * width, -1, dtype=np.int64)
        lut[present] = np.arange(present.size)
        code = lut[cell]
        if not all_valid:
            code[~valid] = -1
        shows = counts[present]
    else:  # a large grid: one sort of the slot keys
        keys = qinv[:, None] * width + shown
        present, inv, shows = np.unique(keys[valid], return_inverse=True, return_counts=True)
        code = np.full(shown.shape, -1, dtype=np.int64)
        code[valid] = inv.reshape(-1)
    qi, doc = np.divmod(present, width)
    return PairIndex(qi.astype(np.int64), doc.astype(np.int64), width, code, shows.astype(np.int64), uq,
                     qinv, n_q, all_valid)


@dataclass(frozen=True, eq=False)
class AggregatedFit:
    """A click model fitted from aggregated counts (see the module docstring).

    Attributes
    ----------
    name:
        The model (one of :data:`FAST_MODELS`).
    query, doc:
        ``(m,)`` the training log's pairs (sorted).
    attraction:
        ``(m,)`` per-pair attractiveness (``None`` for ``rctr``, ``gctr``).
    default:
        The value for pairs the training log never shows (the impression-weighted mean,
        as :meth:`clickmodels.estimation.PairTable.from_codes`).
    params:
        The model's other parameters by constructor name (``examination``,
        ``continuation``, ``p``).
    trace:
        The :class:`clickmodels.estimation.FitTrace` (EM: iterations, log-likelihoods).
    """

    name: str
    query: IntArray
    doc: IntArray
    attraction: FloatArray | None
    default: float
    params: dict[str, Any]
    trace: Any

    @functools.cached_property
    def model(self) -> Any:
        """The fitted :class:`clickmodels.ClickModel` (the class and tables
        :func:`clickmodels.estimation.fit` returns for this model name; built once)."""
        from clickmodels.base import ByQueryDoc, model_class

        kwargs = dict(self.params)
        if self.attraction is not None:
            kwargs["attractiveness"] = ByQueryDoc(self.query, self.doc, self.attraction, default=self.default)
        return model_class(self.name)(**kwargs)

    def values_for(self, index: PairIndex) -> FloatArray:
        """``(index.n_pairs,)`` this fit's attractiveness of each pair of ``index`` (the
        default where the training log never showed it)."""
        assert self.attraction is not None  # only called for models with a pair table (not input validation)
        query = index.query
        if (index.n_pairs == self.query.size and np.array_equal(query, self.query)
                and np.array_equal(index.doc, self.doc)):
            return self.attraction
        own = pair_keys(self.query, self.doc)
        want = pair_keys(query, index.doc)
        if own.size == 0:
            return np.full(want.shape, self.default)
        pos = np.minimum(np.searchsorted(own, want), own.size - 1)
        return np.where(own[pos] == want, self.attraction[pos], self.default)


def aggregated_fit(data: LoggedData, name: str, *, pseudo: float, max_iter: int | None = None,
                   tol: float | None = None) -> AggregatedFit:
    """Fit click model ``name`` (one of :data:`FAST_MODELS`) to ``data`` from aggregated
    counts, with the options of :func:`clickmodels.estimation.fit_log` (``max_iter`` and
    ``tol`` for the EM models only). Cached per log and options."""
    if name not in FAST_MODELS:
        raise ValueError(f"no aggregated fit for {name!r}")  # internal: callers check FAST_MODELS
    def compute() -> AggregatedFit:
        idx = pair_index(data)
        if name in ("pbm", "ubm"):
            return _fit_examination_em(data, idx, name, pseudo, max_iter, tol)
        return _fit_closed_form(data, idx, name, pseudo)

    return data.cached(("model_fit", "fit", name, float(pseudo), max_iter, tol), compute)  # type: ignore


def _default(value: FloatArray, count: FloatArray) -> float:
    total = count.sum()
    return float(np.einsum("i,i->", value, count) / total) if total > 0 else 0.5


@dataclass(frozen=True, eq=False)
class Cells:
    """Shows and clicks per (pair, examination index) cell with at least one show.

    ``pair``, ``exam``: ``(c,)`` each cell's pair code and examination index (rank for
    PBM, ``rank * k + previous click + 1`` for UBM), sorted by (pair, index); ``shows``,
    ``clicks``: ``(c,)`` float counts. ``grid``: for the (pair, rank) cells, the same
    counts as dense ``(m, k)`` arrays (shows, clicks) when at least half of that grid has
    shows, else ``None``."""

    pair: IntArray
    exam: IntArray
    shows: FloatArray
    clicks: FloatArray
    grid: tuple[FloatArray, FloatArray] | None = None


def cells(data: LoggedData, kind: str = "rank") -> Cells:
    """The (pair, rank) cells (``kind="rank"``) or the (pair, rank, previous click) cells
    (``"previous_click"``) of ``data``; one O(n k) pass, cached per log."""
    return data.cached(("model_fit", "cells", kind), lambda: _count_cells(data, kind))  # type: ignore


def _count_cells(data: LoggedData, kind: str) -> Cells:
    idx = pair_index(data)
    k, m = data.k, idx.n_pairs
    valid = idx.code >= 0
    if kind == "rank":
        n_exam = k
        cell = idx.code * k + np.arange(k)[None, :]
    else:
        n_exam = k * k
        ranks = np.where(data.clicks, np.arange(k)[None, :], -1)
        prev = np.full(data.shown.shape, -1, dtype=np.int64)
        if k > 1:
            prev[:, 1:] = np.maximum.accumulate(ranks, axis=1)[:, :-1]
        cell = idx.code * n_exam + (np.arange(k)[None, :] * k + prev + 1)
    shown_cells = cell.ravel() if bool(valid.all()) else cell[valid]
    clicked_cells = cell[data.clicks]
    grid = None
    if m * n_exam <= max(_DENSE_LIMIT, 2 * shown_cells.size):
        shows = np.bincount(shown_cells, minlength=m * n_exam)
        clicks = np.bincount(clicked_cells, minlength=m * n_exam)
        nz = np.flatnonzero(shows)
        n_cell, c_cell = shows[nz], clicks[nz]
        if kind == "rank" and 2 * nz.size >= shows.size:
            grid = (shows.reshape(m, n_exam).astype(np.float64), clicks.reshape(m, n_exam).astype(np.float64))
    else:  # a sparse grid: sort the slot keys
        nz, n_cell = np.unique(shown_cells, return_counts=True)
        c_cell = np.bincount(np.searchsorted(nz, clicked_cells), minlength=nz.size)
    pair, exam = np.divmod(nz, n_exam)
    return Cells(pair, exam, n_cell.astype(np.float64), c_cell.astype(np.float64), grid)


def _fit_examination_em(data: LoggedData, idx: PairIndex, name: str, pseudo: float,
                        max_iter: int | None, tol: float | None) -> AggregatedFit:
    r"""PBM / UBM by EM over (pair, examination index) cells.

    Per cell with :math:`C` clicks of :math:`N` shows at :math:`p = \alpha\gamma`, the
    E-step of :func:`clickmodels.estimation._em.examination_posteriors` summed over the
    cell's slots is :math:`C + (N - C)\,(\alpha - p)/(1 - p)` expected attractions and
    :math:`C + (N - C)\,(\gamma - p)/(1 - p)` expected examinations
    (:math:`\alpha(1-\gamma) = \alpha - p`; a cell with :math:`p = 1`, i.e.
    :math:`\alpha = \gamma = 1`, adds :math:`C` to both, as there). Each iteration
    works in preallocated buffers: O(cells) time, no allocation of that size."""
    from clickmodels.estimation._em import run_em
    from clickmodels.estimation.base import EMOptions

    base = EMOptions()
    opt = EMOptions(max_iter=base.max_iter if max_iter is None else max_iter,
                    tol=base.tol if tol is None else tol, pseudo=pseudo)
    k, m = data.k, idx.n_pairs
    n_exam = k if name == "pbm" else k * k
    cl = cells(data, "rank" if name == "pbm" else "previous_click")
    views = np.bincount(cl.pair, cl.shows, minlength=m)
    exam_views = np.bincount(cl.exam, cl.shows, minlength=n_exam)
    ubm_k = k if name == "ubm" else 0
    if name == "pbm" and cl.grid is not None:
        grid = cl.grid
        step = _chosen_step(lambda: _dense_step(grid, views, exam_views, opt.pseudo),
                            lambda: _compiled_dense_step(grid, views, exam_views, opt.pseudo), m * k)
    else:
        step = _chosen_step(lambda: _sparse_step(cl, views, exam_views, opt.pseudo, ubm_k),
                            lambda: _compiled_sparse_step(cl, views, exam_views, opt.pseudo, ubm_k), cl.pair.size)
    init_gamma = np.full(k, 0.5) if name == "pbm" else np.tril(np.full((k, k), 0.5))
    (alpha, gamma), trace = run_em(data.n, opt, (np.full(m, 0.5), init_gamma), step)
    return AggregatedFit(name, idx.query, idx.doc, alpha, _default(alpha, views), {"examination": gamma}, trace)


Step = Callable[[tuple[FloatArray, FloatArray]], tuple[tuple[FloatArray, FloatArray], float]]


def _e_step(p: FloatArray, t: FloatArray, u: FloatArray, c_cell: FloatArray, skip_cell: FloatArray,
            sum_spec: str) -> float:
    """The PBM/UBM E-step in place, shared by :func:`_sparse_step` and :func:`_dense_step`: with
    ``p = alpha gamma`` per cell, returns the log-likelihood (clipped probabilities; sums by
    ``np.einsum(sum_spec)``, not a BLAS dot) and leaves ``t = (N - C) / (1 - p)`` (``u`` is scratch)."""
    from clickmodels.estimation.base import PROB_EPS

    np.clip(p, PROB_EPS, 1.0 - PROB_EPS, out=t)
    np.log(t, out=u)
    ll = float(np.einsum(sum_spec, c_cell, u))
    np.negative(t, out=t)
    np.log1p(t, out=t)
    ll += float(np.einsum(sum_spec, skip_cell, t))
    # (N - C) / (1 - p); p = 1 only where alpha = gamma = 1, where alpha - p = gamma - p = 0
    np.subtract(1.0, p, out=t)
    np.maximum(t, 1e-300, out=t)
    np.divide(skip_cell, t, out=t)
    return ll


def _posterior(x: FloatArray, p: FloatArray, t: FloatArray, c_cell: FloatArray, out: FloatArray) -> None:
    """``out = C + (x - p) (N - C) / (1 - p)``: per cell, the expected number of shows in which the
    factor ``x`` (attractiveness or examination) was 1, given the clicks."""
    np.subtract(x, p, out=out)
    np.multiply(out, t, out=out)
    np.add(out, c_cell, out=out)


def _sparse_step(cl: Cells, views: FloatArray, exam_views: FloatArray, pseudo: float, ubm_k: int) -> Step:
    """One EM iteration over the listed cells (``ubm_k``: UBM's ``k``, its examination a
    lower-triangular ``(k, k)`` table; 0 for PBM)."""
    from clickmodels.estimation.base import smoothed

    m, n_exam = views.size, exam_views.size
    c_cell, skip_cell = cl.clicks, cl.shows - cl.clicks
    a, g, p, t, u = (np.empty(cl.pair.size) for _ in range(5))

    def step(state: tuple[FloatArray, FloatArray]) -> tuple[tuple[FloatArray, FloatArray], float]:
        alpha, gamma = state
        np.take(alpha, cl.pair, out=a)
        np.take(gamma.reshape(-1), cl.exam, out=g)
        np.multiply(a, g, out=p)
        ll = _e_step(p, t, u, c_cell, skip_cell, "i,i->")  # not a BLAS dot (see _dense_step)
        _posterior(a, p, t, c_cell, u)
        new_alpha = smoothed(np.bincount(cl.pair, u, minlength=m), views, pseudo)
        _posterior(g, p, t, c_cell, u)
        new_gamma = smoothed(np.bincount(cl.exam, u, minlength=n_exam), exam_views, pseudo)
        if ubm_k:
            new_gamma = np.tril(new_gamma.reshape(ubm_k, ubm_k))  # unused j > r: 0
        return (new_alpha, new_gamma), ll

    return step


def _dense_step(grid: tuple[FloatArray, FloatArray], views: FloatArray, exam_views: FloatArray,
                pseudo: float) -> Step:
    """One PBM EM iteration over the dense (pair, rank) grid, held rank-major as ``(k, m)``
    arrays (cells without shows add 0 everywhere): broadcasting instead of gathers, sums
    along contiguous axes instead of grouped sums (no BLAS call: a threaded BLAS dot or
    matrix-vector product costs more than the whole iteration on a busy machine)."""
    from clickmodels.estimation.base import smoothed

    shows, c_cell = (np.ascontiguousarray(x.T) for x in grid)
    skip_cell = shows - c_cell
    k, m = shows.shape
    p, t, u = (np.empty((k, m)) for _ in range(3))

    def step(state: tuple[FloatArray, FloatArray]) -> tuple[tuple[FloatArray, FloatArray], float]:
        alpha, gamma = state
        a, g = alpha[None, :], gamma[:, None]
        np.multiply(g, a, out=p)
        ll = _e_step(p, t, u, c_cell, skip_cell, "ij,ij->")
        _posterior(a, p, t, c_cell, u)
        new_alpha = smoothed(u.sum(axis=0), views, pseudo)
        _posterior(g, p, t, c_cell, u)
        new_gamma = smoothed(u.sum(axis=1), exam_views, pseudo)
        return (new_alpha, new_gamma), ll

    return step


def _compile_now() -> bool:
    """``COMPILED=None`` turns to the compiled step: enough NumPy EM work done, or numba already loaded."""
    return _numpy_work >= COMPILE_AFTER or "numba" in sys.modules


def _chosen_step(numpy_step: Callable[[], Step], compiled_step: Callable[[], Step], n_cells: int) -> Step:
    """The EM step :data:`COMPILED` asks for (``numpy_step()`` or ``compiled_step()``, built when first used).

    With ``COMPILED=None`` the NumPy step runs while the process's NumPy EM work is below
    :data:`COMPILE_AFTER` cell-iterations and numba is not loaded (a one-off fit of a small log does not pay
    numba's load), and the compiled step from then on, from the next iteration of a running fit: both return
    the same state and log-likelihood to the bit, so the fit does not depend on where it switched."""
    if COMPILED is not None:
        return compiled_step() if COMPILED else numpy_step()
    if _compile_now():
        return compiled_step()
    current, compiled = numpy_step(), False

    def step(state: tuple[FloatArray, FloatArray]) -> tuple[tuple[FloatArray, FloatArray], float]:
        global _numpy_work
        nonlocal current, compiled
        if not compiled and _compile_now():
            current, compiled = compiled_step(), True
        if not compiled:
            _numpy_work += n_cells
        return current(state)

    return step


def _compiled_sparse_step(cl: Cells, views: FloatArray, exam_views: FloatArray, pseudo: float, ubm_k: int) -> Step:
    """:func:`_sparse_step` with the per-cell work in one compiled pass (:func:`_sparse_em_pass`): the same
    numbers. The pass leaves the clipped probabilities for the log-likelihood, whose logarithms and sums stay
    NumPy's (``np.log``, ``np.log1p`` and ``np.einsum`` on the same arrays as :func:`_e_step`: the same bits,
    and NumPy's vectorised logarithms cost a fifth of scalar ``log`` / ``log1p`` calls in the pass)."""
    from clickmodels.estimation.base import PROB_EPS

    sparse_pass, _ = _kernels()
    m, n_exam = views.size, exam_views.size
    pair, exam = (np.ascontiguousarray(x, dtype=np.int64) for x in (cl.pair, cl.exam))
    c_cell, skip_cell = np.ascontiguousarray(cl.clicks), cl.shows - cl.clicks
    lo, hi, pseudo = float(PROB_EPS), 1.0 - PROB_EPS, float(pseudo)
    q, nq = np.empty(cl.pair.size), np.empty(cl.pair.size)

    def step(state: tuple[FloatArray, FloatArray]) -> tuple[tuple[FloatArray, FloatArray], float]:
        alpha, gamma = state
        new_alpha, new_gamma = np.empty(m), np.empty(n_exam)
        sparse_pass(pair, exam, c_cell, skip_cell, views, exam_views, pseudo, lo, hi, ubm_k,
                    alpha, gamma.reshape(-1), new_alpha, new_gamma, q, nq)
        ll = float(np.einsum("i,i->", c_cell, np.log(q, out=q)))
        ll += float(np.einsum("i,i->", skip_cell, np.log1p(nq, out=nq)))
        return (new_alpha, new_gamma.reshape(ubm_k, ubm_k) if ubm_k else new_gamma), ll

    return step


def _compiled_dense_step(grid: tuple[FloatArray, FloatArray], views: FloatArray, exam_views: FloatArray,
                         pseudo: float) -> Step:
    """:func:`_dense_step` with the per-cell work in one compiled pass (:func:`_dense_em_pass`): the same
    numbers. The per-rank sums over the pairs stay NumPy's (``sum(axis=1)``, pairwise), as do the
    log-likelihood's logarithms and sums (see :func:`_compiled_sparse_step`)."""
    from clickmodels.estimation.base import PROB_EPS, smoothed

    _, dense_pass = _kernels()
    shows, c_cell = (np.ascontiguousarray(x.T) for x in grid)
    skip_cell = shows - c_cell
    k, m = shows.shape
    lo, hi, pseudo = float(PROB_EPS), 1.0 - PROB_EPS, float(pseudo)
    q, nq, u = (np.empty((k, m)) for _ in range(3))

    def step(state: tuple[FloatArray, FloatArray]) -> tuple[tuple[FloatArray, FloatArray], float]:
        alpha, gamma = state
        new_alpha = np.empty(m)
        dense_pass(c_cell, skip_cell, views, pseudo, lo, hi, alpha, gamma, new_alpha, q, nq, u)
        ll = float(np.einsum("ij,ij->", c_cell, np.log(q, out=q)))
        ll += float(np.einsum("ij,ij->", skip_cell, np.log1p(nq, out=nq)))
        return (new_alpha, smoothed(u.sum(axis=1), exam_views, pseudo)), ll

    return step


def _sparse_em_pass(pair, exam, c_cell, skip_cell, views, exam_views, pseudo, lo, hi, ubm_k,  # type: ignore
                    alpha, gamma, new_alpha, new_gamma, q, nq):
    """One EM iteration over the listed cells, compiled by :func:`_kernels`: the arithmetic of
    :func:`_sparse_step` cell by cell, in its order. Fills ``new_alpha``, ``new_gamma`` (flat) with the
    M-step's parameters (per-pair and per-index sums of the posteriors in cell order, as ``np.bincount``;
    :func:`clickmodels.estimation.base.smoothed`; UBM's unused entries above the diagonal 0) and ``q``,
    ``nq`` with each cell's clipped click probability and its negative (for the log-likelihood)."""
    new_alpha[:] = 0.0
    new_gamma[:] = 0.0
    for i in range(pair.size):
        j, e = pair[i], exam[i]
        a, g = alpha[j], gamma[e]
        p = a * g
        t = p if p > lo else lo  # np.clip(p, lo, hi)
        t = t if t < hi else hi
        q[i] = t
        nq[i] = -t
        s = 1.0 - p  # (N - C) / (1 - p) as _e_step: p = 1 only where alpha = gamma = 1 (a - p = g - p = 0)
        s = skip_cell[i] / (s if s > 1e-300 else 1e-300)
        c = c_cell[i]
        new_alpha[j] += (a - p) * s + c
        new_gamma[e] += (g - p) * s + c
    for j in range(new_alpha.size):  # smoothed(num, den, pseudo): (num + a) / (den + 2a), 0.5 where den + 2a = 0
        total = views[j] + 2.0 * pseudo
        v = (new_alpha[j] + pseudo) / total if total > 0.0 else 0.5
        new_alpha[j] = 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)
    for e in range(new_gamma.size):
        total = exam_views[e] + 2.0 * pseudo
        v = (new_gamma[e] + pseudo) / total if total > 0.0 else 0.5
        new_gamma[e] = 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)
        if ubm_k and e % ubm_k > e // ubm_k:  # np.tril: previous click j > rank r never happens
            new_gamma[e] = 0.0


def _dense_em_pass(c_cell, skip_cell, views, pseudo, lo, hi, alpha, gamma, new_alpha, q, nq, u):  # type: ignore
    """One PBM EM iteration over the rank-major ``(k, m)`` grid, compiled by :func:`_kernels`: the arithmetic
    of :func:`_dense_step` cell by cell. Fills ``new_alpha`` (sums over the ranks in rank order, as
    ``sum(axis=0)``; smoothed), ``u`` with the examination posteriors and ``q``, ``nq`` as
    :func:`_sparse_em_pass`."""
    k, m = c_cell.shape
    new_alpha[:] = 0.0
    for r in range(k):
        g = gamma[r]
        for j in range(m):
            a = alpha[j]
            p = g * a
            t = p if p > lo else lo
            t = t if t < hi else hi
            q[r, j] = t
            nq[r, j] = -t
            s = 1.0 - p
            s = skip_cell[r, j] / (s if s > 1e-300 else 1e-300)
            c = c_cell[r, j]
            new_alpha[j] += (a - p) * s + c
            u[r, j] = (g - p) * s + c
    for j in range(m):
        total = views[j] + 2.0 * pseudo
        v = (new_alpha[j] + pseudo) / total if total > 0.0 else 0.5
        new_alpha[j] = 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)


@functools.cache
def _kernels() -> tuple[Callable[..., None], Callable[..., None]]:
    """:func:`_sparse_em_pass` and :func:`_dense_em_pass` compiled by numba, imported here, at the first
    compiled fit (not with :mod:`onlineeval.estimators`): ``njit(cache=True, nogil=True)`` and no fastmath,
    as :mod:`simulations.stat_kernels` (the same bits on every machine; ``NUMBA_DISABLE_JIT=1``: the plain
    Python functions, slow)."""
    import numba

    jit = numba.njit(cache=True, nogil=True)
    return jit(_sparse_em_pass), jit(_dense_em_pass)


def _fit_closed_form(data: LoggedData, idx: PairIndex, name: str, pseudo: float) -> AggregatedFit:
    """CM, DCM, DCTR, RCTR, GCTR: the closed forms of :mod:`clickmodels.estimation`."""
    from clickmodels.estimation.base import FitTrace, smoothed

    trace = FitTrace("closed_form", 0, (), True, data.n, pseudo=float(pseudo))
    k, m = data.k, idx.n_pairs
    valid, clicks = idx.code >= 0, data.clicks
    if name == "gctr":
        p = float(smoothed(float(clicks.sum()), float(valid.sum()), pseudo))
        return AggregatedFit(name, idx.query, idx.doc, None, math.nan, {"p": p}, trace)
    if name == "rctr":
        p = smoothed(clicks.sum(axis=0).astype(np.float64), valid.sum(axis=0).astype(np.float64), pseudo)
        return AggregatedFit(name, idx.query, idx.doc, None, math.nan, {"p": p}, trace)
    if name == "dctr":
        views = idx.shows.astype(np.float64)
        value = smoothed(np.bincount(idx.code[clicks], minlength=m).astype(np.float64), views, pseudo)
        return AggregatedFit(name, idx.query, idx.doc, value, _default(value, views), {}, trace)
    # cm / dcm: every slot down to the first (cm) / last (dcm) click counts as examined
    has = clicks.any(axis=1)
    if name == "cm":
        stop = np.where(has, clicks.argmax(axis=1), k - 1)
    else:
        stop = np.where(has, k - 1 - clicks[:, ::-1].argmax(axis=1), k - 1)
    examined = valid & (np.arange(k)[None, :] <= stop[:, None])
    views = np.bincount(idx.code[examined], minlength=m).astype(np.float64)
    value = smoothed(np.bincount(idx.code[examined & clicks], minlength=m).astype(np.float64), views, pseudo)
    params: dict[str, Any] = {}
    if name == "dcm":
        clicks_r = clicks.sum(axis=0).astype(np.float64)
        last_r = np.bincount(stop[has], minlength=k).astype(np.float64)
        params["continuation"] = smoothed(clicks_r - last_r, clicks_r, pseudo)
    return AggregatedFit(name, idx.query, idx.doc, value, _default(value, views), params, trace)


def logged_probabilities(fit: AggregatedFit, data: LoggedData, rows: IntArray | None,
                         reward: Reward) -> FloatArray | None:
    r"""``(r, k)`` the fitted model's probabilities behind the expected slot rewards of the
    *logged* lists of ``rows`` (all rows for ``None``): the marginal click probability
    (additive rewards) or the click probability given no click above (first click), as
    :func:`~onlineeval.estimators.model_based.expected_slot_rewards` asks the model, computed from
    the pair codes (no table lookups). ``None`` for a model without this shortcut (UBM)."""
    if fit.name == "ubm":
        return None
    from clickmodels import kernels

    idx = pair_index(data)
    code = idx.code if rows is None else idx.code[rows]
    k = data.k
    if fit.name in ("gctr", "rctr"):
        p = np.broadcast_to(np.asarray(fit.params["p"], dtype=np.float64).reshape(-1)[:k], code.shape)
        return p if idx.all_valid else np.where(code >= 0, p, 0.0)
    alpha = np.append(fit.values_for(idx), 0.0)[code]  # code -1 (empty slot): the appended 0
    if fit.name == "dctr":
        return alpha
    if fit.name == "pbm":
        return alpha * np.asarray(fit.params["examination"])[None, :k]
    c1 = np.asarray(0.0) if fit.name == "cm" else np.asarray(fit.params["continuation"])[None, :k]
    if reward.kind == "additive":
        return kernels.chain_examination(alpha, c1, np.asarray(1.0), alpha.shape) * alpha
    return kernels.chain_conditional(alpha, c1, np.asarray(1.0), np.zeros(alpha.shape, dtype=bool))
