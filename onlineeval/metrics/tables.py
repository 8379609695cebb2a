"""Tables of offline evaluations shared by ``onlineeval evaluate`` and :mod:`onlineeval.api`.

Both entry points build the same long per-query frame from
:class:`~onlineeval.metrics.evaluate.RunEvaluation` objects, pair systems on the queries
every system counts, and report RBP's residual and ERR's scale top the same way, so
the CLI and the Python API give the same numbers by construction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from onlineeval.conventions import Conventions
    from onlineeval.metrics.evaluate import RunEvaluation

__all__ = ["common_queries", "err_scales", "long_frame", "paired_counts", "rbp_residuals", "summary_row"]


def long_frame(evals: list[RunEvaluation]) -> pd.DataFrame:
    """One row per (system, metric, query counted for that metric): columns ``query, system, metric, value``.

    Each metric has its own queries (:meth:`~onlineeval.metrics.evaluate.RunEvaluation.counted_for`): under
    ``empty="exclude"`` a relevance-free metric (Judged@k) keeps the queries without a relevant document."""
    import numpy as np
    import pandas as pd

    parts: list[pd.DataFrame] = []
    for ev in evals:
        for m in ev.metrics:
            rows = ev.counted_for(m)
            q = ev.queries[rows].astype(str)
            parts.append(pd.DataFrame({"query": q, "system": ev.run_id, "metric": str(m), "value": ev.values[m][rows]}))
    if not parts:
        return pd.DataFrame(columns=["query", "system", "metric", "value"])
    out = pd.concat(parts, ignore_index=True)
    out["value"] = out["value"].astype(np.float64)
    return out


def common_queries(long: pd.DataFrame, n_systems: int) -> tuple[pd.DataFrame, int]:
    """Rows of the queries every system has, metric by metric (paired tests need aligned queries: both systems
    of a pair on the same queries for each metric), and how many queries are paired for every metric (the
    fewest of :func:`paired_counts`; 0 when nothing is paired)."""
    per_q = long.groupby(["metric", "query"])["system"].transform("nunique")
    keep = long[per_q == n_systems].reset_index(drop=True)
    counts = paired_counts(keep)
    return keep, min(counts.values()) if counts else 0


def paired_counts(long_c: pd.DataFrame) -> dict[str, int]:
    """Paired queries per metric (in first-appearance order) of :func:`common_queries`' rows: under
    ``empty="exclude"`` a relevance-free metric (Judged@k) can have more than the others."""
    if not len(long_c):
        return {}
    counts = long_c.groupby("metric", sort=False)["query"].nunique()
    return {str(k): int(v) for k, v in counts.items()}


def rbp_residuals(
    qrels: pd.DataFrame, runs: list[pd.DataFrame], names: list[str], ms: list[Any], conv: Conventions
) -> dict[tuple[str, str], pd.Series]:
    """Per-query RBP residuals (indexed by query id) per (system, RBP metric) on RBP's queries (counted under
    the empty rule, though RBPResidual alone is relevance-free): RBP is reported as an interval
    [RBP, RBP + residual]."""
    import pandas as pd

    from onlineeval.metrics import RBP, RBPResidual
    from onlineeval.metrics.evaluate import evaluate_run

    rbps = [m for m in ms if isinstance(m, RBP)]
    if not rbps:
        return {}
    out: dict[tuple[str, str], pd.Series] = {}
    resid = {m: RBPResidual(k=m.k, p=m.p) for m in rbps}  # RBP(p=0.9) and its graded form share one
    for name, r in zip(names, runs):
        ev = evaluate_run(qrels, r, list(dict.fromkeys(resid.values())), conv, run_id=name)
        queries = ev.queries[ev.counted].astype(str)
        for m, res in resid.items():
            out[(name, str(m))] = pd.Series(ev.values[res][ev.counted], index=queries, dtype="float64")
    return out


def summary_row(
    ev: RunEvaluation, m: Any, residuals: dict[tuple[str, str], pd.Series], err_gmax: dict[str, int]
) -> dict[str, Any]:
    """One system's summary of one metric, the row of :attr:`onlineeval.Evaluation.aggregate` and the ``all``
    row of ``onlineeval evaluate --format csv``: ``system, metric, value`` (the mean over the metric's counted
    queries), ``n`` (how many: under ``empty="exclude"`` a relevance-free metric such as Judged@k also counts
    the queries without a relevant document), ``residual`` (the mean RBP residual of :func:`rbp_residuals`, NaN
    for other metrics), ``err_gmax`` (:func:`err_scales`, ``None`` for other metrics), ``sum`` (a count's sum
    over its counted queries, ``Metric.summed``, as trec_eval's ``all`` line; NaN for other metrics) and the
    query counts ``queries_*``."""
    import math

    res = residuals.get((ev.run_id, str(m)))
    row: dict[str, Any] = {
        "system": ev.run_id,
        "metric": str(m),
        "value": float(ev.mean(m)),
        "n": ev.n(m),
        "residual": float(res.mean()) if res is not None and len(res) else math.nan,
        "err_gmax": err_gmax.get(str(m)),
        "sum": ev.total(m) if type(m).summed else math.nan,
    }
    return row | {f"queries_{k}": v for k, v in ev.counts.as_dict().items()}


def err_scales(qrels: pd.DataFrame, ms: list[Any]) -> dict[str, int]:
    """The ERR scale top (``gmax``) of each ERR metric that does not name one: the top
    grade of the qrels, as :func:`onlineeval.metrics.evaluate.evaluate_run` uses it."""
    from onlineeval.metrics import ERR

    top = max(1, int(qrels["grade"].max())) if len(qrels) else 1
    return {str(m): top for m in ms if isinstance(m, ERR) and m.gmax is None}
