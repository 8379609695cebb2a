"""`onlineeval validate`: check an interleaving implementation (or its production logs).

Examples::

    onlineeval validate --interleaver my_pkg.module:MyInterleaver --method team_draft
    onlineeval validate --interleaver path/to/file.py:MyInterleaver --method probabilistic --option tau=3
    onlineeval validate --interleaver onlineeval.interleaving.team_draft:TeamDraft      # the batch API
    onlineeval validate --interleaver my_pkg:MyMultileaver --method team_draft_multileave
    onlineeval validate --log impressions.jsonl --method team_draft --format json
    onlineeval validate --propensity-log logged.jsonl [--rtol 1e-6]   # a counterfactual log's propensities

Prints one row per check naming its statistic (a test's p-value, or violations/total for
exact checks), or with ``--format json`` one JSON document (checks, conventions, verdict,
exit-code semantics). Exit code 0 when every check passes, 1 when a check fails, 2 for
bad input.

A candidate that raises, calls ``sys.exit`` / ``os._exit``, returns malformed output or
takes longer than ``--timeout`` seconds in one call fails the run (exit 1, with a report
naming the call); the same at import is an error naming the module (exit 2). The
command never exits 0 without printing a report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from onlineeval.cli._common import guarded

_FORMATS = ("text", "json")


def _parse_options(option: list[str] | None) -> dict[str, Any]:
    from onlineeval.errors import ConfigError

    out: dict[str, Any] = {}
    for item in option or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(("--option",), f"expected key=value, got {item!r}")
        from simulations.yaml_safe import load_yaml_text

        # 1e9 is a number; 010 and 1:30 are refused (YAML 1.1 reads them as 8 and 90, YAML 1.2 as 10 and text)
        out[key.strip()] = load_yaml_text(value, f"--option {key.strip()}", invalid_as_text=True)
    return out


class ValidateProgress:
    """Progress lines of a validation run on stderr (:mod:`onlineeval.interleaving.validation.progress`): the stage
    running and the impressions through the candidate so far, of the battery's planned total (its share and about
    how long the rest takes at the rate so far: the reference's own work, enumerations and tests, runs between
    the candidate's calls, so the time left is a rough guide), at most one line every 5 seconds and none for a run
    shorter than that (:class:`~onlineeval.cli._progress.ProgressLines`), then a last line."""

    def __init__(self, stream: Any = None, every: float = 5.0, clock: Any = None) -> None:
        from onlineeval.cli._progress import ProgressLines

        self._lines = ProgressLines(stream, every, clock)
        self._stage = ""
        self._calls = 0
        self._total = 0

    def plan(self, total: int) -> None:
        self._total = total

    def stage(self, names: tuple[str, ...], index: int, total: int) -> None:
        self._stage = f"stage {index + 1}/{total}" + (f" ({', '.join(names)})" if names else "")
        self._show(False)

    def calls(self, k: int) -> None:
        self._calls += k
        self._show(False)

    def done(self) -> None:
        self._show(True)

    def _show(self, last: bool) -> None:
        from onlineeval.cli._progress import duration

        def text(spent: float) -> str:
            head = "validate: done" if last else f"validate: {self._stage}"
            done, total = self._calls, self._total
            if last or not total:
                return f"{head}: {done:,} impressions through the candidate's calls, {duration(spent)}"
            left = f", about {duration(spent / done * (total - done))} left" if 0 < done < total else ""
            return (f"{head}: {done:,} of {total:,} impressions through the candidate's calls "
                    f"({100 * done / total:.0f}%), {duration(spent)}{left}")

        self._lines.update(last, text)


class LogProgress:
    """Progress lines of ``validate --log`` on stderr, one task over its passes (:func:`~onlineeval.interleaving.
    validation.read_log`'s bytes, then :func:`~onlineeval.interleaving.validation.validate_log`'s impressions: the
    reference's team probabilities, the checks): at most one line every 5 seconds, each with the pass's share and
    about how long the pass still takes at its rate so far, none for a run shorter than that, then a last line
    (:class:`~onlineeval.cli._progress.ProgressLines`)."""

    _WHAT = {"reading": "reading the log", "reference": "the reference's team probabilities",
             "checking": "checking the impressions"}

    def __init__(self, stream: Any = None, every: float = 5.0, clock: Any = None) -> None:
        from onlineeval.cli._progress import ProgressLines

        self._lines = ProgressLines(stream, every, clock)
        self._clock = self._lines.clock
        self._what = ""
        self._since = self._clock()  # the first pass's start: now (the reading begins)
        self._impressions = 0

    def __call__(self, what: str, done: int, total: int) -> None:
        from onlineeval.cli._progress import duration

        now = self._clock()
        if what != self._what:  # a new pass begins as the previous one's last report comes
            if self._what:
                self._since = now
            self._what = what
        if what != "reading":
            self._impressions = total

        def text(spent: float) -> str:
            if what == "reading":
                amount = f"{done / 1e6:,.1f} of {total / 1e6:,.1f} MB"
            else:
                amount = f"{done:,} of {total:,} impressions"
            share = done / total if total > 0 else 1.0
            left = ""
            if 0 < done < total:
                left = f", about {duration((now - self._since) / done * (total - done))} left in this pass"
            return f"validate: {self._WHAT.get(what, what)}: {amount} ({share:.0%}), {duration(spent)}{left}"

        self._lines.update(False, text)

    def done(self) -> None:
        from onlineeval.cli._progress import duration

        def text(spent: float) -> str:
            return f"validate: done: {self._impressions:,} logged impressions checked, {duration(spent)}"

        self._lines.update(True, text)


def register(app: typer.Typer) -> None:
    """Add the ``validate`` command to the main app."""

    @app.command("validate")
    @guarded
    def validate(
        interleaver: Annotated[str | None, typer.Option(
            "--interleaver", "-i",
            help="Implementation to check: 'package.module:Class' (built without arguments), "
                 "'package.module' (module functions) or 'file.py:Class'. It provides "
                 "interleave(lists, rng) -> (shown, teams) and credit(shown, teams, clicks[, lists]) -> outcome, "
                 "or is an onlineeval Interleaver (batch API).")] = None,
        log: Annotated[Path | None, typer.Option(
            "--log", "-l",
            help="Production log to check instead (JSON lines: rankings, shown, teams, clicks[, outcome]); "
                 "the shown list may be shorter than the rankings (page length = shown length); teams are "
                 "0-based ranker indices (1-based labels are refused naming the line). Team labels are tested "
                 "against each impression's exact reference probabilities (sampled where there are too many "
                 "pick orders to enumerate; the report says which).")] = None,
        propensity_log: Annotated[Path | None, typer.Option(
            "--propensity-log",
            help="A counterfactual log (onlineeval estimate's format, JSON lines, plain or gzipped) whose lines carry "
                 "both the propensities your logger recorded ('propensities') and the logging policy with its "
                 "scores ('logger'): every recorded list, prefix and item propensity is checked against the "
                 "policy's exact one (exact checks; the worst line, the lines off and what the recorded values do "
                 "to an IPS weight).")] = None,
        rtol: Annotated[float, typer.Option(
            "--rtol", help="With --propensity-log: the relative error a recorded propensity may have (default 1e-6; "
                           "float32 logging is within about 6e-8, four significant digits within 5e-4).")] = 1e-6,
        method: Annotated[str, typer.Option(
            "--method", "-m", help="The interleaving method the implementation claims to be; "
                                   "team_draft_multileave and probabilistic_multileave run the multileaving "
                                   "battery (3 and 4 rankers).")] = "team_draft",
        option: Annotated[list[str] | None, typer.Option(
            "--option", "-o", help="Option of the reference method, key=value (repeatable).")] = None,
        n: Annotated[int, typer.Option(
            "--n", help="Impressions per statistical check (default 60000: a 2% bias in the mean random-click "
                        "outcome is detected with power above 0.999, 1% with about 0.8, a 4-point shift in a team "
                        "share of 1/2 with above 0.999 (tested against the reference's exact probabilities), a 0.52 "
                        "team-draft coin in round 1 alone or in round 2 alone with 0.99 already at 20000 "
                        "(coin_no_preference: n impressions per round's coin); the lists of 12-20 documents on a "
                        "10-slot page get as many impressions per scenario as the short ones, on top of n; "
                        "lower it for slow implementations).")] = 60_000,
        alpha: Annotated[float, typer.Option(
            "--alpha", help="Level of the whole battery (split over its statistical checks).")] = 0.01,
        seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
        fmt: Annotated[str, typer.Option(
            "--format", "-f", help="Output: 'text' (a table) or 'json' (one document for CI gates).")] = "text",
        timeout: Annotated[float, typer.Option(
            "--timeout", help="Seconds one call of the candidate (its import, interleave, credit, or one batch "
                              "call) may take before it fails the run (candidate_timeout); 0: no limit. "
                              "POSIX only (SIGALRM).")] = 10.0,
    ) -> None:
        """Run the interleaving validation battery (or check a counterfactual log's recorded propensities) and print
        a report naming every statistic."""
        import os
        import sys

        from onlineeval.errors import ConfigError
        from onlineeval.interleaving.registry import interleaver_class
        from onlineeval.interleaving.validation import (
            CandidateError,
            check_seed,
            check_timeout,
            load_candidate,
            method_spec,
            read_log,
            validate_interleaver,
            validate_log,
        )

        if fmt not in _FORMATS:
            raise ConfigError(("--format",), f"must be one of {', '.join(_FORMATS)}; got {fmt!r}")
        if sum(x is not None for x in (interleaver, log, propensity_log)) != 1:
            raise ConfigError(("validate",), "give exactly one of --interleaver, --log or --propensity-log")
        if propensity_log is None and rtol != 1e-6:
            raise ConfigError(("--rtol",), "applies to --propensity-log only")
        if propensity_log is not None:
            if option:
                raise ConfigError(("--option",), "options of a reference interleaving method do not apply to "
                                                 "--propensity-log (the logger's options are in the log's 'logger')")
            import simulations.policies
            from onlineeval.cli.estimate import PropensityProgress
            from onlineeval.estimators.propensity_check import validate_propensities
            from simulations.policies.settings import propensity_settings

            shown = LogProgress()  # reading the log and its impressions twice, at most a line every 5 s
            try:  # the policy's propensities on every core (the same numbers for any count), with progress lines
                with propensity_settings(os.cpu_count() or 1, PropensityProgress()):
                    report = validate_propensities(propensity_log, simulations.policies, rtol=rtol,
                                                   on_progress=shown)
            except ConfigError as exc:
                raise ConfigError(("--rtol",), exc.message) if exc.key_path == ("rtol",) else exc from None
            finally:
                shown.done()
            typer.echo(report.to_json() if fmt == "json" else report.format())
            raise typer.Exit(report.exit_code)
        try:
            interleaver_class(method)
            method_spec(method)
        except ConfigError as exc:   # name the option the user typed, with the allowed names
            raise ConfigError(("--method",), exc.message) from None
        options = _parse_options(option)
        try:
            check_seed(seed)
            limit = check_timeout(timeout)
            if interleaver is not None:
                cwd = os.getcwd()
                if cwd not in sys.path:
                    sys.path.insert(0, cwd)
                candidate = load_candidate(interleaver, timeout=limit)
                from onlineeval.interleaving.validation.progress import VALIDATION_PROGRESS

                progress = ValidateProgress()
                token = VALIDATION_PROGRESS.set(progress)
                try:
                    report = validate_interleaver(candidate, method, n=n, alpha=alpha, seed=seed, options=options,
                                                  timeout=limit)
                finally:
                    VALIDATION_PROGRESS.reset(token)
                    progress.done()
            elif log is not None:
                from onlineeval.io.digest import InputDigests

                digests = InputDigests({"log": log})  # the file's bytes, hashed while it is read
                shown = LogProgress()
                try:
                    records = read_log(log, on_progress=shown)
                    report = validate_log(records, method, alpha=alpha, seed=seed, options=options,
                                          subject=str(log), source=digests.entries()["log"], on_progress=shown)
                finally:
                    shown.done()
            else:  # pragma: no cover - excluded by the exactly-one check
                raise ConfigError(("validate",), "give exactly one of --interleaver, --log or --propensity-log")
        except CandidateError as exc:   # the candidate failed a call: a failed validation with its report
            if exc.report is None:  # pragma: no cover - the battery always attaches one
                raise
            report = exc.report
        except ConfigError as exc:   # spell the option as the command line does (--n, --alpha, --option tau=...)
            head = exc.key_path[0] if exc.key_path else ""
            if head in ("n", "alpha", "seed", "timeout"):
                raise ConfigError((f"--{head}",), exc.message) from None
            if head == "interleaver" and len(exc.key_path) > 1:
                raise ConfigError(("--option",), f"{exc.key_path[1]}: {exc.message}") from None
            if head == "interleaver":
                raise ConfigError(("--interleaver",), exc.message) from None
            raise
        typer.echo(report.to_json() if fmt == "json" else report.format())
        raise typer.Exit(report.exit_code)
