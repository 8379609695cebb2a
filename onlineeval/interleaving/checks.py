"""Conformance suite for interleaving methods: ``check_interleaver`` runs on every registered method.

Each check takes an :class:`~onlineeval.interleaving.base.Interleaver` and raises
:class:`ConformanceError` (an ``AssertionError``) naming what broke. Use
:func:`iter_checks` to parametrize tests, or :func:`check_interleaver` to run them all::

    from onlineeval.interleaving.checks import check_interleaver
    check_interleaver("team_draft")

Checks: output shapes and dtypes; every shown document comes from an input list and
is shown once; lists are filled to ``min(k, |union|)``; team labels are rankers (and,
for methods that say so, hold the document); same seed gives the same result;
inputs and clicks are not modified; credit / outcome / preferences agree with each
other; no click means no preference; identical rankers give no preference under
random clicks (within 4 standard errors), and two identical rankers of three none between them; the method
pickles; a real-valued ``expected_preferences``
(where a method has one) lies in [-1, 1] and has the sign of ``preferences``; the single-impression
API agrees with the batch API; bad input raises ``InputError``; multileaving methods
accept three rankers.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator

import numpy as np

from onlineeval.errors import InputError
from onlineeval.interleaving.base import Interleaver, InterleavingResult
from onlineeval.interleaving.registry import available_interleavers, get_interleaver

__all__ = ["TEAM_HOLDS_DOCUMENT", "ConformanceError", "check_interleaver", "iter_checks"]

#: methods whose team label names a ranker whose list holds the shown document
TEAM_HOLDS_DOCUMENT = frozenset({"team_draft", "team_draft_multileave", "balanced", "optimized"})


class ConformanceError(AssertionError):
    """A conformance check failed."""


def _fail(il: Interleaver, msg: str) -> ConformanceError:
    return ConformanceError(f"{il.name}: {msg}")


def _inputs(rng: np.random.Generator, n: int = 300, k: int = 6, m: int = 2) -> list[np.ndarray]:
    mats = [np.argsort(rng.random((n, k + 3)), axis=1)[:, :k].astype(np.int64) for _ in range(m)]
    mats[0][: n // 10] = mats[1][: n // 10]            # identical rows
    mats[1][n // 10: n // 5, k - 2:] = -1              # shorter lists
    mats[0][n // 5: n // 4, :2] = mats[1][n // 5: n // 4, :2]   # shared prefix
    return mats


def check_output_structure(il: Interleaver) -> None:
    rng = np.random.default_rng(0)
    mats = _inputs(rng)
    res = il.interleave(mats, rng)
    n, k = mats[0].shape
    if res.ranking.shape != (n, k) or res.ranking.dtype != np.int32:
        raise _fail(il, f"ranking must be ({n}, {k}) int32, got {res.ranking.shape} {res.ranking.dtype}")
    if res.team.shape != (n, k) or res.team.dtype != np.int8:
        raise _fail(il, f"team must be ({n}, {k}) int8, got {res.team.shape} {res.team.dtype}")
    for r in range(n):
        lists = [set(x[r][x[r] >= 0].tolist()) for x in mats]
        union = set().union(*lists)
        row = res.ranking[r]
        shown = row[row >= 0].tolist()
        if len(set(shown)) != len(shown):
            raise _fail(il, f"row {r}: duplicate document in {shown}")
        if not set(shown) <= union:
            raise _fail(il, f"row {r}: shown {shown} has documents from no input list")
        if len(shown) != min(k, len(union)) or (row[len(shown):] != -1).any():
            raise _fail(il, f"row {r}: expected {min(k, len(union))} documents then -1, got {row.tolist()}")
        teams = res.team[r][: len(shown)]
        if ((teams < 0) | (teams >= len(mats))).any() or (res.team[r][len(shown):] != -1).any():
            raise _fail(il, f"row {r}: bad team labels {res.team[r].tolist()}")
        if il.name in TEAM_HOLDS_DOCUMENT:
            for d, t in zip(shown, teams):
                if d not in lists[t]:
                    raise _fail(il, f"row {r}: document {d} credited to ranker {t} whose list lacks it")


def check_deterministic_given_seed(il: Interleaver) -> None:
    mats = _inputs(np.random.default_rng(1))
    r1 = il.interleave(mats, np.random.default_rng(5))
    r2 = il.interleave(mats, np.random.default_rng(5))
    if not (np.array_equal(r1.ranking, r2.ranking) and np.array_equal(r1.team, r2.team)):
        raise _fail(il, "the same seed gave different interleavings")


def check_inputs_untouched(il: Interleaver) -> None:
    rng = np.random.default_rng(2)
    mats = _inputs(rng)
    copies = [x.copy() for x in mats]
    res = il.interleave(mats, rng)
    clicks = rng.random(res.ranking.shape) < 0.3
    c0 = clicks.copy()
    il.credit(res, clicks)
    il.outcome(res, clicks)
    if not all(np.array_equal(a, b) for a, b in zip(mats, copies)) or not np.array_equal(clicks, c0):
        raise _fail(il, "modified the caller's arrays")


def check_credit_outcome_consistent(il: Interleaver) -> None:
    rng = np.random.default_rng(3)
    mats = _inputs(rng)
    res = il.interleave(mats, rng)
    clicks = rng.random(res.ranking.shape) < 0.3
    credit = il.credit(res, clicks)
    if credit.shape != (res.n, 2) or not np.isfinite(credit).all():
        raise _fail(il, f"credit must be finite ({res.n}, 2), got {credit.shape}")
    out = il.outcome(res, clicks)
    if out.shape != (res.n,) or out.dtype != np.int8 or not np.isin(out, (-1, 0, 1)).all():
        raise _fail(il, "outcome must be (n,) int8 in {-1, 0, 1}")
    pref = il.preferences(res, clicks)
    if pref.shape != (res.n, 2, 2) or not np.array_equal(pref, -pref.transpose(0, 2, 1)):
        raise _fail(il, "preferences must be antisymmetric (n, m, m)")
    if not np.array_equal(pref[:, 1, 0], out):
        raise _fail(il, "outcome differs from preferences[:, 1, 0]")
    none = np.zeros_like(clicks)
    if il.outcome(res, none).any() or np.abs(il.credit(res, none)).max() > 0:
        raise _fail(il, "no click must give zero credit and a tie")


def check_aa_no_preference(il: Interleaver) -> None:
    rng = np.random.default_rng(4)
    n, k = 20_000, 6
    pool = np.argsort(rng.random((40, 9)), axis=1)[:, :k]     # 40 distinct queries, repeated
    a = pool[rng.integers(0, 40, size=n)]
    res = il.interleave([a, a.copy()], rng)
    out = il.outcome(res, rng.random((n, k)) < 0.3).astype(np.float64)
    sd = out.std(ddof=1)
    if abs(out.mean()) > 4 * sd / np.sqrt(n) + 1e-12:
        raise _fail(il, f"identical rankers: mean outcome {out.mean():+.4f} beyond 4 SE ({sd / np.sqrt(n):.4f})")


def check_pickle_roundtrip(il: Interleaver) -> None:
    clone = pickle.loads(pickle.dumps(il))
    mats = _inputs(np.random.default_rng(6), n=50)
    r1 = il.interleave(mats, np.random.default_rng(9))
    r2 = clone.interleave(mats, np.random.default_rng(9))
    if not np.array_equal(r1.ranking, r2.ranking) or clone.options != il.options:
        raise _fail(il, "a pickled copy behaves differently")


def check_single_impression_api(il: Interleaver) -> None:
    lists = [[1, 2, 3, 4, 5], [3, 6, 1, 7]]
    one = il.interleave_one(lists, np.random.default_rng(3))
    width = 5
    mats = [np.array([x + [-1] * (width - len(x))]) for x in lists]
    batch = il.interleave(mats, np.random.default_rng(3))
    if list(one.ranking) != batch.ranking[0][batch.ranking[0] >= 0].tolist():
        raise _fail(il, "interleave_one differs from interleave on the same seed")
    clicked = [one.ranking[0], one.ranking[-1]]
    res = InterleavingResult(batch.ranking, batch.team, batch.rankings)
    expect = int(il.outcome(res, np.isin(batch.ranking, clicked))[0])
    if il.outcome_one(lists, one, clicked) != expect:
        raise _fail(il, "outcome_one differs from outcome")


def check_bad_input_raises(il: Interleaver) -> None:
    rng = np.random.default_rng(0)
    try:
        il.interleave([np.zeros((3, 2), dtype=int), np.zeros((4, 2), dtype=int)], rng)
    except InputError:
        pass
    else:
        raise _fail(il, "rankings with different numbers of rows must raise InputError")
    res = il.interleave([np.array([[1, 2]]), np.array([[2, 1]])], rng)
    try:
        il.outcome(res, np.zeros((1, 5), dtype=bool))
    except InputError:
        return
    raise _fail(il, "clicks of the wrong shape must raise InputError")


def check_expected_preferences(il: Interleaver) -> None:
    """Methods with a real-valued per-impression outcome (``expected_preferences``): in [-1, 1],
    antisymmetric, zero without clicks, and of the sign of ``preferences`` wherever that is not a tie."""
    expected = getattr(il, "expected_preferences", None)
    if expected is None:
        return
    rng = np.random.default_rng(8)
    mats = _inputs(rng)
    res = il.interleave(mats, rng)
    clicks = rng.random(res.ranking.shape) < 0.3
    e = np.asarray(expected(res, clicks))
    if e.shape != (res.n, 2, 2) or not np.isfinite(e).all() or np.abs(e).max() > 1.0 + 1e-12:
        raise _fail(il, f"expected_preferences must be finite ({res.n}, 2, 2) in [-1, 1]")
    if not np.allclose(e, -e.transpose(0, 2, 1), rtol=0.0, atol=1e-15):
        raise _fail(il, "expected_preferences must be antisymmetric")
    pref = il.preferences(res, clicks)
    decided = pref != 0
    if not np.array_equal(np.sign(e[decided]), pref[decided]):
        raise _fail(il, "expected_preferences has a different sign than preferences")
    if np.abs(np.asarray(expected(res, np.zeros_like(clicks)))).max() > 0:
        raise _fail(il, "no click must give expected preferences of zero")


def check_multileaving(il: Interleaver) -> None:
    if il.max_rankers is not None and il.max_rankers < 3:
        return
    rng = np.random.default_rng(7)
    mats = _inputs(rng, n=200, m=3)
    res = il.interleave(mats, rng)
    clicks = rng.random(res.ranking.shape) < 0.3
    pref = il.preferences(res, clicks)
    credit = il.credit(res, clicks)
    if pref.shape != (200, 3, 3) or credit.shape != (200, 3):
        raise _fail(il, "three rankers: preferences (n, 3, 3) and credit (n, 3) expected")
    if not np.array_equal(pref, -pref.transpose(0, 2, 1)):
        raise _fail(il, "multileaving preferences must be antisymmetric")


def check_multileave_identical_pair(il: Interleaver) -> None:
    """Three rankers, two of them identical on every query: that pair's mean preference is 0 within 4 SE, with
    clicks that depend on the slot (not on the teams). Every method here treats its rankers alike, so renaming the
    two identical ones changes nothing but their teams' names; the simulator's truth counts such a pair's
    impressions at 0 (:func:`simulations.truth_interleaving.identical_lists`) on that ground. Read as the simulator
    reads a
    method: its ``expected_preferences`` where it has one, else ``preferences``."""
    if il.max_rankers is not None and il.max_rankers < 3:
        return
    rng = np.random.default_rng(11)
    n, k = 20_000, 6
    pool = [np.argsort(rng.random((40, 9)), axis=1)[:, :k] for _ in range(2)]
    q = rng.integers(0, 40, size=n)
    a, b = pool[0][q], pool[1][q]
    res = il.interleave([a, b, b.copy()], rng)
    clicks = rng.random((n, k)) < 0.5 * 0.75 ** np.arange(k)
    expected = getattr(il, "expected_preferences", None)
    pref = np.asarray(expected(res, clicks) if expected is not None else il.preferences(res, clicks), dtype=float)
    out = pref[:, 1, 2]
    sd = out.std(ddof=1)
    if abs(out.mean()) > 4 * sd / np.sqrt(n) + 1e-12:
        raise _fail(il, f"two identical rankers of three: their pair's mean preference {out.mean():+.4f} beyond 4 SE "
                        f"({sd / np.sqrt(n):.4f})")


_CHECKS: tuple[Callable[[Interleaver], None], ...] = (
    check_output_structure,
    check_deterministic_given_seed,
    check_inputs_untouched,
    check_credit_outcome_consistent,
    check_aa_no_preference,
    check_pickle_roundtrip,
    check_single_impression_api,
    check_bad_input_raises,
    check_expected_preferences,
    check_multileaving,
    check_multileave_identical_pair,
)


def iter_checks(il: Interleaver) -> Iterator[tuple[str, Callable[[], None]]]:
    """Yield ``(check name, zero-argument callable)`` for every conformance check."""
    for fn in _CHECKS:
        yield fn.__name__, (lambda fn=fn: fn(il))


def check_interleaver(il: Interleaver | str) -> list[str]:
    """Run every conformance check on ``il`` (an instance or a registry name); return the names run.

    Raises
    ------
    ConformanceError
        On the first failing check.
    """
    inst = get_interleaver(il) if isinstance(il, str) else il
    names = []
    for name, run in iter_checks(inst):
        run()
        names.append(name)
    return names


def all_registered() -> tuple[str, ...]:
    """Names of every registered method (for test parametrization)."""
    return available_interleavers()
