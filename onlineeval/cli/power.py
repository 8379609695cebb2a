r"""``onlineeval power``: sample size, power and minimum detectable effect without simulating.

Three metrics, one sub-command each::

    onlineeval power proportion --baseline 0.10 --target 0.105          # 57,756 users per arm
    onlineeval power ratio --csv users.csv --num-col clicks --den-col queries --relative-mde 0.02
    onlineeval power interleaving --delta 0.02 --sd 0.9 --users 20000

Without ``--users`` the command answers "how many users for ``--power`` at this effect"; with
``--users N`` (total over both arms) it answers "what power at this effect, and what is the
minimum detectable effect (MDE) at ``--power``". ``--sequential msprt|obrien_fleming|pocock
--looks K`` sizes a design analysed at ``K`` equally spaced looks instead of once; ``--looks K``
alone reports the false-positive rate of peeking ``K`` times at the fixed-horizon test.

The calculation and its formulas are in :mod:`onlineeval.cli.power_calc` (standard library only
until an answer is computed); this module holds the command line: options, the per-user CSV reader
and the text or JSON output.

Only numpy and the standard library are imported (no scipy), and each answer root-finds the
design's :math:`\delta^*` once per boundary scale (the size, the MDE and the design summary share it):
a 14-look O'Brien-Fleming answer with size, power and MDE takes about 0.1 s of computation, the
whole command (interpreter, numpy, typer) about 0.4 s (``python benchmarks/bench_import.py``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from onlineeval.cli._common import effect_text, guarded
from onlineeval.cli.power_calc import (
    Settings,
    calculate,
    check_settings,
    interleaving_metric,
    proportion_metric,
    ratio_metric,
)
from onlineeval.errors import ConfigError, InputError, must_be_one_of

FORMATS = ("text", "json")


# ----------------------------------------------------------------------------- per-user CSV


def moments_from_csv(path: Path, num_col: str, den_col: str) -> tuple[float, float, float, float, float, int]:
    """Means, variances (ddof 1) and covariance of two columns of a per-user CSV file.

    Returns ``(num_mean, num_var, den_mean, den_var, cov, n_users)``. Errors name the file and
    line (a missing column, a row with more or fewer fields than the header, a non-numeric or negative
    denominator, fewer than 2 users, denominators all 0).
    """
    from onlineeval.io.text import plain_float

    name = str(path)
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        cols = reader.fieldnames or []
        for opt, col in (("--num-col", num_col), ("--den-col", den_col)):
            if col not in cols:
                raise InputError(
                    f"no column {col!r} (from {opt}); the header has {', '.join(cols) or 'nothing'}", name, 1
                )
            if cols.count(col) > 1:  # (csv.DictReader keeps the last one's values, silently)
                raise InputError(f"the header names column {col!r} (from {opt}) {cols.count(col)} times "
                                 f"({', '.join(cols)}): which one is meant?", name, 1)
        xs: list[float] = []
        ys: list[float] = []
        for row in reader:
            line = reader.line_num
            if None in row:  # csv.DictReader's restkey: fields beyond the header
                raise InputError(
                    f"{len(cols) + len(row[None])} fields but the header has {len(cols)} ({', '.join(cols)})",
                    name, line,
                )
            if any(v is None for v in row.values()):  # its restval: a short row
                given = sum(v is not None for v in row.values())
                raise InputError(
                    f"{given} field{'' if given == 1 else 's'} but the header has {len(cols)} ({', '.join(cols)})",
                    name, line,
                )
            x, y = plain_float(row[num_col]), plain_float(row[den_col])
            if x is None or y is None:  # (float() also took 1_0 as 10 and digits of other scripts)
                raise InputError(
                    f"{num_col}={row.get(num_col)!r}, {den_col}={row.get(den_col)!r}: expected numbers", name, line
                )
            if not (math.isfinite(x) and math.isfinite(y)) or y < 0:
                raise InputError(f"{num_col}={x}, {den_col}={y}: values must be finite, denominators >= 0", name, line)
            xs.append(x)
            ys.append(y)
    n = len(xs)
    if n < 2:
        raise InputError(f"needs at least 2 users (data rows), got {n}", name)
    if not any(ys):  # (else the ratio's check would blame --den-mean, an option not given)
        raise InputError(
            f"every value of the denominator column {den_col!r} (--den-col) is 0: the mean denominator per user "
            "must be > 0", name,
        )
    import numpy as np

    data = np.array([xs, ys])
    with np.errstate(over="ignore", invalid="ignore"):  # refused just below, naming the file and column
        cov = np.cov(data, ddof=1)
        means = data.mean(axis=1)
    for i, (opt, col) in enumerate((("--num-col", num_col), ("--den-col", den_col))):
        if not (math.isfinite(means[i]) and math.isfinite(cov[i, i])):
            raise InputError(f"the values of column {col!r} (from {opt}) are too large for float64: their mean or "
                             f"variance overflows (largest {np.abs(data[i]).max():.3g}); give them in other units",
                             name)
    if not math.isfinite(cov[0, 1]):
        raise InputError(f"the covariance of columns {num_col!r} and {den_col!r} overflows float64; give them in "
                         "other units", name)
    ratio = data[0].sum() / data[1].sum()
    residual = data[0] - ratio * data[1]  # the linearised ratio per user (times the mean denominator)
    if not np.abs(residual).max() > 1e-12 * max(np.abs(data[0]).max(), np.abs(ratio * data[1]).max()):
        # (else the ratio's check blamed --cov, an option not given)
        raise InputError(f"every user's {num_col} is {ratio:.6g} x their {den_col} (the same ratio for all {n} "
                         "users): the delta-method variance is 0, so there is no spread to size an experiment by",
                         name)
    return float(means[0]), float(cov[0, 0]), float(means[1]), float(cov[1, 1]), float(cov[0, 1]), n


# ----------------------------------------------------------------------------- output


def _expected(x: Any) -> str:
    """An expected number of users (a mean over the stopping looks): whole users from 1,000 on, one decimal below
    (25.7, not 25.7241: the digits past it say nothing a plan can use)."""
    if isinstance(x, float) and math.isfinite(x) and abs(x) < 1000:
        return f"{x:.1f}"
    return _fmt(x)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e7):
            return f"{x:.4g}"
        return f"{x:,.6g}" if abs(x) < 1000 else f"{x:,.0f}"
    if isinstance(x, int):
        # a size computed in float64 is exact to about 16 digits: beyond 10^15 its other digits are noise
        return f"{x:,}" if abs(x) < 10**15 else f"{float(x):.4g}"
    return str(x)


def _count(x: Any) -> str:
    """An impressions count: a whole number as the user counts beside it are written (22,873,223, not 2.287e+07),
    a fractional one (users x a mean of impressions per user) as :func:`_fmt` writes floats."""
    v = float(x)
    return _fmt(int(v)) if math.isfinite(v) and v == int(v) else _fmt(v)


def _pct(x: float) -> str:
    """A relative effect in percent: two decimals, or three significant digits where two decimals would print a
    non-zero effect as +0.00%."""
    return f"{x:+.2%}" if x == 0 or abs(x) >= 5e-5 or not math.isfinite(x) else f"{100 * x:+.3g}%"


def render_text(doc: dict[str, Any]) -> str:
    """A short human-readable report of :func:`calculate`'s answer."""
    lines = [f"metric: {doc['metric']}" + (f" ({doc['method']})" if "method" in doc else "")]
    if doc["metric"] == "ratio":
        lines.append(
            f"ratio: {_fmt(doc['ratio'])}   per-user sd of the linearised ratio: {_fmt(doc['sd_linearized'])}"
            f"   (from {doc['source']})"
        )
        if "inputs" in doc:
            from onlineeval.io.digest import inputs_line

            lines.append(inputs_line(doc["inputs"].items()) + f"; fingerprint: {doc['fingerprint']} (of the "
                         "CSV's SHA-256, the options and the version)")
        lines.append(f"assumes: {doc['assumption']}")
    if doc["metric"] == "interleaving" and "estimand" in doc:
        lines.append(f"estimand: {doc['estimand']}")
    if "test" in doc:
        lines.append(f"test: {doc['test']}")
    lines.append(
        f"alpha {doc['alpha']} ({doc['alternative']}), power {doc['power_target']}"
        + (f", share in B {doc['share_b']}" if doc["share_b"] is not None else "")
        + (f", design {doc['sequential']} with {doc['looks']} look{'s' if doc['looks'] != 1 else ''}"
           if doc["sequential"] != "none" else "")
    )
    if "effect" in doc:
        e = doc["effect"]
        rel = f" ({_pct(e['relative'])})" if e["relative"] is not None else ""
        to = f" -> {_fmt(e['treatment_value'])}" if e["treatment_value"] is not None else ""
        lines.append(f"effect: {effect_text(e['absolute'])}{rel}{to}")
    if "design" in doc:
        d = doc["design"]
        lines.append(f"design: {d['description']}")
        edge = d["upper"] if d["alternative"] != "smaller" else d["lower"]
        ups = ", ".join("inf" if v is None else f"{v:.3f}" for v in edge)
        lines.append(f"boundaries (|z|): {ups}")
        lines.append(
            f"max size x {d['inflation_factor']:.4f} of the fixed horizon; expected size "
            f"{d['expected_fraction_alternative']:.1%} of max under the effect, "
            f"{d['expected_fraction_null']:.1%} under H0"
        )
    if "peeking_false_positive_rate" in doc:
        lines.append(
            f"peeking at {doc['looks']} looks with this fixed-horizon test: false-positive rate "
            f"{doc['peeking_false_positive_rate']:.3f} instead of {doc['alpha']}"
        )
    if "required" in doc:
        r = doc["required"]
        if r.get("users_total") is None:
            lines.append(f"required: - ({r['note']})")
        elif "users_per_arm" in r:
            u, i = r["users_per_arm"], r["impressions_per_arm"]
            lines.append(f"required users per arm: A {_fmt(u['A'])}, B {_fmt(u['B'])} (total {_fmt(r['users_total'])})")
            lines.append(f"impressions per arm:    A {_count(i['A'])}, B {_count(i['B'])}")
        else:
            lines.append(
                f"required users: {_fmt(r['users_total'])} (impressions {_count(r['impressions_total'])})"
            )
        t_n = r.get("t_test_users")
        if t_n is not None and t_n != r.get("users_total"):
            lines.append(f"a one-sample t-test (n - 1 degrees of freedom, the SD estimated from the users) needs "
                         f"{_fmt(t_n)} users")
        if "expected_users_alternative" in r:
            lines.append(
                f"expected users: {_expected(r['expected_users_alternative'])} under the effect, "
                f"{_expected(r['expected_users_null'])} under H0"
            )
    if "at_size" in doc:
        a = doc["at_size"]
        head = f"with {_fmt(a['users_total'])} users"
        if "power" in a:
            t_power = a.get("power_t_test")
            t_text = f" (a one-sample t-test's: {t_power:.4f})" if t_power is not None and \
                f"{t_power:.4f}" != f"{a['power']:.4f}" else ""
            lines.append(f"{head}: power {a['power']:.4f}{t_text}")
        if a["mde_absolute"] is None:
            lines.append(f"{head}: no effect within the metric's range reaches power {doc['power_target']}")
        else:
            rel = f" ({_pct(a['mde_relative'])})" if a["mde_relative"] is not None else ""
            lines.append(f"{head}: minimum detectable effect {effect_text(a['mde_absolute'])}{rel}")
    return "\n".join(lines)


def _emit(doc: dict[str, Any], output_format: str) -> None:
    if output_format not in FORMATS:
        raise ConfigError(("--format",), must_be_one_of(FORMATS, output_format))
    if output_format == "json":
        typer.echo(json.dumps(doc, indent=2, allow_nan=False, default=float))
    else:
        typer.echo(render_text(doc))


def _effect(
    baseline: float | None, mde: float | None, relative: float | None, target: float | None, users: int | None
) -> float | None:
    given = [name for name, v in (("--mde", mde), ("--relative-mde", relative), ("--target", target)) if v is not None]
    if len(given) > 1:
        raise ConfigError((given[1],), f"give one of --mde, --relative-mde, --target (got {', '.join(given)})")
    if not given:
        if users is None:
            raise ConfigError(("--mde",), "give the effect (--mde, --relative-mde or --target) or a size (--users)")
        return None
    value = next(v for v in (mde, relative, target) if v is not None)
    if not math.isfinite(value):
        raise ConfigError((given[0],), f"must be a finite number, got {value}")
    if mde is not None:
        return mde
    if relative is not None:
        if baseline is None or baseline == 0:
            raise ConfigError((given[0],), "a relative effect needs a non-zero baseline")
        return relative * baseline
    if baseline is None:  # (the commands that take --target have a baseline)
        raise ConfigError((given[0],), "a target value needs a baseline")
    return float(target) - baseline  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- commands

_Alpha = Annotated[float, typer.Option("--alpha", help="Significance level (two-sided total for two-sided tests).")]
_Power = Annotated[float, typer.Option("--power", help="Target power.")]
_Alt = Annotated[str, typer.Option("--alternative", help="two-sided, larger (B > A) or smaller.")]
_Share = Annotated[float, typer.Option("--share-b", help="Share of users allocated to B.")]
_Users = Annotated[
    int | None, typer.Option("--users", min=2, help="Total users (both arms): report power and MDE at this size.")
]
_Seq = Annotated[
    str, typer.Option("--sequential", help="none, msprt (= confidence_sequence), obrien_fleming or pocock.")
]
_Looks = Annotated[int | None, typer.Option("--looks", help="Equally spaced looks (e.g. days) of a sequential design.")]
_Format = Annotated[str, typer.Option("--format", "-f", help="text or json.")]
_Mde = Annotated[float | None, typer.Option("--mde", help="Absolute effect B - A.")]
_Rel = Annotated[float | None, typer.Option("--relative-mde", help="Effect relative to the baseline (0.05 = +5%).")]


def _settings(
    alpha: float, power: float, alternative: str, share_b: float, sequential: str, looks: int | None
) -> Settings:
    return check_settings(Settings(alpha, power, alternative, share_b, sequential, looks))


@guarded
def proportion_cmd(
    baseline: Annotated[float, typer.Option("--baseline", help="Control proportion, e.g. 0.10 click-through.")],
    target: Annotated[float | None, typer.Option("--target", help="Treatment proportion, e.g. 0.105.")] = None,
    mde: _Mde = None,
    relative_mde: _Rel = None,
    method: Annotated[str, typer.Option("--method", help="arcsine (Cohen's h), pooled or unpooled.")] = "arcsine",
    impressions_per_user: Annotated[
        float, typer.Option("--impressions-per-user", help="To report impressions as well as users.")
    ] = 1.0,
    users: _Users = None,
    alpha: _Alpha = 0.05,
    power: _Power = 0.8,
    alternative: _Alt = "two-sided",
    share_b: _Share = 0.5,
    sequential: _Seq = "none",
    looks: _Looks = None,
    output_format: _Format = "text",
) -> None:
    """Users per arm for a difference of two proportions (e.g. click-through 10% -> 10.5%)."""
    st = _settings(alpha, power, alternative, share_b, sequential, looks)
    if not impressions_per_user > 0:
        raise ConfigError(("--impressions-per-user",), f"must be > 0, got {impressions_per_user}")
    m = proportion_metric(baseline, method, st)  # (its baseline checked before the effect relative to it)
    effect = _effect(baseline, mde, relative_mde, target, users)
    if effect is not None and not 0.0 < baseline + effect < 1.0:
        raise ConfigError(("--target",), f"the treatment proportion {baseline + effect} must be in (0, 1)")
    m = dataclasses.replace(m, units_per_user=impressions_per_user)
    _emit(calculate(m, st, effect, users), output_format)


@guarded
def ratio_cmd(
    csv_path: Annotated[
        Path | None, typer.Option("--csv", help="Per-user CSV of past data (one row per user, with a header).")
    ] = None,
    num_col: Annotated[str, typer.Option("--num-col", help="CSV column of the numerator (e.g. clicks).")] = "num",
    den_col: Annotated[str, typer.Option("--den-col", help="CSV column of the denominator (e.g. queries).")] = "den",
    num_mean: Annotated[float | None, typer.Option("--num-mean", help="Mean numerator per user.")] = None,
    num_var: Annotated[float | None, typer.Option("--num-var", help="Variance of the numerator per user.")] = None,
    den_mean: Annotated[float | None, typer.Option("--den-mean", help="Mean denominator per user.")] = None,
    den_var: Annotated[float | None, typer.Option("--den-var", help="Variance of the denominator per user.")] = None,
    cov: Annotated[float | None, typer.Option("--cov", help="Covariance of numerator and denominator.")] = None,
    mde: _Mde = None,
    relative_mde: _Rel = None,
    treatment_variance: Annotated[str, typer.Option(
        "--treatment-variance",
        help="B's per-user variance of the linearised ratio: same (as A's) or scaled (sd x R_B/R_A, CV kept).",
    )] = "same",
    users: _Users = None,
    alpha: _Alpha = 0.05,
    power: _Power = 0.8,
    alternative: _Alt = "two-sided",
    share_b: _Share = 0.5,
    sequential: _Seq = "none",
    looks: _Looks = None,
    output_format: _Format = "text",
) -> None:
    """Users per arm for a ratio metric sum(num)/sum(den) over users (delta method)."""
    st = _settings(alpha, power, alternative, share_b, sequential, looks)
    moments = {"--num-mean": num_mean, "--num-var": num_var, "--den-mean": den_mean, "--den-var": den_var, "--cov": cov}
    if csv_path is not None:
        given = [k for k, v in moments.items() if v is not None]
        if given:
            raise ConfigError((given[0],), "give either --csv or the five moments, not both")
        mx, vx, my, vy, cxy, n_rows = moments_from_csv(csv_path, num_col, den_col)
        source = f"{csv_path}, {n_rows:,} users"
    else:
        missing = [k for k, v in moments.items() if v is None]
        if missing:
            raise ConfigError((missing[0],), f"needed without --csv (missing: {', '.join(missing)})")
        mx, vx, my, vy, cxy = (float(v) for v in moments.values())  # type: ignore[arg-type]
        source = "moments given"
    m = ratio_metric(mx, vx, my, vy, cxy, st, source, treatment_variance)
    effect = _effect(m.baseline, mde, relative_mde, None, users)
    doc = calculate(m, st, effect, users)
    if csv_path is not None:
        # the numbers come from the file's content: name it by its bytes, as evaluate and estimate name theirs
        from onlineeval.io.digest import fingerprint, input_entry

        doc["inputs"] = {"csv": input_entry(csv_path)}
        options = {"num_col": num_col, "den_col": den_col, "treatment_variance": treatment_variance,
                   "mde": mde, "relative_mde": relative_mde, "users": users, "alpha": alpha, "power": power,
                   "alternative": alternative, "share_b": share_b, "sequential": sequential, "looks": looks}
        doc["fingerprint"] = fingerprint(doc["inputs"], options)
    _emit(doc, output_format)


@guarded
def interleaving_cmd(
    delta: Annotated[float | None, typer.Option(
        "--delta", help="Expected mean per-user preference (not simulate's Delta_AB, see above).",
    )] = None,
    sd: Annotated[float | None, typer.Option("--sd", help="Per-user standard deviation of the preference.")] = None,
    variance: Annotated[float | None, typer.Option("--variance", help="Per-user variance (instead of --sd).")] = None,
    impressions_per_user: Annotated[
        float, typer.Option("--impressions-per-user", help="To report impressions as well as users.")
    ] = 1.0,
    users: Annotated[int | None, typer.Option(
        "--users", min=2,
        help="Users (interleaving has no arms: every user sees both rankers): report power and MDE at this size.",
    )] = None,
    alpha: _Alpha = 0.05,
    power: _Power = 0.8,
    alternative: _Alt = "two-sided",
    sequential: _Seq = "none",
    looks: _Looks = None,
    output_format: _Format = "text",
) -> None:
    """Users for an interleaving experiment: a one-sample test of the per-user preference.

    Estimand: the mean over users of each user's preference, every user weighing the same (--delta, and --sd the
    SD of the preference between users). simulate's Delta_AB is another quantity: a ratio over the impressions with
    a click (compared impressions), clustered by user, so heavy users weigh more. To size from a simulate run
    approximately: --delta its Delta_AB and --sd its se x sqrt(compared impressions) (the SD per compared
    impression); 'users' then counts compared impressions (repeat users' later impressions add less than this
    assumes)."""
    st = _settings(alpha, power, alternative, 0.5, sequential, looks)
    if (sd is None) == (variance is None):
        raise ConfigError(("--sd",), "give exactly one of --sd and --variance")
    if variance is not None and not variance > 0:
        raise ConfigError(("--variance",), f"must be > 0, got {variance}")
    if not impressions_per_user > 0:
        raise ConfigError(("--impressions-per-user",), f"must be > 0, got {impressions_per_user}")
    m = interleaving_metric(float(sd) if sd is not None else math.sqrt(float(variance)))  # type: ignore[arg-type]
    m = dataclasses.replace(m, units_per_user=impressions_per_user)
    if delta is None and users is None:
        raise ConfigError(("--delta",), "give the expected preference (--delta) or a size (--users)")
    if delta is not None and not math.isfinite(delta):
        raise ConfigError(("--delta",), f"must be a finite number, got {delta}")
    _emit(calculate(m, st, delta, users), output_format)


#: the sub-commands, by name (also for the direct path of :func:`onlineeval.cli.main`)
COMMANDS = {"proportion": proportion_cmd, "ratio": ratio_cmd, "interleaving": interleaving_cmd}


def register(app: typer.Typer) -> None:
    """Add the ``power`` sub-app (``proportion``, ``ratio``, ``interleaving``) to the main app."""
    power = typer.Typer(
        name="power",
        help="Sample size, power and MDE without simulation (fixed horizon or sequential designs).",
        no_args_is_help=True,
    )
    for name, command in COMMANDS.items():
        power.command(name)(command)
    app.add_typer(power, name="power")
