"""Sweeps: one simulate config run at many points (a grid of key paths, or a list of points).

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
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

import pandas as pd

from onlineeval.errors import ConfigError
from simulations.config import Config, config_from_mapping, format_path, has_key_path, set_path, sweep_path
from simulations.executor_check import check_executor
from simulations.executors import (
    TRUTH,
    ChunkRows,
    Executor,
    Task,
    TaskResult,
    make_executor,
)
from simulations.sweep_outputs import write_outputs
from simulations.sweep_progress import SweepProgress
from simulations.sweep_writers import PointWriters, default_writers
from simulations.world import World

__all__ = ["SweepConfig", "SweepPoint", "SweepProgress", "SweepResult", "load_sweep", "run_sweep", "sweep_from_mapping"]

_SWEEP_KEYS = ("base", "grid", "points", "output", "replicates", "seed", "chunk", "executor", "plot_x",
               "shrinkage_by")
_FOLDER_KEYS = ("folder", "pattern")
_EXECUTOR_KEYS = ("type", "workers", "address")


@dataclass(frozen=True)
class SweepPoint:
    """One point: its index, its overrides (key path -> value), its validated config and
    the labels its values are shown with (a file axis shows the file's name)."""

    index: int
    overrides: dict[str, Any]
    config: Config
    labels: dict[str, Any] = field(default_factory=dict)

    @property
    def folder_name(self) -> str:
        return f"point-{self.index:03d}"

    def label(self, axis: str) -> Any:
        """How the point's value of ``axis`` is shown (``None`` when the point does not set it)."""
        return self.labels.get(axis, self.overrides.get(axis))


@dataclass(frozen=True)
class SweepConfig:
    axes: list[str]
    points: list[SweepPoint]
    output: Path
    chunk: int | None = None
    executor: dict[str, Any] = field(default_factory=dict)
    plot_x: str | None = None
    source: str | None = None
    shrinkage_by: list[str] = field(default_factory=list)  # axes splitting the shrinkage study into groups


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
def _axis_path(axis: Any, where: tuple[str | int, ...], source: str | None) -> tuple[str | int, ...]:
    if not isinstance(axis, str) or not axis.strip():
        raise ConfigError(where, f"an axis must be a dotted key path such as rankers.B.noise, got {axis!r}", source)
    path = sweep_path(axis)
    if format_path(path) != axis.strip():
        raise ConfigError(where, f"{axis!r} is not a key path (dotted names, list indices in brackets: "
                          "users.types[0].share)", source)
    return path


def sweep_from_mapping(data: Mapping[str, Any], base_dir: Path | None = None, source: str | None = None) -> SweepConfig:
    """Validate a sweep mapping and every one of its points (nothing is run).

    Raises
    ------
    ConfigError
        at the sweep key (``grid.<axis>``, ``points[j].<axis>``, ``base``, ...) with the
        value and the key path of the problem in the point's config.
    """
    import copy

    base_dir = base_dir or Path.cwd()
    if not isinstance(data, Mapping):
        raise ConfigError((), f"the sweep config must be a mapping, got {type(data).__name__}", source)
    unknown = [k for k in data if k not in _SWEEP_KEYS]
    if unknown:
        raise ConfigError((str(unknown[0]),), f"unknown key; allowed keys: {', '.join(_SWEEP_KEYS)}", source)
    base = data.get("base")
    base_source = source
    if isinstance(base, str):
        base_map, base_file = _read_base(base, base_dir, source)
        base_source = str(base_file)
    elif isinstance(base, Mapping):
        from simulations.config import _resolve_paths

        base_map = copy.deepcopy(dict(base))
        _resolve_paths(base_map, base_dir.resolve())
    else:
        raise ConfigError(("base",), "required: a simulate config file (path) or an inline mapping", source)
    for key in ("replicates", "seed"):
        if key in data:
            base_map[key] = data[key]
    base_map.pop("output", None)

    grid, listed = data.get("grid"), data.get("points")
    if (grid is None) == (listed is None):
        raise ConfigError(("grid",), "give exactly one of 'grid' (axis: [values]) and 'points' (a list of overrides)",
                          source)
    specs: list[tuple[dict[str, Any], dict[str, tuple[str | int, ...]]]] = []  # overrides, where each came from
    labels_of: dict[str, dict[str, str]] = {}  # file axes: value (path) -> label (file name)
    if grid is not None:
        if not isinstance(grid, Mapping) or not grid:
            raise ConfigError(("grid",), "must map key paths to lists of values", source)
        axes = list(grid)
        values_of: dict[str, list[Any]] = {}
        for axis in axes:
            _axis_path(axis, ("grid", str(axis)), source)
            values = grid[axis]
            if isinstance(values, Mapping):
                values, shown = _folder_values(axis, values, base_map, base_dir, source)
                labels_of[axis] = shown
            elif not isinstance(values, list) or not values:
                raise ConfigError(("grid", axis), f"must be a non-empty list of values or a folder of files "
                                  f"({{folder: path, pattern: '*'}}), got {values!r}", source)
            values_of[axis] = values
        for combo in itertools.product(*(values_of[a] for a in axes)):
            specs.append((dict(zip(axes, combo)), {a: ("grid", a) for a in axes}))
    else:
        if not isinstance(listed, list) or not listed:
            raise ConfigError(("points",), "must be a non-empty list of overrides (key path: value)", source)
        axes = []
        for j, item in enumerate(listed):
            if not isinstance(item, Mapping) or not item:
                raise ConfigError(("points", j), f"must be a mapping of key paths to values, got {item!r}", source)
            for axis in item:
                _axis_path(axis, ("points", j, str(axis)), source)
                if axis not in axes:
                    axes.append(axis)
            specs.append((dict(item), {a: ("points", j, a) for a in item}))

    points: list[SweepPoint] = []
    for index, (overrides, where) in enumerate(specs):
        point_map = copy.deepcopy(base_map)
        for axis, value in overrides.items():
            try:
                set_path(point_map, sweep_path(axis), copy.deepcopy(value))
            except KeyError as exc:
                raise ConfigError(where[axis], f"{axis} = {value!r}: {exc.args[0]} is not a key of the base config",
                                  source) from None
        try:
            config = config_from_mapping(point_map, base_source)
        except ConfigError as exc:
            axis = _blame_axis(overrides, exc)
            others = ", ".join(f"{a} = {v!r}" for a, v in overrides.items() if a != axis)
            raise ConfigError(
                where[axis],
                f"{axis} = {overrides[axis]!r} makes {format_path(exc.key_path) or 'the config'} invalid: "
                f"{exc.message} (point {index}{'; with ' + others if others else ''}"
                f"{_created_by_axis(axis, exc, base_map, point_map)})",
                source,
            ) from None
        labels = {a: labels_of[a][v] for a, v in overrides.items() if a in labels_of}
        points.append(SweepPoint(index, overrides, config, labels))
    for axis, shown in labels_of.items():
        _check_run_files(axis, sorted({p.overrides[axis] for p in points}), shown, points, source)

    chunk = data.get("chunk")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise ConfigError(("chunk",), f"must be a whole number of replicates >= 1, got {chunk!r}", source)
    executor = data.get("executor") or {}
    if not isinstance(executor, Mapping):
        raise ConfigError(("executor",), "must be a mapping: {type: local, workers: N} or {type: dask, address: ...}",
                          source)
    for key in executor:
        if key not in _EXECUTOR_KEYS:
            raise ConfigError(("executor", str(key)), f"unknown key; allowed keys: {', '.join(_EXECUTOR_KEYS)}", source)
    plot_x = data.get("plot_x")
    if plot_x is not None and plot_x not in axes:
        raise ConfigError(("plot_x",), f"{plot_x!r} is not an axis of this sweep; axes: {', '.join(axes)}", source)
    by = data.get("shrinkage_by") or []
    if isinstance(by, str):
        by = [by]
    if not isinstance(by, list) or any(a not in axes for a in by):
        raise ConfigError(("shrinkage_by",), f"must list axes of this sweep (the shrinkage study is split by their "
                          f"values), got {data.get('shrinkage_by')!r}; axes: {', '.join(axes)}", source)
    out = Path(data.get("output") or "results/sweep")
    return SweepConfig(axes, points, out, chunk, dict(executor), plot_x, source, list(by))


def _folder_values(
    axis: str, spec: Mapping[str, Any], base_map: Mapping[str, Any], base_dir: Path, source: str | None
) -> tuple[list[str], dict[str, str]]:
    """A file axis, ``{folder: path, pattern: glob}``: every regular, non-hidden file of the
    folder matching ``pattern`` (default ``*``), sorted by name, as an absolute path; the
    files the base config already names under the same mapping (e.g. the baseline run
    ``collection.runs.A`` for the axis ``collection.runs.B``) are left out. Returns the
    values and their labels (path -> file name)."""
    where = ("grid", axis)
    unknown = [k for k in spec if k not in _FOLDER_KEYS]
    if unknown:
        raise ConfigError((*where, str(unknown[0])), f"unknown key of a folder axis; allowed keys: "
                          f"{', '.join(_FOLDER_KEYS)}", source)
    folder, pattern = spec.get("folder"), spec.get("pattern", "*")
    if not isinstance(folder, str) or not folder.strip():
        raise ConfigError((*where, "folder"), f"a folder axis needs a folder (a path), got {folder!r}", source)
    if not isinstance(pattern, str) or not pattern.strip():
        raise ConfigError((*where, "pattern"), f"must be a file-name pattern such as '*.run', got {pattern!r}", source)
    path = Path(folder) if Path(folder).is_absolute() else base_dir / folder
    if not path.is_dir():
        raise ConfigError((*where, "folder"), f"{axis}: folder not found: {path}", source)
    siblings: set[Path] = set()
    parent = sweep_path(axis)[:-1]
    node: Any = base_map
    for part in parent:
        node = node.get(part) if isinstance(node, dict) and isinstance(part, str) else None
    if isinstance(node, dict):
        siblings = {Path(v).resolve() for k, v in node.items() if isinstance(v, str) and k != sweep_path(axis)[-1]}
    files = sorted(p for p in path.glob(pattern) if p.is_file() and not p.name.startswith("."))
    skipped = [p for p in files if p.resolve() in siblings]
    files = [p for p in files if p.resolve() not in siblings]
    if not files:
        left = f" (left out {', '.join(p.name for p in skipped)}: the base config's own)" if skipped else ""
        raise ConfigError((*where, "folder"), f"{axis}: no files matching {pattern!r} in {path}{left}", source)
    values = [str(p.resolve()) for p in files]
    return values, {v: p.name for v, p in zip(values, files)}


def _check_run_files(
    axis: str, values: list[str], labels: Mapping[str, str], points: list[SweepPoint], source: str | None
) -> None:
    """Read every run file of a ``collection.runs.<name>`` file axis before anything runs:
    a malformed file, or one that retrieves no query of the qrels, is a ConfigError at
    ``grid.<axis>`` naming the file and the line."""
    from onlineeval.errors import InputError
    from onlineeval.io import read_qrels, read_run
    from simulations.config import TrecCollection

    path = sweep_path(axis)
    if len(path) != 3 or path[:2] != ("collection", "runs"):
        return
    judged: dict[str, set[str]] = {}
    for value in values:
        point = next(p for p in points if p.overrides.get(axis) == value)
        coll = point.config.collection
        if not isinstance(coll, TrecCollection):
            raise ConfigError(("grid", axis), f"{axis}: a runs folder needs a trec collection; the base config's "
                              f"collection.type is {coll.type!r}", source)
        try:
            key = str(coll.qrels)
            if key not in judged:
                judged[key] = set(read_qrels(coll.qrels)["query"].astype(str))
            run = read_run(value)
        except InputError as exc:
            raise ConfigError(("grid", axis), f"{axis} = {labels[value]!r} (point {point.index}): {exc}",
                              source) from None
        if not set(run["query"].astype(str)) & judged[key]:
            raise ConfigError(("grid", axis), f"{axis} = {labels[value]!r} (point {point.index}): {value} retrieves "
                              f"no query judged in {coll.qrels}", source)


def _created_by_axis(axis: str, exc: ConfigError, base_map: Mapping[str, Any], point_map: Mapping[str, Any]) -> str:
    """A note for a key missing from the point's config (``point_map``) inside a mapping that the axis created (the
    base config does not have it), e.g. ``users.click_model.name`` after an axis ``users.click_model.preset`` on a
    base relying on the default click model; else ``""``."""
    parent = tuple(exc.key_path[:-1])
    if not parent or tuple(sweep_path(axis)[: len(parent)]) != parent or has_key_path(point_map, exc.key_path):
        return ""
    if has_key_path(base_map, parent):
        return ""
    return (f"; the base config has no {format_path(parent)} (this axis creates it): add {format_path(exc.key_path)} "
            "to the base config")


def _blame_axis(overrides: Mapping[str, Any], exc: ConfigError) -> str:
    """The axis to blame for a point's invalid config: one whose key path is a prefix of the
    error's path (or lies under it), the longest shared prefix first; else the axis sharing the
    longest prefix (in path components) with the error's path, e.g. ``users.click_model.preset``
    for an error at ``users.click_model.name``; ties go to the earlier axis, and with no shared
    prefix at all, the first axis."""
    err = tuple(exc.key_path)

    def score(axis: str) -> tuple[bool, int]:
        path = tuple(sweep_path(axis))
        shared = 0
        while shared < min(len(path), len(err)) and path[shared] == err[shared]:
            shared += 1
        return shared > 0 and shared == min(len(path), len(err)), shared

    return max(overrides, key=score)  # the first of the best (max keeps the earliest of equal scores)


def load_sweep(
    path: str | Path, output: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> SweepConfig:
    """Read and validate a sweep YAML file (``output`` overrides its ``output``; ``overrides`` sets
    key paths first, see :func:`set_sweep_key`)."""
    from simulations.yaml_safe import load_yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError((), "sweep config file not found", str(path))
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError((), "the sweep config must be a mapping of keys", str(path))
    for key, value in (overrides or {}).items():
        set_sweep_key(data, key, value, path.resolve().parent, str(path))
    if output is not None:
        data["output"] = str(output)
    return sweep_from_mapping(data, path.resolve().parent, str(path))


def set_sweep_key(data: dict[str, Any], key: str, value: Any, base_dir: Path, source: str | None = None) -> None:
    """Set one key path of a sweep mapping (``onlineeval sweep --set KEY=VALUE``).

    ``replicates``, ``chunk``, ``executor.workers``, ... are key paths of the sweep file;
    ``base.<path>`` sets a key of the base config (a base given as a file is read first and
    inlined, its relative paths resolved against its own folder); ``grid.<axis>`` sets an axis's
    values and ``points[j].<axis>`` one point's value, where ``<axis>`` is the key path the axis
    names (``grid.rankers.B.noise=[0.8, 0.9]``). Raises :class:`ConfigError` naming the key.
    """
    import re

    from simulations.config import set_key_path

    key = key.strip()
    if key.startswith("grid."):
        grid = data.setdefault("grid", {})
        if not isinstance(grid, dict):
            raise ConfigError(("grid",), f"cannot set {key}: 'grid' is not a mapping of axes", source)
        grid[key[len("grid."):]] = value
        return
    point = re.fullmatch(r"points\[(\d+)\]\.(.+)", key)
    if point is not None:
        listed = data.get("points")
        j = int(point.group(1))
        if not isinstance(listed, list) or j >= len(listed) or not isinstance(listed[j], dict):
            raise ConfigError(("points", j), f"cannot set {key}: the sweep has no point {j}", source)
        listed[j][point.group(2)] = value
        return
    if key.startswith("base.") and isinstance(data.get("base"), str):
        data["base"], _ = _read_base(data["base"], base_dir, source)
    set_key_path(data, key, value, source)


def _read_base(base: str, base_dir: Path, source: str | None) -> tuple[dict[str, Any], Path]:
    """The base config file a sweep names (relative to the sweep's folder) as a mapping, its relative
    paths resolved against its own folder; and the file's path."""
    from simulations.config import _resolve_paths
    from simulations.yaml_safe import load_yaml

    base_file = Path(base) if Path(base).is_absolute() else base_dir / base
    if not base_file.is_file():
        raise ConfigError(("base",), f"config file not found: {base_file}", source)
    base_map = load_yaml(base_file)
    if not isinstance(base_map, dict):
        raise ConfigError(("base",), f"{base_file} must hold a mapping of keys", source)
    _resolve_paths(base_map, base_file.resolve().parent)
    return base_map, base_file


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
