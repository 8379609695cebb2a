"""Multileaving designs against the rankers' exact online and offline values (review 6, F5; review 12, F3).

:func:`multileaving_summary` gives the rankers' exact online A/B metrics (:func:`ranker_online_values`), their order
by :data:`MULTILEAVING_ORDER_METRIC`, each pair's sign under it against the method's own truth and the pairwise error
rate by day against both (:func:`pairwise_error_rates`), and the same rankers' offline values, gains and pairs
(:func:`multileaving_offline`, with the offline metric's conventions from :func:`offline_metric_conventions`). A
pair's metric is ``delta_<X>_vs_<Y>`` (:func:`pair_rankers`). Re-exported by :mod:`simulations.analysis`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from simulations.config import Config
from simulations.runner import Truth
from simulations.world import World


#: the A/B metric whose exact online value orders the rankers for a multileaving design's pairwise error rate
MULTILEAVING_ORDER_METRIC = "reciprocal_rank"


def ranker_online_values(world: World, users: Any, names: list[str]) -> dict[str, dict[str, float]]:
    """Each ranker's exact online A/B metrics (:func:`simulations.runner.exact_ab_metrics`), weighted by the query
    frequencies: what an A/B test of that ranker would measure, exactly."""
    from simulations.runner import exact_ab_metrics

    w = np.asarray(world.frequency, dtype=np.float64)
    w = w / w.sum()
    return {r: {m: float(w @ v) for m, v in exact_ab_metrics(world, users, r).items()} for r in names}


def pair_rankers(metric: str) -> tuple[str, str]:
    """(X, Y) of a multileaving pair ``delta_<X>_vs_<Y>`` (+ favours X)."""
    x, y = metric[len("delta_"):].split("_vs_", 1)
    return x, y


def pairwise_error_rates(rows: pd.DataFrame, design: str, signs: dict[str, float]) -> list[dict[str, Any]]:
    """By day, the share of replicate x pair whose estimate's sign is not ``signs[pair]`` (a zero or undefined
    estimate counts as wrong: no preference inferred), over the pairs whose sign is not 0, with its binomial SE
    (replicates x pairs trials; the pairs of one replicate are not independent, so it is a lower bound)."""
    pairs = [p for p, v in signs.items() if v]
    g = rows[(rows["design"] == design) & (~rows["aa"]) & (rows["metric"].isin(pairs))]
    out = []
    for day, d in g.groupby("day", sort=True):
        est = d["estimate"].to_numpy(dtype=np.float64)
        want = d["metric"].map(signs).to_numpy(dtype=np.float64)
        wrong = ~(np.sign(est) == want)
        rate = float(wrong.mean()) if wrong.size else float("nan")
        out.append({"day": int(day), "error_rate": rate, "trials": int(wrong.size),
                    "binomial_se": math.sqrt(rate * (1 - rate) / wrong.size) if wrong.size else None})
    return out


def multileaving_summary(rows: pd.DataFrame, designs: dict[str, dict[str, Any]], truth: dict[tuple[str, str], Truth],
                         world: World, config: Config) -> dict[str, Any]:
    """Multileaving designs (review 6, F5): the rankers' exact online values (every A/B metric), the order they
    give by :data:`MULTILEAVING_ORDER_METRIC`, each pair's sign under it against the method's own truth, and the
    pairwise error rate by day against both (:func:`pairwise_error_rates`). Empty without a design of more than
    one pair."""
    ml = {d: [m for m in ms if _is_pair(m)] for d, ms in designs.items()}
    ml = {d: p for d, p in ml.items() if len(p) > 1}
    if not ml:
        return {}
    from simulations.users import UserModels

    names = sorted({r for ps in ml.values() for p in ps for r in pair_rankers(p)},
                   key=lambda r: (config.ranker_names() + [r]).index(r))
    values = ranker_online_values(world, UserModels.from_config(config.users), names)
    key = MULTILEAVING_ORDER_METRIC
    better = (lambda a, b: values[a][key] - values[b][key])
    out: dict[str, Any] = {
        "online_values": values,
        "order_metric": key,
        "order": sorted(names, key=lambda r: -values[r][key]),
        "designs": {},
        "error_rate": "share of replicate x pair whose estimate has not the reference's sign (0 or undefined: "
                      "wrong); exact: the sign of the rankers' exact online difference in order_metric; own_truth: "
                      "the sign of the method's own expected Delta (its Monte Carlo truth)",
    }
    # review 12, F3: the same rankers' offline values and gains, so that each pair's offline gain sits next to its
    # online outcome (the summary held A's and B's alone)
    out["offline"] = multileaving_offline(world, names, [p for ps in ml.values() for p in ps],
                                          {r: values[r][key] for r in names})
    for d, pairs in ml.items():
        exact = {p: float(np.sign(better(*pair_rankers(p)))) for p in pairs}
        own = {p: float(np.sign(truth[(d, p)].value)) for p in pairs}
        out["designs"][d] = {
            "pairs": {p: {"exact_difference": better(*pair_rankers(p)), "own_truth": truth[(d, p)].value,
                          "own_truth_se": truth[(d, p)].se, "signs_agree": exact[p] == own[p]} for p in pairs},
            "error_rate_exact": pairwise_error_rates(rows, d, exact),
            "error_rate_own_truth": pairwise_error_rates(rows, d, own),
        }
    return out


def offline_metric_conventions(metric_name: str, depth: int | None) -> dict[str, Any]:
    """The offline metric's conventions as the Offline line states them: its name, gain (DCG-family metrics: its own
    ``gain`` or the default of :class:`onlineeval.conventions.Conventions`; ``None`` for others), cut-off (its ``@k``,
    ``None`` without one: the shown lists' ``depth`` documents) and their text
    (:func:`simulations.report_truth.offline_conventions_text`)."""
    from onlineeval.conventions import Conventions, Gain
    from onlineeval.metrics import parse_metric
    from simulations.report_truth import offline_conventions_text

    m = parse_metric(str(metric_name))
    gain = None
    if hasattr(m, "gain"):
        gain = str(Conventions().gain if m.gain is None else Gain.parse(m.gain))
    return {"metric": str(m), "gain": gain, "cutoff": m.k, "depth": depth,
            "weighting": "weighted: by query frequency (the Offline line's); uniform: every query once",
            "text": offline_conventions_text(str(m), depth)}


def sign_agreement(offline: float, online: float) -> str:
    """How an offline difference's sign compares with the online one's: 'same' (both 0 included), 'opposite' (one
    positive, the other negative), 'offline tie' (offline exactly 0, online not: rankers identical down to the
    offline cut-off may differ below it, where the online metric reads) or 'online tie' (the reverse)."""
    if np.sign(offline) == np.sign(online):
        return "same"
    if offline == 0:
        return "offline tie"
    return "online tie" if online == 0 else "opposite"


def multileaving_offline(world: World, names: list[str], pairs: list[str],
                         online: dict[str, float]) -> dict[str, Any]:
    """The offline metric of the multileaving designs' rankers ``names`` (review 12, F3): each ranker's value
    (frequency-weighted and uniform over queries, as the Offline line's A and B) and its gain over the first of
    ``names`` (``baseline``: the online values' 'from' ranker), absolute and relative (weighted); their order; for
    every pair ``delta_<X>_vs_<Y>`` of ``pairs`` X's value minus Y's (+ favours X, as the pair's online Delta) and
    how the weighted difference's sign compares with the rankers' exact online difference's (``online``: each
    ranker's exact value of the order metric): ``signs`` (:func:`sign_agreement`) and ``same_sign_online`` (True
    'same', False 'opposite', None a tie on one side only: a tie is no contradiction, review 16, F6)."""
    off = world.offline
    w, u = off.weighted, off.uniform
    base = names[0]

    def rel(x: float, ref: float) -> float | None:
        return x / ref if ref else None

    rankers = {r: {"weighted": w[r], "uniform": u[r], "gain_weighted": w[r] - w[base],
                   "gain_uniform": u[r] - u[base], "relative_gain_weighted": rel(w[r] - w[base], w[base])}
               for r in names}
    by_pair = {}
    for p in dict.fromkeys(pairs):
        x, y = pair_rankers(p)
        signs = sign_agreement(w[x] - w[y], online[x] - online[y])
        by_pair[p] = {"weighted": w[x] - w[y], "uniform": u[x] - u[y], "relative_weighted": rel(w[x] - w[y], w[y]),
                      "signs": signs, "same_sign_online": {"same": True, "opposite": False}.get(signs)}
    return {"metric": off.metric, "conventions": offline_metric_conventions(off.metric, world.depth),
            "baseline": base, "rankers": rankers, "order": sorted(names, key=lambda r: -w[r]), "pairs": by_pair}


def _is_pair(metric: str) -> bool:
    """A multileaving pair's metric name (``delta_<X>_vs_<Y>``)."""
    return metric.startswith("delta_") and "_vs_" in metric
