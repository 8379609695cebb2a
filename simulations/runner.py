"""Replicates: seeding, running one replicate, running many in parallel, ground truth.

Seeding (results never depend on the number of workers or on the executor):

- the world (collection, rankers) from ``SeedSequence((seed, WORLD))``;
- replicate ``r`` from ``SeedSequence(seed).spawn(R)[r]``; inside it the traffic stream
  and one stream per design (keyed by the design's name and whether it is the A/A
  variant), so adding a design does not change the others' numbers;
- the ground-truth Monte Carlo from ``SeedSequence((seed, TRUTH))``.

Finished replicates are handed to a callback as soon as they complete, so a caller can
write them out and an interrupted run loses no finished work.
"""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from onlineeval.errors import ConfigError
from simulations.config import Config, DesignConfig
from simulations.designs import Design, design_class
from simulations.designs.base import CheckpointRow
from simulations.designs.interleaving import NULL_PREFIX
from simulations.sampling import child_seed
from simulations.traffic import TrafficModel, run_traffic
from simulations.users import UserModels
from simulations.truth_interleaving import interleaving_truth, null_interleaving_truth
from simulations.truth_interleaving_exact import exact_interleaving_truth
from simulations.truth_null_exact import exact_null_truth
from simulations.world import World

__all__ = [
    "DesignSpec",
    "design_specs",
    "run_replicate",
    "run_replicates",
    "replicate_seeds",
    "world_seed",
    "compute_truth",
    "exact_ab_metrics",
    "per_user_mean_metrics",
    "null_interleaving_truth",
    "truth_by_segment",
    "counterfactual_truth",
    "kernels_cached",
    "monte_carlo_truths",
    "truth_reporting",
    "Truth",
    "TruthRun",
    "NULL_PREFIX",  # (re-exported: simulations.analysis and tests read it here)
]

_WORLD_TAG = 0x776F726C64  # "world"


@dataclass(frozen=True)
class DesignSpec:
    """A design to run: its config and whether it is the A/A variant."""

    config: DesignConfig
    aa: bool
    null: bool = False  # an interleaving design's null variant (clicks independent of relevance)


def design_specs(config: Config) -> list[DesignSpec]:
    """The designs, their A/A variants (``analysis.aa``) and every interleaving design's null
    variant (``analysis.null``; rows ``null:<pair>``: the real rankers, clicks that ignore relevance)."""
    specs = [DesignSpec(d, False) for d in config.designs]
    if config.analysis.aa:
        specs += [DesignSpec(d, True) for d in config.designs]
    if config.analysis.null:
        specs += [DesignSpec(d, False, True) for d in config.designs if d.type == "interleaving"]
    return specs


def world_seed(seed: int) -> np.random.SeedSequence:
    return np.random.SeedSequence((seed, _WORLD_TAG))


def replicate_seeds(seed: int, replicates: int) -> list[np.random.SeedSequence]:
    return np.random.SeedSequence(seed).spawn(replicates)


def build_replicate(
    config: Config, world: World, users: UserModels, seq: np.random.SeedSequence,
    only: Callable[[DesignSpec], bool] | None = None,
) -> tuple[TrafficModel, list[Design]]:
    """The traffic model and the designs of one replicate, each on its own child stream:
    traffic on key ``(0,)``, a design on ``(1, name, aa)`` (its null variant ``(1, name, 2)``). ``only``: build
    just the designs it accepts (their numbers are the same: every design has its own stream and sees the same
    traffic; :mod:`simulations.export_log` replays a counterfactual design this way)."""
    traffic = TrafficModel(config.traffic, config.users, world.frequency, np.random.default_rng(child_seed(seq, 0)))
    designs: list[Design] = []
    for spec in design_specs(config):
        if only is not None and not only(spec):
            continue
        cls = design_class(spec.config.type)
        rng = np.random.default_rng(child_seed(seq, 1, spec.config.name, 2 if spec.null else int(spec.aa)))
        design = cls(spec.config, world, users, rng, config.users.population, config.analysis.alpha, aa=spec.aa)
        if spec.null:
            design.use_null_user()
        if hasattr(design, "last_day"):  # counterfactual: estimators fitted on the whole log run then
            design.last_day = config.traffic.days
        designs.append(design)
    from simulations.cuped import attach_pre_periods

    # analysis.cuped: the pre-period of A/B designs, on its own child stream (3, "pre_period", days)
    attach_pre_periods(traffic, designs, seq)
    return traffic, designs


def replicate_rows(designs: list[Design], index: int) -> list[dict[str, Any]]:
    """The designs' checkpoint rows, tagged with the replicate index (a :class:`CheckpointRow`'s fields are
    numbers, strings and booleans: its ``__dict__`` is what ``asdict`` returns, without the deep copies,
    9 -> 0.3 ms for the ~600 rows of a replicate of ``configs/ab.yaml``)."""
    return [{"replicate": index, **(row.__dict__ if type(row) is CheckpointRow else asdict(row))}
            for design in designs for row in design.rows]


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block (when it was on; reference counting still frees
    everything else). A replicate allocates a few thousand containers (rows, batches, SimPy events), which
    trigger collections of the older generations, and a full collection walks every object of the process
    (~200k after importing pandas, SciPy and numba; the world's): 13-16 ms of a 0.25 s replicate of
    ``configs/ab.yaml``. A replicate leaves about 11 objects in reference cycles (its SimPy environment),
    collected by the first collection after the block."""
    if not gc.isenabled():  # paused by the caller: leave it so
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def run_replicate(
    config: Config,
    world: World,
    users: UserModels,
    seq: np.random.SeedSequence,
    index: int,
) -> list[dict[str, Any]]:
    """Run one replicate experiment; return one row per (design, day, metric). The cyclic garbage collector
    is paused while it runs (:func:`no_cyclic_gc`)."""
    with no_cyclic_gc():
        traffic, designs = build_replicate(config, world, users, seq)

        def on_day_end(day: int) -> None:
            for design in designs:
                design.checkpoint(day)

        from simulations.sequential import batch_looks

        # designs monitored per batch (analysis.monitoring: batch) also record a look after every batch
        try:
            run_traffic(traffic, [*designs, *batch_looks(designs)], on_day_end)
        except ConfigError as exc:
            raise _design_indexed(exc, config) from None
        return replicate_rows(designs, index)


def _design_indexed(exc: ConfigError, config: Config) -> ConfigError:
    """A design's error raised during a replicate (keyed ``designs.<name>...``: the design knows its name, not its
    place) keyed by the design's index in the config, as every other config error is: ``designs[2]...``."""
    path = exc.key_path
    names = [d.name for d in config.designs]
    if len(path) >= 2 and path[0] == "designs" and isinstance(path[1], str) and path[1] in names:
        return ConfigError(("designs", names.index(path[1]), *path[2:]), exc.message, exc.source)
    return exc


# ---------------------------------------------------------------------------- parallel execution
_WORKER: dict[str, Any] = {}


def one_blas_thread() -> None:
    """Limit this process's BLAS (and OpenMP) thread pools to one thread, in a worker process of a local pool: the
    workers fill the cores, and BLAS's own threads in every worker (OpenBLAS starts one per core) only spin against
    each other. Measured on ``configs/counterfactual.yaml`` (2 workers, 2 cores; the bootstrap's products of the
    resamples' counts): 52 s of CPU time against 35 s with one thread each, 33 against 25 s of wall time."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


#: the pid of the process that last forked in this interpreter (set just before each fork): a forked worker's parent
_FORKED_FROM = [os.getpid()]
_FORKED = [False]  # this process was forked from one that had imported this module (not spawned)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _FORKED_FROM.__setitem__(0, os.getpid()),
                        after_in_child=lambda: _FORKED.__setitem__(0, True))
#: seconds between a worker's checks that its parent is alive
PARENT_CHECK_INTERVAL = 0.25


def die_with_parent(interval: float | None = None) -> None:
    """End this worker process (``os._exit``) as soon as the process that forked it is gone (review 15, F1).

    A run killed by ``kill -9``, the OOM killer or a batch scheduler cannot end its workers; they used to stay,
    blocked on the task queue for good. A daemon thread compares ``os.getppid()`` with the pid that forked this
    process every ``interval`` seconds (:data:`PARENT_CHECK_INTERVAL`): an orphan is re-parented (to 1 or a
    subreaper), so its ``getppid()`` changes. Portable, and unlike Linux's ``PR_SET_PDEATHSIG`` (sent when the
    *thread* that forked the child ends) it cannot end a reused pool's workers while the process lives. The
    worker was forked, so it holds no folder lock (:func:`simulations.folder_lock._drop_locks_in_child`)."""
    import threading
    import time

    # a spawned worker (another start method) knows its parent only as its parent now
    parent = _FORKED_FROM[0] if _FORKED[0] else os.getppid()
    wait = PARENT_CHECK_INTERVAL if interval is None else interval
    if os.getppid() != parent:  # the parent died before this worker got here
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(wait)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="onlineeval-parent-watch", daemon=True).start()


def _init_worker(config: Config, world: World) -> None:
    # the parent handles Ctrl-C and SIGTERM (cancels the queue and ends the workers); a worker
    # interrupted on its own would only print a traceback. A forked worker inherits the parent's
    # handler, which turns SIGTERM into an exception: the parent's terminate() must end it silently
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()
    one_blas_thread()
    _WORKER.update(config=config, world=world, users=UserModels.from_config(config.users))


def _work(index: int, seq: np.random.SeedSequence) -> tuple[int, list[dict[str, Any]]]:
    return index, run_replicate(_WORKER["config"], _WORKER["world"], _WORKER["users"], seq, index)


def resolve_workers(requested: int) -> int:
    return requested if requested > 0 else (os.cpu_count() or 1)


def run_replicates(
    config: Config,
    world: World,
    indices: Iterable[int] | None = None,
    workers: int | None = None,
    on_done: Callable[[int, list[dict[str, Any]]], None] | None = None,
) -> dict[int, list[dict[str, Any]]]:
    """Run replicates ``indices`` (default all), in ``workers`` processes (1 = in-process).

    Returns ``{replicate: rows}``; ``on_done`` is called as each replicate finishes.
    """
    seqs = replicate_seeds(config.seed, config.replicates)
    todo = list(range(config.replicates)) if indices is None else list(indices)
    n_workers = min(resolve_workers(config.workers if workers is None else workers), max(len(todo), 1))
    results: dict[int, list[dict[str, Any]]] = {}
    if n_workers <= 1:
        users = UserModels.from_config(config.users)
        for i in todo:
            results[i] = run_replicate(config, world, users, seqs[i], i)
            if on_done is not None:
                on_done(i, results[i])
        return results
    pool = ProcessPoolExecutor(max_workers=n_workers, initializer=_init_worker, initargs=(config, world))
    try:
        futures = [pool.submit(_work, i, seqs[i]) for i in todo]
        for fut in as_completed(futures):
            i, rows = fut.result()
            results[i] = rows
            if on_done is not None:
                on_done(i, rows)
    except BaseException:
        # interrupted (signal) or failed: cancel the queue and end the workers now instead of
        # computing the remaining replicates; finished ones were already handed to on_done
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return results


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel pending work and terminate the worker processes (none is left behind)."""
    processes = list(getattr(pool, "_processes", {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)  # (shutdown(wait=False) forgets it)
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
    # the pool's management thread ends once its workers are gone, closing its wake-up pipe; wait for it: the
    # interpreter's exit hook (concurrent.futures.process._python_exit) would otherwise race it, writing to the pipe
    # while it closes ("Exception ignored in threading ... Bad file descriptor" on stderr after Ctrl-C, 1 run in 6)
    if manager is not None:
        manager.join(timeout=5)


# ---------------------------------------------------------------------------- ground truth
@dataclass(frozen=True)
class Truth:
    """The population value of a design's metric (what an infinite experiment estimates)."""

    design: str
    metric: str
    value: float
    se: float  # Monte Carlo standard error; 0 for exact values
    method: str
    baseline: float | None = None  # value under ranker A, for relative effects


def exact_ab_metrics(world: World, users: UserModels, ranker: str) -> dict[str, np.ndarray]:
    """Per-query exact expectations of the A/B metrics when ``ranker``'s list is shown.

    Clicks per query from the click models' exact click probabilities; abandonment and
    the reciprocal rank of the first click from the exact distribution of the first
    click's rank (:meth:`UserModels.first_click_distribution`); user types by share.
    """
    return exact_ab_metrics_of(users, world.ranked_labels(ranker))


def per_user_mean_metrics(world: World, users: UserModels, ranker: str, utility: bool = False) -> dict[str, float]:
    r"""Exact expectations of the A/B metrics as per-user means (``test: welch``): every
    user weighs the same, whatever their activity.

    A user of type :math:`t` issues queries drawn from the query frequencies :math:`f_q`,
    so the expectation of their per-user ratio :math:`\sum_i m_i / n_u` is, for any number
    of queries :math:`n_u \ge 1`, the type's per-query expectation
    :math:`\mu_t = \sum_q f_q\, E_t[m \mid q]`. Types are drawn by share independently of
    activity and of the A/B split, so the expected mean over the users of an arm is

    .. math::

        \mu^{user} = \sum_t s_t \mu_t .

    (Exact, no Monte Carlo. The query-weighted ratio of the delta design,
    :math:`\sum_u \sum_i m_i / \sum_u n_u`, has the same limit *here* because types do not
    depend on activity; a population whose heavy users behave differently would separate them.)

    ``utility``: also the ``utility`` metric's (:func:`exact_ab_metrics_of`).
    """
    shown = world.ranked_labels(ranker)
    weights = _utility_weights(world, shown) if utility else None
    out: dict[str, float] = {}
    for share, name, model in zip(users.shares, users.names, users.models, strict=True):
        one = UserModels([name], [1.0], [model])
        for metric, per_query in exact_ab_metrics_of(one, shown, weights).items():
            out[metric] = out.get(metric, 0.0) + float(share) * float(world.frequency @ per_query)
    return out


def exact_ab_metrics_of(users: UserModels, shown: np.ndarray,
                        utility_weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """:func:`exact_ab_metrics` for given shown grades ``(Q, k)``; with the ``utility`` metric's rank weights
    (:func:`simulations.designs.ab.utility_weights`) also its expectation, the click probabilities times them."""
    first = users.first_click_distribution(shown)
    probabilities = users.click_probabilities(shown)
    out = {
        "clicks_per_query": probabilities.sum(axis=1),
        "abandonment": first[:, -1],
        "reciprocal_rank": first[:, :-1] @ (1.0 / np.arange(1, shown.shape[1] + 1)),
    }
    if utility_weights is not None:
        out["utility"] = np.asarray(probabilities) @ utility_weights
    return out


def _utility_weights(world: World, shown: np.ndarray) -> np.ndarray:
    from simulations.designs.ab import utility_weights

    return utility_weights(world, shown.shape[1])


def truth_by_segment(world: World, users: UserModels,
                     utility: bool = False) -> dict[str, dict[str, dict[str, float]]]:
    """Exact A/B metrics of A and B and their difference within head, torso and tail (``utility``: the
    ``utility`` metric's too)."""
    from simulations.world import SEGMENT_NAMES

    per_query = {name: exact_ab_metrics_of(users, world.ranked_labels(name),
                                           _utility_weights(world, world.ranked_labels(name)) if utility else None)
                 for name in ("A", "B")}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for s, seg in enumerate(SEGMENT_NAMES):
        mask = world.segment == s
        if not mask.any():
            continue
        w = world.frequency[mask] / world.frequency[mask].sum()
        out[seg] = {}
        for metric in per_query["A"]:
            a, b = float(w @ per_query["A"][metric][mask]), float(w @ per_query["B"][metric][mask])
            out[seg][metric] = {"A": a, "B": b, "delta": b - a}
    return out


def counterfactual_truth(
    design: DesignConfig,
    world: World,
    users: UserModels,
    per_ranker: dict[str, dict[str, float]] | None = None,
    index: int | None = None,
) -> list[Truth]:
    """Truths of a counterfactual design's rows: every estimator row estimates the exact
    :math:`V(B) - V(A)` of the design's metric (the targets, baseline first); a
    ``logging:<metric>`` row's reference is ranker A's exact value (the logger's cost is
    its observed value minus that)."""
    from simulations.designs.counterfactual import shared_policy

    if design.logger is not None:
        try:  # the logger on the real score table, before any replicate runs
            shared_policy(design.logger, world)
        except ConfigError as exc:
            where = ("designs", design.name if index is None else index, "logger")
            raise ConfigError((*where, *exc.key_path), exc.message) from None
    per_ranker = dict(per_ranker or {})
    for name in dict.fromkeys(["A", *design.targets]):
        if name not in per_ranker:
            per_ranker[name] = {m: float(world.frequency @ v) for m, v in exact_ab_metrics(world, users, name).items()}
    base, cand = design.targets
    if design.metric in per_ranker[base]:
        va, vb = per_ranker[base][design.metric], per_ranker[cand][design.metric]
    else:  # the offline metric's utility (simulations.designs.counterfactual.metric)
        from simulations.designs.counterfactual.metric import exact_values

        va, vb = (float(world.frequency @ exact_values(world, users, r, design.metric)) for r in (base, cand))
    out = [Truth(design.name, spec.label, vb - va, 0.0, "exact", va) for spec in design.estimators]
    out += [Truth(design.name, f"logging:{m}", v, 0.0, "exact value of ranker A", None)
            for m, v in per_ranker["A"].items()]
    return out




def compute_truth(config: Config, world: World, users: UserModels) -> list[Truth]:
    """True effects of every (non-A/A) design under the query distribution.

    The A/B metrics are exact: clicks per query from the click models' exact click
    probabilities, abandonment and the reciprocal rank of the first click from the exact
    distribution of the first click's rank (:meth:`UserModels.first_click_distribution`),
    each weighted by query frequency and user-type share; ``test: welch`` designs estimate
    per-user means (users weighted equally) and get that estimand's exact value
    (:func:`per_user_mean_metrics`). Interleaving preferences are Monte Carlo estimates
    over ``analysis.truth_impressions`` impressions, reported with their standard error,
    and every interleaving design also gets its expected Delta under a *null user* whose
    clicks do not depend on relevance (metric ``null:<pair>``, :func:`null_interleaving_truth`):
    every true effect is then exactly 0, so a value beyond its Monte Carlo error is the
    method's bias. A two-ranker team-draft or balanced design with prefix credit whose users' click models are
    chains (metric users too), independent-click tables or UBMs, by grade, gets its preference exactly instead
    (:func:`simulations.truth_interleaving_exact.exact_interleaving_truth`: SE 0, no Monte Carlo run), and its null
    variant too where its lists have at most :data:`simulations.truth_null_exact.MAX_SLOTS` slots
    (:func:`simulations.truth_null_exact.exact_null_truth`). Counterfactual designs: every estimator row has the exact
    ``V(B) - V(A)`` of the design's metric (:func:`counterfactual_truth`). A/A designs
    have a true effect of exactly 0.

    The exact truths are computed first (a counterfactual logger's error stops the run before the Monte Carlo),
    then the Monte Carlo runs (:func:`monte_carlo_truths`), in this process or, inside :func:`truth_reporting`
    with ``workers > 1``, in a pool of worker processes: each run draws from its own stream (keyed by the design's
    name and whether it is the null variant), so the truths are the same numbers for any number of workers, and
    the list keeps the designs' order.
    """
    parts: list[list[Truth] | TruthRun] = []
    per_query = {name: exact_ab_metrics(world, users, name) for name in ("A", "B")}
    per_ranker = {name: {m: float(world.frequency @ v) for m, v in pq.items()} for name, pq in per_query.items()}
    per_user: dict[str, dict[str, float]] = {}
    runs = monte_carlo_truths(config)
    ab_values = {name: dict(values) for name, values in per_ranker.items()}  # an A/B design's metrics
    if any(d.type == "ab" and d.metric == "utility" for d in config.designs):  # and metric: utility's
        for name in ("A", "B"):
            shown = world.ranked_labels(name)
            expected = np.asarray(users.click_probabilities(shown)) @ _utility_weights(world, shown)
            ab_values[name]["utility"] = float(world.frequency @ expected)
    for index, design in enumerate(config.designs):
        if design.type == "ab":
            metrics = [m for m in ab_values["A"] if m != "utility" or design.metric == "utility"]
            if design.test == "welch":
                utility = design.metric == "utility"
                if not per_user or utility and "utility" not in per_user["A"]:
                    per_user = {r: per_user_mean_metrics(world, users, r, utility) for r in ("A", "B")}
                parts.append([Truth(design.name, metric, per_user["B"][metric] - per_user["A"][metric], 0.0,
                                    "exact (per-user means, users weighted equally)", per_user["A"][metric])
                              for metric in metrics])
                continue
            parts.append([Truth(design.name, metric, ab_values["B"][metric] - ab_values["A"][metric], 0.0, "exact",
                                ab_values["A"][metric]) for metric in metrics])
            continue
        if design.type == "counterfactual":
            parts.append(counterfactual_truth(design, world, users, per_ranker, index))
            continue
        exact = exact_interleaving_truth(config, design, world, users)
        if exact is not None:  # two-ranker team-draft / balanced under grade chains or UBM: no Monte Carlo
            runs = [run for run in runs if not (run.index == index and not run.null)]
            parts.append(exact)
        parts += [run for run in runs if run.index == index and not run.null]  # the design's preferences
        null = exact_null_truth(config, design, world, users) if exact is not None else None
        if null is not None:  # and its null variant, exactly too
            runs = [run for run in runs if not (run.index == index and run.null)]
            parts.append(null)
        parts += [run for run in runs if run.index == index and run.null]
    mc = _run_monte_carlo(config, world, users, runs)
    out: list[Truth] = []
    for part in parts:
        out += mc[part] if isinstance(part, TruthRun) else part
    return out


@dataclass(frozen=True)
class TruthRun:
    """One Monte Carlo run of the ground truth: an interleaving design's preferences (``null``: under the null
    user) over ``impressions`` impressions; ``index`` is the design's position in ``config.designs``."""

    index: int
    design: str
    null: bool
    impressions: int

    @property
    def label(self) -> str:
        return f"{self.design} (null user)" if self.null else self.design


def monte_carlo_truths(config: Config) -> list[TruthRun]:
    """The Monte Carlo runs :func:`compute_truth` makes, in its order: for every interleaving design its
    preferences and their null-user variant, ``analysis.truth_impressions`` impressions each."""
    n = config.analysis.truth_impressions
    return [TruthRun(i, d.name, null, n) for i, d in enumerate(config.designs) if d.type == "interleaving"
            for null in (False, True)]


#: what :func:`truth_reporting` set: ``progress`` (a callable) and ``workers`` (an int)
_TRUTH_REPORTING: dict[str, Any] = {}


@contextmanager
def truth_reporting(
    progress: Callable[[int, int, str], None] | None = None, workers: int = 1
) -> Iterator[None]:
    """In the block, :func:`compute_truth` (which :func:`simulations.job.prepare` calls) reports its Monte Carlo
    progress as ``progress(impressions done, impressions in all, label of the run)`` (a first call with 0 done
    before the first run starts; one after every chunk of :data:`~simulations.truth_interleaving.TRUTH_CHUNK`
    impressions in this process, or after every run on workers; a last one with all done) and runs the Monte Carlo
    runs in ``workers`` processes (at most one per run; 1 = this process). Nothing changes any number. For the
    command line (``onlineeval simulate``), which calls :func:`simulations.job.simulate` as a whole; elsewhere (the
    sweep's tasks, the API) :func:`compute_truth` runs silently in the calling process.
    """
    previous = dict(_TRUTH_REPORTING)
    _TRUTH_REPORTING.clear()
    _TRUTH_REPORTING.update(progress=progress, workers=max(int(workers), 1))
    try:
        yield
    finally:
        _TRUTH_REPORTING.clear()
        _TRUTH_REPORTING.update(previous)


def _run_monte_carlo(
    config: Config, world: World, users: UserModels, runs: list[TruthRun]
) -> dict[TruthRun, list[Truth]]:
    """The truths of ``runs`` (:func:`compute_truth`'s Monte Carlo), reported to :func:`truth_reporting`'s
    ``progress``, in its ``workers`` processes."""
    progress: Callable[[int, int, str], None] | None = _TRUTH_REPORTING.get("progress")
    n_workers = min(int(_TRUTH_REPORTING.get("workers", 1)), len(runs))
    total = sum(run.impressions for run in runs)
    done = 0
    if not runs:
        return {}
    if progress is not None:
        progress(0, total, runs[0].label)
    out: dict[TruthRun, list[Truth]] = {}
    if n_workers <= 1:
        for run in runs:
            def tick(m: int, label: str = run.label) -> None:
                nonlocal done
                done += m
                if progress is not None:
                    progress(done, total, label)

            out[run] = interleaving_truth(config, config.designs[run.index], world, users, run.null, tick)
        return out
    pool = ProcessPoolExecutor(max_workers=n_workers, initializer=_init_truth_worker,
                               initargs=(config, world, users))
    try:
        futures = {pool.submit(_truth_work, run): run for run in runs}
        for fut in as_completed(futures):
            run = futures[fut]
            out[run] = fut.result()
            done += run.impressions
            if progress is not None:
                progress(done, total, run.label)
    except BaseException:
        _stop_pool(pool)  # interrupted or failed: end the workers now
        raise
    pool.shutdown(wait=True)
    return out


def _init_truth_worker(config: Config, world: World, users: UserModels) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and SIGTERM (see _init_worker)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()
    one_blas_thread()
    _WORKER.update(config=config, world=world, users=users)


def _truth_work(run: TruthRun) -> list[Truth]:
    config = _WORKER["config"]
    return interleaving_truth(config, config.designs[run.index], _WORKER["world"], _WORKER["users"], run.null)


def kernels_cached() -> bool | None:
    """Whether numba's cache holds compiled simulator kernels for this machine and this code: ``False`` when no
    kernel of :mod:`simulations.kernels` (which every simulation calls: the users' clicks) has an entry in its
    cache index for this numba version, this source file, this CPU and this function's bytecode (the index files
    are read, nothing is compiled), so the first simulation compiles them (about 9 s of CPU for configs/ab.yaml,
    27 s for configs/counterfactual.yaml); ``True`` when one has (other kernels may still compile for new
    argument types: rarely and briefly); ``None`` when it cannot be told (numba's internals differ)."""
    import hashlib

    try:
        from numba.core.registry import cpu_target

        import simulations.kernels as kernels

        magic = cpu_target.target_context.codegen().magic_tuple()
        dispatchers = [f for f in vars(kernels).values() if getattr(f, "_cache", None) is not None
                       and hasattr(f, "py_func") and f.__module__ == kernels.__name__]
        if not dispatchers:
            return None
        for f in dispatchers:
            code = hashlib.sha256(f.py_func.__code__.co_code).hexdigest()
            index = f._cache._cache_file._load_index()
            if any(key[1] == magic and key[2][0] == code for key in index):
                return True
        return False
    except Exception:  # noqa: BLE001 - a private numba API: when it changes, say nothing rather than guess
        return None
