"""Simulations in the Python API: :func:`simulate` with its :class:`Simulation`, :func:`sweep` with its :class:`Sweep`.

The jobs of ``onlineeval simulate`` and ``onlineeval sweep``, in memory unless an output folder is given;
tables as DataFrames, plots as matplotlib figures.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onlineeval.api._inputs import PathLike, _is_path
from onlineeval.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure

    from simulations.config import Config
    from simulations.job import SimulationResult
    from simulations.sweep import SweepResult


@dataclass(frozen=True)
class Simulation:
    """A finished simulation: :class:`simulations.job.SimulationResult` with its tables as
    DataFrames and its plots as matplotlib figures (drawn on demand).

    Attributes
    ----------
    result:
        The job's result (config, world, ground truth, replicate rows, curves, summary).
    """

    result: SimulationResult

    @property
    def config(self) -> Config:
        """The validated, effective config."""
        return self.result.config

    @property
    def rows(self) -> pd.DataFrame:
        """One row per replicate x design x day x metric (``replicates.csv``)."""
        return self.result.rows

    @property
    def curves(self) -> pd.DataFrame:
        """Power and analytic power per design, metric and day over the replicates (``curves.csv``)."""
        return self.result.curves

    @property
    def summary(self) -> dict[str, Any]:
        """Every number of the report (``summary.json`` without the file-only parts)."""
        return self.result.summary

    @property
    def output(self) -> Path | None:
        """The results directory, or ``None`` when nothing was written."""
        return self.result.output

    @property
    def conventions(self) -> dict[str, Any]:
        """The conventions every number was computed under (``summary.json``'s ``conventions``: offline metric,
        user types, seed, randomisation unit, effects, sample size, truth, null check, ...)."""
        from simulations.report import conventions

        return conventions(self.result)

    def designs(self) -> pd.DataFrame:
        """One row per design and metric: true effect, relative effect, shrinkage, power on the
        last day (simulated and analytic), estimator bias, A/A false-positive rate and the
        analytic impressions needed for the target power.

        ``shrinkage`` is the online relative improvement divided by the offline relative
        gain (``shrinkage_vs_offline`` of ``summary.json``; missing for interleaving, whose
        preference has no relative scale). ``analytic_withheld``: the design or its estimate is
        biased, so its analytic power and sizes are missing (``summary.json`` keeps them under
        ``analytic_if_unbiased``); ``required_impressions_unstable``: the size the report marks
        '?' (its se^2 = a/N + b fit is near its floor or loosely determined by the replicates).
        ``attrs["conventions"]`` holds the conventions the numbers were computed under
        (:attr:`conventions`, ``summary.json``'s ``conventions``).
        """
        import pandas as pd

        rows = []
        for design, metrics in self.summary["designs"].items():
            for metric, e in metrics.items():
                last = e.get("final_day") or {}
                aa = e.get("aa") or {}
                rows.append({
                    "design": design, "metric": metric, "primary": e.get("primary"),
                    "true_effect": e.get("true_effect"), "true_effect_se": e.get("true_effect_se"),
                    "relative_effect": e.get("relative_effect"), "shrinkage": e.get("shrinkage_vs_offline"),
                    "power": last.get("power"), "analytic_power": last.get("analytic_power"),
                    "estimator_bias": e.get("estimator_bias"), "estimator_bias_se": e.get("estimator_bias_se"),
                    "days_to_target_power": e.get("days_to_target_power"),
                    "required_impressions": e.get("analytic_required_impressions"),
                    "required_impressions_unstable": bool(e.get("analytic_required_impressions_unstable")),
                    "analytic_withheld": bool(e.get("analytic_withheld")),
                    "aa_false_positive_rate": aa.get("false_positive_rate"),
                })
        frame = pd.DataFrame(rows)
        frame.attrs["conventions"] = self.conventions
        return frame

    @property
    def shrinkage(self) -> pd.DataFrame:
        """The A/B metrics' shrinkage: ``design, metric, relative_effect, shrinkage`` (online relative
        improvement / offline relative gain)."""
        d = self.designs()
        return d[d["shrinkage"].notna()][["design", "metric", "relative_effect", "shrinkage"]].reset_index(drop=True)

    def figures(self) -> dict[str, Figure]:
        """The report's figures, by the name of the PNG ``onlineeval simulate`` writes for each
        (``power_vs_days``, ``offline_vs_online``, with counterfactual designs
        ``counterfactual_rmse`` and ``assumption_sweep``): new figures, not shown, not saved
        (:mod:`simulations.plots`)."""
        from simulations.plots import figures

        return figures(self.result)

    def power_figure(self) -> Figure:
        """A compact power-versus-days panel of every design's primary metric: simulated (solid,
        with +-1 SE) and analytic (dashed), with the target power; a new figure (not shown, not
        saved). The report's own figures are :meth:`figures`."""
        from matplotlib.figure import Figure

        c = self.curves
        c = c[(~c["aa"].astype(bool)) & c["primary"].astype(bool)]
        fig = Figure(figsize=(7, 4.5), constrained_layout=True)
        ax = fig.add_subplot()
        for design, g in c.groupby("design", sort=False):
            g = g.sort_values("day")
            (line,) = ax.plot(g["day"], g["power"], marker="o", label=f"{design} ({g['metric'].iloc[0]})")
            ax.fill_between(g["day"], g["power"] - g["power_se"], g["power"] + g["power_se"],
                            color=line.get_color(), alpha=0.15)
            ax.plot(g["day"], g["analytic_power"], linestyle="--", color=line.get_color())
        ax.axhline(self.config.analysis.power, color="grey", linewidth=0.8, linestyle=":")
        ax.set(xlabel="day", ylabel="power (solid: simulated, dashed: analytic)", ylim=(0, 1.02))
        ax.legend(loc="lower right", fontsize="small")
        return fig

    def shrinkage_figure(self) -> Figure:
        """The offline relative gain (frequency-weighted) next to each A/B metric's online relative
        effect (B - A) / A, labelled with its shrinkage; a new figure (not shown, not saved)."""
        from matplotlib.figure import Figure

        off = self.summary["offline"]
        labels = [f"offline {off['metric']} (freq-weighted)"]
        values = [100 * off["relative_gain_weighted"]]
        notes = [""]
        for row in self.shrinkage.itertuples():
            labels.append(f"online {row.design}: {row.metric}")
            values.append(100 * row.relative_effect)
            notes.append(f"shrink {row.shrinkage:.2f}")
        fig = Figure(figsize=(7, 0.5 * len(labels) + 1.5), constrained_layout=True)
        ax = fig.add_subplot()
        y = list(range(len(labels)))[::-1]
        ax.barh(y, values, color=["grey"] + ["C0"] * (len(values) - 1))
        for yi, v, note in zip(y, values, notes):
            ax.annotate(note, (v, yi), xytext=(4, 0), textcoords="offset points", va="center", fontsize="small")
        ax.set_yticks(y, labels)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel("relative difference B vs A (%)")
        return fig

    def text(self, source: str = "") -> str:
        """The terminal report of ``onlineeval simulate``."""
        from simulations.report import terminal_summary

        return terminal_summary(self.result, source)


def _check_output(output: Any) -> None:
    """An output folder given as empty text is refused (:func:`simulations.config.run.check_output`)."""
    from simulations.config.run import check_output

    check_output(output, "output")


def simulate(
    config: PathLike | Mapping[str, Any] | Config,
    *,
    overrides: Mapping[str, Any] | None = None,
    output: PathLike | None = None,
    workers: int | None = None,
    fresh: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
    **key_path_overrides: Any,
) -> Simulation:
    """Run the online simulation of ``onlineeval simulate``; in memory unless ``output`` is given.

    Parameters
    ----------
    config:
        A YAML file (relative collection paths are relative to it), a mapping of the same
        keys (relative paths relative to the working directory) or a validated
        :class:`simulations.config.Config`.
    overrides:
        Key paths to set, dotted with list indices in brackets, e.g. ``{"traffic.days": 7,
        "designs[0].analysis.sequential": "msprt"}`` (as ``onlineeval simulate --set``).
    output:
        Results directory to write (``summary.json``, CSVs, plots) as the CLI does;
        ``None`` writes nothing. Relative to the working directory.
    workers:
        Processes for replicates (default the config's; 0 = all cores). The numbers do not
        depend on it.
    fresh:
        With ``output``: recompute every replicate, ignoring what an earlier run of the same
        config left in it: an interrupted run's finished replicates and a finished run's
        ``replicates.finished.jsonl.gz`` (which a run with another number of replicates
        otherwise reuses; ``fresh`` deletes it).
    on_progress, log:
        Called with (finished replicates, total) as replicates finish, and with one-line
        progress messages (the CLI's progress bar and stderr lines come from these).
    **key_path_overrides:
        Top-level keys (``replicates=20``, ``seed=3``) or key paths with ``__`` for the dot
        (``traffic__days=7``).

    Returns
    -------
    Simulation

    Raises
    ------
    ConfigError
        Naming the key path of the first problem (e.g. ``traffic.days: ...``).
    """
    from simulations.config import Config, config_from_mapping, load_config, set_key_path
    from simulations.job import simulate as run_job

    _check_output(output)
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError(("overrides",), f"must be a mapping of key paths to values ({{'traffic.days': 7}}), got "
                          f"{type(overrides).__name__}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, numbers.Integral)
                                or workers < 0):
        raise ConfigError(("workers",), f"must be a whole number >= 0 (0: all cores), got {workers!r}")
    sets = dict(overrides or {})
    sets.update({k.replace("__", "."): v for k, v in key_path_overrides.items()})
    if isinstance(config, Config):
        cfg = config
        if sets:
            data = cfg.model_dump()
            for key, value in sets.items():
                set_key_path(data, key, value)
            cfg = config_from_mapping(data)
    elif isinstance(config, Mapping):
        data = copy.deepcopy(dict(config))
        for key, value in sets.items():
            set_key_path(data, key, value)
        cfg = config_from_mapping(data)
    elif _is_path(config):
        cfg = load_config(Path(config), sets)
    else:
        raise ConfigError((), f"config must be a path, a mapping or a simulations.config.Config, got "
                          f"{type(config).__name__}")
    out = None if output is None else Path(output)
    return Simulation(run_job(cfg, out, workers, fresh, on_progress, log))


# ---------------------------------------------------------------------------- sweeps
@dataclass(frozen=True)
class Sweep:
    """A finished sweep (:func:`sweep`): one row per point and design, and the shrinkage study.

    Attributes
    ----------
    result:
        :class:`simulations.sweep.SweepResult` (the validated sweep, rows, output folder,
        the points this call computed, the study).
    kept:
        Whether the sweep folder was asked for (``output``); otherwise it lived in a
        temporary folder, now removed, and :attr:`output` is ``None``.
    """

    result: SweepResult
    kept: bool = True

    @property
    def points(self) -> pd.DataFrame:
        """One row per point and design: the point's axis values, the design's primary metric,
        offline delta, true effect, power, required days and the shrinkage columns
        (``points.csv``); ``attrs["conventions"]`` holds the shrinkage study's conventions."""
        rows = self.result.rows.copy(deep=False)  # the result's own frame stays as it was built
        rows.attrs["conventions"] = (self.result.shrinkage or {}).get("conventions") or {}
        return rows

    @property
    def shrinkage(self) -> dict[str, Any]:
        """The shrinkage study across the points (``summary.json['shrinkage']``; structure in
        :mod:`simulations.shrinkage`)."""
        return self.result.shrinkage

    @property
    def axes(self) -> list[str]:
        """The swept key paths."""
        return list(self.result.sweep.axes)

    @property
    def output(self) -> Path | None:
        """The sweep folder, when kept."""
        return self.result.output if self.kept else None

    def text(self) -> str:
        """The study as ``onlineeval sweep`` prints it: relation, sign agreement, Kendall's tau,
        the offline MDE."""
        from simulations.shrinkage import format_shrinkage

        return format_shrinkage(self.result.shrinkage)


def sweep(
    config: PathLike | Mapping[str, Any],
    *,
    output: PathLike | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    fresh: bool = False,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    writers: int | None = None,
) -> Sweep:
    """Run (or resume) a sweep of simulations, as ``onlineeval sweep``.

    Parameters
    ----------
    config:
        A sweep YAML file or a mapping of the same keys (``base``, ``grid`` or ``points``,
        ``replicates``, ``seed``, ``chunk``, ``executor``, ``shrinkage_by``, ...); relative
        paths in a mapping are relative to the working directory.
    output:
        The sweep folder to write (per-point results, ``points.csv``/``.parquet``,
        ``summary.json``, plots, ``report.html``), where an interrupted sweep resumes.
        ``None``: the config's ``output`` for a file that names one; otherwise a
        temporary folder, removed when the sweep is done.
    workers, scheduler:
        Local processes (0 = all cores), or a Dask scheduler (``tcp://host:8786`` or
        ``local:N``); the numbers depend on neither.
    fresh:
        Recompute every point (ignore finished work in ``output``).
    progress, log:
        Progress lines on stderr; a callback for one-line messages.
    writers:
        Processes that write the finished points' folders while the tasks go on, as
        ``onlineeval sweep --writers``: ``None`` (default) 2, or 0 on a single core
        (:func:`simulations.sweep_writers.default_writers`); 0 writes them in this process.
        The folders (and the numbers) do not depend on it.

    Returns
    -------
    Sweep

    Raises
    ------
    ConfigError
        At the sweep key (``grid.<axis>``, ``points[j].<axis>``, ...) with the key path of
        the problem in the point's config; every point is validated before anything runs;
        at ``writers`` for a value that is not ``None`` or a whole number >= 0.
    """
    import shutil
    import tempfile

    from simulations.sweep import load_sweep, run_sweep, sweep_from_mapping

    if writers is not None and (isinstance(writers, bool) or not isinstance(writers, int) or writers < 0):
        raise ConfigError(("writers",), f"must be a whole number >= 0 of writer processes (0: write the points' "
                          f"folders in this process) or None (the default: 2, or 0 on one core), got {writers!r}")
    _check_output(output)
    temp: str | None = None
    if _is_path(config):
        text = Path(config)
        if output is None:
            from simulations.yaml_safe import load_yaml

            if text.is_file() and isinstance(data := load_yaml(text), dict) and not data.get("output"):
                temp = tempfile.mkdtemp(prefix="onlineeval-sweep-")
        spec = load_sweep(text, output if temp is None else temp)
    elif isinstance(config, Mapping):
        data = copy.deepcopy(dict(config))
        if output is not None:
            data["output"] = str(output)
        elif not data.get("output"):
            temp = tempfile.mkdtemp(prefix="onlineeval-sweep-")
            data["output"] = temp
        spec = sweep_from_mapping(data, Path.cwd(), "sweep")
    else:
        raise ConfigError((), f"config must be a path or a mapping, got {type(config).__name__}")
    try:
        result = run_sweep(spec, workers=workers, scheduler=scheduler, fresh=fresh, progress=progress, log=log,
                           writers=writers)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    return Sweep(result, kept=temp is None)
