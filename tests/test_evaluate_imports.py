"""What the direct path of ``onlineeval evaluate`` imports: not ``numpy.ma``.

``np.unique`` without ``return_index`` / ``return_counts`` imports ``numpy.ma`` (numpy 2.x
checks for masked arrays there): 15-20 ms of a process's start, so the coded path counts
distinct codes with ``np.bincount`` instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np


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
    assert done.stderr == "1 False\n"  # the coded path ran, without numpy.ma
    assert "ignored (not in qrels) 1" in done.stdout
