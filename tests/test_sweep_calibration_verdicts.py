"""The sweep page's calibration table marks every biased entry as simulate's tables do (is_biased_entry): an
off-policy estimate whose target leaves the logger's support is BIASED with that reason, even when the t-test of its
bias does not reject (it showed '-' before)."""

from __future__ import annotations

from simulations.html_report.sweep import calibration_section

AA = {"false_positive_rate": 0.0, "binomial_99_band": [0.0, 0.1], "within_band": True}


def _verdict(entry: dict) -> str:
    summary = {"rows": [{"point": 0, "design": "cf", "metric": "clicks_per_query"}]}
    points = {0: {"designs": {"cf": {"clicks_per_query": {"aa": AA, **entry}}}}}
    return str(calibration_section(summary, points))


def test_no_support_is_biased_with_its_reason() -> None:
    page = _verdict({"no_support": True, "biased_estimate": False})
    assert "BIASED" in page and "no support: the target leaves the logger" in page


def test_biased_estimate_and_unbiased_entries() -> None:
    assert "mean estimate misses the exact truth" in _verdict({"biased_estimate": True, "estimator_bias": 0.1})
    assert "BIASED" not in _verdict({"biased_estimate": False, "no_support": False})
