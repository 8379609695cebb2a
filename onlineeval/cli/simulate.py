"""``onlineeval simulate --config configs/ab.yaml``: the main job."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from onlineeval.cli._common import guarded


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
        bool, typer.Option("--fresh", help="Ignore finished replicates of an interrupted run of the same config.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Simulate A and B online: power versus days, required sample size, A/A false positives."""
    from simulations.config import load_config
    from simulations.job import simulate
    from simulations.report import terminal_summary

    overrides: dict[str, object] = {}
    if replicates is not None:
        overrides["replicates"] = replicates
    if seed is not None:
        overrides["seed"] = seed
    if output is not None:
        overrides["output"] = str(output)
    cfg = load_config(config, overrides)
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


class _Progress:
    """A one-line progress bar on stderr (plain text when stderr is not a terminal)."""

    def __init__(self) -> None:
        import sys
        import time

        self._stream = sys.stderr
        self._tty = self._stream.isatty()
        self._start = time.monotonic()
        self._last = -1.0
        self._time = time.monotonic

    def update(self, done: int, total: int) -> None:
        now = self._time()
        if done < total and now - self._last < (0.2 if self._tty else 5.0):
            return
        self._last = now
        elapsed = now - self._start
        width = 30
        filled = int(width * done / max(total, 1))
        bar = "#" * filled + "-" * (width - filled)
        msg = f"replicates [{bar}] {done}/{total}  {elapsed:5.0f}s"
        if self._tty:
            self._stream.write("\r" + msg)
        else:
            self._stream.write(msg + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self._tty:
            self._stream.write("\n")
            self._stream.flush()


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)
