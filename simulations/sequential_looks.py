"""Per-batch looks of the designs' sequential tests (``designs[i].analysis.monitoring: batch``): a traffic consumer
that records each such design's primary estimate after every batch, as side rows ``batch:<metric>`` whose ``day``
column holds the look number (look ``k`` ends at hour ``k * batch_hours``), which
:func:`simulations.sequential.sequential_summary` reads. Importable as :mod:`simulations.sequential`'s names too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["BATCH_PREFIX", "BatchLooks", "batch_looks"]

#: metric prefix of the per-batch look rows (a side record: the main analysis leaves them out)
BATCH_PREFIX = "batch:"


class BatchLooks:
    """A traffic consumer that records, after every batch, the primary estimate of each design
    whose ``analysis.monitoring`` is ``batch`` (A/B and interleaving designs, not their null
    variants).

    It must come after the designs in the consumer list (every design has then processed the
    batch). Look ``k`` (1-based, counting empty batches too) is recorded as a row with
    ``metric = "batch:<primary metric>"`` and ``day = k``; it ends at hour ``k * batch_hours``.
    An undefined estimate (too few users so far) is recorded as NaN, as at a daily checkpoint.
    """

    def __init__(self, designs: list[Any]) -> None:
        self.designs = designs
        self.look = 0

    def __len__(self) -> int:
        return len(self.designs)

    def process(self, batch: Any) -> None:
        from simulations.designs.ab import METRICS as AB_SUMS
        from simulations.designs.base import CheckpointRow

        self.look += 1
        for design in self.designs:
            metric = design.metric_names()[0]
            compiled = design._checkpoint_values(primary=True)  # (simulations.stat_kernels; None: the NumPy path)
            if compiled is not None:
                n_users, n_impr, estimates = compiled
                design.rows.append(CheckpointRow(design.name, design.aa, self.look, BATCH_PREFIX + metric, True,
                                                 *estimates[metric], n_users, n_impr))
                continue
            users = np.flatnonzero(design.sums["impressions"] > 0)
            # the sums the estimate reads (``take``: the values of ``v[users]``); interleaving estimates do not
            # read the impressions
            if design.kind == "ab":  # test: delta reads the population arrays (ABDesign._estimates)
                keep = ("impressions", AB_SUMS[design.config.metric]) if design.config.test == "welch" else ()
                sums = {k: design.sums[k].take(users) for k in keep}
            else:
                sums = {k: v.take(users) for k, v in design.sums.items() if k != "impressions"}
            if design._has_data(users, sums):
                est = _primary_estimate(design, users, sums)
                vals = (float(est.estimate), float(est.se), float(est.ci_low), float(est.ci_high), float(est.pvalue))
                df = float(getattr(est, "df", math.inf))  # (Student's t of these degrees of freedom; inf: z)
            else:
                vals, df = (math.nan,) * 5, math.inf
            design.rows.append(CheckpointRow(design.name, design.aa, self.look, BATCH_PREFIX + metric, True, *vals,
                                             int(users.size), int(design.sums["impressions"].sum()), df))


def _primary_estimate(design: Any, users: np.ndarray, sums: dict[str, np.ndarray]) -> Any:
    """The design's primary estimate from the active users' sums. A/B designs compute their
    primary metric only (:meth:`simulations.designs.ab.ABDesign._estimates` of that metric), the three
    times cheaper look; other designs their first estimate. Tested equal to the daily checkpoint
    at every day's last batch."""
    if design.kind != "ab":
        return next(iter(design._estimates(users, sums).values()))
    metric = design.metric_names()[0]
    return design._estimates(users, sums, [metric])[metric]


def batch_looks(designs: list[Any]) -> list[BatchLooks]:
    """The consumer to append after ``designs`` (empty when no design monitors per batch)."""
    mine = [d for d in designs if d.config.analysis.monitoring == "batch" and d.config.type in ("ab", "interleaving")
            and getattr(d, "null_labels", None) is None]
    return [BatchLooks(mine)] if mine else []
