"""Validation harness: check a team's own interleaving implementation (or its logs) before production.

:func:`validate_interleaver` runs a battery of checks against onlineeval's reference
implementation of the declared method (two rankers, or three and more for
``team_draft_multileave`` / ``probabilistic_multileave``); :func:`validate_log` checks
production logs (one JSON object per line with ``rankings``, ``shown``, ``teams``,
``clicks`` and optionally ``outcome``). Every check names its statistic (a test's
p-value, or ``violations/total`` for exact checks); known properties of a method (e.g.
balanced interleaving's bias, the sign of probabilistic interleaving's outcome under
random clicks) are reported as ``DOCUMENTED`` and never fail the run.

Modules:

* :mod:`~onlineeval.interleaving.validation.candidates`: the per-impression protocol
  (``interleave(lists, rng)``, ``credit(shown, teams, clicks[, lists])``), onlineeval's
  batch :class:`~onlineeval.interleaving.base.Interleaver` as a candidate, loading by name;
* :mod:`~onlineeval.interleaving.validation.methods`: which scale carries each method's
  guarantee (win/loss/tie, expected outcome, credit difference);
* :mod:`~onlineeval.interleaving.validation.guard`: calling candidate code (exceptions,
  exits, per-call timeout, malformed output become named failures);
* :mod:`~onlineeval.interleaving.validation.battery`: the checks and their sizes;
* :mod:`~onlineeval.interleaving.validation.exact`: the reference's exact distributions on the
  battery's lists, which the equivalence checks test the candidate against;
* :mod:`~onlineeval.interleaving.validation.invariants`: exact structural invariants;
* :mod:`~onlineeval.interleaving.validation.logs`: reading and checking logs;
* :mod:`~onlineeval.interleaving.validation.report`: results, the text table and the
  JSON document.
"""

from __future__ import annotations

from onlineeval.interleaving.validation.battery import MAX_N, validate_interleaver
from onlineeval.interleaving.validation.candidates import (
    BatchCandidate,
    Candidate,
    ProtocolCandidate,
    _from_object,
    load_candidate,
    reference_candidate,
)
from onlineeval.interleaving.validation.guard import (
    DEFAULT_TIMEOUT,
    CandidateError,
    Watchdog,
    check_seed,
    check_timeout,
)
from onlineeval.interleaving.validation.logs import LogRecord, read_log, validate_log
from onlineeval.interleaving.validation.methods import (
    MULTILEAVING_METHODS,
    MethodSpec,
    method_spec,
)
from onlineeval.interleaving.validation.report import (
    EXIT_CODES,
    CheckResult,
    ValidationReport,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "EXIT_CODES",
    "MAX_N",
    "MULTILEAVING_METHODS",
    "BatchCandidate",
    "Candidate",
    "CandidateError",
    "CheckResult",
    "LogRecord",
    "MethodSpec",
    "ProtocolCandidate",
    "ValidationReport",
    "Watchdog",
    "_from_object",
    "check_seed",
    "check_timeout",
    "load_candidate",
    "method_spec",
    "read_log",
    "reference_candidate",
    "validate_interleaver",
    "validate_log",
]
