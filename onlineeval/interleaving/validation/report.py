"""Check results and the validation report: plain text for people, one JSON document for CI gates.

Every check names the statistic it prints (``p-value`` of a named test, or
``violations/total`` for an exact check), so no number in the report needs the header
to be read. Exit-code semantics are part of the report: 0 every check passed (documented
behaviour never fails a run), 1 at least one check failed, 2 bad input (reported by the
command line before any report exists).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

__all__ = ["DOCUMENTED", "EXIT_CODES", "FAIL", "PASS", "PENDING", "SKIPPED", "CheckResult", "ValidationReport",
           "finalize", "stamped"]

PASS, FAIL, DOCUMENTED, SKIPPED = "PASS", "FAIL", "DOCUMENTED", "SKIPPED"
#: status of a statistical check before :func:`finalize` compares its p-value with the level
PENDING = "PENDING"

#: what the exit code of ``onlineeval validate`` means
EXIT_CODES: dict[int, str] = {
    0: "every check passed (DOCUMENTED and SKIPPED rows never fail a run)",
    1: ("at least one check failed (a candidate call that raised, called sys.exit / os._exit, timed out or "
        "returned malformed output fails the run)"),
    2: "bad input (unknown method or option, unreadable candidate, malformed log line); no report",
}


@dataclass(frozen=True)
class CheckResult:
    """One check of the battery.

    Attributes
    ----------
    name:
        Check name (``structure``, ``random_clicks_no_preference``, ...).
    status:
        ``PASS``, ``FAIL``, ``DOCUMENTED`` (a known property of the method, measured, never a
        failure) or ``SKIPPED``.
    statistic:
        What :attr:`value` is, e.g. ``"sign test p-value"`` or ``"violations/total"``.
    value:
        The statistic's value: a p-value (float), or for an exact check the number of
        violations (``counts`` holds the total); ``None`` when skipped.
    exact:
        True for exact checks (no sampling error: a count of violations, not a p-value).
    counts:
        The counts behind the statistic (wins, losses, ties, violations, total, ...).
    message:
        Human-readable detail: what was measured and, on failure, an example.
    rule:
        How the status follows from the value: ``"exact"`` (fails on any violation),
        ``"null"`` (a test of a property the method must have: fails when the p-value is
        below :attr:`level`), ``"power"`` (a difference the method must see: fails unless
        the p-value is below :attr:`level`), ``"documented"``, ``"skipped"`` or ``"implied"``
        (``SKIPPED``: every test of the check is one of another check's, so it is not run
        again and takes no share of the level).
    level:
        The significance level the p-value was compared with (the battery's ``alpha``
        divided over its statistical checks), ``None`` for exact and documented checks.
    hint:
        Where a statistical check failed and what to try (the worst position, another tau): set
        by the check, appended to :attr:`message` by :func:`finalize` only when the check fails
        (a passing row names no "worst" test), so terminal and JSON carry the same text.
    """

    name: str
    status: str
    statistic: str
    value: float | None
    message: str
    exact: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    rule: str = "exact"
    level: float | None = None
    hint: str = field(default="", repr=False, compare=False)

    @property
    def failed(self) -> bool:
        """True when the check failed."""
        return self.status == FAIL

    @property
    def p_value(self) -> float | str | None:
        """The p-value, ``"exact"`` for exact checks, ``None`` when skipped."""
        if self.exact:
            return "exact"
        return self.value

    def shown_value(self) -> str:
        """The value as printed in the table (``violations/total`` for exact checks)."""
        if self.value is None:
            return "-"
        if self.exact:
            return f"{int(self.value)}/{self.counts.get('total', 0)}"
        return f"{self.value:.3g}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        value: float | int | None = self.value
        if self.exact and value is not None:
            value = int(value)
        elif value is not None and not math.isfinite(value):  # pragma: no cover - p-values are finite
            value = None
        return {"name": self.name, "status": self.status, "statistic": self.statistic, "value": value,
                "p_value": self.p_value, "rule": self.rule, "level": self.level, "counts": dict(self.counts),
                "message": self.message}


@dataclass(frozen=True)
class ValidationReport:
    """All checks of one validation run.

    Attributes
    ----------
    subject:
        What was validated (candidate name or log path).
    method:
        The reference method it was checked against.
    checks:
        The check results, in battery order.
    alpha:
        Level of every statistical check.
    conventions:
        ``(key, text)`` pairs: outcome sign, click models, sizes, the scale of each
        fidelity check, how to read each statistic.
    mode:
        ``"interleaving"`` (two rankers), ``"multileaving"`` (three or more), ``"log"``, or ``"propensities"`` (a
        counterfactual log's recorded propensities against its logging policy:
        :mod:`onlineeval.estimators.propensity_check`).
    inputs:
        What was checked, by content (:func:`stamped`): the SHA-256 of the files defining the candidate's calls
        (``{"candidate": {"files": [...], "unhashed": [...]}}``) or of the log (``{"log": {...}}``); empty where
        the report was made without them.
    settings:
        The options that determine the numbers (method, the reference's options, sizes, level, seed, ...).
    fingerprint:
        16 hex digits of the inputs' digests, the settings and the package version
        (:func:`onlineeval.io.digest.fingerprint`): two reports with the same fingerprint checked the same code or
        log the same way; ``None`` where a part of the candidate has no Python source file to hash.
    """

    subject: str
    method: str
    checks: tuple[CheckResult, ...]
    alpha: float
    conventions: tuple[tuple[str, str], ...] = ()
    mode: str = "interleaving"
    inputs: dict[str, Any] = field(default_factory=dict, hash=False)
    settings: dict[str, Any] = field(default_factory=dict, hash=False)
    fingerprint: str | None = None

    @property
    def passed(self) -> bool:
        """True when no check failed (documented behaviour does not count as failure)."""
        return not any(c.failed for c in self.checks)

    @property
    def exit_code(self) -> int:
        """0 when every check passed, 1 otherwise (see :data:`EXIT_CODES`)."""
        return 0 if self.passed else 1

    @property
    def level(self) -> float | None:
        """The per-check level of the statistical checks (``alpha`` over their number), if any."""
        levels = [c.level for c in self.checks if c.level is not None]
        return levels[0] if levels else None

    @property
    def verdict(self) -> str:
        """``PASS`` or ``FAIL``."""
        return PASS if self.passed else FAIL

    def format(self) -> str:
        """A readable plain-text report: one row per check with the statistic it prints named."""
        lines = [(f"validation of {self.subject} against onlineeval's {self.method!r} ({self.mode}, "
                 f"alpha = {self.alpha:g} for the whole battery)") if self.mode != "propensities" else
                 f"validation of the propensities recorded in {self.subject} against its logging policy's exact ones "
                 "(exact checks: no sampling error)"]
        n_stat = sum(c.rule in ("null", "power") for c in self.checks)
        if self.level is not None:
            lines.append(f"  level: each of the {n_stat} statistical checks is tested at alpha / {n_stat} = "
                         f"{self.level:.3g} (Bonferroni), so a correct implementation fails a run with "
                         f"probability at most {self.alpha:g}")
        for key, text in self.conventions:
            lines.append(f"  {key}: {text}")
        lines += self._inputs_lines()
        lines.append("")
        w_name = max([len(c.name) for c in self.checks] + [5])
        w_stat = max([len(c.statistic) for c in self.checks] + [9])
        w_val = max([len(c.shown_value()) for c in self.checks] + [5])
        lines.append(f"{'check':<{w_name}}  {'status':<10}  {'statistic':<{w_stat}}  {'value':>{w_val}}  detail")
        for c in self.checks:
            lines.append(f"{c.name:<{w_name}}  {c.status:<10}  {c.statistic:<{w_stat}}  "
                         f"{c.shown_value():>{w_val}}  {c.message}")
        n_fail = sum(c.failed for c in self.checks)
        lines.append("")
        lines.append("RESULT: " + (PASS if self.passed
                                   else f"FAIL ({n_fail} check{'s' if n_fail != 1 else ''} failed)"))
        return "\n".join(lines)

    def _inputs_lines(self) -> list[str]:
        """The inputs' digests and the fingerprint, as the text report prints them (none without inputs)."""
        if not self.inputs:
            return []
        from onlineeval.io.digest import inputs_line

        files = [("log", self.inputs["log"])] if "log" in self.inputs else []
        cand = self.inputs.get("candidate", {})
        files += [(PurePath(e["path"]).name, e) for e in cand.get("files", [])]
        lines = [f"  {inputs_line(files)}"] if files else []
        if cand:
            lines.append(f"  candidate code: {CANDIDATE_FILES}")
        if self.fingerprint is not None:
            lines.append(f"  fingerprint: {self.fingerprint} (of the inputs' SHA-256, the settings and the version)")
        else:
            lines.append("  fingerprint: none (" + ", ".join(cand.get("unhashed", [])) + " without a Python source "
                         "file to hash: the report does not identify the code it checked)")
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The report as one JSON-ready document (what was checked and how, checks, conventions, verdict,
        exit-code semantics)."""
        return {
            "subject": self.subject,
            "method": self.method,
            "mode": self.mode,
            "fingerprint": self.fingerprint,
            "inputs": self.inputs,
            "settings": self.settings,
            "alpha": self.alpha,
            "level": self.level,
            "checks": [c.as_dict() for c in self.checks],
            "conventions": dict(self.conventions),
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "exit_codes": {str(k): v for k, v in EXIT_CODES.items()},
        }

    def to_json(self) -> str:
        """:meth:`as_dict` serialised (strict JSON: no NaN)."""
        return json.dumps(self.as_dict(), indent=2, allow_nan=False)


#: what the candidate's digests cover (the text report and the JSON's inputs say it)
CANDIDATE_FILES = ("the files that define its interleave() and credit() (or its Interleaver class), hashed as they "
                   "were when it was loaded; modules they import are not hashed")


def stamped(report: ValidationReport, inputs: dict[str, Any], settings: dict[str, Any]) -> ValidationReport:
    """``report`` with what it checked (``inputs``: file digests, as :func:`onlineeval.io.digest.input_entry` gives
    them), the ``settings`` that determine its numbers and their fingerprint (``None`` where the candidate lists
    calls without a source file, ``inputs["candidate"]["unhashed"]``)."""
    from onlineeval.io.digest import fingerprint

    complete = not inputs.get("candidate", {}).get("unhashed")
    return replace(report, inputs=dict(inputs), settings=dict(settings),
                   fingerprint=fingerprint(inputs, settings) if complete else None)


def finalize(checks: list[CheckResult], alpha: float) -> tuple[CheckResult, ...]:
    """Set the status of the statistical checks at the level ``alpha / s`` (``s`` = their number).

    A check's :attr:`~CheckResult.hint` is appended to its message where it failed, dropped elsewhere.

    Bonferroni over the checks: a correct implementation fails a run with probability at
    most ``alpha`` (each check's p-value is already Bonferroni-combined over its own tests).
    """
    n_stat = sum(c.rule in ("null", "power") for c in checks)
    level = alpha / max(n_stat, 1)
    out = []
    for c in checks:
        if c.rule == "null":
            c = replace(c, status=PASS if c.value is not None and c.value >= level else FAIL, level=level)
        elif c.rule == "power":
            c = replace(c, status=PASS if c.value is not None and c.value < level else FAIL, level=level)
        if c.hint:
            c = replace(c, message=c.message + "; " + c.hint if c.failed else c.message, hint="")
        out.append(c)
    return tuple(out)
