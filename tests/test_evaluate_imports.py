"""Work ``onlineeval evaluate`` no longer does, against what it did:

* the direct path imports no ``numpy.ma`` (``np.unique`` without ``return_index`` /
  ``return_counts`` imports it, numpy 2.x checks for masked arrays there: 15-20 ms of a
  process's start; the coded path counts distinct codes with ``np.bincount`` instead); measured
  against ``import numpy`` alone, and skipped where that imports it already (numpy 1.x);
* metrics cut at ``k`` compute per-document values of the first ``k`` ranks only: the same
  bits as the replaced computation (kept in the test as the reference).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


def test_the_coded_evaluation_imports_no_numpy_ma(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    run, qrels = [], []
    for q in range(30):
        for d in range(20):
            run.append(f"q{q} Q0 d{d} {d + 1} {rng.normal():.3f} t")
            if d % 3 == 0:
                qrels.append(f"q{q} 0 d{d} {d % 4}")
    run += [f"unjudged Q0 d{d} {d + 1} 0.5 t" for d in range(20)]  # (an ignored query: counted)
    rp, qp = tmp_path / "run", tmp_path / "qrels"
    rp.write_text("\n".join(run) + "\n")
    qp.write_text("\n".join(qrels) + "\n")
    args = ["evaluate", "--qrels", str(qp), "--run", str(rp), "--preset", "trec_eval",
            "--metrics", "ndcg_cut_10,map,recip_rank,P_10"]
    code = (
        f"import sys; sys.argv = ['onlineeval', *{args!r}]\n"
        "import onlineeval.metrics.batch as b\n"
        "calls = []\n"
        "real = b.label_batch_coded\n"
        "b.label_batch_coded = lambda *a, **k: calls.append(1) or real(*a, **k)\n"
        "from onlineeval.cli import main\nmain()\n"
        "print(len(calls), 'numpy.ma' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "ignored (not in qrels) 1" in done.stdout
    ran, has_ma = done.stderr.split()
    assert ran == "1"  # the coded path ran
    # what the process has without us: numpy alone (numpy 1.x imports numpy.ma itself at import numpy)
    base = subprocess.run([sys.executable, "-c", "import sys, numpy; print('numpy.ma' in sys.modules)"],
                          capture_output=True, text=True, check=True).stdout.split()
    if base == ["True"]:
        pytest.skip(f"numpy {np.__version__} imports numpy.ma at `import numpy`: nothing for the coded path to avoid")
    assert base == ["False"] and has_ma == "False"  # numpy.ma not imported by the coded path


@pytest.mark.parametrize("seed", range(8))
def test_metrics_cut_before_their_values_give_the_same_bits(seed: int) -> None:
    """nDCG@k, DCG@k, P@k and R@k compute the per-document values of the first ``k`` ranks
    only (``reads_first_k``): bit for bit what the replaced computation (the values of every
    rank, then the metric's own cut) gives; with tie groups, every rank as before."""
    from onlineeval.conventions import preset
    from onlineeval.metrics import parse_metrics
    from onlineeval.metrics._kernels import tie_average
    from onlineeval.metrics.base import EMPTY, EvalContext, LabelBatch

    rng = np.random.default_rng(seed)
    q, d = int(rng.integers(1, 300)), int(rng.integers(1, 40))
    codes = rng.integers(-2, 5, size=(q, d))
    codes[rng.random((q, d)) < 0.2] = EMPTY
    codes.sort(axis=1)  # (padding first: any code array)
    codes = codes[:, ::-1].copy() if seed % 2 else codes
    judged = -np.sort(-rng.integers(-1, 5, size=(q, int(rng.integers(1, 30)))), axis=1)
    groups = np.cumsum(rng.random((q, d)) < 0.6, axis=1) + np.arange(q)[:, None] * (d + 1)
    conv = preset("trec_eval" if seed % 3 else "default")
    ctx = EvalContext(int(conv.rel_min), conv.gain, 4)
    names = "nDCG@{k},DCG@{k},P@{k},R@{k},nDCG,P"
    for k in {1, max(1, d // 2), d, d + 3, 10}:
        for m in parse_metrics(names.format(k=k)):
            for g in (None, groups):
                batch = LabelBatch(codes, judged, g)
                values = m._doc_values(batch.codes, ctx)  # the replaced _compute
                if g is not None:
                    values = tie_average(values, g)
                want = m._aggregate(values, batch, ctx)
                got = m._compute(batch, ctx)
                assert got.dtype == want.dtype and np.array_equal(got.view(np.int64), want.view(np.int64)), (m, k)
                assert m.reads_first_k == (type(m).__name__ in ("NDCG", "DCG", "P", "Recall"))


@pytest.mark.parametrize("seed", range(6))
def test_ap_numerator_gives_the_same_bits_as_the_float_cumsum(seed: int) -> None:
    """AP's sum of precisions at the relevant ranks, from an integer cumulative count: bit for
    bit the replaced float computation (kept here), with and without a cut at k."""
    from onlineeval.metrics import parse_metrics
    from onlineeval.metrics._kernels import cut, ranks, safe_div
    from onlineeval.metrics.base import EMPTY, EvalContext, LabelBatch

    rng = np.random.default_rng(seed)
    q, d = int(rng.integers(1, 400)), int(rng.integers(1, 300))
    codes = rng.integers(-2, 4, size=(q, d))
    codes[:, int(rng.integers(0, d + 1)):] = EMPTY
    judged = -np.sort(-rng.integers(-1, 4, size=(q, 50)), axis=1)
    batch = LabelBatch(codes, judged, None)
    for rel_min in (1, 2):
        ctx = EvalContext(rel_min)
        for k in (None, 1, max(1, d // 3), d + 5):
            (m,) = parse_metrics("AP" if k is None else f"AP@{k}")
            rel = (cut(codes, k, EMPTY) >= rel_min).astype(np.float64)
            num = (rel * (np.cumsum(rel, axis=1) / ranks(rel.shape[1]))).sum(axis=1)
            want = safe_div(num, batch.num_rel(rel_min))
            got = m._compute(batch, ctx)
            assert np.array_equal(got.view(np.int64), want.view(np.int64)), (k, rel_min)
