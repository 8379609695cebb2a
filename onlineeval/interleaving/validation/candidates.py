"""Implementations under test: the per-impression protocol, onlineeval's batch API, loading by name.

Per-impression protocol (a class with a no-argument constructor, or a module with two
functions)::

    interleave(lists, rng[, length=k]) -> (shown, teams)
        lists: the input rankings (lists of int document ids; lists[0] = A, lists[1] = B, ...)
        rng:   numpy.random.Generator (use it for every random choice)
        length: optional; a candidate whose interleave() declares a ``length`` keyword parameter
               is told the page length (the battery's long-list scenarios show 10 slots) and must
               return exactly ``min(length, documents in the lists)`` slots; one without it returns
               its whole interleaving and the battery keeps its first ``length`` slots (the page of
               team-draft, balanced and probabilistic methods is the first slots of the whole draw); on
               the lists shown whole (no length given) the page is the longest list (or every document,
               when fewer) and a longer draw is cut to it in the same way (optimized: never cut)
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
import numbers
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import ConfigError
from onlineeval.interleaving.base import Interleaver, InterleavingResult
from onlineeval.interleaving.registry import get_interleaver
from onlineeval.interleaving.validation.guard import (
    DEFAULT_TIMEOUT,
    CandidateError,
    call_candidate,
    short,
    watchdog,
)
from onlineeval.interleaving.validation.progress import CALLS_EVERY
from onlineeval.interleaving.validation.progress import calls as progress_calls

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


#: largest document id a candidate may return (ids are stored as int64)
MAX_DOCUMENT_ID = int(np.iinfo(np.int64).max)


def _is_int(v: Any) -> bool:
    return type(v) is int or (isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)))


def _is_real(v: Any) -> bool:
    return (type(v) is float or type(v) is int
            or (isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))))


def _int_sequence(name: str, call: str, seq: Any, what: str, low: int, high: int, limit: int) -> list[int]:
    if isinstance(seq, np.ndarray):
        if seq.ndim != 1:
            raise CandidateError("output", name, call, f"returned {what}s as a {seq.ndim}-d array; one list expected")
        seq = seq.tolist()
    if not isinstance(seq, (list, tuple)):
        raise CandidateError("output", name, call, f"returned {short(seq)} as the {what}s; a list of integers "
                             "expected")
    if len(seq) > limit:
        raise CandidateError("output", name, call, f"returned {len(seq)} {what}s for input lists of {limit} "
                             "documents in all")
    for j, v in enumerate(seq):
        if not _is_int(v):
            # a team label written as the ranker's name ('A', 'B'): say which integer the battery reads
            hint = ("; a team label is the index of the ranker in the lists given: 0 for lists[0] (A), 1 for "
                    "lists[1] (B), ...") if what == "team label" and isinstance(v, str) else ""
            raise CandidateError("output", name, call, f"returned {what} {short(v, 60)} ({type(v).__name__}) at "
                                 f"slot {j + 1}; {what}s must be integers (int or numpy integer; bool and float "
                                 "are refused, even when integral-valued)" + hint)
        if not low <= v <= high:
            raise CandidateError("output", name, call, f"returned {what} {v} at slot {j + 1}; allowed {low}..{high}")
    return [int(v) for v in seq]


def check_interleave_output(name: str, call: str, out: Any, limit: int) -> tuple[list[int], list[int]]:
    """``(shown, teams)`` of one ``interleave`` call, or a :class:`CandidateError` naming the offending value.

    Document ids must be integers in ``0..2^63-1`` and team labels integers (``int`` or a
    numpy integer; ``bool`` and ``float`` are refused, even integral-valued: a float id
    truncated to an int could pass checks the candidate fails); neither list may be longer
    than the input lists together (``limit``). Whether the labels name a ranker, and the
    documents come from the lists, is the ``structure`` check's business.
    """
    if isinstance(out, np.ndarray) and out.ndim == 2 and out.shape[0] == 2:
        out = (out[0], out[1])
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise CandidateError("output", name, call, f"returned {short(out)}; interleave() must return "
                             "(shown, teams), two lists of integers")
    shown = _int_sequence(name, call, out[0], "document id", 0, MAX_DOCUMENT_ID, limit)
    teams = _int_sequence(name, call, out[1], "team label", -MAX_DOCUMENT_ID - 1, MAX_DOCUMENT_ID, limit)
    return shown, teams


def check_credit_output(name: str, call: str, out: Any, allowed: str) -> NDArray[np.float64]:
    """The value of one ``credit`` call as a float array, or a :class:`CandidateError`.

    A real number, or a sequence (or nested sequence, or numpy array) of real numbers:
    ``int``, ``float`` or numpy numbers; strings, ``None``, ``bool``, complex numbers, NaN
    and infinities are refused (``"1"`` is not silently read as 1).
    """
    def bad(detail: str) -> CandidateError:
        return CandidateError("output", name, call, f"returned {short(out)}: {detail}; credit() must return "
                              f"{allowed}")

    if isinstance(out, np.ndarray):
        if out.dtype.kind not in "iuf":
            raise bad(f"an array of dtype {out.dtype}")
        arr = out.astype(np.float64)
    elif _is_real(out):
        try:
            arr = np.asarray(float(out))
        except OverflowError:
            raise bad("a number too large for a float") from None
    elif isinstance(out, (list, tuple)):
        flat: list[Any] = []
        for v in out:
            if isinstance(v, (list, tuple, np.ndarray)):
                items = v.tolist() if isinstance(v, np.ndarray) else list(v)
                if any(isinstance(x, (list, tuple)) for x in items):
                    raise bad("nested more than two levels")
                flat.extend(items)
            else:
                flat.append(v)
        wrong = [v for v in flat if not _is_real(v)]
        if wrong:
            raise bad(f"{short(wrong[0], 60)} ({type(wrong[0]).__name__}) is not a real number")
        try:
            arr = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError):
            raise bad("ragged rows") from None
        except OverflowError:
            raise bad("a number too large for a float") from None
    else:
        raise bad(f"a {type(out).__name__}, not a number")
    if not np.isfinite(arr).all():
        raise bad("not finite (NaN or infinity)")
    return arr


class Candidate(ABC):
    """An implementation under test.

    :meth:`sample` draws interleavings; :meth:`values` gives the ``(n, m, m)`` pairwise
    preference values (``[:, i, j] > 0``: ranker ``i`` beats ``j``) on the candidate's scale.
    """

    name: str

    def calls(self) -> dict[str, Any]:
        """The Python objects whose defining files identify this candidate's code, by name."""
        return {}

    def sources(self) -> dict[str, Any]:
        """``{"files": [...], "unhashed": [...], "covers": ...}``: the SHA-256 of each file defining
        :meth:`calls` (:func:`onlineeval.io.digest.input_entry`, each file once, in the order of the calls), and
        the calls without a Python source file (a builtin, a ``functools.partial``, code typed at a prompt).
        Hashed on the first call and kept, so the digest is of the code as it was loaded."""
        cached = getattr(self, "_sources", None)
        if cached is not None:
            return cached
        from onlineeval.interleaving.validation.report import CANDIDATE_FILES
        from onlineeval.io.digest import input_entry

        files: dict[str, Any] = {}
        unhashed = []
        for label, obj in self.calls().items():
            try:
                path = inspect.getsourcefile(obj)
            except (TypeError, OSError):
                path = None
            if path is None or not Path(path).is_file():
                unhashed.append(f"{label}()" if label != "class" else f"the class {getattr(obj, '__name__', obj)}")
                continue
            key = str(Path(path).resolve())
            if key not in files:
                files[key] = input_entry(path)
        out = {"files": list(files.values()), "unhashed": unhashed, "covers": CANDIDATE_FILES}
        self._sources = out
        return out

    @abstractmethod
    def sample(self, lists: Sequence[Sequence[int]], n: int, rng: np.random.Generator,
               length: int | None = None) -> Sample:
        """``n`` interleavings of ``lists`` on a page of ``length`` slots (``None``: the longest list)."""

    @abstractmethod
    def values(self, lists: Sequence[Sequence[int]], shown: NDArray[np.int64], teams: NDArray[np.int64],
               clicks: NDArray[np.bool_], scale: str) -> NDArray[np.float64]:
        """``(n, m, m)`` preference values of impressions ``(shown, teams, clicks)`` (``-1`` padded rows)."""


class ProtocolCandidate(Candidate):
    """A per-impression implementation (the protocol in the module docstring)."""

    def __init__(self, name: str, interleave_fn: Callable[..., Any], credit_fn: Callable[..., Any],
                 wants_lists: bool = False, takes_length: bool | None = None) -> None:
        self.name = name
        self.interleave_fn = interleave_fn
        self.credit_fn = credit_fn
        self.wants_lists = wants_lists
        #: interleave() declares a ``length`` keyword: it is told the page length (else its draw is cut to the page)
        self.takes_length = _has_parameter(interleave_fn, "length") if takes_length is None else takes_length
        #: lists shown whole (no page length given): a draw longer than their page, the longest list (or every
        #: document, when fewer), is cut to it as a long list's draw is cut to its 10 slots, where the method's page
        #: is the first slots of its whole draw (every method but optimized, whose draw depends on the page length:
        #: :func:`~onlineeval.interleaving.validation.validate_interleaver` sets it per method). A team-draft that
        #: interleaves until every document is placed is then checked on its page, not failed for its tail.
        self.cut_whole = True

    def calls(self) -> dict[str, Any]:
        return {"interleave": self.interleave_fn, "credit": self.credit_fn}

    def interleave(self, lists: Sequence[Sequence[int]], rng: np.random.Generator,
                   length: int | None = None) -> tuple[list[int], list[int]]:
        """One call of the candidate's ``interleave``, its output checked (:func:`check_interleave_output`).

        With ``length`` shorter than the longest list: passed as ``length=`` when the candidate takes it
        (its output is then checked as it is: ``structure`` counts the slots), else the candidate's
        whole draw is cut to its first ``length`` slots.
        """
        told = length is not None and self.takes_length and length < max(len(x) for x in lists)
        call = f"interleave({[list(x) for x in lists]}" + (f", length={length})" if told else ")")
        if told:
            out = call_candidate(self.name, call, self.interleave_fn, [list(x) for x in lists], rng, length=length)
        else:
            out = call_candidate(self.name, call, self.interleave_fn, [list(x) for x in lists], rng)
        shown, teams = check_interleave_output(self.name, call, out, sum(len(x) for x in lists))
        if length is not None and not told:
            shown, teams = shown[:length], teams[:length]
        elif length is None and self.cut_whole and len(shown) == len(teams):
            page = min(max(len(x) for x in lists), len(set().union(*(set(x) for x in lists))))
            shown, teams = shown[:page], teams[:page]
        return shown, teams

    def sample(self, lists: Sequence[Sequence[int]], n: int, rng: np.random.Generator,
               length: int | None = None) -> Sample:
        rows = []
        for i in range(n):
            rows.append(self.interleave(lists, rng, length))
            if (i + 1) % CALLS_EVERY == 0:
                progress_calls(CALLS_EVERY)
        progress_calls(n % CALLS_EVERY)
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
        call = f"credit({shown}, {teams}, {clicks})"
        if self.wants_lists:
            out = call_candidate(self.name, call, self.credit_fn, list(shown), list(teams), list(clicks),
                                 lists=[list(x) for x in lists])
        else:
            out = call_candidate(self.name, call, self.credit_fn, list(shown), list(teams), list(clicks))
        allowed = (f"a number (two rankers), {m} credits (one per ranker) or a {m} x {m} preference matrix "
                   "(real numbers)")
        if isinstance(out, str) and m == 2:  # a winner's name ('A', 'B', 'tie'): the number it stands for
            allowed += "; a winner named as text is the sign: > 0 when B (lists[1]) wins, < 0 for A, 0 for a tie"
        arr = check_credit_output(self.name, call, out, allowed)
        if arr.ndim == 0 and m == 2:
            v = float(arr)
            return np.array([[0.0, -v], [v, 0.0]])
        if arr.shape == (m,):
            return _pairwise(arr[None, :])[0]
        if arr.shape == (m, m):
            return arr
        raise CandidateError("output", self.name, call, f"returned {short(out)}; credit() must return {allowed}")

    def values(self, lists: Sequence[Sequence[int]], shown: NDArray[np.int64], teams: NDArray[np.int64],
               clicks: NDArray[np.bool_], scale: str) -> NDArray[np.float64]:
        m = len(lists)
        out = np.zeros((shown.shape[0], m, m))
        for r in range(shown.shape[0]):
            keep = shown[r] >= 0
            out[r] = self.credit(lists, shown[r][keep].tolist(), teams[r][keep].tolist(),
                                 clicks[r][keep].tolist())
            if (r + 1) % CALLS_EVERY == 0:
                progress_calls(CALLS_EVERY)
        progress_calls(shown.shape[0] % CALLS_EVERY)
        return out


class BatchCandidate(Candidate):
    """An :class:`~onlineeval.interleaving.base.Interleaver` run on whole batches."""

    def __init__(self, name: str, interleaver: Interleaver, trusted: bool = False) -> None:
        self.name = name
        self.interleaver = interleaver
        self.trusted = trusted

    def calls(self) -> dict[str, Any]:
        return {"class": type(self.interleaver)}

    def _call(self, call: str, fn: Callable[..., Any], *args: Any) -> Any:
        """A batch call: onlineeval's own reference directly, a candidate's under the watchdog."""
        if self.trusted:
            return fn(*args)
        return call_candidate(self.name, call, fn, *args)

    def _checked(self, call: str, value: Any, kinds: str, what: str) -> NDArray[Any]:
        """An array the batch API returned, refused unless its dtype kind is in ``kinds`` and it is finite."""
        arr = value if isinstance(value, np.ndarray) else None
        if self.trusted and arr is not None:
            return arr
        if arr is None or arr.dtype.kind not in kinds:
            got = f"dtype {arr.dtype}" if arr is not None else type(value).__name__
            raise CandidateError("output", self.name, call, f"returned {what} of {got}; "
                                 + ("integers" if kinds == "iu" else "real numbers") + " expected")
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise CandidateError("output", self.name, call, f"returned {what} with NaN or infinite values")
        return arr

    def sample(self, lists: Sequence[Sequence[int]], n: int, rng: np.random.Generator,
               length: int | None = None) -> Sample:
        call = f"interleave() on {n} impressions of {[list(x) for x in lists]}"
        if length is None:
            res = self._call(call, self.interleaver.interleave, list(pad_lists(lists, n)), rng)
        else:
            call += f", length={length}"
            res = self._call(call, self.interleaver.interleave, list(pad_lists(lists, n)), rng, int(length))
        if not isinstance(res, InterleavingResult):
            raise CandidateError("output", self.name, call, f"returned {short(res)}; an InterleavingResult expected")
        shown = self._checked(call, res.ranking, "iu", "a ranking").astype(np.int64)
        team = self._checked(call, res.team, "iu", "team labels").astype(np.int64)
        if shown.ndim != 2 or shown.shape[0] != n or team.shape != shown.shape:
            raise CandidateError("output", self.name, call, f"returned a ranking of shape {shown.shape} and team "
                                 f"labels of shape {team.shape}; ({n}, k) expected")
        teams = np.where(shown >= 0, team, -1)
        if not self.trusted:
            progress_calls(n)
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
        n, m = shown.shape[0], rankings.shape[0]
        if not self.trusted:
            progress_calls(n)
        if scale == EXPECTED and hasattr(il, "expected_preferences"):
            # within the method's tie tolerance the value is a tie, so its sign is the method's outcome
            call = f"expected_preferences() on {n} impressions"
            e = self._checked(call, self._call(call, il.expected_preferences, res, c), "iuf", "preferences")
            e = e.astype(np.float64)
            out = np.where(np.abs(e) <= float(getattr(il, "tie_tolerance", 0.0)), 0.0, e)
        elif scale == CREDIT:
            call = f"credit() on {n} impressions"
            cr = self._checked(call, self._call(call, il.credit, res, c), "iuf", "credits").astype(np.float64)
            if cr.shape != (n, m):
                raise CandidateError("output", self.name, call, f"returned credits of shape {cr.shape}; ({n}, {m}) "
                                     "expected")
            return _pairwise(cr)
        else:
            call = f"preferences() on {n} impressions"
            out = self._checked(call, self._call(call, il.preferences, res, c), "iuf", "preferences")
            out = out.astype(np.float64)
        if out.shape != (n, m, m):
            raise CandidateError("output", self.name, call, f"returned preferences of shape {out.shape}; "
                                 f"({n}, {m}, {m}) expected")
        return out

    def values(self, lists: Sequence[Sequence[int]], shown: NDArray[np.int64], teams: NDArray[np.int64],
               clicks: NDArray[np.bool_], scale: str) -> NDArray[np.float64]:
        return self.values_on(pad_lists(lists, shown.shape[0]), shown, teams, clicks, scale)


def _has_parameter(fn: Callable[..., Any], name: str) -> bool:
    """``fn`` declares a parameter ``name`` that can be passed by keyword (``**kwargs`` does not count)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    p = params.get(name)
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


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


def _importer(module_part: str) -> Callable[[], Any]:
    """A function that imports ``module_part`` (a module name or a ``.py`` file) and returns the module."""
    if not module_part.endswith(".py"):
        return lambda: importlib.import_module(module_part)
    path = Path(module_part)
    if not path.is_file():
        raise ConfigError(("interleaver",), f"file {module_part!r} not found")
    mod_spec = importlib.util.spec_from_file_location(path.stem, path)
    if mod_spec is None or mod_spec.loader is None:
        raise ConfigError(("interleaver",), f"cannot load {module_part!r}")
    loader = mod_spec.loader
    module = importlib.util.module_from_spec(mod_spec)

    def run() -> Any:
        sys.modules.setdefault(path.stem, module)
        loader.exec_module(module)
        return module

    return run


def load_candidate(spec: str, timeout: float | None = DEFAULT_TIMEOUT) -> Candidate:
    """Load ``package.module:Name`` (a class, built without arguments, or an object) or ``package.module``.

    ``path/to/file.py:Name`` loads a file that is not on the import path. A subclass of
    :class:`~onlineeval.interleaving.base.Interleaver` (e.g.
    ``onlineeval.interleaving.team_draft:TeamDraft``) is run through the batch API.

    The import and the constructor run under a :class:`~onlineeval.interleaving.validation.guard.Watchdog`
    (``timeout`` seconds each, default 10; ``None`` for no limit): an exception, ``sys.exit``
    or ``os._exit`` there, or a hang, is a :class:`~onlineeval.errors.ConfigError` naming the
    module (exit code 2: nothing was validated).
    """
    module_part, _, attr = spec.partition(":")
    if not module_part:
        raise ConfigError(("interleaver",), f"expected 'package.module:Name', got {spec!r}")
    with watchdog(timeout):
        try:
            module = call_candidate(spec, f"import {module_part!r}", _importer(module_part))
        except CandidateError as exc:
            if exc.kind == "exception":
                raise ConfigError(("interleaver",), f"cannot import {module_part!r}: "
                                  f"{exc.detail.removeprefix('raised ')}") from None
            raise ConfigError(("interleaver",), f"cannot import {module_part!r}: the candidate {exc.detail} while "
                              "being imported") from None
        if not attr:
            candidate = _from_object(spec, module)
            candidate.sources()  # the code as it was loaded
            return candidate
        obj = module
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise ConfigError(("interleaver",), f"{module_part!r} has no attribute {attr!r}")
            obj = getattr(obj, part)
        if inspect.isclass(obj):
            if inspect.isabstract(obj):
                raise ConfigError(("interleaver",), f"{spec} is abstract; name a concrete class")
            try:
                obj = call_candidate(spec, f"{attr}()", obj)
            except CandidateError as exc:
                detail = exc.detail.removeprefix("raised ") if exc.kind == "exception" else \
                    f"the constructor {exc.detail}"
                raise ConfigError(("interleaver",), f"cannot construct {spec} without arguments: {detail}") \
                    from None
    candidate = _from_object(spec, obj)
    candidate.sources()  # the code as it was loaded
    return candidate


def reference_candidate(method: str, **options: Any) -> Candidate:
    """onlineeval's own implementation of ``method`` as a (batch) candidate."""
    return BatchCandidate(f"onlineeval:{method}", get_interleaver(method, **options), trusted=True)
