"""Bootstrap replicates and randomisation-test permutations are capped at onlineeval.errors.MAX_RESAMPLES in every
command and API call that takes them (10**20 failed inside NumPy: 'maximum allowed dimension exceeded'); the limit
itself is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import onlineeval.api as api
from onlineeval.cli import app
from onlineeval.errors import MAX_RESAMPLES, ConfigError

QRELS = "1 0 d1 2\n1 0 d2 1\n2 0 d3 1\n2 0 d4 0\n"
RUN_A = "1 Q0 d1 1 2.0 a\n1 Q0 d2 2 1.0 a\n2 Q0 d3 1 2.0 a\n2 Q0 d4 2 1.0 a\n"
RUN_B = "1 Q0 d2 1 2.0 b\n1 Q0 d1 2 1.0 b\n2 Q0 d4 1 2.0 b\n2 Q0 d3 2 1.0 b\n"


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    paths = []
    for name, text in (("qrels", QRELS), ("a.run", RUN_A), ("b.run", RUN_B)):
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    return paths


@pytest.mark.parametrize("option", ["--bootstrap", "--permutations"])
@pytest.mark.parametrize("value", [MAX_RESAMPLES + 1, 10**20])
def test_evaluate_refuses_more_resamples_than_the_limit(files: list[str], option: str, value: int) -> None:
    q, a, b = files
    res = CliRunner().invoke(app, ["evaluate", "--qrels", q, "--run", a, "--run", b, "-m", "P@1", option, str(value)])
    assert res.exit_code != 0
    assert f"{option}: must be at most {MAX_RESAMPLES}, got {value}" in res.output, res.output
    for key in ("bootstrap", "permutations"):
        with pytest.raises(ConfigError) as err:
            api.evaluate(q, [a, b], metrics="P@1", **{key: value})
        assert err.value.key_path == (key,) and f"[1, {MAX_RESAMPLES:,}]" in err.value.message


def test_estimate_settings_refuse_more_resamples_than_the_limit() -> None:
    from onlineeval.estimators.log_estimates import check_settings

    check_settings("clicks_per_query", 0.05, MAX_RESAMPLES, "docno_desc")  # the limit itself
    for prefix in ("--", ""):
        with pytest.raises(ConfigError) as err:
            check_settings("clicks_per_query", 0.05, 10**20, "docno_desc", prefix=prefix)
        assert err.value.key_path == (f"{prefix}bootstrap",)
        assert f"100 to {MAX_RESAMPLES:,} replicates, got {10**20}" in err.value.message
