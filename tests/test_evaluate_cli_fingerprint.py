"""`onlineeval evaluate` fingerprints what determines its numbers: the SHA-256 of the qrels (or LETOR file), every
run (or score file) and the segments file (checked against hashlib on the files), printed under the conventions line
and listed in full in the JSON, and a fingerprint of those with the metrics, conventions and test options, which
moves with any byte of an input or any such option and not with a file's path."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from test_evaluate_cli import files, invoke  # noqa: F401  (files: the fixture)


def _sha(path: Path) -> dict[str, object]:
    raw = path.read_bytes()
    return {"path": str(path), "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def _args(qrels: Path, a: Path, b: Path, *extra: str) -> list[str]:
    """The command's arguments; an option in ``extra`` replaces the default one (an option given twice is refused)."""
    given = {extra[i] for i in range(0, len(extra), 2)}
    defaults = [("--permutations", "100"), ("--bootstrap", "100"), ("--missing", "zero")]
    return ["--qrels", str(qrels), "--run", str(a), "--run", str(b),
            *[x for name, value in defaults if name not in given for x in (name, value)], *extra]


def _json(*args: str) -> dict:
    res = invoke(*args, "--format", "json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_json_lists_each_inputs_sha256_and_the_table_prints_them_under_the_conventions(files, tmp_path):
    seg = tmp_path / "seg.tsv"
    seg.write_text("query\tbucket\nq1\thead\nq2\ttail\n")
    args = _args(files["qrels.txt"], files["A.txt"], files["B.txt"], "--segments", str(seg))
    doc = _json(*args)
    assert doc["inputs"] == {"qrels": _sha(files["qrels.txt"]),
                             "runs": {"A": _sha(files["A.txt"]), "B": _sha(files["B.txt"])},
                             "segments": _sha(seg)}
    assert len(doc["fingerprint"]) == 16
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    short = {k: v["sha256"][:12] for k, v in [("qrels", doc["inputs"]["qrels"]), ("A", doc["inputs"]["runs"]["A"]),
                                               ("B", doc["inputs"]["runs"]["B"]), ("seg", doc["inputs"]["segments"])]}
    assert lines[0].startswith("conventions: ")
    assert lines[1] == ("inputs (SHA-256, first 12 hex digits; --format json: in full): "
                        f"qrels {short['qrels']}, run A {short['A']}, run B {short['B']}, segments {short['seg']}")
    assert lines[2] == (f"fingerprint: {doc['fingerprint']} (of the inputs' SHA-256, the metrics, conventions and "
                        "test options, and the version)")


def test_letor_and_score_files_are_fingerprinted_too(tmp_path):
    letor = tmp_path / "test.txt"
    letor.write_text("2 qid:1 1:0.1\n0 qid:1 1:0.2\n1 qid:2 1:0.3\n0 qid:2 1:0.4\n")
    a = tmp_path / "a.pred"
    a.write_text("0.9\n0.1\n0.2\n0.8\n")
    doc = _json("--letor", str(letor), "--scores", str(a), "--metrics", "nDCG@1")
    assert doc["inputs"] == {"letor": _sha(letor), "scores": {"a": _sha(a)}}


def test_the_fingerprint_moves_with_every_input_and_option_not_with_paths(files, tmp_path):
    moved = tmp_path / "moved"
    moved.mkdir()
    q, a, b = (Path(shutil.copy(files[n], moved / n)) for n in ("qrels.txt", "A.txt", "B.txt"))
    base = _json(*_args(q, a, b))["fingerprint"]
    assert _json(*_args(files["qrels.txt"], files["A.txt"], files["B.txt"]))["fingerprint"] == base
    seen = {base}
    for extra in (["--metrics", "AP"], ["--gain", "linear"], ["--ties", "input_order"], ["--seed", "2"],
                  ["--alpha", "0.1"], ["--baseline", "B"], ["--depth", "2"], ["--permutations", "200"]):
        fp = _json(*_args(q, a, b, *extra))["fingerprint"]
        assert fp not in seen, extra
        seen.add(fp)
    for path in (q, a, b):  # one more byte in one input: a trailing newline
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        fp = _json(*_args(q, a, b))["fingerprint"]
        path.write_bytes(original)
        assert fp not in seen, path.name
        seen.add(fp)


def test_the_python_api_gives_the_clis_inputs_and_fingerprint(files, tmp_path):
    """onlineeval.evaluate on the same files and options (runs named as the CLI names them): the same digests and
    fingerprint as the CLI; qrels and runs in memory digested by their content (the same content, the same
    fingerprint; one grade or score changed, another)."""
    import onlineeval

    seg = tmp_path / "seg.tsv"
    seg.write_text("query\tbucket\nq1\thead\nq2\ttail\n")
    doc = _json(*_args(files["qrels.txt"], files["A.txt"], files["B.txt"], "--segments", str(seg)))
    out = onlineeval.evaluate(files["qrels.txt"], [files["A.txt"], files["B.txt"]], "nDCG@10,AP,RR,P@10",
                              missing="zero", permutations=100, bootstrap=100, segments=seg)
    assert out.inputs == doc["inputs"] and out.fingerprint == doc["fingerprint"]
    from onlineeval.io import read_qrels

    from onlineeval.io import read_run

    def api(qrels, runs):
        return onlineeval.evaluate(qrels, runs, "AP", missing="zero", permutations=100, bootstrap=100)

    qrels, run_a = read_qrels(files["qrels.txt"]), read_run(files["A.txt"])
    in_memory = api(qrels, {"A": run_a, "B": files["B.txt"]})
    assert in_memory.inputs["qrels"] == {"in_memory": "DataFrame",
                                         "sha256": in_memory.inputs["qrels"]["sha256"]}
    assert in_memory.inputs["runs"]["B"] == doc["inputs"]["runs"]["B"]  # a file: its bytes' digest, as the CLI's
    assert len(in_memory.fingerprint) == 16
    again = api(read_qrels(files["qrels.txt"]), {"A": read_run(files["A.txt"]), "B": files["B.txt"]})
    assert again.fingerprint == in_memory.fingerprint  # the same content read again
    seen = {in_memory.fingerprint}
    grade, score = qrels.copy(), run_a.copy()
    grade.loc[grade.index[0], "grade"] += 1
    score.loc[score.index[-1], "score"] = float(np.nextafter(score["score"].iloc[-1], np.inf))  # one ulp
    for changed in (api(grade, {"A": run_a, "B": files["B.txt"]}), api(qrels, {"A": score, "B": files["B.txt"]})):
        assert changed.fingerprint not in seen
        seen.add(changed.fingerprint)


def _csv(text_or_path: str | Path):
    import io

    import pandas as pd

    source = text_or_path if isinstance(text_or_path, Path) else io.StringIO(text_or_path)
    return pd.read_csv(source, dtype={"fingerprint": str, "system_sha256": str, "baseline_sha256": str})


def test_every_csv_row_names_its_systems_sha256_and_the_fingerprint(files, tmp_path):
    """--format csv, --per-query and --comparisons: each row carries its system's (and a comparison's baseline's)
    input SHA-256 and the command's fingerprint, the JSON's for the same call."""
    a, b = files["A.txt"], files["B.txt"]
    per_query, comparisons = tmp_path / "pq.csv", tmp_path / "cmp.csv"
    args = _args(files["qrels.txt"], a, b, "--metrics", "AP,P@2")
    doc = _json(*args)
    sha = {"A": _sha(a)["sha256"], "B": _sha(b)["sha256"]}
    assert sha["A"] != sha["B"]
    res = invoke(*args, "--format", "csv", "--per-query", str(per_query), "--comparisons", str(comparisons))
    assert res.exit_code == 0, res.output
    for frame in (_csv(res.stdout), _csv(per_query), _csv(comparisons)):
        assert len(frame) and set(frame["system"]) <= {"A", "B"}
        assert list(frame["system_sha256"]) == [sha[s] for s in frame["system"]]
        assert set(frame["fingerprint"]) == {doc["fingerprint"]}
    cmp = _csv(comparisons)
    assert list(cmp["baseline"]) == ["A"] * len(cmp) and set(cmp["baseline_sha256"]) == {sha["A"]}


def test_a_letor_features_csv_rows_carry_the_letor_files_sha256(tmp_path):
    letor = tmp_path / "test.txt"
    letor.write_text("2 qid:1 1:0.1 2:0.5\n0 qid:1 1:0.2 2:0.1\n1 qid:2 1:0.3 2:0.2\n0 qid:2 1:0.4 2:0.9\n")
    a = tmp_path / "a.pred"
    a.write_text("0.9\n0.1\n0.2\n0.8\n")
    args = ["--letor", str(letor), "--scores", str(a), "--score-feature", "2", "--metrics", "nDCG@1"]
    res = invoke(*args, "--format", "csv")
    assert res.exit_code == 0, res.output
    frame = _csv(res.stdout)
    expected = {"a": _sha(a)["sha256"], "feature2": _sha(letor)["sha256"]}
    assert set(frame["system"]) == set(expected)
    assert list(frame["system_sha256"]) == [expected[s] for s in frame["system"]]
    assert set(frame["fingerprint"]) == {_json(*args)["fingerprint"]}
