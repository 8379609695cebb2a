"""A sweep's definition: its file's keys, axes and points, read and checked (:func:`load_sweep`,
:func:`sweep_from_mapping`), and which axis a point's invalid config is blamed on.

Out of :mod:`simulations.sweep`, which runs a sweep and re-exports these names; see its docstring for the sweep
file's format.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onlineeval.errors import ConfigError
from simulations.config import Config, config_from_mapping, format_path, has_key_path, set_path, sweep_path

__all__ = ["SweepConfig", "SweepPoint", "load_sweep", "set_sweep_key", "sweep_from_mapping"]

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
        """How the point's value of ``axis`` is shown (``None`` when the point does not set it). A list or mapping
        (an axis of estimator lists or logger specs) is shown as its compact JSON text: one hashable value for the
        tables' cells, the plots' groups and the shrinkage study's (its lists crashed the effect plot's
        grouping after every point had run). A mapping's keys are sorted, so two spellings of one logger spec (keys
        in another order, as two listed points may write it) are one label, one group of the shrinkage study."""
        value = self.labels.get(axis, self.overrides.get(axis))
        if isinstance(value, (list, tuple, dict)):
            import json

            return json.dumps(value, separators=(", ", ": "), sort_keys=True, default=str)
        return value


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
    from simulations.config.run import EMPTY_OUTPUT, is_empty_output

    given = data.get("output")
    if is_empty_output(given):  # (not the default: Path("") would be the current folder)
        raise ConfigError(("output",), EMPTY_OUTPUT, source)
    if given is not None and not isinstance(given, str):  # (0 or false fell back to the default folder silently)
        raise ConfigError(("output",), f"must be a folder path (text), got {given!r}", source)
    out = Path(given if given is not None else "results/sweep")
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
    from onlineeval.io import read_qrels, read_ranking
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
            run = read_ranking(value)
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
