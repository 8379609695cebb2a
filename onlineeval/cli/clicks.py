"""`onlineeval clicks`: fit click models to logs and compare them on held-out sessions.

Models (:data:`FIT_MODELS`, the one list help, errors and the README use): gctr (= random,
rcm), rctr, dctr, cm (= cascade, cascade_model), dcm, sdbn, pbm, ubm, dbn, ccm; the
``simulate`` names rbp and metric have no estimator.

``onlineeval clicks fit --log F --model ubm --out params.json`` writes the fitted
parameters as JSON (model name, format version, conventions, parameters, fit trace);
``onlineeval clicks evaluate --log F --models pbm,ubm,dbn [--test-log G]`` prints a table of
log-likelihood, perplexity and conditional perplexity (lower perplexity is better).
dcm and sdbn are fitted by EM, the maximum likelihood, by default; ``--method closed_form`` (``fit``) or
``dcm:closed_form`` (``evaluate``) gives their last-click closed form, biased on data from the model itself
(:mod:`clickmodels.estimation`). ``fit`` prints which estimator it used and saves it (``fit.estimator``);
``fit --bootstrap N`` (dcm, sdbn, dbn, ccm, pbm, ubm) adds per-session bootstrap standard errors
(:mod:`clickmodels.estimation.bootstrap`).
Log formats (``--format``): ``tsv``, ``jsonl`` (documented in :mod:`clickmodels.logs`),
``yandex`` and ``parquet``; by default chosen from the file suffix (``.tsv``, ``.jsonl``), Parquet from its
first bytes, else yandex.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from onlineeval.cli._common import guarded
from onlineeval.cli._progress import CountProgress, ProgressLines
from onlineeval.click_fits import (  # shared with the Python API (onlineeval.api._clicks), importable from here
    FIT_MODELS,
    MAX_REFITS,
    MODEL_LIST,
    NOT_FITTED,
    PRINTED_CONVENTIONS,
    ModelRequest,
    check_bootstrap,
    check_method,
    em_lists,
    evaluate_conventions,
    evaluate_options,
    fit_models,
    fit_name,
    fit_options,
    resolve_models,
    same_file,
)

_FORMAT_HELP = ("Log format: tsv, jsonl, yandex or parquet (default: from the suffix, Parquet from its first "
                "bytes, else yandex).")

def _translation_note(name: str) -> str:
    """``cascade -> cm (cascade model: ...)`` when a name other than the estimator's was given."""
    key = fit_name(name, "--model")
    if name.strip().lower() == key:
        return ""
    return f"{name} -> {key} ({FIT_MODELS[key][0]})"


def _read(path: Path, fmt: Optional[str]):  # type: ignore[no-untyped-def]
    from clickmodels.logs import read_click_log

    return read_click_log(path, fmt)  # type: ignore[arg-type]


_PLAIN_EM_HELP = ("EM: plain EM, one E-step and M-step per iteration (default: SQUAREM-accelerated EM, the same "
                  "maximum in fewer E-steps and far nearer it where the likelihood is flat).")


def _check_options(
    max_iter: Optional[int] = None,
    tol: Optional[float] = None,
    pseudo: Optional[float] = None,
    test_fraction: Optional[float] = None,
) -> None:
    """Refuse bad numeric options up front (before any log is read), naming the option."""
    from onlineeval.errors import ConfigError

    if max_iter is not None and max_iter < 1:
        raise ConfigError(("--max-iter",), f"must be an integer >= 1, got {max_iter}")
    if tol is not None and not (tol >= 0 and math.isfinite(tol)):
        raise ConfigError(("--tol",), f"must be a finite number >= 0 (relative change of the training LL), got {tol}")
    if pseudo is not None and not (pseudo >= 0 and math.isfinite(pseudo)):
        raise ConfigError(("--pseudo",), f"must be a finite number >= 0 (Beta(a, a) pseudo-count; 0 = plain MLE), "
                          f"got {pseudo}")
    if test_fraction is not None and not 0 < test_fraction < 1:
        raise ConfigError(("--test-fraction",), f"must be in (0, 1), got {test_fraction}")


def _check_fit_options(model: str, method: Optional[str], out: Path) -> None:
    """``--model``, ``--method`` and ``--out`` checked before the log is read and fitted."""
    from onlineeval.errors import ConfigError, must_be_one_of

    key = fit_name(model, "--model")
    if method not in (None, "closed_form", "em"):
        raise ConfigError(("--method",), must_be_one_of(("closed_form", "em"), method))
    check_method(key, method, "--method")
    if not out.parent.is_dir():
        raise ConfigError(("--out",), f"cannot write {out}: directory {out.parent} does not exist")


def _uses_em(name: str, method: Optional[str]) -> bool:
    from clickmodels.estimation import EM_MODELS, EM_OPTIONAL

    key = fit_name(name, "--model")
    return key in EM_MODELS or method == "em" or (method is None and key in EM_OPTIONAL)


def _em_options(
    max_iter: Optional[int],
    tol: Optional[float],
    pseudo: Optional[float],
    name: str,
    method: Optional[str] = None,
    strict: bool = False,
    progress: bool = False,
    plain_em: bool = False,
) -> dict:
    """Keyword options of ``fit_log``; with ``strict``, EM options for a closed-form fit
    are an error naming the option (``evaluate`` applies them to its EM models only);
    with ``progress``, an EM fit reports its iterations on stderr (:class:`FitProgress`); ``plain_em``: plain EM
    instead of SQUAREM-accelerated EM (``--plain-em``)."""
    from clickmodels.estimation.base import EMOptions
    from onlineeval.errors import ConfigError

    opts: dict = {"pseudo": pseudo} if pseudo is not None else {}
    if method is not None:
        opts["method"] = method
    if _uses_em(name, method):
        if max_iter is not None:
            opts["max_iter"] = max_iter
        if tol is not None:
            opts["tol"] = tol
        if plain_em:
            opts["accelerate"] = False
        if progress:
            opts["on_iteration"] = FitProgress(name, EMOptions().tol if tol is None else tol)
    elif strict:
        for option, value in (("--max-iter", max_iter), ("--tol", tol), ("--plain-em", True if plain_em else None)):
            if value is not None:
                raise ConfigError(
                    (option,), f"{name} is fitted in closed form; EM options apply to {em_lists()[0]} "
                    f"and to {em_lists()[1]} (unless --method closed_form)"
                )
    return opts


class RefitProgress(CountProgress):
    """``clicks fit --bootstrap``'s progress on stderr: a line at most every :attr:`EVERY` seconds and the last, e.g.
    ``bootstrap: dbn fitted again on resampled sessions: 37/200 refits, 1m02s, about 4m34s left``; a bootstrap
    shorter than that prints nothing (:class:`~onlineeval.cli._progress.CountProgress`)."""

    prefix = "bootstrap: "
    unit = " refits"
    #: seconds between lines
    EVERY = 5.0

    def __init__(self, stream: Any = None, clock: Callable[[], float] | None = None) -> None:
        super().__init__(stream, self.EVERY, clock)


class FitProgress(ProgressLines):
    """EM progress of one fit on stderr.

    On a terminal, rich's live bar over the iteration budget (``max_iter``) with the
    log-likelihood, its relative change (EM stops once it is below ``tol``), elapsed time and
    ``ETA <=`` the time left at the current rate if EM ran to ``max_iter`` (an upper bound: it
    stops earlier once it converges). Off a terminal, a line at most every ``every`` seconds and the last,
    e.g. ``fitting dbn: EM iteration 37/200, log-likelihood -123456.7891, relative change
    3.2e-06 (stops below 1e-09), 12s``; a fit shorter than ``every`` seconds prints nothing
    (:class:`~onlineeval.cli._progress.ProgressLines`).
    """

    def __init__(self, label: str, tol: float, stream: Any = None, every: float = 5.0,
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__(stream, every, clock)
        self.label, self.tol = label, tol
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._bar: Any = None

    def _text(self, iteration: int, max_iter: int, ll: float, change: float | None) -> str:
        rel = "-" if change is None else f"{change:.1e}"
        return (f"EM iteration {iteration}/{max_iter}, log-likelihood {ll:.4f}, relative change {rel} "
                f"(stops below {self.tol:g})")

    def __call__(self, iteration: int, max_iter: int, ll: float, change: float | None) -> None:
        last = iteration >= max_iter or (change is not None and change <= self.tol)
        if self._tty:
            self._live(iteration, max_iter, ll, change, last)
            return
        self.update(last, lambda spent: f"fitting {self.label}: {self._text(iteration, max_iter, ll, change)}, "
                                        f"{spent:.0f}s")

    def _live(self, iteration: int, max_iter: int, ll: float, change: float | None, last: bool) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn(f"fitting {self.label}"), BarColumn(bar_width=10), MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TextColumn("ETA <="), TimeRemainingColumn(),
                console=Console(file=self._stream), get_time=self._clock,
            )
            self._bar.add_task("em", total=max_iter, completed=0, info="")
            self._bar.start()
        task = self._bar.task_ids[0]
        rel = "-" if change is None else f"{change:.1e}"
        self._bar.update(task, completed=iteration, total=max_iter, info=f"LL {ll:.4f} change {rel}")
        if last:
            self._bar.stop()
            self._bar = None


def fit_command(
    log: Annotated[Path, typer.Option("--log", help="Click log to fit on.")],
    model: Annotated[str, typer.Option("--model", help=f"Model: {MODEL_LIST}.")],
    out: Annotated[Path, typer.Option("--out", help="Where to write the fitted parameters (JSON).")],
    format: Annotated[Optional[str], typer.Option("--format", help=_FORMAT_HELP)] = None,
    max_iter: Annotated[Optional[int], typer.Option("--max-iter", help="EM: maximum E-steps (default 1000).")] = None,
    tol: Annotated[Optional[float], typer.Option("--tol", help="EM: relative LL change to stop (default 1e-9).")] = (
        None),
    plain_em: Annotated[bool, typer.Option("--plain-em", help=_PLAIN_EM_HELP)] = False,
    pseudo: Annotated[Optional[float], typer.Option("--pseudo", help="Beta(a, a) pseudo-count of estimates.")] = None,
    method: Annotated[
        Optional[str], typer.Option("--method", help="em or closed_form (dcm, sdbn: both; default em, the "
                                    "maximum likelihood; closed_form is the last-click approximation, biased).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No EM progress on stderr.")] = False,
    bootstrap: Annotated[
        Optional[int], typer.Option("--bootstrap", help="dcm, sdbn, dbn, ccm, pbm, ubm: standard errors from this "
                                    "many per-session bootstrap refits (saved under standard_errors; pbm, ubm: of the "
                                    "values on the rank-1 scale, saved with them).")
    ] = None,
    seed: Annotated[
        Optional[int], typer.Option("--seed", min=0, help="Seed of the --bootstrap resamples (default 0).")
    ] = None,
) -> None:
    """Fit one click model to a log and save its parameters as JSON."""
    import json

    from clickmodels.estimation import fit_log
    from clickmodels.estimation.bootstrap import bootstrap_se
    from dataclasses import replace

    from onlineeval.io.digest import InputDigests, fingerprint

    _check_fit_options(model, method, out)
    _check_options(max_iter, tol, pseudo)
    _em_options(max_iter, tol, pseudo, model, method, strict=True, plain_em=plain_em)  # errors before reading
    check_bootstrap(fit_name(model, "--model"), bootstrap, seed, "--bootstrap", "--seed")
    digests = InputDigests({"log": log})  # hashed while the log is read and fitted
    data = _read(log, format)
    note = _translation_note(model)
    result = fit_log(fit_name(model, "--model"), data,
                     **_em_options(max_iter, tol, pseudo, model, method, strict=True, progress=not quiet,
                                   plain_em=plain_em))
    boot = None
    inputs = digests.entries()
    options = fit_options(fit_name(model, "--model"), format, max_iter, tol, pseudo, method, plain_em, bootstrap, seed)
    result = replace(result, provenance={"inputs": inputs, "options": options,
                                         "fingerprint": fingerprint(inputs, options)})
    if bootstrap is not None:
        boot = bootstrap_se(fit_name(model, "--model"), data, result, n_boot=bootstrap, seed=seed or 0,
                            progress=None if quiet else RefitProgress(),
                            **_em_options(max_iter, tol, pseudo, model, method, strict=True, plain_em=plain_em))
        result = replace(result, standard_errors=boot)  # saved under standard_errors
    doc = result.to_dict()
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    if note:
        typer.echo(f"model: {note}")
    dropped = data.dropped_note(log)
    if dropped:
        typer.echo(dropped)
    tr = result.trace
    if tr.method != "closed_form":
        steps = (f"SQUAREM-accelerated, {tr.iterations} E-steps" if tr.accelerated else
                 f"{tr.iterations} iterations")
        how = (f"EM, the maximum likelihood, {steps}, "
               f"{'converged' if tr.converged else 'NOT converged (raise --max-iter)'}")
    elif result.is_mle:  # the CTR baselines', CM's closed forms
        how = "closed form"
    else:  # dcm, sdbn with --method closed_form
        how = ("closed form: last-click approximation, not the MLE, biased on data from the model itself; "
               "without --method closed_form the fit is EM, the maximum likelihood")
    typer.echo(
        f"{result.name}: fitted on {data.n_sessions} sessions ({how}; Beta(a, a) smoothing, a = {tr.pseudo:g}); "
        f"train log-likelihood {tr.log_likelihood[-1]:.4f} (sum over {data.n_sessions} sessions, natural log); "
        f"wrote {out}"
    )
    typer.echo(f"inputs (SHA-256, first 12 hex digits; {out.name} holds them in full): log "
               f"{inputs['log']['sha256'][:12]}; fingerprint: {result.provenance['fingerprint']} (of the log's "
               "SHA-256, the model "
               "and fit options, and the version)")
    if boot is not None:
        typer.echo(f"standard errors (per-session bootstrap, {boot.n_boot} replicates, seed {boot.seed}): "
                   f"{boot.summary()}")
        if boot.undefined_note():
            typer.echo(f"note (standard errors): {boot.undefined_note()}"
                       + (f"; the log has {data.n_sessions} session, so every replicate is the log itself"
                          if data.n_sessions < 2 else ""))
    for key, text in result.notes().items():
        typer.echo(f"note ({key}): {text}")


def evaluate_command(
    log: Annotated[Path, typer.Option("--log", help="Training click log.")],
    models: Annotated[
        str,
        typer.Option(
            "--models",
            help=f"Comma-separated models ({MODEL_LIST}; dcm and sdbn are fitted by EM, name:closed_form for "
            "their biased last-click closed form) and/or fitted params .json files.",
        ),
    ] = "rctr,pbm,ubm,dbn",
    test_log: Annotated[
        Optional[Path], typer.Option("--test-log", help="Held-out log (default: a random split of --log).")
    ] = None,
    test_fraction: Annotated[float, typer.Option("--test-fraction", help="Share held out without --test-log.")] = 0.25,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the random split.")] = 0,
    format: Annotated[Optional[str], typer.Option("--format", help=_FORMAT_HELP)] = None,
    test_format: Annotated[
        Optional[str], typer.Option("--test-format", help="Format of --test-log (default: --format).")
    ] = None,
    max_iter: Annotated[Optional[int], typer.Option("--max-iter", help="EM: maximum E-steps.")] = None,
    tol: Annotated[Optional[float], typer.Option("--tol", help="EM: relative LL change to stop.")] = None,
    plain_em: Annotated[bool, typer.Option("--plain-em", help=_PLAIN_EM_HELP)] = False,
    by_rank: Annotated[bool, typer.Option("--by-rank", help="Also print perplexity per rank.")] = False,
    csv: Annotated[Optional[Path], typer.Option("--csv", help="Also write the full table as CSV.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No EM progress on stderr.")] = False,
) -> None:
    """Fit models on a log and compare them on held-out sessions."""
    import numpy as np
    import pandas as pd

    from clickmodels.evaluation import compare
    from clickmodels.logs import train_test_split
    from onlineeval.errors import ConfigError
    from onlineeval.io.digest import InputDigests, fingerprint

    requests = resolve_models(models, "--models")
    _check_options(max_iter, tol, None, test_fraction if test_log is None else None)
    refit = [r for r in requests if r.path is None]
    if (max_iter is not None or tol is not None) and not any(_uses_em(r.base, r.method) for r in refit):
        option = "--max-iter" if max_iter is not None else "--tol"
        raise ConfigError(
            (option,), f"no model in --models is fitted by EM ({em_lists()[0]}, {em_lists()[1]} "
            "without ':closed_form'); drop the option"
        )
    if csv is not None and not csv.parent.is_dir():
        raise ConfigError(("--csv",), f"cannot write {csv}: directory {csv.parent} does not exist")
    # the training log as its own test (the file or a copy): in-sample figures for the models fitted on it
    in_sample = test_log is not None and bool(refit) and same_file(log, test_log)
    files: dict[str, Path] = {"log": log, **({"test_log": test_log} if test_log is not None else {})}
    files.update({f"model {r.given}": r.path for r in requests if r.path is not None})
    digests = InputDigests(files)  # hashed while the logs are read and the models fitted
    train = _read(log, format)
    dropped = [train.dropped_note(log)]
    if test_log is None:
        train, test = train_test_split(train, test_fraction, np.random.default_rng(seed))
    else:
        test = _read(test_log, test_format or format)
        dropped.append(test.dropped_note(test_log))
    fits = fit_models(requests, train,
                      lambda r: _em_options(max_iter, tol, None, r.base, r.method, progress=not quiet,
                                            plain_em=plain_em))
    table = compare(fits, test, on_error="row")
    inputs = digests.entries()
    options = evaluate_options([r.given for r in requests], format, test_format, test_log is not None, test_fraction,
                               seed, max_iter, tol, plain_em)
    fp = fingerprint(inputs, options)
    table["log_sha256"] = inputs["log"]["sha256"]
    table["test_log_sha256"] = inputs["test_log"]["sha256"] if test_log is not None else ""
    saved = {label: inputs[f"model {r.given}"]["sha256"] for r, label in zip(requests, fits, strict=True) if r.path}
    table["model_sha256"] = [saved.get(label, "") for label in table.index]  # a saved fit's file; refitted: none
    table["fingerprint"] = fp
    refused = {label: why for label, why in table.get("refused", pd.Series(dtype=str)).items() if why}
    if len(refused) == len(table):
        from onlineeval.errors import InputError

        raise InputError("no model could score the test log: " + "; ".join(f"{m}: {w}" for m, w in refused.items()),
                         str(test_log) if test_log is not None else str(log))
    if csv is not None:
        try:
            table.to_csv(csv)
        except OSError as exc:
            raise ConfigError(("--csv",), f"cannot write {csv}: {exc.strerror or exc}") from None
    cols = ["log_likelihood", "perplexity", "conditional_perplexity"]
    if by_rank:
        cols += [c for c in table.columns if c.startswith("perplexity@")]
    from clickmodels.estimation.base import PROB_EPS

    split = (IN_SAMPLE.format(test=test_log, train=log) if in_sample else f"held-out log {test_log}") \
        if test_log is not None else f"random split of {log}, {test_fraction:.0%} of sessions held out (seed {seed})"
    typer.echo(f"train: {train.n_sessions} sessions, test: {test.n_sessions} sessions ({split})")
    shown = [("test log" if key == "test_log" else key, entry) for key, entry in inputs.items()]
    typer.echo("inputs (SHA-256, first 12 hex digits; --csv: in full): "
               + ", ".join(f"{label} {e['sha256'][:12]}" for label, e in shown)
               + f"; fingerprint: {fp} (of the inputs' SHA-256, the models, split and fit options, and the version)")
    for line in dropped:
        if line:
            typer.echo(line)
    notes = [_translation_note(r.base) for r in refit]
    if any(notes):
        typer.echo("models: " + "; ".join(n for n in notes if n))
    conventions = evaluate_conventions(fits)
    typer.echo("conventions: " + "; ".join(conventions[k] for k in PRINTED_CONVENTIONS))
    approx = [label for label, f in fits.items() if not f.is_mle]
    if approx:
        typer.echo(f"estimators: {', '.join(approx)}: closed form, the last-click approximation (not the MLE, "
                   "biased on data from the model itself; the name without ':closed_form' is the "
                   "maximum-likelihood EM fit)")
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        typer.echo(table[cols].to_string(float_format=lambda v: f"{v:.4f}", na_rep="refused"))
    for label, why in refused.items():
        typer.echo(f"{label}: refused, cannot score the test log: {why}")
    for label, row in table.iterrows():
        if not refused.get(label) and row["n_clipped"] > 0:
            typer.echo(f"{label}: {int(row['n_clipped']):,} of {int(row['n_sessions']):,} test sessions have clicks "
                       f"the model gives probability 0 (clipped at {PROB_EPS:g}: log-likelihood "
                       f"{math.log(PROB_EPS):.2f} per such click or skip)")
    for label, fitted in fits.items():
        trace = fitted.trace
        if trace.iterations and not trace.converged:
            steps = "E-steps" if trace.accelerated else "iterations"
            typer.echo(f"warning: {label}: EM stopped after {trace.iterations} {steps} without converging "
                       "(raise --max-iter or --tol)", err=True)
    if refused:
        typer.echo(f"warning: {len(refused)} of {len(table)} models not scored ({', '.join(refused)}): see their "
                   "rows", err=True)
    if in_sample:
        typer.echo(f"warning: --test-log {test_log} is the training log: the figures of the models fitted on it are "
                   "in-sample, not held out", err=True)


#: the split line of clicks evaluate when --test-log is the training log (its figures are not held out)
IN_SAMPLE = ("test log {test}: the training log --log {train} itself, so the figures of the models fitted on it are "
             "in-sample, not held out (give a log of other sessions, or leave --test-log out for a random split)")


def register(app: typer.Typer) -> None:
    """Add the ``clicks`` sub-app (``fit``, ``evaluate``) to the main app."""
    clicks = typer.Typer(
        name="clicks",
        help="Click models on logs: fit parameters, compare models on held-out sessions.",
        no_args_is_help=True,
    )
    clicks.command("fit")(guarded(fit_command))
    clicks.command("evaluate")(guarded(evaluate_command))
    app.add_typer(clicks, name="clicks")
