"""Significance levels, resamples and effects at the edges: evaluate's and power's alpha of 0, 1 or below 1e-12
refused naming the option (the tests use 1 - alpha, which rounds to 1: a ValueError or StatisticsError traceback from
inside); bootstrap replicates and randomisation-test permutations capped at onlineeval.errors.MAX_RESAMPLES in every
command and API call that takes them (10**20 failed inside NumPy: 'maximum allowed dimension exceeded'); power's
required size beyond float64's range named as such (an OverflowError traceback for --baseline 1e-320)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import onlineeval.api as api
from onlineeval.cli import app
from onlineeval.errors import MAX_RESAMPLES, MIN_ALPHA, ConfigError

QRELS = "1 0 d1 2\n1 0 d2 1\n2 0 d3 1\n2 0 d4 0\n"
RUN_A = "1 Q0 d1 1 2.0 a\n1 Q0 d2 2 1.0 a\n2 Q0 d3 1 2.0 a\n2 Q0 d4 2 1.0 a\n"
RUN_B = "1 Q0 d2 1 2.0 b\n1 Q0 d1 2 1.0 b\n2 Q0 d4 1 2.0 b\n2 Q0 d3 2 1.0 b\n"


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args), prog_name="onlineeval")
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res.exit_code, res.output


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    paths = []
    for name, text in (("qrels", QRELS), ("a.run", RUN_A), ("b.run", RUN_B)):
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    return paths


@pytest.mark.parametrize("alpha", ["0", "1", "1e-300", "9.9e-13"])
def test_evaluate_refuses_levels_its_tests_cannot_use(files: list[str], alpha: str) -> None:
    q, a, b = files
    code, out = _cli("evaluate", "--qrels", q, "--run", a, "--run", b, "-m", "P@1", "--alpha", alpha)
    assert code != 0 and f"--alpha: must be in [1e-12, 1), got {float(alpha)}" in out, out
    with pytest.raises(ConfigError) as err:
        api.evaluate(q, [a, b], metrics="P@1", alpha=float(alpha))
    assert err.value.key_path == ("alpha",)


def test_evaluate_takes_the_smallest_level(files: list[str]) -> None:
    q, a, b = files
    code, out = _cli("evaluate", "--qrels", q, "--run", a, "--run", b, "-m", "P@1", "--alpha", str(MIN_ALPHA))
    assert code == 0, out
    assert api.evaluate(q, [a, b], metrics="P@1", alpha=MIN_ALPHA) is not None


@pytest.mark.parametrize("alpha", ["1e-300", "0"])
def test_power_refuses_levels_its_quantiles_cannot_use(alpha: str) -> None:
    code, out = _cli("power", "proportion", "--baseline", "0.1", "--relative-mde", "0.02", "--alpha", alpha)
    assert code != 0 and "--alpha: must be in [1e-12, 1)" in out, out


def test_power_names_a_size_beyond_float64() -> None:
    code, out = _cli("power", "proportion", "--baseline", "1e-320", "--relative-mde", "0.02")
    assert code == 0, out
    assert "required: - (more users than a float64 counts: the effect is too small for any finite experiment)" in out
    code, out = _cli("power", "proportion", "--baseline", "0.1", "--target", "0.1")  # a zero effect: as before
    assert code == 0 and "required: - (the effect is 0 or in the direction the test does not look for)" in out, out


@pytest.mark.parametrize("args", [["interleaving", "--delta", "0.02", "--sd", "1e-300"],
                                  ["interleaving", "--delta", "1e300", "--sd", "1"],
                                  ["ratio", "--num-mean", "1", "--num-var", "1", "--den-mean", "1", "--den-var", "1",
                                   "--cov", "0", "--relative-mde", "1e300"]])
def test_power_requires_at_least_one_user(args: list[str]) -> None:
    """An effect far above the noise needs a fraction of a user: the size is one (per arm), not 0 (it printed
    'required users: 0 (impressions 0)')."""
    code, out = _cli("power", *args)
    assert code == 0, out
    assert "required users: 1 (impressions 1)" in out or "required users per arm: A 1, B 1 (total 2)" in out, out


def test_power_ratio_moments_beyond_float64_are_refused() -> None:
    code, out = _cli("power", "ratio", "--num-mean", "1e300", "--num-var", "1e300", "--den-mean", "1e-300",
                     "--den-var", "1", "--cov", "0", "--relative-mde", "0.02")
    assert code != 0 and "--den-mean: the ratio 1e+300 / 1e-300 or its per-user delta-method variance is beyond" in out


@pytest.mark.parametrize("key", ["analysis.alpha", "designs[0].analysis.srm.alpha"])
def test_simulate_configs_refuse_levels_below_the_smallest(key: str) -> None:
    """analysis.alpha = 1e-300 ran every replicate and then ended the analysis in a StatisticsError traceback."""
    from simulations.config import config_from_mapping

    mapping: dict = {"designs": [{"name": "ab", "type": "ab"}]}
    if key == "analysis.alpha":
        mapping["analysis"] = {"alpha": 1e-300}
    else:
        mapping["designs"][0]["analysis"] = {"srm": {"alpha": 1e-300}}
    with pytest.raises(ConfigError) as err:
        config_from_mapping(mapping)
    assert "must be at least 1e-12" in str(err.value) and "alpha" in str(err.value)
    if key == "analysis.alpha":
        config_from_mapping({"designs": [{"name": "ab", "type": "ab"}], "analysis": {"alpha": MIN_ALPHA}})


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
