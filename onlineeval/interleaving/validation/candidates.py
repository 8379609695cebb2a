"""Implementations under test: the per-impression protocol, onlineeval's batch API, loading by name.

Per-impression protocol (a class with a no-argument constructor, or a module with two
functions)::

    interleave(lists, rng) -> (shown, teams)
        lists: the input rankings (lists of int document ids; lists[0] = A, lists[1] = B, ...)
        rng:   numpy.random.Generator (use it for every random choice)
        shown: the shown document ids; teams: the ranker index credited for each slot
    credit(shown, teams, clicks[, lists=lists]) -> outcome
        clicks: one bool per shown slot; methods whose credit needs the input rankings
        (probabilistic, optimized, balanced) declare a ``lists`` keyword parameter.

What ``credit`` returns, and the scale it is checked on:

* a number ``o`` (two rankers): its sign says who wins (``> 0``: B, ``< 0``: A, ``0``: tie);
  team-draft and balanced return the win / loss / tie itself; probabilistic interleaving
  returns its expected outcome ``P(B wins) - P(A wins)`` over the hidden assignments
  (Hofmann et al. 2013), the scale on which it is unbiased;
* a sequence of one credit per ranker (``(credit_A, credit_B)`` for two): ranker ``i``
  beats ``j`` when ``credit_i > credit_j``; optimized interleaving returns its credit pair,
  the scale of Radlinski & Craswell's guarantee;
* an ``m x m`` matrix (multileaving): ``pref[i][j] > 0`` when ranker ``i`` beats ``j``;
  probabilistic multileaving returns its expected pairwise outcomes.

Batch API: an instance (or a class built without arguments) of
:class:`onlineeval.interleaving.base.Interleaver` is run on whole batches; its values are
taken on the declared method's scale (``preferences()``, ``expected_preferences()`` or the
credit difference from ``credit()``).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import ConfigError, InputError
from onlineeval.interleaving.base import Interleaver, InterleavingResult
from onlineeval.interleaving.registry import get_interleaver

__all__ = ["BatchCandidate", "Candidate", "Sample", "load_candidate", "reference_candidate"]

#: relative tolerance under which two credits count as equal (the harness takes the difference, so it
#: owns its rounding: equal sums accumulated in another order tie)
PAIR_TIE_TOLERANCE = 1e-9

#: the scales a method's values are taken on
SIGN, EXPECTED, CREDIT = "win/loss/tie", "expected outcome", "credit difference"


@dataclass(frozen=True)
class Sample:
    """``n`` interleavings of one tuple of input lists.

    Attributes
    ----------
    shown, teams:
        ``(n, k)`` int64, ``-1`` padded.
    bad_length:
        ``(n,)`` rows whose shown list and team labels had different lengths (kept
        truncated to the shorter; the structure check reports them).
    """

    shown: NDArray[np.int64]
    teams: NDArray[np.int64]
    bad_length: NDArray[np.bool_]

    @property
    def n(self) -> int:
        """Number of impressions."""
        return int(self.shown.shape[0])


def pad_lists(lists: Sequence[Sequence[int]], n: int) -> NDArray[np.int64]:
    """``(m, n, K)`` the lists tiled over ``n`` rows, ``-1`` padded."""
    width = max(max(len(x) for x in lists), 1)
    out = np.full((len(lists), n, width), -1, dtype=np.int64)
    for i, lst in enumerate(lists):
        out[i, :, : len(lst)] = np.asarray(lst, dtype=np.int64)
    return out


def _pairwise(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(n, m)`` credits to ``(n, m, m)`` preference values with the pair tie tolerance."""
    diff = values[:, :, None] - values[:, None, :]
    scale = np.maximum(1.0, np.maximum(np.abs(values)[:, :, None], np.abs(values)[:, None, :]))
    return np.where(np.abs(diff) <= PAIR_TIE_TOLERANCE * scale, 0.0, diff)


class Candidate(ABC):
    """An implementation under test.

    :meth:`sample` draws interleavings; :meth:`values` gives the ``(n, m, m)`` pairwise
    preference values (``[:, i, j] > 0``: ranker ``i`` beats ``j``) on the candidate's scale.
    """

    name: str

    @abstractmethod
    def sample(self, lists: Sequence[Sequence[int]], n: int, rng: np.random.Generator) -> Sample:
        """``n`` interleavings of ``lists``."""

    @abstractmethod
    def values(self, lists: Sequence[Sequence[int]], shown: NDArray[np.int64], teams: NDArray[np.int64],
               clicks: NDArray[np.bool_], scale: str) -> NDArray[np.float64]:
        """``(n, m, m)`` preference values of impressions ``(shown, teams, clicks)`` (``-1`` padded rows)."""


class ProtocolCandidate(Candidate):
    """A per-impression implementation (the protocol in the module docstring)."""

    def __init__(self, name: str, interleave_fn: Callable[..., Any], credit_fn: Callable[..., Any],
                 wants_lists: bool = False) -> None:
        self.name = name
        self.interleave_fn = interleave_fn
        self.credit_fn = credit_fn
        self.wants_lists = wants_lists

    def interleave(self, lists: Sequence[Sequence[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        """One call of the candidate's ``interleave``, its output checked to be two lists of ints."""
        try:
            out = self.interleave_fn([list(x) for x in lists], rng)
        except Exception as exc:  # noqa: BLE001 - user code: report it in one line
            raise InputError(f"{self.name}: interleave({[list(x) for x in lists]}) raised "
                             f"{type(exc).__name__}: {exc}") from None
        try:
            shown, teams = out
            return [int(d) for d in shown], [int(t) for t in teams]
        except (TypeError, ValueError):
            raise InputError(f"{self.name}: interleave() must return (shown, teams) lists of ints, got {out!r}") \
                from None

    def sample(self, lists: Sequence[Sequence[int]], n: int, rng: np.random.Generator) -> Sample:
        rows = [self.interleave(lists, rng) for _ in range(n)]
        k = max([max(len(s), len(t)) for s, t in rows] + [1])
        shown = np.full((n, k), -1, dtype=np.int64)
        teams = np.full((n, k), -1, dtype=np.int64)
        bad = np.zeros(n, dtype=bool)
        for r, (s, t) in enumerate(rows):
            j = min(len(s), len(t))
            bad[r] = len(s) != len(t)
            shown[r, :j] = s[:j]
            teams[r, :j] = t[:j]
        return Sample(shown, teams, bad)

    def credit(self, lists: Sequence[Sequence[int]], shown: list[int], teams: list[int],
               clicks: list[bool]) -> NDArray[np.float64]:
        """One call of the candidate's ``credit``, as an ``(m, m)`` preference matrix."""
        m = len(lists)
        try:
            if self.wants_lists:
                out = self.credit_fn(list(shown), list(teams), list(clicks), lists=[list(x) for x in lists])
            else:
                out = self.credit_fn(list(shown), list(teams), list(clicks))
        except Exception as exc:  # noqa: BLE001 - user code: report it in one line
            raise InputError(f"{self.name}: credit({shown}, {teams}, {clicks}) raised "
                             f"{type(exc).__name__}: {exc}") from None
        allowed = (f"a number (two rankers), {m} credits (one per ranker) or an {m} x {m} preference matrix")
        try:
            arr = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{self.name}: credit() must return {allowed}, got {out!r}") from None
        if not np.isfinite(arr).all():
            raise InputError(f"{self.name}: credit() returned a non-finite value {out!r}")
        if arr.ndim == 0 and m == 2:
            v = float(arr)
            return np.array([[0.0, -v], [v, 0.0]])
        if arr.shape == (m,):
            return _pairwise(arr[None, :])[0]
        if arr.shape == (m, m):
            return arr
        raise InputError(f"{self.name}: credit() must return {allowed}, got {out!r}")

    def values(self, lists: Sequence[Sequence[int]], shown: NDArray[np.int64], teams: NDArray[np.int64],
               clicks: NDArray[np.bool_], scale: str) -> NDArray[np.float64]:
        m = len(lists)
        out = np.zeros((shown.shape[0], m, m))
        for r in range(shown.shape[0]):
            keep = shown[r] >= 0
            out[r] = self.credit(lists, shown[r][keep].tolist(), teams[r][keep].tolist(),
                                 clicks[r][keep].tolist())
        return out


class BatchCandidate(Candidate):
    """An :class:`~onlineeval.interleaving.base.Interleaver` run on whole batches."""

    def __init__(self, name: str, interleaver: Interleaver) -> None:
        self.name = name
        self.interleaver = interleaver

    def sample(self, lists: Sequence[Sequence[int]], n: int, rng: np.random.Generator) -> Sample:
        res = self.interleaver.interleave(list(pad_lists(lists, n)), rng)
        shown = res.ranking.astype(np.int64)
        teams = np.where(shown >= 0, res.team.astype(np.int64), -1)
        return Sample(shown, teams, np.zeros(n, dtype=bool))

    def result(self, rankings: NDArray[np.int64], shown: NDArray[np.int64],
               teams: NDArray[np.int64]) -> InterleavingResult:
        """The batch result of rows ``(shown, teams)`` on ``(m, n, K)`` input rankings."""
        return InterleavingResult(shown.astype(np.int32), teams.astype(np.int8), rankings.astype(np.int32))

    def values_on(self, rankings: NDArray[np.int64], shown: NDArray[np.int64], teams: NDArray[np.int64],
                  clicks: NDArray[np.bool_], scale: str) -> NDArray[np.float64]:
        """:meth:`values` on per-row input rankings ``(m, n, K)``."""
        il = self.interleaver
        res = self.result(rankings, shown, teams)
        c = clicks & (shown >= 0)
        if scale == EXPECTED and hasattr(il, "expected_preferences"):
            # within the method's tie tolerance the value is a tie, so its sign is the method's outcome
            e = np.asarray(il.expected_preferences(res, c), dtype=np.float64)
            return np.where(np.abs(e) <= float(getattr(il, "tie_tolerance", 0.0)), 0.0, e)
        if scale == CREDIT:
            return _pairwise(np.asarray(il.credit(res, c), dtype=np.float64))
        return il.preferences(res, c).astype(np.float64)

    def values(self, lists: Sequence[Sequence[int]], shown: NDArray[np.int64], teams: NDArray[np.int64],
               clicks: NDArray[np.bool_], scale: str) -> NDArray[np.float64]:
        return self.values_on(pad_lists(lists, shown.shape[0]), shown, teams, clicks, scale)


def _wants_lists(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "lists" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _from_object(name: str, obj: Any) -> Candidate:
    """Adapt ``obj``: an :class:`Interleaver` runs through the batch API, anything else through the protocol."""
    if isinstance(obj, Interleaver):
        return BatchCandidate(name, obj)
    interleave = getattr(obj, "interleave", None)
    credit = getattr(obj, "credit", None)
    if not callable(interleave) or not callable(credit):
        raise ConfigError(("interleaver",), f"{name} must provide interleave(lists, rng) and "
                          "credit(shown, teams, clicks), or be an onlineeval.interleaving.Interleaver; "
                          "see onlineeval.interleaving.validation")
    return ProtocolCandidate(name, interleave, credit, _wants_lists(credit))


def load_candidate(spec: str) -> Candidate:
    """Load ``package.module:Name`` (a class, built without arguments, or an object) or ``package.module``.

    ``path/to/file.py:Name`` loads a file that is not on the import path. A subclass of
    :class:`~onlineeval.interleaving.base.Interleaver` (e.g.
    ``onlineeval.interleaving.team_draft:TeamDraft``) is run through the batch API.
    """
    module_part, _, attr = spec.partition(":")
    if not module_part:
        raise ConfigError(("interleaver",), f"expected 'package.module:Name', got {spec!r}")
    try:
        if module_part.endswith(".py"):
            path = Path(module_part)
            if not path.is_file():
                raise ConfigError(("interleaver",), f"file {module_part!r} not found")
            mod_spec = importlib.util.spec_from_file_location(path.stem, path)
            if mod_spec is None or mod_spec.loader is None:
                raise ConfigError(("interleaver",), f"cannot load {module_part!r}")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules.setdefault(path.stem, module)
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_part)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - any import failure of user code is reported as one line
        raise ConfigError(("interleaver",), f"cannot import {module_part!r}: {type(exc).__name__}: {exc}") from None
    if not attr:
        return _from_object(spec, module)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(("interleaver",), f"{module_part!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if inspect.isclass(obj):
        if inspect.isabstract(obj):
            raise ConfigError(("interleaver",), f"{spec} is abstract; name a concrete class")
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(("interleaver",), f"cannot construct {spec} without arguments: {exc}") from None
    return _from_object(spec, obj)


def reference_candidate(method: str, **options: Any) -> Candidate:
    """onlineeval's own implementation of ``method`` as a (batch) candidate."""
    return BatchCandidate(f"onlineeval:{method}", get_interleaver(method, **options))
