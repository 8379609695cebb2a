"""The seeding of scipy's randomised references in the tests (``bootstrap``, ``permutation_test``,
``multivariate_normal(...).cdf``): ``rng`` from scipy 1.15 on, ``random_state`` (or the distribution's ``seed``)
before. The project allows scipy 1.10 and later, and the tests' references must run there too; the same seeded
stream either way."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy

_NEW = tuple(int(x) for x in scipy.__version__.split(".")[:2]) >= (1, 15)


def seeded(seed: int) -> dict[str, Any]:
    """``{"rng": Generator(seed)}`` for scipy >= 1.15, else ``{"random_state": Generator(seed)}``."""
    return {"rng" if _NEW else "random_state": np.random.default_rng(seed)}


def mvn_cdf(mean: Any, cov: Any, upper: Any, lower: Any, seed: int) -> float:
    """``multivariate_normal(mean, cov).cdf(upper, lower_limit=lower)`` with a seeded generator for its Genz
    integration: passed to ``cdf`` as ``rng`` from scipy 1.15 on, to the distribution as ``seed`` before."""
    from scipy import stats

    gen = np.random.default_rng(seed)
    if _NEW:
        return float(stats.multivariate_normal(mean=mean, cov=cov).cdf(upper, lower_limit=lower, rng=gen))
    return float(stats.multivariate_normal(mean=mean, cov=cov, seed=gen).cdf(upper, lower_limit=lower))
