"""Kernel-level properties: fast and generic samplers agree; exact probabilities by enumeration."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import clickmodels
from clickmodels import kernels
from clickmodels.checks import check_likelihood_is_distribution

probs = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def test_fast_sampler_blocks_equal_generic_sampler() -> None:
    rng = np.random.default_rng(0)
    n, k = 2 * kernels.BLOCK + 103, 7  # three blocks, the last one partial
    labels = rng.integers(-1, 4, size=(n, k)).astype(np.int8)
    a = np.array([0.1, 0.4, 0.7, 0.9, 0.0])
    c1 = np.array([[0.3, 0.5, 0.2, 0.9, 0.1]]) * np.linspace(0.5, 1.0, k)[:, None]  # (rank, grade)
    c0 = np.array([0.9, 0.8, 0.95, 0.7, 1.0])
    fast = kernels.chain_sample_grades(labels, a, c1, c0, np.random.default_rng(5))
    # generic path on per-slot arrays
    idx = labels % 5
    A = a[idx]
    C1 = c1[np.arange(k)[None, :], idx]
    C0 = np.where(labels >= 0, c0[idx], 1.0)
    clicks, examined = kernels.chain_sample(A, C1, C0, np.random.default_rng(5), labels.shape)
    assert np.array_equal(fast[0], clicks)
    assert np.array_equal(fast[1], examined & (labels >= 0))
    exam = kernels.chain_examination(A, C1, C0, labels.shape)
    np.testing.assert_allclose(fast[2], np.where(labels >= 0, exam, 0.0), rtol=1e-12)
    # a small chunk draws small blocks: same clicks as the threshold sampler on those draws
    small = kernels.chain_sample_grades(labels[:100], a, c1, c0, np.random.default_rng(6), chunk=9)
    u = kernels.blocked_uniforms(np.random.default_rng(6), k, 100, block=9).T
    ref = kernels.chain_sample_thresholds(u, *kernels.chain_thresholds(A[:100], C1[:100], C0[:100]))
    assert np.array_equal(small[0], ref[0])


def chain_joint(a: np.ndarray, c1: np.ndarray, c0: np.ndarray, clicks: tuple[int, ...]) -> float:
    """P(click pattern) of one list under the cascade chain, by enumerating every
    continue/stop path (reference; shares no recursion with the kernels; also used by
    tests/test_clickmodels_fit.py for the fitted records)."""
    k = len(a)
    total = 0.0
    for goes in itertools.product((0, 1), repeat=k):
        p, alive = 1.0, True
        for r in range(k):
            if not alive:
                if clicks[r] or goes[r]:
                    p = 0.0
                continue
            p *= a[r] if clicks[r] else 1 - a[r]
            c = c1[r] if clicks[r] else c0[r]
            p *= c if goes[r] else 1 - c
            alive = bool(goes[r])
        total += p
    return total


def _enumerate_chain(a: np.ndarray, c1: np.ndarray, c0: np.ndarray) -> np.ndarray:
    """Marginal click probabilities of one list by enumerating every path (reference)."""
    patterns = itertools.product((0, 1), repeat=len(a))
    return sum((chain_joint(a, c1, c0, c) * np.array(c) for c in patterns), np.zeros(len(a)))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(probs, probs, probs), min_size=1, max_size=4))
def test_chain_probabilities_match_path_enumeration(params: list[tuple[float, float, float]]) -> None:
    a, c1, c0 = (np.array(x) for x in zip(*params))
    k = len(a)
    exact = kernels.chain_examination(a[None], c1[None], c0[None], (1, k))[0] * a
    np.testing.assert_allclose(exact, _enumerate_chain(a, c1, c0), atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(["cascade", "dbn", "ccm", "dcm", "ubm", "pbm", "sdbn", "cm", "rbp"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_parameters_give_a_proper_likelihood(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = clickmodels.model_class(name).example()
    grades = 3
    changes = {f: clickmodels.ByGrade(tuple(rng.uniform(0, 1, grades))) for f in base.doc_params()}
    model = replace(base, **changes)
    labels = rng.integers(-1, grades, size=(6, 5))
    labels[:, 0] = np.maximum(labels[:, 0], 0)
    check_likelihood_is_distribution(model, clickmodels.as_impressions(labels))
