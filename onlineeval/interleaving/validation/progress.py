"""Progress of a validation run: which stage of the battery runs and how many impressions went through the candidate.

A per-impression candidate written in Python takes minutes at the default ``--n`` (a team-draft wrapper calling
onlineeval's batch API one impression at a time: 2m37s, 2026-12-05), so ``onlineeval validate`` prints progress
lines on stderr (:class:`onlineeval.cli.validate.ValidateProgress`). The battery and the candidates report here;
nothing is reported unless a reporter is set in :data:`VALIDATION_PROGRESS` (the Python API sets none).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

__all__ = ["CALLS_EVERY", "VALIDATION_PROGRESS", "calls", "plan", "planned_calls", "stage"]

#: the reporter of the running validation (an object with ``stage(names, index, total)`` and ``calls(k)``), if any
VALIDATION_PROGRESS: ContextVar[Any] = ContextVar("onlineeval_validation_progress", default=None)

#: a per-impression candidate's calls are reported in groups of this many
CALLS_EVERY = 1000


def planned_calls(spec: Any, n: int, per: int, per_fid: int, per_better: int, n_equiv: int, n_fidelity: int,
                  n_better: int, credit_rows: int) -> list[int]:
    """The impressions each stage of :func:`~onlineeval.interleaving.validation.validate_interleaver`'s battery puts
    through the candidate (its ``interleave`` and ``credit`` calls each count, as :func:`calls` reports them), in
    the order of its stages: ``per`` impressions for each of the ``n_equiv`` equivalence scenarios (structure),
    ``per_fid`` for each of the ``n_fidelity`` fidelity ones (A/A; random clicks, twice with a zero-mean check),
    ``per_better`` for each of the ``n_better`` better-ranker ones, none for the distributions (the samples of
    stage 1), ``credit_rows`` credits per equivalence scenario (credit agreement; 0 where it is skipped), a credit
    for each of stage 1's impressions (outcome distribution), ``per`` for balanced's documented bias and ``n``
    for each of team-draft's two round coins. Every sample is drawn and credited once, so these are the exact counts
    (tested for every method against a candidate counting its calls)."""
    random_clicks = 2 if spec.zero_mean_check else 1
    documented = 0
    if not spec.multileave:
        documented = 2 * per * (spec.name == "balanced") + 4 * n * bool(spec.prefix_balanced)
    return [per * n_equiv, 2 * per_fid * n_fidelity, 2 * random_clicks * per_fid * n_fidelity,
            2 * per_better * n_better, 0, credit_rows * n_equiv, per * n_equiv, documented]


def plan(total: int) -> None:
    """The battery will put ``total`` impressions through the candidate (:func:`planned_calls`; sent again, smaller,
    where a check is skipped). A reporter without a ``plan`` method is not told."""
    reporter = VALIDATION_PROGRESS.get()
    if reporter is not None and hasattr(reporter, "plan"):
        reporter.plan(total)


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
