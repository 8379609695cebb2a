"""The bootstrap convention of `onlineeval estimate` (conventions.bootstrap_interval) is worded by the run's
settings: adaptive_ips's data-driven choice is said to be run again in every resample only when it chooses on the
log; when the user fixed its behaviours the convention names the user's setting, in the words of the se column's
legend (one function, log_estimates.user_fixed_text), and says that nothing is chosen again. Before, it named a
data-driven choice whatever the setting."""

from __future__ import annotations

from typing import Any

from estimate_cli_world import invoke, json_out, world  # noqa: F401  (world: the module-scoped fixture)

from onlineeval.estimators import get_estimator
from onlineeval.estimators.log_estimates import (
    RESAMPLE_TEXT_UNKNOWN,
    bootstrap_resample_text,
    user_fixed_behaviours,
    user_fixed_text,
)

SHARED = ("resamples shared by every target and difference: generator default_rng([seed, crc32(estimator)]), with the "
          "impressions' crc32 where a target ranks some of the log's queries only")
DATA_DRIVEN = f"adaptive_ips's data-driven choice of behaviours is run again in every resample ({SHARED})"
FIXED = "adaptive_ips's behaviours are fixed by the user's setting (behaviours=cascade), not chosen on this log"
NOTHING = "so nothing is chosen again in the resamples"


def _args(world: dict[str, Any], *extra: str) -> list[str]:
    return ["--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
            "--estimator", "ips,adaptive_ips", "--seed", "3", *extra]


def test_a_data_driven_choice_is_run_again_in_every_resample(world: dict[str, Any]) -> None:
    conv = json_out(*_args(world, "--bootstrap", "100"))["conventions"]["bootstrap_interval"]
    assert conv.startswith("100 cluster resamples, percentile; ") and conv.endswith("; " + DATA_DRIVEN)
    assert "fixed by the user" not in conv and "dm's" not in conv


def test_a_user_fixed_behaviour_is_not_chosen_again(world: dict[str, Any]) -> None:
    args = _args(world, "--bootstrap", "100", "--option", "adaptive_ips.behaviours=cascade")
    conv = json_out(*args)["conventions"]["bootstrap_interval"]
    assert conv.endswith(f"; {FIXED}, {NOTHING}: its terms are fixed per impression and their cluster sums are "
                         "resampled"), conv
    assert "data-driven" not in conv
    # the same words as the table's se legend (cli/estimate.py's se_legend)
    table = invoke(*args)
    assert table.exit_code == 0, table.output
    assert f"{FIXED}, so its se is the delta method's" in table.stdout
    # no bootstrap: no convention to word
    assert json_out(*_args(world, "--option", "adaptive_ips.behaviours=cascade"))["conventions"][
        "bootstrap_interval"] == "none"


def test_the_wording_by_estimator() -> None:
    free, fixed = get_estimator("adaptive_ips"), get_estimator("adaptive_ips", behaviours="cascade")
    per_type = get_estimator("adaptive_ips", behaviours={1: "standard", 0: "cascade"})
    assert user_fixed_behaviours(free) is None and user_fixed_text(free) is None
    assert user_fixed_behaviours(fixed) == "behaviours=cascade" and user_fixed_text(fixed) == FIXED
    assert user_fixed_behaviours(per_type) == "behaviours={0: cascade, 1: standard}"
    ips, dm = get_estimator("ips"), get_estimator("dm", model="cascade")
    assert user_fixed_behaviours(ips) is None and user_fixed_behaviours(dm) is None
    assert bootstrap_resample_text([ips]) == ""
    assert bootstrap_resample_text([ips, free]) == DATA_DRIVEN
    assert bootstrap_resample_text([fixed]).startswith(f"{FIXED}, {NOTHING}")
    assert bootstrap_resample_text([free, dm]) == (
        f"{DATA_DRIVEN}; dm's click model (given by name) is fitted again on every resample, once for every target "
        f"and difference ({SHARED})")
    # the estimators not known (a caller that does not pass them): worded for either setting
    assert bootstrap_resample_text(None) == RESAMPLE_TEXT_UNKNOWN
    assert "unless the user fixed its behaviours" in RESAMPLE_TEXT_UNKNOWN


def test_dm_with_a_given_fitted_model_fits_nothing_again(world: dict[str, Any]) -> None:
    from estimate_cli_world import lib_data

    fitted = get_estimator("dm", model="cascade").fit_model(lib_data(world["sim"]))
    given = get_estimator("dm", model=fitted)
    assert not given.refits_in_bootstrap
    assert bootstrap_resample_text([given]) == "dm's click model is the fitted model given, the same in every resample"


def test_the_python_api_words_it_by_the_run_as_the_cli_does(world: dict[str, Any]) -> None:
    """onlineeval.estimate passes its estimators to the conventions (it did not: the API's convention read
    'unless the user fixed its behaviours' whatever the setting)."""
    from onlineeval.api import estimate

    targets = {"B": world["B"]}
    common = dict(baseline=("A", world["A"]), bootstrap=100, seed=3)
    free = estimate(world["log"], targets, ["ips", "adaptive_ips"], **common).conventions["bootstrap_interval"]
    assert free.endswith("; " + DATA_DRIVEN), free
    options = {"adaptive_ips": {"behaviours": "cascade"}}
    fixed = estimate(world["log"], targets, ["ips", "adaptive_ips"], options=options,
                     **common).conventions["bootstrap_interval"]
    assert f"; {FIXED}, {NOTHING}" in fixed and "unless the user fixed" not in fixed, fixed
