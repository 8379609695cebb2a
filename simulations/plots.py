"""The figures of a simulation's report, as matplotlib :class:`~matplotlib.figure.Figure` objects.

:func:`figures` builds them; :func:`simulations.report.write_results` saves each as
``<name>.png`` in the results folder and :meth:`onlineeval.api.Simulation.figures` returns them
(not shown, not saved). The figures are built without :mod:`matplotlib.pyplot` (no global
figure state, no GUI backend), so they are safe in notebooks, threads and worker processes.

- ``power_vs_days``: power against days of every design and pair; A/A and null-user
  rejection rates against the binomial band of alpha (an A/A whose comparisons are all ties is 0 by
  construction: left out, with a note under the panel);
- ``offline_vs_online``: offline relative gains next to every online statistic in standard
  errors of one experiment of the simulated length;
- ``counterfactual_rmse`` and ``assumption_sweep`` with counterfactual designs (the latter with
  ``analysis.assumption_sweep``; estimators far off the others on a panel with its own y axis).
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from onlineeval.stats import binomial_band
from simulations.analysis import improvement_sign, is_biased_entry
from simulations.report_null import null_delta_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from simulations.job import SimulationResult

__all__ = ["aa_ties", "assumption_sweep_figure", "counterfactual_figures", "far_off_estimators", "figures",
           "offline_online_figure", "plotted_series", "power_figure", "save_png", "swept_parameter_label"]

#: ``savefig`` settings under which :func:`save_png` draws a figure once (matplotlib's defaults)
_SAVEFIG_DEFAULTS = {"savefig.bbox": None, "savefig.facecolor": "auto", "savefig.edgecolor": "auto",
                     "savefig.transparent": False}


def figures(result: SimulationResult) -> dict[str, Figure]:
    """Every figure of the report, by name (the PNG file's stem), in the report's order."""
    return {"power_vs_days": power_figure(result), "offline_vs_online": offline_online_figure(result),
            **counterfactual_figures(result)}


def save_png(fig: Figure, path: Any, dpi: float) -> None:
    """``fig.savefig(path, dpi=dpi)`` as a PNG, in one draw instead of two.

    With a layout engine (our figures are ``constrained_layout``), ``savefig`` draws the
    figure twice: once with rendering disabled, to run the layout, and once for the pixels.
    Drawing on an Agg canvas runs the same layout and then renders, so the file is the same
    byte for byte (tested against ``savefig`` for every figure of a report) for 8 to 14% less
    CPU (``power_vs_days`` 0.33 -> 0.29 s, ``offline_vs_online`` 0.29 -> 0.27 s; about 0.07 s
    of a sweep point's 1.1 s). Under ``savefig`` settings other than matplotlib's defaults
    (``savefig.bbox``, ``.facecolor``, ``.edgecolor``, ``.transparent`` in a matplotlibrc),
    it calls ``savefig``. The figure keeps its dpi and canvas.
    """
    from matplotlib import rcParams
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if any(rcParams[k] != v for k, v in _SAVEFIG_DEFAULTS.items()):
        fig.savefig(path, dpi=dpi)
        return
    canvas, old_dpi = fig.canvas, fig.dpi
    try:
        fig.dpi = dpi
        FigureCanvasAgg(fig).print_png(path)
    finally:
        fig.dpi = old_dpi
        fig.set_canvas(canvas)


def plotted_series(result: SimulationResult) -> list[tuple[str, str]]:
    """``(design, metric)`` of the power curves: an A/B design's primary metric, every pair of
    an interleaving or multileaving design, a counterfactual design's primary estimator."""
    curves = result.curves
    kinds = {d.name: d.type for d in result.config.designs}
    out = []
    for (design, metric), c in curves[~curves["aa"]].groupby(["design", "metric"], sort=False):
        if kinds.get(design) == "interleaving" or bool(c["primary"].iloc[0]):
            out.append((str(design), str(metric)))
    return out


def power_figure(result: SimulationResult) -> Figure:
    """``power_vs_days``: simulated power against days of every design's primary metric and
    every pair of an interleaving design (biased designs marked), and the A/A and null-user
    rejection rates against the binomial band of alpha."""
    import numpy as np
    from matplotlib import rcParams
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from simulations.sequential import truth_rejection_by_day

    cfg = result.config
    curves = result.curves
    series = plotted_series(result)
    designs = list(dict.fromkeys(d for d, _ in series))
    styles = ["-", "--", "-.", ":"]
    colours = rcParams["axes.prop_cycle"].by_key()["color"]
    metric_colour: dict[str, str] = {}
    fig = Figure(figsize=(13, 5), constrained_layout=True)
    # one day axis for both panels, ticks on whole days (a 2-day run was ticked 1.0, 1.2, ..., and a right panel
    # with nothing to draw ran from 0 to 1)
    axes = fig.subplots(1, 2, sharex=True)
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))
    ax = axes[0]
    for k, (name, metric) in enumerate(series):
        c = curves[(curves["design"] == name) & (curves["metric"] == metric) & (~curves["aa"])].sort_values("day")
        multi = sum(1 for d, _ in series if d == name) > 1
        colour = metric_colour.setdefault(metric, colours[len(metric_colour) % len(colours)]) if multi \
            else colours[k % len(colours)]
        entry = result.summary["designs"].get(name, {}).get(metric, {})
        biased = is_biased_entry(entry)
        label = f"{name}: {metric}" + (" [biased]" if biased else "")
        ax.plot(c["day"], c["power"], marker="o", ms=3, color=colour, ls=styles[designs.index(name) % len(styles)],
                label=label)
        if len(series) <= 4:  # more bands than that hide the lines
            ax.fill_between(c["day"], c["power"] - 2 * c["power_se"], c["power"] + 2 * c["power_se"],
                            color=colour, alpha=0.12)
    ax.axhline(cfg.analysis.power, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="days", ylabel="power (simulated" + (", ±2 SE band)" if len(series) <= 4 else ")"), ylim=(0, 1.02),
           title=f"Power vs days, every design and pair (alpha={cfg.analysis.alpha})")
    ax.legend(fontsize=7, ncol=2 if len(series) > 8 else 1)
    ax = axes[1]
    prim = curves[curves["primary"]]
    aa = prim[prim["aa"]]
    if len(aa):
        band = binomial_band(int(aa["replicates"].iloc[0]), cfg.analysis.alpha, 0.99)
        ax.axhspan(band.lo_rate, band.hi_rate, color="grey", alpha=0.15, label="99% binomial band of alpha")
    top = 0.1
    ties = []  # designs whose A/A comparisons are all ties: a line at 0 by construction, not drawn
    truth_drawn: list[str] = []  # of those, the ones whose rejection rate at their exact truth is drawn instead
    for k, (name, c) in enumerate(aa.groupby("design", sort=False)):
        c = c.sort_values("day")
        colour = colours[k % len(colours)]
        metric = str(c["metric"].iloc[0])
        entry = result.summary["designs"].get(name, {}).get(metric, {})
        if aa_ties(entry):
            ties.append(str(name))
            rows = getattr(result, "rows", None)
            at_truth = None if rows is None else truth_rejection_by_day(rows, str(name), metric, entry,
                                                                        cfg.analysis.alpha)
            if at_truth is not None:  # in its place: the rate of rejecting its exact truth, a true null
                ax.plot(at_truth[0], at_truth[1], ls="-.", marker="s", ms=3, color=colour,
                        label=f"{name} at its exact truth" + (" [biased]" if is_biased_entry(entry) else "")
                        + " (simulated; H0: B - A = truth)")
                top = max(top, float(np.nanmax(at_truth[1])))
                truth_drawn.append(str(name))
        else:
            ax.plot(c["day"], c["rejection_rate"], marker="o", ms=3, color=colour, label=f"{name} A/A (simulated)")
            top = max(top, float(c["rejection_rate"].max()))
        null = entry.get("null")
        if null:
            how = "simulated" if "replicates" in null else "analytic"
            ax.plot(c["day"], null["rejection_rate"], ls="--", marker="x", ms=4, color=colour,
                    label=f"{name} null user ({how}; Delta {null_delta_text(null)}"
                    + (" exact" if null.get("exact") else "") + (", biased)" if null["biased"] else ")"))
            top = max(top, max(null["rejection_rate"]))
    ax.axhline(cfg.analysis.alpha, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="days" + (f"\n{_wrap(aa_ties_note(ties, truth_drawn), 72)}" if ties else ""),
           ylabel="rejection rate when no ranker is better" if not truth_drawn else "rejection rate under a true null",
           title="No better ranker: A/A and null user (clicks ignore relevance)" if not truth_drawn else
           "True nulls: A/A, null user, exact truth (H0: B - A = truth)",
           ylim=(0, min(1.02, 1.1 * top)))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return fig


def aa_ties(entry: Mapping[str, Any]) -> bool:
    """The design's A/A replicates are all ties on the last day (estimate and SE exactly 0, the summary's
    ``aa.degenerate``: e.g. balanced interleaving or a counterfactual estimate of a ranker against itself):
    its rejection rate is 0 by construction and says nothing about calibration."""
    return bool((entry.get("aa") or {}).get("degenerate"))


def aa_ties_note(designs: Sequence[str], at_truth: Sequence[str] = ()) -> str:
    """The power figure's note on the A/A lines it leaves out (:func:`aa_ties`) and on the exact-truth lines drawn
    in place of some (``at_truth``: :func:`simulations.sequential.truth_rejection_by_day`)."""
    bare = [d for d in designs if d not in at_truth]
    text = (f"A/A of {', '.join(designs)} not drawn: every comparison a tie (estimate and SE 0), so it cannot "
            "reject")
    if at_truth:
        text += (f"; drawn instead for {', '.join(at_truth)}: the test of H0: B - A = the exact truth (true in every "
                 "replicate), the false-positive rate by day")
    if bare:
        text += f"; {', '.join(bare)}: no calibration check"
    return text


def online_points(result: SimulationResult) -> list[dict[str, Any]]:
    """Every design's statistics in standard errors of one experiment of the simulated length:
    the true effect / the last day's mean SE (the replicates' SD for an estimate whose SE holds a data-driven
    choice fixed: its summary's ``se_measure``), the replicates' mean and spread on that scale,
    improvements positive (lower abandonment counts as better). ``biased``: :func:`is_biased_entry`, the
    test behind the tables' marks (null check, bias against the exact truth, no support). The label gives the
    metric's relative change with its sign (abandonment -5.4% when it fell) and, where lower is better,
    whether that is an improvement."""
    points = []
    for design, metrics in result.summary["designs"].items():
        for metric, e in metrics.items():
            fd = e["final_day"]
            se = fd.get("sd_estimate") if str(e.get("se_measure", "")).startswith("replicates'") \
                else fd.get("mean_se")
            if not se or not math.isfinite(se) or se <= 0:
                continue
            sign = improvement_sign(result.summary, design, metric)
            rel = e.get("relative_effect")
            base = (e["true_effect"] / rel) if rel else None
            label = f"{design}: {metric}"
            if rel is not None:
                label += f" ({100 * rel:+.1f}%"
                if base is not None and metric == "abandonment" and abs(base) < 0.01:
                    label += f" of a tiny {100 * abs(base):.2g}% base rate"
                if sign < 0:
                    label += (": improvement" if rel < 0 else ": regression" if rel > 0 else "") \
                        + ", lower is better"
                label += ")"
            elif sign < 0:
                label += " (lower is better)"
            null = e.get("null")
            points.append({
                "label": label,
                "true": sign * e["true_effect"] / se,
                "mean": sign * fd["mean_estimate"] / se,
                "spread": 2 * (fd["sd_estimate"] or 0.0) / se,
                "null": (null["delta"] / se) if null else None,
                "biased": is_biased_entry(e),
            })
    return points


def offline_online_figure(result: SimulationResult) -> Figure:
    """``offline_vs_online``: offline relative gains (%), and every online statistic in
    SE units of one experiment of the simulated length (comparable across metrics and designs)."""
    import numpy as np
    from matplotlib.figure import Figure
    from scipy import stats as sps

    cfg = result.config
    off = result.summary["offline"]
    names = [f"{off['metric']} (freq-weighted)", f"{off['metric']} (uniform)"]
    gains = [off["relative_gain_weighted"],
             off["delta"]["uniform"] / off["A"]["uniform"] if off["A"]["uniform"] else float("nan")]
    for seg, v in off["by_segment"].items():
        names.append(f"{off['metric']} {seg}")
        gains.append((v["B"] - v["A"]) / v["A"] if v["A"] else float("nan"))
    weighted = result.world.offline.weighted
    for r in weighted:
        if r not in ("A", "B"):
            names.append(f"{off['metric']} {r} vs A (freq-weighted)")
            gains.append((weighted[r] - weighted["A"]) / weighted["A"] if weighted["A"] else float("nan"))
    online = online_points(result)
    names = [_wrap(n) for n in names]
    online_labels = [_wrap(o["label"] + (" [biased]" if o["biased"] else "")) for o in online]
    rows = max(sum(1 + n.count("\n") for n in names), sum(1 + n.count("\n") for n in online_labels))
    fig = Figure(figsize=(13, 0.32 * rows + 0.1 * max(len(names), len(online)) + 3.0), constrained_layout=True)
    axes = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.6]})
    ax = axes[0]
    ax.barh(range(len(names)), [100 * g for g in gains], color="#4c72b0")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.6)
    ax.set(xlabel="relative gain vs A (%)", title="Offline")
    ax = axes[1]
    days = cfg.traffic.days
    z_target = float(sps.norm.ppf(1 - cfg.analysis.alpha / 2) + sps.norm.ppf(cfg.analysis.power))
    if online:
        y = np.arange(len(online))
        ax.barh(y, [o["true"] for o in online], color=["#c44e52" if o["biased"] else "#dd8452" for o in online],
                alpha=0.6, label="true effect / SE")
        ax.errorbar([o["mean"] for o in online], y, xerr=[o["spread"] for o in online], fmt="o", color="black",
                    ms=4, capsize=3, label="replicates: mean estimate ±2 SD, in SE")
        nulls = [(o["null"], i) for i, o in enumerate(online) if o["null"] is not None]
        if nulls:
            ax.plot([v for v, _ in nulls], [i for _, i in nulls], "x", color="#c44e52", ms=8, mew=2,
                    label="null user's Delta / SE (bias; 0 if unbiased)")
        ax.set_yticks(y, online_labels, fontsize=8)
        ax.invert_yaxis()
        for sgn in (-1, 1):
            ax.axvline(sgn * z_target, color="grey", lw=0.8, ls=":")
        # under the figure, not under the right axes: centred there it ran past the figure's right edge
        fig.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="outside lower right", ncol=3)
    else:
        ax.text(0.5, 0.5, "no online statistic with a standard error", ha="center", va="center",
                transform=ax.transAxes)
    ax.axvline(0, color="black", lw=0.6)
    ax.set(xlabel=f"effect / SE after {days} days (improvement > 0)\n"
                  f"dotted: ±{z_target:.2f} = {cfg.analysis.power:.0%} power",
           title="Online: every statistic on one scale\n(effect / SE, last day)")
    return fig


def _wrap(label: str, width: int = 46) -> str:
    """A tick label on lines of at most ``width`` characters (a long one squeezed its panel)."""
    return "\n".join(textwrap.wrap(label, width, break_long_words=False)) or label


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LINESTYLES = ("-", "--", "-.", ":")


def counterfactual_figures(result: SimulationResult) -> dict[str, Figure]:
    """With counterfactual designs, ``counterfactual_rmse``: RMSE against log size per estimator
    (daily checkpoints); with ``analysis.assumption_sweep``, ``assumption_sweep``: each
    estimator's bias +-2 SE across the swept parameter."""
    from matplotlib.figure import Figure

    figs: dict[str, Figure] = {}
    cf = result.summary.get("counterfactual") or {}
    if cf:
        fig = Figure(figsize=(6.5 * len(cf), 4.5), constrained_layout=True)
        axes = fig.subplots(1, len(cf), squeeze=False)
        for ax, (name, d) in zip(axes[0], cf.items(), strict=True):
            for k, (label, e) in enumerate(d["estimators"].items()):
                pts = [(b["impressions"], b["rmse"]) for b in e["by_day"]
                       if b["rmse"] is not None and b["rmse"] == b["rmse"]]
                if not pts:
                    continue
                # a marker and line style of its own: estimators of equal RMSE draw on top of each other; one
                # measured on the last day only (fitted on the whole log) is a single point, drawn large on top
                alone = len(pts) == 1 and len(e["by_day"]) > 1
                # marked as the tables mark it: its RMSE is mostly its bias, not a sensitivity
                entry = (result.summary.get("designs") or {}).get(name, {}).get(label, {})
                mark = (" [no support]" if entry.get("no_support") else " [biased]") if is_biased_entry(entry) else ""
                ax.plot(*zip(*pts, strict=True), marker=_MARKERS[k % len(_MARKERS)], ms=8 if alone else 4,
                        ls=_LINESTYLES[k % len(_LINESTYLES)], zorder=3 if alone else 2,
                        label=label + mark + (" (last day only)" if alone else ""))
            ax.set(xlabel="logged impressions", ylabel=f"RMSE of V(B) - V(A) ({d['metric']})", xscale="log",
                   yscale="log", title=f"{name}: error against log size")
            ax.legend(fontsize=7)
        figs["counterfactual_rmse"] = fig
    sweep = result.summary.get("assumption_sweep")
    if sweep:
        figs["assumption_sweep"] = assumption_sweep_figure(sweep, getattr(result, "config", None))
    return figs


#: an estimator is drawn in a panel of its own when the other estimators' y range (bias +-2 SE and 0) would
#: be less than 1 / FAR_OFF of the range with it (clipped IPS's -0.2 flattened IIPS's +0.004 to +0.03 trend)
FAR_OFF = 2.5


def _span(estimators: Mapping[str, Mapping[str, Sequence[float]]], labels: Sequence[str]) -> float:
    """The y range of ``labels``' bias +-2 SE bars, 0 included."""
    lo = hi = 0.0
    for label in labels:
        for b, s in zip(estimators[label]["bias"], estimators[label]["se"], strict=True):
            if b is not None and s is not None and b == b and s == s:
                lo, hi = min(lo, b - 2 * abs(s)), max(hi, b + 2 * abs(s))
    return hi - lo


def far_off_estimators(estimators: Mapping[str, Mapping[str, Sequence[float]]]) -> list[str]:
    """The estimators of an assumption sweep that would set the y range: repeatedly, the estimator with the
    largest ``|bias| + 2 se`` is far off when the y range of the others is below ``1 / FAR_OFF`` of the range
    with it (:data:`FAR_OFF`); at least two estimators stay in the main panel."""
    def scale(label: str) -> float:
        e = estimators[label]
        v = [abs(b) + 2 * abs(s) for b, s in zip(e["bias"], e["se"], strict=True)
             if b is not None and s is not None and b == b and s == s]
        return max(v, default=0.0)

    near = sorted(estimators, key=scale, reverse=True)
    far: list[str] = []
    while len(near) > 2 and _span(estimators, near) > FAR_OFF * _span(estimators, near[1:]):
        far.append(near.pop(0))
    return [k for k in estimators if k in far]


def swept_parameter_label(parameter: str, config: Any) -> str:
    """The assumption sweep's x label: the parameter's key, and for ``users.types[i].<field>`` the user
    type's name and click model (``users.types[1].share`` alone did not say which users' share moves)."""
    m = re.fullmatch(r"users\.types\[(\d+)\]\.(.+)", parameter)
    types = getattr(getattr(config, "users", None), "types", None) or []
    if not m or int(m.group(1)) >= len(types):
        return parameter
    t = types[int(m.group(1))]
    model = getattr(t, "click_model", None) or {}
    clicks = " ".join(str(model[k]) for k in ("name", "preset") if model.get(k) is not None)
    what = f"'{t.name}' users" + (f" ({clicks} clicks)" if clicks else "")
    if m.group(2) == "share":
        return f"share of the {what}: {parameter}"
    return f"{parameter} (user type {what})"


def assumption_sweep_figure(sweep: Mapping[str, Any], config: Any = None) -> Figure:
    """``assumption_sweep``: each estimator's bias +-2 SE across the swept parameter; estimators far off
    the others (:func:`far_off_estimators`) on a panel of their own, with their own y axis."""
    from matplotlib import rcParams
    from matplotlib.figure import Figure

    colours = rcParams["axes.prop_cycle"].by_key()["color"]
    estimators = sweep["estimators"]
    far = far_off_estimators(estimators)
    groups = [[k for k in estimators if k not in far]] + ([far] if far else [])
    fig = Figure(figsize=(12 if far else 7, 4.5), constrained_layout=True)
    axes = fig.subplots(1, len(groups), squeeze=False)[0]
    x = sweep["values"]
    xlabel = swept_parameter_label(str(sweep["parameter"]), config)
    for ax, group in zip(axes, groups, strict=True):
        for label in group:
            e = estimators[label]
            ax.errorbar(x, e["bias"], yerr=[2 * v for v in e["se"]], marker="o", ms=3, capsize=3, label=label,
                        color=colours[list(estimators).index(label) % len(colours)])
        ax.axhline(0, color="black", lw=0.6)
        ax.set(ylabel=f"estimate - truth, V(B) - V(A)\n({sweep['metric']}; one log, ±2 SE)")
        ax.legend(fontsize=7)
    title = (f"Assumption sweep: one {sweep['impressions']:,}-impression log per value\n"
             + ("(common random numbers: unbiased estimators wander together)" if sweep.get("coupled", True) else
                "(the same queries and lists, clicks not coupled: read each point against its SE)"))
    if far:
        axes[0].set_title("the other estimators", fontsize=10)
        axes[1].set_title(f"far off (would stretch the others' y range over {FAR_OFF:g}x): own y axis",
                          fontsize=10)
        fig.suptitle(title)
        fig.supxlabel(xlabel)  # one label under both panels (the right one's ran past the edge)
    else:
        axes[0].set_title(title)
        axes[0].set_xlabel(xlabel)
    return fig
