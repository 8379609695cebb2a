"""Between designs: the ratios of required impressions and the equal-traffic efficiencies, with their uncertainty.

:func:`design_ratios` gives each design's primary required-impressions ratio to the reference design's and its
equal-traffic efficiency (the ratio of :math:`(\\delta / se)^2` on the last simulated day; multileaving designs: the
median over the pairs they share), each with its delta-method relative SE (:func:`information_rel_se`,
:func:`ratio_rel_se`; '?' above :data:`RATIO_UNCERTAIN_REL_SE`; :func:`ratio_interval`) split into the design's own
and the reference's, the pairs of designs they cannot tell apart (:func:`indistinguishable`,
:data:`INDISTINGUISHABLE_RULE`) and the biased designs, listed apart. Re-exported by :mod:`simulations.analysis`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulations.analysis_bias import is_biased_entry
from simulations.analysis_multileaving import _is_pair
from simulations.analysis_null import null_bias_rules
from simulations.analysis_sizes import EXTRAPOLATION_FLAG


#: a method-efficiency ratio whose delta-method relative SE is above this is marked '?' (review 6, F1)
RATIO_UNCERTAIN_REL_SE = 0.25


def information_rel_se(effect: float, effect_se: float, values: np.ndarray, spread: bool = False) -> float | None:
    r"""Delta-method relative SE of the information :math:`(\delta / \bar s)^2` on one day:
    :math:`2\sqrt{(se_\delta / \delta)^2 + (se_{\bar s} / \bar s)^2}`. ``values``: the replicates' SEs of the
    day (their mean :math:`\bar s` has relative SE ``SD / (mean sqrt(n))``); with ``spread``, the replicates'
    estimates, whose SD is the day's SE (relative SE ``1 / sqrt(2 (n - 1))``, normal). None without an effect or
    with fewer than 2 finite values."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not effect or not math.isfinite(effect) or v.size < 2:
        return None
    if spread:
        rel_s = 1.0 / math.sqrt(2.0 * (v.size - 1))
    else:
        mean = float(v.mean())
        if not mean > 0:
            return None
        rel_s = float(v.std(ddof=1)) / (mean * math.sqrt(v.size))
    return 2.0 * math.hypot(effect_se / effect if effect_se else 0.0, rel_s)


def ratio_rel_se(a: float | None, b: float | None) -> float | None:
    """Delta-method relative SE of a ratio x / y of independent estimates with relative SEs ``a`` and ``b``."""
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b):
        return None
    return math.hypot(a, b)


def ratio_interval(value: float | None, rel_se: float | None, k: float = 2.0) -> list[float] | None:
    """``value`` exp(+-k rel_se): the +-k SE interval of a positive ratio on the log scale (SD of log ~ rel SE)."""
    if value is None or rel_se is None or not value > 0 or not math.isfinite(value) or not math.isfinite(rel_se):
        return None
    return [value * math.exp(-k * rel_se), value * math.exp(k * rel_se)]


#: the rule of summary.json required_impressions_ratio.indistinguishable (review 8, F4)
INDISTINGUISHABLE_RULE = (
    "not distinguishable: |ln r_a - ln r_b| < 2 SE of the difference; SE = sqrt(own_a^2 + own_b^2) of the two "
    "designs' own relative SEs when both ratios use the same reference metrics (the reference's error is shared "
    "and cancels), sqrt(own_a^2 + ref_a^2 + own_b^2 + ref_b^2) otherwise; against the reference (ratio 1): "
    "|ln r| < 2 sqrt(own^2 + ref^2). Multileaving medians: the medians of the pairs' own and reference relative "
    "SEs; their reference metrics are the pair(s) the median comes from (the middle pair, or the middle two), so "
    "two medians from different pairs keep both references' errors")


def indistinguishable(values: dict[str, Any], own: dict[str, Any], ref_rel: dict[str, Any], reference: str,
                      ref_keys: dict[str, Any] | None = None) -> list[list[str]]:
    """Pairs of designs whose log ratios differ by less than 2 SEs of their difference (review 8, F4; not the
    overlap of two +-2 SE intervals, which calls a difference at p = 0.008 indistinguishable and counts a shared
    reference's error twice): :data:`INDISTINGUISHABLE_RULE`. ``own`` / ``ref_rel``: each design's own and its
    reference's relative SE in its ratio; ``ref_keys``: the reference metrics each ratio uses (the same -> the
    reference's error cancels). A pair with an unknown value or SE is left out."""
    ref_keys = ref_keys or {}

    def ok(x: Any) -> bool:
        return isinstance(x, (int, float)) and math.isfinite(x)

    names = [d for d in values if d == reference or (ok(values.get(d)) and values[d] > 0 and ok(own.get(d))
                                                      and ok(ref_rel.get(d)))]
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if reference in (a, b):
                d = b if a == reference else a
                diff, se = math.log(values[d]), math.hypot(own[d], ref_rel[d])
            else:
                diff = math.log(values[a] / values[b])
                shared = ref_keys.get(a) is not None and ref_keys.get(a) == ref_keys.get(b)
                se = (math.hypot(own[a], own[b]) if shared
                      else math.sqrt(own[a] ** 2 + ref_rel[a] ** 2 + own[b] ** 2 + ref_rel[b] ** 2))
            if abs(diff) < 2.0 * se:
                out.append([a, b])
    return out


def _size_extrapolated(e: dict[str, Any]) -> bool:
    """An entry's analytic size extrapolated beyond :data:`EXTRAPOLATION_FLAG` x the simulated days (its
    ``analytic_required_impressions_extrapolated``, or from ``analytic_required_days_extrapolation`` in a summary
    written before that key)."""
    f = e.get("analytic_required_days_extrapolation")
    return bool(e.get("analytic_required_impressions_extrapolated")
                or (isinstance(f, (int, float)) and f > EXTRAPOLATION_FLAG))


def _pair_ratios(e: dict[str, Any], ref: dict[str, Any], is_ref: bool) -> dict[str, Any]:
    """One metric's required-impressions ratio and equal-traffic efficiency against the reference's entry, with
    their delta-method relative SEs (0 for the reference against itself), each split into the design's own and the
    reference's (``*_own_rel_se``, ``*_reference_rel_se``; review 8, F4), and whether either size is extrapolated
    beyond :data:`EXTRAPOLATION_FLAG` x the simulated days (``extrapolated``) or unstable (``unstable``; review 8,
    F5: a multileaving pair's marks)."""
    n, n_ref = e.get("analytic_required_impressions"), ref.get("analytic_required_impressions")
    ok = n is not None and n_ref is not None and math.isfinite(n) and math.isfinite(n_ref) and n_ref > 0
    info, info_ref = e.get("information_last_day"), ref.get("information_last_day")
    eff = (info / info_ref) if info is not None and info_ref else None
    if is_ref:
        zero, eff_zero = (0.0 if ok else None), (0.0 if eff is not None else None)
        return {"ratio": 1.0 if ok else None, "ratio_rel_se": zero, "ratio_own_rel_se": zero,
                "ratio_reference_rel_se": zero,
                "efficiency": 1.0 if eff is not None else None, "efficiency_rel_se": eff_zero,
                "efficiency_own_rel_se": eff_zero, "efficiency_reference_rel_se": eff_zero,
                "extrapolated": _size_extrapolated(e),
                "unstable": bool(e.get("analytic_required_impressions_unstable"))}
    own_n, ref_n = e.get("analytic_required_impressions_rel_se"), ref.get("analytic_required_impressions_rel_se")
    own_i, ref_i = e.get("information_last_day_rel_se"), ref.get("information_last_day_rel_se")
    return {"ratio": n / n_ref if ok else None,
            "ratio_rel_se": ratio_rel_se(own_n, ref_n) if ok else None,
            "ratio_own_rel_se": own_n if ok else None, "ratio_reference_rel_se": ref_n if ok else None,
            "efficiency": eff,
            "efficiency_rel_se": ratio_rel_se(own_i, ref_i) if eff is not None else None,
            "efficiency_own_rel_se": own_i if eff is not None else None,
            "efficiency_reference_rel_se": ref_i if eff is not None else None,
            "extrapolated": _size_extrapolated(e) or _size_extrapolated(ref),
            "unstable": bool(e.get("analytic_required_impressions_unstable")
                             or ref.get("analytic_required_impressions_unstable"))}


def design_ratios(designs: dict[str, dict[str, Any]], ref_name: str | None) -> dict[str, Any]:
    """The designs' primary required-impressions ratios and equal-traffic efficiencies against ``ref_name``, with
    their delta-method relative SEs (review 6, F1), the pairs of designs they cannot tell apart
    (:func:`indistinguishable`) and the biased designs: summary.json ``required_impressions_ratio`` (without
    ``reference`` and ``last_day``)."""
    primaries = {d: next(e for e in m.values() if e["primary"]) for d, m in designs.items()}
    ratios: dict[str, float | None] = {}
    efficiency: dict[str, float | None] = {}
    ratios_rel: dict[str, float | None] = {}
    efficiency_rel: dict[str, float | None] = {}
    parts: dict[str, dict[str, dict[str, Any]]] = {"ratios": {}, "equal_traffic_efficiency": {}}
    by_pair: dict[str, Any] = {}
    biased: dict[str, Any] = {}
    if ref_name is not None:
        for d, e in primaries.items():
            # review 6, F1: a multileaving design against a multileaving reference is compared on every pair they
            # share (median over pairs, range and each pair's values in by_pair), not on the first pair alone
            shared = [m for m in designs[d] if m in designs[ref_name] and _is_pair(m)]
            keys = shared if len(shared) > 1 else [e["metric"]]
            per = ({m: _pair_ratios(designs[d][m], designs[ref_name][m], d == ref_name) for m in keys}
                   if len(keys) > 1 else {keys[0]: _pair_ratios(e, primaries[ref_name], d == ref_name)})
            ref_metrics = None if len(keys) > 1 else [primaries[ref_name]["metric"]]
            if len(keys) > 1:
                by_pair[d] = per
            for out, rel_out, key, name in ((ratios, ratios_rel, "ratio", "ratios"),
                                            (efficiency, efficiency_rel, "efficiency", "equal_traffic_efficiency")):
                # the median over the pairs that have the ratio (a pair without an effect or size has none); its
                # relative SE: the median of theirs (summary.json by_pair keeps each)
                have = [p for p in per.values() if p[key] is not None]
                rels = [p[key + "_rel_se"] for p in have if p[key + "_rel_se"] is not None]
                out[d] = float(np.median([p[key] for p in have])) if have else None
                # review 9, F2: the reference pair(s) the median comes from (the middle one, or the middle two of an
                # even count): the reference's error cancels only between two medians of the same pair(s)
                mid = sorted((p[key], m) for m, p in per.items() if p[key] is not None)
                mid = mid[(len(mid) - 1) // 2:len(mid) // 2 + 1]
                used = ref_metrics if ref_metrics is not None else sorted(m for _, m in mid)
                rel_out[d] = float(np.median(rels)) if have and len(rels) == len(have) else None
                # review 8, F4: the own and the reference's relative SE apart (a shared reference cancels in the
                # difference of two designs' log ratios)
                split = {}
                for part in ("own", "reference"):
                    v = [p[f"{key}_{part}_rel_se"] for p in have if p[f"{key}_{part}_rel_se"] is not None]
                    split[part] = float(np.median(v)) if have and len(v) == len(have) else None
                parts[name][d] = {**split, "reference_metrics": used}
            if e.get("null", {}).get("biased"):
                # review 8, F2: the evidence that fired, not only the Monte Carlo null Delta
                n = e["null"]
                biased[d] = {"rules": null_bias_rules(n), "delta": n.get("delta"), "se": n.get("se"),
                             "z": n.get("z"), "exact": bool(n.get("exact")), "biased": True,
                             "biased_null_replicates": bool(n.get("biased_null_replicates")),
                             "null_mean_test": n.get("null_mean_test"), "family_pairs": n.get("family_pairs")}
            elif is_biased_entry(e):
                biased[d] = {"bias": e["estimator_bias"], "se": e["estimator_bias_se"]}

    def same(values: dict[str, Any], name: str) -> list[list[str]]:
        p = parts[name]
        return indistinguishable({d: values[d] for d in values if d not in biased},
                                 {d: v["own"] for d, v in p.items()}, {d: v["reference"] for d, v in p.items()},
                                 ref_name, {d: v["reference_metrics"] for d, v in p.items()}) if ref_name else []

    return {
        # impressions each design needs for the target power / the reference's
        "ratios": ratios,
        # (|effect| / SE)^2 of each design / the reference's on the last simulated day:
        # how many times more informative an impression is at the simulated traffic
        "equal_traffic_efficiency": efficiency,
        # designs whose ratios are not comparisons of sensitivity: a null check's evidence (rules that fired, the
        # null Delta and the null replicates' mean test) or {bias, se} of an estimate against its exact truth
        "biased": biased,
        # review 6, F1: each ratio's delta-method relative SE: sizes from their own relative SEs (the refits,
        # which draw the truth from its Monte Carlo error), efficiencies from the truths' Monte Carlo SEs and the
        # day's mean SE's own; 'uncertain' above RATIO_UNCERTAIN_REL_SE; multileaving: medians over pairs
        "ratios_rel_se": ratios_rel,
        "equal_traffic_efficiency_rel_se": efficiency_rel,
        "uncertain_rel_se": RATIO_UNCERTAIN_REL_SE,
        # review 8, F4: each ratio's relative SE split into the design's own and the reference's, with the
        # reference metrics it uses
        "rel_se_parts": parts,
        # pairs of designs whose log ratios differ by less than 2 SEs of the difference (INDISTINGUISHABLE_RULE)
        "indistinguishable": {"ratios": same(ratios, "ratios"),
                              "equal_traffic_efficiency": same(efficiency, "equal_traffic_efficiency"),
                              "rule": INDISTINGUISHABLE_RULE},
        "by_pair": by_pair,
    }
