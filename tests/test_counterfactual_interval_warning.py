"""The simulator warns when adaptive IPS's data-driven choice runs without the last day's bootstrap: its
delta-method interval then holds the choice fixed and covers below the nominal level; and when the direct method
fits its click model on the log without it (except the linearised intervals of a PBM and a cascade model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulations.config import config_from_mapping, load_config
from simulations.designs.counterfactual.serving import interval_warnings

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "counterfactual.yaml"


def _config(bootstrap: int, estimators: list | None = None, metric: str | None = None):
    mapping = load_config(CONFIG).effective()
    design = mapping["designs"][2]
    design["bootstrap"] = bootstrap
    if estimators is not None:
        design["estimators"] = estimators
    if metric is not None:
        design["metric"] = metric
    return config_from_mapping(mapping)


def test_the_bundled_config_needs_no_warning():
    assert load_config(CONFIG).designs[2].bootstrap > 0
    assert interval_warnings(load_config(CONFIG)) == []


def test_without_the_bootstrap_the_design_and_key_are_named():
    (line,) = interval_warnings(_config(0))
    assert line.startswith("warning: design 'counterfactual': adaptive_ips chooses its behaviours")
    assert "designs[2].bootstrap is 0" in line and "designs[2].bootstrap: 400" in line


@pytest.mark.parametrize("estimators", [
    ["ips", "rips"],
    [{"name": "adaptive_ips", "behaviours": "cascade"}],
    [{"name": "adaptive_ips", "behaviours": {0: "independent", 1: "cascade"}}],
])
def test_fixed_behaviours_or_no_adaptive_ips_need_no_warning(estimators):
    assert interval_warnings(_config(0, estimators)) == []


@pytest.mark.parametrize(("estimators", "metric", "warned"), [
    (["dm"], None, False),  # a PBM, clicks per query: the linearised interval carries the fit's error
    (["dm"], "reciprocal_rank", False),  # a PBM, first-click reward: linearised too
    ([{"name": "dm", "model": "cascade"}], "reciprocal_rank", False),  # a cascade model: linearised
    ([{"name": "dm", "model": "cascade"}], None, False),
    ([{"name": "dm", "model": "dcm"}], "reciprocal_rank", False),  # a DCM by EM: linearised (2026-12-06)
    ([{"name": "dm", "model": "dcm", "method": "closed_form"}], None, True),
    ([{"name": "dm", "model": "sdbn"}], "reciprocal_rank", False),  # an SDBN by EM: linearised (2026-12-06)
    ([{"name": "dm", "model": "dbn"}], "reciprocal_rank", False),  # a DBN by EM: linearised (2026-12-06)
    ([{"name": "dm", "model": "ccm"}], "reciprocal_rank", False),  # a CCM by EM: linearised (2026-12-06)
    ([{"name": "dm", "model": "dctr"}], "reciprocal_rank", False),  # a CTR model: linearised (2026-12-06)
    ([{"name": "dm", "model": "sdbn", "method": "closed_form"}], "reciprocal_rank", True),
    ([{"name": "dm", "model": "pbm", "folds": 2}], None, True),
    (["dr"], None, False),
])
def test_the_direct_methods_fitted_model_without_the_bootstrap(estimators, metric, warned):
    lines = interval_warnings(_config(0, estimators, metric))
    assert bool(lines) == warned
    if warned:
        (line,) = lines
        assert line.startswith("warning: design 'counterfactual': dm") and "fits its click model on the log" in line
        assert "designs[2].bootstrap: 400" in line
    assert interval_warnings(_config(400, estimators, metric)) == []


def test_simulate_says_it():
    from simulations.job import prepare_world

    lines: list[str] = []
    prepare_world(_config(0), lines.append)
    assert any(line.startswith("warning: design 'counterfactual'") for line in lines)
