"""Root-finding for increasing functions of one variable (no scipy: the power calculator imports it).

:func:`root_increasing` solves on a bracket by Illinois regula falsi; :func:`root_from_guess`
first brackets the root by steps from a guess. Used by the sequential designs' boundaries and
drifts (:mod:`onlineeval.stats.sequential`) and the power calculator's MDE (``onlineeval power``).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["root_from_guess", "root_increasing"]


def root_increasing(f: Callable[[float], float], target: float, lo: float, hi: float, tol: float = 1e-11) -> float:
    """``x`` in ``[lo, hi]`` with ``f(x) = target`` for increasing ``f`` (Illinois regula falsi)."""
    return _root_values(f, target, lo, hi, f(lo), f(hi), tol)


def _root_values(
    f: Callable[[float], float], target: float, lo: float, hi: float, f_lo: float, f_hi: float, tol: float
) -> float:
    """:func:`root_increasing` given ``f(lo)`` and ``f(hi)`` already evaluated."""
    flo, fhi = f_lo - target, f_hi - target
    if flo >= 0:
        return lo
    if fhi <= 0:
        return hi
    side = 0
    for _ in range(200):
        x = (lo * fhi - hi * flo) / (fhi - flo)
        fx = f(x) - target
        if abs(fx) <= tol * max(abs(target), 1.0) or hi - lo < 1e-13:
            return x
        if fx < 0:
            lo, flo = x, fx
            if side == -1:
                fhi /= 2.0
            side = -1
        else:
            hi, fhi = x, fx
            if side == 1:
                flo /= 2.0
            side = 1
    return 0.5 * (lo + hi)


def root_from_guess(
    f: Callable[[float], float],
    target: float,
    guess: float,
    lo: float,
    hi: float,
    tol: float = 1e-11,
    step: float = 1.2,
) -> float:
    """``x`` in ``[lo, hi]`` with ``f(x) = target`` for increasing ``f``, starting near ``guess > 0``.

    Brackets the root by stepping from ``guess`` by factors of ``step`` (toward ``lo`` or ``hi``,
    never beyond them), then solves on that bracket with :func:`root_increasing`: a bracket of
    about 20% around the root takes 5 to 8 evaluations of ``f`` where ``[lo, hi]`` took 15 or more.
    """
    x = min(max(guess, lo), hi)
    fx = f(x)
    if fx < target:  # step up
        a, fa = x, fx
        for _ in range(200):
            b = min(a * step, hi) if a > 0 else hi
            fb = f(b)
            if fb >= target or b >= hi:
                return _root_values(f, target, a, b, fa, fb, tol)
            a, fa = b, fb
        return _root_values(f, target, a, hi, fa, f(hi), tol)
    b, fb = x, fx  # step down
    for _ in range(200):
        a = max(b / step, lo)
        fa = f(a)
        if fa < target or a <= lo:
            return _root_values(f, target, a, b, fa, fb, tol)
        b, fb = a, fa
    return _root_values(f, target, lo, b, f(lo), fb, tol)
