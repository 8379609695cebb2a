"""Multiple comparisons in the simulate report: Holm and Benjamini-Hochberg across a design's tests.

An A/B design reports several metrics and a multileaving design one preference per pair of
rankers: several tests of one experiment. Reading each at ``alpha`` lets the chance of *some*
false positive grow with their number. With ``designs[i].analysis.multiple: holm | bh`` the
design's tests at the fixed horizon (the last day's p-values) form one family per replicate
and are adjusted with :func:`onlineeval.stats.multiple.adjust_pvalues`: Holm (1979) controls
the family-wise error rate under any dependence (the pairs of a multileaving matrix share
impressions, so they are dependent), Benjamini-Hochberg (1995) the false discovery rate
(for independent or positively dependent tests).

Reported per design (:func:`multiple_summary`), raw next to adjusted:

- per test: the share of replicates rejecting (real pair: with the sign of the true effect,
  as ``power``; A/A: either way);
- the family: under A/A (every hypothesis true) the family-wise false-positive rate, the
  share of replicates with at least one rejection, against the exact 99% binomial band of
  ``alpha``; on the real pair the share of replicates with at least one rejection and the mean
  false discovery proportion (a rejection is false when the test's truth is not detectable,
  i.e. within 2 Monte Carlo SEs of 0, or when its estimate has the wrong sign).

  Review 6, F7: an A/B family's truths are exact and non-zero, so there no test is null and
  that proportion is the share of rejections with the wrong sign (type S errors) only; the
  report then says so (``fdp_counts``: ``"wrong sign"`` or ``"null or wrong sign"``). A test
  whose true effect is so small that it rejects about as often as a null one has many of its
  rejections from noise though they are counted true. Review 8, F3: which tests those are is a
  fixed property of the test, not of the replicate count (:data:`NEAR_NULL_RULE`): a null test
  rejects at rate ``alpha``, this one at its analytic rejection probability ``q`` (either sign,
  :func:`rejection_probability`, from the main table's analytic power at the horizon), so about
  ``alpha / q`` of its rejections are noise (:func:`noise_share`, ``per_test[m].noise_share``);
  a test with ``q <= 2 alpha`` (analytic power about ``<= 2 alpha``) has at least half of its
  rejections from noise and is listed as ``near_null`` with its analytic power
  (``near_null_noise_share``), and ``false_discovery_proportion_near_null_*`` counts its
  rejections as false too.

Raw decisions are ``p < alpha`` (as everywhere in the report); adjusted decisions are
``adjusted p <= alpha``, the procedures' own rule. A test undefined in a replicate (NaN
p-value: too few users or comparisons) is left out of that replicate's family.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["NEAR_NULL_NOISE_SHARE", "NEAR_NULL_RULE", "family_pvalues", "multiple_lines", "multiple_summary",
           "noise_share", "rejection_probability"]

#: a test is near-null when at least this share of its rejections would occur with no effect
NEAR_NULL_NOISE_SHARE = 0.5

#: the near-null rule in words (summary.json multiple[design].near_null_rule)
NEAR_NULL_RULE = (
    "near-null test: one whose analytic rejection probability q at the horizon (either sign, normal approximation: "
    "q = Phi(d - z) + Phi(-d - z), d = z + Phi^-1(analytic power), z = z_{1-alpha/2}) is at most 2 alpha, so that "
    "the share of its rejections that a null test would make as well, alpha / q, is at least 1/2 (about analytic "
    "power <= 2 alpha); a fixed property of the test, independent of the number of replicates; its rejections are "
    "counted as false in the near-null false discovery proportion")


def rejection_probability(power: float, alpha: float) -> float:
    """Analytic probability of rejecting either way, from the right-sign analytic power
    :math:`\\Phi(d - z)` of a two-sided z-test at ``alpha``: :math:`\\Phi(d - z) + \\Phi(-d - z)`."""
    from scipy import stats as sps

    z = float(sps.norm.ppf(1 - alpha / 2))
    d = z + float(sps.norm.ppf(power))
    return float(power + sps.norm.cdf(-d - z))


def noise_share(power: float, alpha: float) -> float:
    """About this share of a test's rejections would occur with no effect: ``alpha / q`` (``q`` from
    :func:`rejection_probability`), at most 1; NaN for an undefined power."""
    if power is None or not np.isfinite(power):
        return float("nan")
    return float(min(1.0, alpha / rejection_probability(power, alpha)))


def family_pvalues(rows: pd.DataFrame, design: str, aa: bool, metrics: list[str]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(replicates, tests) p-values and estimates of ``metrics`` on the design's last day."""
    sub = rows[(rows["design"] == design) & (rows["aa"] == aa) & (rows["metric"].isin(metrics))]
    if not len(sub):
        return np.empty((0, len(metrics))), np.empty((0, len(metrics)))
    last = sub[sub["day"] == sub["day"].max()]
    p = last.pivot_table(index="replicate", columns="metric", values="pvalue", aggfunc="first", dropna=False)
    e = last.pivot_table(index="replicate", columns="metric", values="estimate", aggfunc="first", dropna=False)
    p = p.reindex(columns=metrics)
    e = e.reindex(columns=metrics)
    return p.to_numpy(dtype=float), e.to_numpy(dtype=float)


def _fdp(reject: np.ndarray, right: np.ndarray) -> float:
    """Mean over replicates of false rejections / max(rejections, 1)."""
    false = (reject & ~right).sum(axis=1)
    return float(np.mean(false / np.maximum(reject.sum(axis=1), 1)))


def multiple_summary(rows: pd.DataFrame, designs: dict[str, Any], config: Any,
                     side_rows: pd.DataFrame | None = None) -> dict[str, Any]:
    """Raw and Holm / Benjamini-Hochberg adjusted decisions of every design with
    ``analysis.multiple`` other than ``none`` (see the module docstring for the keys).

    With ``side_rows`` (the side records holding the interleaving designs' null-variant rows ``null:<pair>``),
    a design whose A/A is identically 0 (probabilistic multileaving) gets its family-wise rate on the null
    variant instead: ``null`` (review 6, F5), with the keys of ``aa``."""
    from onlineeval.stats.multiple import reject_adjusted

    alpha = config.analysis.alpha
    out: dict[str, Any] = {}
    for dc in config.designs:
        method = dc.analysis.multiple
        entries = designs.get(dc.name)
        if method == "none" or not entries:
            continue
        metrics = list(entries)
        p, est = family_pvalues(rows, dc.name, False, metrics)
        if p.size == 0:
            continue
        truth = np.array([entries[m]["true_effect"] for m in metrics], dtype=float)
        real_null = np.array([not entries[m].get("detectable", True) or entries[m]["true_effect"] == 0
                              for m in metrics])
        with np.errstate(invalid="ignore"):
            raw = p < alpha
        adj = reject_adjusted(np.where(np.isfinite(p), p, np.nan), alpha, method)
        right = (np.sign(est) == np.sign(truth)) & ~real_null
        # review 6, F7 / review 8, F3: tests at least half of whose rejections are noise (fixed rule, not R-dependent)
        powers = [(entries[m].get("final_day") or {}).get("analytic_power") for m in metrics]
        shares = [noise_share(powers[j], alpha) if not real_null[j] else float("nan") for j in range(len(metrics))]
        near_null = np.array([np.isfinite(shares[j]) and shares[j] >= NEAR_NULL_NOISE_SHARE
                              for j in range(len(metrics))], dtype=bool)

        entry: dict[str, Any] = {
            "method": method,
            "family": metrics,
            "tests": len(metrics),
            "horizon_day": int(rows[rows["design"] == dc.name]["day"].max()),
            "replicates": int(p.shape[0]),
            "per_test": {
                m: {"power_raw": float(np.mean(raw[:, j] & right[:, j])),
                    "power_adjusted": float(np.mean(adj[:, j] & right[:, j])),
                    "rejection_rate_raw": float(np.mean(raw[:, j])),
                    "rejection_rate_adjusted": float(np.mean(adj[:, j])),
                    "noise_share": shares[j]}
                for j, m in enumerate(metrics)
            },
            "any_rejection_raw": float(np.mean(raw.any(axis=1))),
            "any_rejection_adjusted": float(np.mean(adj.any(axis=1))),
            "false_discovery_proportion_raw": _fdp(raw, right),
            "false_discovery_proportion_adjusted": _fdp(adj, right),
            # what a false discovery can be here: with no null test, only a rejection of the wrong sign (type S)
            "null_tests": [m for j, m in enumerate(metrics) if real_null[j]],
            "fdp_counts": "null or wrong sign" if real_null.any() else "wrong sign",
            "near_null": {m: float(powers[j]) for j, m in enumerate(metrics) if near_null[j]},
            "near_null_noise_share": {m: shares[j] for j, m in enumerate(metrics) if near_null[j]},
            "near_null_rule": NEAR_NULL_RULE,
            "false_discovery_proportion_near_null_raw": _fdp(raw, right & ~near_null),
            "false_discovery_proportion_near_null_adjusted": _fdp(adj, right & ~near_null),
        }
        aa_p, aa_est = family_pvalues(rows, dc.name, True, metrics)
        if aa_p.size:
            entry["aa"] = _family_rate(aa_p, metrics, alpha, method, bool(np.all(np.nan_to_num(aa_est) == 0)))
        if side_rows is not None and (entry.get("aa") or {}).get("degenerate", not aa_p.size):
            null = _null_family(side_rows, dc.name, metrics, alpha, method)
            if null is not None:
                entry["null"] = null
        out[dc.name] = entry
    return out


def _null_family(side_rows: pd.DataFrame, design: str, metrics: list[str], alpha: float, method: str
                 ) -> dict[str, Any] | None:
    """The family-wise rate, raw and adjusted, of the design's null-variant replicates (rows ``null:<metric>``:
    the same traffic with the null user, every true effect 0) against the exact 99% binomial band of ``alpha``;
    ``None`` without them."""
    from simulations.designs.interleaving import NULL_PREFIX

    names = [NULL_PREFIX + m for m in metrics]
    p, _ = family_pvalues(side_rows, design, False, names)
    if p.size == 0 or not np.isfinite(p).any():
        return None
    return _family_rate(p, metrics, alpha, method, False)


def _family_rate(p: np.ndarray, metrics: list[str], alpha: float, method: str, degenerate: bool) -> dict[str, Any]:
    """Family-wise rejection rates of replicates' p-values ``p`` ``(R, tests)`` under a null (A/A or the null
    variant), raw and adjusted by ``method``, against the exact 99% binomial band of ``alpha`` (no band verdict
    when ``degenerate``: every estimate identically 0), and per test."""
    from onlineeval.stats import binomial_band
    from onlineeval.stats.multiple import reject_adjusted

    with np.errstate(invalid="ignore"):
        raw = p < alpha
    adj = reject_adjusted(np.where(np.isfinite(p), p, np.nan), alpha, method)
    r = int(p.shape[0])
    band = binomial_band(r, alpha, 0.99)
    fw_raw, fw_adj = int(raw.any(axis=1).sum()), int(adj.any(axis=1).sum())
    return {"replicates": r, "family_wise_rate_raw": fw_raw / r, "family_wise_rate_adjusted": fw_adj / r,
            "binomial_99_band": [band.lo_rate, band.hi_rate],
            "raw_within_band_or_below": None if degenerate else bool(fw_raw <= band.hi),
            "adjusted_within_band_or_below": None if degenerate else bool(fw_adj <= band.hi),
            "degenerate": degenerate,
            "per_test_raw": {m: float(np.mean(raw[:, j])) for j, m in enumerate(metrics)},
            "per_test_adjusted": {m: float(np.mean(adj[:, j])) for j, m in enumerate(metrics)}}


def multiple_lines(summary: dict[str, Any]) -> list[str]:
    """The terminal block of :func:`multiple_summary`."""
    from simulations.report import rate_text

    mult = summary.get("multiple") or {}
    if not mult:
        return []
    lines = ["", ("Multiple comparisons (designs[i].analysis.multiple: the last day's tests of a design as one family; "
                  "raw p < alpha -> adjusted; '!' above the 99% band of alpha):")]
    for design, e in mult.items():
        aa = e.get("aa")
        which = "A/A"
        if e.get("null") is not None and (aa is None or aa["degenerate"]):
            # review 6, F5: the A/A is identically 0; the null variant's family instead
            aa, which = e["null"], "A/A 0 (ties); null-variant"
        if aa is None:
            fw = "-"
        elif aa["degenerate"]:
            fw = "0 (ties)"
        else:
            fw = (f"{rate_text(aa['family_wise_rate_raw'])}{'' if aa['raw_within_band_or_below'] else '!'} -> "
                  f"{rate_text(aa['family_wise_rate_adjusted'])}{'' if aa['adjusted_within_band_or_below'] else '!'} "
                  f"(band {rate_text(aa['binomial_99_band'][0])}-{rate_text(aa['binomial_99_band'][1])})")
        # review 6, F7: with no null test the proportion counts wrong-sign rejections only: say so
        label = ("false discovery proportion" if e.get("fdp_counts", "null or wrong sign") != "wrong sign" else
                 "false discoveries (no test is null: wrong-sign, type S, share of rejections)")
        text = (f"  {design:14s} {e['method']} over {e['tests']} tests: {which} family-wise rate {fw}; any rejection "
                f"{rate_text(e['any_rejection_raw'])} -> {rate_text(e['any_rejection_adjusted'])}; {label} "
                f"{rate_text(e['false_discovery_proportion_raw'])} -> "
                f"{rate_text(e['false_discovery_proportion_adjusted'])}")
        near = e.get("near_null") or {}
        if near:
            shares = e.get("near_null_noise_share") or {}
            weak = ", ".join(f"{m} (analytic power {rate_text(v)}, "
                             f"noise share {rate_text(shares.get(m, float('nan')))})" for m, v in near.items())
            text += (f"; near-null tests as null ({weak}; near-null: at least half of a test's rejections are noise, "
                     "noise share = alpha / its analytic chance of rejecting either way, about analytic power "
                     "<= 2 alpha): "
                     f"false discovery proportion {rate_text(e['false_discovery_proportion_near_null_raw'])} -> "
                     f"{rate_text(e['false_discovery_proportion_near_null_adjusted'])}")
        lines.append(text)
        lines.append("  " + " " * 14 + " power raw -> adjusted: " + ", ".join(
            f"{m} {rate_text(t['power_raw'])} -> {rate_text(t['power_adjusted'])}" for m, t in e["per_test"].items()))
    return lines
