"""The main job: config -> world -> replicates -> analysis -> results directory.

Finished replicates are appended to ``<output>/replicates.partial.jsonl`` as they
complete. If a run is interrupted, running the same config again resumes from there
(the file's header holds a fingerprint of the effective config; a different config
starts afresh). The partial file is removed once the results are written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from onlineeval.errors import ConfigError

from simulations.analysis import analyse
from simulations.config import Config
from simulations.runner import (
    Truth,
    compute_truth,
    resolve_workers,
    run_replicates,
    truth_by_segment,
    world_seed,
)
from simulations.users import UserModels
from simulations.world import World, build_world

__all__ = ["SimulationResult", "simulate", "config_fingerprint"]

PARTIAL = "replicates.partial.jsonl"


@dataclass(frozen=True)
class SimulationResult:
    config: Config
    world: World
    truths: list[Truth]
    rows: pd.DataFrame  # one row per replicate x design x day x metric
    curves: pd.DataFrame  # per design x day summary over replicates
    summary: dict[str, Any]
    output: Path | None


def config_fingerprint(config: Config) -> str:
    """Hash of everything that determines the numbers (not the output folder or workers)."""
    data = config.effective()
    data.pop("output", None)
    data.pop("workers", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _load_partial(path: Path, fingerprint: str) -> dict[int, list[dict[str, Any]]]:
    if not path.is_file():
        return {}
    done: dict[int, list[dict[str, Any]]] = {}
    with open(path, encoding="utf-8") as fh:
        try:
            header = json.loads(fh.readline() or "{}")
        except json.JSONDecodeError:
            return {}
        if header.get("fingerprint") != fingerprint:
            return {}
        for line in fh:
            try:
                item = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by an interruption
                break
            done[int(item["replicate"])] = item["rows"]
    return done


def simulate(
    config: Config,
    output: Path | None = None,
    workers: int | None = None,
    fresh: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> SimulationResult:
    """Run the whole job; write the results directory when ``output`` is given.

    Parameters
    ----------
    config:
        The validated config.
    output:
        Results directory (created); ``None`` keeps everything in memory.
    workers:
        Processes for replicates (default ``config.workers``; 0 = all cores). The numbers do
        not depend on it.
    fresh:
        Ignore finished replicates of an interrupted earlier run of the same config.
    on_progress:
        Called with (finished replicates, total) as replicates complete.
    log:
        Receives one-line progress messages.
    """
    say = log or (lambda _msg: None)
    world = build_world(config, world_seed(config.seed))
    users = UserModels.from_config(config.users)
    users.check_world(world.n_grades, world.ranked_labels("A")[:8])
    say(f"world: {world.n_queries} queries, rankers A and B at depth {world.depth}")
    truths = compute_truth(config, world, users)

    done: dict[int, list[dict[str, Any]]] = {}
    partial_fh = None
    fingerprint = config_fingerprint(config)
    if output is not None:
        if output.exists() and not output.is_dir():
            raise ConfigError(("output",), f"{output} exists and is not a directory; give a results directory")
        output.mkdir(parents=True, exist_ok=True)
        partial = output / PARTIAL
        if not fresh:
            done = _load_partial(partial, fingerprint)
            done = {i: r for i, r in done.items() if i < config.replicates}
        if done:
            say(f"resuming: {len(done)} of {config.replicates} replicates already finished in {partial}")
            partial_fh = open(partial, "a", encoding="utf-8")
        else:
            partial_fh = open(partial, "w", encoding="utf-8")
            partial_fh.write(json.dumps({"fingerprint": fingerprint}) + "\n")
            partial_fh.flush()
    total = config.replicates
    todo = [i for i in range(total) if i not in done]
    n_workers = resolve_workers(config.workers if workers is None else workers)
    say(f"running {len(todo)} replicates on {min(n_workers, max(len(todo), 1))} worker(s)")
    if on_progress is not None:
        on_progress(len(done), total)

    def on_done(index: int, rows: list[dict[str, Any]]) -> None:
        done[index] = rows
        if partial_fh is not None:
            partial_fh.write(json.dumps({"replicate": index, "rows": rows}) + "\n")
            partial_fh.flush()
        if on_progress is not None:
            on_progress(len(done), total)

    try:
        run_replicates(config, world, todo, n_workers, on_done)
    finally:
        if partial_fh is not None:
            partial_fh.close()

    rows = pd.DataFrame([row for i in sorted(done) for row in done[i]])
    summary, curves = analyse(rows, truths, world, config)
    summary["truth_by_segment"] = truth_by_segment(world, users)
    result = SimulationResult(config, world, truths, rows, curves, summary, output)
    if output is not None:
        from simulations.report import write_results

        write_results(result, fingerprint)
        (output / PARTIAL).unlink(missing_ok=True)
    return result
