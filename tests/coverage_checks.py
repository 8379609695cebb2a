"""Coverage of a linearised interval over many simulated logs: the bands the direct method's coverage tests share
(``tests/test_dm_dcm_world.py``, ``tests/test_dm_chain_world.py``, ``tests/test_dm_ctr_world.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from scipy import stats


def sd_band(reps: int) -> tuple[float, float]:
    """The band of an SD over a correct SE among ``reps`` normal estimates: chi2(reps - 1) at 4 normal SEs."""
    p = 2 * stats.norm.sf(4.0)
    lo, hi = (float(np.sqrt(stats.chi2.ppf(x, reps - 1) / (reps - 1))) for x in (p / 2, 1 - p / 2))
    return lo, hi


def assert_linearised_coverage(est: Any, logs: Sequence[Any], cases: Iterable[tuple[Any, str, float]],
                               check_mean: bool = True) -> None:
    """For each ``(target, reward, truth)`` of ``cases``, over the ``logs``: every estimate's SE linearised (no
    held-fixed warning), the estimates' SD over their mean SE in :func:`sd_band`, the 95% interval covering ``truth``
    at least the nominal's 0.5% binomial quantile of times and (``check_mean``) the estimates' mean within 4 SE of
    ``truth``."""
    reps = len(logs)
    lo_sd, hi_sd = sd_band(reps)
    lo_cover = stats.binom.ppf(0.005, reps, 0.95)
    for target, rw, truth in cases:
        vals, ses, covered = np.empty(reps), np.empty(reps), 0
        for r, data in enumerate(logs):
            e = est.estimate(data, target, rw)
            vals[r], ses[r] = e.value, e.se
            covered += e.ci_low <= truth <= e.ci_high
            assert e.held_fixed is None and e.diagnostics.notes["se"].startswith("linearised"), e.warnings()
        sd = vals.std(ddof=1)
        assert lo_sd <= sd / ses.mean() <= hi_sd, (target.name, rw, sd / ses.mean())
        assert covered >= lo_cover, (target.name, rw, covered)
        if check_mean:
            assert abs(vals.mean() - truth) <= 4 * sd / np.sqrt(reps), (target.name, rw, vals.mean(), truth)
