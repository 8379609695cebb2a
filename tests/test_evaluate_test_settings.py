"""Review 10, finding 7: the JSON and the ``--comparisons`` CSV record the seed and the tests' definitions, so
p_rand and the BCa bounds can be reproduced from the file alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.stats import compare_systems

runner = CliRunner()


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    rng = np.random.default_rng(11)
    qrels, a, b = [], [], []
    for q in range(25):  # 25 queries: 2^25 > 5000 permutations, so the Monte Carlo branch
        qrels += [f"q{q} 0 d{d} {int(rng.integers(0, 3))}" for d in range(12)]
        for run, out in (("A", a), ("B", b)):
            out += [f"q{q} Q0 d{d} {i + 1} {s:.6f} {run}" for i, (d, s) in enumerate(zip(range(12), rng.random(12)))]
    for name, lines in (("qrels", qrels), ("A.run", a), ("B.run", b)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    return ["--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "A.run"), "--run", str(tmp_path / "B.run"),
            "--metrics", "AP,nDCG@10", "--permutations", "5000", "--bootstrap", "2000", "--seed", "7"]


def test_json_records_seed_and_tests_and_they_reproduce_the_numbers(files: list[str], tmp_path: Path) -> None:
    cmp_path = tmp_path / "cmp.csv"
    res = runner.invoke(app, ["evaluate", *files, "--format", "json", "--with-per-query", "--comparisons",
                              str(cmp_path)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    t = doc["tests"]
    assert (t["seed"], t["n_permutations"], t["n_bootstrap"], t["alpha"], t["ci_level"]) == (7, 5000, 2000, 0.05,
                                                                                              0.95)
    assert t["randomization_sides"] == "two-sided" and "p = (b + 1) / (B + 1)" in t["randomization"]
    assert "exact over all 2^n sign vectors" in t["randomization"]
    assert "BCa" in t["bootstrap"] and t["correction"] == "Holm" and "systems x metrics" in t["correction_family"]
    # the file alone reproduces p_rand and the BCa bounds: per-query values + seed + counts
    rows = [{"system": s["name"], "metric": m, "query": q, "value": v}
            for s in doc["systems"] for m, rec in s["metrics"].items() for q, v in rec["per_query"].items()]
    again = compare_systems(pd.DataFrame(rows), "A", seed=t["seed"], n_permutations=t["n_permutations"],
                            n_bootstrap=t["n_bootstrap"], alpha=t["alpha"])
    for got, ref in zip(doc["comparisons"], again):
        assert got["p_randomization"] == ref.p_randomization
        assert (got["ci_bca_low"], got["ci_bca_high"]) == (ref.ci_bca_low, ref.ci_bca_high)
        b = got["p_randomization"] * (t["n_permutations"] + 1) - 1  # p = (b + 1)/(B + 1): b is an integer count
        assert abs(b - round(b)) < 1e-6 and not got["randomization_exact"]
    frame = pd.read_csv(cmp_path)
    assert (frame["seed"] == 7).all() and (frame["randomization_sides"] == "two-sided").all()
    assert (frame["correction"] == "Holm").all() and frame["randomization"].str.contains(r"\(b \+ 1\)").all()
    assert frame["bootstrap"].str.contains("BCa").all() and frame["correction_family"].notna().all()


def test_another_seed_is_recorded_and_moves_p(files: list[str]) -> None:
    docs = [json.loads(runner.invoke(app, ["evaluate", *files[:-1], seed, "--format", "json"]).stdout)
            for seed in ("7", "8")]
    assert [d["tests"]["seed"] for d in docs] == [7, 8]
    assert docs[0]["comparisons"][0]["p_randomization"] != docs[1]["comparisons"][0]["p_randomization"]
