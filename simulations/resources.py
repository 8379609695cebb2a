"""How much memory a simulate config needs, estimated before anything is allocated.

A config with ``users.population: 1e13`` or ``collection.n_queries: 1e10`` is valid YAML
and passes every range check, then exhausts the machine half-way through building the
world. :func:`check_memory` estimates the peak from the sizes in the config and refuses
the run (a :class:`~onlineeval.errors.ConfigError` on the key that contributes most, with
the estimate) when it exceeds the memory available. The estimate counts the large arrays
only (bytes per element times their shapes, as allocated by ``world.py``, ``traffic.py``,
the designs and ``runner.compute_truth``) and is meant to be within a small factor, not
exact; sizes of TREC collections are read from the files' byte sizes.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from onlineeval.errors import ConfigError

__all__ = ["MemoryEstimate", "estimate_memory", "available_memory", "check_memory"]

#: refuse when the estimate is above this share of the available memory
HEADROOM = 0.8


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes by part (key path of the config size that drives it) and in total."""

    parts: dict[str, float]

    @property
    def total(self) -> float:
        return float(sum(self.parts.values()))

    def largest(self) -> str:
        return max(self.parts, key=lambda k: self.parts[k])


def _gib(x: float) -> str:
    if not math.isfinite(x):
        return "10^308+ bytes"  # (a size beyond float64's range)
    return f"{x / 2**30:,.1f} GiB" if x >= 2**28 else f"{x / 2**20:,.0f} MiB"


def _f(x: object) -> float:
    """A config's size as a float: an integer beyond float64's range (the configs' sizes are unbounded integers)
    as infinity, which the check then refuses, instead of an OverflowError."""
    try:
        return float(x)  # type: ignore[arg-type]
    except OverflowError:
        return math.inf


def estimate_memory(config: object, workers: int | None = None) -> MemoryEstimate:
    """Peak bytes of a run of ``config`` (a :class:`simulations.config.Config`)."""
    from simulations.config import SyntheticCollection

    coll = config.collection  # type: ignore[attr-defined]
    rankers = 2.0 + len(getattr(config.rankers, "others", {}) or {})  # type: ignore[attr-defined]
    depth = _f(config.rankers.depth)  # type: ignore[attr-defined]
    parts: dict[str, float] = {}
    if isinstance(coll, SyntheticCollection):
        cells = _f(coll.n_queries) * _f(coll.candidates)
        # labels drawn as int64, shared and own normal noise, the score and its argsort (8 bytes
        # each) at the peak, plus every ranker's kept float32 score table and int32 top-depth list
        parts["collection.n_queries"] = cells * (40.0 + 4.0 * rankers) + _f(coll.n_queries) * depth * 4 * rankers
    else:
        # a TREC collection is about as large in memory as its files (ids as Python strings)
        size = 0.0
        for path in [coll.qrels, *coll.runs.values()]:
            try:
                size += os.path.getsize(path)
            except OSError:
                pass
        parts["collection"] = 12.0 * size
    users = _f(config.users.population)  # type: ignore[attr-defined]
    designs = len(config.designs) * (2 if config.analysis.aa else 1)  # type: ignore[attr-defined]
    replicas = max(1, min(workers or os.cpu_count() or 1, config.replicates))  # type: ignore[attr-defined]
    # per process: activity, type, arm and ~6 per-user sums per design, float64
    parts["users.population"] = replicas * users * 8.0 * (4 + 6 * designs)
    traffic = config.traffic  # type: ignore[attr-defined]
    per_batch = _f(traffic.queries_per_day) * _f(traffic.batch_hours) / 24.0 * 1.5  # Poisson and diurnal peaks
    counterfactual = sum(1 for d in config.designs if d.type == "counterfactual")  # type: ignore[attr-defined]
    per_replicate = per_batch * depth * 64.0 * designs
    # a counterfactual design keeps its whole log: ids, clicks and three propensities per slot
    per_replicate += counterfactual * _f(traffic.days) * _f(traffic.queries_per_day) * depth * 48.0 * 1.2
    parts["traffic.queries_per_day"] = replicas * per_replicate
    interleaving = [d for d in config.designs if d.type == "interleaving"]  # type: ignore[attr-defined]
    if interleaving:
        pairs = max(len(d.rankers) * (len(d.rankers) - 1) // 2 for d in interleaving)
        truth = _f(config.analysis.truth_impressions)  # type: ignore[attr-defined]
        parts["analysis.truth_impressions"] = truth * 8.0 * (pairs + 1)
    return MemoryEstimate(parts)


def available_memory() -> float | None:
    """Bytes of memory available now (Linux ``MemAvailable``), else physical memory, else ``None``."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(config: object, source: str | None = None, available: float | None = None) -> MemoryEstimate:
    """Refuse ``config`` when its estimated peak memory exceeds the available memory."""
    estimate = estimate_memory(config, getattr(config, "workers", None) or None)
    limit = available_memory() if available is None else available
    if limit is not None and estimate.total > HEADROOM * limit:
        key = estimate.largest()
        detail = ", ".join(f"{k} {_gib(v)}" for k, v in sorted(estimate.parts.items(), key=lambda kv: -kv[1]))
        raise ConfigError(
            tuple(key.split(".")),
            f"this config needs about {_gib(estimate.total)} of memory ({detail}), more than the "
            f"{_gib(limit)} available; reduce {key} (or workers)",
            source,
        )
    return estimate
