"""Statistics: online-experiment analysis (user-clustered), power, paired significance tests.

* :mod:`onlineeval.stats.online` - per-user analysis of A/B tests and interleaving:
  Welch t-test, delta-method ratio metrics, cluster bootstrap.
* :mod:`onlineeval.stats.small_sample` - a ratio metric's A/B difference with few users (CR2 variance, Student's t
  with Bell and McCaffrey's degrees of freedom).
* :mod:`onlineeval.stats.power` - analytic power / sample size, binomial bands.
* :mod:`onlineeval.stats.paired` - paired significance tests of offline evaluation
  (randomisation test, bootstrap CIs, t-test, Holm) and segment analysis.
* :mod:`onlineeval.stats.sequential` - peeking, always-valid tests (mSPRT, confidence
  sequences) and group-sequential boundaries with alpha spending.
* :mod:`onlineeval.stats.cuped` - CUPED variance reduction with pre-period data (:mod:`~onlineeval.stats.cuped_welch`:
  the per-user means' Welch-type t; :mod:`~onlineeval.stats.cuped_cr2`: the ratio's CR2 form for few users).
* :mod:`onlineeval.stats.srm` - sample-ratio-mismatch checks.
* :mod:`onlineeval.stats.multiple` - Holm and Benjamini-Hochberg across metrics or pairs.

Names are imported lazily on first use (PEP 562), so importing one light submodule (e.g.
``sequential``, used by the fast ``onlineeval power`` command) does not load pandas or scipy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onlineeval.stats.cuped import (
        CupedResult,
        cuped_mean,
        cuped_ratio,
    )
    from onlineeval.stats.cuped_cr2 import cuped_ratio_cr2
    from onlineeval.stats.multiple import (
        adjust_pvalues,
        reject_adjusted,
    )
    from onlineeval.stats.online import (
        Estimate,
        Estimates,
        cluster_bootstrap_ratio,
        cluster_resample_counts,
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
        power_one_sample_t,
        power_two_sample,
        required_n_one_sample,
        required_n_one_sample_t,
        required_n_two_sample,
    )
    from onlineeval.stats.sequential import (
        Boundaries,
        Crossing,
        SequentialResult,
        classic_boundaries,
        confidence_sequence,
        crossing_probabilities,
        drift_for_power,
        equal_fractions,
        group_sequential_test,
        inflation_factor,
        mixture_boundaries,
        mixture_tau,
        msprt,
        peeking_boundaries,
        peeking_fpr,
        peeking_test,
        sequential_test,
        spending_boundaries,
        z_equivalent,
    )
    from onlineeval.stats.small_sample import intra_user_correlation, ratio_diff_cr2, ratio_mean_cr2
    from onlineeval.stats.srm import (
        SrmResult,
        srm_chisquare,
        srm_impressions,
    )

_EXPORTS: dict[str, str] = {
    "Estimate": "online",
    "Estimates": "online",
    "welch_diff": "online",
    "welch_diff_batch": "online",
    "ratio_mean_batch": "online",
    "ratio_diff_batch": "online",
    "ratio_mean": "online",
    "ratio_diff": "online",
    "ratio_diff_cr2": "small_sample",
    "intra_user_correlation": "small_sample",
    "ratio_mean_cr2": "small_sample",
    "ratio_linearization": "online",
    "cluster_bootstrap_ratio": "online",
    "cluster_resample_counts": "online",
    "power_two_sample": "power",
    "required_n_two_sample": "power",
    "mde_two_sample": "power",
    "power_one_sample": "power",
    "required_n_one_sample": "power",
    "power_one_sample_t": "power",
    "required_n_one_sample_t": "power",
    "BinomialBand": "power",
    "binomial_band": "power",
    "RandomizationResult": "paired",
    "BootstrapCI": "paired",
    "QueryDiff": "paired",
    "PairedResult": "paired",
    "SegmentView": "paired",
    "MISSING_SEGMENT": "paired",
    "paired_t_test": "paired",
    "randomization_test": "paired",
    "paired_bootstrap": "paired",
    "holm": "paired",
    "compare_systems": "paired",
    "results_to_frame": "paired",
    "worst_losses_to_frame": "paired",
    "read_segments": "paired",
    "iter_segments": "paired",
    "by_segment": "paired",
    "compare_segments": "paired",
    "SequentialResult": "sequential",
    "Boundaries": "sequential",
    "Crossing": "sequential",
    "spending_boundaries": "sequential",
    "classic_boundaries": "sequential",
    "mixture_boundaries": "sequential",
    "peeking_boundaries": "sequential",
    "crossing_probabilities": "sequential",
    "peeking_fpr": "sequential",
    "drift_for_power": "sequential",
    "inflation_factor": "sequential",
    "mixture_tau": "sequential",
    "msprt": "sequential",
    "confidence_sequence": "sequential",
    "group_sequential_test": "sequential",
    "peeking_test": "sequential",
    "sequential_test": "sequential",
    "z_equivalent": "sequential",
    "equal_fractions": "sequential",
    "CupedResult": "cuped",
    "cuped_mean": "cuped",
    "cuped_ratio": "cuped",
    "cuped_ratio_cr2": "cuped_cr2",
    "SrmResult": "srm",
    "srm_chisquare": "srm",
    "srm_impressions": "srm",
    "adjust_pvalues": "multiple",
    "reject_adjusted": "multiple",
}
_SUBMODULES = frozenset({"online", "paired", "power", "sequential", "cuped", "cuped_cr2", "cuped_welch", "srm",
                         "multiple", "small_sample"})

__all__ = [
    "MISSING_SEGMENT",
    "BinomialBand",
    "BootstrapCI",
    "Boundaries",
    "Crossing",
    "CupedResult",
    "Estimate",
    "Estimates",
    "PairedResult",
    "QueryDiff",
    "RandomizationResult",
    "SegmentView",
    "SequentialResult",
    "SrmResult",
    "adjust_pvalues",
    "binomial_band",
    "by_segment",
    "classic_boundaries",
    "cluster_bootstrap_ratio",
    "cluster_resample_counts",
    "compare_segments",
    "compare_systems",
    "confidence_sequence",
    "crossing_probabilities",
    "cuped_mean",
    "cuped_ratio",
    "cuped_ratio_cr2",
    "drift_for_power",
    "equal_fractions",
    "group_sequential_test",
    "holm",
    "inflation_factor",
    "intra_user_correlation",
    "iter_segments",
    "mde_two_sample",
    "mixture_boundaries",
    "mixture_tau",
    "msprt",
    "paired_bootstrap",
    "paired_t_test",
    "peeking_boundaries",
    "peeking_fpr",
    "peeking_test",
    "power_one_sample",
    "power_one_sample_t",
    "power_two_sample",
    "randomization_test",
    "ratio_diff",
    "ratio_diff_batch",
    "ratio_diff_cr2",
    "ratio_mean_cr2",
    "ratio_linearization",
    "ratio_mean",
    "ratio_mean_batch",
    "read_segments",
    "reject_adjusted",
    "required_n_one_sample",
    "required_n_one_sample_t",
    "required_n_two_sample",
    "results_to_frame",
    "sequential_test",
    "spending_boundaries",
    "srm_chisquare",
    "srm_impressions",
    "welch_diff",
    "welch_diff_batch",
    "worst_losses_to_frame",
    "z_equivalent",
]


def __getattr__(name: str) -> Any:
    """Import an exported name (or a submodule) on first access."""
    if name in _SUBMODULES:
        return importlib.import_module(f"onlineeval.stats.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'onlineeval.stats' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"onlineeval.stats.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)
