r"""``onlineeval estimate``: off-policy estimates of rankers' online metrics from a real click log.

Example::

    onlineeval estimate --log logged.jsonl --target B.run --target C.run --baseline A.run \
        --estimator ips,snips --metric reciprocal_rank --bootstrap 2000 --seed 7 --format json

The log holds impressions of a randomised logging policy with their logging propensities
(or the policy and its scores), one JSON object per line (format in
:mod:`onlineeval.io.logged`). Each target is a TREC run: its list for a query is its top
``k`` documents under the tie rule, ``k`` the length of the log's lists for that query.
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
covariance of the two estimates enters through :math:`d_g`). Bad input gives one line
naming the file and line, exit code 2.
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from onlineeval.cli._common import guarded

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from onlineeval.estimators import Estimator, LoggedData, Reward, Target
    from onlineeval.io.logged import LoggedLog, TargetMap

FORMATS = ("table", "json")
TIES = ("docno_desc", "input_order")
METRICS = ("clicks_per_query", "reciprocal_rank", "abandonment")


# ------------------------------------------------------------------------------ options
def parse_estimators(text: str) -> list[str]:
    """Names of ``--estimator a,b`` (known, distinct), or a ``ConfigError`` listing the allowed."""
    from onlineeval.errors import ConfigError
    from onlineeval.estimators import available_estimators

    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise ConfigError(("--estimator",), "give at least one estimator; allowed: " + ", ".join(available_estimators()))
    for name in names:
        if name not in available_estimators():
            raise ConfigError(("--estimator",), f"unknown estimator {name!r}; allowed: "
                              + ", ".join(available_estimators()))
    if len(set(names)) != len(names):
        raise ConfigError(("--estimator",), "an estimator is named twice")
    return names


def parse_options(option: list[str] | None, names: list[str]) -> dict[str, dict[str, Any]]:
    """``--option estimator.key=value`` (value parsed as YAML) -> ``{estimator: {key: value}}``."""
    import yaml

    from onlineeval.errors import ConfigError

    out: dict[str, dict[str, Any]] = {name: {} for name in names}
    for item in option or []:
        left, sep, value = item.partition("=")
        name, dot, key = left.strip().partition(".")
        if not sep or not dot or not name or not key:
            raise ConfigError(("--option",), f"expected estimator.key=value, got {item!r}")
        if name not in out:
            raise ConfigError(("--option",), f"{item!r}: {name!r} is not one of the estimators given with "
                              f"--estimator ({', '.join(names)})")
        try:
            out[name][key] = yaml.safe_load(value)
        except yaml.YAMLError:
            out[name][key] = value
    return out


def _target_names(paths: list[Path]) -> list[str]:
    from onlineeval.errors import ConfigError

    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    names = [str(p) for p in paths]
    if len(set(names)) != len(names):
        raise ConfigError(("--target",), "the same run file is given twice")
    return names


def _check_needs(log: LoggedLog, estimators: list[Estimator]) -> None:
    """Every estimator finds the propensities it reads (else name them and what could run)."""
    from onlineeval.errors import InputError
    from onlineeval.estimators import available_estimators, estimator_class

    def runnable() -> list[str]:
        return [n for n in available_estimators() if all(getattr(log.data, f, None) is not None
                                                          for f in estimator_class(n).needs)]

    for est in estimators:
        missing = [f for f in est.needs if getattr(log.data, f, None) is None]
        if missing:
            have = ", ".join(log.forms) or "no propensities"
            raise InputError(
                f"estimator {est.name!r} needs {', '.join(missing)}; the log carries {have}; estimators that "
                f"could run on it: {', '.join(runnable()) or 'none'}", log.path)


def _check_rewards(estimators: list[Estimator], reward: Reward) -> None:
    from onlineeval.errors import ConfigError
    from onlineeval.estimators import available_estimators, estimator_class

    for est in estimators:
        if reward.kind not in est.rewards:
            ok = [n for n in available_estimators() if reward.kind in estimator_class(n).rewards]
            raise ConfigError(("--metric",), f"estimator {est.name!r} cannot estimate {reward.name} "
                              f"({reward.kind} rewards); estimators that can: {', '.join(ok)}")


def load_target(path: Path, name: str, log: LoggedLog, ties: str, allow_unseen: bool) -> TargetMap:
    """A TREC run as a target in the log's id space (errors name the run file and line)."""
    from onlineeval.errors import InputError
    from onlineeval.io import ranked_doc_lists, read_run
    from onlineeval.io.logged import locate_run_lines

    lists = ranked_doc_lists(read_run(path), ties)
    tmap = log.target(lists, name)
    if not tmap.ranked.any():
        queries = sorted(lists)
        raise InputError(
            f"no query in common with the log {log.path} (run ids e.g. {queries[0]!r}, log ids e.g. "
            f"{log.queries[0]!r})", str(path))
    if tmap.unseen and not allow_unseen:
        found = locate_run_lines(path, {(u.query, u.doc) for u in tmap.unseen})
        line, first = min(((found.get((u.query, u.doc), 0), u) for u in tmap.unseen), key=lambda t: t[0])
        queries = len({u.query for u in tmap.unseen})
        where = "never shows" if not log.source.startswith("logger") else "cannot show (not a logger candidate)"
        raise InputError(
            f"the target ranks document {first.doc!r} at rank {first.rank} for query {first.query!r}, which the "
            f"log {where} for that query ({len(tmap.unseen)} such slots in {queries} queries within the log's "
            "list lengths); the estimators have no data there. --allow-unseen counts them as support violations",
            str(path), line or None)
    return tmap


# --------------------------------------------------------------------------- numbers
def _cluster_sums(data: LoggedData, num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    if data.user is None:
        return num, den
    _, inv = np.unique(data.user, return_inverse=True)
    g = int(inv.max()) + 1
    return np.bincount(inv, num, g), np.bincount(inv, den, g)


def boot_rng(seed: int, *names: str) -> np.random.Generator:
    """The bootstrap generator of one (estimator, target[, baseline]): ``default_rng([seed,
    crc32(name), ...])``, so a result does not depend on what else the command computes."""
    import numpy as np

    return np.random.default_rng([seed, *(zlib.crc32(n.encode("utf-8")) for n in names)])


def paired_difference(
    estimator: Estimator,
    data: LoggedData,
    target: Target,
    baseline: Target,
    reward: Reward,
    alpha: float = 0.05,
    n_boot: int = 0,
    rng: np.random.Generator | None = None,
) -> dict[str, Any]:
    r"""``estimator``'s estimate for ``target`` minus that for ``baseline`` on the same log.

    Standard error from the per-cluster influence values (module docstring), normal
    interval and two-sided p-value of :math:`\Delta = 0`; with ``n_boot`` >= 100 a paired
    cluster-bootstrap percentile interval (clusters resampled once for both estimates).

    Raises
    ------
    InputError
        When either estimate is undefined (no positive weight) or a bootstrap resample
        gives one of them no positive weight.
    """
    import numpy as np
    from scipy.stats import norm

    from onlineeval.errors import InputError
    from onlineeval.stats import ratio_linearization

    sums = []
    for t in (target, baseline):
        terms = estimator.terms(data, t, reward)
        den = np.ones(data.n) if terms.den is None else np.asarray(terms.den, dtype=np.float64)
        x, y = _cluster_sums(data, np.asarray(terms.num, dtype=np.float64), den)
        if not (np.isfinite(x).all() and np.isfinite(y).all()) or y.sum() <= 0:
            raise InputError(f"estimator {estimator.name!r}: undefined for {getattr(t, 'name', 'target')!r} "
                             "(no positive weight)", data.source)
        sums.append((x, y))
    (xt, yt), (xb, yb) = sums
    g = xt.size
    if g >= 2:
        rt, et = ratio_linearization(xt, yt)
        rb, eb = ratio_linearization(xb, yb)
        d = et - eb
        se = float(math.sqrt(np.sum((d - d.mean()) ** 2) / (g * (g - 1))))
    else:
        rt, rb, se = float(xt.sum() / yt.sum()), float(xb.sum() / yb.sum()), math.nan
    diff = rt - rb
    z = float(norm.ppf(1 - alpha / 2))
    if se > 0:
        p = float(2 * norm.sf(abs(diff) / se))
    else:
        p = math.nan if math.isnan(se) else (1.0 if diff == 0 else 0.0)
    blo = bhi = math.nan
    if n_boot:
        if rng is None:
            raise ValueError("n_boot > 0 needs rng")
        reps = np.empty(n_boot)
        block = max(1, min(n_boot, (1 << 22) // g))
        for start in range(0, n_boot, block):
            stop = min(start + block, n_boot)
            idx = rng.integers(0, g, size=(stop - start, g))
            st, sb = yt[idx].sum(axis=1), yb[idx].sum(axis=1)
            if (st <= 0).any() or (sb <= 0).any():
                raise InputError("paired cluster bootstrap: a resample gives an estimate no positive weight; "
                                 "too few clusters with weight for a bootstrap", data.source)
            reps[start:stop] = xt[idx].sum(axis=1) / st - xb[idx].sum(axis=1) / sb
        blo, bhi = (float(v) for v in np.quantile(reps, [alpha / 2, 1 - alpha / 2]))
    return {
        "estimator": estimator.name,
        "target": getattr(target, "name", "target"),
        "baseline": getattr(baseline, "name", "baseline"),
        "estimate": diff,
        "se": se,
        "ci_low": diff - z * se,
        "ci_high": diff + z * se,
        "pvalue": p,
        "boot_low": blo,
        "boot_high": bhi,
        "n": data.n,
        "clusters": g,
    }


def _support_count(log: LoggedLog, tmap: TargetMap, rows: np.ndarray) -> tuple[int, int]:
    """Impressions (of ``rows``) whose query's target list holds a document the log never shows."""
    q = log.data.query[rows]
    return int(tmap.unseen_query[q].sum()), int(q.size)


def _one_estimate(
    est: Estimator, log: LoggedLog, data: LoggedData, tmap: TargetMap, rows: np.ndarray, reward: Reward,
    alpha: float, n_boot: int, seed: int,
) -> dict[str, Any]:
    from dataclasses import asdict, replace

    from onlineeval.errors import InputError

    name = tmap.target.name
    extra: list[str] = []
    try:
        res = est.estimate(data, tmap.target, reward, alpha=alpha, n_boot=n_boot,
                           rng=boot_rng(seed, est.name, name) if n_boot else None)
    except InputError as exc:
        try:  # is it the bootstrap alone that fails (too few clusters with weight)?
            res = est.estimate(data, tmap.target, reward, alpha=alpha) if n_boot else None
        except InputError:
            res = None
        if res is None:
            return {"estimator": est.name, "target": name, "estimate": None, "error": exc.message,
                    "assumption": est.assumption, "warnings": [f"undefined: {exc.message}"]}
        extra.append(f"no bootstrap interval: {exc.message}")
    diag = res.diagnostics
    if diag.support_violations is None:  # no logging policy: count documents the log never shows
        count, checked = _support_count(log, tmap, rows)
        diag = replace(diag, support_violations=count, support_checked=checked)
    out = {("estimate" if k == "value" else k): v for k, v in asdict(res).items()
           if k not in ("diagnostics", "reward", "alpha")}
    out["diagnostics"] = asdict(diag)
    out["warnings"] = diag.warnings() + extra
    if diag.zero_weight_share == 1.0:
        out["warnings"].append("every weight is 0: no logged impression agrees with the target where this estimator "
                               "needs it, so the estimate (and its zero standard error) says nothing about the target")
    out["error"] = None
    return out


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
    return f"{x:.{digits}f}"


def _g(x: Any) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.4g}"


def _grid(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return ["  " + line for line in out]


def _table(doc: dict[str, Any]) -> str:
    lg, conv = doc["log"], doc["conventions"]
    level = f"{100 * (1 - conv['alpha']):g}%"
    lines = [
        (f"onlineeval estimate: {lg['path']}: {lg['impressions']} impressions, {lg['queries']} queries, "
        f"{lg['clusters']} clusters, lists of up to {lg['k']}; metric {conv['metric']}"),
        "",
    ]
    header = ["estimator", "target", "estimate", "se", f"CI {level}", f"boot {level}", "n", "ESS", "max w",
              "top1%", "zero-w", "support viol."]
    rows = []
    for r in doc["results"]:
        if r["estimate"] is None:
            rows.append([r["estimator"], r["target"], "undefined"] + ["-"] * (len(header) - 3))
            continue
        d = r["diagnostics"]
        sv = "-" if d["support_violations"] is None else f"{d['support_violations']}/{d['support_checked']}"
        rows.append([
            r["estimator"], r["target"], _f(r["estimate"]), _f(r["se"]),
            f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]",
            f"[{_f(r['boot_low'])}, {_f(r['boot_high'])}]" if conv["bootstrap"] else "-",
            str(r["n"]), _g(d["ess"]), _g(d["max_weight"]), _g(d["top1_share"]), _g(d["zero_weight_share"]), sv,
        ])
    lines += _grid(header, rows)
    if doc.get("differences"):
        lines += ["", (f"differences target - baseline (paired on the same impressions; delta method over "
                  f"{conv['cluster_unit']} clusters; p: two-sided, normal):")]
        header = ["estimator", "target", "baseline", "difference", "se", f"CI {level}", f"boot {level}", "p", "n"]
        rows = []
        for r in doc["differences"]:
            if r["estimate"] is None:
                rows.append([r["estimator"], r["target"], r["baseline"], "undefined"] + ["-"] * 5)
                continue
            rows.append([
                r["estimator"], r["target"], r["baseline"], f"{r['estimate']:+.4f}", _f(r["se"]),
                f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]",
                f"[{_f(r['boot_low'])}, {_f(r['boot_high'])}]" if conv["bootstrap"] else "-",
                _g(r["pvalue"]), str(r["n"]),
            ])
        lines += _grid(header, rows)
    lines += ["", "assumptions (under which each estimator is unbiased or consistent):"]
    lines += [f"  {name}: {text}" for name, text in doc["assumptions"].items()]
    notes = [(r["estimator"], r["target"], r["diagnostics"]["notes"]) for r in doc["results"]
             if r["estimate"] is not None and r["diagnostics"]["notes"]]
    if notes:
        lines += ["", "estimator notes:"]
        lines += [f"  {e} {t}: " + ", ".join(f"{k} = {v}" for k, v in n.items()) for e, t, n in notes]
    warns = list(doc["warnings"]) + [
        f"{r['estimator']} {r['target']}: {w}" for r in doc["results"] for w in r["warnings"]
    ] + [f"{r['estimator']} {r['target']} - {r['baseline']}: {r['error']}" for r in doc.get("differences", [])
         if r.get("error")]
    if warns:
        lines += ["", "warnings:"] + [f"  {w}" for w in warns]
    lines += ["", "conventions:"]
    lines += [f"  {k}: {v}" for k, v in conv.items()]
    lines += ["", ("diagnostics: ESS = (sum w)^2 / sum w^2 of the weights (slot weights of non-empty slots for "
              "slot-level estimators); max w = largest weight; top1% = share of the total weight held by the "
              "largest 1% of weights; zero-w = share of impressions whose weights are all 0; support viol. = "
              "impressions whose target list the logging policy cannot show / impressions checked")]
    return "\n".join(lines)


def estimate_conventions(lg: LoggedLog, metric: str, reward: Reward, alpha: float, ties: str,
                         bootstrap: int, seed: int) -> dict[str, Any]:
    """The conventions every estimate of a log is computed under (printed by the CLI, returned
    by :func:`onlineeval.api.estimate`): metric and reward, interval, cluster unit,
    propensity source, logging policy, tie rule, target depth, support, bootstrap, seed."""
    from onlineeval.io.logged import LogPolicy

    data = lg.data
    if data.user is None:
        unit = "impression (the log has no user ids)"
    elif lg.no_user:
        unit = f"user ({lg.no_user} impressions without a user are clusters of their own)"
    else:
        unit = "user"
    conventions = {
        "metric": metric,
        "reward": reward.describe(),
        "alpha": alpha,
        "interval": "estimate +- z_(1-alpha/2) x se, se by the delta method over clusters",
        "cluster_unit": unit,
        "propensity_source": (f"the log ({', '.join(lg.forms)})" if lg.source == "log" else
                              f"{lg.source} (propensities computed from the logged scores)"),
        "logging_policy": ("; ".join(lg.data.logger.describe()) if isinstance(lg.data.logger, LogPolicy) else
                           "not given (propensities written in the log)"),
        "ties": f"{ties} (runs ranked by score; ties broken by "
                + ("document id descending, as trec_eval)" if ties == "docno_desc" else "file order)"),
        "target_depth": "a target's list for a query is its top k, k = the longest list the log shows for it",
        "support": ("target lists the logging policy gives probability 0" if lg.source != "log" else
                    "impressions whose target list holds a document the log never shows for the query "
                    "(a lower bound: the log carries no logging policy)"),
        "bootstrap": bootstrap,
        "bootstrap_interval": ("none" if not bootstrap else
                               f"{bootstrap} cluster resamples, percentile; generator numpy default_rng([seed, "
                               "crc32(estimator), crc32(target)(, crc32(baseline))])"),
        "seed": seed,
    }
    return conventions


# --------------------------------------------------------------------------- command
@guarded
def estimate_cmd(
    log: Annotated[Path, typer.Option("--log", "-l", help="Logged impressions, JSON lines (see the README).")],
    target: Annotated[list[Path], typer.Option("--target", "-t", help="TREC run of a ranker to estimate; "
                                                "repeat for several.")],
    estimator: Annotated[str, typer.Option("--estimator", "-e", help="Comma-separated estimators, e.g. "
                                           "ips,snips (python -c 'import onlineeval.estimators as e; "
                                           "print(e.catalogue())' lists them).")],
    baseline: Annotated[Path | None, typer.Option("--baseline", "-b", help="TREC run of the baseline: each "
                                                     "target minus it, paired on the same log.")] = None,
    metric: Annotated[str, typer.Option("--metric", "-m", help="clicks_per_query, reciprocal_rank or "
                                        "abandonment.")] = "clicks_per_query",
    alpha: Annotated[float, typer.Option("--alpha", help="Two-sided level of the intervals.")] = 0.05,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Cluster-bootstrap replicates (0 = none, "
                                           "else >= 100).")] = 0,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the bootstrap.")] = 0,
    output_format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    option: Annotated[list[str] | None, typer.Option("--option", "-o", help="Estimator option "
                                                        "estimator.key=value (repeatable).")] = None,
    ties: Annotated[str, typer.Option("--ties", help="Score-tie rule of the runs: docno_desc (trec_eval) or "
                                      "input_order.")] = "docno_desc",
    allow_unseen: Annotated[bool, typer.Option("--allow-unseen", help="Targets may rank documents the log never "
                                               "shows for a query (counted as support violations).")] = False,
) -> None:
    """Off-policy estimates of rankers' online metrics from a logged click log (with propensities)."""
    import numpy as np

    from onlineeval.errors import ConfigError
    from onlineeval.estimators import catalogue, get_estimator, get_reward
    from onlineeval.io.logged import LogPolicy, read_logged

    if output_format not in FORMATS:
        raise ConfigError(("--format",), f"must be one of {', '.join(FORMATS)}; got {output_format!r}")
    if metric not in METRICS:
        raise ConfigError(("--metric",), f"unknown metric {metric!r}; allowed: {', '.join(METRICS)}")
    if not 0 < alpha < 1:
        raise ConfigError(("--alpha",), f"must be in (0, 1), got {alpha}")
    if bootstrap != 0 and bootstrap < 100:
        raise ConfigError(("--bootstrap",), f"must be 0 (no bootstrap) or >= 100 replicates, got {bootstrap}")
    if ties not in TIES:
        raise ConfigError(("--ties",), f"must be one of {', '.join(TIES)} (runs are ranked without qrels); "
                          f"got {ties!r}")
    names = parse_estimators(estimator)
    opts = parse_options(option, names)
    estimators = []
    for name in names:
        try:
            estimators.append(get_estimator(name, **opts[name]))
        except ConfigError as exc:
            raise ConfigError(("--option", *exc.key_path[1:]), exc.message) from None
    paths = list(target)
    if not paths:
        raise ConfigError(("--target",), "give at least one target run")
    all_paths = paths + ([baseline] if baseline is not None else [])
    labels = _target_names(all_paths)
    if len(set(labels)) != len(labels):
        raise ConfigError(("--baseline",), "the baseline is also given as a target")
    reward = get_reward(metric, 1)  # kind check before the log is read
    _check_rewards(estimators, reward)

    import simulations.policies

    lg = read_logged(log, policies=simulations.policies)
    data = lg.data
    reward = get_reward(metric, data.k)
    _check_needs(lg, estimators)
    maps = [load_target(p, n, lg, ties, allow_unseen) for p, n in zip(all_paths, labels)]

    warnings: list[str] = []
    results: list[dict[str, Any]] = []
    rows_of: dict[str, np.ndarray] = {}
    for tmap, path in zip(maps, all_paths):
        rows = np.flatnonzero(tmap.ranked[data.query])
        rows_of[tmap.target.name] = rows
        if rows.size < data.n:
            missing = int((~tmap.ranked).sum())
            warnings.append(
                f"{tmap.target.name}: {missing} of {len(lg.queries)} log queries are not in {path}; their "
                f"{data.n - rows.size} impressions are left out of its estimates")
        if tmap.unseen:
            count, _ = _support_count(lg, tmap, rows)
            warnings.append(
                f"{tmap.target.name}: ranks {len(tmap.unseen)} documents the log never shows for their query "
                f"({len({u.query for u in tmap.unseen})} queries, {count} impressions): counted as support "
                "violations, the estimates are biased there")
        sub = data if rows.size == data.n else data.take(rows)
        for est in estimators:
            results.append(_one_estimate(est, lg, sub, tmap, rows, reward, alpha, bootstrap, seed))

    differences: list[dict[str, Any]] = []
    if baseline is not None:
        from onlineeval.errors import InputError

        base = maps[-1]
        for tmap in maps[:-1]:
            both = tmap.ranked & base.ranked
            rows = np.flatnonzero(both[data.query])
            if rows.size == 0:
                warnings.append(f"{tmap.target.name} - {base.target.name}: no query ranked by both")
                continue
            sub = data if rows.size == data.n else data.take(rows)
            for est in estimators:
                rng = boot_rng(seed, est.name, tmap.target.name, base.target.name) if bootstrap else None
                pair = f"{est.name} {tmap.target.name} - {base.target.name}"
                try:
                    differences.append(paired_difference(est, sub, tmap.target, base.target, reward, alpha,
                                                         bootstrap, rng))
                except InputError as exc:
                    try:  # is it the bootstrap alone that fails?
                        diff = paired_difference(est, sub, tmap.target, base.target, reward, alpha) if bootstrap \
                            else None
                    except InputError:
                        diff = None
                    if diff is None:
                        differences.append({"estimator": est.name, "target": tmap.target.name,
                                            "baseline": base.target.name, "estimate": None, "error": exc.message})
                    else:
                        differences.append(diff)
                        warnings.append(f"{pair}: no bootstrap interval: {exc.message}")
    mc = lg.data.logger.monte_carlo_queries() if isinstance(lg.data.logger, LogPolicy) else 0
    if mc:
        warnings.append(f"the item propensities of {mc} queries are Monte Carlo estimates of the logging policy "
                        "(above its exact budget), not exact values; item-level estimators carry that error")
    if lg.short:
        warnings.append(f"{lg.short} impressions show fewer documents than the longest list of their query; a "
                        "target list (read to that longest length) never equals them")

    cat = catalogue()
    n_clusters = data.n if data.user is None else int(np.unique(data.user).size)
    conventions = estimate_conventions(lg, metric, reward, alpha, ties, bootstrap, seed)
    doc = {
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
        typer.echo(_table(_clean(doc)))


def register(app: typer.Typer) -> None:
    """Add the ``estimate`` command to the main app."""
    app.command("estimate")(estimate_cmd)
