"""Progress of a validation run: which stage of the battery runs and how many impressions went through the candidate.

A per-impression candidate written in Python takes minutes at the default ``--n`` (a team-draft wrapper calling
onlineeval's batch API one impression at a time: 2m37s, 2026-12-05), so ``onlineeval validate`` prints progress
lines on stderr (:class:`onlineeval.cli.validate.ValidateProgress`). The battery and the candidates report here;
nothing is reported unless a reporter is set in :data:`VALIDATION_PROGRESS` (the Python API sets none).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

__all__ = ["CALLS_EVERY", "VALIDATION_PROGRESS", "calls", "stage"]

#: the reporter of the running validation (an object with ``stage(names, index, total)`` and ``calls(k)``), if any
VALIDATION_PROGRESS: ContextVar[Any] = ContextVar("onlineeval_validation_progress", default=None)

#: a per-impression candidate's calls are reported in groups of this many
CALLS_EVERY = 1000


def stage(names: tuple[str, ...], index: int, total: int) -> None:
    """Stage ``index`` (0-based) of ``total`` begins; it runs the checks ``names``."""
    reporter = VALIDATION_PROGRESS.get()
    if reporter is not None:
        reporter.stage(names, index, total)


def calls(k: int) -> None:
    """``k`` more impressions went through the candidate (its interleave or credit, or a batch call of ``k``)."""
    reporter = VALIDATION_PROGRESS.get()
    if reporter is not None and k > 0:
        reporter.calls(k)
