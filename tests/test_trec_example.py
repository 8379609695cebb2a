"""configs/trec.yaml and examples/make_trec_example.py: the files, the missing-file message, a tiny run end to end,
and the offline nDCG@10 of simulate and evaluate against nDCG computed here from the files.

Reference: nDCG@10 written out below from the qrels and run files (runs sorted by score, ties by descending
docno as trec_eval; DCG = sum gain / log2(rank + 1); ideal from every judged grade; unjudged = 0; a query
without a relevant document scores 0), with linear gain g (trec_eval) and exponential 2^g - 1 (simulate).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

import onlineeval
from onlineeval.cli import app

REPO = Path(__file__).resolve().parents[1]
TINY = ["--replicates", "2", "--workers", "1", "--quiet", "--set", "traffic.days=2",
        "--set", "traffic.queries_per_day=100", "--set", "users.population=400",
        "--set", "analysis.truth_impressions=4000"]


def _copy_layout(root: Path) -> Path:
    """The shipped config and script in a copy of the repo's layout (configs/, examples/); returns the config."""
    (root / "configs").mkdir()
    (root / "examples").mkdir()
    shutil.copy(REPO / "configs" / "trec.yaml", root / "configs" / "trec.yaml")
    shutil.copy(REPO / "examples" / "make_trec_example.py", root / "examples" / "make_trec_example.py")
    return root / "configs" / "trec.yaml"


def _make(outdir: Path | None, script: Path = REPO / "examples" / "make_trec_example.py") -> str:
    args = [sys.executable, str(script)] + ([] if outdir is None else [str(outdir)])
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return done.stdout


def _read(folder: Path) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, list[tuple[str, float]]]]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for line in (folder / "qrels.txt").read_text().splitlines():
        q, _, d, g = line.split()
        qrels[q][d] = int(g)
    runs: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for name in ("A", "B"):
        run: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for line in (folder / f"{name}.run").read_text().splitlines():
            q, _, d, _, score, _ = line.split()
            run[q].append((d, float(score)))
        runs[name] = run
    return qrels, runs


def _ndcg10(qrels: dict[str, dict[str, int]], run: dict[str, list[tuple[str, float]]], exponential: bool) -> float:
    def gain(g: int) -> float:
        return 2.0**g - 1 if exponential else float(g)

    values = []
    for q, judged in qrels.items():
        ranked = sorted(sorted(run.get(q, []), key=lambda x: x[0], reverse=True), key=lambda x: -x[1])[:10]
        dcg = sum(gain(judged.get(d, 0)) / math.log2(r + 2) for r, (d, _) in enumerate(ranked))
        ideal = sum(gain(g) / math.log2(r + 2) for r, g in enumerate(sorted(judged.values(), reverse=True)[:10]))
        values.append(dcg / ideal if ideal > 0 else 0.0)
    return sum(values) / len(values)


def test_files_are_deterministic_and_have_what_the_docstring_says(tmp_path: Path) -> None:
    printed = _make(tmp_path / "one")
    _make(tmp_path / "two")
    for name in ("qrels.txt", "A.run", "B.run"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    qrels, runs = _read(tmp_path / "one")
    assert len(qrels) == 200 and {g for j in qrels.values() for g in j.values()} == {0, 1, 2, 3}
    empty = sum(not any(g > 0 for g in j.values()) for j in qrels.values())
    unjudged = {name: sum(d not in qrels[q] for q, lst in run.items() for d, _ in lst[:10])
                for name, run in runs.items()}
    ties = {name: sum(a[1] == b[1] for lst in run.values() for a, b in zip(lst, lst[1:]))
            for name, run in runs.items()}
    assert 0 < empty < 40 and unjudged["A"] == 0 and unjudged["B"] > 0 and min(ties.values()) > 0
    for name, run in runs.items():
        assert set(run) == set(qrels) and all(len(lst) == 50 for lst in run.values())
        # written in trec_eval's order already (score descending, ties by descending docno)
        assert all(lst == sorted(sorted(lst, reverse=True), key=lambda x: -x[1]) for lst in run.values())
    assert (f"{empty} queries without one), unjudged in the top 10: A 0, B {unjudged['B']}; score ties "
            f"between neighbours: A {ties['A']}, B {ties['B']}") in printed


def test_missing_files_name_the_file_and_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _copy_layout(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["simulate", "--config", "configs/trec.yaml", *TINY])
    assert result.exit_code != 0
    assert ("configs/trec.yaml: collection.qrels: file not found: examples/trec_example/qrels.txt; write it with: "
            "python examples/make_trec_example.py examples/trec_example") in " ".join(result.output.split())
    assert config.is_file()


def test_shipped_config_end_to_end_and_offline_deltas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _copy_layout(tmp_path)
    _make(None, tmp_path / "examples" / "make_trec_example.py")  # the default folder: examples/trec_example
    folder = tmp_path / "examples" / "trec_example"
    monkeypatch.chdir(tmp_path / "examples")  # relative paths are the config's, not the working folder's
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["simulate", "--config", str(config), "--output", str(out), *TINY])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert {d for d in summary["designs"]} == {"ab", "team_draft"}
    assert "run B: 238 of 2000 shown documents unjudged" in result.output

    qrels, runs = _read(folder)
    exp = {name: _ndcg10(qrels, run, exponential=True) for name, run in runs.items()}
    lin = {name: _ndcg10(qrels, run, exponential=False) for name, run in runs.items()}
    off = summary["offline"]
    assert off["metric"] == "nDCG@10" and off["conventions"]["gain"].startswith("metric default: exponential 2^g - 1")
    for name in ("A", "B"):
        assert off[name]["uniform"] == pytest.approx(exp[name], abs=1e-12)

    files = {name: folder / f"{name}.run" for name in ("A", "B")}
    kw = {"baseline": "A", "permutations": 100, "bootstrap": 100}
    trec = onlineeval.evaluate(folder / "qrels.txt", files, "nDCG@10", preset="trec_eval", **kw)
    same = onlineeval.evaluate(folder / "qrels.txt", files, "nDCG@10", preset="trec_eval", gain="exponential",
                               depth=10, missing="zero", **kw)
    assert str(trec.conventions.gain) == "linear" and str(same.conventions.gain) == "exponential"
    for name in ("A", "B"):
        assert trec.mean(name, "nDCG@10") == pytest.approx(lin[name], abs=1e-12)
        assert same.mean(name, "nDCG@10") == off[name]["uniform"]  # the same numbers, not just close
    assert same.comparison("B", "nDCG@10").mean_diff == pytest.approx(off["delta"]["uniform"], abs=1e-15)
    # the two commands' offline deltas differ for these runs (gain conventions), by far more than rounding
    assert abs(trec.comparison("B", "nDCG@10").mean_diff - off["delta"]["uniform"]) > 1e-3


@pytest.mark.parametrize("script", ["make_trec_example.py", "make_logged_example.py"])
def test_example_scripts_take_help_and_refuse_extra_arguments(script: str, tmp_path: Path) -> None:
    """`--help` printed nothing useful and wrote the files into a folder named --help; a second argument was
    ignored. Both scripts now parse their arguments: --help shows the docstring and writes nothing."""
    path = REPO / "examples" / script
    shown = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith(f"usage: {script} [-h] [outdir]")
    assert "Write the" in shown.stdout and list(tmp_path.iterdir()) == []
    extra = subprocess.run([sys.executable, str(path), "a", "b"], capture_output=True, text=True, cwd=tmp_path)
    assert extra.returncode == 2 and "unrecognized arguments: b" in extra.stderr
    assert list(tmp_path.iterdir()) == []
