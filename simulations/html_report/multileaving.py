"""The multileaving section of a simulate report (review 12, F3): every ranker's offline value and gain over the
baseline next to its exact online value, and each pair's offline difference next to its online outcome (the rankers'
exact difference and each design's true Delta), as the terminal's lines under 'Multileaving:'
(:mod:`simulations.report_multileaving`, whose rows and texts it shows). ``None`` for a run without multileaving
designs and for a summary written before ``multileaving.offline``."""

from __future__ import annotations

from typing import Any

from simulations.html_report.page import Html, join, note, table, tag
from simulations.report_multileaving import offline_pair_rows, offline_ranker_rows, offline_rankers_text, pair_signs
from simulations.report_numbers import percent_text, value_text

__all__ = ["multileaving_section"]


def multileaving_section(summary: dict[str, Any]) -> Html | None:
    """The section's body, or ``None`` when the summary has no multileaving offline values."""
    text = offline_rankers_text(summary)
    if not text:
        return None
    ml = summary["multileaving"]
    off = ml["offline"]
    key, base, metric = ml.get("order_metric"), off.get("baseline"), off.get("metric")
    rankers = table(
        ["ranker", f"offline {metric} (freq-wtd)", f"gain over {base}", "rel.", "uniform over queries",
         f"gain over {base} (uniform)", f"online {key} (exact)", f"online difference from {base}"],
        [[r["ranker"], value_text(r.get("weighted")), value_text(r.get("gain_weighted"), True),
          percent_text(r.get("relative_gain_weighted")), value_text(r.get("uniform")),
          value_text(r.get("gain_uniform"), True), value_text(r.get("online")), value_text(r.get("online_gain"), True)]
         for r in offline_ranker_rows(summary)],
        caption=f"Each ranker offline and online (gains and differences from {base})")
    rows = offline_pair_rows(summary)
    body: list[Any] = [tag("p", text[0].upper() + text[1:] + ".", cls="lead"), rankers]
    if rows:
        designs = list(rows[0]["designs"])
        body.append(table(
            ["pair", f"offline {metric} difference", "rel. (to the second ranker)", "uniform over queries",
             f"online {key} difference (exact)", *(f"{d}: true Delta" for d in designs), "signs"],
            [[r["pair"], value_text(r.get("weighted"), True), percent_text(r.get("relative_weighted")),
              value_text(r.get("uniform"), True), value_text(r.get("exact_online"), True),
              *(value_text(r["designs"].get(d), True) for d in designs),
              pair_signs(r)] for r in rows],
            caption="Offline gain against online outcome, by pair (+ favours the first ranker)",
            text_columns=(0, 5 + len(designs))))
    conv = (off.get("conventions") or {}).get("text")
    body.append(note(
        f"Offline: {metric}" + (f" ({conv})" if conv else "") + ", frequency-weighted unless 'uniform' (every query "
        f"once), from the world's labels and the rankers' shown lists, as the Offline line's A and B. Online: the "
        f"rankers' exact {key} (what an A/B test of each measures) and each design's true Delta (its expected "
        "preference, from the truth Monte Carlo; methods differ in scale). 'opposite': the offline and the exact "
        "online differences have opposite signs; 'offline tie' ('online tie'): that difference is exactly 0, the "
        "other not (no contradiction)."))
    return join(body)
