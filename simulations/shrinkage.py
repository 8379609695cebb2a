r"""The offline-to-online shrinkage study across the points of a sweep.

Every point of a sweep is a pair of rankers (A, B) with an exact offline delta
:math:`x = M(B) - M(A)` of the offline metric (weighted by query frequency) and a true
online effect :math:`y` per design and metric: exact for the A/B metrics, a Monte Carlo
estimate with standard error :math:`s` for interleaving. Online effects are taken in the
*improvement* direction (the sign of metrics where lower is better, abandonment, is
flipped), so a positive :math:`y` always means that users are better off with B. Across
the points, per group of points (the sweep's ``shrinkage_by`` axes, e.g. the click
model: the relation differs between navigational and informational users) and per
design and metric, the study gives:

- **the relation** :math:`y = \beta x` (through the origin: identical rankers have no
  effect) and :math:`y = \alpha + \beta x` (a check that :math:`\alpha` is 0), fitted by
  weighted least squares with weights :math:`1 / (\tau^2 + s_i^2)`, where :math:`s_i` is
  the truth's Monte Carlo error (0 for exact truths) and :math:`\tau^2` is the scatter of
  the pairs around the line, estimated by the Paule-Mandel equation
  :math:`\sum_i w_i r_i^2 = n - p` (Paule and Mandel 1982; the meta-regression form
  of DerSimonian and Kacker 2007). The offline deltas are exact (computed from the
  judgments), so only the response carries measurement error and this weighting is the
  errors-in-variables treatment that applies. The coefficients' covariance is
  :math:`\max(1, q) (X^\top W X)^{-1}` with :math:`q = \sum_i w_i r_i^2 / (n - p)` and the
  confidence intervals use Student's t with :math:`n - p` degrees of freedom (the
  modified Knapp-Hartung interval, Knapp and Hartung 2003; Roever, Knapp and Friede 2015).
  With exact truths this is ordinary least squares and its usual t interval. A
  prediction for an offline gain :math:`x_0`: :math:`\hat y = x_0 \hat\beta`, a
  confidence interval for the mean online effect of pairs with that offline gain, and a
  prediction interval for one new pair (adding :math:`\hat\tau^2`).
- **sign agreement**: how often the true online effect has the other sign than the
  offline delta (a truth within 2 Monte Carlo SEs of 0 is "undetermined"), and how often
  the online test at the point's D days would rank the pair the other way: the share of
  the simulated experiments whose estimate has the opposite sign, and whose result is
  significant in the opposite direction (two-sided test at the point's alpha), with the
  normal-theory values :math:`\Phi(-\mathrm{sgn}(x) y / se_D)` and
  :math:`\Phi(-\mathrm{sgn}(x) y / se_D - z_{1-\alpha/2})` from the design's variance model.
- **Kendall's tau-b** between the offline and the online orderings of the group's
  systems (each distinct B against the common baseline), with the Monte Carlo spread of
  tau when the truth is Monte Carlo (tau recomputed on truths redrawn from
  :math:`N(y_i, s_i^2)`), and the tau of one experiment of D days (per traffic level; each
  system's estimate from another replicate, as separate experiments would be: the points share their seed,
  so the same replicate of two points shares its draws; mean and SD over the sets).
  Schuth et al. (2015) and Chapelle et al. (2012) report these for interleaving against
  judgments.
- **the MDE curve**: the smallest offline gain an experiment of D days detects with the
  configured power at the configured alpha (two-sided),
  :math:`x_{min}(D) = (z_{1-\alpha/2} + z_{power})\, se(D) / \hat\beta` with
  :math:`se(D)^2 = a / (D \cdot \text{queries per day}) + b`, the design's variance model
  of :func:`simulations.analysis.variance_model` (median of ``a`` and ``b`` over the
  group's points at that traffic); its interval is that of :math:`\hat\beta` carried
  over (:math:`x_{min}` at the ends of the slope's confidence interval; ``null`` for
  "unbounded" when the interval reaches 0). A point whose design or estimate the point's own analysis
  found biased (``analytic_withheld``) gives no variance model here and no normal-theory shares: its
  power measures its bias as much as the effect, so an MDE from its standard error would be one it
  cannot reach; a group whose points are all biased for a design gets no MDE curve, with a note.

Structure of ``summary.json["shrinkage"]`` (what :func:`shrinkage_study` returns; every
float may be ``null`` where it is undefined)::

    {
      "conventions": {<name>: <sentence>, ...},    # offline, online, fit, ci, sign, tau, mde
      "offline_metric": "nDCG@10",
      "level": 0.95,                               # confidence level of every interval
      "by": ["users.click_model.preset"],          # axes splitting the points into groups
      "groups": [
        {
          "key": {"users.click_model.preset": "navigational"},
          "label": "users.click_model.preset=navigational",   # "all points" without 'by'
          "points": [0, 2, 4, ...],                # sweep point indices of the group
          "relations": [                           # one per design and metric
            {
              "design": "ab", "metric": "reciprocal_rank", "primary": true,
              "improvement_sign": 1,               # -1: online values were sign-flipped
              "truth": "exact" | "monte_carlo",
              "n_points": 10, "n_systems": 5,      # points; distinct ranker pairs (A, B, collection)
              "pairs_with_several_truths": 0,      # pairs seen with different true effects in the group
              "biased_points": 0,                  # points whose analysis withheld the analytic numbers
              "systems": [{"points": [0, 1], "offline_delta": x, "online_effect": y,
                           "online_effect_se": s, "sign": "agree"|"disagree"|"undetermined"|"zero"}],
              "through_origin": {"slope": b, "slope_se": se, "slope_ci": [lo, hi],
                                 "tau2": t2, "df": n - 1, "q": q} | null,   # null: too few systems
              "with_intercept": {"slope": .., "slope_se": .., "slope_ci": [..],
                                 "intercept": .., "intercept_se": .., "intercept_ci": [..],
                                 "tau2": .., "df": n - 2, "q": ..} | null,
              "predictions": [{"offline_gain": x0, "online_effect": y0, "ci": [lo, hi],
                               "prediction_interval": [lo, hi]}],   # through the origin
              "sentence": "an offline gain of +0.020 nDCG@10 (the median |offline delta| of the group's 5 "
                          "systems, rounded) predicts ...",   # through the origin; prediction_at: another gain
              "sentence_with_intercept": null | "...",   # when the intercept's CI excludes 0
              "sign_agreement": {
                "truth": {"agree": k, "disagree": m, "undetermined": u, "zero_offline": z,
                          "share_disagree": m / (k + m) | null},
                "decision": [{"point": i, "days": D, "replicates": R,
                              "share_opposite_sign": .., "share_opposite_sign_se": ..,
                              "share_significant_opposite": .., "share_significant_same": ..,
                              "analytic_opposite_sign": .., "analytic_significant_opposite": ..}],
                "decision_mean": {"share_opposite_sign": .., "share_significant_opposite": ..,
                                  "share_significant_same": .., "analytic_opposite_sign": ..,
                                  "analytic_significant_opposite": ..}
              },
              "kendall_tau": {"truth": tau | null, "n_systems": n, "n_truths": t, "truth_mc_sd": sd | null,
                              "experiment": [{"queries_per_day": q, "days": D, "replicates": R,
                                              "mean": .., "sd": .., "n_systems": n, "n_truths": t,
                                              "note": ..}]}   # note (mean, sd null): fewer replicates than systems
                                           # n_systems: distinct ranker pairs, as the relation's; n_truths: the
                                           # distinct truths tau ranks (more when pairs are seen with several);
                                           # null tau and no experiment entry below 2 systems
            }
          ],
          "mixed_axes": [],                        # axes telling apart the truths of one pair
          "warnings": [],                          # e.g. the group mixes user populations (see below)
          "mde": [                                 # one per design, primary metric, traffic
            {"design": "ab", "metric": "reciprocal_rank", "queries_per_day": 1000,
             "alpha": 0.05, "power": 0.8, "variance_model": {"a": .., "b": ..},
             "slope": b, "slope_ci": [lo, hi], "simulated_days": 7,
             "days": [1, 2, ...], "online_mde": [...], "offline_mde": [...],
             "offline_mde_low": [...], "offline_mde_high": [...],   # null entries: unbounded
             "offline_mde_at_simulated_days": .., "slope_ci_includes_zero": false,
             "note": null | "why there is no curve (or why it is not bounded above)"}
          ]
        }
      ],
      "plots": {"relation": "shrinkage.png", "mde": "mde.png"}
    }

**Systems** are the distinct ranker pairs (A, B, collection) of a group: the observation column
``system`` (the point's rankers, collection, seed and offline metric) says which points share a pair;
without it, the distinct (offline, online) truths. A pair seen with several true online effects in one
group (the same rankers under two click models or user populations: only a ``users.*`` axis differs)
is one system, not several: the group gets ``mixed_axes`` (the axes that tell the pair's truths apart,
e.g. not a traffic axis whose points share a truth) and a warning to set ``shrinkage_by`` to them;
such a group fits no relation (on its distinct truths a pair would count once per population, its
intervals too narrow); otherwise a relation needs more pairs than coefficients. The MDE's interval is
printed with it; when the slope's CI reaches 0 its upper end is unbounded and the MDE is flagged
(``slope_ci_includes_zero``).

``points.csv`` gets, on each point's primary-metric row: ``shrinkage_group``,
``online_improvement`` (the signed true effect), ``predicted_online`` (the group's
through-origin relation at the point's offline delta), ``truth_sign`` (agree, disagree,
undetermined, zero), ``share_opposite_sign``, ``share_significant_opposite``,
``offline_mde_at_days`` (the offline MDE at the point's own days and traffic) and its interval
from the slope's CI, ``offline_mde_low_at_days`` / ``offline_mde_high_at_days`` (``inf`` when
the slope's CI reaches 0: the MDE is not bounded above).

The statistics (the weighted fit, Paule-Mandel, Kendall's tau-b, the MDE formula) are in
:mod:`simulations.shrinkage_stats`, the terminal view in :mod:`simulations.shrinkage_text` (the plots in
:mod:`simulations.shrinkage_plots`); the first two are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats as sps

from simulations.shrinkage_stats import RelationFit, fit_relation, kendall_tau_b, mde_offline, paule_mandel_tau2
from simulations.shrinkage_text import format_shrinkage, mde_cell

__all__ = [
    "RelationFit",
    "fit_relation",
    "format_shrinkage",
    "kendall_tau_b",
    "mde_cell",
    "mde_offline",
    "mixed_warning",
    "paule_mandel_tau2",
    "point_columns",
    "prediction_at",
    "shrinkage_study",
]

#: a truth within this many Monte Carlo SEs of 0 has an undetermined sign
UNDETERMINED_SE = 2.0
#: Monte Carlo redraws of the truths for the spread of Kendall's tau
TAU_DRAWS = 2000
_TAU_SEED = 20261201


# ------------------------------------------------------------------------------ the study
CONVENTIONS = {
    "offline": "offline delta = M(B) - M(A) of the offline metric, weighted by query frequency (exact, from the "
               "judgments)",
    "online": "true online effect of B against A in the improvement direction (the sign of metrics where lower is "
              "better, abandonment, is flipped): exact for A/B metrics, Monte Carlo with its SE for interleaving",
    "fit": "weighted least squares, weights 1/(tau^2 + SE^2) with tau^2 by Paule-Mandel; covariance "
           "max(1, q) (X'WX)^-1, Student-t intervals on n - p df (modified Knapp-Hartung); exact truths: ordinary "
           "least squares; systems are the distinct ranker pairs (A, B, collection) of a group (a pair seen by "
           "several user populations in one group is one system: warned, and no relation fitted)",
    "ci": "confidence intervals for the mean online effect at an offline gain; prediction intervals for one new "
          "pair (add tau^2)",
    "prediction": "the sentence's offline gain is the median |offline delta| of the group's systems (2 significant "
                  "digits), not a gain of yours; 'predictions' are at the 25% and 50% quantiles and the largest of "
                  "those |offline delta| values; at another gain x0 the relation through the origin predicts "
                  "slope * x0, CI slope * x0 +- t(df) * |x0| * slope_se, one new pair +- t(df) * "
                  "sqrt((x0 * slope_se)^2 + tau2) (through_origin's values)",
    "sign": "truth: sign of the online effect against the sign of the offline delta (undetermined within 2 MC "
            "SEs of 0); decision: share of simulated experiments of the point's days whose estimate has the other "
            "sign / is significant the other way (two-sided, the point's alpha), and the normal-theory values",
    "tau": "Kendall's tau-b between the offline and online orderings of a group's systems (all against one "
           "baseline A); experiment: tau of one simulated experiment per system, each system's from another "
           "replicate (the system at position j of the group takes replicate r + j, mod R: the points share their "
           "seed, so one replicate index of two points shares its traffic and click draws and their estimates move "
           "together, correlation 0.99 on configs/sweep.yaml, ordering the systems as no set of separate "
           "experiments would), mean and SD over the R such sets; none with fewer replicates than systems",
    "mde": "smallest offline gain detectable with the configured power at two-sided alpha in D days: "
           "(z_{1-alpha/2} + z_power) se(D) / slope, se(D)^2 = a / (D * queries per day) + b (median variance "
           "model of the group's points at that traffic), slope through the origin; its interval from the slope's "
           "CI, unbounded above when that CI reaches 0 (the MDE is then flagged)",
}


def _group_label(key: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in key.items()) if key else "all points"


def _nice(v: float) -> float:
    """Two significant digits."""
    if v == 0 or not math.isfinite(v):
        return v
    return float(f"{v:.2g}")


def _sign_of(x: float, y: float, s: float) -> str:
    if x == 0:
        return "zero"
    if s > 0 and abs(y) <= UNDETERMINED_SE * s:
        return "undetermined"
    if y == 0:
        return "undetermined"
    return "agree" if (x > 0) == (y > 0) else "disagree"


def _systems(obs: pd.DataFrame) -> pd.DataFrame:
    """Distinct (offline, online, se) triples (points that differ only in traffic share a truth)."""
    g = obs.groupby(["offline_delta", "online_effect", "online_effect_se"], sort=False)["point"]
    out = g.apply(lambda p: sorted(int(v) for v in p)).reset_index().rename(columns={"point": "points"})
    return out


def _pairs(obs: pd.DataFrame) -> dict[Any, list[int]]:
    """The group's ranker pairs (A, B, collection): the ``system`` column's values, or each distinct truth
    when the observations have no such column -> the points observing it."""
    if "system" in obs.columns and obs["system"].notna().all():
        keys: list[Any] = list(obs["system"])
    else:
        keys = list(zip(obs["offline_delta"], obs["online_effect"], obs["online_effect_se"], strict=True))
    out: dict[Any, list[int]] = {}
    for k, p in zip(keys, obs["point"], strict=True):
        out.setdefault(k, []).append(int(p))
    return out


_TRUTH = ["offline_delta", "online_effect", "online_effect_se"]


def _several_truths(obs: pd.DataFrame, pairs: Mapping[Any, list[int]]) -> list[list[list[int]]]:
    """For each pair seen with more than one distinct truth: its points, one list per truth."""
    out = []
    for points in pairs.values():
        sub = obs[obs["point"].isin(points)]
        classes = [sorted(int(v) for v in g["point"]) for _, g in sub.groupby(_TRUTH, sort=False)]
        if len(classes) > 1:
            out.append(classes)
    return out


def _mixed_axes(mixed: Sequence[Sequence[Sequence[int]]], labels: Mapping[int, Mapping[str, Any]] | None) -> list[str]:
    """The axes that tell a pair's truths apart (constant within each truth, not across the pair), in the
    axes' order; when no single axis does, every axis that varies between the pair's points."""
    if not labels:
        return []

    def value(p: int, a: str) -> str:
        return str((labels.get(p) or {}).get(a))

    axes: list[str] = []
    for classes in mixed:
        points = [p for c in classes for p in c]
        names = list(dict.fromkeys(a for p in points for a in (labels.get(p) or {})))
        varying = [a for a in names if len({value(p, a) for p in points}) > 1]
        telling = [a for a in varying if all(len({value(p, a) for p in c}) == 1 for c in classes)]
        axes += [a for a in (telling or varying) if a not in axes]
    return axes


def mixed_warning(label: str, axes: Sequence[str], n_mixed: int, n_pairs: int) -> str:
    """The warning of a group whose ranker pairs are seen with several true online effects."""
    what = ", ".join(axes) if axes else "something other than the rankers and the collection"
    fix = (f"set shrinkage_by: [{', '.join(axes)}] for one relation per value" if axes
           else "split the study with shrinkage_by")
    return (f"group '{label}' mixes {what} values: {n_mixed} of {n_pairs} ranker pair(s) seen with different true "
            f"online effects (one system per pair, not one per value; the relation pools user populations); {fix}")


def _decision(obs: pd.DataFrame, estimates: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in obs.itertuples(index=False):
        est = estimates[(estimates["point"] == row.point) & (estimates["design"] == row.design)
                        & (estimates["metric"] == row.metric)]
        sx = np.sign(row.offline_delta)
        entry: dict[str, Any] = {"point": int(row.point), "days": int(row.days), "replicates": len(est)}
        signed = est["estimate"].to_numpy() * row.improvement_sign
        sig = est["pvalue"].to_numpy() < row.alpha
        if len(est) and sx != 0:
            opp = np.sign(signed) == -sx
            share = float(opp.mean())
            entry.update(share_opposite_sign=share,
                         share_opposite_sign_se=math.sqrt(share * (1 - share) / len(est)),
                         share_significant_opposite=float((opp & sig).mean()),
                         share_significant_same=float(((np.sign(signed) == sx) & sig).mean()))
        else:
            entry.update(share_opposite_sign=None, share_opposite_sign_se=None, share_significant_opposite=None,
                         share_significant_same=None)
        se = math.sqrt(row.var_a / row.impressions + row.var_b) if row.impressions > 0 and row.var_a > 0 else math.nan
        if _withheld(row):
            se = math.nan  # a biased estimate: the normal theory of an unbiased one does not apply
        if sx != 0 and se > 0 and math.isfinite(se):
            zs = sx * row.online_effect / se
            z = float(sps.norm.ppf(1 - row.alpha / 2))
            entry.update(analytic_opposite_sign=float(sps.norm.cdf(-zs)),
                         analytic_significant_opposite=float(sps.norm.cdf(-zs - z)))
        else:
            entry.update(analytic_opposite_sign=None, analytic_significant_opposite=None)
        out.append(entry)
    return out


def _withheld(row: Any) -> bool:
    """The point's analysis withheld this design's analytic numbers (a biased design or estimate);
    observations without the optional ``analytic_withheld`` column count as not withheld."""
    value = getattr(row, "analytic_withheld", None) if not isinstance(row, Mapping) else row.get("analytic_withheld")
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and bool(value)


#: the MDE table's note when every point of a group is biased for the design
BIASED_NOTE = "biased on every point: its power measures its bias, no MDE"


def _mean_of(entries: list[dict[str, Any]], key: str) -> float | None:
    vals = [e[key] for e in entries if e.get(key) is not None]
    return float(np.mean(vals)) if vals else None


def _tau_block(obs: pd.DataFrame, systems: pd.DataFrame, estimates: pd.DataFrame) -> dict[str, Any]:
    """Kendall's tau between the offline deltas and the true online effects of the group's distinct truths
    (``systems``), and of one experiment's estimates per traffic level. ``n_systems`` counts the distinct ranker
    pairs (:func:`_pairs`), as the relation's does; ``n_truths`` the truths ranked (more than the pairs when a
    pair is seen with several true effects, e.g. under two user populations). Fewer than 2 pairs: no tau (one
    pair under two populations has one offline delta; its two truths rank nothing)."""
    x, y, s = (systems[c].to_numpy(dtype=np.float64) for c in ("offline_delta", "online_effect", "online_effect_se"))
    n_pairs = len(_pairs(obs))
    ranked = n_pairs >= 2 and len(x) >= 2
    out: dict[str, Any] = {"truth": kendall_tau_b(x, y) if ranked else None, "n_systems": n_pairs,
                           "n_truths": len(x), "truth_mc_sd": None, "experiment": []}
    if ranked and np.any(s > 0):
        rng = np.random.default_rng(_TAU_SEED)
        draws = y[None, :] + s[None, :] * rng.standard_normal((TAU_DRAWS, len(y)))
        taus = np.array([kendall_tau_b(x, d) for d in draws])
        taus = taus[np.isfinite(taus)]
        out["truth_mc_sd"] = float(taus.std(ddof=1)) if taus.size > 1 else None
    for (qpd, days), sub in obs.groupby(["queries_per_day", "days"], sort=True):
        sub = sub.drop_duplicates(["offline_delta", "online_effect", "online_effect_se"])
        pairs = len(_pairs(sub))
        if pairs < 2 or len(sub) < 2:
            continue
        est = estimates[estimates["point"].isin(sub["point"]) & (estimates["design"] == sub["design"].iloc[0])
                        & (estimates["metric"] == sub["metric"].iloc[0])]
        table = est.pivot_table(index="replicate", columns="point", values="estimate", aggfunc="first")
        table = table.reindex(columns=list(sub["point"])).dropna()
        if table.empty:
            continue
        sign = float(sub["improvement_sign"].iloc[0])
        xs = sub["offline_delta"].to_numpy(dtype=np.float64)
        entry: dict[str, Any] = {"queries_per_day": float(qpd), "days": int(days), "replicates": len(table),
                                 "mean": None, "sd": None, "n_systems": pairs, "n_truths": len(sub)}
        out["experiment"].append(entry)
        n_rep, n_col = table.shape
        if n_rep < n_col:  # some set would take one replicate index twice: shared draws again
            entry["note"] = f"{n_rep} replicates for {n_col} systems: too few to give every system its own"
            continue
        vals = table.to_numpy()
        # set r: the j-th system's replicate r + j (mod R); each replicate of each point used once
        sets = vals[(np.arange(n_rep)[:, None] + np.arange(n_col)[None, :]) % n_rep, np.arange(n_col)[None, :]]
        taus = np.array([kendall_tau_b(xs, sign * r) for r in sets])
        taus = taus[np.isfinite(taus)]  # tau is undefined for an experiment whose estimates are all equal
        entry["mean"] = float(taus.mean()) if taus.size else None
        entry["sd"] = float(taus.std(ddof=1)) if taus.size > 1 else None
    return out


def gain_source(n_systems: int) -> str:
    """What the sentence's offline gain is: the median size of the group's offline deltas."""
    return f"the median |offline delta| of the group's {n_systems} system{'' if n_systems == 1 else 's'}, rounded"


def _unit(first: Any) -> str:
    """What a relation's online effect is of: its metric, or for an estimator of a counterfactual design the online
    metric it estimates, named with it (``clicks_per_query (what snips estimates)``: the effect is the exact truth, the
    estimator only sets the spread of one experiment)."""
    metric = str(first["metric"])
    unit = first.get("unit") if hasattr(first, "get") else None
    if not isinstance(unit, str) or not unit or unit == metric:
        return metric
    return f"{unit} (what {metric} estimates)"


def _sentence(pred: dict[str, Any], metric: str, offline_metric: str, level: float, source: str = "") -> str:
    lo, hi = pred["ci"]
    plo, phi = pred["prediction_interval"]
    where = f" ({source})" if source else ""
    return (f"an offline gain of {pred['offline_gain']:+.3g} {offline_metric}{where} predicts an online effect of "
            f"{pred['online_effect']:+#.3g} {metric} [{level:.0%} CI {lo:+#.3g}, {hi:+#.3g}; one new pair "
            f"{plo:+#.3g} to {phi:+#.3g}]")  # '#': three digits each ('+0.0200', not '+0.02')


def prediction_at(fit: Mapping[str, Any], offline_gain: float, level: float) -> dict[str, Any]:
    """The prediction of a relation through the origin (a relation's ``through_origin`` in ``summary.json``)
    at an offline gain of your own: the same numbers as the study's ``predictions`` at that gain (the mean
    online effect ``slope * x0``, its confidence interval, the prediction interval for one new pair), from the
    stored slope, slope_se, tau2 and df alone."""
    x0 = float(offline_gain)
    mean = fit["slope"] * x0
    se = abs(x0) * fit["slope_se"]
    t = float(sps.t.ppf(0.5 + level / 2, fit["df"]))
    pse = math.sqrt(se * se + fit["tau2"])
    return {"offline_gain": x0, "online_effect": mean, "ci": [mean - t * se, mean + t * se],
            "prediction_interval": [mean - t * pse, mean + t * pse]}


def _relation(obs: pd.DataFrame, estimates: pd.DataFrame, offline_metric: str, level: float) -> dict[str, Any]:
    first = obs.iloc[0]
    systems = _systems(obs)
    pairs = _pairs(obs)
    several = _several_truths(obs, pairs)
    x, y, s = (systems[c].to_numpy(dtype=np.float64) for c in ("offline_delta", "online_effect", "online_effect_se"))
    # a relation across systems needs more distinct pairs than coefficients (one pair under two click
    # models is not two systems), and none of them seen with several truths: fitted on the distinct truths, a
    # pair would count once per user population and the intervals' degrees of freedom would be too many
    origin = fit_relation(x, y, s, intercept=False, level=level) if len(pairs) > 1 and not several else None
    both = fit_relation(x, y, s, intercept=True, level=level) if len(pairs) > 2 and not several else None
    signs = [_sign_of(a, b, c) for a, b, c in zip(x, y, s)]
    counts = {k: signs.count(k) for k in ("agree", "disagree", "undetermined", "zero")}
    decided = counts["agree"] + counts["disagree"]
    predictions: list[dict[str, Any]] = []
    sentence = sentence_intercept = None
    gains = np.abs(x[x != 0])
    if origin is not None and gains.size:
        picks = sorted({_nice(float(v)) for v in np.quantile(gains, [0.25, 0.5, 1.0])})
        predictions = [origin.predict(v) for v in picks]
        median = origin.predict(_nice(float(np.median(gains))))
        source = gain_source(int(gains.size))
        unit = _unit(first)
        sentence = _sentence(median, unit, offline_metric, level, source)
        if both is not None:
            lo, hi = both.ci(0)
            if lo > 0 or hi < 0:
                sentence_intercept = _sentence(both.predict(median["offline_gain"]), unit, offline_metric, level,
                                               source)
    decision = _decision(obs, estimates)
    return {
        "design": str(first["design"]), "metric": str(first["metric"]), "primary": bool(first["primary"]),
        "improvement_sign": int(first["improvement_sign"]),
        "truth": "monte_carlo" if np.any(s > 0) else "exact",
        "n_points": len(obs), "n_systems": len(pairs), "pairs_with_several_truths": len(several),
        "_several": several,  # removed by shrinkage_study (their points per truth, for the group's warning)
        # points whose own analysis found the design or estimate biased (analytic_withheld)
        "biased_points": sum(_withheld(r) for r in obs.itertuples(index=False)),
        "systems": [{"points": list(p), "offline_delta": float(a), "online_effect": float(b),
                     "online_effect_se": float(c), "sign": g}
                    for p, a, b, c, g in zip(systems["points"], x, y, s, signs)],
        "through_origin": origin.as_dict() if origin is not None else None,
        "with_intercept": both.as_dict() if both is not None else None,
        "predictions": predictions,
        "sentence": sentence,
        # set when the intercept's CI excludes 0 (the relation does not pass through the origin)
        "sentence_with_intercept": sentence_intercept,
        "sign_agreement": {
            "truth": {"agree": counts["agree"], "disagree": counts["disagree"],
                      "undetermined": counts["undetermined"], "zero_offline": counts["zero"],
                      "share_disagree": counts["disagree"] / decided if decided else None},
            "decision": decision,
            "decision_mean": {k: _mean_of(decision, k) for k in (
                "share_opposite_sign", "share_significant_opposite", "share_significant_same",
                "analytic_opposite_sign", "analytic_significant_opposite")},
        },
        "kendall_tau": _tau_block(obs, systems, estimates),
    }


def _mde_curves(obs: pd.DataFrame, relation: dict[str, Any], level: float) -> list[dict[str, Any]]:
    out = []
    fit = relation["through_origin"]
    for qpd, sub in obs.groupby("queries_per_day", sort=True):
        unbiased = sub[[not _withheld(r) for r in sub.itertuples(index=False)]]
        ok = unbiased[np.isfinite(unbiased["var_a"]) & (unbiased["var_a"] > 0)]
        alpha, power = float(sub["alpha"].iloc[0]), float(sub["power"].iloc[0])
        sim_days = int(sub["days"].max())
        days = list(range(1, max(2 * sim_days, 14) + 1))
        entry: dict[str, Any] = {"design": relation["design"], "metric": relation["metric"],
                                 "queries_per_day": float(qpd), "alpha": alpha, "power": power,
                                 "variance_model": None, "slope": None, "slope_ci": None,
                                 "simulated_days": sim_days, "days": days, "online_mde": [], "offline_mde": [],
                                 "offline_mde_low": [], "offline_mde_high": [],
                                 "offline_mde_at_simulated_days": None, "slope_ci_includes_zero": False, "note": None}
        if ok.empty:
            entry["note"] = BIASED_NOTE if unbiased.empty else "no variance model (no finite standard errors)"
            out.append(entry)
            continue
        a, b = float(ok["var_a"].median()), float(ok["var_b"].median())
        se = np.sqrt(a / (np.array(days, dtype=np.float64) * float(qpd)) + b)
        z = float(sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power))
        entry.update(variance_model={"a": a, "b": b}, online_mde=[float(v) for v in z * se])
        if fit is None:
            several = relation.get("pairs_with_several_truths") and relation.get("n_systems", 0) > 1
            entry["note"] = ("no fitted relation (systems seen with several true effects)" if several
                             else "no fitted relation (too few systems)")
        elif not fit["slope"] > 0:
            entry.update(slope=fit["slope"], slope_ci=fit["slope_ci"],
                         note="the online effect does not grow with the offline gain (slope <= 0)")
        else:
            lo, hi = fit["slope_ci"]
            mid = mde_offline(se, fit["slope"], alpha, power)
            entry.update(
                slope=fit["slope"], slope_ci=fit["slope_ci"], offline_mde=[float(v) for v in mid],
                offline_mde_low=[float(v) for v in mde_offline(se, hi, alpha, power)],
                offline_mde_high=([float(v) for v in mde_offline(se, lo, alpha, power)] if lo > 0
                                  else [None] * len(days)),
            )
            at = mde_offline(np.sqrt(a / (sim_days * float(qpd)) + b), fit["slope"], alpha, power)
            entry["offline_mde_at_simulated_days"] = float(at)
            if not lo > 0:  # the slope is not distinguishable from 0: no upper bound on the MDE
                entry.update(slope_ci_includes_zero=True,
                             note=f"the slope's {level:.0%} CI includes 0: the MDE is not bounded above")
        out.append(entry)
    return out


#: columns of the observations table :func:`shrinkage_study` reads (one row per point, design, metric)
OBSERVATION_COLUMNS = (
    "point", "design", "metric", "primary", "improvement_sign", "offline_delta", "online_effect",
    "online_effect_se", "queries_per_day", "days", "impressions", "alpha", "power", "var_a", "var_b",
)
#: optional observation columns: ``analytic_withheld``, true where the point's analysis withheld the design's
#: analytic numbers (biased),
#: ``system``, a key of the point's ranker pair (A, B, collection): points sharing it are one system, and ``unit``,
#: the online metric the effect is of (a counterfactual design's estimator rows: the metric they estimate)
OPTIONAL_OBSERVATION_COLUMNS = ("analytic_withheld", "system", "unit")


def shrinkage_study(
    obs: pd.DataFrame,
    estimates: pd.DataFrame,
    groups: Mapping[int, Mapping[str, Any]],
    by: Sequence[str],
    offline_metric: str,
    level: float = 0.95,
    labels: Mapping[int, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The study (structure in the module docstring).

    Parameters
    ----------
    obs:
        One row per point, design and metric with :data:`OBSERVATION_COLUMNS`
        (``online_effect`` already in the improvement direction; ``var_a``, ``var_b`` the
        design's variance model; ``impressions`` the mean impressions on the last day), and
        optionally ``analytic_withheld`` (the point found the design or estimate biased: its
        variance model is not used for normal-theory shares or the MDE).
    estimates:
        The simulated experiments' last-day results: ``point, design, metric, replicate,
        estimate`` (as simulated, not sign-flipped) ``, pvalue``.
    groups:
        Point index -> its group key (the values of the ``by`` axes).
    labels:
        Point index -> the values of all the sweep's axes (optional): names the axes a group mixes
        when one ranker pair (``system`` column) is seen with several truths.
    """
    missing = [c for c in OBSERVATION_COLUMNS if c not in obs.columns]
    if missing:
        raise ValueError(f"observations lack columns {missing}")
    obs = obs.copy()
    obs["_group"] = [_group_label(groups[int(p)]) for p in obs["point"]]
    out_groups = []
    for label, g in obs.groupby("_group", sort=False):
        key = dict(groups[int(g["point"].iloc[0])])
        relations, mdes, several = [], [], []
        for (_design, _metric), sub in g.groupby(["design", "metric"], sort=False):
            rel = _relation(sub.drop(columns="_group"), estimates, offline_metric, level)
            several += rel.pop("_several")
            relations.append(rel)
            if rel["primary"]:
                mdes += _mde_curves(sub, rel, level)
        mixed = _mixed_axes(several, labels)
        warnings = []
        if several:
            worst = max(relations, key=lambda r: r["pairs_with_several_truths"])
            warnings.append(mixed_warning(str(label), mixed, worst["pairs_with_several_truths"], worst["n_systems"]))
        out_groups.append({"key": key, "label": label, "points": sorted({int(p) for p in g["point"]}),
                           "relations": relations, "mixed_axes": mixed, "warnings": warnings, "mde": mdes})
    return {"conventions": dict(CONVENTIONS), "offline_metric": offline_metric, "level": level, "by": list(by),
            "groups": out_groups, "plots": {"relation": "shrinkage.png", "mde": "mde.png"}}


def point_columns(study: Mapping[str, Any], obs: pd.DataFrame) -> pd.DataFrame:
    """Per point and primary design metric: the study's columns for ``points.csv``
    (``point, design, shrinkage_group, online_improvement, predicted_online, truth_sign,
    share_opposite_sign, share_significant_opposite, offline_mde_at_days, offline_mde_low_at_days,
    offline_mde_high_at_days``)."""
    rows = []
    for group in study["groups"]:
        for rel in group["relations"]:
            if not rel["primary"]:
                continue
            fit = rel["through_origin"]
            sign = {p: sysm["sign"] for sysm in rel["systems"] for p in sysm["points"]}
            decision = {d["point"]: d for d in rel["sign_agreement"]["decision"]}
            for point in sorted(decision):
                o = obs[(obs["point"] == point) & (obs["design"] == rel["design"]) & (obs["metric"] == rel["metric"])]
                r = o.iloc[0]
                mde = mde_low = mde_high = None
                if fit is not None and fit["slope"] > 0 and r["var_a"] > 0 and not _withheld(r):
                    se = math.sqrt(r["var_a"] / (r["days"] * r["queries_per_day"]) + r["var_b"])
                    alpha, power = float(r["alpha"]), float(r["power"])
                    mde = float(mde_offline(se, fit["slope"], alpha, power))
                    lo, hi = fit["slope_ci"]
                    # the slope's CI ends give the MDE's; a CI reaching 0 leaves it unbounded above (inf)
                    mde_low = float(mde_offline(se, hi, alpha, power))
                    mde_high = float(mde_offline(se, lo, alpha, power)) if lo > 0 else math.inf
                rows.append({
                    "point": point, "design": rel["design"], "shrinkage_group": group["label"],
                    "online_improvement": float(r["online_effect"]),
                    "predicted_online": fit["slope"] * float(r["offline_delta"]) if fit is not None else None,
                    "truth_sign": sign.get(point),
                    "share_opposite_sign": decision[point]["share_opposite_sign"],
                    "share_significant_opposite": decision[point]["share_significant_opposite"],
                    "offline_mde_at_days": mde, "offline_mde_low_at_days": mde_low,
                    "offline_mde_high_at_days": mde_high,
                })
    return pd.DataFrame(rows, columns=["point", "design", "shrinkage_group", "online_improvement",
                                       "predicted_online", "truth_sign", "share_opposite_sign",
                                       "share_significant_opposite", "offline_mde_at_days", "offline_mde_low_at_days",
                                       "offline_mde_high_at_days"])
