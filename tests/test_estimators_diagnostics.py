"""The weight diagnostics' linear-time top-1% sum equals a full partition, ties included."""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.estimators.base import _top_k_sum


@pytest.mark.parametrize("kind", ["uniform", "few_values", "rare_large", "pareto", "constant"])
@pytest.mark.parametrize("n", [10, 1000, 500_000, 1_200_000])
def test_top_k_sum_equals_partition(kind: str, n: int) -> None:
    rng = np.random.default_rng(n + len(kind))
    v = {
        "uniform": lambda: rng.random(n),
        "few_values": lambda: np.round(rng.random(n) * 5) + 1,
        "rare_large": lambda: np.where(rng.random(n) < 0.005, 100.0, 1.0),
        "pareto": lambda: rng.pareto(1.5, n) + 1e-3,
        "constant": lambda: np.full(n, 2.5),
    }[kind]()
    k = max(1, int(np.ceil(0.01 * n)))
    reference = float(np.partition(v, n - k)[n - k:].sum())
    assert _top_k_sum(v, k) == pytest.approx(reference, rel=1e-12)
