"""``onlineeval sweep --config configs/sweep.yaml``: one simulate config at many points."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Optional

import typer

from onlineeval.cli._common import guarded
from onlineeval.cli.simulate import set_option


@guarded
def sweep_cmd(
    config: Annotated[Path, typer.Option("--config", "-c", help="Sweep YAML: base config plus grid or points.")],
    output: Annotated[
        Optional[str], typer.Option("--output", "-o", metavar="DIR",
                                    help="Sweep folder (default: the sweep config's 'output').")
    ] = None,
    scheduler: Annotated[
        Optional[str],
        typer.Option("--scheduler", help="Run on Dask: a scheduler address (tcp://host:8786) or local:N (a "
                     "LocalCluster of N workers). Default: local processes."),
    ] = None,
    workers: Annotated[
        Optional[int], typer.Option("--workers", "-w", min=0, help="Local processes (0 = all cores); numbers do not "
                                    "depend on it.")
    ] = None,
    writers: Annotated[
        Optional[int], typer.Option("--writers", min=0, help="Processes that write the finished points' folders while "
                                    "the tasks go on (0 = in this process; default 2, or 0 on one core). The folders "
                                    "do not depend on it.")
    ] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help=(
        "Recompute every point (ignore finished work). Also needed when a point's folder holds the finished "
        "results of another config (a changed base or grid), which are then deleted before it is recomputed."))
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines on stderr.")] = False,
    set_: Annotated[
        Optional[list[str]],
        set_option(
            "Override a sweep key (repeatable; a YAML value): replicates=10, base.traffic.days=7, "
            "'grid.rankers.B.noise=[0.8, 0.9]', points[0].rankers.B.noise=0.9."
        ),
    ] = None,
) -> None:
    """Run a simulate config at every point of a grid or list; resume an interrupted sweep."""
    from onlineeval.cli.simulate import parse_sets
    from simulations.config.run import check_output
    from simulations.shrinkage import format_shrinkage
    from simulations.sweep import load_sweep, run_sweep
    from simulations.sweep_outputs import TERMINAL_LEGEND, terminal_table

    sets = parse_sets(set_ or [])
    with _named_options(scheduler, sets):
        check_output(output, "--output")
        sweep = load_sweep(config, output, sets)

    def log(msg: str) -> None:
        if not quiet or msg.startswith(("warning:", "resuming:")):
            typer.echo(msg, err=True)

    with _named_options(scheduler, sets):
        result = run_sweep(sweep, workers=workers, scheduler=scheduler, fresh=fresh, progress=not quiet, log=log,
                           writers=writers)
    rows = result.rows
    cols = ["point", *sweep.axes, "design", "metric", "offline_delta", "true_effect", "power_last_day",
            "analytic_required_days"]
    typer.echo(terminal_table(rows, cols))
    typer.echo("(offline_delta: B - A of the offline metric, weighted by query frequency; true_effect: the design's "
               "primary metric, B - A, exact for A/B and two-ranker team-draft / balanced interleaving under "
               "grade-chain click models, Monte Carlo for other interleaving; power at two-sided alpha on the last "
               "simulated day)")
    typer.echo(TERMINAL_LEGEND)
    typer.echo("")
    typer.echo(format_shrinkage(result.shrinkage))
    reused = len(sweep.points) - len(result.computed)
    kept = f", {result.replicates_reused} of their replicates reused" if result.replicates_reused else ""
    typer.echo(f"\n{len(sweep.points)} points ({len(result.computed)} computed{kept}, {reused} finished before); "
               f"results in {result.output} (points.csv, points.parquet, summary.json, effect.png, shrinkage.png, "
               "mde.png, report.html, points/)")


@contextlib.contextmanager
def _named_options(scheduler: str | None, sets: Mapping[str, object]) -> Iterator[None]:
    """An error in a value the command line gave names the option, not the sweep file: one in ``--scheduler``
    (the library's ``scheduler`` argument, :data:`simulations.executor_check.SCHEDULER`) reads ``--scheduler: ...``,
    without the file's name, and one at (or inside) a key that ``--set`` gave says ``(given by --set KEY, not the
    file)``, as ``onlineeval simulate`` says it."""
    from onlineeval.errors import ConfigError
    from simulations.config import sweep_path
    from simulations.executor_check import SCHEDULER

    try:
        yield
    except ConfigError as exc:
        if scheduler is not None and exc.key_path[: len(SCHEDULER)] == SCHEDULER:
            raise ConfigError(("--scheduler",), exc.message) from None
        for key in sets:
            path = sweep_path(key)
            if path and exc.key_path[: len(path)] == path:
                raise ConfigError(exc.key_path, f"{exc.message} (given by --set {key}, not the file)", exc.source) \
                    from None
        raise


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)
