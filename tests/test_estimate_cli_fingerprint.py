"""`onlineeval estimate` fingerprints what determines its numbers: the SHA-256 of the log's and every run's bytes
(checked against hashlib on the files) and a fingerprint of those with the options, which moves with any byte of an
input or any option and not with a file's path."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from estimate_cli_world import invoke, json_out, world  # noqa: F401  (world: the module-scoped fixture)


def _args(log: Path, target: Path, baseline: Path, *extra: str, cap: int = 50) -> list[str]:
    return ["--log", str(log), "--target", str(target), "--baseline", str(baseline), "--estimator",
            "ips,rips,clipped_ips", "--option", f"clipped_ips.cap={cap}", *extra]


def test_inputs_are_the_files_sha256_and_the_table_prints_them(world: dict[str, Any]) -> None:
    args = _args(world["log"], world["B"], world["A"])
    doc = json_out(*args)
    for entry, path in ((doc["inputs"]["log"], world["log"]), (doc["inputs"]["targets"]["B"], world["B"]),
                        (doc["inputs"]["baseline"]["A"], world["A"])):
        raw = Path(path).read_bytes()
        assert entry == {"path": str(path), "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    assert len(doc["fingerprint"]) == 16 and int(doc["fingerprint"], 16) >= 0
    out = invoke(*args)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    ins = doc["inputs"]
    assert (f"  inputs (SHA-256, first 12 hex digits; --format json: in full): log {ins['log']['sha256'][:12]}, "
            f"B {ins['targets']['B']['sha256'][:12]}, A {ins['baseline']['A']['sha256'][:12]}") in lines
    assert f"  fingerprint: {doc['fingerprint']} (of the inputs' SHA-256, the options and the version)" in lines


def test_the_fingerprint_moves_with_every_input_and_option_not_with_paths(world: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    log, b, a = (shutil.copy(world[key], tmp_path / Path(world[key]).name) for key in ("log", "B", "A"))
    base = json_out(*_args(Path(log), Path(b), Path(a)))["fingerprint"]
    assert json_out(*_args(world["log"], world["B"], world["A"]))["fingerprint"] == base  # same bytes elsewhere
    seen = {base}
    for extra, cap in ((["--alpha", "0.1"], 50), (["--seed", "3"], 50), (["--ties", "input_order"], 50),
                       (["--metric", "abandonment"], 50), ([], 5)):
        fp = json_out(*_args(Path(log), Path(b), Path(a), *extra, cap=cap))["fingerprint"]
        assert fp not in seen, (extra, cap)
        seen.add(fp)
    for path in (Path(log), Path(b), Path(a)):  # one byte of one input: a trailing newline
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        fp = json_out(*_args(Path(log), Path(b), Path(a)))["fingerprint"]
        path.write_bytes(original)
        assert fp not in seen, path.name
        seen.add(fp)


def test_the_python_api_gives_the_clis_inputs_and_fingerprint(world: dict[str, Any]) -> None:
    """onlineeval.api.estimate on the same files, names and options: the same digests and fingerprint as the CLI;
    a log in memory digested by the impressions read from its rows (the same rows, the same digest; one click
    changed, another; a column the reader ignores, the same)."""
    import onlineeval.api as api

    doc = json_out(*_args(world["log"], world["B"], world["A"]))
    out = api.estimate(world["log"], {"B": world["B"]}, ["ips", "rips", "clipped_ips"], baseline=("A", world["A"]),
                       options={"clipped_ips": {"cap": 50}})
    assert out.inputs == doc["inputs"] and out.fingerprint == doc["fingerprint"]
    other = api.estimate(world["log"], {"B": world["B"]}, ["ips", "rips", "clipped_ips"], baseline=("A", world["A"]),
                         options={"clipped_ips": {"cap": 5}})
    assert other.fingerprint != out.fingerprint
    import pandas as pd

    frame = pd.read_json(world["log"], lines=True, dtype=False)
    in_memory = api.estimate(frame, {"B": world["B"]}, "ips")
    assert in_memory.inputs["log"]["in_memory"] == "DataFrame" and in_memory.inputs["log"]["records"] == len(frame)
    assert in_memory.inputs["targets"]["B"] == doc["inputs"]["targets"]["B"]  # a file: its bytes' digest
    assert len(in_memory.fingerprint) == 16
    assert api.estimate(frame.copy(), {"B": world["B"]}, "ips").fingerprint == in_memory.fingerprint
    assert api.estimate(frame.assign(note="x"), {"B": world["B"]}, "ips").fingerprint == in_memory.fingerprint
    clicked = frame.copy()
    clicked.at[0, "clicks"] = [] if len(frame["clicks"].iloc[0]) else [frame["shown"].iloc[0][0]]
    assert api.estimate(clicked, {"B": world["B"]}, "ips").fingerprint != in_memory.fingerprint
    lists = {"B": {"q0": ["d0", "d1"]}}  # a target in memory: its canonical JSON's digest
    first, second = (api.estimate(frame, t, "ips", allow_unseen=True) for t in (lists, {"B": {"q0": ["d1", "d0"]}}))
    assert first.inputs["targets"]["B"]["in_memory"] == "dict" and first.fingerprint != second.fingerprint
    assert in_memory.value("ips", "B") == pytest.approx(api.estimate(world["log"], {"B": world["B"]}, "ips")
                                                        .value("ips", "B"), rel=1e-12)
