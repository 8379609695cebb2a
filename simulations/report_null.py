"""The null check's texts: the null-variant replicates' verdicts, bias evidence and detectable bias.

Used by the terminal summary's null table (:func:`_null_lines`), report.html and the sweep's page: the verdicts
(:func:`null_unflagged_verdict`, :func:`null_biased_verdict`), the evidence of a bias (:func:`null_bias_evidence`),
the smallest detectable bias (:func:`null_detectable_text`) and the null rejection rate's note
(:func:`null_rate_note`). Re-exported by :mod:`simulations.report`.
"""

from __future__ import annotations

import math
from typing import Any, TYPE_CHECKING

from simulations.analysis_null import NULL_BIAS_SE
from simulations.report_numbers import _fmt, _number, rate_text, se_text, value_text

if TYPE_CHECKING:
    from simulations.job import SimulationResult


#: above this |z| an unflagged null Delta is not called 'no bias detected' (review 4, F3)
NULL_NOTABLE_Z = 2.0


def _p_text(p: float) -> str:
    """A small p-value as '3e-4', a larger one to 2 significant figures."""
    if p >= 0.01:
        return f"{p:.2g}"
    mant, exp = f"{p:.0e}".split("e")
    return f"{mant}e{int(exp)}"


#: below this p-value an unflagged null check's null replicates' mean test is quoted: bias not excluded (review 9,
#: F3; its flag level is 0.01 / the run's null-checked pairs)
NULL_MEAN_NOTABLE_P = 0.05


def null_mean_caution(n: dict[str, Any]) -> str | None:
    """An unflagged null check's null replicates' mean test when its p-value is below :data:`NULL_MEAN_NOTABLE_P`
    but not below its flag level (review 9, F3): "null replicates' mean +0.00174 +- 0.00067, t 2.6, p 0.018: bias
    not excluded"; None when the check is flagged, has no mean test or its p is at least NULL_MEAN_NOTABLE_P."""
    t = n.get("null_mean_test")
    if n.get("biased") or n.get("biased_null_replicates") or not isinstance(t, dict) or not _number(t.get("pvalue")):
        return None
    if not float(t["pvalue"]) < NULL_MEAN_NOTABLE_P:
        return None
    return (f"null replicates' mean {value_text(t.get('mean'), True)} +- {se_text(t.get('se'))}, "
            f"t {_t_text(t.get('t'))}, p {_p_text(float(t['pvalue']))}: bias not excluded")


#: the main table's mark on the sizes of a design whose null check did not flag it but whose evidence is notable
NULL_CAUTION_MARK = "~"

#: the family-wise level of the '~' mark: over both tests (the null Delta's z, the null replicates' mean test) of
#: every null-checked pair of the run (the null check's own family, ``family_pairs``), Bonferroni
NULL_CAUTION_FAMILY_LEVEL = 0.05

def _caution_rule(n: dict[str, Any]) -> tuple[int, int | None]:
    """``(tests, pairs)`` of an entry's '~' rule: two tests per pair when the null replicates' mean test ran (else
    the null Delta's z alone), ``pairs`` its ``family_pairs`` (None for a summary from before it: one pair)."""
    pairs = n.get("family_pairs")
    return (2 if isinstance(n.get("null_mean_test"), dict) else 1,
            int(pairs) if isinstance(pairs, int) and not isinstance(pairs, bool) and pairs > 0 else None)


def null_caution_level(n: dict[str, Any]) -> float:
    """The p-value below which an unflagged null check's test earns the '~' mark (:func:`null_caution`):
    :data:`NULL_CAUTION_FAMILY_LEVEL` / (tests per pair x ``family_pairs``), two tests per pair when the null
    replicates' mean test ran (else the null Delta's z alone); 1 pair for a summary from before family_pairs."""
    tests, pairs = _caution_rule(n)
    return NULL_CAUTION_FAMILY_LEVEL / (tests * (pairs or 1))


def _rule_text(tests: int, pairs: int | None) -> str:
    """'0.05 / (2 tests x 3 null-checked pairs) = 0.0083': the level the rule used (review 17, F2)."""
    level = NULL_CAUTION_FAMILY_LEVEL / (tests * (pairs or 1))
    alone = "" if tests == 2 else " (the null Delta's z alone: no null replicates' mean test)"
    if pairs is None:
        return (f"{NULL_CAUTION_FAMILY_LEVEL:g} / {tests} = {level:.2g}{alone or ' (2 tests)'}, one pair assumed: "
                "the summary records no count of null-checked pairs")
    plural = "s" if pairs != 1 else ""
    if tests == 2:
        return f"{NULL_CAUTION_FAMILY_LEVEL:g} / (2 tests x {pairs} null-checked pair{plural}) = {level:.2g}"
    return f"{NULL_CAUTION_FAMILY_LEVEL:g} / {pairs} null-checked pair{plural} = {level:.2g}{alone}"


def null_caution_legend(summary: dict[str, Any] | None = None) -> str:
    """The '~' legend line (printed when a row carries the mark), stating the level :func:`null_caution` used for
    the summary's marked entries (review 17, F2: 0.05 / (2 x pairs) with the null replicates' mean test, 0.05 /
    pairs without it, and what a summary without ``family_pairs`` assumes); without a summary the rule in general
    (a sweep's points, each by its own run)."""
    rules = sorted({_caution_rule(e["null"]) for ms in ((summary or {}).get("designs") or {}).values()
                    if isinstance(ms, dict) for e in ms.values() if isinstance(e, dict) and null_caution(e)},
                   key=lambda r: (r[1] or 0, r[0]))
    if rules:
        level = "; ".join(_rule_text(*r) for r in rules)
    else:
        level = (f"{NULL_CAUTION_FAMILY_LEVEL:g} / (2 x the run's null-checked pairs), or {NULL_CAUTION_FAMILY_LEVEL:g}"
                 " / pairs in a run without the null replicates' mean test")
    at_most = (f"Under no bias some design of a run carries it in at most {NULL_CAUTION_FAMILY_LEVEL:.0%} of runs "
               "(measured: 4.1% +- 1.1% of 316 runs of three unbiased team-draft designs at "
               "configs/interleaving.yaml's "
               "sizes)")
    if any(pairs is None for _, pairs in rules):
        at_most += "; that bound needs the run's count of pairs, which this summary does not record"
    return (f"'{NULL_CAUTION_MARK}' = bias not excluded: the null check did not flag the design, but its null Delta's "
            f"z or its null replicates' mean test has p < {level} (Bonferroni over the tests of every null-checked "
            f"pair, the null check's family; the null check quotes any p < {NULL_MEAN_NOTABLE_P:g}): its sizes and "
            f"ratios may partly measure a bias, and a run with more replicates may flag it. {at_most}")


def null_caution(e: dict[str, Any]) -> bool:
    """Whether a summary entry's null check, unflagged, has notable evidence of a bias (review 12, F2: a quick run
    showed a design as the fastest that the full run flags BIASED, with the evidence only in the null table): the
    null Delta's two-sided p-value (from its z) or the null replicates' mean test's p-value below
    :func:`null_caution_level`. Under no bias the run marks some design with probability at most
    :data:`NULL_CAUTION_FAMILY_LEVEL`: 316 runs of three team-draft designs (unbiased under the null user) at
    configs/interleaving.yaml's sizes marked 13 (4.1% +- 1.1%; 1.4% +- 0.4% of designs), where the per-test rule it
    replaces (z > 2 or p < 0.05) marked 97 (30.7% +- 2.6%; 11.6% +- 1.0% of designs)."""
    n = e.get("null")
    if not isinstance(n, dict) or n.get("biased") or n.get("biased_null_replicates"):
        return False
    level = null_caution_level(n)
    z = n.get("z")
    if _number(z) and math.erfc(float(z) / math.sqrt(2.0)) < level:  # z = |null Delta| / SE: two-sided p
        return True
    t = n.get("null_mean_test")
    return isinstance(t, dict) and _number(t.get("pvalue")) and float(t["pvalue"]) < level


def null_caution_keys(s: dict[str, Any]) -> frozenset[str]:
    """The entries of a summary that carry the '~' mark (:func:`null_caution`, biased entries left out: they show
    'biased'), as 'design/metric', and 'design' when the design's primary entry does: what the ratio lines mark
    ('~' on a ratio whose either size is marked)."""
    from simulations.analysis import is_biased_entry

    keys: set[str] = set()
    for d, ms in (s.get("designs") or {}).items():
        for m, e in ms.items():
            if null_caution(e) and not is_biased_entry(e):
                keys.add(f"{d}/{m}")
                if e.get("primary"):
                    keys.add(d)
    return frozenset(keys)


#: the legend's general form (:func:`null_caution_legend` without a summary)
NULL_CAUTION_LEGEND = null_caution_legend()


def null_unflagged_parts(n: dict[str, Any]) -> tuple[str, str | None]:
    """(verdict from the null Delta's z, :func:`null_mean_caution`) of a null check the bias flag did not fire on:
    'no bias detected (z = 0.4)' only when |z| <= :data:`NULL_NOTABLE_Z` and the mean test is not notable ('no bias
    flagged (z = 0.4)' when it is), else how far below the flag z is and its p-value under no bias."""
    caution = null_mean_caution(n)
    z = n.get("z")
    if n.get("exact"):  # not flagged: the exact null Delta is 0
        return ("no bias flagged" if caution else "no bias") + " (exact null Delta 0)", caution
    none = "no bias flagged" if caution else "no bias detected"
    if not isinstance(z, (int, float)) or not math.isfinite(z):
        return none, caution
    if z <= NULL_NOTABLE_Z:
        return f"{none} (z = {z:.1f})", caution
    p = n.get("pvalue")
    p = float(p) if isinstance(p, (int, float)) else math.erfc(z / math.sqrt(2.0))
    return f"z = {z:.1f}: below the {NULL_BIAS_SE:g}-SE flag, but unlikely under no bias (p = {_p_text(p)})", caution


def null_unflagged_verdict(n: dict[str, Any]) -> str:
    """The verdict of a null check the bias flag did not fire on (:func:`null_unflagged_parts`, joined by '; ')."""
    verdict, caution = null_unflagged_parts(n)
    return f"{verdict}; {caution}" if caution else verdict


def null_direction(n: dict[str, Any], metric: str) -> str | None:
    """Which ranker a null Delta favours ('B' / 'A' for delta_ab, 'the later' / 'the earlier ranker' for a
    multileaving pair), or None when its z is at most :data:`NULL_NOTABLE_Z` (review 6, F2: no direction from noise);
    from the null replicates' mean when that is what the bias test flags."""
    z, d = n.get("z"), n.get("delta")
    if n.get("biased_null_replicates") and isinstance(n.get("mean_estimate_last_day"), (int, float)):
        z, d = math.inf, n["mean_estimate_last_day"]  # the null replicates' mean is off 0 beyond the bias t-test
    if not isinstance(z, (int, float)) or not isinstance(d, (int, float)) or not z > NULL_NOTABLE_Z or d == 0:
        return None
    if metric == "delta_ab":
        return "B" if d > 0 else "A"
    return "the " + ("later" if d > 0 else "earlier") + " ranker"


def null_rate_note(n: dict[str, Any], metric: str) -> str:
    """The 'bias or SE miscalibration?' note of a null check whose last-day rejection count is above alpha beyond a
    one-sided binomial test at the family level / pairs while no bias rule fired (review 6, F2; review 8, F2: an
    excess rate is a bias too small for the rules or SEs too small), or ''."""
    x = n.get("rate_excess")
    if n.get("biased") or not n.get("se_miscalibrated") or not isinstance(x, dict):
        return ""  # a bias explains the excess rejections
    pairs = int(x.get("pairs") or 1)
    where = (f"{x['threshold']:.2g} = {x['family_level']:g} / {pairs} null-checked pairs of the run" if pairs > 1
             else f"{x['threshold']:.2g}")
    favours = null_direction(n, metric)
    return (f"bias or SE miscalibration? {x['rejections']}/{x['replicates']} null replicates reject (one-sided p = "
            f"{_p_text(x['pvalue'])} < {where})" + (f", Delta favours {favours}" if favours else ""))


def null_mean_detectable(n: dict[str, Any]) -> tuple[float, float, float, int] | None:
    """(bias, noncentrality, t_crit, df) of the null replicates' mean test: the |mean| it flags with
    :data:`simulations.analysis.NULL_DETECTABLE_POWER`, nc x the mean's SE with nc the noncentral t's
    (:func:`simulations.analysis.t_noncentrality`; review 9, F4: t_crit x SE alone is flagged half the time), or
    None without the test."""
    from scipy import stats as sps

    from simulations.analysis_null import t_noncentrality

    t = n.get("null_mean_test")
    if not isinstance(t, dict) or not _number(t.get("se")):
        return None
    df = int(t["df"])
    crit = float(t["critical_t"]) if _number(t.get("critical_t")) else float(sps.t.isf(float(t["level"]) / 2.0, df))
    nc = float(t["noncentrality_80"]) if _number(t.get("noncentrality_80")) else t_noncentrality(float(t["level"]), df)
    d = t.get("detectable_bias_80")
    return (float(d) if _number(d) else nc * float(t["se"])), nc, crit, df


def null_detects_text(n: dict[str, Any], effect: Any) -> str:
    """What the null check detects, after 'detects ': '|bias| >= ' and :func:`null_detectable_text`, or 'any |bias|
    (the null Delta is exact)' for an exact null Delta (its rule sees any bias), with a bias's share of |effect|
    ('...; its +0.00362 is 36% of the effect')."""
    if n.get("exact"):
        d = n.get("delta")
        share = (f"; its {value_text(d, True)} is {abs(d / effect):.0%} of the effect" if _number(d) and d != 0
                 and _number(effect) and effect != 0 else "")
        return f"any |bias| (the null Delta is exact{share})"
    return "|bias| >= " + null_detectable_text(n, effect)


def null_detectable_text(n: dict[str, Any], effect: Any) -> str:
    """The |bias| each rule of the null check detects with 80% power, with its share of |effect| (review 8, F2:
    naming the rule; review 9, F4: at 80% power, not the 50% of 4 x SE and t_crit x SE): '0.00823 (89% of the
    effect) with 80% power by the 4-SE rule on the null Delta ((4 + z_0.8 0.84) x its SE); >= 0.00111 (12% of the
    effect) with 80% power by the null replicates' mean test (3.47 x its SE, noncentral t; t_crit 2.6, 99 df)'."""
    from scipy import stats as sps

    from simulations.analysis_null import NULL_DETECTABLE_POWER

    def share(d: float) -> str:
        return (f" ({abs(d / effect):.0%} of the effect)"
                if isinstance(effect, (int, float)) and effect and math.isfinite(effect) else "")

    z_power = float(sps.norm.ppf(NULL_DETECTABLE_POWER))
    power = f"{NULL_DETECTABLE_POWER:.0%} power"
    se = n.get("se")
    d = n.get("detectable_bias_80")
    if not _number(d):
        d = (NULL_BIAS_SE + z_power) * se if isinstance(se, (int, float)) else None
    text = (value_text(d) + share(d) if isinstance(d, (int, float)) and math.isfinite(d) else "-") + (
        f" with {power} by the {NULL_BIAS_SE:g}-SE rule on the null Delta (({NULL_BIAS_SE:g} + z_0.8 "
        f"{z_power:.2f}) x its SE)")
    m = null_mean_detectable(n)
    if m is not None and math.isfinite(m[0]):
        text += (f"; >= {value_text(m[0])}{share(m[0])} with {power} by the null replicates' mean test "
                 f"({m[1]:.2f} x its SE, noncentral t; t_crit {m[2]:.2g}, {m[3]} df)")
    return text


def _t_text(t: Any) -> str:
    """A t or z statistic: '-17' from 10 on, '-3.6' below."""
    if not isinstance(t, (int, float)) or not math.isfinite(t):
        return str(t)
    return f"{t:.0f}" if abs(t) >= 10 else f"{t:.1f}"


def null_level_text(n: dict[str, Any]) -> str:
    """' < 0.0033 = 0.01 / 3 null-checked pairs of the run': the level the null replicates' mean test was flagged at
    (review 9, F1: the run's family), '' for a summary from before family_pairs."""
    t, pairs = n.get("null_mean_test"), n.get("family_pairs")
    if not isinstance(t, dict) or not _number(t.get("level")) or not isinstance(pairs, int):
        return ""
    if pairs == 1:
        return f" < {float(t['level']):.2g} (the run's one null-checked pair)"
    return f" < {float(t['level']):.2g} = 0.01 / {pairs} null-checked pairs of the run"


def null_bias_evidence(n: dict[str, Any]) -> str:
    """The evidence behind a null check's BIASED (review 8, F2), each rule that fired: "null replicates' mean
    -0.00557 +- 0.00032, t -17, p 2e-31", "null Delta -0.00120 +- 0.00020, z 6.0", or the analytic-rate rule."""
    rules = n.get("bias_rules")
    if rules is None:  # a summary from before bias_rules
        from simulations.analysis_null import null_bias_rules

        rules = null_bias_rules({**n, "biased": True})
    parts = []
    t = n.get("null_mean_test")
    if "null_replicates_mean" in rules and isinstance(t, dict):
        parts.append(f"null replicates' mean {value_text(t.get('mean'), True)} +- {se_text(t.get('se'))}, "
                     f"t {_t_text(t.get('t'))}, p {_p_text(float(t.get('pvalue')))}" + null_level_text(n))
    delta = (f"exact null Delta {value_text(n.get('delta'), True)}" if n.get("exact") else
             f"null Delta {value_text(n.get('delta'), True)} +- {se_text(n.get('se'))}, z {_t_text(n.get('z'))}")
    if "null_delta" in rules:
        parts.append(delta)
    if "analytic_rate" in rules:
        parts.append(delta + ": the analytic rejection rate of the smallest Delta within 2 SE is above the band")
    return "; ".join(parts) or delta


def biased_ratio_why(b: Any) -> str:
    """Why a design's ratios are withheld (summary.json required_impressions_ratio.biased[d]): the null check's
    evidence that fired (:func:`null_bias_evidence`), 'bias ... +- ... against the truth', or a bare null Delta (a
    summary from before review 8)."""
    if isinstance(b, dict) and "bias" in b:
        return f"bias {value_text(b.get('bias'), True)} +- {se_text(b.get('se'))} against the truth"
    if isinstance(b, dict):
        return null_bias_evidence(b)
    return f"null Delta {value_text(b, True)}"


def null_biased_verdict(n: dict[str, Any], metric: str) -> str:
    """'BIASED (<evidence>; favours A when no ranker is better)' (review 8, F2: the test that fired)."""
    favours = null_direction(n, metric)
    return (f"BIASED ({null_bias_evidence(n)}"
            + (f"; favours {favours} when no ranker is better)" if favours else ")"))


def null_delta_text(n: dict[str, Any]) -> str:
    """A null check's Delta: '0' where it is exactly 0 (an exact null Delta within rounding), else its value."""
    if n.get("exact") and n.get("delta") == 0:
        return "0"
    return value_text(n.get("delta"), True)


def null_method_text(rows: list[tuple[str, str, dict[str, Any]]]) -> str:
    """How the null Deltas of the checked ``(design, metric, entry)`` rows were computed: 'by Monte Carlo', 'exact
    (click patterns mixed over the other queries)', or both."""
    exact = [bool(e["null"].get("exact")) for _, _, e in rows]
    if all(exact):
        return "exact (the click patterns' probabilities, mixed over the other queries)"
    return "by Monte Carlo, or exact where '+- SE' says so" if any(exact) else "by Monte Carlo"


def _null_lines(result: SimulationResult) -> list[str]:
    """The null check of every interleaving design next to its A/A rate."""
    s = result.summary
    rows = [(d, m, e) for d, ms in s["designs"].items() for m, e in ms.items() if e.get("null")]
    if not rows:
        return []
    days = result.config.traffic.days
    band = rows[0][2]["null"]["binomial_99_band"]
    lines = ["", ("Null check (clicks that do not depend on relevance: the users' clicks on ranker A's list for "
                  "another query,"),
             (f"  so every true effect is 0; null Delta {null_method_text(rows)}; rejects: share of the null "
              "replicates "
              f"rejecting (99% band of alpha {band[0]:.3f}-{band[1]:.3f}), analytic: from the null Delta and the "
              "day's SE):"),
             (f"  {'design':14s} {'metric':18s} {'null Delta':>10s} {'+- SE':>8s} {'z':>6s} {'rejects day 1':>13s} "
              f"{f'day {days}':>7s} {'analytic':>8s} {'A/A FPR':>8s}  verdict")]
    for design, metric, e in rows:
        n = e["null"]
        aa = e.get("aa")
        fpr = "-" if aa is None else ("0 (ties)" if aa["degenerate"] else f"{aa['false_positive_rate']:.3f}")
        verdict = null_biased_verdict(n, metric) if n["biased"] else null_unflagged_verdict(n)
        note = null_rate_note(n, metric)
        verdict += f"; {note}" if note else ""
        verdict += f"; detects {null_detects_text(n, e.get('true_effect'))}"
        rate, analytic = n["rejection_rate"], n["rejection_rate_analytic"]
        simulated = "replicates" in n
        se, z = ("exact", "-") if n.get("exact") else (se_text(n["se"]), _fmt(n["z"], ".1f"))
        lines.append(f"  {design:14s} {metric:18s} {null_delta_text(n):>10s} {se:>8s} "
                     f"{z:>6s} {rate_text(rate[0] if rate and simulated else None):>13s} "
                     f"{rate_text(rate[-1] if rate and simulated else None):>7s} "
                     f"{rate_text(analytic[-1] if analytic else None):>8s} {fpr:>8s}  {verdict}")
    return lines
