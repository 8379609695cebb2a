"""EM fits give the same numbers whatever BLAS kernel the CPU gets (:func:`clickmodels.estimation.base.ordered_dot`).

OpenBLAS picks its dot kernel by CPU (Haswell, SkylakeX, Sandybridge, ...), and the kernels differ in the last bits.
EM's dots (SQUAREM's step length, the log-likelihood weighted by the sessions) went through BLAS, and those bits
steered discrete choices: whether SQUAREM keeps a jump and the iteration at which the stopping rule holds. The
direct method of ``tests/test_stream_version.py``'s design ``cf_first_click_models`` (a PBM fitted by EM on one
replicate's log) gave 0.0659852 with OpenBLAS's Haswell kernel, 0.0659901 with Sandybridge's, 0.0659920 with
Nehalem's and 0.0661181 with SkylakeX's (the stored numbers, written on a machine whose OpenBLAS picked SkylakeX):
a CI machine of another CPU failed that test. Each run here is a fresh process with ``OPENBLAS_CORETYPE`` set (the
kernels every x86-64 CPU of the last decade runs) or NumPy's AVX-512 loops switched off; every fitted number must be
the same to the bit, every estimate to its last bits (1e-12). x86-64 only (the kernel names are OpenBLAS's x86 ones).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import copy, hashlib, json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import test_stream_version as t
from clickmodels.estimation import fit_log
from clickmodels.logs import from_arrays
from simulations.config import config_from_mapping
from simulations.job import prepare_world
from simulations.runner import replicate_seeds, run_replicate

m = copy.deepcopy(t.CONFIG)
m["designs"] = [d for d in m["designs"] if d["name"] == "cf_first_click_models"]
cfg = config_from_mapping(m)
rows = run_replicate(cfg, *prepare_world(cfg), replicate_seeds(cfg.seed, 1)[0], 0)
out = [json.dumps([str(r["metric"]), float(r["estimate"]), float(r["se"])])
       for r in rows if not r["aa"] and r["day"] == 2]
rng = np.random.default_rng(3)
n, k = 3000, 5
docs = np.argsort(rng.random((n, 8)), axis=1)[:, :k]
query = rng.integers(0, 20, n)
rel = rng.random((20, 8))
clicks = rng.random((n, k)) < rel[query[:, None], docs] * (0.9 ** np.arange(k))
log = from_arrays(query, docs, clicks)
for name in ("pbm", "ubm", "dcm", "dbn", "ccm", "sdbn"):
    fit = fit_log(name, log)
    out.append(name + " " + hashlib.sha256(repr(fit.params_dict()).encode()).hexdigest())
print("\n".join(out))
"""

#: OpenBLAS kernels and the CPU flag each needs (a kernel the CPU cannot run would stop the process)
KERNELS = {"Haswell": "avx2", "Sandybridge": "avx", "Nehalem": "sse4_2"}
#: NumPy's AVX-512 loops off (names NumPy does not dispatch are ignored with an ImportWarning: then a no-op)
NO_AVX512 = {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}


def _settings() -> dict[str, dict[str, str]]:
    try:
        flags = set(Path("/proc/cpuinfo").read_text(encoding="utf-8").split())
    except OSError:
        flags = set(KERNELS.values())  # no /proc: assume a CPU of the last decade
    out = {name: {"OPENBLAS_CORETYPE": name} for name, flag in KERNELS.items() if flag in flags}
    out["no AVX-512 loops in NumPy"] = NO_AVX512
    return out


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="OpenBLAS's kernel names are x86-64 ones")
def test_em_fits_do_not_depend_on_the_blas_kernel() -> None:
    outputs = {}
    settings = _settings()
    assert len(settings) >= 3, settings
    for label, env in settings.items():
        run = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO / "tests")], capture_output=True, text=True,
                             cwd=REPO, env={**os.environ, **env}, timeout=600)
        assert run.returncode == 0, (label, run.stderr[-3000:])
        outputs[label] = run.stdout
    parsed = {label: _parse(text) for label, text in outputs.items()}
    first = next(iter(parsed.values()))
    assert {"dm", "dr_list", "cascade_dr"} <= set(first["estimates"]) and len(first["fits"]) == 6, outputs
    for label, got in parsed.items():
        # the fits to the bit; the estimates to their last bits (their SEs and the doubly robust corrections still
        # sum through BLAS and vectorised loops: 1e-16 apart, not steered anywhere)
        assert got["fits"] == first["fits"], (label, outputs)
        assert got["estimates"].keys() == first["estimates"].keys(), (label, outputs)
        for metric, values in got["estimates"].items():
            want = first["estimates"][metric]
            assert values == pytest.approx(want, rel=1e-12, abs=0.0, nan_ok=True), (label, metric, outputs)


def _parse(text: str) -> dict[str, dict[str, object]]:
    estimates: dict[str, object] = {}
    fits: dict[str, object] = {}
    for line in text.splitlines():
        if line.startswith("["):
            metric, estimate, se = json.loads(line)
            estimates[metric] = (estimate, se)
        else:
            name, digest = line.split()
            fits[name] = digest
    return {"estimates": estimates, "fits": fits}
