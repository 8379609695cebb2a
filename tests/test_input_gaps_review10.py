"""Review 10, finding 8: small input gaps. A compressed run or qrels is named as such (magic bytes, not
'not UTF-8'); ``power ratio --csv`` refuses rows with more or fewer fields than the header and blames an all-zero
denominator column on the file, not on --den-mean; a LETOR file whose ``qid:`` groups disagree with
``--query-file`` is refused (agreeing ones are read)."""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import InputError
from onlineeval.io import read_letor, read_qrels, read_run

runner = CliRunner()
QRELS = "q1 0 a 1\nq1 0 b 0\n"
RUN = "q1 Q0 a 1 2.0 r\nq1 Q0 b 2 1.0 r\n"


@pytest.mark.parametrize(("compress", "kind", "magic"), [(gzip.compress, "gzip", "1f 8b"),
                                                          (bz2.compress, "bzip2", "42 5a 68")])
def test_compressed_inputs_are_named_by_their_magic_bytes(tmp_path: Path, compress, kind: str, magic: str) -> None:
    q, r = tmp_path / "qrels", tmp_path / "ok.run.gz"
    q.write_text(QRELS)
    r.write_bytes(compress(RUN.encode()))
    res = runner.invoke(app, ["evaluate", "--qrels", str(q), "--run", str(r)])
    assert res.exit_code != 0
    assert f"{r}: {kind}-compressed (it starts with the {kind} magic bytes {magic})" in res.output
    assert "decompress it first" in res.output and "not UTF-8" not in res.output
    with pytest.raises(InputError, match=f"{kind}-compressed"):
        read_run(r)
    qz = tmp_path / "qrels.gz"
    qz.write_bytes(compress(QRELS.encode()))
    with pytest.raises(InputError, match=f"{kind}-compressed"):
        read_qrels(qz)
    letor = tmp_path / "l.letor.gz"
    letor.write_bytes(compress(b"1 qid:1 1:0.5\n"))
    with pytest.raises(InputError, match=f"{kind}-compressed"):
        read_letor(letor)


def power_ratio(path: Path):
    return runner.invoke(app, ["power", "ratio", "--csv", str(path), "--num-col", "clicks", "--den-col", "views",
                               "--relative-mde", "0.05"])


@pytest.mark.parametrize(("text", "message"), [
    ("clicks,views\n1,3,4\n2,5\n3,6\n", ":2: 3 fields but the header has 2 (clicks, views)"),
    ("clicks,views\n1,3\n2\n3,6\n", ":3: 1 field but the header has 2 (clicks, views)"),
    ("clicks,views\n1,0\n2,0\n3,0\n", "every value of the denominator column 'views' (--den-col) is 0"),
])
def test_power_ratio_csv_rows_and_zero_denominators(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "users.csv"
    path.write_text(text)
    res = power_ratio(path)
    assert res.exit_code != 0
    assert f"{path}{message}" in res.output if message.startswith(":") else message in res.output
    assert "--den-mean" not in res.output and str(path) in res.output
    path.write_text("clicks,views\n1,3\n2,5\n3,6\n")  # the same file, well formed: accepted
    assert power_ratio(path).exit_code == 0


def test_letor_qid_and_query_file_must_agree(tmp_path: Path) -> None:
    letor = tmp_path / "l.letor"
    letor.write_text("1 qid:1 1:0.5\n0 qid:1 1:0.1\n1 qid:2 1:0.3\n0 qid:2 1:0.2\n")
    bad, good = tmp_path / "bad.query", tmp_path / "good.query"
    bad.write_text("1\n3\n")  # the review's case: groups {1}, {2, 3, 4} against qid 1, 1, 2, 2
    good.write_text("2\n2\n")
    good.with_name("one.query").write_text("2\n")
    with pytest.raises(InputError, match="continues qid:1 where .*bad.query starts a group") as info:
        read_letor(letor, query_file=bad)
    assert (info.value.path, info.value.line) == (str(letor), 2)
    data = read_letor(letor, query_file=good)
    assert data.qrels["query"].tolist() == ["0", "0", "1", "1"]
    res = runner.invoke(app, ["evaluate", "--letor", str(letor), "--query-file", str(bad), "--score-feature", "1"])
    assert res.exit_code != 0 and "disagree with the group sizes" in res.output
    mixed = tmp_path / "m.letor"
    mixed.write_text("1 qid:1 1:0.5\n0 1:0.1\n")
    with pytest.raises(InputError, match="has no qid: while other lines have one"):
        read_letor(mixed, query_file=good.with_name("one.query"))
