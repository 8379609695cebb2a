"""The ratio texts: efficiency and size ratios between designs, and multileaving's pairs.

:func:`_ratio_lines` (information per impression and impressions needed relative to a reference design, with
their uncertainty: :func:`ratio_uncertainty_text`) and :func:`multileaving_lines` (the pairwise table's range over
pairs: :func:`pair_range_text`). Re-exported by :mod:`simulations.report`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from simulations.analysis import EXTRAPOLATION_FLAG, RATIO_UNCERTAIN_REL_SE
from simulations.report_null import NULL_CAUTION_MARK, biased_ratio_why
from simulations.report_numbers import rate_text, value_text


#: the 'not distinguishable' rule in the legend (review 8, F4; summary.json indistinguishable.rule in full)
INDISTINGUISHABLE_SHORT = ("|log ratio difference| < 2 SE of the difference, from both designs' own relative SEs "
                           "and the reference's, which cancel only where both ratios use the same reference pair(s)")


def estimated_metric(s: Mapping[str, Any], design: Any) -> str | None:
    """The online metric a counterfactual design of summary ``s`` estimates (each of its rows is an estimator of
    it), or ``None`` for another design."""
    metric = (((s.get("counterfactual") or {}).get(design)) or {}).get("metric")
    return str(metric) if metric else None


def design_labels(s: dict[str, Any]) -> dict[str, str]:
    """How the ratio lines name a design whose rows are not metrics of its own: a counterfactual design's ratios are
    those of its first (primary) estimator, named with it (``counterfactual (snips)``); other designs by name."""
    out = {}
    for d in s.get("counterfactual") or {}:
        primary = next((m for m, e in ((s.get("designs") or {}).get(d) or {}).items() if e.get("primary")), None)
        if primary is not None:
            out[d] = f"{d} ({primary})"
    return out


def _ratio_lines(ratios: dict[str, Any], power: float, ref_is_ab: bool,
                 unstable: set[str] | frozenset[str] = frozenset(),
                 extrapolated: set[str] | frozenset[str] = frozenset(),
                 caution: set[str] | frozenset[str] = frozenset(),
                 labels: dict[str, str] | None = None) -> list[str]:
    """Efficiency at equal traffic and the ratio of required impressions, biased designs marked, and
    '?' on a ratio whose either size is unstable (``unstable``: designs whose primary size is), '*' on one whose
    either size is extrapolated beyond :data:`EXTRAPOLATION_FLAG` x the simulated days (``extrapolated``; review 6,
    F1: the main table's '!'), '~' (:data:`simulations.report_null.NULL_CAUTION_MARK`) on both ratios of a design
    when its or the reference's size carries the main table's null-caution mark (``caution``:
    :func:`simulations.report_null.null_caution_keys`, 'design' for a primary entry, 'design/pair' for a
    multileaving pair; review 12, F2: a quick run quoted balanced as '17.8x fewer' unmarked). ``labels``: how to
    name a design (:func:`design_labels`; the rest by name)."""
    ref = ratios.get("reference")
    if not ref:
        return []
    names = labels or {}
    biased = ratios.get("biased", {})
    eff, need = [], []
    marked = False  # some ratio carries '~'
    for d in ratios["ratios"]:
        if d == ref:
            continue
        b = biased.get(d)
        mark = None if b is None else f"biased ({biased_ratio_why(b)})"
        e, r = ratios.get("equal_traffic_efficiency", {}).get(d), ratios["ratios"][d]
        e_rel = (ratios.get("equal_traffic_efficiency_rel_se") or {}).get(d)
        r_rel = (ratios.get("ratios_rel_se") or {}).get(d)
        pairs = (ratios.get("by_pair") or {}).get(d)
        cp = caution_pairs(d, ref, pairs, caution)
        if e is not None:
            tilde = "" if mark else ratio_caution(d, ref, pairs, "efficiency", caution)
            span = pair_range_text(pairs, "efficiency", cp)
            marked |= not mark and bool(tilde or NULL_CAUTION_MARK in span)
            name = names.get(d, d)
            eff.append(f"{name} {mark}" if mark
                       else f"{name} {value_text(e)}x{ratio_uncertainty_text(e_rel)}" + tilde + span)
        if r is not None or mark:
            q, star = ratio_size_marks(d, ref, pairs, r_rel, unstable, extrapolated)
            tilde = "" if mark or r is None else ratio_caution(d, ref, pairs, "ratio", caution)
            span = pair_range_text(pairs, "ratio", cp)
            marked |= not mark and bool(tilde or NULL_CAUTION_MARK in span)
            unc = ratio_uncertainty_text(r_rel) + q + star + span
            # '~' after the whole ratio: 'balanced 0.0561x +-9% (17.8x fewer)~'
            name = names.get(d, d)
            need.append(f"{name} {mark}" if mark else f"{name} {value_text(r)}x{unc} ({value_text(1 / r)}x fewer)"
                        f"{tilde}" if r < 1 else f"{name} {value_text(r)}x{unc}{tilde}")
    lines = []
    if eff:
        lines.append(f"  information per impression at equal traffic ((effect/SE)^2 on day {ratios.get('last_day')}) "
                     f"relative to {names.get(ref, ref)}: " + ", ".join(eff))
    if need:
        lines.append(f"  impressions needed for {power:.0%} power relative to {names.get(ref, ref)}: " + ", ".join(need)
                     + (f" ('*': from a size extrapolated beyond {EXTRAPOLATION_FLAG:g}x the simulated days, "
                        "the main table's '!')" if any("*" in n for n in need) else ""))
    if eff or need:
        lines.append(f"  (+-: 1 relative SE by the delta method, from the truths' Monte Carlo SEs and the SEs' own "
                     f"(sizes: their refits'); '?': above {RATIO_UNCERTAIN_REL_SE:.0%}, or an unstable size"
                     + (f"; '{NULL_CAUTION_MARK}': its or the reference's size carries the main table's "
                        f"'{NULL_CAUTION_MARK}' (bias not excluded)" if marked else "")
                     + ("; multileaving: median over the pairs, their range in brackets, '?' / '*' on the median "
                        "or a bracket end from a pair with such a size" if ratios.get("by_pair") else "") + ")")
    for key, what in (("equal_traffic_efficiency", "information per impression"), ("ratios", "impressions needed")):
        same = (ratios.get("indistinguishable") or {}).get(key) or []
        if same:
            lines.append(f"  not distinguishable ({what}; {INDISTINGUISHABLE_SHORT}): "
                         + ", ".join(f"{names.get(a, a)} ~ {names.get(b, b)}" for a, b in same))
    if eff and need and ref_is_ab:
        lines += [(f"  (the first is the efficiency over the simulated days; the second holds at the target power "
                   f"only: {ref}'s SE"),
                  ("  has a floor from returning users, se^2 = a/N + b, so near the target its required impressions "
                   "grow faster than 1/N)")]
    return lines


def size_mark_sets(s: dict[str, Any]) -> tuple[set[str], set[str]]:
    """``(unstable, extrapolated)``: the designs whose primary size is unstable / extrapolated beyond
    :data:`EXTRAPOLATION_FLAG` x the simulated days (the ratio lines' '?' and '*', terminal and report.html)."""
    designs = s.get("designs") or {}
    unstable = {d for d, ms in designs.items() for e in ms.values()
                if e.get("primary") and e.get("analytic_required_impressions_unstable")}
    far = {d for d, ms in designs.items() for e in ms.values()
           if e.get("primary") and e.get("analytic_required_impressions_extrapolated")}
    return unstable, far


def ratio_size_marks(d: str, ref: str, pairs: Any, r_rel: Any, unstable: set[str] | frozenset[str],
                     extrapolated: set[str] | frozenset[str]) -> tuple[str, str]:
    """``('?', '*')`` or '' each, of the impressions-needed ratio of ``d`` to ``ref``: '?' when either size is
    unstable (and the ratio's relative SE does not already earn it), '*' when either is extrapolated; for a
    multileaving median (``pairs``) from the pairs it is the median of (review 8, F5)."""
    if pairs:
        mid = median_pairs(pairs, "ratio")
        is_unstable = any(p.get("unstable") for p in mid)
        is_far = any(p.get("extrapolated") for p in mid)
    else:
        is_unstable, is_far = ref in unstable or d in unstable, ref in extrapolated or d in extrapolated
    return ("?" if is_unstable and not ratio_uncertain(r_rel) else ""), ("*" if is_far else "")


def multileaving_lines(s: dict[str, Any]) -> list[str]:
    """The rankers' exact online values and each multileaving design's pairwise error rate by day (review 6, F5)."""
    ml = s.get("multileaving")
    if not ml:
        return []
    key, values = ml["order_metric"], ml["online_values"]
    names = list(values)
    first = names[0]
    agree = all(v["signs_agree"] for e in ml["designs"].values() for v in e["pairs"].values())
    lines = ["", f"Multileaving: the rankers' exact online {key} (what an A/B test of each measures): "
             + ", ".join(f"{r} {value_text(values[r][key])}" for r in names)
             + f" (from {first}: " + ", ".join(f"{r} {value_text(values[r][key] - values[first][key], True)}"
                                            for r in names[1:]) + ") -> " + " > ".join(ml["order"]),
             "  pairwise error rate by day (share of replicate x pair whose estimate has the wrong sign; 0 or "
             "undefined counts as wrong) against that order"
             + (" (each method's own truth has the same sign on every pair):" if agree else
                " / against the method's own truth:")]
    for d, e in ml["designs"].items():
        exact, own = e["error_rate_exact"], {r["day"]: r["error_rate"] for r in e["error_rate_own_truth"]}
        cells = [f"day {r['day']} {rate_text(r['error_rate'])}" + ("" if agree else f"/{rate_text(own.get(r['day']))}")
                 for r in exact]
        disagree = [p for p, v in e["pairs"].items() if not v["signs_agree"]]
        differs = f"; own truth's sign differs from the exact order on {', '.join(disagree)}" if disagree else ""
        lines.append(f"  {d:14s} " + ", ".join(cells) + differs)
    return lines


def ratio_caution(d: str, ref: str, pairs: Any, key: str, caution: set[str] | frozenset[str]) -> str:
    """'~' when a ratio of design ``d`` to ``ref`` rests on a size the main table marks '~' (``caution``:
    :func:`simulations.report_null.null_caution_keys`): their primary entries', or for a multileaving median
    (``pairs``: by_pair) the pair(s) it is the median of (:func:`median_pairs`); '' otherwise."""
    if not caution:
        return ""
    if isinstance(pairs, dict) and pairs:
        mid = median_pairs(pairs, key)
        marked = caution_pairs(d, ref, pairs, caution)
        hit = any(p is q for m, p in pairs.items() if m in marked for q in mid)
    else:
        hit = d in caution or ref in caution
    return NULL_CAUTION_MARK if hit else ""


def ratio_uncertain(rel: Any) -> bool:
    """A ratio whose relative SE is unknown or above :data:`RATIO_UNCERTAIN_REL_SE` (review 6, F1)."""
    return not isinstance(rel, (int, float)) or not math.isfinite(rel) or rel > RATIO_UNCERTAIN_REL_SE


def ratio_uncertainty_text(rel: Any) -> str:
    """' +-9%' (1 relative SE; ' +-0.5%' below 1%, so a small uncertainty never reads as none), with '?' when
    above :data:`RATIO_UNCERTAIN_REL_SE`; ' +-?' when unknown."""
    if not isinstance(rel, (int, float)) or not math.isfinite(rel):
        return " +-?"
    pct = f"{100 * rel:.1g}%" if 0 < rel < 0.0095 else f"{100 * rel:.0f}%" if rel < 10 else f"{rel:.0f}x"
    return f" +-{pct}" + ("?" if rel > RATIO_UNCERTAIN_REL_SE else "")


def pair_size_marks(p: dict[str, Any]) -> str:
    """A multileaving pair's size marks in a ratio range (review 8, F5): '?' when either size is unstable, '*' when
    either is extrapolated beyond :data:`EXTRAPOLATION_FLAG` x the simulated days (by_pair's flags)."""
    return ("?" if p.get("unstable") else "") + ("*" if p.get("extrapolated") else "")


def median_pairs(pairs: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The pair(s) a median over ``pairs[*][key]`` is taken from: the middle one, or the middle two of an even
    count."""
    have = sorted((p for p in pairs.values() if isinstance(p.get(key), (int, float))), key=lambda p: p[key])
    if not have:
        return []
    k = len(have)
    return have[(k - 1) // 2: k // 2 + 1]


def pair_range_text(pairs: Any, key: str, caution: set[str] | frozenset[str] = frozenset()) -> str:
    """' [0.75-3.08 over 6 pairs]': the range of a multileaving design's per-pair ratios, or ''; a ratio range's
    end carries its pair's '?' / '*' (:func:`pair_size_marks`; review 8, F5: an end from a size extrapolated 54x
    was shown bare), and an end of either kind '~' when its pair is in ``caution`` (pair names whose size, the
    design's or the reference's, carries the main table's null-caution mark: :func:`caution_pairs`)."""
    if not isinstance(pairs, dict):
        return ""
    have = [(m, p) for m, p in pairs.items() if isinstance(p.get(key), (int, float))]
    if not have:
        return ""
    lo, hi = min(have, key=lambda mp: mp[1][key]), max(have, key=lambda mp: mp[1][key])

    def end(mp: tuple[str, dict[str, Any]]) -> str:
        m, p = mp
        return (value_text(p[key]) + (pair_size_marks(p) if key == "ratio" else "")
                + (NULL_CAUTION_MARK if m in caution else ""))

    return f" [{end(lo)}-{end(hi)} over {len(have)} pairs]"


def caution_pairs(d: str, ref: str, pairs: Any, caution: set[str] | frozenset[str]) -> frozenset[str]:
    """The pairs of a multileaving design ``d`` (``pairs``: by_pair) whose ratio to ``ref`` rests on a size the main
    table marks '~' (``caution``: :func:`simulations.report_null.null_caution_keys`)."""
    if not isinstance(pairs, dict) or not caution:
        return frozenset()
    return frozenset(m for m in pairs if f"{d}/{m}" in caution or f"{ref}/{m}" in caution)
