"""Offline rank metrics as declared value objects with vectorised kernels.

>>> from onlineeval.metrics import parse_metric
>>> m = parse_metric("nDCG@10")
>>> str(m)
'nDCG@10'

Every metric works on padded ``(queries x ranks)`` arrays (:meth:`Metric.evaluate_labels`
for grade arrays, :meth:`Metric.compute` for a :class:`LabelBatch`). Metrics that are
C/W/L user models expose :meth:`Metric.cwl`: P@k, RR, RBP, DCG@k / nDCG@k, INSQ, INST.
AP, R-Precision, Recall, bpref, infAP and interpolated precision have no static user model
(``cwl`` raises ``TypeError``); ERR is a cascade, see :meth:`ERR.cascade`.

Runs and qrels (files or DataFrames) are evaluated under named conventions with
:func:`evaluate_run`, which also counts the queries counted, excluded, filled and ignored.
Adding a metric is one module: a frozen dataclass subclass of :class:`Metric` (or
:class:`AdditiveMetric`) decorated with :func:`register`, implementing ``_compute``.
"""

from __future__ import annotations

from onlineeval.metrics.base import (
    CWL,
    EMPTY,
    NONPOOL,
    REGISTRY,
    UNJUDGED,
    EvalContext,
    LabelBatch,
    Metric,
    parse_metric,
    parse_metrics,
    register,
)
from onlineeval.metrics.additive import AdditiveMetric
from onlineeval.metrics.precision import (
    P, Recall, RPrec, RPrecMult, Success, Unjudged, Judged, NumQ, NumRet, NumRel, NumRelRet, NumNonRelJudgedRet,
)
from onlineeval.metrics.rank import AP, RR, Bpref, InfAP, IPrec, IPrecAvg
from onlineeval.metrics.dcg import DCG, NDCG
from onlineeval.metrics.err import ERR, Cascade
from onlineeval.metrics.rbp import RBP, RBPInterval, RBPResidual
from onlineeval.metrics.inst import INSQ, INST
from onlineeval.metrics.evaluate import QueryCounts, RunEvaluation, evaluate_run, label_batch

__all__ = [
    "CWL", "EMPTY", "NONPOOL", "UNJUDGED", "REGISTRY", "EvalContext", "LabelBatch", "Metric",
    "AdditiveMetric", "parse_metric", "parse_metrics", "register",
    "P", "Recall", "RPrec", "RPrecMult", "Success", "Unjudged", "Judged", "NumQ", "NumRet", "NumRel", "NumRelRet",
    "NumNonRelJudgedRet",
    "AP", "RR", "Bpref", "InfAP", "IPrec", "IPrecAvg", "DCG", "NDCG", "ERR", "Cascade",
    "RBP", "RBPInterval", "RBPResidual", "INSQ", "INST",
    "QueryCounts", "RunEvaluation", "evaluate_run", "label_batch",
]
