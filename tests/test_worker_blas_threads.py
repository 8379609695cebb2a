"""Local worker processes run BLAS with one thread (simulations.runner.one_blas_thread): the processes fill the
cores, and OpenBLAS's own threads in every worker would only spin against each other."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pytest

import threadpoolctl


def _blas_threads() -> list[int]:
    import numpy  # noqa: F401  (loads the BLAS library)

    return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]


def _run(initializer) -> list[int]:
    with ProcessPoolExecutor(max_workers=1, initializer=initializer) as pool:
        return pool.submit(_blas_threads).result()


@pytest.fixture(scope="module")
def unlimited() -> list[int]:
    """A worker's BLAS threads without the limit: more than one, or the tests below would pass whatever the
    initializers do (one core, or OPENBLAS_NUM_THREADS=1 in the environment)."""
    threads = _run(None)
    if not threads or max(threads) <= 1:
        pytest.skip(f"a worker without the limit already runs {threads} BLAS threads: nothing to limit here")
    return threads


def test_the_local_executors_workers_run_one_blas_thread(unlimited):
    from simulations.executors import _init_local_worker

    assert _run(_init_local_worker) and set(_run(_init_local_worker)) == {1}


def test_one_blas_thread_limits_a_worker(unlimited):
    from simulations import runner

    assert set(_run(runner.one_blas_thread)) == {1}

