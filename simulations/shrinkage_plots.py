"""Plots of the shrinkage study (:mod:`simulations.shrinkage`): views of its dictionary,
no numbers of their own."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["plot_mde", "plot_relation"]


def plot_relation(study: Mapping[str, Any], path: Path) -> None:
    """One panel per primary design: offline delta against the true online effect (Monte
    Carlo error bars), the through-origin fit and its confidence band, a colour per group."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    designs = list(dict.fromkeys(r["design"] for g in study["groups"] for r in g["relations"] if r["primary"]))
    fig, axes = plt.subplots(1, max(len(designs), 1), figsize=(4.8 * max(len(designs), 1), 4.2), squeeze=False)
    for ax, design in zip(axes[0], designs):
        metric = ""
        for gi, group in enumerate(study["groups"]):
            rel = next((r for r in group["relations"] if r["primary"] and r["design"] == design), None)
            if rel is None:
                continue
            metric = rel["metric"]
            xs = np.array([s["offline_delta"] for s in rel["systems"]])
            ys = np.array([s["online_effect"] for s in rel["systems"]])
            es = np.array([s["online_effect_se"] for s in rel["systems"]])
            colour = f"C{gi % 10}"
            ax.errorbar(xs, ys, yerr=2 * es if np.any(es > 0) else None, fmt="o", color=colour, ms=4,
                        label=group["label"])
            fit = rel["through_origin"]
            if fit is not None and xs.size:
                grid = np.linspace(min(0.0, xs.min()), max(0.0, xs.max()), 50)
                lo, hi = fit["slope_ci"]
                ax.plot(grid, fit["slope"] * grid, "-", color=colour, lw=1)
                ax.fill_between(grid, np.minimum(lo * grid, hi * grid), np.maximum(lo * grid, hi * grid),
                                color=colour, alpha=0.15, lw=0)
        ax.axhline(0.0, color="grey", lw=0.5)
        ax.axvline(0.0, color="grey", lw=0.5)
        ax.set_xlabel(f"offline delta ({study['offline_metric']})")
        ax.set_ylabel(f"true online effect ({metric})")
        ax.set_title(f"{design}: fit through 0, {study['level']:.0%} CI", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_mde(study: Mapping[str, Any], path: Path) -> None:
    """Offline MDE against days, one line per group, design and traffic (band: the slope's CI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    k = 0
    bands = []
    for group in study["groups"]:
        for m in group["mde"]:
            if not m["offline_mde"]:
                continue
            colour = f"C{k % 10}"
            k += 1
            days = np.array(m["days"])
            unbounded = any(v is None for v in m["offline_mde_high"])
            ax.plot(days, m["offline_mde"], "--" if unbounded else "-", color=colour,
                    label=f"{m['design']}, {group['label']}, {m['queries_per_day']:g}/day"
                          + (" (slope CI includes 0: MDE unbounded above)" if unbounded else ""))
            low = np.array(m["offline_mde_low"], dtype=float)
            high = np.array([np.nan if v is None else v for v in m["offline_mde_high"]], dtype=float)
            bands.append((days, low, high, colour, np.array(m["offline_mde"], dtype=float)))
    ax.set_xlabel("days")
    ax.set_ylabel(f"smallest detectable offline gain ({study['offline_metric']})")
    ax.set_yscale("log")
    if bands:  # an unbounded upper end reaches the top of the plot (hatched) instead of vanishing
        finite = [v for _, lo, hi, _, mid in bands for v in (*lo, *hi, *mid) if np.isfinite(v) and v > 0]
        top = 3 * max(finite) if finite else 1.0
        for days, low, high, colour, _ in bands:
            open_end = ~np.isfinite(high)
            ax.fill_between(days, low, np.where(open_end, top, high), color=colour, alpha=0.12, lw=0)
            if open_end.any():
                ax.fill_between(days, low, top, where=open_end, facecolor="none", edgecolor=colour, hatch="//",
                                alpha=0.4, lw=0)
        ax.set_ylim(top=top)
    if k:
        ax.legend(fontsize=7)
    ax.set_title("offline MDE (power and alpha of the config; band: slope CI)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
