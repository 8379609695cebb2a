"""The assumption sweep: each counterfactual estimator's bias as one click-model
parameter moves, from direct logs (no SimPy) with common random numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

from simulations.config import DesignConfig
from simulations.designs.counterfactual.paired import paired_difference
from simulations.designs.counterfactual.serving import (
    build_estimators,
    distinct_propensities,
    shared_policy,
    shared_target,
)
from simulations.world import World

__all__ = ["ERROR_LABEL", "UNCOUPLED_LABEL", "assumption_sweep", "direct_log", "sweep_point"]

_SWEEP_TAG = 0x7377656570  # "sweep"

#: what the sweep's 'bias +- se' of an estimator is (summary.json ``assumption_sweep.error_label``, the report's
#: table and plot): one log's error with that log's SE, not the mean error over logs (review 3, M5). With common
#: random numbers (the same queries, user-type uniforms, lists and per-row click uniforms at every value:
#: :meth:`simulations.users.UserModels.sample_coupled`) the errors move together from value to value: measured over
#: 20 seeds on configs/counterfactual.yaml, adjacent values' errors correlate 0.73-0.96 (0.15-0.85 when each type's
#: click uniforms were drawn in turn, so one user changing type redrew every later row's clicks)
ERROR_LABEL = ("estimate - exact truth of one {n}-impression log per value (not a mean over logs: the same random "
               "stream at every value, so the unbiased estimators' errors move together), +- that log's SE")
#: the label when some value's click models cannot be coupled row by row (grade-free types alone, random clicks or
#: GCTR: :meth:`simulations.users.UserModels.couples`): the queries and lists are common, the clicks are not
UNCOUPLED_LABEL = ("estimate - exact truth of one {n}-impression log per value (not a mean over logs: the same "
                   "queries and lists at every value, but not the same clicks, which {models} cannot couple row by "
                   "row: the errors move partly apart, so read each against its SE), +- that log's SE")
_SWEEP_CHUNK = 100_000


def direct_log(world: World, users: Any, policy: Any, n: int, rng: np.random.Generator) -> Any:
    """``n`` impressions served by ``policy`` without SimPy: queries by frequency, user
    types by share, clicks from the types' click models, each row from its own uniforms whatever its type
    (:meth:`~simulations.users.UserModels.sample_coupled`), so the same ``rng`` under other type shares gives the
    same queries and lists and the same clicks on every row whose type stays. Every impression is its own
    cluster (``user`` is ``None``)."""
    from onlineeval.estimators import LoggedData
    from simulations.sampling import draw_from_cdf
    from simulations.world import shown_labels

    cdf = np.cumsum(world.frequency)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("query", "shown", "clicks", "types", "pl", "pp", "pi")}
    for lo in range(0, n, _SWEEP_CHUNK):
        m = min(_SWEEP_CHUNK, n - lo)
        q = draw_from_cdf(cdf, rng.random(m)).astype(np.int64)
        types = users.draw_types(m, rng)
        shown = np.asarray(policy.sample(q, rng), dtype=np.int64)
        # row i's click uniforms are its own whatever its type (UserModels.sample_coupled): common random numbers
        clicks = users.sample_coupled(shown_labels(world.labels, q, shown), types, rng)
        p = distinct_propensities(policy, q, shown, world.labels.shape[1])
        for key, v in zip(parts, (q, shown, clicks, types, p.list, p.prefix, p.item), strict=True):
            parts[key].append(np.asarray(v))
    c = {k: np.concatenate(v) for k, v in parts.items()}
    return LoggedData(c["query"], c["shown"], c["clicks"], p_list=c["pl"], p_prefix=c["pp"], p_item=c["pi"],
                      user_type=c["types"], logger=policy)


def sweep_point(design: DesignConfig, world: World, users: Any, n: int, rng: np.random.Generator,
                alpha: float) -> dict[str, Any]:
    """One point of an assumption sweep: the exact :math:`V(B) - V(A)` under ``users`` and,
    per estimator, its estimate from one direct log of ``n`` impressions with its SE (the
    paired difference over impressions) and bias."""
    from simulations.designs.counterfactual.metric import design_reward, exact_values

    base, cand = design.targets
    values = {r: float(world.frequency @ exact_values(world, users, r, design.metric)) for r in (base, cand)}
    truth = values[cand] - values[base]
    policy = shared_policy(design.logger, world)  # type: ignore[arg-type]
    data = direct_log(world, users, policy, n, rng)
    reward = design_reward(design.metric, world.offline.metric, world.depth)
    targets = [shared_target(world, t) for t in (base, cand)]
    out: dict[str, Any] = {"truth": truth, "estimators": {}}
    for label, est in build_estimators(design):
        x = []
        for target in targets:
            terms = est.terms(data, target, reward)
            x += [terms.num, np.ones(data.n) if terms.den is None else terms.den]
        e = paired_difference(x[0], x[1], x[2], x[3], alpha)
        out["estimators"][label] = {"estimate": e.estimate, "se": e.se, "bias": e.estimate - truth}
    return out


def assumption_sweep(config: Any, world: World) -> dict[str, Any]:
    """Each counterfactual estimator's bias as one click-model parameter moves
    (``analysis.assumption_sweep``): per value, the config with that value
    (:func:`simulations.config.swept_mapping`), the exact truth, and one direct log of
    ``impressions`` impressions. The logs of all values use the same random stream
    (common random numbers), so the curves differ by the parameter, not by noise."""
    from simulations.config import config_from_mapping, sweep_path, swept_mapping
    from simulations.designs.counterfactual.metric import reward_name
    from simulations.users import UserModels

    sweep = config.analysis.assumption_sweep
    design = next(d for d in config.designs if d.type == "counterfactual"
                  and (sweep.design is None or d.name == sweep.design))
    path = sweep_path(sweep.parameter)
    k = shared_policy(design.logger, world).k  # type: ignore[arg-type]  # (the shown lists' slots)
    points = []
    uncoupled: list[str] = []
    for value in sweep.values:
        point_cfg = config_from_mapping(swept_mapping(config.effective(), path, value))
        users = UserModels.from_config(point_cfg.users)
        if not users.couples(k):  # the types whose model has no grade chain of its own, else all
            alone = [n for n, m in zip(users.names, users.models, strict=True)
                     if getattr(m, "n_grades", None) is not None and UserModels([n], [1.0], [m]).chains(k) is None]
            uncoupled += [n for n in (alone or users.names) if n not in uncoupled]
        rng = np.random.default_rng(np.random.SeedSequence((config.seed, _SWEEP_TAG)))
        points.append(sweep_point(design, world, users, sweep.impressions, rng, config.analysis.alpha))
    labels = [label for label, _ in build_estimators(design)]
    return {
        "design": design.name,
        "metric": reward_name(design.metric, config.offline_metric),
        "parameter": sweep.parameter,
        "values": list(sweep.values),
        "impressions": sweep.impressions,
        "truth": [p["truth"] for p in points],
        "estimators": {
            label: {key: [p["estimators"][label][key] for p in points] for key in ("estimate", "se", "bias")}
            for label in labels
        },
        "method": "one direct log per value (no SimPy, each impression its own cluster), common random numbers "
        "across values; bias = estimate - exact V(B) - V(A); se = the paired difference's delta-method SE",
        # what 'bias +- SE' is: one log's error, not a mean over logs (review 3, M5)
        "error_label": (UNCOUPLED_LABEL.format(
            n=f"{sweep.impressions:,}",
            models=(f"the click model of user type {uncoupled[0]!r}" if len(uncoupled) == 1 else
                    "the click models of user types " + ", ".join(repr(n) for n in uncoupled)))
                        if uncoupled else ERROR_LABEL.format(n=f"{sweep.impressions:,}")),
        "coupled": not uncoupled,
    }
