"""What every position-bias estimator shares: the result record, row grouping, the
(query, document, slot) cells of a log, and the identification checks."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators.base import LoggedData
from onlineeval.rows import distinct_rows

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: ``fn(g) -> (n,)``: the influence terms of a scale-free function of the examination
Linearisation = Callable[[FloatArray], FloatArray]

_LOG_CACHES: weakref.WeakKeyDictionary[LoggedData, dict[str, Any]] = weakref.WeakKeyDictionary()


def log_cache(data: LoggedData, section: str) -> dict[str, Any]:
    """A per-log dictionary for derived arrays (``section`` names the user), held outside
    the log object (so a pickled log carries none of it) and dropped with the log."""
    return _LOG_CACHES.setdefault(data, {}).setdefault(section, {})


@dataclass(frozen=True)
class PositionBiasEstimate:
    r"""Estimated relative examination probabilities and what they rest on.

    Attributes
    ----------
    examination:
        ``(k,)`` :math:`\hat\theta_j / \hat\theta_0` (so ``examination[0] == 1``).
    method:
        ``swap``, ``randtop``, ``harvest`` or ``em``.
    n_interventions:
        swap: pairs of lists that differ by one swap; randtop: queries shown in at least
        two orders; harvest and em: (query, document) pairs shown at two or more slots.
    n_impressions:
        Impressions the estimate used.
    clicks_used:
        ``(k,)`` clicks per slot the estimate used (the evidence behind each entry).
    iterations, converged, log_likelihood:
        EM methods only (``None`` otherwise): iterations run, whether the relative change
        of the log-likelihood fell below the tolerance, and the final log-likelihood.
    relevance:
        ``em`` only: ``"pair"`` (one relevance per (query, document)) or ``"features"``
        (a logistic regression on the log's features); ``None`` otherwise.
    coefficients:
        ``"features"`` only: the fitted regression coefficients :math:`\hat\beta`.
    linearisation:
        ``fn(g) -> (n,)`` (``None`` when not computed): for the gradient ``g`` (``(k,)``)
        of a smooth function :math:`f` of the examination that depends on its ratios only,
        the per-impression influence terms :math:`\psi_i = g^\top \mathrm{IF}_i` of the
        estimate, so that :math:`f(\hat\theta) - f(\theta) \approx \frac1n\sum_i\psi_i`
        (mean 0; see :mod:`onlineeval.estimators.position_bias.influence`).
    """

    examination: FloatArray
    method: str
    n_interventions: int
    n_impressions: int
    clicks_used: FloatArray
    iterations: int | None = None
    converged: bool | None = None
    log_likelihood: float | None = None
    relevance: str | None = None
    coefficients: FloatArray | None = None
    linearisation: Linearisation | None = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the linearisation (a closure over the log's arrays)."""
        return {**self.__dict__, "linearisation": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "examination": [float(x) for x in self.examination],
            "method": self.method,
            "n_interventions": self.n_interventions,
            "n_impressions": self.n_impressions,
            "clicks_used": [float(x) for x in self.clicks_used],
            "iterations": self.iterations,
            "converged": self.converged,
            "log_likelihood": self.log_likelihood,
        }
        if self.relevance is not None:
            out["relevance"] = self.relevance
        if self.coefficients is not None:
            out["coefficients"] = [float(x) for x in self.coefficients]
        return out


# ------------------------------------------------------------------------------ helpers
def _groups(keys: NDArray[Any]) -> tuple[NDArray[Any], IntArray]:
    """Distinct rows of a 2-d integer key matrix (as int64, in the rows' lexicographic order) and the group index of
    every row (:func:`onlineeval.rows.distinct_rows`)."""
    keys = np.asarray(keys, dtype=np.int64)
    first, code = distinct_rows(keys)
    return keys[first], code


def _finish(num: FloatArray, den: FloatArray, method: str, what: str, source: str | None) -> FloatArray:
    """``num / den`` normalised to slot 0, with an error naming slots without evidence."""
    missing = [j for j in range(num.size) if not (den[j] > 0 and num[0] > 0)]
    if missing:
        raise InputError(
            f"position bias ({method}): no {what} for slot(s) {', '.join(str(j + 1) for j in missing)} "
            "(1-based); the examination there is not identified from this log",
            source,
        )
    theta = (num / den) / (num[0] / den[0])
    theta[0] = 1.0
    return theta


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise ConfigError((name,), f"must be a positive integer, got {value!r}")
    return int(value)


# --------------------------------------------------------------- pairs at several slots
def _pair_positions(data: LoggedData) -> tuple[IntArray, IntArray, IntArray, int]:
    """Valid slots flattened: (pair index, slot, impression row, number of pairs), pairs
    coded in (query, document) order; computed once per log (cached).

    When the (distinct query, document) range is small the code is the raw
    ``query_index * span + document`` (no sort; codes no position uses stay empty, and
    every count over them is 0), else the rank of the pair among the log's pairs."""
    cache = log_cache(data, "position_bias")
    if "pairs" not in cache:
        n, k = data.shown.shape
        all_valid = bool((data.shown >= 0).all())
        if all_valid:
            rows = np.repeat(np.arange(n, dtype=np.int64), k)
            slots = np.tile(np.arange(k, dtype=np.int64), n)
            docs = data.shown.reshape(-1)
        else:
            rows, slots = (x.astype(np.int64) for x in np.nonzero(data.valid))
            docs = data.shown[rows, slots]
        uq, qinv = data.query_groups
        lo = int(docs.min()) if docs.size else 0
        span = int(docs.max()) - lo + 1 if docs.size else 1
        if uq.size * span <= max(docs.size // 2, 1 << 22):
            base = np.arange(uq.size, dtype=np.int64) * span - lo
            pair = (base[qinv][:, None] + data.shown).reshape(-1) if all_valid else base[qinv[rows]] + docs
            m = int(uq.size * span)
        else:
            _, pair = _groups(np.stack([qinv[rows], docs], axis=1))
            m = int(pair.max()) + 1 if pair.size else 0
        cache["pairs"] = (pair, slots, rows, m)
    return cache["pairs"]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Cells:
    """A log aggregated by distinct (pair, slot): the sufficient statistics of PBM EM.

    ``pair``, ``slot``: ``(c,)`` the cells; ``views``, ``clicks``: impressions and clicks
    of each; ``position_code``, ``rank``: the ``(v,)`` code of every flattened position the
    cells were built from and the ``(codes,)`` cell of each code (``None`` when not kept),
    so that :attr:`of_position` maps per-cell quantities back to impressions."""

    pair: IntArray
    slot: IntArray
    views: FloatArray
    clicks: FloatArray
    position_code: IntArray | None = field(default=None, repr=False)
    rank: IntArray | None = field(default=None, repr=False)

    @functools.cached_property
    def of_position(self) -> IntArray:
        """``(v,)`` the cell of every flattened position (computed when first asked)."""
        if self.position_code is None or self.rank is None:
            raise ValueError("these cells keep no positions")
        return self.rank[self.position_code]


def _cells(pair: IntArray, slot: IntArray, clicked: NDArray[Any], k: int) -> Cells:
    """Aggregate flattened positions (pair, slot, clicked) into distinct (pair, slot) cells
    (in code order). A dense code range is counted directly (no sort, no per-position
    ranking)."""
    code = pair * k + slot
    n_codes = (int(pair.max()) + 1) * k if pair.size else 0
    hit = np.asarray(clicked, dtype=bool)
    if n_codes <= max(4 * code.size, 1 << 22):
        views_all = np.bincount(code, minlength=n_codes)
        present = views_all > 0
        codes = np.flatnonzero(present)
        views = views_all[codes].astype(np.float64)
        clicks = np.bincount(code[hit], minlength=n_codes)[codes].astype(np.float64)
        return Cells(codes // k, codes % k, views, clicks, code, np.cumsum(present) - 1)
    codes, inv = np.unique(code, return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    views = np.bincount(inv, minlength=codes.size).astype(np.float64)
    clicks = np.bincount(inv[hit], minlength=codes.size).astype(np.float64)
    return Cells(codes // k, codes % k, views, clicks, inv, np.arange(codes.size, dtype=np.int64))


class LazyLinearisation:
    """A linearisation built when first called (the estimate of a log may never need it)."""

    def __init__(self, build: Callable[[], Linearisation]) -> None:
        self._build: Callable[[], Linearisation] | None = build
        self._fn: Linearisation | None = None

    def __call__(self, grad: FloatArray) -> FloatArray:
        if self._fn is None:
            assert self._build is not None
            self._fn, self._build = self._build(), None
        return self._fn(grad)


def _connected(k: int, pair: IntArray, slot: IntArray, multi: NDArray[np.bool_]) -> list[int]:
    """Slots not linked to slot 0 through pairs seen at several slots (1-based)."""
    sel = multi[pair]
    p, s = pair[sel], slot[sel]
    first = np.full(int(multi.size), k, dtype=np.int64)
    np.minimum.at(first, p, s)
    edges, _ = _groups(np.stack([first[p], s], axis=1))
    parent = list(range(k))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:  # at most k * k distinct edges
        ra, rb = root(int(a)), root(int(b))
        if ra != rb:
            parent[rb] = ra
    return [j + 1 for j in range(k) if root(j) != root(0)]


def _multi_slot_pairs(pair: IntArray, slot: IntArray, n_pairs: int, k: int) -> NDArray[np.bool_]:
    """``(n_pairs,)`` whether each pair occurs at two or more distinct slots (``pair``,
    ``slot`` may be positions or distinct cells)."""
    first = np.full(n_pairs, k, dtype=np.int64)
    last = np.full(n_pairs, -1, dtype=np.int64)
    np.minimum.at(first, pair, slot)
    np.maximum.at(last, pair, slot)
    return last > first


def _require_identified(method: str, k: int, pair: IntArray, slot: IntArray, multi: NDArray[np.bool_],
                        source: str | None, hint: str) -> None:
    if not multi.any():
        raise InputError(
            f"position bias ({method}): no (query, document) pair was shown at two different slots, so the "
            f"examination probabilities are not identified from this log ({hint})",
            source,
        )
    cut = _connected(k, pair, slot, multi)
    if cut:
        raise InputError(
            f"position bias ({method}): slot(s) {', '.join(map(str, cut))} (1-based) are not linked to slot 1 "
            f"by any (query, document) pair shown at several slots ({hint})",
            source,
        )
