"""The target against the log's support: which documents and pages of a target ranker the log can weigh, in the
warnings and errors that :func:`onlineeval.estimators.log_estimates.estimate_targets`, the estimate command and
:func:`onlineeval.estimate` share (documents the logging policy cannot show, documents never logged for a query,
lists shorter than the log's page)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from onlineeval.io.logged import LoggedLog, TargetMap

__all__ = ["never_logged_text", "shorter_target_text", "support_count", "unseen_refused", "unseen_text"]


def unseen_text(tmap: Any, log: LoggedLog, first: Any) -> str:
    """The target's documents a log given by its logger cannot show (``tmap.unseen``, ``first`` the one to name):
    the document, and how many such slots; shared by the estimate command (naming the run file's line) and
    :func:`onlineeval.estimate`. Only logs with a ``logger`` refuse them (:func:`unseen_refused`)."""
    queries = len({u.query for u in tmap.unseen})
    return (f"ranks document {first.doc!r} at rank {first.rank} for query {first.query!r}, which the log's logging "
            f"policy cannot show (not one of its candidates for that query; {len(tmap.unseen)} such slots in "
            f"{queries} queries within the log's list lengths): probability 0, so every estimate of the target is "
            "biased there")


def unseen_refused(log: LoggedLog) -> bool:
    """Whether a target's unseen documents (:attr:`~onlineeval.io.logged.TargetMap.unseen`) are an error without
    ``--allow-unseen`` / ``allow_unseen``: only for a log given by its logger, where they are documents the policy
    cannot show (logging probability 0: a known support violation). A log with written propensities cannot tell a
    document its logging policy never shows from one it has not yet drawn for a rare query (a sampling zero, the
    usual case on a tail-heavy log): its weights are exact either way, so such targets are estimated with a warning
    (:func:`never_logged_text`)."""
    return log.source != "log"


def never_logged_text(name: str, tmap: Any, impressions: int) -> str:
    """The warning of a target that ranks documents a log with written propensities never shows for their query.

    What is known: every weight of a logged impression (a list-, prefix- or item-level weight needs the target's
    and the logger's probabilities of what was *shown*, both known), and those weights are 0 wherever the target's
    list, prefix or (document, rank) holds such a document. What is not: the logger's probability of the target's
    list, prefix, or document at that rank (written propensities only give those of shown events), so whether
    that 0 is a sampling zero (positive probability, not yet drawn: IPS, SNIPS, RIPS and IIPS stay unbiased) or a
    support violation (probability 0: biased there). PBM-IPS's empirical click propensity counts those pairs 0
    (its ``target_mass_unseen`` note bounds the loss) and click-model estimators predict them from their model's
    default."""
    queries = len({u.query for u in tmap.unseen})
    return (f"{name}: ranks {len(tmap.unseen)} documents never logged for their query ({queries} queries, "
            f"{impressions} impressions): the weights there are 0 (exact: IPS, SNIPS, RIPS, IIPS are unbiased if the "
            "logging policy could show them and the log has just not drawn them, the usual case for rare queries); "
            "whether it could is unknown from written propensities (a 'logger' in the log tells; where it could not, "
            "the estimates are biased); click-model estimators (dm, dr, pbm_ips with empirical propensities) count "
            "or predict them from no data")


def shorter_target_text(name: str, lg: Any, tmap: Any, source: str, whole_list: Sequence[str] = ()) -> str | None:
    """The warning of a target whose list is shorter than the log's for some of the queries it ranks (a run cut
    at a smaller depth than the page, or a query with few retrieved documents), or ``None``.

    The target's list is its top ``query_k`` documents; with fewer, its page there has empty slots, which earn no
    reward: slot-level estimates are then the value of that shorter page, lower than the same ranker's on a full
    page for additive rewards (clicks per query, utility), not a property of the ranker's order. Estimators that
    weigh by the whole list (``whole_list``: those reading the list propensity) find no logged list equal to the
    shorter one where every logged list of the query is longer: weight 0 there, no support for that page."""
    import numpy as np

    depth = tmap.depth
    short = np.flatnonzero(tmap.ranked & (depth < lg.query_k))
    if short.size == 0:
        return None
    rows = int(np.isin(lg.data.query, short).sum())
    shown = ", ".join(f"{lg.queries[q]}: {int(depth[q])} of {int(lg.query_k[q])}" for q in short[:3])
    more = f", ... ({short.size - 3} more)" if short.size > 3 else ""
    text = (f"{name}: ranks fewer documents than the log's lists show for {short.size} of {int(tmap.ranked.sum())} "
            f"queries it ranks ({shown}{more} documents; {rows} impressions) in {source}: its page there is "
            "shorter (empty slots earn no reward), so the slot-level estimates are those of the shorter page, not "
            "of the same order filling the log's page")
    if whole_list:
        text += (f"; {', '.join(whole_list)} weigh by the whole list, which no logged list of those queries equals "
                 "where all are longer: weight 0 there (no support for the shorter page, biased)")
    return text


def support_count(log: LoggedLog, tmap: TargetMap, rows: np.ndarray) -> tuple[int, int]:
    """Impressions (of ``rows``) whose query's target list holds a document the log never shows (a log with
    written propensities) or its logger cannot show (a log with a ``logger``)."""
    q = log.data.query[rows]
    return int(tmap.unseen_query[q].sum()), int(q.size)
