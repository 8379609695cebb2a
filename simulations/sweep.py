"""Sweeps: one simulate config run at many points (a grid of key paths, or a list of points).

The sweep file read and checked: :mod:`simulations.sweep_config` (re-exported here); running it: :func:`run_sweep`.

A sweep config names a base simulate config (a path, relative to the sweep file, or an
inline mapping) and its points, either a grid (every combination, first axis slowest)::

    base: ab.yaml
    grid:
      rankers.B.noise: [0.80, 0.90]
      users.click_model.preset: [navigational, informational]

or a list of overrides (``points: [{rankers.B.noise: 0.8}, {traffic.queries_per_day: 3000}]``).
Key paths are dotted with list indices in brackets (``users.types[0].share``).

A grid axis ``seed`` replicates the world of a synthetic collection (review 4, F1): each seed draws its own
queries, labels, rankers' noise and popularity (and its own replicates and Monte Carlo truths), so ``base: ab.yaml``
with ``grid: {seed: [1, 2, 3, 4, 5]}`` shows how much one config's answers depend on the world drawn; the outputs
then add the spread across the seeds per design (:func:`simulations.sweep_outputs.world_spread`: median and range
of the true effect and of the impressions and days needed). On a trec collection the queries, judgments and runs
are files: a seed only re-permutes the query popularity (nothing with ``collection.frequencies``), so the spread
is not over worlds (review 7, F3; points.csv's ``seed_draws`` says which); the queries' own sampling error is
each point's SE over query samples.

A grid axis may also be a folder of files, ``{folder: path, pattern: '*'}`` (relative to
the sweep file): every regular, non-hidden file matching the pattern, sorted by name, is
one value. For a TREC collection, ``collection.runs.B: {folder: runs/}`` makes every run in
the folder a candidate B against the base config's baseline ``collection.runs.A`` (the
baseline's own file is left out when it lies in the folder): a track's submitted runs as
the "many candidate rankers". Every run file is read before anything runs.

Optional: ``output`` (the sweep's folder), ``replicates`` and ``seed`` (set on every
point), ``chunk`` (replicates per task; default ``ceil(R / 4)``), ``executor`` (``{type:
local, workers: N}`` or ``{type: dask, address: tcp://host:8786 | local:N}``; see
:mod:`simulations.executors`), ``plot_x`` (the axis of the effect plot; default the first
numeric one) and ``shrinkage_by`` (axes whose values split the shrinkage study into
groups, e.g. the click model: default one group of all points).

Every point is validated before anything runs; an invalid one is a
:class:`~onlineeval.errors.ConfigError` at ``grid.<axis>`` (or ``points[j].<axis>``)
naming the value and the key path of the problem inside the point's config.

Each point is an ordinary simulate run (:func:`simulations.job.simulate`'s format) into
``<output>/points/point-NNN``, with its own fingerprint (over its config, the contents
of every input file it names: qrels, both runs, ..., and the code's
:data:`simulations.job.STREAM_VERSION`, so a point finished or half-done by an
onlineeval whose numbers differ is recomputed, not mixed) and partial file, so an interrupted
sweep resumes: finished points (``summary.json`` with the point's fingerprint and
replicates, no partial file, analysed by this code: its ``analysis_version``,
:func:`simulations.resume_guard.analysis_version`) are read back, a finished point analysed by other
code is re-analysed from its kept records (its truth recomputed, no replicate re-simulated;
review 15, F3), and unfinished ones keep the replicates in their partial file. A finished point
keeps its replicates' records
(``replicates.finished.jsonl.gz``, :data:`simulations.job.FINISHED`), so a sweep run again
with more ``replicates`` (or fewer) computes only the replicates each point lacks: replicate
``r`` is seeded by the ``r``-th spawned seed whatever their number, so the first ``R`` of an
``R'``-replicate point are those of its ``R``-replicate run, and the results equal a fresh
run's byte for byte; any other change of the point (its fingerprint) reuses nothing, and a
point folder holding another config's finished results is refused, nothing touched, unless
``fresh``, which deletes them before the point's first record (:func:`simulations.resume_guard.other_results`); a point
whose config keys are the same and only its input files' contents changed is recomputed with a warning. The
whole sweep is one list of tasks for the executor: per point its ground truth, then its
chunks of replicates; the client only builds the worlds (cheap, and what Dask ships to the
workers) and, as soon as a point's truth and last chunk are in,
hands the point to a writer process that writes its folder while the tasks go on
(:mod:`simulations.sweep_writers`; ``writers=0`` writes in the client's thread).

Output (:mod:`simulations.sweep_outputs`): ``points.csv`` and ``points.parquet`` (one row
per point and design: the design's primary metric and the shrinkage study's per-point
columns), ``summary.json`` (the axes, the points with their overrides, labels, folders and
fingerprints, the sweep's fingerprint, the rows and the shrinkage study under
``"shrinkage"``, :mod:`simulations.shrinkage`), ``effect.png``, ``shrinkage.png`` and
``mde.png``.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pandas as pd

from onlineeval.errors import ConfigError
from simulations.executor_check import check_executor
from simulations.executors import (
    TRUTH,
    ChunkRows,
    Executor,
    Task,
    TaskResult,
    make_executor,
)
from simulations.sweep_config import (  # noqa: F401 (re-exported: the sweep's definition, read and checked)
    SweepConfig,
    SweepPoint,
    _blame_axis,
    load_sweep,
    set_sweep_key,
    sweep_from_mapping,
)
from simulations.sweep_outputs import write_outputs
from simulations.sweep_progress import SweepProgress
from simulations.sweep_writers import PointWriters, default_writers
from simulations.world import World

__all__ = ["SweepConfig", "SweepPoint", "SweepProgress", "SweepResult", "load_sweep", "run_sweep", "sweep_from_mapping"]


@dataclass(frozen=True)
class SweepResult:
    sweep: SweepConfig
    rows: pd.DataFrame  # one row per point and design
    output: Path
    computed: list[int]  # points computed by this run (the others were finished before)
    shrinkage: dict[str, Any] = field(default_factory=dict)  # simulations.shrinkage.shrinkage_study
    #: replicates of the computed points read back from their partial or finished files instead of run
    replicates_reused: int = 0


# ------------------------------------------------------------------------------ config


# ------------------------------------------------------------------------------ running
def _complete(folder: Path, fingerprint: str, replicates: int) -> dict[str, Any] | None:
    """The point's summary when its results folder is complete for this fingerprint and number of replicates
    (whatever code analysed it)."""
    from simulations.job import PARTIAL

    path = folder / "summary.json"
    if not path.is_file() or (folder / PARTIAL).exists():
        return None
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(summary, dict) or summary.get("config_fingerprint") != fingerprint \
            or summary.get("config", {}).get("replicates") != replicates:
        return None
    return summary


def _finished(folder: Path, fingerprint: str, replicates: int) -> dict[str, Any] | None:
    """The point's summary when its results folder is complete for this fingerprint and was analysed by this code
    (its ``analysis_version``, :func:`simulations.resume_guard.analysis_version`); a point analysed by other code is
    re-analysed from its kept records (review 15, F3), not reused."""
    from simulations.resume_guard import analysis_version

    summary = _complete(folder, fingerprint, replicates)
    if summary is None or summary.get("analysis_version") != analysis_version():
        return None
    return summary


@dataclass(frozen=True)
class _PointPlan:
    """What :func:`run_sweep` does with a point's folder (:func:`_point_plan`). A point whose folder holds another
    config's finished results that are not recomputed (not the same config, not only its input files) is refused
    before this, for every point at once, with nothing touched."""

    reuse: dict[str, Any] | None  # finished for this fingerprint by this code: its summary, read back
    stale: dict[str, Any] | None  # complete for this fingerprint but analysed by other code: re-analysed
    replace: Any  # the finished results of another config (OtherResults) that are deleted and recomputed
    remove: bool  # the folder's old outputs are deleted before the point's first record (replace, or fresh)


def _point_plan(folder: Path, fingerprint: str, replicates: int, fresh: bool, found: Any) -> _PointPlan:
    """Reuse, re-analyse, replace or (re)compute a point: ``found`` is the other config's finished results in its
    folder (:func:`simulations.resume_guard.other_results`, ``None``: none); ``fresh`` reuses nothing and deletes
    the folder's outputs. The remaining replicate records are sorted out by
    :func:`simulations.job.reopen_records`."""
    if fresh:
        return _PointPlan(None, None, found, True)
    old = _finished(folder, fingerprint, replicates)
    if old is not None:
        return _PointPlan(old, None, None, False)
    return _PointPlan(None, _complete(folder, fingerprint, replicates), found, found is not None)


@dataclass
class _Open:
    """A point being computed: its world, truths (``None`` until its truth task is in),
    finished replicates and partial file."""

    point: SweepPoint
    folder: Path
    fingerprint: str
    world: World
    users: Any
    truths: list[Any] | None
    done: dict[int, list[dict[str, Any]]]
    fh: IO[str]

    @property
    def complete(self) -> bool:
        return self.truths is not None and len(self.done) >= self.point.config.replicates


def run_sweep(
    sweep: SweepConfig,
    executor: Executor | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    fresh: bool = False,
    progress: SweepProgress | bool = False,
    log: Callable[[str], None] | None = None,
    writers: int | None = None,
) -> SweepResult:
    """Run (or resume) a sweep and write its folder.

    When a point is left to compute, the backend is checked first
    (:func:`simulations.executor_check.check_executor`: a malformed ``local:N``, Dask not importable, a
    scheduler address that refuses connections), before the lock or any point folder exists.
    The client builds each unfinished point's world (cheap: it is also what Dask
    scatters) and hands the executor one task per point for its ground truth, then the
    point's chunks of replicates; when a point's truth and last chunk are in, its folder is
    written by a writer process (:mod:`simulations.sweep_writers`) while the tasks go on.
    Then the shrinkage study across the points (:func:`simulations.shrinkage.shrinkage_study`)
    and the sweep's tables and plots.

    Parameters
    ----------
    sweep:
        The validated sweep (:func:`load_sweep`).
    executor:
        A backend to use (kept open); default one from ``scheduler``, ``workers`` and the
        sweep's ``executor`` (:func:`simulations.executors.make_executor`), closed at the end.
    fresh:
        Recompute every point (ignore finished points and partial files).
    progress:
        ``True`` for progress lines on stderr, or a :class:`SweepProgress`. A point counts as
        done when its folder is written.
    writers:
        Processes writing the finished points' folders (default
        :func:`simulations.sweep_writers.default_writers`: 2, or none on a single core); 0 writes
        them in this thread. The folders do not depend on it.
    """
    from simulations.job import (
        FINISHED,
        PARTIAL,
        config_fingerprint,
        folder_lock,
        keep_finished,
        partial_header,
        partial_record,
        prepare_world,
        reopen_records,
        resume_message,
        signals_interrupt,
    )
    from simulations.resume_guard import (
        analysis_version,
        other_results,
        refuse_other_results,
        remove_results,
        write_error,
    )

    say = log or (lambda _msg: None)
    analysis_version()  # the code this sweep analyses with, hashed before any worker or writer forks
    root = sweep.output
    fingerprints: dict[int, str] = {}
    for point in sweep.points:
        fingerprints[point.index] = config_fingerprint(point.config.model_copy(
            update={"output": root / "points" / point.folder_name}))
    if executor is None and (fresh or any(
            _finished(root / "points" / p.folder_name, fingerprints[p.index], p.config.replicates) is None
            for p in sweep.points)):
        # the backend that will run the tasks, before the lock and the points' folders exist: a malformed local:N,
        # Dask not installed or a scheduler that does not answer is refused with nothing created
        check_executor(scheduler, workers, sweep.executor, sweep.source)
    try:
        (root / "points").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, root, "nothing was run") from None
    summaries: dict[int, dict[str, Any]] = {}
    computed: list[int] = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(folder_lock(root))
        stack.enter_context(signals_interrupt())
        others: dict[int, Any] = {}  # point -> the finished results of another config in its folder
        for point in sweep.points:
            folder = root / "points" / point.folder_name
            if fresh or _finished(folder, fingerprints[point.index], point.config.replicates) is not None:
                continue
            found = other_results(folder, point.config.model_copy(update={"output": folder}),
                                  fingerprints[point.index])
            if found is not None:
                others[point.index] = found
        refused = [i for i, found in others.items() if not (found.same_config or found.inputs_only)]
        if refused:
            # a changed base or a --set typo must not cost the points' results: refused before anything is touched.
            # A point whose input files alone changed (a sweep over a folder of runs, one run edited) is recomputed
            # with a warning: its old results describe files that are no longer there, and the other points stay
            first = refused[0]
            more = (f" (and {len(refused) - 1} more point(s): {', '.join(str(i) for i in refused[1:])})"
                    if len(refused) > 1 else "")
            raise refuse_other_results(root / "points" / f"point-{first:03d}", others[first], fingerprints[first],
                                       f"point {first}{more} ")
        open_points: dict[str, _Open] = {}
        tasks: list[Task] = []
        total_reps = sum(p.config.replicates for p in sweep.points)
        reps_done = reused = 0
        for point in sweep.points:
            folder = root / "points" / point.folder_name
            folder.mkdir(exist_ok=True)
            config = point.config.model_copy(update={"output": folder})
            fp = fingerprints[point.index]
            plan = _point_plan(folder, fp, config.replicates, fresh, others.get(point.index))
            if plan.reuse is not None:
                summaries[point.index] = plan.reuse
                reps_done += config.replicates
                continue
            if plan.stale is not None:
                say(f"point {point.index}: re-analysing: its results were analysed by other code (analysis version "
                    f"{plan.stale.get('analysis_version') or 'not recorded'}, this one {analysis_version()}); its "
                    "replicates are reused, not recomputed")
            if fp in open_points:
                raise ConfigError(("points",), f"points {open_points[fp].point.index} and {point.index} are the same "
                                  "simulation (same fingerprint); remove one")
            stack.enter_context(folder_lock(folder))
            if plan.remove:
                # before the point's first record: its folder never holds another config's report beside them
                if plan.replace is not None:
                    say(f"warning: point {point.index}: replacing the finished results in {folder} (fingerprint "
                        f"{plan.replace.fingerprint}): {plan.replace.differences}; they are deleted now")
                remove_results(folder)
            partial = folder / PARTIAL
            records, source = reopen_records(folder, fp, say, config, fresh)
            done = {i: r for i, r in records.items() if i < config.replicates}
            if done:
                shown = folder / FINISHED if source == "finished" else partial
                say(f"resuming: point {point.index}: "
                    + resume_message(done, config.replicates, source, shown, len(records) - len(done)))
            try:
                if records:  # appended to: records of replicates beyond this run's number stay in the file
                    fh = open(partial, "a", encoding="utf-8")  # noqa: SIM115 (closed by the ExitStack)
                else:
                    fh = open(partial, "w", encoding="utf-8")  # noqa: SIM115 (closed by the ExitStack)
                    fh.write(partial_header(fp))
                    fh.flush()
            except OSError as exc:
                raise write_error(exc, partial, "nothing was run for this point") from None
            stack.callback(fh.close)
            say(f"point {point.index} ({_label(point)}): preparing the world")
            world, users = prepare_world(config)
            reps_done += len(done)
            reused += len(done)
            open_points[fp] = _Open(point, folder, fp, world, users, None, done, fh)
            todo = [i for i in range(config.replicates) if i not in done]
            size = sweep.chunk or max(1, math.ceil(config.replicates / 4))
            tasks.append(Task(fp, config, (), TRUTH))  # first: a point closes only when its truth is in
            tasks += [Task(fp, config, tuple(todo[k:k + size])) for k in range(0, len(todo), size)]
        meter = progress if isinstance(progress, SweepProgress) else (
            SweepProgress(len(sweep.points), total_reps) if progress else None)
        if meter is not None:
            meter.start(len(summaries), reps_done)

        writer: PointWriters | None = None
        writing: dict[int, Path] = {}  # point -> folder, submitted to the writers

        def close_point(op: _Open) -> None:
            op.fh.close()  # every record is flushed; the partial file goes once the folder is written
            assert writer is not None
            writing[op.point.index] = op.folder
            writer.submit(op.point.index, op.point.config.model_copy(update={"output": op.folder}), op.world,
                          op.users, op.truths or [], op.done, op.folder, op.fingerprint)
            del open_points[op.fingerprint]

        def written(index: int) -> None:  # in this thread, the next time it collects the written points
            folder = writing.pop(index)
            keep_finished(folder)  # its records stay for a later run with more replicates
            summaries[index] = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
            computed.append(index)

        def on_done(task: Task, result: TaskResult) -> None:
            op = open_points[task.point]
            chunk: ChunkRows = []
            if task.kind == TRUTH:
                op.truths = list(result)
            else:
                chunk = result  # type: ignore[assignment]
                for i, rows in chunk:
                    op.done[i] = rows
                    try:
                        op.fh.write(partial_record(i, rows))
                    except OSError as exc:
                        raise write_error(exc, op.folder / PARTIAL,
                                          "finished replicates are kept; run again to resume") from None
                op.fh.flush()
            if meter is not None and chunk:
                meter.add(replicates=len(chunk))
            if op.complete:
                close_point(op)
            assert writer is not None
            for index in writer.finished():
                written(index)

        try:
            if tasks:
                # the writers start first: forked while this process has no other thread
                writer = PointWriters(default_writers() if writers is None else writers,
                                      on_written=None if meter is None else lambda _index: meter.add(points=1))
                worlds = {fp: op.world for fp, op in open_points.items()}
                own = executor is None
                ex = executor if executor is not None else make_executor(
                    scheduler, workers, sweep.executor, sweep.source)
                try:
                    say(f"running {len(tasks)} task(s) of {len(open_points)} point(s) on {ex.name} "
                        f"({ex.workers} worker(s)); points written by {writer.processes or 'no'} writer process(es)")
                    ex.run(tasks, worlds, on_done)
                finally:
                    if own:
                        ex.close()
                for index in writer.finished(wait=True):
                    written(index)
        finally:
            if meter is not None:
                meter.close()  # live bars stopped (cursor shown again) however the run ends
            if writer is not None:
                writer.close()  # after an error: pending points cancelled, writers ended
        rows, study = write_outputs(sweep, summaries, root, fingerprints)
    return SweepResult(sweep, rows, root, sorted(computed), study, reused)


def _label(point: SweepPoint) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.overrides.items())
