r"""Sample ratio mismatch in the simulator: the checks on every A/B design and an injected broken split.

Checks (side rows of every daily checkpoint of every A/B design, its A/A variant included)
----------------------------------------------------------------------------------------
With the active users so far and the planned share :math:`\pi_B` = ``share_b``:

- ``srm:users``: Pearson's :math:`\chi^2` of the users per arm against
  :math:`(1 - \pi_B, \pi_B)` (:func:`onlineeval.stats.srm.srm_chisquare`);
- ``srm:impressions``: the impression split, clustered by user (the randomisation test
  :func:`onlineeval.stats.srm.srm_impressions`: impressions are not independent units);
- ``srm:impressions_naive``: Pearson's :math:`\chi^2` of the impressions per arm as if they
  were independent (what a naive dashboard computes; it fires too often with heavy users).

In each row ``estimate`` is the observed share of arm B (users or impressions) and ``pvalue``
the test's p-value; the other statistics are NaN. A replicate is *flagged* when
``pvalue < analysis.srm.alpha`` (default 0.001, Fabijan et al. 2019). The summary gives the
share of replicates flagged on the last day with its exact 99% binomial band around the SRM
alpha (what a correct split gives), and the share flagged on any day.

Injected broken split
---------------------
``analysis.srm.inject: {user_type: T, arm: B, share: s}`` moves a fraction ``s`` of the users of
type ``T`` that the hash puts in the other arm into ``arm`` (chosen by a second hash of the
user id with a salt derived from the split's, so the design's random stream and everyone
else's assignment are unchanged; a user keeps their arm for the whole experiment). Because
a user type behaves differently, the arms then differ in who is in them, and the estimate is
biased against the exact truth (which the injection does not change): the summary reports
that bias per metric with its Monte Carlo SE next to the share of replicates flagged.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["SRM_CHECKS", "SRM_PREFIX", "Injection", "srm_lines", "srm_rows", "srm_summary"]

SRM_PREFIX = "srm:"
SRM_CHECKS = ("users", "impressions", "impressions_naive")
_INJECT_SALT = 0x5EED5A17


class Injection:
    """The broken split of one A/B design: applied to its per-user arm vector batch by batch.

    Parameters
    ----------
    type_index:
        Index of the moved user type (``batch.user_type`` code).
    to_b:
        True to move users into B, False into A.
    share:
        Fraction of the type's users in the other arm that are moved.
    salt:
        The split's salt; the selection hashes the user id with ``salt ^ 0x5EED5A17``.
    population:
        Number of users.
    """

    def __init__(self, type_index: int, to_b: bool, share: float, salt: int, population: int) -> None:
        from simulations.designs.ab import hash_unit

        self.type_index = int(type_index)
        self.to_b = bool(to_b)
        self.selected = hash_unit(np.arange(population), salt ^ _INJECT_SALT) < share

    @classmethod
    def from_design(cls, design: Any, salt: int) -> Injection | None:
        """The injection configured in ``design.config.analysis.srm.inject`` (None without one)."""
        inj = design.config.analysis.srm.inject
        if inj is None:
            return None
        names = list(design.users.names)
        return cls(names.index(inj.user_type), inj.arm == "B", inj.share, salt, design.population)

    def apply(self, in_b: np.ndarray, batch: Any) -> None:
        """Move the batch's selected users of the type (in place; idempotent per user)."""
        users = batch.user[(batch.user_type == self.type_index) & self.selected[batch.user]]
        in_b[users] = self.to_b


def srm_rows(design: Any, day: int) -> list[Any]:
    """The ``srm:`` rows of an A/B design at checkpoint ``day`` (``test: delta``: from the arms' impressions
    ``design.checkpoint_stats()`` gathered; the same values)."""
    from simulations.designs.base import CheckpointRow

    if design.config.test != "welch":
        st = design.checkpoint_stats()
        n_a, n_b, m_a, m_b, n_impr = st.n_a, st.n_b, st.impressions_a, st.impressions_b, st.n_impressions
    else:
        imp = design.sums["impressions"]
        _, _, _, users_a, users_b = design.active_arms()
        m_a, m_b = imp.take(users_a), imp.take(users_b)  # each arm's impressions, once for both impression tests
        n_a, n_b, n_impr = int(users_a.size), int(users_b.size), int(imp.sum())
    n_users = n_a + n_b
    tests = _srm_values(n_a, n_b, m_a, m_b, design.config.share_b)
    rows = []
    for name in SRM_CHECKS:
        share, pvalue = tests[name]
        rows.append(CheckpointRow(design.name, design.aa, day, SRM_PREFIX + name, False, share, math.nan, math.nan,
                                  math.nan, pvalue, n_users, n_impr))
    return rows


def _chisquare_two(c_a: float, c_b: float, pb: float) -> tuple[float, float]:
    """``(observed share of B, p-value)`` of :func:`onlineeval.stats.srm.srm_chisquare` of the counts
    ``[c_a, c_b]`` against the shares ``[1 - pb, pb]``: its operations in its order on Python floats (two-element
    sums add the second to the first; ``x ** 2`` of an array is ``x * x``), the same bits (tested)."""
    from scipy import special

    s_a, s_b = 1 - pb, pb
    total_s = s_a + s_b
    pi_a, pi_b = s_a / total_s, s_b / total_s
    n = c_a + c_b
    e_a, e_b = n * pi_a, n * pi_b
    d_a, d_b = c_a - e_a, c_b - e_b
    stat = (d_a * d_a / (e_a if e_a > 0 else 1.0) + d_b * d_b / (e_b if e_b > 0 else 1.0)) if n > 0 else 0.0
    return (c_b / n if n > 0 else math.nan), float(special.chdtrc(1, stat))


def _srm_values(n_a: int, n_b: int, m_a: np.ndarray, m_b: np.ndarray, pb: float) -> dict[str, tuple[float, float]]:
    """The three checks' ``(observed share of B, p-value)``: :func:`onlineeval.stats.srm.srm_chisquare` of the
    users and of the impressions per arm, :func:`onlineeval.stats.srm.srm_impressions` of the impressions per
    user (``m_a``, ``m_b``), by their operations in their order on the same kinds of numbers (``x ** 2`` of a
    NumPy scalar is ``pow``, which can differ from ``x * x`` in the last bit), the same bits (tested), without
    their validation and result objects."""
    from scipy import special

    t_a, t_b = m_a.sum(), m_b.sum()
    ss = (m_a * m_a).sum() + (m_b * m_b).sum()
    tot = t_a + t_b
    var = pb * (1.0 - pb) * ss
    dev = np.float64(t_b - pb * tot)  # a NumPy scalar, as in srm_impressions: ** 2 is the scalar power
    z2 = dev**2 / var if var > 0 else 0.0
    return {
        "users": _chisquare_two(float(n_a), float(n_b), pb),
        "impressions": (float(t_b / tot) if tot > 0 else math.nan, float(special.chdtrc(1, z2))),
        "impressions_naive": _chisquare_two(float(t_a), float(t_b), pb),
    }


def srm_summary(side_rows: pd.DataFrame, designs: dict[str, Any], config: Any) -> dict[str, Any]:
    """Per A/B design and variant (``experiment``, ``aa``) and check: the share of replicates
    flagged on the last day with its exact 99% binomial band under a correct split, the share
    flagged on any day, the mean observed share of B; with an injected split, the bias of
    every metric's estimate against the exact truth (from the main table)."""
    from onlineeval.stats import binomial_band

    out: dict[str, Any] = {}
    for design in config.designs:
        if design.type != "ab":
            continue
        srm = design.analysis.srm
        entry: dict[str, Any] = {"alpha": srm.alpha, "planned_share_b": design.share_b,
                                 "inject": None if srm.inject is None else srm.inject.model_dump()}
        mine = side_rows[side_rows["design"] == design.name]
        for aa in (False, True):
            variant: dict[str, Any] = {}
            for check in SRM_CHECKS:
                sub = mine[(mine["aa"] == aa) & (mine["metric"] == SRM_PREFIX + check)]
                if not len(sub):
                    continue
                last = sub[sub["day"] == sub["day"].max()]
                p = last["pvalue"].to_numpy()
                k = int(np.sum(p < srm.alpha))
                band = binomial_band(p.size, srm.alpha, 0.99)
                ever = sub.groupby("replicate")["pvalue"].min().to_numpy() < srm.alpha
                variant[check] = {
                    "replicates": int(p.size),
                    "flagged_last_day": k / p.size,
                    "binomial_99_band": [band.lo_rate, band.hi_rate],
                    "within_band": band.contains(k),
                    "flagged_any_day": float(ever.mean()),
                    "mean_share_b": float(last["estimate"].mean()),
                }
            if variant:
                entry["aa" if aa else "experiment"] = variant
        if srm.inject is not None and design.name in designs:
            entry["effect_on_estimates"] = {
                metric: {"mean_estimate": e["final_day"]["mean_estimate"], "true_effect": e["true_effect"],
                         "bias": e["estimator_bias"], "bias_se": e["estimator_bias_se"],
                         "biased": e.get("biased_estimate", False)}
                for metric, e in designs[design.name].items()
            }
        out[design.name] = entry
    return out


def srm_lines(summary: dict[str, Any]) -> list[str]:
    """The terminal block of :func:`srm_summary`."""
    from simulations.report import rate_text, se_text, value_text

    srm = summary.get("srm") or {}
    if not srm:
        return []
    lines = ["", ("Sample ratio mismatch (share of replicates flagged at p < the SRM alpha on the last day, '!' = "
                  "outside "
                  "its 99% binomial band under a correct split; impressions: clustered by user, naive: as independent "
                  "units; any day: flagged at some daily look):"),
             f"  {'design':12s} {'variant':10s} {'users':>14s} {'impressions':>14s} {'naive impr.':>14s}  B share"]
    naive_only: list[str] = []  # correct-looking splits that only the naive impressions check flags
    for design, e in srm.items():
        for variant in ("experiment", "aa"):
            v = e.get(variant)
            if not v:
                continue
            checks = {check: v.get(check) for check in SRM_CHECKS}
            if (not e.get("inject") and all(c is not None for c in checks.values())
                    and not checks["impressions_naive"]["within_band"]
                    and checks["users"]["within_band"] and checks["impressions"]["within_band"]):
                naive_only.append(f"{design} {variant}")
            cells = []
            for check in SRM_CHECKS:
                c = v.get(check)
                cells.append("-" if c is None else f"{rate_text(c['flagged_last_day'])}"
                             f"{'' if c['within_band'] else '!'} ({rate_text(c['flagged_any_day'])})")
            share = v.get("users", {}).get("mean_share_b", math.nan)
            lines.append(f"  {design:12s} {variant:10s} {cells[0]:>14s} {cells[1]:>14s} {cells[2]:>14s}  "
                         f"{rate_text(share)} (planned {e['planned_share_b']:g}, alpha {e['alpha']:g})")
        inj = e.get("inject")
        if inj:
            lines.append(f"    injected: {inj['share']:.0%} of the {inj['user_type']} users of the other arm moved to "
                         f"{inj['arm']}; effect on the estimates (mean - exact truth, Monte Carlo SE):")
            for metric, x in e.get("effect_on_estimates", {}).items():
                z = x["bias"] / x["bias_se"] if x["bias_se"] else math.nan
                lines.append(f"      {metric:17s} bias {value_text(x['bias'], True)} (SE {se_text(x['bias_se'])}, "
                             f"{z:+.1f} SE{', biased' if x['biased'] else ''}; "
                             f"truth {value_text(x['true_effect'], True)})")
    if naive_only:
        lines.append(f"  naive impr. flagged ({', '.join(naive_only)}) while the users' and the clustered impressions' "
                     "checks are within their bands: a returning user's impressions all go to one arm, so they are not "
                     "independent units, and a check that counts them as such (a dashboard's) flags a correct split; "
                     "read the clustered check")
    return lines
