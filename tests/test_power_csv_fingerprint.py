"""`onlineeval power ratio --csv` sizes an experiment from a file's content, which its name does not fix (last
month's users.csv overwritten by this month's): the answer names the file's SHA-256 and a fingerprint of it with
the options and the version, as evaluate, estimate, clicks, validate and simulate name theirs. The digest is
hashlib's of the bytes; a moved copy keeps the fingerprint, a changed byte or option changes it; without --csv
(the moments given on the command line) there is no input to name."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from onlineeval.cli import app

ARGS = ["--num-col", "clicks", "--den-col", "queries", "--relative-mde", "0.02"]


def _users(path: Path, seed: int = 2026) -> Path:
    rng = np.random.default_rng(seed)
    q = rng.poisson(4.0, 500) + 1
    pd.DataFrame({"clicks": rng.binomial(q, rng.beta(2.0, 6.0, 500)), "queries": q}).to_csv(path, index=False)
    return path


def _json(*args: str) -> dict:
    res = CliRunner().invoke(app, ["power", "ratio", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_the_csv_is_named_by_its_bytes_and_fingerprinted(tmp_path: Path) -> None:
    path = _users(tmp_path / "users.csv")
    doc = _json("--csv", str(path), *ARGS)
    entry = doc["inputs"]["csv"]
    assert entry == {"path": str(path), "bytes": path.stat().st_size,
                     "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert len(doc["fingerprint"]) == 16
    # the text names the same digest and fingerprint
    res = CliRunner().invoke(app, ["power", "ratio", "--csv", str(path), *ARGS])
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("inputs (SHA-256"))
    assert f"csv {entry['sha256'][:12]}; fingerprint: {doc['fingerprint']} " in line


def test_a_moved_copy_keeps_it_a_changed_byte_or_option_changes_it(tmp_path: Path) -> None:
    path = _users(tmp_path / "users.csv")
    base = _json("--csv", str(path), *ARGS)
    (tmp_path / "elsewhere").mkdir()
    copy = shutil.copy(path, tmp_path / "elsewhere" / "u.csv")
    assert _json("--csv", str(copy), *ARGS)["fingerprint"] == base["fingerprint"]
    other = _users(tmp_path / "other.csv", seed=7)
    changed = _json("--csv", str(other), *ARGS)
    assert changed["fingerprint"] != base["fingerprint"]
    assert changed["inputs"]["csv"]["sha256"] != base["inputs"]["csv"]["sha256"]
    assert _json("--csv", str(path), *ARGS, "--alpha", "0.01")["fingerprint"] != base["fingerprint"]
    assert _json("--csv", str(path), *ARGS[:-1], "0.03")["fingerprint"] != base["fingerprint"]


def test_moments_on_the_command_line_have_no_input_to_name() -> None:
    doc = _json("--num-mean", "1.2", "--num-var", "2.0", "--den-mean", "4.8", "--den-var", "4.0", "--cov", "1.5",
                "--relative-mde", "0.02")
    assert "inputs" not in doc and "fingerprint" not in doc
