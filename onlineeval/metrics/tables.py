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

__all__ = ["common_queries", "err_scales", "long_frame", "rbp_residuals", "summary_row"]


def long_frame(evals: list[RunEvaluation]) -> pd.DataFrame:
    """One row per (counted query, system, metric): columns ``query, system, metric, value``."""
    import numpy as np
    import pandas as pd

    parts: list[pd.DataFrame] = []
    for ev in evals:
        q = ev.queries[ev.counted].astype(str)
        for m in ev.metrics:
            parts.append(
                pd.DataFrame({"query": q, "system": ev.run_id, "metric": str(m), "value": ev.values[m][ev.counted]})
            )
    if not parts:
        return pd.DataFrame(columns=["query", "system", "metric", "value"])
    out = pd.concat(parts, ignore_index=True)
    out["value"] = out["value"].astype(np.float64)
    return out


def common_queries(long: pd.DataFrame, n_systems: int) -> tuple[pd.DataFrame, int]:
    """Rows of queries that every system has (paired tests need aligned queries), and their number."""
    per_q = long.groupby(["metric", "query"])["system"].transform("nunique")
    keep = long[per_q == n_systems]
    return keep.reset_index(drop=True), int(keep["query"].nunique())


def rbp_residuals(
    qrels: pd.DataFrame, runs: list[pd.DataFrame], names: list[str], ms: list[Any], conv: Conventions
) -> dict[tuple[str, str], pd.Series]:
    """Per-query RBP residuals (counted queries, indexed by query id) per (system, RBP
    metric): RBP is reported as an interval [RBP, RBP + residual]."""
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
    row of ``onlineeval evaluate --format csv``: ``system, metric, value`` (the mean over counted queries),
    ``n`` (counted queries), ``residual`` (the mean RBP residual of :func:`rbp_residuals`, NaN for other
    metrics), ``err_gmax`` (:func:`err_scales`, ``None`` for other metrics), ``sum`` (a count's sum over
    counted queries, ``Metric.summed``, as trec_eval's ``all`` line; NaN for other metrics) and the query
    counts ``queries_*``."""
    import math

    res = residuals.get((ev.run_id, str(m)))
    row: dict[str, Any] = {
        "system": ev.run_id,
        "metric": str(m),
        "value": float(ev.mean(m)),
        "n": int(ev.counted.sum()),
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
