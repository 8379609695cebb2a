"""The one wording of "the lists are deeper than a model's per-rank parameters", for the models and the fits.

Below :mod:`clickmodels.base` and :mod:`clickmodels.estimation` (both use it; it imports neither);
:mod:`clickmodels.base` re-exports both names.
"""

from __future__ import annotations

from clickmodels.inputs import Impressions
from onlineeval.errors import InputError

__all__ = ["check_depth", "too_deep"]


def too_deep(what: str, ranks: int, slots: int, fitted: bool = False) -> str:
    """Why per-rank parameters ``what`` for ``ranks`` ranks cannot serve lists of ``slots``, and how to pass the
    depth: the one wording of the models (``fitted=False``: they are shown lists, so showing fewer documents
    also helps) and of the fits scoring a log (``fitted=True``)."""
    fix = f"fit it on logs with lists of at least {slots}" + ("" if fitted else f", or show at most {ranks} documents")
    head = (f"{what} was fitted for {ranks} ranks but the log has lists of {slots}" if fitted
            else f"the lists have {slots} slots but {what} covers only {ranks} ranks")
    return f"{head} (a fitted model covers the longest lists of its training log: {fix})"


def check_depth(imp: Impressions, ranks: int, what: str) -> None:
    """Raise :class:`InputError` (:func:`too_deep`) when the lists of ``imp`` are deeper than the ``ranks`` ranks
    of a model's per-rank parameters ``what``."""
    if imp.shape[1] > ranks:
        raise InputError(too_deep(what, ranks, imp.shape[1]))
