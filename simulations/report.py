"""Writing the results directory and the terminal summary.

``<output>/``:

- ``summary.json``: the answers (see :func:`simulations.analysis.analyse`), the
  conventions every number was computed under, the ground truth, the seed, the package
  version and the effective config;
- ``config.effective.yaml``: the config with every default filled in;
- ``replicates.csv``: one row per replicate x design x day x metric;
- ``curves.csv``: per design x day summary over replicates (power, analytic power, ...);
- ``power_vs_days.png`` and ``offline_vs_online.png``;
- with counterfactual designs ``counterfactual_rmse.png`` (RMSE against log size per
  estimator) and, with ``analysis.assumption_sweep``, ``assumption_sweep.png``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from onlineeval import __version__
from onlineeval.stats import binomial_band
from simulations.analysis import IMPROVEMENT_SIGN

if TYPE_CHECKING:
    from simulations.job import SimulationResult

__all__ = ["write_results", "terminal_summary", "conventions"]


def conventions(result: SimulationResult) -> dict[str, Any]:
    """Every convention the run's numbers depend on, stated explicitly."""
    cfg = result.config
    return {
        "offline": result.world.offline.conventions,
        "user_types": [{"name": n, "share": sh, "click_model": spec} for n, sh, spec in cfg.users.mixture()],
        "seed": cfg.seed,
        "seeding": "replicate r uses SeedSequence(seed).spawn(replicates)[r] (traffic and each design get child "
        "streams keyed by name); the world uses SeedSequence((seed, 0x776F726C64)), the truth (seed, 0x7472757468, ...)",
        "randomisation_unit": "user (A/B arms by a salted SplitMix64 hash of the user id)",
        "ab_effect": "difference B - A of ratio metrics (sum over users / sum over users), delta-method SE over users, two-sided z-test",
        "interleaving_effect": {
            d.name: _interleaving_convention(d.method or "") for d in cfg.designs if d.type == "interleaving"
        },
        "interleaving_note": "impressions without a click are not comparisons; Delta = sum over users of "
        "outcome/2 / number of compared impressions, delta-method SE clustered by user; positive favours the "
        "candidate (B, or the later ranker of a pair). Effects of different methods are on different scales: "
        "compare their sample sizes, not their effects",
        "sample_size": "se^2(N) = a/N + b fitted to the daily checkpoints (returning users give a floor b); "
        "required N solves se(N) = |true effect| / (z_(1-alpha/2) + z_power); 'not reachable' when b is above that",
        "power": "share of replicates with p < alpha and the estimate's sign equal to the true effect's",
        "alpha": cfg.analysis.alpha,
        "target_power": cfg.analysis.power,
        "truth": "A/B metrics exact from the click models (marginal and first-click probabilities); "
        "interleaving preferences Monte Carlo (see true_effect_se)",
        "shrinkage": "online relative improvement / offline relative gain (frequency-weighted); improvement = "
        "higher reciprocal rank, higher clicks per query, lower abandonment",
        "query_segments": "head / torso / tail = queries making up the first 50% / next 30% / last 20% of traffic",
        **_counterfactual_conventions(result),
    }


def _counterfactual_conventions(result: SimulationResult) -> dict[str, Any]:
    designs = [d for d in result.config.designs if d.type == "counterfactual"]
    if not designs:
        return {}
    from onlineeval.estimators import catalogue

    cat = catalogue()
    return {
        "counterfactual_effect": "per estimator: V(B) - V(A) of the design's metric, the difference of the two "
        "targets' ratio estimates from the same log (sum of per-impression terms over users / sum of "
        "denominators), delta-method SE of the paired difference from per-user influence values, two-sided "
        "z-test; with bootstrap > 0 the last day's interval is a cluster (user) bootstrap percentile interval",
        "counterfactual_truth": "exact V(B) - V(A) from the click models (as the A/B truth)",
        "counterfactual_cost": "per impression: one logger draw, the shown list's propensities, clicks, and each "
        "incremental estimator's terms for two targets; a checkpoint is O(users) per estimator; estimators that "
        "fit a model on the whole log are recomputed on the last day (and every refit_days days)",
        "counterfactual_aa": "A/A: both targets are the baseline, so the paired difference is identically 0 "
        "(reported as estimate 0, SE 0: cannot reject)",
        "counterfactual_logging_cost": "the logger's online metrics observed on the traffic it served (mean over "
        "replicates on the last day) against ranker A's exact values",
        "estimator_catalogue": {
            spec.name: cat.get(spec.name, {}) for d in designs for spec in d.estimators
        },
    }


def _interleaving_convention(method: str) -> str:
    """What one impression contributes to Delta for ``method``."""
    if method.startswith("probabilistic"):
        return ("expected outcome over the hidden assignment of slots to rankers given the shown list and the "
                "clicks (Hofmann et al. 2011; Schuth et al. 2015), in [-1, 1]")
    if method == "optimized":
        return ("credit difference normalised by its largest possible value for the input lists, in [-1, 1] "
                "(the quantity Radlinski & Craswell 2013's LP makes unbiased)")
    return "win / loss / tie of the credited clicks: +1 / -1 / 0 (Delta = (wins + ties/2)/N - 1/2)"


def write_results(result: SimulationResult, fingerprint: str) -> None:
    out = result.output
    if out is None:
        raise ValueError("write_results needs a result with an output directory")
    out.mkdir(parents=True, exist_ok=True)
    effective = result.config.effective()
    (out / "config.effective.yaml").write_text(
        f"# onlineeval {__version__}, effective config (defaults filled in)\n"
        + yaml.safe_dump(effective, sort_keys=False),
        encoding="utf-8",
    )
    result.rows.to_csv(out / "replicates.csv", index=False)
    result.curves.to_csv(out / "curves.csv", index=False)
    summary = {
        "onlineeval_version": __version__,
        "config_fingerprint": fingerprint,
        "conventions": conventions(result),
        "world": {
            "queries": result.world.n_queries,
            "depth": result.world.depth,
            "grades": result.world.n_grades,
            **{k: v for k, v in result.world.notes.items()},
        },
        "truth": [asdict(t) for t in result.truths],
        **result.summary,
        "config": effective,
    }
    (out / "summary.json").write_text(json.dumps(_clean(summary), indent=2), encoding="utf-8")
    _plots(result, out)


def _clean(x: Any) -> Any:
    """JSON-safe: non-finite floats become null."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "item") and callable(x.item):
        return _clean(x.item())
    return x


def _plots(result: SimulationResult, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cfg = result.config
    curves = result.curves
    prim = curves[curves["primary"]]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    ax = axes[0]
    for name, c in prim[~prim["aa"]].groupby("design", sort=False):
        c = c.sort_values("day")
        line = ax.plot(c["day"], c["power"], marker="o", ms=3, label=f"{name} ({c['metric'].iloc[0]})")[0]
        ax.fill_between(c["day"], c["power"] - 2 * c["power_se"], c["power"] + 2 * c["power_se"],
                        color=line.get_color(), alpha=0.15)
        ax.plot(c["day"], c["analytic_power"], ls="--", color=line.get_color(), lw=1)
    ax.axhline(cfg.analysis.power, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="days", ylabel="power", ylim=(0, 1.02),
           title=f"Power vs days (solid: simulated ±2 SE, dashed: analytic; alpha={cfg.analysis.alpha})")
    ax.legend(fontsize=8)
    ax = axes[1]
    aa = prim[prim["aa"]]
    if len(aa):
        band = binomial_band(int(aa["replicates"].iloc[0]), cfg.analysis.alpha, 0.99)
        ax.axhspan(band.lo_rate, band.hi_rate, color="grey", alpha=0.15, label="99% binomial band")
    for name, c in aa.groupby("design", sort=False):
        c = c.sort_values("day")
        ax.plot(c["day"], c["rejection_rate"], marker="o", ms=3, label=f"{name} A/A")
    ax.axhline(cfg.analysis.alpha, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="days", ylabel="false-positive rate", title="A/A false-positive rate (one band per day)",
           ylim=(0, None))
    if len(aa):
        ax.legend(fontsize=8)
    fig.savefig(out / "power_vs_days.png", dpi=110)
    plt.close(fig)

    # offline relative gain versus online relative effects (A/B metrics)
    off = result.summary["offline"]
    names = [f"{off['metric']} (freq-weighted)", f"{off['metric']} (uniform)"]
    gains = [off["relative_gain_weighted"],
             off["delta"]["uniform"] / off["A"]["uniform"] if off["A"]["uniform"] else float("nan")]
    for seg, v in off["by_segment"].items():
        names.append(f"{off['metric']} {seg}")
        gains.append((v["B"] - v["A"]) / v["A"] if v["A"] else float("nan"))
    online = []  # (label, true relative improvement, mean estimate, +-2 SD of one experiment)
    for design, metrics in result.summary["designs"].items():
        for metric, e in metrics.items():
            if not e.get("relative_effect"):
                continue
            sign = IMPROVEMENT_SIGN.get(metric, 1)
            base = e["true_effect"] / e["relative_effect"]
            fd = e["final_day"]
            online.append((f"{design}: {metric}" + (" (lower is better)" if sign < 0 else ""),
                           sign * e["relative_effect"], sign * fd["mean_estimate"] / base,
                           2 * (fd["sd_estimate"] or 0.0) / abs(base)))
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.5 * max(len(names), len(online)) + 2.4),
                             constrained_layout=True, sharex=True)
    ax = axes[0]
    ax.barh(range(len(names)), [100 * g for g in gains], color="#4c72b0")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.6)
    ax.set(xlabel="relative gain B vs A (%)", title="Offline")
    ax = axes[1]
    if online:
        y = np.arange(len(online))
        ax.barh(y, [100 * o[1] for o in online], color="#dd8452", alpha=0.6, label="true effect")
        ax.errorbar([100 * o[2] for o in online], y, xerr=[100 * o[3] for o in online], fmt="o", color="black",
                    ms=4, capsize=3, label="one experiment: mean ±2 SD (last day)")
        ax.set_yticks(y, [o[0] for o in online], fontsize=8)
        ax.invert_yaxis()
        ax.legend(fontsize=7)
    # the axis covers the point values; wide error bars run off it rather than hide them
    points = [100 * g for g in gains if np.isfinite(g)] + [100 * v for o in online for v in o[1:3]] + [0.0]
    lo, hi = min(points), max(points)
    pad = 0.15 * (hi - lo or 1.0)
    axes[1].set_xlim(lo - pad, hi + pad)
    ax.axvline(0, color="black", lw=0.6)
    ax.set(xlabel="relative improvement B vs A (%)", title="Online (A/B metrics)")
    fig.savefig(out / "offline_vs_online.png", dpi=110)
    plt.close(fig)
    _counterfactual_plots(result, out)


def _counterfactual_plots(result: SimulationResult, out: Path) -> None:
    """``counterfactual_rmse.png``: RMSE against log size per estimator (daily checkpoints);
    ``assumption_sweep.png``: each estimator's bias +-2 SE across the swept parameter."""
    import matplotlib.pyplot as plt

    cf = result.summary.get("counterfactual") or {}
    if cf:
        fig, axes = plt.subplots(1, len(cf), figsize=(6.5 * len(cf), 4.5), constrained_layout=True, squeeze=False)
        for ax, (name, d) in zip(axes[0], cf.items(), strict=True):
            for label, e in d["estimators"].items():
                pts = [(b["impressions"], b["rmse"]) for b in e["by_day"] if b["rmse"] == b["rmse"]]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", ms=3, label=label)
            ax.set(xlabel="logged impressions", ylabel=f"RMSE of V(B) - V(A) ({d['metric']})", xscale="log",
                   yscale="log", title=f"{name}: error against log size")
            ax.legend(fontsize=7)
        fig.savefig(out / "counterfactual_rmse.png", dpi=110)
        plt.close(fig)
    sweep = result.summary.get("assumption_sweep")
    if sweep:
        fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
        x = sweep["values"]
        for label, e in sweep["estimators"].items():
            ax.errorbar(x, e["bias"], yerr=[2 * v for v in e["se"]], marker="o", ms=3, capsize=3, label=label)
        ax.axhline(0, color="black", lw=0.6)
        ax.set(xlabel=sweep["parameter"], ylabel=f"bias of V(B) - V(A) ({sweep['metric']}), +-2 SE",
               title=f"Assumption sweep ({sweep['impressions']:,} impressions per value)")
        ax.legend(fontsize=7)
        fig.savefig(out / "assumption_sweep.png", dpi=110)
        plt.close(fig)


def _fmt(x: float | None, spec: str = ".4f", signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, ("+" if signed else "") + spec)


def _count(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "not reachable"
    return f"{x:,.0f}"


def terminal_summary(result: SimulationResult, source: str = "") -> str:
    cfg = result.config
    s = result.summary
    off = s["offline"]
    lines = [
        f"onlineeval {__version__} simulate {source}".rstrip(),
        f"  seed {cfg.seed}, {cfg.replicates} replicates x {cfg.traffic.days} days x "
        f"~{cfg.traffic.queries_per_day:,} queries/day, {cfg.users.population:,} users",
        *[f"  users{'' if n == 'all' else ' ' + n} ({sh:.0%}): click model {json.dumps(spec)}"
          for n, sh, spec in cfg.users.mixture()],
        "",
        f"Offline {off['metric']}: A {off['A']['weighted']:.4f}  B {off['B']['weighted']:.4f}  "
        f"delta {off['delta']['weighted']:+.4f} ({100 * off['relative_gain_weighted']:+.1f}%) frequency-weighted; "
        f"uniform over queries: delta {off['delta']['uniform']:+.4f}",
    ]
    others = [r for r in result.world.offline.weighted if r not in ("A", "B")]
    if others:
        w, u = result.world.offline.weighted, result.world.offline.uniform
        lines.append("  other rankers: " + ", ".join(
            f"{r} {w[r]:.4f} (uniform {u[r]:.4f})" for r in others))
    notes = result.world.notes
    if notes.get("collection") == "trec":
        for r in ("A", "B"):
            shown = int(notes.get(f"shown_{r}", 0))
            unj = int(notes.get(f"unjudged_shown_{r}", 0))
            lines.append(
                f"  run {r}: {unj} of {shown} shown documents unjudged ({unj / max(shown, 1):.1%}, counted as "
                f"non-relevant); {notes.get(f'queries_missing_from_run_{r}', 0)} judged queries missing from the "
                f"run (shown an empty list); {notes.get(f'queries_only_in_run_{r}', 0)} run queries without "
                f"judgments (left out); ties: {notes.get('ties')}"
            )
    ab_metric = next((d.metric for d in cfg.designs if d.type == "ab"), "reciprocal_rank")
    seg_truth = s.get("truth_by_segment", {})
    for seg, v in off["by_segment"].items():
        online = seg_truth.get(seg, {}).get(ab_metric)
        tail = "" if online is None else (
            f"; online {ab_metric} {online['delta']:+.5f} ({100 * online['delta'] / online['A']:+.1f}%, exact)"
            if online["A"] else "")
        lines.append(f"  {seg:5s} ({v['traffic_share']:.0%} of traffic, {v['queries']:.0f} queries): "
                     f"delta {v['B'] - v['A']:+.4f}"
                     + (f" ({100 * (v['B'] - v['A']) / v['A']:+.1f}%)" if v["A"] else "") + tail)
    lines += ["", f"Online (alpha {cfg.analysis.alpha}, target power {cfg.analysis.power:.0%}):"]
    header = (f"  {'design':14s} {'metric':18s} {'true effect':>13s} {'rel':>7s} {'shrink':>7s} "
              f"{'power@end':>9s} {'analytic':>8s} {'days->pwr':>9s} {'impr. needed':>13s} {'users needed':>13s} "
              f"{'A/A FPR':>8s}")
    lines.append(header)
    for design, metrics in s["designs"].items():
        for metric, e in metrics.items():
            fd = e["final_day"]
            rel = e.get("relative_effect")
            shrink = e.get("shrinkage_vs_offline")
            aa = e.get("aa")
            if aa is None:
                fpr = "-"
            elif aa["degenerate"]:
                fpr = "0 (ties)"
            else:
                fpr = f"{aa['false_positive_rate']:.3f}{'' if aa['within_band'] else '!'}"
            days = e["days_to_target_power"]
            days_s = str(days) if days is not None else (
                f"~{e['analytic_required_days']:.0f}*" if e["analytic_required_days"] is not None else "never")
            lines.append(
                f"  {design if e['primary'] else '':14s} {metric:18s} {_fmt(e['true_effect'], '.3g', True):>13s} "
                f"{(_fmt(100 * rel, '.1f', True) + '%') if rel is not None else '-':>7s} "
                f"{_fmt(shrink, '.2f'):>7s} {fd['power']:>9.2f} {fd['analytic_power']:>8.2f} {days_s:>9s} "
                f"{_count(e['analytic_required_impressions']):>13s} {_count(e['analytic_required_users']):>13s} "
                f"{fpr:>8s}"
            )
    undefined = [f"{d}/{m} ({e['final_day']['undefined']:.0%})" for d, ms in s["designs"].items()
                 for m, e in ms.items() if e["final_day"]["undefined"] > 0]
    if undefined:
        lines.append("  undefined on the last day in some replicates (too few users or comparisons; counted as "
                     "not rejecting): " + ", ".join(undefined))
    ratios = s["required_impressions_ratio"]
    if ratios["reference"]:
        parts = [f"{d} {r:.3g}x" for d, r in ratios["ratios"].items() if r is not None and d != ratios["reference"]]
        if parts:
            lines.append(f"  impressions needed relative to {ratios['reference']}: " + ", ".join(parts))
    lines += [
        "",
        "  true effect: population value (B - A; interleaving: Delta_AB, + favours B; methods differ in scale,",
        "  see summary.json conventions); rel: relative to A; shrink: online relative *improvement* (lower",
        "  abandonment counts as better) / offline relative gain, unstable when the metric's base rate is tiny;",
        "  power: share of replicates rejecting at alpha with the right sign, analytic: the same from the true",
        "  effect and the mean SE; days->pwr: first day with simulated power >= target (* analytic, from",
        "  se^2 = a/N + b fitted to the days, beyond the simulated days; never: the SE floor of this user",
        "  population is above the target); impr./users needed: analytic for the target power (users: expected",
        "  distinct users among that many impressions); '!' = A/A FPR outside its 99% band; '0 (ties)': with B",
        "  replaced by A every comparison of this design is a tie, so A/A cannot reject.",
    ]
    lines += _counterfactual_lines(result)
    if result.output is not None:
        lines.append(f"  results: {result.output}/summary.json, replicates.csv, curves.csv, power_vs_days.png")
    return "\n".join(lines)


def _counterfactual_lines(result: SimulationResult) -> list[str]:
    """Estimation error of every design's effect (A/B, interleaving and off-policy rows in
    one table), the estimator catalogue with support violations, the cost of logging and
    the assumption sweep."""
    s = result.summary
    cf = s.get("counterfactual")
    if not cf:
        return []
    lines = ["", ("Estimation error on the last day (every design; bias = mean estimate - true effect, +-: its SE; "
                  "coverage: share of replicates whose CI holds the truth):"),
             (f"  {'design':14s} {'metric':22s} {'true effect':>12s} {'bias':>10s} {'+-':>8s} {'SD':>9s} "
              f"{'RMSE':>9s} {'coverage':>8s} {'power@end':>9s} {'impr. needed':>13s}")]
    for design, metrics in s["designs"].items():
        for metric, e in metrics.items():
            fd = e["final_day"]
            rmse = fd.get("rmse")
            lines.append(
                f"  {design if e['primary'] else '':14s} {metric[:22]:22s} {_fmt(e['true_effect'], '.3g', True):>12s} "
                f"{_fmt(e['estimator_bias'], '.2e', True):>10s} {_fmt(e['estimator_bias_se'], '.1e'):>8s} "
                f"{_fmt(fd['sd_estimate'], '.2e'):>9s} {_fmt(rmse, '.2e'):>9s} {_fmt(fd['coverage'], '.2f'):>8s} "
                f"{fd['power']:>9.2f} {_count(e['analytic_required_impressions']):>13s}"
            )
    for name, d in cf.items():
        logger = dict(d["logger"] or {})
        lines += ["", (f"Counterfactual design {name}: logger {json.dumps(logger)}; metric {d['metric']}, "
                       f"V({d['targets'][1]}) - V({d['targets'][0]}) = {_fmt(d['true_effect'], '.4g', True)} (exact)")]
        lines.append(f"  {'estimator':22s} {'bias':>10s} {'+-':>8s} {'RMSE':>9s} {'undef.':>6s} "
                     f"{'support violated (impr.)':>26s}  assumption")
        for label, e in d["estimators"].items():
            sv = e["support_violations"]
            support = ", ".join(f"{t} {v['violations_mean']:,.0f} ({v['share']:.0%})" for t, v in sv.items()
                                if v["share"] is not None) or "-"
            flag = ""
            if any(v["violations_mean"] > 0 for v in sv.values()):
                bad = [t for t, v in sv.items() if v["violations_mean"] > 0]
                flag = f"  [cannot evaluate {', '.join(bad)} where its logging probability is 0]"
            lines.append(f"  {label[:22]:22s} {_fmt(e['bias'], '.2e', True):>10s} {_fmt(e['bias_se'], '.1e'):>8s} "
                         f"{_fmt(e['rmse'], '.2e'):>9s} {_fmt(e['undefined_share'], '.0%'):>6s} {support:>26s}  "
                         f"{e['assumption']}{flag}")
        lines.append(f"  ({d['whole_log_refit']}; support: mean impressions per replicate on the last day whose "
                     "target list has an event of logging probability 0 at the estimator's level; A/A: both targets "
                     "are A, the paired difference is identically 0, shown as '0 (ties)')")
        cost = d["logging_cost"]
        if cost:
            lines.append("  cost of logging (the logger's own metrics on the traffic it served vs ranker A, exact): "
                         + "; ".join(f"{m} {c['logger_observed']:.4f} vs {c['ranker_A_exact']:.4f} "
                                     f"({_fmt(100 * c['relative'], '.1f', True) if c['relative'] is not None else '-'}%"
                                     f"{', lower is better' if c['improvement_sign'] < 0 else ''})"
                                     for m, c in cost.items()))
    sweep = s.get("assumption_sweep")
    if sweep:
        lines += ["", (f"Assumption sweep ({sweep['design']}, {sweep['metric']}): bias +- SE of each estimator as "
                       f"{sweep['parameter']} moves ({sweep['impressions']:,} logged impressions per value, exact truth)")]
        lines.append(f"  {'estimator':22s} " + " ".join(f"{v:>19g}" for v in sweep["values"]))
        lines.append(f"  {'truth':22s} " + " ".join(f"{t:>+19.4f}" for t in sweep["truth"]))
        for label, e in sweep["estimators"].items():
            cells = [f"{_fmt(b, '.4f', True)} +- {_fmt(se, '.4f')}" for b, se in zip(e["bias"], e["se"], strict=True)]
            lines.append(f"  {label[:22]:22s} " + " ".join(f"{c:>19s}" for c in cells))
    return lines
