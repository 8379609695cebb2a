"""Off-policy estimates whose SE holds a data-driven choice fixed: the measure their sizes and power use.

Such an estimate (adaptive IPS's behaviours, a click model fitted on the log:
:func:`simulations.designs.counterfactual.serving.held_fixed`) reports an SE known to be too small; its sizes use the
replicates' SD of its estimates (:data:`HELD_SE_MEASURE`), with the mean SE over that SD and its jackknife SE
(:func:`se_sd_ratio`, :func:`se_sd_ratio_text`), and its power the last day's bootstrap test
(:data:`HELD_POWER_BOOTSTRAP`) or none (:data:`HELD_POWER_WITHHELD`). Re-exported by :mod:`simulations.analysis`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


#: which measure gives the sizes of an estimate whose SE holds a data-driven choice fixed
HELD_SE_MEASURE = ("replicates' SD of the estimates (its delta-method SE holds {what} fixed and is too small; "
                   "{se_is}: mean SE / SD = {ratio} on the last day{precision})")


def sd_relative_se(replicates: int) -> float:
    r"""The relative SE of the SD of ``replicates`` normal values, exactly: :math:`\sqrt{1 - c_4^2}/c_4` with
    :math:`c_4 = \sqrt{2/(R-1)}\,\Gamma(R/2)/\Gamma((R-1)/2)` (:math:`E[s] = c_4\sigma`), about
    :math:`1/\sqrt{2(R-1)}` for many replicates (0.523 against 0.5 at 3, 0.0502 against 0.0501 at 200)."""
    r = float(replicates)
    c4 = math.sqrt(2.0 / (r - 1.0)) * math.exp(math.lgamma(r / 2.0) - math.lgamma((r - 1.0) / 2.0))
    return math.sqrt(max(1.0 - c4 * c4, 0.0)) / c4


def sd_jackknife_rel_se(estimates: Any) -> float | None:
    r"""The jackknife relative SE of the SD of ``estimates`` (finite values only): leaving value :math:`i` out gives
    :math:`(R-2)\,s_{-i}^2 = SS_{-i}` (:func:`_leave_one_out_ss`), and :math:`SE^2 = (R-1)/R \sum_i (s_{-i} -
    \bar s_{-})^2`, over :math:`s`. Unlike :func:`sd_relative_se` it assumes no distribution: with heavy tails it is
    several times the normal value (a few replicates holding the spread). None below 4 values or with SD 0."""
    x = np.asarray(estimates, dtype=np.float64)
    x = x[np.isfinite(x)]
    r = int(x.size)
    if r < 4:
        return None
    ss, ss_loo = _leave_one_out_ss(x)
    if not ss > 0:
        return None
    s_loo = np.sqrt(ss_loo / (r - 2))
    jack = math.sqrt((r - 1) / r * float(np.sum((s_loo - s_loo.mean()) ** 2)))
    return jack / math.sqrt(ss / (r - 1))


#: the jackknife's relative SE of the SD replaces the normal value above this multiple of it (:func:`sd_precision_text`)
HEAVY_SD_FACTOR = 1.5


def sd_precision_text(replicates: int, estimates: Any = None) -> str:
    """How precise the replicates' SD is that a held-fixed estimate's analytic power and sizes rest on: its relative
    SE (:func:`sd_relative_se`) and the sizes' (they scale with its square: twice that), with a warning where the
    sizes' passes 25% (the main table's rule for an unstable size): 10% at 200 replicates, 33% at 20, 152% at 2
    (where the analytic power was printed as if measured). With the ``estimates`` (4 or more), the jackknife's
    relative SE of their SD (:func:`sd_jackknife_rel_se`) where it is above :data:`HEAVY_SD_FACTOR` times the
    normal value: heavy tails, where the normal value said 5% of an SD resting on a few replicates (near-normal
    estimates keep the normal value, which the jackknife only scatters around)."""
    if replicates < 2:
        return ""
    rel = sd_relative_se(replicates)
    jack = sd_jackknife_rel_se(estimates) if estimates is not None else None
    if jack is not None and jack > HEAVY_SD_FACTOR * rel:
        text = (f"; that SD over {replicates} replicates has a relative SE of about {jack:.0%} by the jackknife of "
                f"its replicates ({rel:.0%} were they normal), the sizes, which scale with its square, about "
                f"{2 * jack:.0%}")
        rel = jack
    else:
        text = (f"; that SD over {replicates} replicates has a relative SE of about {rel:.0%} (normal estimates), "
                f"the sizes, which scale with its square, about {2 * rel:.0%}")
    return text + (": too few replicates to read the analytic power and sizes" if 2 * rel > 0.25 else "")


def _leave_one_out_ss(x: np.ndarray) -> tuple[float, np.ndarray]:
    r"""``(SS, SS_{-i})``: the sum of squared deviations of ``x`` (finite, 3 or more values) and, for each ``i``, that
    of ``x`` without value ``i``, in closed form :math:`SS - R/(R-1)\,(x_i - \bar x)^2`. The closed form cancels
    where value ``i`` holds nearly all the spread (1/3 five times and 0.9 once left ~1e-17 for an SD of 0, an SE
    of 2.2e7): those values' leave-one-out SS are computed directly, 0 when the rest are equal. Elsewhere (at
    least 1e-4 of SS) it loses at most ~4 of float64's 16 digits."""
    r = x.size
    d = x - x.mean()
    ss = float(d @ d)
    ss_loo = np.maximum(ss - r / (r - 1) * d * d, 0.0)
    for i in np.flatnonzero(ss_loo < 1e-4 * ss):
        rest = np.delete(x, i)
        ss_loo[i] = 0.0 if np.ptp(rest) == 0 else float(np.sum((rest - rest.mean()) ** 2))
    return ss, ss_loo


def se_sd_ratio(estimates: Any, ses: Any) -> dict[str, Any] | None:
    r"""The mean reported SE over the replicates' SD of the estimates, with its jackknife SE over the replicates:
    ``{"ratio", "se", "replicates"}`` (``se`` None below 4 replicates or when a replicate's removal leaves no
    spread), or None when undefined (fewer than 2 finite pairs, SD 0).

    Leaving replicate :math:`i` out gives :math:`\theta_{-i} = \bar m_{-i} / s_{-i}` in closed form
    (:math:`(R-2)\,s_{-i}^2 = SS - R/(R-1)\,(x_i - \bar x)^2`; directly where that cancels, below
    :math:`10^{-4} SS`, and 0 when the other replicates are equal), and
    :math:`SE^2 = (R-1)/R \sum_i (\theta_{-i} - \bar\theta)^2`. Unlike a delta method that combines the SD's
    error (from the estimates' fourth moment) and the mean SE's as if independent, it carries their correlation
    (a replicate far from the mean often reports a larger SE) and the tails' own spread. Checked by simulation
    (tests/test_se_sd_ratio.py): its mean over simulated sets is within 1% of the ratios' SD for 200 normal
    replicates, also with SEs that grow with the estimate's distance from the mean (the independent combination
    read 26% large there), and 3.5% below it for 60 t5 replicates (the fourth-moment formula read 19% below); its
    square's mean is not below the spread (Efron-Stein), so that shortfall of the SE's mean is Jensen's."""
    x, se = np.asarray(estimates, dtype=np.float64), np.asarray(ses, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(se)
    x, se = x[ok], se[ok]
    r = int(x.size)
    if r < 2:
        return None
    s, m = float(x.std(ddof=1)), float(se.mean())
    if not s > 0:
        return None
    ratio = m / s
    if r < 4:
        return {"ratio": ratio, "se": None, "replicates": r}
    s2_loo = _leave_one_out_ss(x)[1] / (r - 2)
    if not np.all(s2_loo > 0):
        return {"ratio": ratio, "se": None, "replicates": r}
    theta = (float(se.sum()) - se) / (r - 1) / np.sqrt(s2_loo)
    jack = math.sqrt((r - 1) / r * float(np.sum((theta - theta.mean()) ** 2)))
    return {"ratio": ratio, "se": jack, "replicates": r}


def se_sd_ratio_text(q: dict[str, Any] | None) -> str:
    """'0.93 +- 0.05 over 200 replicates' of :func:`se_sd_ratio` (and '; below 1 by more than 2 SE: the se column
    runs small' when it does), 'undefined' without one."""
    if q is None:
        return "undefined"
    text = f"{q['ratio']:.2f}"
    if q.get("se") is None:
        if q["replicates"] < 4:
            return f"{text} over {q['replicates']} replicates (too few for its SE)"
        return f"{text} over {q['replicates']} replicates (its SE undefined: one replicate holds all the spread)"
    text += f" +- {q['se']:.2f} over {q['replicates']} replicates"
    if q["ratio"] + 2 * q["se"] < 1:
        text += "; below 1 by more than 2 SE: the se column runs small"
    return text


#: ... and its power
HELD_POWER_BOOTSTRAP = ("last day's bootstrap test ({b} resamples of the users, the choice made again in each; "
                        "percentile p-value); other days' power not measured")


#: an estimate whose reported SE runs small is one whose mean SE / SD on the last day is below 1 by more than this
#: many of its jackknife SEs (:func:`small_se`)
SMALL_SE_SES = 4.0

#: which measure gives the sizes of an estimate whose reported SE runs small (:func:`small_se`)
SMALL_SE_MEASURE = ("replicates' SD of the estimates (its reported SE runs small: mean SE / SD = {ratio} on the last "
                    "day, below 1 by more than {k:g} of its jackknife SEs: its spread comes from rare large "
                    "values, such as off-policy weights a log seldom draws or a metric's rare events{precision})")

#: ... and its simulated power
SMALL_SE_POWER = ("the replicates' p-values, from the reported SE that runs small: they reject more often than a "
                  "valid SE would, so the power is overstated (its coverage column shows the intervals' shortfall)")


def small_se(estimates: Any, ses: Any) -> dict[str, Any] | None:
    """:func:`se_sd_ratio` of the last day's estimates and SEs where it is below 1 by more than
    :data:`SMALL_SE_SES` of its jackknife SEs (the estimate's sizes then come from the replicates' SD, as a
    held-fixed estimate's), else None (no SE for the ratio: None too). On configs/counterfactual.yaml at 1,000
    replicates no estimate but adaptive IPS (held fixed already) comes near it (RIPS 0.94 +- 0.02 at one seed, 1.07
    at another); with an epsilon-greedy logger at epsilon 0.05 and 150 queries a day, SNIPS 0.13 +- 0.03 and RIPS
    0.12 +- 0.20 over 200 replicates (sized from the mean SE, their sizes would be 1 / ratio^2, about 60x, too
    small). Under its null (SEs right, 5% noise on each) it fired in 0 of 4,000 sets of 30 normal estimates, 3 of
    4,000 of 30 skewed ones (centred lognormal), 1 of 1,500 of 200 normal ones; 0.1-0.5% at 5-10 replicates
    (tests/test_small_se_sizes.py)."""
    q = se_sd_ratio(estimates, ses)
    if q is None or q.get("se") is None or not q["ratio"] + SMALL_SE_SES * q["se"] < 1:
        return None
    return q


HELD_POWER_WITHHELD = ("withheld: without the last day's bootstrap (designs[].bootstrap 0) its p-values come from "
                       "the delta-method SE, which holds {what} fixed; the analytic power and sizes use the "
                       "replicates' SD")
