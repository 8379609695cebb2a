"""The log of the off-policy estimation contract (:mod:`onlineeval.estimators.base`, which
re-exports it): :class:`LoggedData`, the logged impressions with their logging propensities,
validated once, and the derived arrays (importance weights, slot rewards) it keeps per target."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError, must_be_one_of
from onlineeval.estimators._arrays import (
    BoolArray,
    FloatArray,
    IntArray,
    _carry_last,
    _matrix,
    _readonly_float,
    _unique_inverse,
)
from onlineeval.estimators.derived import LogCache, row_sum, weighted_row_sum
from onlineeval.estimators.rewards import Reward
from onlineeval.estimators.targets import DeterministicTarget, Propensities, PropensityModel, Target


def _propensity(x: Any, name: str, shape: tuple[int, ...]) -> FloatArray | None:
    if x is None:
        return None
    arr = _matrix(x, name, np.float64, shape)
    # two reductions decide the common case (a NaN makes min() NaN, which fails the test)
    if arr.size and not (arr.min() > 0.0 and arr.max() <= 1.0 + 1e-12):
        bad = ~np.isfinite(arr) | (arr <= 0.0) | (arr > 1.0 + 1e-12)
        idx = np.argwhere(bad)[0]
        raise InputError(f"{name}: propensities must be in (0, 1], found {arr[tuple(idx)]!r} at impression "
                         f"{int(idx[0])}")
    return arr


def _check_lists(shown: IntArray, source: str | None) -> None:
    """Refuse a row of ``shown`` that no logger can show: an id below -1, an empty slot (-1) before a shown
    document (empty slots only trail) or a document shown twice, naming the first such impression (0-based, as the
    propensity checks do). The log's readers refuse such lines naming file and line; this is the check of a log
    built by hand (a sort of the rows: about 0.08 s per 10^6 impressions of 10 slots)."""
    n, k = shown.shape
    if int(shown.min()) < -1:
        row, col = (int(i) for i in np.argwhere(shown < -1)[0])
        raise InputError(f"shown: impression {row}, slot {col + 1} holds {int(shown[row, col])} (document ids are "
                         f">= 0, -1 marks an empty slot)", source)
    if k == 1:
        return
    empty = shown < 0
    gap = empty[:, :-1] & ~empty[:, 1:]
    if gap.any():
        row, col = (int(i) for i in np.argwhere(gap)[0])
        raise InputError(f"shown: impression {row} has an empty slot (-1) at slot {col + 1} before document "
                         f"{int(shown[row, col + 1])} at slot {col + 2} (empty slots only trail)", source)
    ordered = np.sort(shown, axis=1)
    twice = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
    if twice.any():
        row, col = (int(i) for i in np.argwhere(twice)[0])
        raise InputError(f"shown: impression {row} shows document {int(ordered[row, col])} twice (a list shows "
                         f"each document once)", source)


#: The largest importance weight an estimate may rest on. A weight above it means a logged event of probability
#: below 1e-100 under the logger (none happens in a real log: its propensity is wrong), and its square, in every
#: variance and effective sample size, leaves float64's range (about 1.8e308) once summed.
MAX_WEIGHT = 1e100


def _weight_too_large(w: FloatArray, p_log: FloatArray, level: str, source: str | None) -> None:
    """Refuse weights ``w`` with an entry above :data:`MAX_WEIGHT` (or infinite), naming the first such
    impression (0-based, as the propensity checks do), its weight and its logging propensity."""
    flat = w.reshape(w.shape[0], -1)
    row = int(np.flatnonzero(~(flat <= MAX_WEIGHT).all(axis=1))[0])
    col = int(np.flatnonzero(~(flat[row] <= MAX_WEIGHT))[0])
    p = float(np.asarray(p_log).reshape(w.shape[0], -1)[row, col])
    where = "" if w.ndim == 1 else f", slot {col + 1}"
    raise InputError(
        f"impression {row}{where}: importance weight {float(flat[row, col]):.3g} at the {level} level (the target's "
        f"probability over the logging propensity {p:.3g}): weights above {MAX_WEIGHT:.0e} are refused. An event "
        "that rare under the logger is not in a real log unless its propensity is wrong, and the squares of such "
        "weights overflow float64 in the variance; check the log's propensities", source)


@dataclass(frozen=True, eq=False)
class LoggedData:
    """A batch of logged impressions (one row each) with the logging propensities.

    Parameters
    ----------
    query:
        ``(n,)`` int query index (into the target's rankings).
    shown:
        ``(n, k)`` int document ids shown, ``-1`` = empty slot (empty slots only trail).
    clicks:
        ``(n, k)`` bool clicks (never on an empty slot).
    p_list, p_prefix, p_item:
        Logging propensities of what was shown (see the module conventions); each may be
        ``None`` when the log does not carry it (an estimator that needs it says so).
    user:
        ``(n,)`` int cluster ids for intervals (the randomisation unit); ``None``: each
        impression is its own cluster.
    user_type:
        ``(n,)`` int behaviour type of the user (adaptive IPS); ``None`` when unknown.
    logger:
        The logging policy as a :class:`PropensityModel`, when known: it gives the
        propensities of the *target's* lists, for support diagnostics.
    source:
        Where the log came from (file name), for messages.
    features:
        ``(n, k, p)`` float feature vectors :math:`x_{qd}` of the shown documents (one per
        (query, document); empty slots ignored), for regression EM's relevance model
        (:func:`onlineeval.estimators.position_bias.estimate_em`); ``None``: no features.
    lists_checked:
        Keyword only, not kept: ``True`` skips the check of ``shown``'s rows (ids >= -1, empty slots only trailing,
        no document twice in a row), for rows already checked (the log's readers, :meth:`take`) or meant to break
        them (slates of independent slots that repeat a document, the pseudoinverse's original setting). A ranked
        list that breaks them gives estimates of lists no logger shows.

    Notes
    -----
    The arrays are read-only private copies (arrays that are already read-only and own their
    memory, such as another log's, are kept without a copy), so a log never changes, and
    what estimators derive from it is computed once and shared by every estimate of the log
    (:meth:`cached`, :meth:`importance_weights`, :meth:`slot_rewards`; see
    :mod:`onlineeval.estimators.derived`).
    """

    query: IntArray
    shown: IntArray
    clicks: BoolArray
    p_list: FloatArray | None = None
    p_prefix: FloatArray | None = None
    p_item: FloatArray | None = None
    user: IntArray | None = None
    user_type: IntArray | None = None
    logger: PropensityModel | None = None
    source: str | None = None
    features: FloatArray | None = None
    _: KW_ONLY
    lists_checked: InitVar[bool] = False

    def __post_init__(self, lists_checked: bool) -> None:
        shown = _matrix(self.shown, "shown", np.int64)
        if shown.ndim != 2 or shown.shape[0] == 0 or shown.shape[1] == 0:
            raise InputError(f"shown: expected a non-empty (n, k) matrix, got shape {shown.shape}", self.source)
        if not lists_checked:
            _check_lists(shown, self.source)
        n, k = shown.shape
        object.__setattr__(self, "shown", shown)
        object.__setattr__(self, "query", _matrix(self.query, "query", np.int64, (n,)))
        clicks = np.asarray(self.clicks)
        if clicks.shape != (n, k):
            raise InputError(f"clicks: expected shape {(n, k)}, got {clicks.shape}", self.source)
        if clicks.dtype != bool and not np.all(np.isin(clicks, (0, 1))):
            raise InputError("clicks: must be 0/1 or bool", self.source)
        clicks = _matrix(clicks, "clicks", bool, (n, k))
        if (clicks & (shown < 0)).any():
            raise InputError("clicks on empty slots", self.source)
        object.__setattr__(self, "clicks", clicks)
        object.__setattr__(self, "p_list", _propensity(self.p_list, "p_list", (n,)))
        object.__setattr__(self, "p_prefix", _propensity(self.p_prefix, "p_prefix", (n, k)))
        object.__setattr__(self, "p_item", _propensity(self.p_item, "p_item", (n, k)))
        for name in ("user", "user_type"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _matrix(value, name, np.int64, (n,)))
        if self.features is not None:
            feats = _matrix(self.features, "features", np.float64)
            if feats.ndim != 3 or feats.shape[:2] != (n, k):
                raise InputError(f"features: expected shape ({n}, {k}, p), got {feats.shape}", self.source)
            if not np.isfinite(feats[shown >= 0]).all():
                raise InputError("features: must be finite on shown slots", self.source)
            object.__setattr__(self, "features", feats)

    @functools.cached_property
    def user_groups(self) -> tuple[IntArray, int]:
        """``(index of each impression's cluster, number of clusters)``; computed once per log
        (every estimate of the log reuses it)."""
        if self.user is None:
            return np.arange(self.n, dtype=np.int64), self.n
        uniq, inv = _unique_inverse(self.user)
        return inv, int(uniq.size)

    @functools.cached_property
    def query_groups(self) -> tuple[IntArray, IntArray]:
        """``(distinct queries, index of each impression's query among them)``, computed once."""
        return _unique_inverse(self.query)

    @property
    def n(self) -> int:
        return int(self.shown.shape[0])

    @property
    def k(self) -> int:
        return int(self.shown.shape[1])

    @functools.cached_property
    def valid(self) -> BoolArray:
        """``(n, k)`` read-only: ``shown >= 0`` (computed once)."""
        v = self.shown >= 0
        v.setflags(write=False)
        return v

    @functools.cached_property
    def all_valid(self) -> bool:
        """True when no slot of the log is empty."""
        return bool(self.valid.all())

    # ------------------------------------------------------------------ derived arrays
    @functools.cached_property
    def _cache(self) -> LogCache:
        return LogCache()

    def cached(self, key: Any, compute: Callable[[], Any], *, target: Any = None) -> Any:
        """``compute()``, computed once per log (per log and ``target`` when given) and kept.

        Estimators share what they derive from a log through it: the target's propensities
        and importance weights (:meth:`target_propensities`, :meth:`importance_weights`),
        slot and list rewards (:meth:`slot_rewards`, :meth:`list_rewards`), their products
        (:meth:`slot_weighted_rewards`). ``key`` is any hashable naming the quantity and
        everything it depends on besides the log (and the target); targets are told apart by
        identity, and only the :data:`~onlineeval.estimators.derived.CACHED_TARGETS` most
        recently used targets keep their entries. Arrays in the result are made read-only
        (``compute`` must return fresh arrays it does not keep). Valid because a log, its
        targets and rewards are immutable.
        """
        return self._cache.get(key, compute, target)

    def clear_cache(self) -> None:
        """Drop every kept derived array (:meth:`cached`), e.g. to free memory."""
        self._cache.clear()

    def __getstate__(self) -> dict[str, Any]:
        # derived arrays are not pickled (they are recomputed on demand)
        return {key: value for key, value in self.__dict__.items() if key != "_cache"}

    def target_propensities(self, target: Target) -> Propensities:
        """``target.propensities(query, shown)`` of the logged lists as float arrays, asked
        once per log and target (read-only views; the target's own arrays are not changed)."""
        def compute() -> Propensities:
            p = target.propensities(self.query, self.shown)
            return Propensities(*(_readonly_float(x) for x in (p.list, p.prefix, p.item)))
        return self.cached("propensities", compute, target=target)  # type: ignore[no-any-return]

    def importance_weights(self, target: Target, level: str) -> FloatArray:
        r"""The importance weights of ``target`` against the logging propensities, computed
        once per log, target and level (read-only):

        - ``"list"``: ``(n,)`` :math:`\pi(\mathbf s_i)/\mu(\mathbf s_i)` (``p_list``);
        - ``"item"``: ``(n, k)`` :math:`\pi(s_{ij} \text{ at } j)/\mu(\cdot)` (``p_item``),
          0 at empty slots;
        - ``"prefix"``: ``(n, k)`` :math:`\pi(\mathbf s_{i,0..j})/\mu(\cdot)` (``p_prefix``),
          0 at empty slots;
        - ``"list_slots"``: ``(n, k)`` the list weight at every shown slot, 0 at empty slots;
        - ``"prefix_carried"``: the prefix weights with empty slots carrying the weight of the
          last shown slot (the whole list); the ``"prefix"`` array itself when no slot is empty.

        The log must carry the propensity (:meth:`require`).
        """
        if level in ("list", "item", "prefix"):
            return self._base_weights(target, level)
        if level == "list_slots":
            return self.cached(("weights", "list_slots"),  # type: ignore[no-any-return]
                               lambda: np.where(self.valid, self.importance_weights(target, "list")[:, None], 0.0),
                               target=target)
        if level == "prefix_carried":
            w = self.importance_weights(target, "prefix")
            if self.all_valid:
                return w
            return self.cached(("weights", "prefix_carried"), lambda: _carry_last(w, self.valid),  # type: ignore
                               target=target)
        raise ValueError(must_be_one_of(("list", "item", "prefix", "list_slots", "prefix_carried"), level, "level"))

    def _base_weights(self, target: Target, level: str) -> FloatArray:
        def compute() -> FloatArray:
            num: Any
            if type(target) is DeterministicTarget:
                # its propensities are 0 or 1: kept as booleans (True / p is 1.0 / p, the same number)
                same, run = self.cached("indicators", lambda: target.indicators(self.query, self.shown),
                                        target=target)
                num = run[:, -1] if level == "list" else (same if level == "item" else run)
            else:
                p = self.target_propensities(target)
                num = p.list if level == "list" else (p.item if level == "item" else p.prefix)
            p_log = self.p_list if level == "list" else (self.p_item if level == "item" else self.p_prefix)
            with np.errstate(over="ignore"):  # a weight beyond float64's range is refused just below
                w = np.divide(num, p_log)
            w = w if level == "list" else self._on_shown(w)
            if w.size and not w.max() <= MAX_WEIGHT:  # (one pass; NaN cannot occur: the propensities are > 0)
                _weight_too_large(w, p_log, level, self.source)
            return w
        w = self.cached(("weights", level), compute, target=target)
        # the target's propensities are kept only until every weight the log allows is derived
        sec = self._cache.section(target)
        if ("propensities" in sec or "indicators" in sec) and all(
                ("weights", lv) in sec for lv, p in (("list", self.p_list), ("item", self.p_item),
                                                     ("prefix", self.p_prefix)) if p is not None):
            sec.pop("propensities", None)
            sec.pop("indicators", None)
        return w  # type: ignore[no-any-return]

    def _on_shown(self, x: FloatArray) -> FloatArray:
        """``x`` at shown slots, 0 at empty ones (``x`` itself when no slot is empty)."""
        return x if self.all_valid else np.where(self.valid, x, 0.0)

    def slot_weighted_rewards(self, target: Target, level: str, reward: Reward) -> FloatArray:
        r"""``(n,)`` :math:`\sum_j w_{ij} r_{ij}` with the slot weights of ``level``
        (``"item"``, ``"prefix"`` or ``"list_slots"``, see :meth:`importance_weights`) and
        :meth:`slot_rewards`, computed once per log, target, level and reward definition."""
        def compute() -> FloatArray:
            return weighted_row_sum(self.importance_weights(target, level), self.slot_rewards(reward))
        key = _reward_key(reward)
        if key is None:
            return compute()
        return self.cached(("slot_weighted_rewards", level, *key), compute, target=target)  # type: ignore

    def slot_rewards(self, reward: Reward) -> FloatArray:
        """``reward.slot_rewards(clicks)``, computed once per log and reward definition
        (read-only; a reward of another type than :class:`Reward` is asked every time)."""
        key = _reward_key(reward)
        if key is None:
            return reward.slot_rewards(self.clicks)
        return self.cached(("slot_rewards", *key), lambda: reward.slot_rewards(self.clicks))  # type: ignore

    def list_rewards(self, reward: Reward) -> FloatArray:
        r"""``(n,)`` the list reward :math:`\sum_j r_{ij}` of each impression (the reward's own
        ``list_rewards`` when it keeps one, as the simulation's per-batch reward does), the
        row sums of :meth:`slot_rewards`; computed once per log and reward definition."""
        own = getattr(reward, "list_rewards", None)
        if callable(own):
            return own(self.clicks)  # type: ignore[no-any-return]
        key = _reward_key(reward)
        if key is None:
            return row_sum(reward.slot_rewards(self.clicks))
        return self.cached(("list_rewards", *key), lambda: row_sum(self.slot_rewards(reward)))  # type: ignore

    def take(self, rows: ArrayLike) -> LoggedData:
        """The sub-log of ``rows`` (an index array or boolean mask), same logger."""
        idx = np.asarray(rows)

        def part(x: NDArray[Any] | None) -> NDArray[Any] | None:
            if x is None:
                return None
            out = x[idx]
            if not np.may_share_memory(out, x):  # a fresh copy: made read-only, the new log keeps it
                out.setflags(write=False)
            return out

        opt = {name: part(getattr(self, name))
               for name in ("p_list", "p_prefix", "p_item", "user", "user_type", "features")}
        return LoggedData(part(self.query), part(self.shown), part(self.clicks), logger=self.logger,
                          source=self.source, lists_checked=True, **opt)

    def require(self, *names: str, estimator: str = "") -> None:
        """Raise :class:`InputError` when a propensity an estimator needs is missing."""
        missing = [nm for nm in names if getattr(self, nm) is None]
        if missing:
            who = f"estimator {estimator!r} " if estimator else ""
            raise InputError(f"{who}needs logging propensities {', '.join(missing)}; the log does not carry them",
                             self.source)


def _reward_key(reward: Any) -> tuple[Any, ...] | None:
    """What a :class:`Reward`'s slot rewards depend on (its kind and weights); ``None`` for
    other reward types, whose results are not kept."""
    if type(reward) is not Reward:
        return None
    return (reward.kind, None if reward.weights is None else reward.weights.tobytes())
