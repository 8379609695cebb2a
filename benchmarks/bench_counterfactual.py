"""Benchmark: the counterfactual design's cost per impression against team-draft's.

Runs replicates of ``configs/counterfactual.yaml`` in a plain loop over the same
batches (as :mod:`benchmarks.bench_simulation` does without SimPy) and times each
design's ``process`` (serving: draw, clicks, propensities, estimator terms) and
``checkpoint`` (estimates) separately. Team-draft interleaving runs in the same loop on
the same batches, so the two are measured under the same machine load. Variants of the
counterfactual design (the configured six estimators, each estimator alone, an
epsilon-greedy logger with one estimator) run side by side without the last day's bootstrap
(a cost per replicate, not per impression), and the configured design with it; the A/A designs and the
team-draft null variant are left out (the counterfactual A/A design does no work). Then the config's own designs
(with their A/A and null variants, as the runner builds them) on the same replicates: the cost "in the same
simulation" (:func:`as_configured`). Every replicate runs with Python's cyclic garbage collector paused, as
:func:`simulations.runner.run_replicate` runs it.

Then the configured design's ``process`` is split into its parts as it runs: the logger's draw, the users'
uniforms for the clicks, the compiled step of :mod:`simulations.designs.counterfactual.step` (clicks,
propensities, the estimators' terms and the per-user sums) and the rest; with its checkpoints, and the general
path's ``process`` (``fused_step`` off) timed on the same batches.

    python benchmarks/bench_counterfactual.py [--replicates 3] [--rounds 5] [--no-split]
"""

from __future__ import annotations

import argparse
import copy
import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import onlineeval.stats  # noqa: F401  (import cost outside the timings)
from simulations.config import config_from_mapping, load_config
from simulations.runner import (
    build_replicate,
    design_specs,
    no_cyclic_gc,
    one_blas_thread,
    replicate_seeds,
    world_seed,
)
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
    another process spoils one batch of one round, not the comparison. Python's cyclic garbage collector is paused
    for the replicate, as :func:`simulations.runner.run_replicate` pauses it (with it running, both designs cost
    about a fifth more, the ratio the same: 3.42x against 3.38x, 2026-12-03)."""
    with no_cyclic_gc():
        _timed_replicate(cfg, world, users, seq, tag, times)


def _timed_replicate(cfg: Any, world: Any, users: Any, seq: Any, tag: int,
                     times: dict[tuple[str, str, int, int], float]) -> None:
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


def as_configured(mapping: dict[str, Any], world: Any, users: Any, seqs: list[Any], rounds: int) -> None:
    """Print each design's cost per impression in the config's own simulation: its designs with their A/A and null
    variants as :func:`simulations.runner.run_replicate` builds and runs them (cyclic GC paused; the counterfactual
    designs without the last day's bootstrap, a cost per replicate; no assumption sweep), each batch's best of
    ``rounds``. The variants' table above runs ten counterfactual designs beside team-draft, whose working sets
    evict each other's caches; here team-draft costs about half as much (2026-12-03: 0.068 against 0.125-0.151 us)
    and the counterfactual design about 5x team-draft's."""
    mapping = copy.deepcopy(mapping)
    for d in mapping["designs"]:
        if d["type"] == "counterfactual":
            d["bootstrap"] = 0
    mapping["analysis"]["assumption_sweep"] = None
    cfg = config_from_mapping(mapping)
    labels = [s.config.name + (" (A/A)" if s.aa else "") + (" (null)" if s.null else "") for s in design_specs(cfg)]
    best: dict[tuple[int, str, int, int], float] = {}
    clock = time.process_time
    for _ in range(rounds):
        for tag, seq in enumerate(seqs):
            with no_cyclic_gc():
                traffic, designs = build_replicate(cfg, world, users, seq)
                for i, hour in enumerate(range(0, traffic.days * 24, traffic.batch_hours)):
                    batch = traffic.batch(hour, traffic.batch_hours)
                    for j, d in enumerate(designs):
                        t0 = clock()
                        d.process(batch)
                        key = (j, "serving", tag, i)
                        best[key] = min(best.get(key, math.inf), clock() - t0)
                    if (hour + traffic.batch_hours) % 24 == 0:
                        for j, d in enumerate(designs):
                            t0 = clock()
                            d.checkpoint((hour + traffic.batch_hours) // 24)
                            key = (j, "checkpoints", tag, i)
                            best[key] = min(best.get(key, math.inf), clock() - t0)
    n_impr = cfg.traffic.days * cfg.traffic.queries_per_day * len(seqs)
    total: dict[tuple[int, str], float] = defaultdict(float)
    for (j, part, _, _), t in best.items():
        total[(j, part)] += 1e6 * t / n_impr
    td = labels.index(next(d.name for d in cfg.designs if d.type == "interleaving" and d.method == "team_draft"))
    td_total = total[(td, "serving")] + total[(td, "checkpoints")]
    print("\nthe config's own designs as the runner runs them (us per impression; no bootstrap):")
    for j, label in enumerate(labels):
        s, c = total[(j, "serving")], total[(j, "checkpoints")]
        print(f"  {label:<26}{s:10.3f}{c:10.3f}{s + c:10.3f}{(s + c) / td_total:14.2f}")


STEP = "compiled step (clicks, propensities, terms, sums)"


def step_breakdown(cfg: Any, world: Any, users: Any, seqs: list[Any], rounds: int) -> dict[str, float] | None:
    """Seconds per impression of the parts of the configured design's ``process`` when it runs the compiled step
    (:class:`~simulations.designs.counterfactual.step.CompiledStep`): the logger's draw (``policy.sample``), the
    users' uniforms for the clicks (``_GradeChains.uniforms``), the compiled pass
    (:func:`simulations.policies.kernels.counterfactual_step`: clicks, propensities, terms, per-user sums) and the
    rest (the step's Python: arrays, log, per-row statistics), timed by wrapping those calls; then its
    checkpoints (the days before the last, and the last day with adaptive IPS's whole-log choice), and the whole
    ``process`` of the general path (``fused_step`` off) on the same batches for comparison. None when the
    design does not run the step."""
    from simulations.designs.counterfactual import CounterfactualDesign
    from simulations.policies import kernels
    from simulations.users import _GradeChains

    clock = time.process_time  # CPU time of this process: steadier than wall time on a busy machine
    replicates = []
    for seq in seqs:
        traffic, _ = build_replicate(cfg, world, users, seq)
        step = traffic.batch_hours
        replicates.append((seq, [traffic.batch(hour, step) for hour in range(0, traffic.days * 24, step)]))
    n_total = sum(len(b) for _, batches in replicates for b in batches)
    best: dict[str, float] = defaultdict(lambda: float("inf"))
    real_kernel = kernels.counterfactual_step
    real_uniforms = _GradeChains.uniforms
    default = CounterfactualDesign.fused_step
    for _ in range(rounds):
        parts: dict[str, float] = defaultdict(float)
        for fused in (True, False):
            CounterfactualDesign.fused_step = fused
            for seq, batches in replicates:
                design = next(d for d in build_replicate(cfg, world, users, seq)[1] if d.name == "counterfactual")
                if fused:
                    def wrap(f: Any, key: str) -> Any:
                        def timed(*a: Any, **k: Any) -> Any:
                            t0 = clock()
                            out = f(*a, **k)
                            parts[key] += clock() - t0
                            return out
                        return timed
                    design.policy.sample = wrap(type(design.policy).sample.__get__(design.policy), "logger sampling")
                    # the users' uniforms (the clicks themselves are sampled in the compiled pass; an instance's own
                    # _clicks would turn that off, so the class's method is wrapped, and restored below)
                    _GradeChains.uniforms = wrap(real_uniforms, "click uniforms (NumPy draws)")
                    kernels.counterfactual_step = wrap(real_kernel, STEP)
                try:
                    step = cfg.traffic.batch_hours
                    for i, b in enumerate(batches):
                        t0 = clock()
                        design.process(b)
                        parts["process" if fused else "general path: whole process"] += clock() - t0
                        if fused and ((i + 1) * step) % 24 == 0:
                            day = (i + 1) * step // 24
                            design.last_day = cfg.traffic.days
                            t0 = clock()
                            design.checkpoint(day)
                            key = "checkpoint: last day (whole-log)" if day == cfg.traffic.days else \
                                "checkpoints: other days"
                            parts[key] += clock() - t0
                finally:
                    kernels.counterfactual_step = real_kernel
                    _GradeChains.uniforms = real_uniforms
                    design.policy.__dict__.pop("sample", None)
                    CounterfactualDesign.fused_step = default
                if fused and not design._step:
                    return None
        inner = sum(parts[k] for k in ("logger sampling", "click uniforms (NumPy draws)", STEP))
        parts["rest of process (Python, arrays, log)"] = max(parts.pop("process") - inner, 0.0)
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
    one_blas_thread()  # CPU time of one process on one core: BLAS's idle threads would count as its time too
    base = load_config(args.config)
    world = build_world(base, world_seed(base.seed))
    users = UserModels.from_config(base.users)
    seqs = replicate_seeds(base.seed, args.replicates)
    mapping = base.effective()
    cf = next(d for d in mapping["designs"] if d["type"] == "counterfactual")
    # the per-impression comparison runs every variant without the last day's bootstrap, a cost per replicate
    # (resamples x users, whatever the traffic) that team-draft's design has no counterpart of; the configured
    # bootstrap runs in a variant of its own and is reported per replicate
    boot = int(cf.get("bootstrap") or 0)
    cf["bootstrap"] = 0
    variants: dict[str, dict[str, Any]] = {"counterfactual": {}}
    for spec in cf["estimators"]:
        variants[f"only_{spec['name']}"] = {"estimators": [spec]}
    variants["eps_greedy_rips"] = {"logger": EPSILON_GREEDY, "estimators": [{"name": "rips", "options": {}}]}
    variants["eps_greedy_ips"] = {"logger": EPSILON_GREEDY, "estimators": [{"name": "ips", "options": {}}]}
    if boot:
        variants["counterfactual_bootstrap"] = {"bootstrap": boot}
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
    if boot:
        extra = best[("counterfactual_bootstrap", "checkpoints")] - best[("counterfactual", "checkpoints")]
        print(f"(counterfactual_bootstrap: the configured design with the config's last-day bootstrap, {boot} "
              f"resamples of the users: {1e3 * extra / args.replicates:.0f} ms per replicate more, whatever its "
              "traffic; the other variants run without it)")
    with_boot = copy.deepcopy(mapping)
    for d in with_boot["designs"]:
        if d["type"] == "counterfactual":
            d["bootstrap"] = boot
    as_configured(with_boot, world, users, seqs, args.rounds)
    if args.no_split:
        return
    print("\nthe configured design's process and checkpoints split (us per impression, each part's best round):")
    cfg_one = variant_config(mapping, {"counterfactual": {}})
    with no_cyclic_gc():  # as the runner runs replicates
        split = step_breakdown(cfg_one, world, users, seqs, args.rounds)
    if split is None:
        print("  (the design does not run the compiled step)")
        return
    general = split.pop("general path: whole process")
    for key, v in split.items():
        print(f"  {key:<52}{1e6 * v:8.3f}")
    td = us(td_name, "serving") + us(td_name, "checkpoints")
    print(f"  {'sum of the parts':<52}{1e6 * sum(split.values()):8.3f}   (team-draft in the same run: {td:.3f})")
    label = "the general path's process (fused_step off)"
    print(f"  {label:<52}{1e6 * general:8.3f}")

if __name__ == "__main__":
    main()
