"""The terminal view of the shrinkage study (:mod:`simulations.shrinkage`; the plots are in
:mod:`simulations.shrinkage_plots`): :func:`format_shrinkage` prints a study's dictionary, :func:`mde_cell`
one day of an MDE curve with its interval (also used by the HTML report).

Only the standard library: it reads the study's JSON-ready dictionary, nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["format_shrinkage", "mde_cell"]


def _fmt(v: float | None, spec: str = ".3g") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def _mde_at(m: Mapping[str, Any], key: str, i: int, flag: str = "") -> str:
    """Day ``i`` of an MDE entry's ``key`` list for the terminal: '-' without a curve, 'unbounded' for a null."""
    values = m.get(key) or []
    if not values:
        return "-"
    return "unbounded" if values[i] is None else f"{_fmt(values[i], '.3g')}{flag}"


def mde_cell(m: Mapping[str, Any], i: int) -> str:
    """One day of an MDE entry as printed: ``0.0275 [0.024, 0.032]``; ``0.0217! [0.0113, unbounded]`` when the
    slope's CI includes 0 (the MDE flagged with '!'); ``-`` without a curve."""
    mid = m["offline_mde"][i] if i < len(m.get("offline_mde") or []) else None
    if mid is None:
        return "-" if not m.get("offline_mde") else "unbounded"
    low = (m.get("offline_mde_low") or [None] * (i + 1))[i]
    high = (m.get("offline_mde_high") or [None] * (i + 1))[i]
    flag = "!" if m.get("slope_ci_includes_zero") else ""
    return f"{_fmt(mid, '.3g')}{flag} [{_fmt(low, '.3g')}, {'unbounded' if high is None else _fmt(high, '.3g')}]"


def format_shrinkage(study: Mapping[str, Any], primary_only: bool = True) -> str:
    """The terminal text: per group and design the relation (the sentence, the slope with
    and without intercept), sign agreement, Kendall's tau, then the MDE table."""
    level = study["level"]
    lines = [(f"shrinkage: offline {study['offline_metric']} delta -> true online effect (improvement direction); "
              f"weighted least squares (Paule-Mandel tau^2, modified Knapp-Hartung {level:.0%} CIs); systems = the "
              "distinct (A, B, collection) pairs of a group")]
    for group in study["groups"]:
        lines.append(f"[{group['label']}]")
        lines += [f"  warning: {w}" for w in group.get("warnings") or []]
        for rel in group["relations"]:
            if primary_only and not rel["primary"]:
                continue
            name = f"{rel['design']}/{rel['metric']}"
            fit, both = rel["through_origin"], rel["with_intercept"]
            truth = "exact truth" if rel["truth"] == "exact" else "Monte Carlo truth"
            if fit is None and rel.get("pairs_with_several_truths") and rel["n_systems"] > 1:
                lines.append(f"  {name}: {rel['pairs_with_several_truths']} of {rel['n_systems']} system(s) seen "
                             "with several true effects (user populations): no relation fitted; set shrinkage_by")
            elif fit is None:
                lines.append(f"  {name}: {rel['n_systems']} system(s) (distinct ranker pairs): too few to fit a "
                             "relation")
            else:
                lo, hi = fit["slope_ci"]
                text = (f"  {name} ({rel['n_systems']} systems, {truth}): slope {fit['slope']:.3g} [{lo:.3g}, {hi:.3g}]"
                        f", scatter tau {math.sqrt(fit['tau2']):.2g}")
                if both is not None:
                    ilo, ihi = both["intercept_ci"]
                    text += f"; with intercept: slope {both['slope']:.3g}, intercept {both['intercept']:+.2g} " \
                            f"[{ilo:+.2g}, {ihi:+.2g}]"
                lines.append(text)
                if rel["sentence"]:
                    lines.append(f"    {rel['sentence']}")
                if rel["sentence_with_intercept"]:
                    lines.append("    the intercept's CI excludes 0 (the relation does not pass through the origin); "
                                 f"with the intercept: {rel['sentence_with_intercept']}")
            t = rel["sign_agreement"]["truth"]
            share = t["share_disagree"]
            unit = "distinct truths" if rel.get("pairs_with_several_truths") else "systems"
            lines.append(f"    sign: the true online effect disagrees with the offline delta for {t['disagree']} of "
                         f"{t['agree'] + t['disagree']} {unit} ({_fmt(share, '.0%')})"
                         + (f", {t['undetermined']} within MC error of 0" if t["undetermined"] else "")
                         + (f", {t['zero_offline']} with no offline delta" if t["zero_offline"] else ""))
            d = rel["sign_agreement"]["decision_mean"]
            days = sorted({e["days"] for e in rel["sign_agreement"]["decision"]})
            lines.append(f"    one experiment of {'/'.join(map(str, days))} day(s) ranks the pair the other way in "
                         f"{_fmt(d['share_opposite_sign'], '.1%')} of runs (normal theory "
                         f"{_fmt(d['analytic_opposite_sign'], '.1%')}), significantly so in "
                         f"{_fmt(d['share_significant_opposite'], '.1%')} (mean over the group's points)")
            if rel.get("biased_points"):
                lines.append(f"    biased on {rel['biased_points']} of {rel['n_points']} points (the point's null "
                             "check, its mean against the exact truth, an off-policy estimate's bias check or its "
                             "target outside the logger's support): no normal-theory share or MDE from them")
            k = rel["kendall_tau"]
            n_sys, n_truths = k.get("n_systems"), k.get("n_truths")
            systems_text = f"{n_sys} system{'' if n_sys == 1 else 's'}"
            over = f"{n_truths} distinct truths of {systems_text}" if n_truths not in (None, n_sys) else systems_text
            text = f"    Kendall tau, offline vs true online order ({over}): {_fmt(k['truth'], '.2f')}"
            if k["truth"] is None and n_sys is not None and n_sys < 2:
                text += " (needs 2 systems)"
            if k["truth_mc_sd"] is not None:
                text += f" (MC sd {k['truth_mc_sd']:.2f})"
            for e in k["experiment"]:
                text += (f"; one experiment per system of {e['days']} d at {e['queries_per_day']:g} queries/day: "
                         + (f"- ({e['note']})" if e.get("note") else
                            f"{_fmt(e['mean'], '.2f')} +- {_fmt(e['sd'], '.2f')}"))
            lines.append(text)
    mdes = [(", ".join(str(v) for v in g["key"].values()) or g["label"], m) for g in study["groups"] for m in g["mde"]]
    if mdes:
        first = mdes[0][1]
        show = [d for d in (1, 3, 7, 14, 28) if d <= len(first["days"])]
        lines.append(f"MDE: smallest offline {study['offline_metric']} gain detectable with power {first['power']:g} "
                     f"at alpha {first['alpha']:g} (two-sided) in D days, through the fitted slope "
                     f"[interval from the slope's {level:.0%} CI; unbounded: the slope's CI includes 0, the MDE "
                     "flagged '!']")
        head = f"  {'group':<24} {'design':<14} {'queries/day':>11}" + "".join(f" {f'{d} d':>9}" for d in show)
        lines.append(head)
        for label, m in mdes:
            flag = "!" if m.get("slope_ci_includes_zero") else ""
            cells = [f" {_mde_at(m, 'offline_mde', d - 1, flag):>9}" for d in show]
            text = f"  {label[:24]:<24} {m['design'][:14]:<14} {m['queries_per_day']:>11g}" + "".join(cells)
            if m["note"]:
                text += f"  ({m['note']})"
            lines.append(text)
            if m["offline_mde"]:  # the interval from the slope's CI, under the MDE
                for key, name in (("offline_mde_low", "CI low"), ("offline_mde_high", "CI high")):
                    lines.append(f"  {'':<24} {'':<14} {name:>11}"
                                 + "".join(f" {_mde_at(m, key, d - 1):>9}" for d in show))
    return "\n".join(lines)
