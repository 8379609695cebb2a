"""Input readers: TREC qrels and runs, LETOR / SVMlight, DataFrames; ranking under tie rules.

Public functions
----------------
:func:`read_qrels` (``query, doc, grade``), :func:`read_run` (``query, doc, score``),
:func:`read_doc_scores` (a ``query doc score`` file, the same frame; not LETOR's one-number-per-line score files),
:func:`read_ranking` (either, by its columns),
:func:`qrels_from_frame`, :func:`run_from_frame`, :func:`read_letor`,
:func:`rank_run` (padded :class:`RankedRun`), :func:`ranked_doc_lists`
(``{query: [doc, ...]}``) and :func:`join_grades`.
"""

from __future__ import annotations

from typing import Any

from onlineeval.io.ranking import RankedRun, join_grades, rank_run, ranked_doc_lists
from onlineeval.io.trec import (
    qrels_from_frame,
    read_doc_scores,
    read_qrels,
    read_ranking,
    read_run,
    run_from_frame,
)

__all__ = [
    "read_qrels",
    "read_letor",
    "LetorData",
    "read_ranking",
    "read_run",
    "read_doc_scores",
    "qrels_from_frame",
    "run_from_frame",
    "RankedRun",
    "rank_run",
    "ranked_doc_lists",
    "join_grades",
]


def __getattr__(name: str) -> Any:
    """The LETOR reader on first use (it imports pandas; the byte-level TREC reader of
    :mod:`onlineeval.io.trec_bytes` and ``onlineeval evaluate`` on TREC files do not)."""
    if name in ("LetorData", "read_letor"):
        from onlineeval.io import letor

        return getattr(letor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
