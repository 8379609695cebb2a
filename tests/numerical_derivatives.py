"""Scores and observed information of a click model's sessions by central differences of their log-likelihoods: the
reference the linearised intervals' closed-form terms are checked against (``tests/test_dm_dcm_world.py``,
``tests/test_dm_chain_world.py``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def scores_and_information(lls: Callable[[np.ndarray], np.ndarray],
                           x0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, information)``: ``(n, p)`` the derivatives of each session's log-likelihood ``lls(x)`` (``(n,)``) in
    the parameters ``x0`` (probabilities strictly inside (0, 1)), ``(p, p)`` minus the Hessian of their sum. Steps
    relative to each parameter's distance from its bounds (1e-3 of it): a relevance of 0.014 (an SDBN world's pair)
    has a fourth derivative that puts a fixed step of 1e-5 0.02% off."""
    steps = 1e-3 * np.minimum(x0, 1.0 - x0)
    eye = np.eye(x0.size) * steps[:, None]
    scores = np.stack([(lls(x0 + e) - lls(x0 - e)) / (2 * h) for e, h in zip(eye, steps)], axis=1)
    info = np.empty((x0.size, x0.size))
    for i, ei in enumerate(eye):
        for j, ej in enumerate(eye[: i + 1]):
            v = -sum(sign * float(lls(x0 + si * ei + sj * ej).sum())
                     for sign, si, sj in ((1, 1, 1), (-1, 1, -1), (-1, -1, 1), (1, -1, -1)))
            info[i, j] = info[j, i] = v / (4 * steps[i] * steps[j])
    return scores, info


def check_terms(correction, mdl, data, target, reward, scores: np.ndarray, info: np.ndarray,
                value: Callable[[np.ndarray], float], x0: np.ndarray) -> None:
    """The closed-form terms ``correction(mdl, data, target, reward)`` against ``n g' H^-1 s_i`` (``scores`` and
    ``info`` numerical, ``g`` the central differences of ``value`` at ``x0``, steps 1e-6) to 1e-4 of the largest
    term (their means aside: 0 at the maximum, which EM reaches to its tolerance); and the terms with the
    information's pairwise entries summed by the sparse matrix (``TABLE_MAX`` 0) equal to the table's to 1e-10."""
    import pytest

    eye = np.eye(x0.size)
    g = np.array([(value(x0 + 1e-6 * e) - value(x0 - 1e-6 * e)) / 2e-6 for e in eye])
    want = data.n * scores @ np.linalg.solve(info, g)
    got = correction(mdl, data, target, reward)
    scale = np.abs(want).max()
    np.testing.assert_allclose(got - got.mean(), want - want.mean(), rtol=0, atol=1e-4 * scale)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("onlineeval.estimators.dcm_linearisation.TABLE_MAX", 0)
        np.testing.assert_allclose(correction(mdl, data, target, reward), got, rtol=1e-10, atol=1e-12 * scale)
