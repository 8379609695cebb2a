"""Statistics: online-experiment analysis (user-clustered), power, paired significance tests.

* :mod:`onlineeval.stats.online` - per-user analysis of A/B tests and interleaving:
  Welch t-test, delta-method ratio metrics, cluster bootstrap.
* :mod:`onlineeval.stats.power` - analytic power / sample size, binomial bands.
* :mod:`onlineeval.stats.paired` - paired significance tests of offline evaluation
  (randomisation test, bootstrap CIs, t-test, Holm) and segment analysis.
"""

from __future__ import annotations

from onlineeval.stats.online import (
    Estimate,
    Estimates,
    cluster_bootstrap_ratio,
    ratio_diff,
    ratio_diff_batch,
    ratio_linearization,
    ratio_mean,
    ratio_mean_batch,
    welch_diff,
    welch_diff_batch,
)
from onlineeval.stats.paired import (
    MISSING_SEGMENT,
    BootstrapCI,
    PairedResult,
    QueryDiff,
    RandomizationResult,
    SegmentView,
    by_segment,
    compare_segments,
    compare_systems,
    holm,
    iter_segments,
    paired_bootstrap,
    paired_t_test,
    randomization_test,
    read_segments,
    results_to_frame,
    worst_losses_to_frame,
)
from onlineeval.stats.power import (
    BinomialBand,
    binomial_band,
    mde_two_sample,
    power_one_sample,
    power_two_sample,
    required_n_one_sample,
    required_n_two_sample,
)

__all__ = [
    "Estimate",
    "Estimates",
    "welch_diff",
    "welch_diff_batch",
    "ratio_mean_batch",
    "ratio_diff_batch",
    "ratio_mean",
    "ratio_diff",
    "ratio_linearization",
    "cluster_bootstrap_ratio",
    "power_two_sample",
    "required_n_two_sample",
    "mde_two_sample",
    "power_one_sample",
    "required_n_one_sample",
    "BinomialBand",
    "binomial_band",
    "RandomizationResult",
    "BootstrapCI",
    "QueryDiff",
    "PairedResult",
    "SegmentView",
    "MISSING_SEGMENT",
    "paired_t_test",
    "randomization_test",
    "paired_bootstrap",
    "holm",
    "compare_systems",
    "results_to_frame",
    "worst_losses_to_frame",
    "read_segments",
    "iter_segments",
    "by_segment",
    "compare_segments",
]
