"""The null check across a sweep's points (review 9, F1).

Each point is one run, and its null check flags an interleaving design BIASED when the null replicates' last-day
mean misses 0 at 0.01 / the run's null-checked pairs (:func:`simulations.analysis.null_check`): under no bias, about
1% of runs flag something. A sweep of P points holds P such families: with 20 points, 1 - 0.99^20 = 18% of sweeps of
unbiased designs would flag some point and withhold its sizes. Across the sweep the family is every null-checked pair
of every point (``checks``, the points' ``family_pairs`` summed), at :data:`NULL_RATE_FAMILY_LEVEL` / ``checks``:

- ``BIASED`` (sizes withheld, the point left out of the shrinkage study's normal-theory shares and MDE): the null
  replicates' mean test at the sweep's level, or the 4-SE rule on the null Delta (about 6.3e-5 per check, so at most
  ``checks`` x 6.3e-5 false flags), the analytic-rate rule without null replicates, or an estimate against its exact
  truth / outside the logger's support (not null checks);
- ``BIASED?`` (a weaker mark: sizes kept, the point kept in the study): flagged only by the null replicates' mean test
  at its run's level, not at the sweep's. Its point's own report still withholds the sizes (one run's family).

``expected_false_flags``: the number of flags expected if every design were unbiased, the sum of the checks' levels
(the runs' levels for the mean test, and the 4-SE rule's false-alarm probability NULL_BIAS_P); for the hard marks, the
sweep's level summed (0.01) plus NULL_BIAS_P per check. It reads the points' summaries and computes nothing else.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from simulations.analysis import NULL_BIAS_P, NULL_BIAS_SE, NULL_RATE_FAMILY_LEVEL, is_biased_entry

__all__ = ["HARD", "WEAK", "null_family", "null_family_text", "mark_of", "sized_entry", "WEAK_WHY"]

#: the marks of a (point, design, metric) entry over the sweep
HARD, WEAK = "BIASED", "BIASED?"

#: why a 'BIASED?' entry keeps its sizes
WEAK_WHY = ("flagged by its null replicates' mean test at its run's level only, not at the sweep's (0.01 / every "
            "point's null-checked pairs): about 1% of runs of unbiased designs are flagged so; its sizes are kept "
            "here and withheld in the point's own report")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _mark(entry: Mapping[str, Any], level: float) -> str:
    """'' (not flagged), :data:`WEAK` or :data:`HARD` for one entry at the sweep's ``level``."""
    if not is_biased_entry(dict(entry)):
        return ""
    n = entry.get("null") or {}
    if entry.get("biased_estimate") or entry.get("no_support") or not n.get("biased"):
        return HARD  # not the null check's mean test: an estimate against its exact truth, or no support
    rules = n.get("bias_rules") or []
    if any(r != "null_replicates_mean" for r in rules):
        return HARD  # the 4-SE rule on the null Delta (or the analytic-rate rule) fired
    p = (n.get("null_mean_test") or {}).get("pvalue")
    return HARD if not _number(p) or p < level else WEAK


def null_family(points: Mapping[int, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The sweep's null-check family over the points' summaries ``{point: summary}``: ``checks`` (every point's
    null-checked pairs: its ``family_pairs``, or its count of null checks for a summary without it), ``level`` =
    0.01 / checks, the counts of flags at the runs' levels (``flagged``), ``hard`` and ``weak``, the expected false
    flags of each under no bias, and ``cells`` (point, design, metric, mark, mean test p-value and run level); None
    when no point has a null check."""
    found: list[tuple[int, str, str, Mapping[str, Any]]] = []
    checks = 0
    for point in sorted(points):
        designs = (points[point] or {}).get("designs") or {}
        mine = [(point, str(d), str(m), e) for d, ms in designs.items() if isinstance(ms, Mapping)
                for m, e in ms.items() if isinstance(e, Mapping) and isinstance(e.get("null"), Mapping)]
        if not mine:
            continue
        pairs = [e["null"].get("family_pairs") for *_, e in mine]
        checks += max((int(p) for p in pairs if _number(p)), default=len(mine))
        found += mine
    if not found:
        return None
    level = NULL_RATE_FAMILY_LEVEL / checks
    cells = []
    expected_run = 0.0
    for point, design, metric, e in found:
        n = e["null"]
        t = n.get("null_mean_test") if isinstance(n.get("null_mean_test"), Mapping) else {}
        run_level = t.get("level")
        expected_run += (float(run_level) if _number(run_level) else 0.0) + NULL_BIAS_P
        cells.append({"point": point, "design": design, "metric": metric, "mark": _mark(e, level),
                      "pvalue": t.get("pvalue"), "run_level": run_level,
                      "flagged_at_run_level": bool(n.get("biased"))})
    return {
        "checks": checks, "points": len({c["point"] for c in cells}), "family_level": NULL_RATE_FAMILY_LEVEL,
        "level": level,
        "flagged": sum(c["flagged_at_run_level"] for c in cells),
        "expected_false_flags": expected_run,
        "hard": sum(c["mark"] == HARD for c in cells if c["flagged_at_run_level"]),
        "expected_false_hard": NULL_RATE_FAMILY_LEVEL + checks * NULL_BIAS_P,
        "weak": sum(c["mark"] == WEAK for c in cells),
        "rule": (f"BIASED: the null replicates' mean test at 0.01 / {checks} null-checked pairs of the sweep's "
                 f"points, or the {NULL_BIAS_SE:g}-SE rule on the null Delta; BIASED?: at its run's level only "
                 "(sizes kept)"),
        "cells": cells,
    }


def mark_of(family: Mapping[str, Any] | None, point: Any, design: Any, metric: Any) -> str:
    """The mark of one (point, design, metric) in ``family`` (:func:`null_family`): '', BIASED or BIASED?."""
    for c in (family or {}).get("cells") or []:
        if c.get("point") == point and c.get("design") == design and c.get("metric") == metric:
            return str(c.get("mark") or "")
    return ""


def sized_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A 'BIASED?' entry with the analytic power, days and sizes its point withheld (``analytic_if_unbiased``)
    back in their places, and its null check unflagged (``biased`` false, ``sweep_mark`` BIASED?), for the sweep's
    tables and the shrinkage study."""
    e = copy.deepcopy(dict(entry))
    kept = e.pop("analytic_if_unbiased", None) or {}
    power = kept.pop("analytic_power", None)
    e.update(kept)
    e["final_day"] = {**(e.get("final_day") or {}), "analytic_power": power}
    e.pop("analytic_withheld", None)
    e["null"] = {**(e.get("null") or {}), "biased": False, "sweep_mark": WEAK}
    return e


def null_family_text(family: Mapping[str, Any] | None) -> str:
    """One line for the terminal and the sweep page: the flags at the runs' levels and at the sweep's, each with the
    number expected if every design were unbiased; '' without null checks."""
    if not family:
        return ""
    return (f"Null check over the sweep: {family['flagged']} of {family['checks']} null-checked pairs flagged at "
            f"their run's level (expected if every design were unbiased: {family['expected_false_flags']:.2f}); "
            f"{family['hard']} BIASED at the sweep's level {family['level']:.2g} = 0.01 / {family['checks']} or by "
            f"the {NULL_BIAS_SE:g}-SE rule (expected: {family['expected_false_hard']:.3f}), sizes withheld; "
            f"{family['weak']} BIASED? (flagged at its run's level only: sizes kept)")
