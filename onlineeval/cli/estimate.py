r"""``onlineeval estimate``: off-policy estimates of rankers' online metrics from a real click log.

Example::

    onlineeval estimate --log logged.jsonl --target B.run --target C.run --baseline A.run \
        --estimator ips,snips --metric reciprocal_rank --bootstrap 2000 --seed 7 --format json

The log holds impressions of a randomised logging policy with their logging propensities
(or the policy and its scores), one JSON object per line (format in
:mod:`onlineeval.io.logged`) or one row of a Parquet file
(:mod:`onlineeval.io.logged_parquet`). Each target is a TREC run or a score file (``query doc score`` lines): its
list for a query is its top ``k`` documents under the tie rule, ``k`` the length of the log's lists for that
query.
For every estimator and target the command prints the estimate of

.. math::

    V(\pi) = \mathbb E_q\,\mathbb E_{\mathbf s\sim\pi(q)}\,\mathbb E[R \mid q, \mathbf s]

(the metric ``R`` per impression; :mod:`onlineeval.estimators.base`) with its CLT interval
(delta method over clusters: users, or impressions without user ids), an optional cluster
bootstrap interval, the weight diagnostics and the estimator's assumption; with
``--baseline`` also each target minus the baseline, paired on the same impressions: with
cluster sums :math:`x^T_g, y^T_g` (numerators and denominators of the estimator's ratio
for target ``T``) and influence values :math:`e^T_g = (x^T_g - \hat R_T\, y^T_g)/\bar y^T`
(:func:`onlineeval.stats.ratio_linearization`),

.. math::

    \widehat{\Delta} = \hat R_T - \hat R_A, \qquad
    \widehat{\operatorname{Var}}(\widehat\Delta) = \frac{1}{G(G-1)} \sum_{g=1}^G
        (d_g - \bar d)^2, \quad d_g = e^T_g - e^A_g

(the delta method of Deng, Knoblich and Lu 2018 for two ratios on the same clusters; the
covariance of the two estimates enters through :math:`d_g`). Intervals and p-values take t with Bell and
McCaffrey's degrees of freedom of these variances (:func:`onlineeval.estimators.intervals.working_df`; ``df`` in
every record). Bad input gives one line
naming the file and line, exit code 2.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from onlineeval.cli._common import fixed, guarded
from onlineeval.cli._progress import CountProgress

if TYPE_CHECKING:  # pragma: no cover

    from onlineeval.io.logged import LoggedLog, TargetMap

FORMATS = ("table", "json")


# ------------------------------------------------------------------------------ options
def parse_options(option: list[str] | None, names: list[str]) -> dict[str, dict[str, Any]]:
    """``--option estimator.key=value`` (value parsed as YAML) -> ``{estimator: {key: value}}``."""
    from onlineeval.errors import ConfigError
    from simulations.yaml_safe import load_yaml_text

    out: dict[str, dict[str, Any]] = {name: {} for name in names}
    for item in option or []:
        left, sep, value = item.partition("=")
        name, dot, key = left.strip().partition(".")
        if not sep or not dot or not name or not key:
            raise ConfigError(("--option",), f"expected estimator.key=value, got {item!r}")
        if name not in out:
            raise ConfigError(("--option",), f"{item!r}: {name!r} is not one of the estimators given with "
                              f"--estimator ({', '.join(names)})")
        # 1e9 is a number; 010 and 1:30 are refused (YAML 1.1 reads them as 8 and 90, YAML 1.2 as 10 and text)
        parsed = load_yaml_text(value, f"--option {left.strip()}", invalid_as_text=True)
        if key in out[name]:  # the later one would silently win
            raise ConfigError(("--option",), f"{left.strip()!r} is given twice ({out[name][key]!r} and {parsed!r}); "
                              "give each option once")
        out[name][key] = parsed
    return out


def _target_names(paths: list[Path]) -> list[str]:
    from onlineeval.errors import ConfigError

    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    resolved = [p.resolve() for p in paths]  # (B.run and ./B.run are one file)
    if len(set(resolved)) != len(resolved):
        raise ConfigError(("--target",), "the same run file is given twice")
    return [str(p) for p in paths]


def load_target(path: Path, name: str, log: LoggedLog, ties: str, allow_unseen: bool) -> TargetMap:
    """A TREC run or a ``query doc score`` file as a target in the log's id space (errors name the file and
    line)."""
    from onlineeval.errors import InputError
    from onlineeval.estimators.target_support import unseen_refused, unseen_text
    from onlineeval.io import ranked_doc_lists, read_ranking
    from onlineeval.io.logged import locate_run_lines

    lists = ranked_doc_lists(read_ranking(path), ties)
    tmap = log.target(lists, name)
    if not tmap.ranked.any():
        queries = sorted(lists)
        raise InputError(
            f"no query in common with the log {log.path} (run ids e.g. {queries[0]!r}, log ids e.g. "
            f"{log.queries[0]!r})", str(path))
    if tmap.unseen and not allow_unseen and unseen_refused(log):
        found = locate_run_lines(path, {(u.query, u.doc) for u in tmap.unseen})
        line, first = min(((found.get((u.query, u.doc), 0), u) for u in tmap.unseen), key=lambda t: t[0])
        raise InputError(f"the target {unseen_text(tmap, log, first)}. --allow-unseen estimates it anyway, counting "
                         "them as support violations", str(path), line or None)
    return tmap


# --------------------------------------------------------------------------- numbers
# --------------------------------------------------------------------------- output
def _clean(value: Any) -> Any:
    """JSON-safe values (NaN -> None, numpy -> Python), recursively."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return _clean(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _f(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return fixed(x, digits)


def _g(x: Any) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.4g}"


def _df(x: Any) -> str:
    """An interval's degrees of freedom for people: whole numbers from 100 on, one decimal below."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def _note_value(v: Any) -> str:
    """An estimator note's value for people: floats to 4 significant digits, lists and mappings
    with their items so (the JSON output keeps every digit)."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_note_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_note_value(x) for x in v) + "]"
    return str(v)


def _mean_w(d: dict[str, Any]) -> str:
    """The mean weight, marked '*' when it is off its expectation (:meth:`Diagnostics.mean_weight_off`)."""
    text = _g(d.get("mean_weight"))
    return text + "*" if d.get("mean_weight_off") else text


def _grid(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return ["  " + line for line in out]


def se_legend(estimators: list[Any], reward: Any, results: list[dict[str, Any]],
              differences: list[dict[str, Any]]) -> list[str]:
    """The table's legend of its se column, worded by this run's settings: which estimators' rows carry 'b' (the
    bootstrap's SD, because their delta method holds a data-driven choice or model fit fixed, named by
    :meth:`~onlineeval.estimators.base.Estimator.clt_holds_fixed`), and an adaptive_ips whose behaviours the user
    fixed (``--option adaptive_ips.behaviours=...``): nothing is chosen on the log, so its se stays the delta
    method's. Empty when neither occurs."""
    from onlineeval.estimators.intervals import DELTA_SE
    from onlineeval.estimators.log_estimates import user_fixed_text

    marked = {r["estimator"] for r in [*results, *differences]
              if r.get("estimate") is not None and r.get("se_source", DELTA_SE) != DELTA_SE}
    held = [f"{e.name}: {e.clt_holds_fixed(reward)}" for e in estimators
            if e.name in marked and e.clt_holds_fixed(reward) is not None]
    lines = []
    if marked:
        lines.append("se 'b' = the bootstrap's SD, which makes again in every resample what the estimator's delta "
                     "method holds fixed" + (f" ({'; '.join(held)})" if held else ""))
    for e in estimators:
        fixed = user_fixed_text(e)
        if fixed is not None:
            lines.append(f"{fixed}, so its se is the delta method's and holds no data-driven choice fixed")
    return lines


def _table(doc: dict[str, Any], se_notes: list[str] | tuple[str, ...] = ()) -> str:
    from onlineeval.estimators.base import MEAN_WEIGHT_TOLERANCE, MEAN_WEIGHT_Z
    from onlineeval.estimators.diagnostics import FEW_WEIGHTED_CLUSTERS

    lg, conv = doc["log"], doc["conventions"]
    level = f"{100 * (1 - conv['alpha']):g}%"
    lines = [
        (f"onlineeval estimate: {lg['path']}: {lg['impressions']} impressions, {lg['queries']} queries, "
        f"{lg['clusters']} clusters, lists of up to {lg['k']}; metric {conv['metric']}"),
        "",
    ]
    written = lg["propensity_source"] == "log"
    header = ["estimator", "target", "estimate", "se", f"CI {level}", "df", f"boot {level}", "n", "ESS", "max w",
              "mean w", "top1%", "zero-w", "never logged" if written else "support viol."]
    rows = []
    for r in doc["results"]:
        if r["estimate"] is None:
            rows.append([r["estimator"], r["target"], "undefined"] + ["-"] * (len(header) - 3))
            continue
        d = r["diagnostics"]
        if written:
            sv = "-" if d["never_logged"] is None else f"{d['never_logged']}/{r['n']}"
        else:
            sv = "-" if d["support_violations"] is None else f"{d['support_violations']}/{d['support_checked']}"
        boot_se = r.get("se_source", "delta method") != "delta method"
        rows.append([
            r["estimator"], r["target"], _f(r["estimate"]), _f(r["se"]) + ("b" if boot_se else ""),
            f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]", _df(r.get("df")),
            f"[{_f(r['boot_low'])}, {_f(r['boot_high'])}]" if conv["bootstrap"] else "-",
            str(r["n"]), _g(d["ess_impressions"]), _g(d["max_weight"]), _mean_w(d), _g(d["top1_share"]),
            _g(d["zero_weight_share"]), sv,
        ])
    lines += _grid(header, rows)
    if doc.get("differences"):
        lines += ["", (f"differences target - baseline (paired on the same impressions; delta method over "
                  f"{conv['cluster_unit']} clusters; p: two-sided, t with df degrees of freedom):")]
        header = ["estimator", "target", "baseline", "difference", "se", f"CI {level}", "df", f"boot {level}", "p", "n",
                  "warnings"]
        rows = []
        for r in doc["differences"]:
            flagged = str(len(r["warnings"])) if r.get("warnings") else "-"
            if r["estimate"] is None:
                rows.append([r["estimator"], r["target"], r["baseline"], "undefined"] + ["-"] * 6 + [flagged])
                continue
            boot_se = r.get("se_source", "delta method") != "delta method"
            rows.append([
                r["estimator"], r["target"], r["baseline"], fixed(r["estimate"], signed=True),
                _f(r["se"]) + ("b" if boot_se else ""),
                f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]", _df(r.get("df")),
                f"[{_f(r['boot_low'])}, {_f(r['boot_high'])}]" if conv["bootstrap"] else "-",
                _g(r["pvalue"]), str(r["n"]), flagged,
            ])
        lines += _grid(header, rows)
    lines += ["", "assumptions (under which each estimator is unbiased or consistent):"]
    lines += [f"  {name}: {text}" for name, text in doc["assumptions"].items()]
    notes = [(r["estimator"], r["target"], r["diagnostics"]["notes"]) for r in doc["results"]
             if r["estimate"] is not None and r["diagnostics"]["notes"]]
    if notes:
        lines += ["", "estimator notes:"]
        # (a note's own warnings are printed once, under warnings:)
        lines += [f"  {e} {t}: " + ", ".join(f"{k} = {_note_value(v)}" for k, v in n.items() if k != "warnings")
                  for e, t, n in notes]
    from onlineeval.estimators.results import warning_lines

    warns = warning_lines(doc["warnings"], doc["results"], doc.get("differences", []))
    if warns:
        lines += ["", "warnings:"] + [f"  {w}" for w in warns]
    lines += ["", "conventions:"]
    lines += [f"  {k}: {v}" for k, v in conv.items()]
    if doc.get("inputs"):  # what determines these numbers: the files' contents and the options
        ins = doc["inputs"]
        files = [("log", ins["log"])] + [(name, e) for part in ("targets", "baseline")
                                         for name, e in (ins.get(part) or {}).items()]
        from onlineeval.io.digest import inputs_line

        lines.append("  " + inputs_line(files))
        lines.append(f"  fingerprint: {doc['fingerprint']} (of the inputs' SHA-256, the options and the version)")
    lines += ["", ("df = the degrees of freedom of the CI's t quantile (and of p): Bell and McCaffrey's for the "
                   "clustered variance, G - 1 when the clusters carry equal weight, fewer where a few users hold the "
                   "weight (conventions: interval)"),
              ("diagnostics: ESS = (sum w)^2 / sum w^2 of the weights, in impressions (slot-level estimators: "
              "of the slot weights of shown slots, divided by the mean number of shown slots per impression; "
              "the JSON's ess is the undivided count of slots); max w = largest weight; mean w = mean weight "
              "(slot-level: per shown slot), whose expectation under the logging policy with full support is 1 "
              f"for weights pi/mu (JSON: mean_weight_expected); '*' = more than {MEAN_WEIGHT_Z:g} of its standard "
              f"errors (clustered like the estimate) and {MEAN_WEIGHT_TOLERANCE:.0%} from it, see warnings; top1% = "
              "share of the total weight held by the "
              "largest 1% of weights; zero-w = share of impressions whose weights are all 0; the weights' "
              f"effective number of users (JSON: ess_clusters) is warned about below {FEW_WEIGHTED_CLUSTERS}; "
              + ("never logged = impressions whose target list holds a document the log never shows for the query "
                 "/ impressions (weight 0 there; not known support violations: the log has no logging policy)"
                 if written else "support viol. = impressions whose target list the logging policy cannot show / "
                 "impressions checked")
              + "".join(f"; {text}" for text in se_notes))]
    if doc.get("differences"):
        lines += [("differences: warnings = how many warnings a difference carries (its two estimates' and its "
                   "estimator's differences'), listed above; a difference is undefined where either estimate is "
                   "(e.g. every weight 0)")]
    return "\n".join(lines)


class BootstrapProgress(CountProgress):
    """The progress of a bootstrap that fits a model again on every resample
    (:data:`onlineeval.estimators.base.BOOTSTRAP_PROGRESS`), on stderr: a line at most every ``every`` seconds and
    the last, e.g. ``bootstrap of dm (cm fitted again on every resample) of B: 120/1000 resamples, 14s, about 1m43s
    left``; a bootstrap shorter than ``every`` seconds prints nothing
    (:class:`~onlineeval.cli._progress.CountProgress`)."""

    prefix = "bootstrap of "
    unit = " resamples"


class PropensityProgress(CountProgress):
    """The progress of the logging policy's propensities computed from a log's ``logger`` lines
    (:data:`simulations.policies.settings.PROPENSITY_PROGRESS`: a Plackett-Luce logger's item marginals, query by
    query), on stderr as :class:`BootstrapProgress` writes its lines, e.g. ``Plackett-Luce item propensities of
    10000 queries: 1200/10000, 5s, about 37s left``; a computation shorter than ``every`` seconds prints nothing."""


# --------------------------------------------------------------------------- command
@guarded
def estimate_cmd(
    log: Annotated[Path, typer.Option("--log", "-l", help="Logged impressions: JSON lines, plain or gzipped, "
                                      "or Parquet (see the README).")],
    target: Annotated[list[Path], typer.Option("--target", "-t", help="TREC run (6 columns) or score file "
                                                "(query doc score) of a ranker to estimate; repeat for several.")],
    estimator: Annotated[str, typer.Option("--estimator", "-e", help="Comma-separated estimators, e.g. "
                                           "ips,snips (`onlineeval list estimators` lists them with "
                                           "their assumptions).")],
    baseline: Annotated[Path | None, typer.Option("--baseline", "-b", help="TREC run or score file of the "
                                                     "baseline: each target minus it, paired on the same log.")] = None,
    metric: Annotated[str, typer.Option("--metric", "-m", help="clicks_per_query, reciprocal_rank, "
                                        "abandonment, or utility:<metric>: clicks weighted by an offline metric's "
                                        "C/W/L weights (utility:RBP(p=0.8), utility:nDCG@10, utility:P@5)."
                                        )] = "clicks_per_query",
    alpha: Annotated[float, typer.Option("--alpha", help="Two-sided level of the intervals.")] = 0.05,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Cluster-bootstrap replicates (0 = none, "
                                           "else >= 100).")] = 0,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the bootstrap.")] = 0,
    output_format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    option: Annotated[list[str] | None, typer.Option("--option", "-o", help="Estimator option "
                                                        "estimator.key=value (repeatable).")] = None,
    ties: Annotated[str, typer.Option("--ties", help="Score-tie rule of the runs: docno_desc (trec_eval) or "
                                      "input_order.")] = "docno_desc",
    allow_unseen: Annotated[bool, typer.Option("--allow-unseen", help="For a log with a 'logger': targets may rank "
                                               "documents the logging policy cannot show (support violations, the "
                                               "estimates biased there). Logs with written propensities never need "
                                               "it: documents never logged for a query get weight 0 and a "
                                               "warning.")] = False,
) -> None:
    """Off-policy estimates of rankers' online metrics from a logged click log (with propensities)."""
    from onlineeval.errors import ConfigError, must_be_one_of
    from onlineeval.estimators import catalogue, get_estimator, get_reward
    from onlineeval.estimators.log_estimates import (
        check_needs,
        check_rewards,
        check_settings,
        estimate_conventions,
        estimate_targets,
        parse_estimators,
    )
    from onlineeval.io.logged import read_logged

    if output_format not in FORMATS:
        raise ConfigError(("--format",), must_be_one_of(FORMATS, output_format))
    check_settings(metric, alpha, bootstrap, ties)
    names = parse_estimators(estimator)
    opts = parse_options(option, names)
    estimators = []
    for name in names:
        try:
            estimators.append(get_estimator(name, **opts[name]))
        except ConfigError as exc:  # named as the user typed it: --option clipped_ips.cap, not the library's key
            raise ConfigError((f"--option {name}", *exc.key_path[1:]), exc.message) from None
    paths = list(target)
    if not paths:
        raise ConfigError(("--target",), "give at least one target run")
    if baseline is not None and baseline.resolve() in {p.resolve() for p in paths}:
        raise ConfigError(("--baseline",), f"{baseline} is also given as a --target: the baseline is compared with "
                          "the targets, so give it once, as --baseline")
    all_paths = paths + ([baseline] if baseline is not None else [])
    labels = _target_names(all_paths)
    if len(set(labels)) != len(labels):
        raise ConfigError(("--baseline",), "the baseline is also given as a target")
    reward = get_reward(metric, 1)  # kind check before the log is read
    check_rewards(estimators, reward)

    import simulations.policies
    from onlineeval.io.digest import InputDigests, estimate_settings, fingerprint
    from simulations.policies.settings import propensity_settings

    digests = InputDigests({"log": log} | {f"target:{n}": p for n, p in zip(labels, all_paths)})  # while reading
    # a logger's propensities, while the log is read and used: on every core (the same numbers for any count), with
    # progress lines
    with propensity_settings(os.cpu_count() or 1, PropensityProgress()):
        lg = read_logged(log, policies=simulations.policies)
        data = lg.data
        reward = get_reward(metric, data.k)
        check_needs(lg, estimators)
        maps = [load_target(p, n, lg, ties, allow_unseen) for p, n in zip(all_paths, labels)]

        labelled = dict(zip(labels, all_paths))
        base = maps[-1] if baseline is not None else None
        from onlineeval.estimators.base import BOOTSTRAP_PROGRESS

        token = BOOTSTRAP_PROGRESS.set(BootstrapProgress())
        try:
            out = estimate_targets(lg, maps[:-1] if base is not None else maps, estimators, reward, alpha=alpha,
                                   bootstrap=bootstrap, seed=seed, baseline=base,
                                   sources={name: str(path) for name, path in labelled.items()})
        finally:
            BOOTSTRAP_PROGRESS.reset(token)
    results, differences, warnings = out.results, out.differences, out.warnings

    cat = catalogue()
    n_clusters = data.user_groups[1]
    conventions = estimate_conventions(lg, metric, reward, alpha, ties, bootstrap, seed, estimators)
    entries = digests.entries()
    inputs: dict[str, Any] = {"log": entries["log"],
                              "targets": {name: entries[f"target:{name}"] for name in labels[:len(paths)]}}
    if baseline is not None:
        inputs["baseline"] = {labels[-1]: entries[f"target:{labels[-1]}"]}
    settings = estimate_settings(metric, estimators, opts, alpha, bootstrap, seed, ties, allow_unseen)
    doc = {
        "fingerprint": fingerprint(inputs, settings),
        "inputs": inputs,
        "log": {"path": str(log), "impressions": data.n, "queries": len(lg.queries), "clusters": n_clusters,
                "k": data.k, "propensities": list(lg.forms), "propensity_source": lg.source},
        "metric": metric,
        "estimators": {e.name: {"options": opts[e.name], **cat[e.name]} for e in estimators},
        "assumptions": {e.name: e.assumption for e in estimators},
        "results": results,
        "differences": differences,
        "warnings": warnings,
        "conventions": conventions,
    }
    if output_format == "json":
        typer.echo(json.dumps(_clean(doc), indent=2))
    else:
        typer.echo(_table(_clean(doc), se_legend(estimators, reward, results, differences)))


def register(app: typer.Typer) -> None:
    """Add the ``estimate`` command to the main app."""
    app.command("estimate")(estimate_cmd)
