"""The checks of a validated :class:`~simulations.config.Config` that pydantic cannot make
(:mod:`simulations.config`): components whose schema lives in their own registries (click
models, interleavers, estimators, logging policies), input files, the population against
the designs, a design's analysis against the traffic, the assumption sweep's values, memory."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from onlineeval.errors import ConfigError
from simulations.config.designs import DesignAnalysis
from simulations.config.keypaths import sweep_path, swept_mapping
from simulations.config.run import Config
from simulations.config.sections import DEFAULT_CLICK_MODEL, SyntheticCollection, TrecCollection


def _check_components(config: Config, source: str | None) -> None:
    """Validate the parts whose schema lives in their own registries, and input files."""
    import clickmodels
    from onlineeval.interleaving import available_interleavers, get_interleaver
    from onlineeval.metrics import parse_metric
    from simulations.config.loading import config_from_mapping  # loading imports this module

    try:
        parse_metric(config.offline_metric)
    except (ValueError, KeyError) as exc:
        raise ConfigError(("offline_metric",), str(exc), source) from None
    specs: list[tuple[tuple[str | int, ...], dict[str, Any]]] = [
        (("users", "types", i, "click_model"), dict(t.click_model)) for i, t in enumerate(config.users.types)
    ] or [(("users", "click_model"), dict(config.users.click_model or {}))]
    for key, spec in specs:
        if key == ("users", "click_model") and "name" not in spec:  # e.g. --set users.click_model.preset=...
            default = ", ".join(f"{k}: {v}" for k, v in DEFAULT_CLICK_MODEL.items())
            raise ConfigError((*key, "name"), f"is required when users.click_model is given (the default click "
                              f"model, {{{default}}}, applies only when users.click_model is absent entirely); "
                              f"available: {', '.join(clickmodels.available())}", source)
        try:
            model = clickmodels.build(spec)
        except ConfigError as exc:
            raise ConfigError((*key, *exc.key_path), exc.message, source) from None
        if any(isinstance(p, clickmodels.ByQueryDoc) for p in model.doc_params().values()):
            raise ConfigError(
                (*key, "params_file"),
                "a model with parameters per (query, document) of a click log cannot click on this "
                "simulation's graded documents; use {name: ..., fitted: <params.json>, click: [...]} "
                "(fitted position/continuation parameters, attractiveness by grade)",
                source,
            )
        if isinstance(config.collection, SyntheticCollection):
            # a synthetic collection's lists fill rankers.depth slots (depth <= candidates is checked); a TREC
            # collection's may be shorter, so its lists are checked when the world is built
            from simulations.users import check_click_model_ranks

            check_click_model_ranks(model, spec, key, config, source)
    _check_population(config, source)
    from simulations.resources import check_memory

    # before anything is allocated (the counterfactual designs' loggers are checked on a stand-in score table of
    # the collection's width): refuse what cannot fit
    check_memory(config, source)
    for i, design in enumerate(config.designs):
        _check_design_analysis(config, i, source)
        if design.type == "counterfactual":
            _check_counterfactual(config, i, source)
            continue
        if design.type == "ab" and design.metric == "utility":
            _check_utility(config, i, source)
        if design.type != "interleaving":
            continue
        allowed = available_interleavers()
        if design.method not in allowed:
            raise ConfigError(
                ("designs", i, "method"),
                f"unknown interleaving method {design.method!r}; allowed: {', '.join(sorted(allowed))}",
                source,
            )
        try:
            il = get_interleaver(design.method or "", **design.options)
        except ConfigError as exc:
            raise ConfigError(("designs", i, "options", *exc.key_path), exc.message, source) from None
        except TypeError as exc:
            raise ConfigError(("designs", i, "options"), str(exc), source) from None
        m = len(design.rankers)
        lo, hi = il.min_rankers, il.max_rankers
        if m < lo or (hi is not None and m > hi):
            allowed = f"{lo}" if hi == lo else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            raise ConfigError(
                ("designs", i, "rankers"),
                f"{design.method} interleaves {allowed} rankers, got {m}"
                + ("; use a multileaving method (e.g. team_draft_multileave)" if m > 2 else ""),
                source,
            )
    coll = config.collection
    if isinstance(coll, TrecCollection):
        files: list[tuple[tuple[str | int, ...], Path | None]] = [
            (("collection", "qrels"), coll.qrels),
            (("collection", "frequencies"), coll.frequencies),
        ]
        files += [(("collection", "runs", name), path) for name, path in coll.runs.items()]
        for key, path in files:
            if path is not None and not path.is_file():
                raise ConfigError(key, _missing_file_message(path), source)

    sweep = config.analysis.assumption_sweep
    if sweep is not None:
        key = ("analysis", "assumption_sweep")
        path = sweep_path(sweep.parameter)
        for j, value in enumerate(sweep.values):
            try:
                data = swept_mapping(config.effective(), path, value)
            except KeyError as exc:
                raise ConfigError((*key, "parameter"), f"{exc.args[0]} is not a key of this config", source) from None
            except TypeError as exc:
                raise ConfigError((*key, "parameter"), str(exc), source) from None
            try:
                config_from_mapping(data)
            except ConfigError as exc:
                raise ConfigError((*key, "values", j), f"{sweep.parameter} = {value}: {exc}", source) from None


def _missing_file_message(path: Path) -> str:
    """``file not found: <path>`` (normalised, no ``..``; relative to the working folder when inside it), plus
    the command that writes it when the file's folder ``<dir>/<name>`` has a script ``<dir>/make_<name>.py``
    beside it (as examples/make_trec_example.py writes examples/trec_example/ for configs/trec.yaml)."""
    shown = Path(os.path.normpath(path))
    if shown.is_absolute() and shown.is_relative_to(Path.cwd()):
        shown = shown.relative_to(Path.cwd())  # as the user would type it from here
    message = f"file not found: {shown}"
    script = shown.parent.parent / f"make_{shown.parent.name}.py"
    if script.is_file():
        message += f"; write it with: python {script} {shown.parent}"
    return message


#: the smallest expected number of users of each user type in each arm of an A/B design (or, for designs
#: without arms, in the design) that users.population must give: fewer leave a cell without the two users
#: an SE clustered by user needs, and every statistic undefined
MIN_USERS_PER_CELL = 2


def min_population(config: Config) -> tuple[int, str]:
    """The smallest ``users.population`` the designs allow, and why: population x the smallest user type's
    share x the smallest A/B arm's share (1 without an A/B design) >= :data:`MIN_USERS_PER_CELL`."""
    types = [(name, share) for name, share, _ in config.users.mixture() if share > 0]
    name, share = min(types, key=lambda t: t[1])
    arms = [(d.name, min(d.share_b, 1.0 - d.share_b)) for d in config.designs if d.type == "ab"]
    design, arm = min(arms, key=lambda t: t[1]) if arms else (None, 1.0)
    need = max(MIN_USERS_PER_CELL, math.ceil(MIN_USERS_PER_CELL / (share * arm) - 1e-9))
    why = (f"{MIN_USERS_PER_CELL} expected users of each user type in each arm: population x type share"
           + (f" x arm share >= {MIN_USERS_PER_CELL}" if arms else f" >= {MIN_USERS_PER_CELL}")
           + (f"; smallest type {name} ({share:.3g})" if len(types) > 1 else "")
           + (f"; smallest arm of {design} ({arm:.3g})" if arms else ""))
    return need, why


def _check_population(config: Config, source: str | None) -> None:
    need, why = min_population(config)
    if config.users.population < need:
        raise ConfigError(("users", "population"), f"{config.users.population:,} users are too few for these "
                          f"designs ({why}); allowed: {need:,} or more", source)


def _check_design_analysis(config: Config, i: int, source: str | None) -> None:
    """A design's ``analysis`` block against the traffic: looks within the days, batch
    monitoring and multiple comparisons only where the design type has them."""
    design = config.designs[i]
    an = design.analysis
    key: tuple[str | int, ...] = ("designs", i, "analysis")
    days = config.traffic.days
    per_day = 24 // config.traffic.batch_hours if an.monitoring == "batch" else 1
    if design.type == "counterfactual":
        for name, value in (("monitoring", an.monitoring), ("multiple", an.multiple)):
            if value != DesignAnalysis.model_fields[name].default:
                raise ConfigError((*key, name), f"{value!r} applies to designs of type ab and interleaving; "
                                  "a counterfactual design allows only the default "
                                  f"{DesignAnalysis.model_fields[name].default!r}", source)
    if design.type != "ab":
        for name, value in (("cuped", an.cuped), ("srm", an.srm)):
            if value != DesignAnalysis.model_fields[name].get_default(call_default_factory=True):
                raise ConfigError((*key, name), "applies to designs of type ab only; a design of type "
                                  f"{design.type} allows only the default (no pre-period, no injected split)", source)
    if an.srm.inject is not None:
        types = [name for name, _, _ in config.users.mixture()]
        if an.srm.inject.user_type not in types:
            raise ConfigError((*key, "srm", "inject", "user_type"), f"unknown user type "
                              f"{an.srm.inject.user_type!r}; allowed: {', '.join(types)} (users.types)", source)
    if isinstance(an.looks, int) and an.looks > days * per_day:
        raise ConfigError((*key, "looks"), f"{an.looks} looks, but {an.monitoring} monitoring over {days} days "
                          f"has {days * per_day}; allowed: 1 to {days * per_day}", source)
    if isinstance(an.looks, list) and an.looks[-1] > days:
        raise ConfigError((*key, "looks"), f"day {an.looks[-1]} is after the last day of traffic.days = {days}; "
                          f"allowed: days 1 to {days}", source)


#: the fewest cluster-bootstrap resamples a counterfactual design's ``bootstrap`` allows (besides 0), as the
#: estimate command's --bootstrap and Estimator.estimate
MIN_BOOTSTRAP = 100


def _check_utility(config: Config, i: int, source: str | None) -> Any:
    """The reward of design ``i``'s metric (the ``utility`` of the offline metric: a ConfigError at the design's
    ``metric`` where the offline metric has no static C/W/L weights)."""
    from simulations.designs.counterfactual.metric import design_reward

    design = config.designs[i]
    try:
        return design_reward(design.metric, config.offline_metric, config.rankers.depth)
    except ConfigError as exc:  # utility of an offline metric without a static C/W/L user
        raise ConfigError(("designs", i, "metric"), f"utility (of offline_metric {config.offline_metric}): "
                          + exc.message.split(": ", 1)[-1], source) from None


def _check_counterfactual(config: Config, i: int, source: str | None) -> None:
    """Estimators registered, their options valid, each able to estimate the design's
    metric; the logging policy known with valid options."""
    import numpy as np

    from onlineeval.estimators import available_estimators, estimator_class, get_estimator
    from simulations.policies import build_policy

    design = config.designs[i]
    if 0 < design.bootstrap < MIN_BOOTSTRAP:
        raise ConfigError(("designs", i, "bootstrap"), f"{design.bootstrap} resamples are too few for a percentile "
                          f"interval; allowed: 0 (the delta-method interval) or {MIN_BOOTSTRAP} to 100000 (as "
                          "onlineeval estimate --bootstrap)", source)
    reward = _check_utility(config, i, source)
    for j, spec in enumerate(design.estimators):
        key: tuple[str | int, ...] = ("designs", i, "estimators", j)
        if spec.name not in available_estimators():
            raise ConfigError((*key, "name"), f"unknown estimator {spec.name!r}; allowed: "
                              + ", ".join(available_estimators()), source)
        try:
            get_estimator(spec.name, **spec.options)
        except ConfigError as exc:
            raise ConfigError((*key, *exc.key_path[1:]), exc.message, source) from None
        cls = estimator_class(spec.name)
        if reward.kind not in cls.rewards:
            able = [n for n in available_estimators() if reward.kind in estimator_class(n).rewards]
            raise ConfigError(
                (*key, "name"),
                f"{spec.name} cannot estimate metric {design.metric!r} ({reward.kind} rewards; {spec.name} supports "
                f"{', '.join(cls.rewards)} rewards only); estimators for {design.metric}: {', '.join(able)}",
                source,
            )
    if design.logger is None:
        return
    # the policy's options are checked on a stand-in score table of the collection's shape
    # (trec collections: 1000 candidates; the real table is checked again when the world is built)
    coll = config.collection
    m = coll.candidates if isinstance(coll, SyntheticCollection) else 1000
    stand_in = dict.fromkeys(config.ranker_names(), np.zeros((1, m), dtype=np.float32))
    try:
        build_policy(design.logger.spec(), stand_in, min(config.rankers.depth, m), path=("designs", i, "logger"))
    except ConfigError as exc:
        raise ConfigError(exc.key_path, exc.message, source) from None
