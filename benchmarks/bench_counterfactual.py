"""Benchmark: the counterfactual design's cost per impression against team-draft's.

Runs replicates of ``configs/counterfactual.yaml`` in a plain loop over the same
batches (as :mod:`benchmarks.bench_simulation` does without SimPy) and times each
design's ``process`` (serving: draw, clicks, propensities, estimator terms) and
``checkpoint`` (estimates) separately. Team-draft interleaving runs in the same loop on
the same batches, so the two are measured under the same machine load. Variants of the
counterfactual design (the configured six estimators, each estimator alone, an
epsilon-greedy logger with one estimator) run side by side; the A/A designs and the
team-draft null variant are left out (the counterfactual A/A design does no work).

Then the serving step of the configured design is split into its parts on recorded
batches: logger sampling, logger propensities, clicks, target propensities, the fused
terms of the IPS family for both targets (``simulations/designs/counterfactual/fused.py``)
and any other estimator's terms for both targets. With the compiled kernels
(``simulations/policies/kernels.py``) the target-list match, the logger's propensities and
the targets' indicators are one part, timed as the design runs it.

    python benchmarks/bench_counterfactual.py [--replicates 3] [--rounds 5] [--no-split]
"""

from __future__ import annotations

import argparse
import copy
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import onlineeval.stats  # noqa: F401  (import cost outside the timings)
from simulations.config import config_from_mapping, load_config
from simulations.runner import build_replicate, replicate_seeds, world_seed
from simulations.users import UserModels
from simulations.world import build_world

REPO = Path(__file__).resolve().parents[1]
EPSILON_GREEDY = {"policy": "epsilon_greedy", "ranker": "A", "epsilon": 0.2, "n": 20}


def variant_config(base: dict[str, Any], variants: dict[str, dict[str, Any]]) -> Any:
    """The config with the team-draft design and one counterfactual design per variant."""
    mapping = copy.deepcopy(base)
    designs = mapping["designs"]
    td = next(d for d in designs if d["type"] == "interleaving" and d.get("method") == "team_draft")
    cf = next(d for d in designs if d["type"] == "counterfactual")
    out = [td]
    for name, change in variants.items():
        d = copy.deepcopy(cf)
        d.update(copy.deepcopy(change))
        d["name"] = name
        out.append(d)
    mapping["designs"] = out
    mapping["analysis"]["aa"] = False
    # the null variant of team-draft has the same name; timing it too would keep the faster
    # of the two designs per batch instead of the real one
    mapping["analysis"]["null"] = False
    mapping["analysis"]["assumption_sweep"] = None
    return config_from_mapping(mapping)


def timed_replicate(cfg: Any, world: Any, users: Any, seq: Any, tag: int,
                    times: dict[tuple[str, str, int, int], float]) -> None:
    """Time each design's serving and checkpoint of every batch of one replicate; the
    minimum over rounds is kept per (design, part, replicate, batch), so a burst of load on
    another process spoils one batch of one round, not the comparison."""
    traffic, designs = build_replicate(cfg, world, users, seq)
    step = traffic.batch_hours
    clock = time.process_time  # CPU time of this process: steadier than wall time on a busy machine
    for i, hour in enumerate(range(0, traffic.days * 24, step)):
        batch = traffic.batch(hour, step)
        for d in designs:
            t0 = clock()
            d.process(batch)
            t = clock() - t0
            key = (d.name, "serving", tag, i)
            times[key] = min(times.get(key, t), t)
        if (hour + step) % 24 == 0:
            for d in designs:
                t0 = clock()
                d.checkpoint((hour + step) // 24)
                t = clock() - t0
                key = (d.name, "checkpoints", tag, i)
                times[key] = min(times.get(key, t), t)


def breakdown(cfg: Any, world: Any, users: Any, seqs: list[Any], rounds: int) -> dict[str, float]:
    """Seconds per impression of each part of the configured design's serving step, as the
    design does it (:meth:`CounterfactualDesign._logged` and ``_process``), and of its
    checkpoints (the days before the last and the last day, when the whole-log
    estimators are computed). ``design bookkeeping`` is the rest of the design's own
    ``process`` (per-user sums of the terms, observed metrics, query counts): its time on
    the same batches minus the parts."""
    from onlineeval.estimators import LoggedData
    from simulations.designs.counterfactual import (
        _BatchReward,
        _BatchTarget,
        distinct_propensities,
        known_list_propensities,
    )
    from simulations.designs.counterfactual.fused import stack_propensities, stacked_indicators

    replicates = []
    for seq in seqs:
        traffic, designs = build_replicate(cfg, world, users, seq)
        design = next(d for d in designs if d.name == "counterfactual")
        step = traffic.batch_hours
        batches = [traffic.batch(hour, step) for hour in range(0, traffic.days * 24, step)]
        replicates.append((seq, batches))
    policy, reward, m = design.policy, design.reward, world.labels.shape[1]
    n_total = sum(len(b) for _, batches in replicates for b in batches)
    best: dict[str, float] = defaultdict(lambda: float("inf"))
    clock = time.process_time  # CPU time of this process: steadier than wall time on a busy machine
    for _ in range(rounds):
        parts: dict[str, float] = defaultdict(float)
        rng = np.random.default_rng(0)
        for seq, batches in replicates:
            fresh = next(d for d in build_replicate(cfg, world, users, seq)[1] if d.name == "counterfactual")
            step = cfg.traffic.batch_hours
            for i, b in enumerate(batches):
                t0 = clock()
                fresh.process(b)
                parts["(the design's whole process)"] += clock() - t0
                if ((i + 1) * step) % 24 == 0:
                    day = (i + 1) * step // 24
                    t0 = clock()
                    fresh.checkpoint(day)
                    key = "checkpoint: last day (whole-log)" if day == cfg.traffic.days else "checkpoints: other days"
                    parts[key] += clock() - t0
            for b in batches:
                t0 = clock()
                shown = policy.sample(b.query, rng)
                t1 = clock()
                t_sample = t1 - t0
                same = runs = target_p = None
                compiled = design._compiled_logging(b.query, shown)  # one kernel (None: the NumPy parts below)
                t_kernel = clock() - t1
                t1 = clock()
                if compiled is not None:
                    same, runs, p, target_p = compiled
                elif design._known is not None:  # as the design does: the rows showing a target's list
                    same = design._known_lists.take(b.query, axis=1) == shown
                    runs = same.copy()
                    for j in range(1, runs.shape[2]):
                        runs[:, :, j] &= runs[:, :, j - 1]
                t2 = clock()
                if compiled is not None:
                    pass
                elif design._known is None:
                    p = distinct_propensities(policy, b.query, shown, m)
                else:
                    p = known_list_propensities(policy, b.query, shown, m, design._known, [r[:, -1] for r in runs],
                                                design._known_table, sampled=True)
                t3 = clock()
                clicks = design._clicks(b, shown)
                t4 = clock()
                for own in (shown, clicks, p.list, p.prefix, p.item):  # as the design: its own arrays frozen
                    if own.base is None:
                        own.setflags(write=False)
                data = LoggedData(b.query, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item,
                                  user=b.user, user_type=b.user_type, logger=policy)
                t5 = clock()
                targets = [_BatchTarget(t.target) for t in design.targets]
                if compiled is not None:
                    for t, eq, run in zip(targets, same, runs, strict=True):
                        t.prime(data.query, data.shown, eq, run)
                elif same is None or runs is None:
                    for t in targets:
                        t.propensities(data.query, data.shown)
                else:
                    for t, eq, run in zip(targets, same, runs, strict=True):
                        t.prime(data.query, data.shown, eq, run)
                if compiled is not None:
                    pass
                elif design._fused is not None:  # the stacked indicators the fused terms read
                    target_p = (stacked_indicators(same, runs) if same is not None and runs is not None else
                                stack_propensities([t.propensities(data.query, data.shown) for t in targets]))
                t6 = clock()
                parts["logger sampling"] += t_sample
                if compiled is not None:
                    parts["match, logger propensities, indicators (kernel)"] += t_kernel
                parts["target-list match (logger + targets)"] += t2 - t1
                parts["logger propensities"] += t3 - t2
                parts["clicks"] += t4 - t3
                parts["log record"] += t5 - t4
                parts["target indicators (shared)"] += t6 - t5
                batch_reward = _BatchReward(reward)
                behaviours: dict[str, Any] = {}
                if design._fused is not None:
                    t7 = clock()
                    _, behaviours = design._fused.compute(data, target_p, batch_reward)
                    names = [*design._fused.fused, *(f"{label} behaviours" for label in behaviours)]
                    parts[f"terms: fused, both targets ({', '.join(names)})"] += clock() - t7
                for label, est in design.estimators:
                    kept = (label, design.target_names[0]) in design._row_stats
                    if (design.whole_log[label] and not kept) or label in behaviours:
                        continue
                    if design._fused is not None and label in design._fused.fused:
                        continue
                    t7 = clock()
                    for t in targets:
                        if kept:  # a whole-log estimator's per-row statistics, kept batch by batch
                            est.behaviour_terms(data, t, batch_reward)
                        else:
                            est.terms(data, t, batch_reward)
                    parts[f"terms: {label} (both targets)"] += clock() - t7
        whole = parts.pop("(the design's whole process)")
        served = sum(v for key, v in parts.items() if not key.startswith("checkpoint"))
        parts["design bookkeeping (rest of process)"] = max(whole - served, 0.0)
        for key, v in parts.items():
            best[key] = min(best[key], v / n_total)
    return dict(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "counterfactual.yaml"))
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds (the best of each batch is kept)")
    parser.add_argument("--no-split", action="store_true", help="skip the split of the serving step")
    args = parser.parse_args()
    base = load_config(args.config)
    world = build_world(base, world_seed(base.seed))
    users = UserModels.from_config(base.users)
    seqs = replicate_seeds(base.seed, args.replicates)
    mapping = base.effective()
    cf = next(d for d in mapping["designs"] if d["type"] == "counterfactual")
    variants: dict[str, dict[str, Any]] = {"counterfactual": {}}
    for spec in cf["estimators"]:
        variants[f"only_{spec['name']}"] = {"estimators": [spec]}
    variants["eps_greedy_rips"] = {"logger": EPSILON_GREEDY, "estimators": [{"name": "rips", "options": {}}]}
    variants["eps_greedy_ips"] = {"logger": EPSILON_GREEDY, "estimators": [{"name": "ips", "options": {}}]}
    cfg = variant_config(mapping, variants)
    td_name = next(d.name for d in cfg.designs if d.type == "interleaving")

    timed_replicate(cfg, world, users, seqs[0], -1, {})  # warm-up (imports, caches)
    times: dict[tuple[str, str, int, int], float] = {}
    for _ in range(args.rounds):
        for tag, seq in enumerate(seqs):
            timed_replicate(cfg, world, users, seq, tag, times)
    best: dict[tuple[str, str], float] = defaultdict(float)
    for (name, part, _, _), t in times.items():
        best[(name, part)] += t
    n_impr = cfg.traffic.days * cfg.traffic.queries_per_day * args.replicates

    def us(name: str, part: str) -> float:
        return 1e6 * best[(name, part)] / n_impr

    td_total = us(td_name, "serving") + us(td_name, "checkpoints")
    print(f"config: {args.config}; {args.replicates} replicates x {cfg.traffic.days} days x "
          f"{cfg.traffic.queries_per_day} queries, batch every {cfg.traffic.batch_hours} h; CPU time of one process, "
          f"all designs on the same batches, each batch's best of {args.rounds} rounds")
    print(f"{'design':<28}{'serving':>10}{'checkpts':>10}{'total':>10}{'/ team-draft':>14}  (us per impression)")
    for d in cfg.designs:
        s, c = us(d.name, "serving"), us(d.name, "checkpoints")
        print(f"{d.name:<28}{s:10.3f}{c:10.3f}{s + c:10.3f}{(s + c) / td_total:14.2f}")
    if args.no_split:
        return
    print("\nthe configured design split on recorded batches (us per impression, each part's best round):")
    cfg_one = variant_config(mapping, {"counterfactual": {}})
    split = breakdown(cfg_one, world, users, seqs, args.rounds)
    serving = {key: v for key, v in split.items() if not key.startswith("checkpoint")}
    for key, v in [*serving.items(), *((key, v) for key, v in split.items() if key not in serving)]:
        print(f"  {key:<44}{1e6 * v:8.3f}")
    td = us(td_name, "serving") + us(td_name, "checkpoints")
    print(f"  {'sum of the parts':<44}{1e6 * sum(split.values()):8.3f}   (team-draft in the same run: {td:.3f})")


if __name__ == "__main__":
    main()
