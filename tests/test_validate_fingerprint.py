"""What a validation report checked, by content: the SHA-256 of the candidate's code or of the log, the settings
and a fingerprint, so a report kept as a CI gate's record names the code it passed (and two reports with the same
fingerprint checked the same code the same way)."""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.interleaving.validation import _from_object, load_candidate, read_log, validate_interleaver, \
    validate_log

sys.path.insert(0, str(Path(__file__).parent))
from test_validate_logs import write_log  # noqa: E402

CANDIDATE = '''
import numpy as np

from onlineeval.interleaving.team_draft import TeamDraft

_REF = TeamDraft()


class Mine:
    def interleave(self, lists, rng):
        res = _REF.interleave([np.asarray([lists[0]]), np.asarray([lists[1]])], rng)
        keep = res.ranking[0] >= 0
        return res.ranking[0][keep].tolist(), res.team[0][keep].tolist()

    def credit(self, shown, teams, clicks):
        a = sum(1 for t, c in zip(teams, clicks) if c and t == 0)
        b = sum(1 for t, c in zip(teams, clicks) if c and t == 1)
        return (b > a) - (a > b)
'''


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_candidate_file_is_named_by_its_content(tmp_path: Path) -> None:
    src = tmp_path / "mine.py"
    src.write_text(CANDIDATE)
    first = validate_interleaver(load_candidate(f"{src}:Mine"), "team_draft", n=400, seed=3)
    entry, = first.inputs["candidate"]["files"]
    assert entry["sha256"] == sha(src) and entry["bytes"] == src.stat().st_size and entry["path"] == str(src)
    assert first.inputs["candidate"]["unhashed"] == []
    assert first.settings == {"mode": "interleaving", "method": "team_draft", "options": {"prefix_credit": True},
                              "n": 400, "alpha": 0.01, "seed": 3, "click_prob": 0.3, "timeout": 10.0}
    assert first.fingerprint is not None and len(first.fingerprint) == 16
    # the same code elsewhere: the same fingerprint (paths left out); a byte changed, or another seed: another
    moved = tmp_path / "other" / "mine.py"
    moved.parent.mkdir()
    moved.write_text(CANDIDATE)
    again = validate_interleaver(load_candidate(f"{moved}:Mine"), "team_draft", n=400, seed=3)
    assert again.fingerprint == first.fingerprint
    edited = tmp_path / "edited.py"
    edited.write_text(CANDIDATE + "# a comment\n")
    other = validate_interleaver(load_candidate(f"{edited}:Mine"), "team_draft", n=400, seed=3)
    assert other.fingerprint != first.fingerprint
    assert validate_interleaver(load_candidate(f"{src}:Mine"), "team_draft", n=400, seed=4).fingerprint \
        != first.fingerprint


def test_the_digest_is_of_the_code_as_loaded(tmp_path: Path) -> None:
    src = tmp_path / "loaded.py"
    src.write_text(CANDIDATE)
    before = sha(src)
    cand = load_candidate(f"{src}:Mine")
    src.write_text(CANDIDATE + "# edited after loading\n")
    rep = validate_interleaver(cand, "team_draft", n=400)
    assert rep.inputs["candidate"]["files"][0]["sha256"] == before


def test_calls_without_a_source_file_leave_the_report_without_a_fingerprint() -> None:
    def interleave(lists, rng):  # noqa: ANN001, ANN202
        return list(lists[0]), [0] * len(lists[0])

    obj = SimpleNamespace(interleave=interleave, credit=functools.partial(lambda shown, teams, clicks: 0))
    rep = validate_interleaver(_from_object("partial", obj), "team_draft", n=400)
    files = rep.inputs["candidate"]["files"]
    assert [Path(f["path"]).name for f in files] == [Path(__file__).name]  # interleave is defined here
    assert rep.inputs["candidate"]["unhashed"] == ["credit()"] and rep.fingerprint is None
    assert "fingerprint: none (credit() without a Python source file" in rep.format()
    assert json.loads(rep.to_json())["fingerprint"] is None


def test_the_text_and_json_reports_carry_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "mine.py"
    src.write_text(CANDIDATE)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = ["validate", "--interleaver", "mine.py:Mine", "--n", "400", "--seed", "5"]
    text = runner.invoke(app, args)
    doc = json.loads(runner.invoke(app, args + ["--format", "json"]).stdout)
    assert doc["inputs"]["candidate"]["files"][0]["sha256"] == sha(src)
    assert f"mine.py {sha(src)[:12]}" in text.stdout
    assert f"fingerprint: {doc['fingerprint']} (of the inputs' SHA-256, the settings and the version)" in text.stdout
    assert "modules they import are not hashed" in text.stdout


def test_a_log_is_named_by_its_bytes(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    write_log(p, "team_draft", 300, 8, 6, seed=1)
    runner = CliRunner()
    doc = json.loads(runner.invoke(app, ["validate", "--log", str(p), "--format", "json"]).stdout)
    assert doc["inputs"] == {"log": {"path": str(p), "bytes": p.stat().st_size, "sha256": sha(p)}}
    assert doc["settings"] == {"mode": "log", "method": "team_draft", "options": {"prefix_credit": True},
                               "alpha": 0.01, "seed": 0}
    text = runner.invoke(app, ["validate", "--log", str(p)]).stdout
    assert f"log {sha(p)[:12]}" in text and f"fingerprint: {doc['fingerprint']}" in text
    # records given in memory: their content's digest (not the file's bytes), the same for the same records
    records = read_log(p)
    mem = validate_log(records, "team_draft")
    assert mem.inputs["log"]["in_memory"] == "records" and mem.inputs["log"]["records"] == 300
    assert mem.inputs["log"]["sha256"] != sha(p)
    assert validate_log(read_log(p), "team_draft").fingerprint == mem.fingerprint
    assert validate_log(records[:-1], "team_draft").fingerprint != mem.fingerprint
