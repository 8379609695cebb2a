r"""A team's recorded logging propensities checked against its logging policy (``onlineeval validate
--propensity-log``).

Off-policy estimates are only as right as the propensities in the log: a logger that records the item marginal as
the list probability, forgets the temperature, renormalises over the shown documents only, or rounds to a few
digits biases every IPS-family estimate, and nothing in the estimates shows it (their weights still look
plausible). Where the log's lines carry both what the production logger recorded (``propensities``: ``list``,
``prefix``, ``item``, any of them) and the logging policy with its scores (``logger``, the format of
``onlineeval estimate``'s logs), every recorded value is compared with the policy's exact one, computed as
``estimate`` computes it (:mod:`simulations.policies`: closed forms, Plackett-Luce's subset dynamic programme or its
exponential-race quadrature; no enumeration). Each form is an exact check (a count of violations, no sampling
error): a value is a violation where :math:`|p_{\mathrm{rec}} / p - 1| > \mathrm{rtol}`, with ``p`` the policy's.
The report names the worst line and slot, how many slots of each rank are off, and the factor the recorded values
put on the weights (:math:`p / p_{\mathrm{rec}}`: its mean, smallest and largest over the shown slots, the weight
an IPS-family estimator gives those impressions relative to the right one). A Plackett-Luce logger whose item
marginals are a Monte Carlo estimate (``item_method: monte_carlo``) leaves its queries' item propensities
unchecked (said in the row; the default quadrature is exact).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from onlineeval.errors import InputError

__all__ = ["DEFAULT_RTOL", "FORMS_CHECKED", "PROGRESS_EVERY", "Progress", "check_form", "read_both",
           "validate_propensities"]

#: the relative tolerance of a recorded propensity (float32 logging is within about 6e-8)
DEFAULT_RTOL = 1e-6

#: the propensity forms, by their key in the log and their :class:`~onlineeval.estimators.LoggedData` attribute
FORMS_CHECKED = (("list", "p_list"), ("prefix", "p_prefix"), ("item", "p_item"))

#: lines between two calls of a caller's ``on_progress(what, done, total)``
PROGRESS_EVERY = 20_000

#: ``on_progress(what, done, total)``: "reading" (characters of the log), then each reading of its impressions
Progress = Callable[[str, int, int], None] | None


def _lines(path: str, on_progress: Progress = None) -> list[tuple[int, dict[str, Any]]]:
    """The file's impressions with their 1-based line numbers (blank lines skipped), each holding both
    ``propensities`` and ``logger``."""
    from onlineeval.io.logged import _decode, _gunzipped, decoded_lines

    raw = _gunzipped(path)
    if raw is None:
        if not Path(path).is_file():
            raise InputError("not a file" if Path(path).exists() else "no such file", path)
        raw = Path(path).read_bytes()
    text = _decode(path, raw)
    n_lines = text.count("\n") + 1
    out = []
    for number, obj in decoded_lines(path, text):  # as read_logged decodes them
        if on_progress is not None and number % PROGRESS_EVERY == 0:  # characters, by the share of lines read
            on_progress("reading", len(text) * number // n_lines, len(text))
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object (one impression), got {type(obj).__name__}", path, number)
        missing = [key for key in ("propensities", "logger") if key not in obj]
        if missing:
            raise InputError(f"missing {' and '.join(repr(m) for m in missing)}: checking a log's propensities "
                             "needs on every line both what the logger recorded ('propensities') and the logging "
                             "policy with its scores ('logger')", path, number)
        out.append((number, obj))
    if not out:
        raise InputError("the log is empty (no impressions)", path)
    if on_progress is not None:
        on_progress("reading", len(text), len(text))
    return out


def read_both(path: str | os.PathLike[str], policies: Any,
              on_progress: Progress = None) -> tuple[tuple[Any, np.ndarray], tuple[Any, np.ndarray], np.ndarray]:
    """``((recorded, order), (policy, order), lines)``: the log read twice, as
    :func:`~onlineeval.io.logged.read_logged` reads it, once with the recorded ``propensities`` and once with the
    ``logger`` (the policy's exact propensities of the same shown lists), each a
    :class:`~onlineeval.io.logged.LoggedLog` with the order that puts its impressions in the file's order, and each
    impression's line. Errors name the file and line; ``on_progress`` as :data:`Progress`."""
    from onlineeval.io.logged import logged_from_records

    name = str(path)
    rows = _lines(name, on_progress)
    lines = np.array([number for number, _ in rows], dtype=np.int64)
    views = []
    for drop, what in (("logger", "the recorded propensities"), ("propensities", "the policy's propensities")):
        def records(drop: str = drop, what: str = what) -> Any:
            if on_progress is not None:  # the pass begins (its rate is measured from here)
                on_progress(what, 0, len(rows))
            for i, (_, obj) in enumerate(rows, start=1):
                if on_progress is not None and (i % PROGRESS_EVERY == 0 or i == len(rows)):
                    on_progress(what, i, len(rows))
                yield {k: v for k, v in obj.items() if k != drop}

        try:
            log = logged_from_records(records(), policies if drop == "propensities" else None, name)
        except InputError as exc:  # its line is the record's position: the file's line instead
            raise InputError(exc.message, name, int(lines[exc.line - 1]) if exc.line else None) from None
        order = np.argsort(log.lines, kind="stable")
        if not np.array_equal(log.lines[order], np.arange(1, lines.size + 1)):  # pragma: no cover - one per record
            raise InputError("the log's impressions could not be matched line by line", name)
        views.append((log, order))
    (rec, rec_order), (pol, pol_order) = views
    return (rec, rec_order), (pol, pol_order), lines


def check_form(form: str, recorded: np.ndarray, exact: np.ndarray, shown: np.ndarray, lines: np.ndarray,
               rtol: float, unchecked: np.ndarray | None = None) -> dict[str, Any]:
    """One form's comparison: ``recorded`` and ``exact`` ``(n,)`` or ``(n, k)`` in the file's order, ``shown``
    ``(n, k)`` which slots hold a document, ``lines`` each impression's line, ``unchecked`` ``(n,)`` impressions
    left out (Monte Carlo item marginals). Returns the violations, the values compared, the worst one (line, slot,
    recorded, exact, relative error), the violations per slot and the weight factor's mean, smallest and largest."""
    rec = np.asarray(recorded, dtype=np.float64)
    ex = np.asarray(exact, dtype=np.float64)
    mask = np.ones(rec.shape, dtype=bool) if rec.ndim == 1 else np.asarray(shown, dtype=bool).copy()
    if unchecked is not None:
        mask[np.asarray(unchecked, dtype=bool)] = False
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(ex > 0, np.abs(rec / ex - 1.0), np.inf)
        factor = np.where(rec > 0, ex / rec, np.inf)
    rel = np.where(mask, rel, 0.0)
    bad = mask & (rel > rtol)
    out: dict[str, Any] = {"form": form, "violations": int(bad.sum()), "total": int(mask.sum()),
                           "impressions": int(bad.reshape(bad.shape[0], -1).any(axis=1).sum()),
                           "unchecked": int(np.count_nonzero(unchecked)) if unchecked is not None else 0}
    if out["total"]:
        f = factor[mask]
        out["weight_factor"] = (float(f.mean()), float(f.min()), float(f.max()))
        flat = int(np.argmax(rel))
        row, slot = np.unravel_index(flat, rel.shape) if rel.ndim == 2 else (flat, 0)
        out["worst"] = {"line": int(lines[row]), "slot": int(slot) + 1, "recorded": float(rec[row, slot] if
                        rec.ndim == 2 else rec[row]), "exact": float(ex[row, slot] if ex.ndim == 2 else ex[row]),
                        "relative_error": float(rel.flat[flat])}
        if rel.ndim == 2:
            out["violations_by_slot"] = bad.sum(axis=0).astype(int).tolist()
        first = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1))
        out["first_lines"] = [int(lines[i]) for i in first[:5]]
    return out


def _message(res: dict[str, Any], rtol: float) -> str:
    """The check's detail: how many values are off, the worst one, the weight factor and where to look."""
    if not res["total"]:
        return "no value to compare" + (f"; {res['unchecked']} impressions unchecked: their queries' item marginals "
                                        "are a Monte Carlo estimate (item_method: monte_carlo; the default "
                                        "quadrature is exact)" if res["unchecked"] else "")
    w = res["worst"]
    where = f"line {w['line']}" + (f", slot {w['slot']}" if res["form"] != "list" else "")
    mean, low, high = res["weight_factor"]
    if res["violations"]:
        head = (f"{res['violations']} of {res['total']} values beyond relative error {rtol:g} "
                f"({res['impressions']} impressions; largest")
    else:
        head = f"all {res['total']} values within relative error {rtol:g} (largest"
    text = (f"{head} {w['relative_error']:.3g} at {where}: recorded {w['recorded']:.6g}, the policy's "
            f"{w['exact']:.6g}); weight factor policy / recorded: mean {mean:.6g}, range {low:.6g} to {high:.6g}")
    if res["violations"]:
        text += f"; first lines off: {', '.join(map(str, res['first_lines']))}"
        by_slot = res.get("violations_by_slot")
        if by_slot:
            text += "; off per slot: " + ", ".join(f"{j + 1}: {v}" for j, v in enumerate(by_slot) if v)
    if res["unchecked"]:
        text += (f"; {res['unchecked']} impressions unchecked: their queries' item marginals are a Monte Carlo "
                 "estimate (item_method: monte_carlo; the default quadrature is exact)")
    return text


def validate_propensities(path: str | os.PathLike[str], policies: Any, *, rtol: float = DEFAULT_RTOL,
                          on_progress: Progress = None) -> Any:
    """The :class:`~onlineeval.interleaving.validation.report.ValidationReport` of a log's recorded propensities
    against its logging policy's exact ones (module docstring): one exact check per form (``SKIPPED`` where the
    log records none of it), with the inputs' digest and fingerprint. ``policies``: the logging-policy package
    (:mod:`simulations.policies`, as :func:`~onlineeval.io.logged.read_logged` takes it); ``on_progress`` as
    :data:`Progress`."""
    from onlineeval.interleaving.validation.report import FAIL, PASS, SKIPPED, CheckResult, ValidationReport, stamped
    from onlineeval.io.digest import input_entry

    if isinstance(rtol, bool) or not (isinstance(rtol, (int, float)) and rtol >= 0 and np.isfinite(rtol)):
        from onlineeval.errors import ConfigError

        raise ConfigError(("rtol",), f"must be a finite number >= 0; got {rtol!r}")
    (rec, ro), (pol, po), lines = read_both(path, policies, on_progress)
    shown = rec.data.shown[ro] >= 0
    checks = []
    for form, attr in FORMS_CHECKED:
        recorded, exact = getattr(rec.data, attr), getattr(pol.data, attr)
        name = f"{form}_propensities"
        if recorded is None:
            checks.append(CheckResult(name, SKIPPED, "violations/total", None, f"the log records no {form} "
                                      "propensities", exact=True, rule="skipped"))
            continue
        if exact is None:  # Monte Carlo item marginals read as 0 (the reader withholds the form)
            why = pol.item_refusal[0] if pol.item_refusal else "the policy gives no item propensities"
            checks.append(CheckResult(name, SKIPPED, "violations/total", None, f"not checked: {why}", exact=True,
                                      rule="skipped"))
            continue
        unchecked = None
        if form == "item":
            exact_q = pol.data.logger.marginals_exact(pol.data.query[po])
            unchecked = ~np.asarray(exact_q, dtype=bool) if not np.all(exact_q) else None
        res = check_form(form, recorded[ro], exact[po], shown, lines, rtol, unchecked)
        if not res["total"]:  # every query's item marginals a Monte Carlo estimate: nothing compared
            checks.append(CheckResult(name, SKIPPED, "violations/total", None, "not checked: "
                                      + _message(res, rtol).split("; ", 1)[1], exact=True, rule="skipped",
                                      counts={"unchecked": res["unchecked"]}))
            continue
        checks.append(CheckResult(name, FAIL if res["violations"] else PASS, "violations/total",
                                  float(res["violations"]), _message(res, rtol), exact=True,
                                  counts={"violations": res["violations"], "total": res["total"],
                                          "impressions": res["impressions"], "unchecked": res["unchecked"]}))
    policy = "; ".join(pol.data.logger.describe())
    conventions = (
        ("policy", policy),
        ("compared", f"each recorded propensity with the policy's exact one for the same shown list (as onlineeval "
                     f"estimate computes it), a violation where |recorded / exact - 1| > {rtol:g}"),
        ("weight factor", "policy / recorded: what the recorded values do to an IPS-family weight (1: right)"),
    )
    report = ValidationReport(str(path), "logging policy", tuple(checks), 0.0, conventions, mode="propensities")
    return stamped(report, {"log": input_entry(path)}, {"rtol": rtol, "check": "propensities"})
