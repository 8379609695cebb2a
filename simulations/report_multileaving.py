"""The offline side of a multileaving run (review 12, F3): every ranker's offline value and gain over the baseline,
and each pair's offline difference next to its online outcome.

``summary["multileaving"]["offline"]`` (:func:`simulations.analysis.multileaving_offline`) holds them; the terminal
prints :func:`multileaving_offline_lines` under the rankers' exact online values (:func:`multileaving_block`), and
report.html shows the same numbers as tables (:mod:`simulations.html_report.multileaving`, which takes its rows from
:func:`offline_ranker_rows` and :func:`offline_pair_rows`). A summary written before these keys prints nothing
here.
"""

from __future__ import annotations

from typing import Any

from simulations.report_numbers import percent_text, value_text
from simulations.report_ratios import multileaving_lines

__all__ = ["OPPOSITE_MARK", "multileaving_block", "multileaving_offline_lines", "offline_pair_rows",
           "offline_ranker_rows", "offline_rankers_text", "pair_signs"]

#: a pair's mark where the offline and the exact online differences have opposite signs
OPPOSITE_MARK = "!"


def pair_signs(row: dict[str, Any]) -> str:
    """A pair row's sign comparison (:func:`simulations.analysis.sign_agreement`): its ``signs``; for a summary
    written before them (review 16, F6), from its two differences ('offline tie' where the offline one is exactly 0
    and the online one not, 'online tie' the reverse), else from ``same_sign_online``."""
    if row.get("signs"):
        return str(row["signs"])
    off, on = row.get("weighted"), row.get("exact_online")
    if isinstance(off, (int, float)) and isinstance(on, (int, float)):
        if off == 0 and on != 0:
            return "offline tie"
        if on == 0 and off != 0:
            return "online tie"
    return "same" if row.get("same_sign_online", True) else "opposite"


def _offline(s: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the multileaving summary, its offline part), or None for a summary without them."""
    ml = s.get("multileaving") or {}
    off = ml.get("offline")
    return (ml, off) if isinstance(off, dict) and off.get("rankers") else None


def _online_order(ml: dict[str, Any]) -> list[str]:
    return list(ml.get("order") or [])


def offline_rankers_text(s: dict[str, Any]) -> str:
    """'offline nDCG@10 of the same rankers (gain ..., cut-off 10; frequency-weighted): A 0.818, B 0.835 (from A: B
    +0.0171 (+2.1%); uniform over queries from A: B +0.0257) -> B > A (the online order)', or ''."""
    got = _offline(s)
    if got is None:
        return ""
    ml, off = got
    rankers, base = off["rankers"], off.get("baseline")
    conv = (off.get("conventions") or {}).get("text")
    rest = [r for r in rankers if r != base]
    order, online = list(off.get("order") or []), _online_order(ml)
    same = order == online
    return (f"offline {off.get('metric')} of the same rankers ({conv + '; ' if conv else ''}frequency-weighted): "
            + ", ".join(f"{r} {value_text(v.get('weighted'))}" for r, v in rankers.items())
            + (f" (from {base}: " + ", ".join(
                f"{r} {value_text(rankers[r].get('gain_weighted'), True)} "
                f"({percent_text(rankers[r].get('relative_gain_weighted'))})" for r in rest)
               + f"; uniform over queries from {base}: "
               + ", ".join(f"{r} {value_text(rankers[r].get('gain_uniform'), True)}" for r in rest) + ")"
               if rest else "")
            + (f" -> {' > '.join(order)}" if order else "")
            + (" (the online order)" if same and order else
               f" (online: {' > '.join(online)})" if order and online else ""))


def _design_truths(ml: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each multileaving design's pairs' true Delta (its own Monte Carlo truth)."""
    return {d: {p: v.get("own_truth") for p, v in (e.get("pairs") or {}).items()}
            for d, e in (ml.get("designs") or {}).items()}


def _exact(ml: dict[str, Any], pair: str) -> Any:
    """The rankers' exact online difference of a pair (the same in every design that has it)."""
    for e in (ml.get("designs") or {}).values():
        v = (e.get("pairs") or {}).get(pair)
        if v is not None:
            return v.get("exact_difference")
    return None


def offline_ranker_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per ranker: its offline value and gain over the baseline (weighted, relative, uniform) and its exact
    online value of the order metric and difference from the baseline's; [] without the summary's keys."""
    got = _offline(s)
    if got is None:
        return []
    ml, off = got
    key, online, base = ml.get("order_metric"), ml.get("online_values") or {}, off.get("baseline")
    b_online = (online.get(base) or {}).get(key)
    rows = []
    for r, v in off["rankers"].items():
        o = (online.get(r) or {}).get(key)
        rows.append({"ranker": r, **v, "online": o,
                     "online_gain": o - b_online if isinstance(o, float) and isinstance(b_online, float) else None})
    return rows


def offline_pair_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per pair: its offline difference (weighted, relative, uniform), the rankers' exact online difference,
    each design's true Delta (``designs``: design -> value, None where the design has not the pair) and whether the
    offline and exact online differences have the same sign; [] without the summary's keys."""
    got = _offline(s)
    if got is None:
        return []
    ml, off = got
    truths = _design_truths(ml)
    return [{"pair": p, **v, "exact_online": _exact(ml, p), "designs": {d: t.get(p) for d, t in truths.items()}}
            for p, v in (off.get("pairs") or {}).items()]


def multileaving_offline_lines(s: dict[str, Any]) -> list[str]:
    """The terminal's offline lines of a multileaving run: the rankers' values and gains, then one line per pair
    with its offline difference, the exact online difference and each design's true Delta; [] for a summary
    without them."""
    text = offline_rankers_text(s)
    if not text:
        return []
    ml, off = _offline(s)  # type: ignore[misc]
    key = ml.get("order_metric")
    pairs = offline_pair_rows(s)
    lines = [f"  {text}"]
    if not pairs:
        return lines
    designs = list(pairs[0]["designs"])
    lines.append(f"  offline gain against online outcome by pair (+ favours the first ranker): the offline "
                 f"{off.get('metric')} difference (frequency-weighted; relative to the second ranker's), the exact "
                 f"online {key} difference, each design's true Delta ({', '.join(designs)}); "
                 f"'{OPPOSITE_MARK}': the offline and exact online differences have opposite signs; 'offline tie' "
                 f"('online tie'): that difference is exactly 0, the other not:")
    marks = {"same": "", "opposite": f" {OPPOSITE_MARK}"}
    for row in pairs:
        cells = " ".join(f"{d} {value_text(t, True):>10s}" for d, t in row["designs"].items())
        signs = pair_signs(row)
        mark = marks.get(signs, f" {signs}")
        lines.append(f"    {row['pair']:14s} offline {value_text(row.get('weighted'), True):>10s} "
                     f"{'(' + percent_text(row.get('relative_weighted')) + ')':>8s}  online "
                     f"{value_text(row.get('exact_online'), True):>10s}  {cells}{mark}")
    return lines


def multileaving_block(s: dict[str, Any]) -> list[str]:
    """The terminal's multileaving block (:func:`simulations.report_ratios.multileaving_lines`) with the offline
    lines right under the rankers' exact online values (at its end if that line is not found)."""
    lines = multileaving_lines(s)
    offline = multileaving_offline_lines(s)
    at = next((i + 1 for i, ln in enumerate(lines) if ln.startswith("Multileaving:")), len(lines))
    return lines[:at] + offline + lines[at:]
