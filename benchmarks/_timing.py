"""Shared timing loop of the benchmarks that compare a fast path with its reference in the same run.

A fast path (pyarrow columns, a whole-line parser) is timed against the reference it falls back to by switching the
fast function off (an attribute of its module replaced by one that declines, returning ``None``). The two alternate
round by round, so a burst of load on the machine spoils one round of one side, not the ratio; each side keeps its
best time, and the last result of each is returned for the caller to check that both read the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


def declines(*_: Any) -> None:
    """A stand-in for a fast path that declines every input (the reference then reads it)."""
    return None


def fast_against_reference(module: ModuleType, names: Sequence[str], call: Callable[[], Any], repeat: int,
                           labels: tuple[str, str] = ("fast", "reference")) -> tuple[dict[str, float], dict[str, Any]]:
    """``({label: best seconds}, {label: last result})`` of ``call()`` with ``module``'s functions ``names`` as they
    are (``labels[0]``) and replaced by :func:`declines` (``labels[1]``), alternating for ``repeat`` rounds; the
    functions are restored whatever happens."""
    originals = {name: getattr(module, name) for name in names}
    best = dict.fromkeys(labels, float("inf"))
    results: dict[str, Any] = {}
    for _ in range(repeat):
        for label in labels:
            for name in names:
                setattr(module, name, originals[name] if label == labels[0] else declines)
            try:
                start = time.perf_counter()
                results[label] = call()
                best[label] = min(best[label], time.perf_counter() - start)
            finally:
                for name in names:
                    setattr(module, name, originals[name])
    return best, results
