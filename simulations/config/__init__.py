"""The validated configuration of a simulation run (``onlineeval simulate --config``).

A YAML file is parsed, then validated into :class:`Config` before anything runs. Every
problem (an unknown key, a wrong type, a probability outside [0, 1], a missing file, an
impossible combination) becomes one :class:`~onlineeval.errors.ConfigError` naming the
key path, e.g. ``users.click_model.stop[2]: must be in [0, 1], got 1.5``.

The effective configuration (defaults filled in) is written next to the results by
:func:`Config.effective`.

The package's modules (every name is imported from here, :mod:`simulations.config`):
:mod:`~simulations.config.sections` (collection, rankers, users, traffic),
:mod:`~simulations.config.designs` (the designs and their analysis),
:mod:`~simulations.config.run` (:class:`Config`), :mod:`~simulations.config.messages`
(pydantic's errors as one-line config errors), :mod:`~simulations.config.checks` (the checks
pydantic cannot make), :mod:`~simulations.config.keypaths` (key paths into a config mapping)
and :mod:`~simulations.config.loading` (:func:`load_config`, :func:`config_from_mapping`).
"""

from __future__ import annotations

from simulations.config.checks import (
    MIN_BOOTSTRAP,
    MIN_USERS_PER_CELL,
    _check_components,
    _check_counterfactual,
    _check_design_analysis,
    _check_population,
    min_population,
)
from simulations.config.designs import (
    _COUNTERFACTUAL_KEYS,
    _UNUSED_KEYS,
    AB_METRICS,
    CupedOptions,
    DesignAnalysis,
    DesignConfig,
    EstimatorSpec,
    LoggerConfig,
    SrmInject,
    SrmOptions,
)
from simulations.config.keypaths import format_path, has_key_path, set_key_path, set_path, sweep_path, swept_mapping
from simulations.config.loading import _MODEL_FILE_KEYS, _resolve_paths, config_from_mapping, load_config
from simulations.config.messages import _allowed_keys, _first_error, _model_in, _strip_tags
from simulations.config.run import AnalysisConfig, AssumptionSweep, Config
from simulations.config.sections import (
    DEFAULT_CLICK_MODEL,
    ActivityConfig,
    Collection,
    PositiveInt,
    Probability,
    RankersConfig,
    RankerSpec,
    SyntheticCollection,
    TrafficConfig,
    TrecCollection,
    UsersConfig,
    UserType,
    _Strict,
)

__all__ = [
    "Config",
    "SyntheticCollection",
    "TrecCollection",
    "RankerSpec",
    "UsersConfig",
    "TrafficConfig",
    "DesignConfig",
    "DesignAnalysis",
    "CupedOptions",
    "SrmOptions",
    "SrmInject",
    "AnalysisConfig",
    "load_config",
    "config_from_mapping",
]
