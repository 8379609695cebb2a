"""``onlineeval simulate --config configs/ab.yaml``: the main job."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TextIO

import typer

from onlineeval.cli._common import guarded

if TYPE_CHECKING:  # pragma: no cover
    from rich.progress import TaskID


def set_option(help_text: str) -> Any:
    """The ``--set KEY=VALUE`` option (repeatable) of ``simulate`` and ``sweep``; values go through
    :func:`parse_sets`."""
    return typer.Option("--set", metavar="KEY=VALUE", help=help_text)


@guarded
def simulate_cmd(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML config (see README: config reference).")],
    output: Annotated[
        Optional[str], typer.Option("--output", "-o", metavar="DIR",
                                    help="Results directory (default: the config's 'output').")
    ] = None,
    replicates: Annotated[
        Optional[int], typer.Option("--replicates", "-r", min=1, help="Override the number of replicates.")
    ] = None,
    workers: Annotated[
        Optional[int],
        typer.Option("--workers", "-w", min=0, help="Processes (0 = all cores); numbers do not depend on it."),
    ] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", min=0, help="Override the root seed.")] = None,
    fresh: Annotated[
        bool, typer.Option("--fresh", help=(
            "Recompute every replicate: ignore what an earlier run of the same config left in the output folder, "
            "an interrupted run's finished replicates and a finished run's replicates.finished.jsonl.gz (which "
            "a run with another number of replicates otherwise reuses; --fresh deletes it). Also needed to run "
            "another config into a folder holding a finished run's results, which are then deleted "
            "(summary, report, figures, records) before the first new replicate is written."))
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar (default: a bar with ETA on stderr).")
    ] = False,
    set_: Annotated[
        Optional[list[str]],
        set_option(
            "Override a config key (repeatable): a key path with list indices in brackets and a YAML value, "
            "e.g. --set traffic.days=7 --set 'designs[0].analysis={sequential: msprt}'."
        ),
    ] = None,
) -> None:
    """Simulate A and B online: power versus days, required sample size, A/A false positives."""
    from simulations.config.run import check_output
    from simulations.job import simulate
    from simulations.report import terminal_summary

    overrides: dict[str, object] = parse_sets(set_ or [])
    if replicates is not None:
        overrides["replicates"] = replicates
    if seed is not None:
        overrides["seed"] = seed
    if output is not None:
        check_output(output, "--output")  # (named as the option, not the config's key)
        overrides["output"] = output
    cfg = _load(config, overrides, set(parse_sets(set_ or [])))
    out = Path(cfg.output)  # relative paths are relative to the working directory

    def log(msg: str) -> None:
        if not quiet or msg.startswith(("warning:", "resuming:")):  # what happened to earlier results always shows
            typer.echo(msg, err=True)

    from simulations.runner import kernels_cached, resolve_workers, truth_reporting

    n_workers = resolve_workers(cfg.workers if workers is None else workers)
    from simulations.sequential import many_looks

    stages = _Stages(out, cfg.replicates, cfg.analysis.truth_impressions, n_workers, quiet=quiet,
                     cold=not quiet and kernels_cached() is False, many_looks=many_looks(cfg))
    try:
        with truth_reporting(stages.truth, n_workers):
            result = simulate(cfg, out, workers, fresh, stages.replicates, log)
    except KeyboardInterrupt as exc:
        stages.close()
        code = int(getattr(exc, "exit_code", 130))
        typer.echo(f"interrupted ({exc or 'SIGINT'}); {stages.kept_text()}", err=True)
        raise typer.Exit(code) from None
    finally:
        stages.close()
    stages.finished()
    from simulations.export_log import export_hint

    for line in export_hint(cfg, out):  # designs[i].export_log: where the simulated logs are
        log(line)
    typer.echo(terminal_summary(result, str(config)))


class _Stages:
    """The stages of ``onlineeval simulate`` on stderr (nothing with ``quiet``): the ground truth's Monte Carlo
    (one line with its size and knob, ``analysis.truth_impressions``, then its progress by :class:`_Progress`
    and its time), a note when numba's cache holds no compiled kernels (``cold``: the first stage that runs the
    simulator compiles them), the replicates' progress bar, the analysis and the writing of the results folder (with
    a line on the designs whose sequential analysis takes long, ``many_looks``:
    :func:`simulations.sequential.many_looks`), and the times of the stages at the end. Also counts the finished
    replicates (the message of an interrupted run counts the partial file's intact records, the progress count only
    where the file cannot be read)."""

    def __init__(self, output: Path, replicates: int, truth_impressions: int, workers: int = 1, quiet: bool = False,
                 cold: bool = False, stream: TextIO | None = None, clock: Callable[[], float] | None = None,
                 many_looks: list[tuple[str, int]] | None = None) -> None:
        import sys
        import time

        self._many_looks = many_looks or []  # (design, looks) whose sequential analysis takes long
        self._out, self._total, self._quiet, self._cold = output, replicates, quiet, cold
        self._told = False  # the note on a cold cache shown
        self._truth_size, self._workers, self._runs = truth_impressions, workers, 1
        self._stream = stream
        self._clock = clock if clock is not None else time.monotonic
        self._bar: _Progress | None = None
        self.done: int | None = None  # replicates finished (resumed ones included); None before the replicates
        self._times: dict[str, float] = {}
        self._t = self._t0 = self._clock()
        self._stage = ""
        self._err = stream if stream is not None else sys.stderr

    def _say(self, msg: str) -> None:
        if not self._quiet:
            self._err.write(msg + "\n")
            self._err.flush()

    def _begin(self, stage: str) -> None:
        self._end()
        self._stage, self._t = stage, self._clock()

    def _end(self) -> float:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        took = 0.0
        if self._stage:
            took = self._clock() - self._t
            self._times[self._stage] = took
            self._stage = ""
        return took

    def _compiling(self, stage: str) -> None:
        """The note on a cold cache, at the first stage that runs the simulator; the ground truth's Monte Carlo
        compiles the users' kernels only, so the replicates after it get a note of their own (the designs' and
        the statistics' kernels: the first replicate of a tiny config took 44 s instead of 1 s)."""
        if not self._cold:
            return
        if stage == "replicates" and self._told:
            self._say("the first replicates compile the designs' and statistics' kernels (first run on this "
                      "machine; cached afterwards)")
        elif not self._told:
            self._say("compiling the simulator's kernels as they are first used (first run on this machine; "
                      "cached afterwards; about 10-30 s of CPU)")
        self._told = True
        if stage == "replicates":
            self._cold = False

    def truth(self, done: int, total: int, label: str) -> None:
        """:func:`simulations.runner.truth_reporting`'s progress: impressions done of ``total``, ``label`` the run
        being computed (or, on workers, the one just finished)."""
        per_run = self._truth_size
        if done == 0 and self._stage != "ground truth":
            self._compiling("ground truth")
            self._begin("ground truth")
            self._runs = runs = max(total // per_run, 1)
            self._say(f"ground truth: {runs} Monte Carlo run{'s' if runs != 1 else ''} (the interleaving designs' "
                      f"preferences and null users where not exact) x {per_run:,} impressions "
                      "(analysis.truth_impressions) on "
                      f"{min(self._workers, runs)} worker(s) ...")
            if not self._quiet:
                self._bar = _Progress(self._stream, self._clock, label="ground truth")
        if self._bar is not None:
            self._bar.update(done, total, count=f"{done // per_run}/{self._runs} runs",
                             note="" if done >= total else label)
        if done >= total:
            self._say(f"ground truth: done in {_duration(self._end())}")

    def replicates(self, done: int, total: int) -> None:
        """:func:`simulations.job.simulate`'s ``on_progress``."""
        first = self.done is None
        self.done, self._total = done, total
        if first:
            if done < total:
                self._compiling("replicates")
            self._begin("replicates")
            if not self._quiet:
                self._bar = _Progress(self._stream, self._clock)
        if self._bar is not None:
            self._bar.update(done, total)
        if done >= total:
            self._end()
            self._begin("analysis and results")
            self._say(f"analysing {total} replicates and writing the results folder {self._out} (summary.json, "
                      "CSVs, plots, report.html) ...")
            if self._many_looks:
                which = ", ".join(f"{name} ({looks:,} looks)" for name, looks in self._many_looks)
                self._say(f"  the sequential analysis of {which} integrates the crossing probabilities look by look "
                          "for the planned days: about 40 s per design at 720 looks, 1.5-2 min at 4,320 (fewer: the "
                          "design's analysis.looks)")

    def finished(self) -> None:
        """The run is done: the times of its stages."""
        self._end()
        parts = ", ".join(f"{name} {_duration(t)}" for name, t in self._times.items())
        self._say(f"done in {_duration(self._clock() - self._t0)}" + (f" ({parts})" if parts else ""))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def kept_text(self) -> str:
        """What an interrupted run keeps, and how to go on."""
        from simulations.job import PARTIAL, count_partial

        where = self._out / PARTIAL
        if self.done is None:
            return (f"stopped before the replicates started; finished replicates of earlier runs stay in {self._out}; "
                    "run the same command again to resume")
        kept = count_partial(where)  # the file, not the progress count (reported just after each write)
        kept = self.done if kept is None else kept
        if kept >= self._total:
            return (f"all {self._total} replicates are kept in {where}; run the same command again to write "
                    "the results")
        return (f"{kept} of {self._total} replicates are kept in {where}; run the same command again to "
                "resume (only the missing ones are computed)")


def _duration(seconds: float) -> str:
    from onlineeval.cli._progress import duration

    return duration(seconds)


def _load(config: Path, overrides: dict[str, object], set_keys: set[str]):  # noqa: ANN202
    """``load_config`` with the overrides; an error at (or inside) a key given by ``--set`` says so,
    and so does one at a sibling of a ``--set`` key in a mapping that ``--set`` created (the
    file does not have it), e.g. ``users.click_model.name`` after ``--set users.click_model.preset=...``
    on a config relying on the default click model: then a missing key is to be added by ``--set``."""
    from onlineeval.errors import ConfigError, format_key_path
    from simulations.config import has_key_path, load_config, sweep_path
    from simulations.yaml_safe import load_yaml

    try:
        return load_config(config, overrides)
    except ConfigError as exc:
        for key in set_keys:
            path = sweep_path(key)
            if path and exc.key_path[: len(path)] == path:
                raise ConfigError(exc.key_path, f"{exc.message} (given by --set {key}, not the file)", exc.source) \
                    from None
            if exc.key_path and path[: len(exc.key_path)] == exc.key_path and format_key_path(exc.key_path):
                raise ConfigError(exc.key_path, f"{exc.message} (after --set {key})", exc.source) from None
        # an error at a key that no --set gave (the loop above), inside a mapping that --set created (the file does
        # not have it): the key is missing, and only --set can add it
        parent = exc.key_path[:-1]
        creators = [key for key in sorted(set_keys) if parent and sweep_path(key)[: len(parent)] == parent]
        if creators and not has_key_path(load_yaml(config), parent):
            raise ConfigError(exc.key_path, f"{exc.message} ({format_key_path(parent)} given by --set {creators[0]}, "
                              f"not the file; add --set {format_key_path(exc.key_path)}=...)", exc.source) from None
        raise


def parse_sets(items: list[str]) -> dict[str, object]:
    """``--set KEY=VALUE`` options as key path -> value; the value is YAML (``7``, ``msprt``,
    ``[7, 14]``, ``{pre_days: 7}``, ``null`` to switch off an optional block), read with the config's
    limits. A key given twice, or given after a key inside it that it would replace (``users`` after
    ``users.population``), is refused: the later one would silently win. A key inside one given before it
    (``users.population`` after ``users``) refines it. Raises :class:`ConfigError` naming the option."""
    from onlineeval.errors import ConfigError
    from simulations.config import sweep_path
    from simulations.yaml_safe import load_yaml_text

    sets: dict[str, object] = {}
    paths: dict[tuple[str | int, ...], str] = {}
    for item in items:
        key, eq, text = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError((), f"--set {item!r}: expected KEY=VALUE, e.g. --set traffic.days=7")
        if not text.strip():
            raise ConfigError((), f"--set {item!r}: the value is empty; give a value, e.g. --set {key.strip()}=7 "
                              f"(or {key.strip()}=null to switch off an optional block)")
        path = sweep_path(key.strip())
        if path in paths:
            raise ConfigError((), f"--set {key.strip()} is given twice (--set {paths[path]!r} and --set {item!r}); "
                              "give each key once")
        inside = [given for p, given in paths.items() if len(p) > len(path) and p[: len(path)] == path]
        if path and inside:
            raise ConfigError((), f"--set {item!r} would replace --set {inside[0]!r} given before it; give "
                              f"{key.strip()} first (a key inside it given after it refines it)")
        paths[path] = item
        # YAML null (null, ~) sets the key to none: an optional block (analysis.assumption_sweep: null) is switched
        # off; a key that needs a value refuses it, naming the key
        sets[key.strip()] = load_yaml_text(text, f"--set {key.strip()}")
    return sets


class _Progress:
    """Progress of a stage on stderr (by default the replicates), drawn by rich: a live bar with elapsed time
    and ETA on a terminal; plain lines (at most one every 5 s, and the last) otherwise, e.g.
    ``replicates [######------------------------] 4/20  12s elapsed, ETA 48s`` or
    ``ground truth [######------------------------] 2/8 runs, td  40s elapsed, ETA 1m``.

    The ETA is rich's estimate from the recent rate of the finished units (units resumed from an interrupted
    run count as done from the start, not in the rate). ``label`` names the stage; :meth:`update`'s ``count``
    replaces the ``done/total`` text and ``note`` follows it."""

    PLAIN_EVERY = 5.0  # seconds between plain lines

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] | None = None,
                 label: str = "replicates") -> None:
        import sys
        import time

        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty()
        self._time = clock if clock is not None else time.monotonic
        self._last = -float("inf")
        self._label = label
        self._progress = Progress(
            TextColumn(label, markup=False),
            BarColumn(),
            TextColumn("{task.fields[count]}", markup=False),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(file=self._stream),
            get_time=self._time,
            disable=not self._tty,  # off a terminal rich only keeps the counts and the rate
        )
        self._task: TaskID | None = None

    def update(self, done: int, total: int, count: str | None = None, note: str = "") -> None:
        text = (count if count is not None else f"{done}/{total}") + (f", {note}" if note else "")
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(self._label, total=total, completed=done, count=text)
        else:
            self._progress.update(self._task, completed=done, total=total, count=text)
        if self._tty:
            return
        now = self._time()
        if done < total and now - self._last < self.PLAIN_EVERY:
            return
        self._last = now
        task = self._progress.tasks[0]
        width = 30
        filled = int(width * done / max(total, 1))
        eta = task.time_remaining
        eta_text = "done" if done >= total else ("unknown" if eta is None else _duration(eta))
        self._stream.write(
            f"{self._label} [{'#' * filled}{'-' * (width - filled)}] {text}  "
            f"{task.elapsed or 0.0:.0f}s elapsed, ETA {eta_text}\n"
        )
        self._stream.flush()

    def close(self) -> None:
        self._progress.stop()


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)
