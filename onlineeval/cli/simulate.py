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
        Optional[Path], typer.Option("--output", "-o", help="Results directory (default: the config's 'output').")
    ] = None,
    replicates: Annotated[
        Optional[int], typer.Option("--replicates", "-r", min=1, help="Override the number of replicates.")
    ] = None,
    workers: Annotated[
        Optional[int], typer.Option("--workers", "-w", min=0, help="Processes (0 = all cores); numbers do not depend on it.")
    ] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", min=0, help="Override the root seed.")] = None,
    fresh: Annotated[
        bool, typer.Option("--fresh", help=(
            "Recompute every replicate: ignore what an earlier run of the same config left in the output folder, "
            "an interrupted run's finished replicates and a finished run's replicates.finished.jsonl.gz (which "
            "a run with another number of replicates otherwise reuses; --fresh deletes it)."))
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
    from simulations.job import simulate
    from simulations.report import terminal_summary

    overrides: dict[str, object] = parse_sets(set_ or [])
    if replicates is not None:
        overrides["replicates"] = replicates
    if seed is not None:
        overrides["seed"] = seed
    if output is not None:
        overrides["output"] = str(output)
    cfg = _load(config, overrides, set(parse_sets(set_ or [])))
    out = Path(cfg.output)  # relative paths are relative to the working directory

    def log(msg: str) -> None:
        if not quiet or msg.startswith(("warning:", "resuming:")):  # what happened to earlier results always shows
            typer.echo(msg, err=True)

    progress = None if quiet else _Progress()
    try:
        result = simulate(cfg, out, workers, fresh, progress.update if progress else None, log)
    finally:
        if progress is not None:
            progress.close()
    typer.echo(terminal_summary(result, str(config)))


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
    limits. A later ``--set`` of the same key wins. Raises :class:`ConfigError` naming the option."""
    from onlineeval.errors import ConfigError
    from simulations.yaml_safe import load_yaml_text

    sets: dict[str, object] = {}
    for item in items:
        key, eq, text = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError((), f"--set {item!r}: expected KEY=VALUE, e.g. --set traffic.days=7")
        if not text.strip():
            raise ConfigError((), f"--set {item!r}: the value is empty; give a value, e.g. --set {key.strip()}=7 "
                              f"(or {key.strip()}=null to switch off an optional block)")
        # YAML null (null, ~) sets the key to none: an optional block (analysis.assumption_sweep: null) is switched
        # off; a key that needs a value refuses it, naming the key
        sets[key.strip()] = load_yaml_text(text, f"--set {key.strip()}")
    return sets


class _Progress:
    """Progress of the replicates on stderr, drawn by rich: a live bar with elapsed time and
    ETA on a terminal; plain lines (at most one every 5 s, and the last) otherwise, e.g.
    ``replicates [######------------------------] 4/20  12s elapsed, ETA 48s``.

    The ETA is rich's estimate from the recent rate of finished replicates (replicates
    resumed from an interrupted run count as done from the start, not in the rate)."""

    PLAIN_EVERY = 5.0  # seconds between plain lines

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] | None = None) -> None:
        import sys
        import time

        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty()
        self._time = clock if clock is not None else time.monotonic
        self._last = -float("inf")
        self._progress = Progress(
            TextColumn("replicates"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(file=self._stream),
            get_time=self._time,
            disable=not self._tty,  # off a terminal rich only keeps the counts and the rate
        )
        self._task: TaskID | None = None

    def update(self, done: int, total: int) -> None:
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task("replicates", total=total, completed=done)
        else:
            self._progress.update(self._task, completed=done, total=total)
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
        eta_text = "done" if done >= total else ("unknown" if eta is None else f"{eta:.0f}s")
        self._stream.write(
            f"replicates [{'#' * filled}{'-' * (width - filled)}] {done}/{total}  "
            f"{task.elapsed or 0.0:.0f}s elapsed, ETA {eta_text}\n"
        )
        self._stream.flush()

    def close(self) -> None:
        self._progress.stop()


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)
