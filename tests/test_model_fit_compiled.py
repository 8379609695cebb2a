"""The compiled EM steps of the aggregated PBM / UBM fits (onlineeval.estimators.model_fit, COMPILED) against
the NumPy steps they replace (COMPILED = False, the reference).

The compiled pass does each cell's arithmetic of the NumPy step with the same IEEE operations in the same order
(per-pair and per-index sums in cell order, as ``np.bincount``; the dense grid's per-rank sums and the
log-likelihood's logarithms and sums are NumPy's own calls on the same arrays), so the claim tested is equality
to the bit: the same parameters, the same log-likelihood trace, hence the same iterations and stopping. Logs:
the check worlds' PBM and DCM logs (dense (pair, rank) grids for PBM), ragged logs with empty slots (dense and
listed cells), a listed-cells log with document ids too large for the pair lookup table, and a degenerate log
where EM drives probabilities to 0 and 1 (clipping and the p = 1 cells); EM converged and capped at max_iter.
"""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.estimators import LoggedData
from onlineeval.estimators import model_fit as mf
from onlineeval.estimators.model_fit import aggregated_fit, cells
from test_estimators_model_fit import LOGS, ragged_log


def _degenerate_log() -> LoggedData:
    """Every list's top slot clicked, nothing below, one document never clicked at any rank: with pseudo 0,
    EM sends the top examination and the top documents' attractiveness to 1 (p = 1 cells, clipped at
    1 - PROB_EPS) and the never-clicked document's to 0 (clipped at PROB_EPS)."""
    rng = np.random.default_rng(11)
    n, k = 400, 3
    q = rng.integers(0, 2, size=n)
    shown = np.stack([rng.permutation(4)[:k] for _ in range(n)])
    shown[shown[:, 0] == 3, 0] = 9  # document 3 is never on top
    clicks = np.zeros((n, k), dtype=bool)
    clicks[:, 0] = True
    ones = np.ones(n)
    return LoggedData(q, shown, clicks, p_list=ones, p_prefix=np.ones((n, k)), p_item=np.ones((n, k)),
                      user=np.arange(n), source="degenerate")


def _all_logs() -> dict[str, LoggedData]:
    return {
        "pbm": LOGS["pbm"],
        "dcm": LOGS["dcm"],
        "ragged": LOGS["ragged"],
        "ragged_listed": ragged_log(120, 8, n_docs=60, k=5, queries=3),
        "ragged_listed_large_ids": ragged_log(500, 9, n_docs=300, k=5, queries=4, doc_scale=100_003),
        "degenerate": _degenerate_log(),
    }


ALL = _all_logs()


def _fresh(data: LoggedData) -> LoggedData:
    """The same log without its cached fits (each path fits from scratch)."""
    return data.take(np.arange(data.n))


def _fit(data: LoggedData, name: str, pseudo: float, compiled: bool, monkeypatch: pytest.MonkeyPatch,
         max_iter: int | None = None) -> mf.AggregatedFit:
    with monkeypatch.context() as mp:
        mp.setattr(mf, "COMPILED", compiled)

        def refuse(*args: object, **kwargs: object) -> None:
            raise AssertionError("the other path's step was built")

        # each path must build its own steps only (no test passing because both ran the NumPy step)
        for attr in (("_sparse_step", "_dense_step") if compiled else ("_compiled_sparse_step",
                                                                         "_compiled_dense_step")):
            mp.setattr(mf, attr, refuse)
        return aggregated_fit(_fresh(data), name, pseudo=pseudo, max_iter=max_iter)


def test_the_logs_cover_both_grids_and_empty_slots():
    assert cells(ALL["pbm"]).grid is not None and cells(ALL["ragged"]).grid is not None
    assert cells(ALL["ragged_listed"]).grid is None and cells(ALL["ragged_listed_large_ids"]).grid is None
    assert not mf.pair_index(ALL["ragged"]).all_valid and not mf.pair_index(ALL["ragged_listed"]).all_valid


@pytest.mark.parametrize("log_name", list(ALL))
@pytest.mark.parametrize("name", ["pbm", "ubm"])
@pytest.mark.parametrize("pseudo", [0.0, 1.0])
@pytest.mark.parametrize("max_iter", [None, 7])
def test_compiled_fit_equals_the_numpy_fit_to_the_bit(log_name, name, pseudo, max_iter, monkeypatch):
    data = ALL[log_name]
    ref = _fit(data, name, pseudo, False, monkeypatch, max_iter)
    got = _fit(data, name, pseudo, True, monkeypatch, max_iter)
    assert got.trace.iterations == ref.trace.iterations
    assert got.trace.converged == ref.trace.converged
    if max_iter is not None:
        assert ref.trace.iterations == max_iter and not ref.trace.converged
    np.testing.assert_array_equal(got.trace.log_likelihood, ref.trace.log_likelihood)
    np.testing.assert_array_equal(got.attraction, ref.attraction)
    np.testing.assert_array_equal(got.params["examination"], ref.params["examination"])
    assert np.asarray(got.params["examination"]).shape == np.asarray(ref.params["examination"]).shape
    assert got.default == ref.default


def test_degenerate_log_reaches_the_clipped_probabilities(monkeypatch):
    """The degenerate log does exercise the edge cases the compiled pass copies from the NumPy step: cells with
    p = alpha gamma = 1 (the guarded division by 1 - p, clipped at 1 - PROB_EPS) and cells clipped at
    PROB_EPS."""
    data = ALL["degenerate"]
    fit = _fit(data, "pbm", 0.0, True, monkeypatch)
    cl = cells(data)
    p = fit.attraction[cl.pair] * np.asarray(fit.params["examination"])[cl.exam]
    assert np.any(p == 1.0) and np.any((p > 0.0) & (p < 1e-10))


@pytest.mark.parametrize("log_name", ["ragged", "ragged_listed"])
@pytest.mark.parametrize("name", ["pbm", "ubm"])
def test_compiled_passes_equal_their_python_source(log_name, name):
    """One EM step through the numba-compiled passes and through the same functions run as plain Python
    (what ``NUMBA_DISABLE_JIT=1`` runs): the same bits."""
    data = ALL[log_name]
    k, m = data.k, mf.pair_index(data).n_pairs
    cl = cells(data, "rank" if name == "pbm" else "previous_click")
    n_exam = k if name == "pbm" else k * k
    views = np.bincount(cl.pair, cl.shows, minlength=m)
    exam_views = np.bincount(cl.exam, cl.shows, minlength=n_exam)
    rng = np.random.default_rng(3)
    alpha = rng.uniform(0.0, 1.0, m)
    alpha[:3] = (0.0, 1.0, 1e-12)
    gamma = rng.uniform(0.0, 1.0, n_exam)
    gamma[0] = 1.0
    sparse_pass, dense_pass = mf._kernels()
    for pseudo in (0.0, 0.5):
        outs = []
        for fn in (sparse_pass, mf._sparse_em_pass):
            new_alpha, new_gamma, q, nq = np.empty(m), np.empty(n_exam), np.empty(cl.pair.size), np.empty(cl.pair.size)
            fn(cl.pair, cl.exam, cl.clicks, cl.shows - cl.clicks, views, exam_views, pseudo, 1e-10, 1 - 1e-10,
               k if name == "ubm" else 0, alpha, gamma, new_alpha, new_gamma, q, nq)
            outs.append((new_alpha, new_gamma, q, nq))
        for a, b in zip(*outs):
            np.testing.assert_array_equal(a, b)
        if name == "ubm":
            assert np.all(outs[0][1].reshape(k, k)[np.triu_indices(k, 1)] == 0.0)
        if name == "pbm" and cl.grid is not None:
            shows, clicks = (np.ascontiguousarray(x.T) for x in cl.grid)
            outs = []
            for fn in (dense_pass, mf._dense_em_pass):
                new_alpha, q, nq, u = np.empty(m), *(np.empty((k, m)) for _ in range(3))
                fn(clicks, shows - clicks, views, pseudo, 1e-10, 1 - 1e-10, alpha, gamma, new_alpha, q, nq, u)
                outs.append((new_alpha, q, nq, u))
            for a, b in zip(*outs):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("switch_after", [0, 1, 5, 10**9])
def test_the_default_switches_to_the_compiled_step_without_changing_the_fit(switch_after, monkeypatch):
    """COMPILED=None: the NumPy step for the first ``switch_after`` iterations (COMPILE_AFTER in cell-iterations,
    numba taken as not loaded), the compiled step after; the fit equals the NumPy fit to the bit wherever it
    switched."""
    for log_name, name in (("ragged_listed", "ubm"), ("pbm", "pbm")):
        data = ALL[log_name]
        ref = _fit(data, name, 0.0, False, monkeypatch)
        n_cells = cells(data, "rank" if name == "pbm" else "previous_click").pair.size
        if name == "pbm" and cells(data).grid is not None:
            n_cells = mf.pair_index(data).n_pairs * data.k
        built: list[str] = []

        def spy(attr: str):
            real = getattr(mf, attr)

            def build(*args: object, **kwargs: object):
                built.append(attr)
                return real(*args, **kwargs)
            return build

        with monkeypatch.context() as mp:
            mp.setattr(mf, "COMPILED", None)
            mp.setattr(mf, "_numpy_work", 0)
            mp.setattr(mf, "COMPILE_AFTER", switch_after * n_cells)
            mp.setattr(mf, "sys", type("Sys", (), {"modules": {}}))  # numba taken as not loaded
            for attr in ("_sparse_step", "_dense_step", "_compiled_sparse_step", "_compiled_dense_step"):
                mp.setattr(mf, attr, spy(attr))
            got = aggregated_fit(_fresh(data), name, pseudo=0.0)
            work = mf._numpy_work
        assert ref.trace.iterations > 5
        compiled = [b for b in built if b.startswith("_compiled")]
        numpy_built = [b for b in built if not b.startswith("_compiled")]
        if switch_after == 0:
            assert numpy_built == [] and len(compiled) == 1 and work == 0
        elif switch_after < ref.trace.iterations:
            assert len(numpy_built) == 1 and len(compiled) == 1 and work == switch_after * n_cells
        else:
            assert compiled == [] and work == ref.trace.iterations * n_cells
        assert got.trace.iterations == ref.trace.iterations
        np.testing.assert_array_equal(got.trace.log_likelihood, ref.trace.log_likelihood)
        np.testing.assert_array_equal(got.attraction, ref.attraction)
        np.testing.assert_array_equal(got.params["examination"], ref.params["examination"])


def _run(code: str) -> str:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_numba_is_not_loaded_by_the_estimators_nor_a_small_default_fit():
    fit = ("import sys, numpy as np; from onlineeval.estimators import model_fit as mf; {set}"
           "from onlineeval.estimators.checks import check_world, sample_log; "
           "data = sample_log(check_world('pbm'), 300, np.random.default_rng(1)); "
           "print('numba' in sys.modules, end=' '); mf.aggregated_fit(data, 'pbm', pseudo=0.0); "
           "print('numba' in sys.modules)")
    assert _run(fit.format(set="")) == "False False"
    assert _run(fit.format(set="mf.COMPILE_AFTER = 0; ")) == "False True"
