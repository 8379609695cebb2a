"""Interleaver validation in the Python API: :func:`validate` and the pytest helper :func:`assert_valid_interleaver`;
a counterfactual log's recorded propensities against its logging policy: :func:`validate_propensities`.

The battery of ``onlineeval validate`` as a report object.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from onlineeval.interleaving.validation import ValidationReport


def validate(
    candidate: Any,
    method: str = "team_draft",
    *,
    n: int = 60_000,
    alpha: float = 0.01,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    timeout: float | None = 10.0,
) -> ValidationReport:
    """Run the interleaving validation battery of ``onlineeval validate`` on ``candidate``.

    Parameters
    ----------
    candidate:
        ``"package.module:Class"`` / ``"file.py:Class"`` (as ``--interleaver``), an object
        with ``interleave(lists, rng)`` and ``credit(shown, teams, clicks[, lists])``, or an
        :class:`onlineeval.interleaving.Interleaver` (batch API).
    method:
        The method the candidate claims to implement (``team_draft``, ``balanced``,
        ``probabilistic``, ``team_draft_multileave``, ...).
    n, alpha, seed, options, timeout:
        Impressions per statistical check, the battery's level, the seed, options of the
        reference method, and seconds one candidate call may take (None: no limit).

    Returns
    -------
    onlineeval.interleaving.validation.ValidationReport
        ``passed``, ``exit_code``, ``format()`` (the CLI's table) and ``to_json()``. A
        candidate that raises or returns malformed output gives a failed report (not an
        exception), as the CLI does.
    """
    from onlineeval.interleaving.validation import (
        Candidate,
        CandidateError,
        _from_object,
        load_candidate,
        validate_interleaver,
    )

    if not isinstance(method, str):
        from onlineeval.errors import ConfigError

        raise ConfigError(("method",), f"must be an interleaving method's name (text), got {type(method).__name__}")
    opts = dict(options or {})
    if isinstance(candidate, str):
        cand = load_candidate(candidate, timeout=timeout)
    elif isinstance(candidate, Candidate):
        cand = candidate
    else:
        cand = _from_object(type(candidate).__name__, candidate)
    try:
        return validate_interleaver(cand, method, n=n, alpha=alpha, seed=seed, options=opts, timeout=timeout)
    except CandidateError as exc:
        if exc.report is None:  # pragma: no cover - the battery always attaches one
            raise
        return exc.report


def validate_propensities(log: str | os.PathLike[str], *, rtol: float = 1e-6) -> ValidationReport:
    """Check the propensities a counterfactual log records against its logging policy's exact ones, as
    ``onlineeval validate --propensity-log`` (:mod:`onlineeval.estimators.propensity_check`).

    Parameters
    ----------
    log:
        A log in ``onlineeval estimate``'s format (JSON lines, plain or gzipped) whose every line carries both the
        recorded ``propensities`` and the ``logger`` (the logging policy and its scores).
    rtol:
        The relative error a recorded value may have.

    Returns
    -------
    onlineeval.interleaving.validation.ValidationReport
        One exact check per propensity form: ``passed``, ``exit_code``, ``format()`` and ``to_json()``.
    """
    import simulations.policies
    from onlineeval.estimators.propensity_check import validate_propensities as check
    from simulations.policies.settings import propensity_settings

    with propensity_settings(os.cpu_count() or 1):
        return check(log, simulations.policies, rtol=rtol)


def assert_valid_interleaver(candidate: Any, method: str = "team_draft", **kwargs: Any) -> ValidationReport:
    """Fail the calling test with the report's text unless every validation check passes.

    For a team's own test suite::

        def test_our_team_draft():
            assert_valid_interleaver("our_pkg.interleaving:TeamDraft", "team_draft", n=20_000)

    ``kwargs`` go to :func:`validate`. Uses ``pytest.fail`` (an ``AssertionError`` without
    pytest); returns the report when it passes.
    """
    report = validate(candidate, method, **kwargs)
    if not report.passed:
        text = f"interleaver {candidate!r} fails validation as {method}:\n{report.format()}"
        try:
            import pytest
        except ImportError:  # pragma: no cover - pytest is how this is meant to be used
            raise AssertionError(text) from None
        pytest.fail(text, pytrace=False)
    return report
