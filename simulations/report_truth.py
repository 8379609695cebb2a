"""The texts about the ground truth: the one drawn world and the truth's Monte Carlo precision.

The Offline line's world-sampling note (:func:`world_sampling_text`), how far another world would move the true
effect and the sizes (:func:`truth_world_text`, :func:`truth_world_cell`, :func:`truth_world_items`), the truth's
precision (:func:`truth_precision_text`, :func:`truth_precision_items`) and the offline metric's conventions
(:func:`offline_conventions_text`). Re-exported by :mod:`simulations.report`.
"""

from __future__ import annotations

import math
from typing import Any

from simulations.report_numbers import _number, count_text, se_text, value_text


#: how the Offline line names a DCG-family metric's gain (review 4, F4: trec_eval's nDCG uses linear gains)
GAIN_TEXT = {"exponential": "gain 2^g - 1 (exponential; trec_eval's nDCG uses linear g)",
             "linear": "gain g (linear, as trec_eval)"}


#: the world-sampling note's '!': the frequency-weighted offline delta's SE over worlds above this share of |delta|
WORLD_SE_WARN = 0.25


def world_sampling_text(off: dict[str, Any], synthetic: bool = True) -> tuple[str, str] | None:
    """The Offline line's one-drawn-world note (review 4, F1) as (first half, second half); ``None`` when the
    summary has no ``effective_queries`` / ``delta_world_se``. '!' when the SE is above :data:`WORLD_SE_WARN`
    of |delta| (or the delta is 0 and the SE is not). A trec collection's queries are not drawn from the seed:
    its note speaks of the query sample instead."""
    n_eff, se = off.get("effective_queries"), off.get("delta_world_se")
    delta = (off.get("delta") or {}).get("weighted")
    if not (_number(n_eff) and _number(se) and _number(delta)):
        return None
    if delta:
        share = abs(se) / abs(delta)
        rel = f"{100.0 * share:.0f}% of it" + (f" > {WORLD_SE_WARN:.0%}!" if share > WORLD_SE_WARN else "")
    else:
        rel = "the delta is 0" + ("!" if se > 0 else "")
    if not synthetic:
        return (f"one query sample: {float(n_eff):,.1f} effective queries (1 / sum f^2); the frequency-weighted "
                f"delta's SE over query samples {se_text(se)} ({rel}):",
                "every number below is conditional on these queries and judgments")
    return (f"one drawn world: {float(n_eff):,.1f} effective queries (1 / sum f^2); the frequency-weighted delta's SE "
            f"over worlds {se_text(se)} ({rel}):",
            "every number below is conditional on this world; another seed draws another world")


def world_size_factors(effect: Any, se: Any) -> tuple[float, float] | None:
    """How the analytic sizes move if the true effect were one SE over worlds larger or smaller in size: they scale
    with 1 / effect^2, so ``(1 / (1 + r)^2, 1 / (1 - r)^2)`` with ``r = se / |effect|`` (the second infinite when
    ``r >= 1``: the effect's sign is not settled across worlds); ``None`` without both numbers or for a 0 effect."""
    if not (_number(effect) and _number(se)) or not effect:
        return None
    r = abs(float(se)) / abs(float(effect))
    return 1.0 / (1.0 + r) ** 2, (1.0 / (1.0 - r) ** 2 if r < 1.0 else math.inf)


def truth_world_text(effect: Any, se: Any, with_value: bool = True) -> str | None:
    """'+0.00275 +- 0.0059 (213% > 25%!; sizes x0.1 to unbounded)': an exact truth with its SE over drawn worlds
    (review 4, F1), '!' above :data:`WORLD_SE_WARN` of |effect| as the Offline line's note; the sizes' factors at
    one SE either way (:func:`world_size_factors`); ``with_value=False`` leaves out the effect ('+- 0.0059 (...)').
    ``None`` when the summary has no SE for it."""
    if not (_number(effect) and _number(se)):
        return None
    if effect:
        share = abs(float(se)) / abs(float(effect))
        rel = f"{100.0 * share:.0f}%" + (f" > {WORLD_SE_WARN:.0%}!" if share > WORLD_SE_WARN else "")
    else:
        rel = "the effect is 0" + ("!" if se > 0 else "")
    factors = world_size_factors(effect, se)
    if factors is not None:
        hi = "unbounded" if math.isinf(factors[1]) else f"x{factors[1]:.2g}"
        rel += f"; sizes x{factors[0]:.2g} to {hi}"
    return (f"{value_text(effect, True)} " if with_value else "") + f"+- {se_text(se)} ({rel})"


def truth_world_cell(effect: Any, se: Any) -> str | None:
    """report.html's short form of :func:`truth_world_text` under the true effect: '+- 0.0059 (213%!)'."""
    if not (_number(effect) and _number(se)):
        return None
    if not effect:
        return f"+- {se_text(se)}" + ("!" if se > 0 else "")
    share = abs(float(se)) / abs(float(effect))
    return f"+- {se_text(se)} ({100.0 * share:.0f}%{'!' if share > WORLD_SE_WARN else ''})"


#: what the true effects' SE over worlds means (terminal under the main table, report.html legend)
TRUTH_WORLD_NOTE = (
    "SE over independently drawn worlds of the exact truths (their per-query B - A weighted by query frequency, as "
    f"the Offline delta's; '!' above {WORLD_SE_WARN:.0%} of the effect); every size above scales with 1 / effect^2, "
    "so 'sizes xL to xH' is how far impressions, users and days move if the effect were one such SE larger or "
    "smaller in size ('unbounded': its sign is not settled across worlds). An exact interleaving truth (two-ranker "
    "team-draft or balanced under chain-model or UBM users) is a ratio, linearised per query; Monte Carlo "
    "interleaving truths have none (the same world); see a sweep over seed for the spread across worlds")


#: :data:`TRUTH_WORLD_NOTE` for a trec collection (review 7, F3): its queries are not drawn from the seed, so the SE
#: is over query samples and a seed sweep cannot show it
TRUTH_QUERY_SAMPLE_NOTE = (
    "SE over query samples of the exact truths (this collection's queries regarded as a sample from its query "
    "population: their per-query B - A weighted by query frequency, as the Offline delta's; '!' above "
    f"{WORLD_SE_WARN:.0%} of the effect); every size above scales with 1 / effect^2, so 'sizes xL to xH' is how far "
    "impressions, users and days move if the effect were one such SE larger or smaller in size ('unbounded': its "
    "sign is not settled across query samples). An exact interleaving truth is a ratio, linearised per query; Monte "
    "Carlo interleaving truths have none; "
    "every number is conditional on these queries and judgments, which a seed does not redraw (it only re-permutes "
    "the query popularity, or nothing with collection.frequencies)")


def truth_world_note(synthetic: bool = True) -> tuple[str, str]:
    """(what the SE is over, its note): ('worlds', :data:`TRUTH_WORLD_NOTE`) for a synthetic collection,
    ('query samples', :data:`TRUTH_QUERY_SAMPLE_NOTE`) for a trec one (review 7, F3)."""
    return ("worlds", TRUTH_WORLD_NOTE) if synthetic else ("query samples", TRUTH_QUERY_SAMPLE_NOTE)


def truth_world_items(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(design, metric, :func:`truth_world_text`) of every entry with an SE over worlds; a design's metrics with the
    same text (a counterfactual design's estimators share one truth) are one item, 'snips, ips, rips'."""
    merged: dict[tuple[str, str], list[str]] = {}
    for design, metrics in s.get("designs", {}).items():
        for metric, e in metrics.items():
            text = truth_world_text(e.get("true_effect"), e.get("true_effect_world_se"))
            if text is not None:
                merged.setdefault((design, text), []).append(metric)
    return [(design, ", ".join(names), text) for (design, text), names in merged.items()]


def truth_precision_text(e: dict[str, Any]) -> str | None:
    """A Monte Carlo truth whose 4 SE exceed 10% of its effect (review 4, F3; summary.json ``truth_precision``):
    '+0.00626 +- 0.00045 (4 SE = 29% of it > 10%!: set analysis.truth_impressions to about 1,700,000, now 200,000;
    its SE scales as 1 / sqrt(n))'; ``None`` when it is precise enough or not Monte Carlo."""
    p = e.get("truth_precision")
    if not isinstance(p, dict) or p.get("adequate") or not _number(p.get("four_se_share")):
        return None
    from simulations.analysis_truth import TRUTH_MC_SHARE

    return (f"{value_text(e.get('true_effect'), True)} +- {se_text(e.get('true_effect_se'))} (4 SE = "
            f"{100.0 * p['four_se_share']:.0f}% of it > {TRUTH_MC_SHARE:.0%}!: set {p['key']} to about "
            f"{count_text(p['suggested_truth_impressions'])}, now {count_text(p['truth_impressions'])}; its SE scales "
            "as 1 / sqrt(n))")


def truth_precision_items(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(design, metric, :func:`truth_precision_text`) of every Monte Carlo truth not precise enough."""
    return [(d, m, text) for d, ms in s.get("designs", {}).items() for m, e in ms.items()
            if (text := truth_precision_text(e)) is not None]


#: why a Monte Carlo truth's precision matters (terminal and report.html)
TRUTH_PRECISION_NOTE = (
    "the truth's Monte Carlo error enters the sizes (they scale with 1 / effect^2), the bias test and the null "
    "check, whose 4-SE rule flags a bias only beyond 4 SE of its own Monte Carlo over as many impressions")


def _truth_world_lines(s: dict[str, Any], synthetic: bool = True) -> list[str]:
    """Under the main table: each exact truth with its SE over drawn worlds (review 4, F1), over query samples for
    a trec collection (``synthetic=False``; review 7, F3)."""
    import textwrap

    items = [f"{d}/{m} {text}" for d, m, text in truth_world_items(s)]
    lines = []
    if items:
        over, legend = truth_world_note(synthetic)
        lines += textwrap.wrap(f"true effect over {over}: " + "; ".join(items) + " (" + legend + ")",
                               width=112, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    imprecise = [f"{d}/{m} {text}" for d, m, text in truth_precision_items(s)]
    if imprecise:  # review 4, F3
        lines += textwrap.wrap("true effect's Monte Carlo: " + "; ".join(imprecise) + " (" + TRUTH_PRECISION_NOTE
                               + ")", width=112, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    return lines


def offline_conventions_text(metric_name: str, depth: Any = None) -> str:
    """The offline metric's gain (DCG-family metrics: its own ``gain`` or the default of
    :class:`onlineeval.conventions.Conventions`) and cut-off (its ``@k``, else the shown lists' ``depth``), as the
    Offline line names them; '' when the metric cannot be parsed."""
    from onlineeval.conventions import Conventions, Gain
    from onlineeval.metrics import parse_metric

    try:
        m = parse_metric(str(metric_name))
    except Exception:  # noqa: BLE001 - an old summary's metric name: the line simply goes without it
        return ""
    parts = []
    if hasattr(m, "gain"):
        gain = Conventions().gain if m.gain is None else Gain.parse(m.gain)
        parts.append(GAIN_TEXT.get(str(gain), f"gain table {gain}"))
    if m.k is not None:
        parts.append(f"cut-off {m.k}")
    elif depth is not None:
        parts.append(f"no cut-off: the shown lists' {depth} documents")
    return ", ".join(parts)
