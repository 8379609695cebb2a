r"""Conformance suite for off-policy estimators: ``check_estimator(cls)`` runs on every registered one.

The suite checks each estimator against the *exact* value of a target ranker in small
synthetic worlds whose click model, logging policy and targets are known, so the truth
comes from the click model's formulas, never from simulation. The worlds and their
formulas are in :mod:`onlineeval.estimators.exact_worlds` (:class:`CheckWorld`,
:func:`check_world`, :func:`sample_log`), their logging policies in
:mod:`onlineeval.estimators.enumerated_policies` (:class:`EnumeratedPolicy`: explicit
probabilities of every ordered :math:`k`-subset of the candidates, so every propensity is
exact); both are re-exported here.

Checks (each raises :class:`CheckFailed` naming the estimator and what broke):

- ``unbiased[family/kind]`` for every pair of ``cls.unbiased_under`` (``"any"``: the PBM
  and cascade worlds): for an estimator whose terms are per-impression, the exact expectation
  of its terms over every impression the world can log (:func:`expected_value`, a sum over
  :func:`enumerated_log`'s rows weighted by their probabilities; for a ratio estimator the value
  its estimates converge to) equals the exact value to :data:`EXACT_RTOL` relative, so any bias
  fails; then, for every estimator, over :data:`REPLICATES` seeded logs, the mean estimate lies
  within 4 standard errors (:math:`\mathrm{sd}/\sqrt R`) of the exact value, for two targets and
  two rewards of the kind (estimators that fit a model: the kind's main reward only, over
  :data:`FITTED_REPLICATES` logs each estimated alone, and nothing exact). The Monte Carlo part
  alone resolves about 4-9% of the value for whole-list IPS, 1-4% for slot-level estimators and
  0.5-6% for fitted ones: a 1% bias passes it;
- ``biased[family/kind]`` for every pair of ``cls.biased_under``: the bias is visible,
  :math:`|\text{mean} - V| > 4\,\mathrm{SE}`, for at least one target with the kind's
  main reward (``clicks_per_query``, ``reciprocal_rank``);
- ``order_invariance``: permuting the log's rows gives the same estimate and CLT interval
  (to :math:`10^{-12}` relative);
- ``self_normalised_bounds`` (``cls.self_normalised`` only): on adversarial logs (wild
  propensities, random clicks, or at most one click per impression) the estimate lies in ``offset + [min, max]`` of the
  per-impression reward sums;
- ``bootstrap_seed``: the same seed gives the same bootstrap interval;
- ``clt_interval``: the CLT interval contains the estimate and the SE is finite;
- ``diagnostics``: ``ess`` in (0, number of weights], ``top1_share`` in [0, 1] for
  non-negative weights, no support violation under a full-support logger;
- ``missing_propensities``: a log without a propensity the estimator needs raises
  :class:`~onlineeval.errors.InputError` naming it (an estimator that needs none runs
  without any);
- ``support_violations``: under a deterministic logger, a target that shows other
  documents is counted as violating support (or the estimator refuses with
  ``InputError``);
- ``pickle``: a pickled copy gives the same estimate.

Estimators whose per-impression terms depend on the whole log (those that fit a model
on it: DM, DR) are detected by comparing the terms of one replicate computed alone with
the same rows inside the big log; they get :data:`FITTED_REPLICATES` replicates estimated
one by one (each fits its own model), the others :data:`REPLICATES` replicates reduced
from one call on the concatenated logs.
"""

from __future__ import annotations

import functools
import inspect
import math
import pickle
from collections.abc import Callable, Iterator

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import InputError
from onlineeval.estimators.base import (
    DeterministicTarget,
    Estimator,
    LoggedData,
    Reward,
    estimator_class,
    first_click,
    get_reward,
)
from onlineeval.estimators.enumerated_policies import (  # re-exported (the suite's public names)
    EnumeratedPolicy,
    _list_index,  # noqa: F401  (tests build targets with it)
    deterministic_policy,
    epsilon_greedy_policy,
    plackett_luce_policy,
    uniform_policy,
)
from onlineeval.estimators.exact_worlds import (  # re-exported (the suite's public names)
    FAMILIES,
    REPLICATE_SIZE,
    REPLICATES,
    CheckWorld,
    check_world,
    click_pattern_probabilities,
    enumerated_log,
    exact_event_probabilities,
    replicate_log,
    sample_clicks,
    sample_log,
)

__all__ = [
    "FAMILIES",
    "FITTED_REPLICATES",
    "REPLICATES",
    "REPLICATE_SIZE",
    "CheckFailed",
    "CheckWorld",
    "EnumeratedPolicy",
    "check_estimator",
    "check_rewards",
    "check_world",
    "click_pattern_probabilities",
    "deterministic_policy",
    "epsilon_greedy_policy",
    "enumerated_log",
    "estimator_checks",
    "exact_event_probabilities",
    "expected_value",
    "plackett_luce_policy",
    "replicate_log",
    "sample_clicks",
    "sample_log",
    "uniform_policy",
]

FloatArray = NDArray[np.float64]

#: replicates for estimators that fit a model on the whole log (each replicate estimated alone)
FITTED_REPLICATES = 200
#: tolerance in standard errors
Z = 4.0


class CheckFailed(AssertionError):
    """An estimator failed a conformance check."""


def _fail(cls: type[Estimator], check: str, message: str) -> CheckFailed:
    return CheckFailed(f"estimator {cls.name!r} ({cls.__name__}) failed {check}: {message}")


def check_rewards(kind: str, k: int) -> tuple[Reward, ...]:
    """The rewards of ``kind`` the suite checks (the first is the kind's main reward)."""
    if kind == "additive":
        return (get_reward("clicks_per_query", k), Reward("dcg_clicks", "additive", 1.0 / np.log2(np.arange(2, k + 2))))
    if kind == "first_click":
        return (get_reward("reciprocal_rank", k), get_reward("abandonment", k))
    raise InputError(f"unknown reward kind {kind!r}")


# ------------------------------------------------------------------------------ helpers
def _expand(pairs: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for fam, kind in pairs:
        for f in (("pbm", "cascade") if fam == "any" else (fam,)):
            if (f, kind) not in out:
                out.append((f, kind))
    return out


def _is_local(est: Estimator, log: LoggedData, size: int, target: DeterministicTarget, reward: Reward) -> bool:
    """Whether the terms of the first replicate equal those of the same rows inside the big log."""
    big = est.terms(log.take(np.arange(2 * size)), target, reward)
    alone = est.terms(log.take(np.arange(size)), target, reward)
    den_big = np.ones(2 * size) if big.den is None else big.den
    den_alone = np.ones(size) if alone.den is None else alone.den
    return bool(np.allclose(big.num[:size], alone.num, rtol=1e-12, atol=1e-14)
                and np.allclose(den_big[:size], den_alone, rtol=1e-12, atol=1e-14))


def _replicate_values(
    cls: type[Estimator], est: Estimator, log: LoggedData, replicates: int, size: int,
    target: DeterministicTarget, reward: Reward, local: bool, check: str,
) -> FloatArray:
    if local:
        t = est.terms(log, target, reward)
        num = t.num.reshape(replicates, size).sum(axis=1)
        den = (np.full(replicates, float(size)) if t.den is None
               else t.den.reshape(replicates, size).sum(axis=1))
        if np.any(den <= 0):
            raise _fail(cls, check, f"undefined in {int(np.sum(den <= 0))} of {replicates} replicates "
                        f"(no positive weight) in world {log.source}")
        values = reward.offset + num / den
        one = est.estimate(log.take(np.arange(size)), target, reward).value
        if not math.isclose(one, values[0], rel_tol=1e-9, abs_tol=1e-12):
            raise _fail(cls, check, f"estimate() {one!r} differs from offset + sum(num)/sum(den) {values[0]!r}")
        return values
    out = np.empty(replicates)
    for r in range(replicates):
        out[r] = est.estimate(log.take(np.arange(r * size, (r + 1) * size)), target, reward).value
    return out


def _mc_summary(values: FloatArray, truth: float) -> tuple[float, float]:
    mean = float(values.mean())
    se = float(values.std(ddof=1) / math.sqrt(values.size))
    return mean - truth, se


def _instances(cls: type[Estimator], world: CheckWorld, kind: str | None) -> list[Estimator]:
    """``cls.check_instances(world)``; with ``kind=`` (the reward kind checked) for an estimator whose instances
    depend on it (adaptive IPS: the data-driven choice on first-click rewards)."""
    if kind is not None and "kind" in inspect.signature(cls.check_instances).parameters:
        return list(cls.check_instances(world, kind=kind))  # type: ignore[call-arg]
    return list(cls.check_instances(world))


def _family_runs(
    cls: type[Estimator], family: str, check: str, kind: str | None = None
) -> Iterator[tuple[Estimator, LoggedData, int, int, bool]]:
    """Instances of ``cls`` in ``family``'s world (for rewards of ``kind``) with the replicate log and whether
    terms are local."""
    world = check_world(family)
    instances = _instances(cls, world, kind)
    if not instances:
        raise _fail(cls, check, "check_instances returned no instance")
    full = replicate_log(family)
    probe = check_rewards(kind or cls.rewards[0], world.k)[0]
    for est in instances:
        # a data-driven choice (adaptive IPS) depends on the whole log even where two logs happen to choose alike
        local = (not getattr(est, "chooses_from_log", False)
                 and _is_local(est, full, REPLICATE_SIZE, world.targets[0], probe))
        if local:
            yield est, full, REPLICATES, REPLICATE_SIZE, True
        else:
            fitted = full.take(np.arange(FITTED_REPLICATES * REPLICATE_SIZE))
            yield est, fitted, FITTED_REPLICATES, REPLICATE_SIZE, False


@functools.lru_cache(maxsize=8)
def _enumerated(world: CheckWorld) -> tuple[LoggedData, FloatArray]:
    """:func:`enumerated_log` of ``world``, made once per world (the suite's worlds are cached objects; a log is
    read-only, so every estimator and target shares it and its derived arrays)."""
    return enumerated_log(world)


def expected_value(est: Estimator, world: CheckWorld, target: DeterministicTarget, reward: Reward) -> float:
    r"""The exact expectation of a per-impression estimator's terms under ``world``'s log:
    :math:`c_0 + E[\text{num}] / E[\text{den}]` (``den`` None: 1), each expectation a sum over every impression the
    world can log weighted by its probability (:func:`enumerated_log`). For an estimator without a denominator this
    is the mean of its estimates over logs of any size; for a ratio (self-normalised) estimator the value its
    estimates converge to as the log grows. Meaningful only for estimators whose terms are per-impression (not
    fitted on the whole log)."""
    log, prob = _enumerated(world)
    t = est.terms(log, target, reward)
    num = float(prob @ np.asarray(t.num, dtype=np.float64))
    den = 1.0 if t.den is None else float(prob @ np.asarray(t.den, dtype=np.float64))
    return reward.offset + num / den


#: relative tolerance of :func:`expected_value` against the exact value (rounding of sums of a few thousand terms)
EXACT_RTOL = 1e-9


# ------------------------------------------------------------------------------ checks
def check_unbiased(cls: type[Estimator], family: str, kind: str) -> None:
    """For estimators whose terms are per-impression, the exact expectation of the terms over every impression the
    world can log equals the exact value (:func:`expected_value`, to :data:`EXACT_RTOL`: any bias fails, however
    small); then, for every estimator, the mean over replicates lies within 4 SE of the exact value (two targets,
    two rewards; the finite-sample behaviour, and all that is checked of an estimator fitting a model on the log)."""
    check = f"unbiased[{family}/{kind}]"
    if kind not in cls.rewards:
        raise _fail(cls, check, f"declares {kind} rewards unbiased but supports only {cls.rewards}")
    world = check_world(family)
    for est, log, reps, size, local in _family_runs(cls, family, check, kind):
        rewards = check_rewards(kind, world.k) if local else check_rewards(kind, world.k)[:1]
        for target in world.targets:
            for rw in rewards:
                truth = world.truth(target, rw)
                if local:
                    exact = expected_value(est, world, target, rw)
                    if not abs(exact - truth) <= EXACT_RTOL * max(1.0, abs(truth)):
                        raise _fail(cls, check, f"{est!r} on target {target.name!r}, reward {rw.name}: the exact "
                                    f"expectation of its per-impression terms over every impression the world can "
                                    f"log (offset + E[num] / E[den]: the mean of its estimates, or for a ratio "
                                    f"estimator their limit) is {exact:.10g}, the exact value {truth:.10g} (bias "
                                    f"{exact - truth:+.3g}, {(exact - truth) / abs(truth):+.3%})")
                values = _replicate_values(cls, est, log, reps, size, target, rw, local, check)
                bias, se = _mc_summary(values, truth)
                if not abs(bias) <= Z * se + 1e-12:
                    raise _fail(cls, check, f"{est!r} on target {target.name!r}, reward {rw.name}: mean "
                                f"{truth + bias:.5f} vs exact {truth:.5f} (bias {bias:+.5f}, SE {se:.2g} over "
                                f"{reps} replicates of {size}; tolerance {Z:g} SE)")


def check_biased(cls: type[Estimator], family: str, kind: str) -> None:
    """The declared bias is visible: |mean - exact| > 4 SE for at least one target."""
    check = f"biased[{family}/{kind}]"
    if kind not in cls.rewards:
        raise _fail(cls, check, f"declares bias for {kind} rewards but supports only {cls.rewards}")
    world = check_world(family)
    for est, log, reps, size, local in _family_runs(cls, family, check, kind):
        rw = check_rewards(kind, world.k)[0]
        seen = []
        for target in world.targets:
            values = _replicate_values(cls, est, log, reps, size, target, rw, local, check)
            bias, se = _mc_summary(values, world.truth(target, rw))
            seen.append(f"{target.name}: bias {bias:+.4f} (SE {se:.2g})")
            if abs(bias) > Z * se:
                break
        else:
            raise _fail(cls, check, f"{est!r}: bias not visible with {rw.name} ({'; '.join(seen)}; "
                        f"{reps} replicates of {size})")


def _home(cls: type[Estimator]) -> tuple[str, str]:
    """A (family, kind) the estimator runs in for the generic checks."""
    pairs = _expand(cls.unbiased_under) or _expand(cls.biased_under)
    for fam, kind in pairs:
        if kind in cls.rewards:
            return fam, kind
    return "pbm", cls.rewards[0]


def _small_log(family: str, n: int = 3000, seed: int = 5) -> LoggedData:
    return sample_log(check_world(family), n, np.random.default_rng(seed))


def _instance(cls: type[Estimator], family: str) -> Estimator:
    inst = cls.check_instances(check_world(family))
    if not inst:
        raise CheckFailed(f"estimator {cls.name!r}: check_instances returned no instance")
    return inst[0]


def _close(a: float, b: float) -> bool:
    if math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


def check_order_invariance(cls: type[Estimator]) -> None:
    """Permuting the log's rows changes neither the estimate nor its CLT interval."""
    fam, _ = _home(cls)
    est = _instance(cls, fam)
    log = _small_log(fam)
    perm = np.random.default_rng(3).permutation(log.n)
    world = check_world(fam)
    for kind in cls.rewards:
        rw = check_rewards(kind, world.k)[0]
        a = est.estimate(log, world.targets[0], rw)
        b = est.estimate(log.take(perm), world.targets[0], rw)
        for attr in ("value", "se", "ci_low", "ci_high"):
            if not _close(getattr(a, attr), getattr(b, attr)):
                raise _fail(cls, "order_invariance", f"{rw.name}: {attr} {getattr(a, attr)!r} becomes "
                            f"{getattr(b, attr)!r} when the rows are permuted")


def _adversarial_log(world: CheckWorld, rng: np.random.Generator, n: int = 60, single: bool = False) -> LoggedData:
    """Target lists in half the rows, random propensities spanning six decades, random clicks
    (``single``: at most one click per impression, as under the cascade model)."""
    base = sample_log(world, n, rng)
    shown = np.array(base.shown)
    half = rng.random(n) < 0.5
    shown[half] = world.targets[0].rankings(base.query[half])
    k = shown.shape[1]
    prefix = np.cumprod(10.0 ** rng.uniform(-2.0, 0.0, size=(n, k)), axis=1)
    item = 10.0 ** rng.uniform(-3.0, 0.0, size=(n, k))
    clicks = rng.random((n, k)) < 0.5
    if single:
        clicks = first_click(clicks).astype(bool)
    return LoggedData(base.query, shown, clicks, p_list=prefix[:, -1].copy(), p_prefix=prefix, p_item=item,
                      user=base.user, user_type=base.user_type, logger=world.logger, source="adversarial log")


def check_self_normalised_bounds(cls: type[Estimator]) -> None:
    """Self-normalised estimates lie in ``offset + [min, max]`` of the per-impression reward sums."""
    if not cls.self_normalised:
        return
    fam, _ = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    rewards = [rw for kind in cls.rewards for rw in check_rewards(kind, world.k)]
    if "additive" in cls.rewards:
        rewards.append(Reward("signed", "additive", np.array([1.0, -2.0, 0.5])))
    rng = np.random.default_rng(17)
    for trial in range(8):
        log = _adversarial_log(world, rng, single=trial % 2 == 1)
        for rw in rewards:
            sums = rw.slot_rewards(log.clicks).sum(axis=1)
            lo, hi = rw.offset + sums.min(), rw.offset + sums.max()
            try:
                v = est.estimate(log, world.targets[0], rw).value
            except InputError:
                continue  # undefined on this log (no positive weight): refused, not a number
            if not lo - 1e-12 <= v <= hi + 1e-12:
                raise _fail(cls, "self_normalised_bounds", f"adversarial log {trial}, {rw.name}: estimate {v!r} "
                            f"outside the reward range [{lo:g}, {hi:g}]")


def check_bootstrap_seed(cls: type[Estimator]) -> None:
    """Same seed, same cluster-bootstrap interval; finite and ordered."""
    fam, kind = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam, n=6000)
    rw = check_rewards(kind, world.k)[0]
    a = est.estimate(log, world.targets[0], rw, n_boot=200, rng=np.random.default_rng(11))
    b = est.estimate(log, world.targets[0], rw, n_boot=200, rng=np.random.default_rng(11))
    if (a.boot_low, a.boot_high) != (b.boot_low, b.boot_high):
        raise _fail(cls, "bootstrap_seed", f"same seed, different intervals {(a.boot_low, a.boot_high)} "
                    f"and {(b.boot_low, b.boot_high)}")
    if not (math.isfinite(a.boot_low) and math.isfinite(a.boot_high) and a.boot_low <= a.boot_high):
        raise _fail(cls, "bootstrap_seed", f"bootstrap interval {(a.boot_low, a.boot_high)} not finite and ordered")


def check_clt_interval(cls: type[Estimator]) -> None:
    """The CLT interval contains the estimate; the SE is finite and positive."""
    fam, _ = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam)
    for kind in cls.rewards:
        rw = check_rewards(kind, world.k)[0]
        for target in world.targets:
            e = est.estimate(log, target, rw)
            if not (math.isfinite(e.se) and e.se > 0 and e.ci_low <= e.value <= e.ci_high):
                raise _fail(cls, "clt_interval", f"{target.name}/{rw.name}: value {e.value!r}, SE {e.se!r}, "
                            f"interval [{e.ci_low!r}, {e.ci_high!r}]")
            if e.n != log.n or e.clusters != np.unique(log.user).size:
                raise _fail(cls, "clt_interval", f"n {e.n} / clusters {e.clusters} do not match the log")


def check_diagnostics(cls: type[Estimator]) -> None:
    """Weight diagnostics finite and in range; no support violation under full support."""
    fam, _ = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam)
    for kind in cls.rewards:
        rw = check_rewards(kind, world.k)[0]
        for target in world.targets:
            terms = est.terms(log, target, rw)
            d = est.estimate(log, target, rw).diagnostics
            where = f"{target.name}/{rw.name}"
            if terms.weights is not None:
                w = np.asarray(terms.weights)
                size = w.size if w.ndim == 1 else int(log.valid.sum())
                if not (0 < d.ess <= size * (1 + 1e-12)):
                    raise _fail(cls, "diagnostics", f"{where}: ess {d.ess!r} outside (0, {size}]")
                if not math.isfinite(d.max_weight):
                    raise _fail(cls, "diagnostics", f"{where}: max_weight {d.max_weight!r}")
                if np.all(w >= 0) and not 0.0 <= d.top1_share <= 1.0 + 1e-12:
                    raise _fail(cls, "diagnostics", f"{where}: top1_share {d.top1_share!r} outside [0, 1]")
                if not math.isfinite(d.top1_share):
                    raise _fail(cls, "diagnostics", f"{where}: top1_share {d.top1_share!r} not finite")
                if not 0.0 <= d.zero_weight_share <= 1.0:
                    raise _fail(cls, "diagnostics", f"{where}: zero_weight_share {d.zero_weight_share!r}")
            if d.support_violations not in (0, None):
                raise _fail(cls, "diagnostics", f"{where}: {d.support_violations} support violations "
                            "under a logger with full support")


def check_missing_propensities(cls: type[Estimator]) -> None:
    """A log without a needed propensity raises InputError naming it."""
    fam, kind = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam, n=500)
    rw = check_rewards(kind, world.k)[0]
    props = ("p_list", "p_prefix", "p_item")

    def without(names: tuple[str, ...]) -> LoggedData:
        keep = {nm: (None if nm in names else getattr(log, nm)) for nm in props}
        return LoggedData(log.query, log.shown, log.clicks, user=log.user, user_type=log.user_type,
                          logger=log.logger, **keep)

    if not cls.needs:
        est.estimate(without(props), world.targets[0], rw)
        return
    for name in cls.needs:
        try:
            est.estimate(without((name,)), world.targets[0], rw)
        except InputError as exc:
            if name not in str(exc):
                raise _fail(cls, "missing_propensities", f"the error for missing {name} does not name it: {exc}")
        else:
            raise _fail(cls, "missing_propensities", f"no InputError without {name}")


def check_support_violations(cls: type[Estimator]) -> None:
    """Under a deterministic logger, a target showing other documents violates support."""
    fam, kind = _home(cls)
    world = check_world(fam)
    det = check_world(fam, "deterministic").logger
    est = _instance(cls, fam)
    log = sample_log(world, 400, np.random.default_rng(8), logger=det)
    rw = check_rewards(kind, world.k)[0]
    target = world.targets[0]
    try:
        terms = est.terms(log, target, rw)
    except InputError:
        return  # refused with a clear error: acceptable
    d = est.diagnostics(log, target, terms)
    if d.support_violations is None or d.support_violations <= 0:
        raise _fail(cls, "support_violations", f"a deterministic logger and a target showing other documents "
                    f"gave support_violations={d.support_violations!r}")


def check_pickle(cls: type[Estimator]) -> None:
    """A pickled copy of the estimator gives the same estimate."""
    fam, kind = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam, n=800)
    rw = check_rewards(kind, world.k)[0]
    copy = pickle.loads(pickle.dumps(est))
    a = est.estimate(log, world.targets[0], rw).value
    b = copy.estimate(log, world.targets[0], rw).value
    if not _close(a, b):
        raise _fail(cls, "pickle", f"a pickled copy estimates {b!r} instead of {a!r}")


_GENERIC: tuple[Callable[[type[Estimator]], None], ...] = (
    check_order_invariance,
    check_self_normalised_bounds,
    check_bootstrap_seed,
    check_clt_interval,
    check_diagnostics,
    check_missing_propensities,
    check_support_violations,
    check_pickle,
)


def estimator_checks(cls: type[Estimator] | str) -> Iterator[tuple[str, Callable[[], None]]]:
    """Yield ``(check name, zero-argument callable)`` for ``cls`` (nothing runs until called)."""
    c = estimator_class(cls) if isinstance(cls, str) else cls
    for fam, kind in _expand(c.unbiased_under):
        yield f"unbiased[{fam}/{kind}]", (lambda f=fam, k=kind: check_unbiased(c, f, k))
    for fam, kind in _expand(c.biased_under):
        yield f"biased[{fam}/{kind}]", (lambda f=fam, k=kind: check_biased(c, f, k))
    for fn in _GENERIC:
        if fn is check_self_normalised_bounds and not c.self_normalised:
            continue
        yield fn.__name__.removeprefix("check_"), (lambda fn=fn: fn(c))


def check_estimator(cls: type[Estimator] | str) -> list[str]:
    """Run every conformance check on ``cls`` (a class or registry name); return the names passed.

    Raises
    ------
    CheckFailed
        On the first failing check, naming the estimator and the problem.
    """
    passed = []
    for name, run in estimator_checks(cls):
        run()
        passed.append(name)
    return passed
