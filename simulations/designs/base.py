"""Experiment designs: the base class and the registry.

A design consumes hourly batches of impressions (all designs of a run see the same
batches), decides what each impression shows (an A/B arm, an interleaved list, ...),
samples clicks with the run's click model, accumulates per-user sums and, at each daily
checkpoint, returns its estimates. Adding a design is one file with a subclass that
implements :meth:`Design._process` and :meth:`Design._estimates` and registers itself
with :func:`register_design`.

Analysis is at the user level: users, not impressions, are the randomisation and
clustering unit, so every statistic is computed from per-user sums.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from simulations.config import DesignConfig
from simulations.traffic import Batch
from simulations.users import UserModels
from simulations.world import World, shown_labels

__all__ = ["Design", "CheckpointRow", "register_design", "design_class", "DESIGNS"]


class TValues(NamedTuple):
    """An estimate's five numbers and the degrees of freedom of the t they took (``test: delta_t``; read by
    :meth:`Design.checkpoint` and the per-batch looks as an estimate's ``df``)."""

    estimate: float
    se: float
    ci_low: float
    ci_high: float
    pvalue: float
    df: float


def _values(est: Any) -> tuple[float, float, float, float, float]:
    return (float(est.estimate), float(est.se), float(est.ci_low), float(est.ci_high), float(est.pvalue))


@dataclass(frozen=True)
class CheckpointRow:
    """One estimate of one design at one daily checkpoint of one replicate.

    Frozen (assigning a field raises). Its ``__init__`` is written here rather than generated: the generated one
    of a frozen dataclass sets each field through ``object.__setattr__`` (2.7 us a row against 0.9; a checkpoint of
    the counterfactual design makes 21 rows). It takes the fields in their declared order, by position or name
    (``tests/test_simulation_point_speed3.py`` checks its parameters against :func:`dataclasses.fields`).

    ``df``: the degrees of freedom of the Student t the interval and p-value took (the counterfactual design's
    differences: Bell and McCaffrey's, as ``onlineeval estimate``'s; an A/B design's with ``test: welch``: Welch's;
    A/B and interleaving designs with ``test: delta_t``: the CR2 variance's Bell and McCaffrey df); ``inf`` where
    they are z's (``test: delta``, the logger's own metrics, a last-day bootstrap test). The daily monitoring's
    rules and the designs' own sequential tests read it (fixed-horizon and peeking: the t's p-values; mSPRT and
    spending boundaries: each t as the normal deviate of the same tail probability,
    :func:`onlineeval.stats.z_equivalent`)."""

    design: str
    aa: bool
    day: int
    metric: str
    primary: bool
    estimate: float
    se: float
    ci_low: float
    ci_high: float
    pvalue: float
    n_users: int
    n_impressions: int
    df: float = math.inf

    def __init__(self, design: str, aa: bool, day: int, metric: str, primary: bool, estimate: float, se: float,
                 ci_low: float, ci_high: float, pvalue: float, n_users: int, n_impressions: int,
                 df: float = math.inf) -> None:
        self.__dict__.update(design=design, aa=aa, day=day, metric=metric, primary=primary, estimate=estimate, se=se,
                             ci_low=ci_low, ci_high=ci_high, pvalue=pvalue, n_users=n_users,
                             n_impressions=n_impressions, df=df)


DESIGNS: dict[str, type[Design]] = {}


def register_design(kind: str) -> Callable[[type[Design]], type[Design]]:
    def deco(cls: type[Design]) -> type[Design]:
        DESIGNS[kind] = cls
        cls.kind = kind
        return cls

    return deco


def design_class(kind: str) -> type[Design]:
    try:
        return DESIGNS[kind]
    except KeyError:
        raise KeyError(f"unknown design type {kind!r}; allowed: {', '.join(sorted(DESIGNS))}") from None


class Design(ABC):
    """Base class: per-user accumulators, checkpointing and the shared click step.

    Parameters
    ----------
    config:
        The design's config entry.
    world:
        The collection and rankers.
    users:
        The users' click models (:class:`simulations.users.UserModels`).
    rng:
        The design's own random stream in this replicate (interleaving coins, clicks).
    population:
        Number of users (user ids are ``0 .. population-1``).
    alpha:
        Significance level of the reported tests and confidence intervals.
    aa:
        Run as an A/A test: ranker B is replaced by ranker A.
    """

    kind: ClassVar[str] = ""
    #: names of the per-user sums this design keeps
    accumulators: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        config: DesignConfig,
        world: World,
        users: UserModels,
        rng: np.random.Generator,
        population: int,
        alpha: float,
        aa: bool = False,
    ) -> None:
        self.config = config
        self.world = world
        self.users = users
        self.rng = rng
        self.population = population
        self.alpha = alpha
        self.aa = aa
        self.sums = {name: np.zeros(population, dtype=np.float64) for name in ("impressions", *self.accumulators)}
        self.rows: list[CheckpointRow] = []

    @property
    def name(self) -> str:
        return self.config.name

    def process(self, batch: Batch) -> None:
        if len(batch) == 0:
            return
        self._add("impressions", batch.user, None)
        self._process(batch)

    def _add(self, key: str, user: np.ndarray, weights: np.ndarray | None) -> None:
        """Add each impression's weight (1 when ``weights`` is None) to its user's sum."""
        if weights is None:
            # counts: every partial sum is an exact integer, so adding in place impression by impression gives
            # the bits of the bincount's (np.add.at's loop, compiled: simulations.kernels.add_ones)
            from simulations.kernels import add_ones

            add_ones(self.sums[key], user)
        else:
            self.sums[key] += np.bincount(user, weights=weights, minlength=self.population)

    def _add_exact(self, key: str, user: np.ndarray, weights: np.ndarray) -> None:
        """:meth:`_add` for weights that are multiples of 1/2 (counts, 0/1 indicators, win/loss halves):
        every partial sum is exact, so adding impression by impression gives the bincount's bits, 2x faster."""
        np.add.at(self.sums[key], user, weights)

    def _clicks(self, batch: Batch, ranking: np.ndarray) -> np.ndarray:
        labels = shown_labels(self.world.labels, batch.query, ranking)
        return self.users.sample(labels, batch.user_type, self.rng)

    def checkpoint(self, day: int) -> None:
        compiled = self._checkpoint_values()
        dfs: dict[str, float] = {}  # (compiled paths and undefined estimates: z's inf)
        if compiled is not None:
            n_users, n_impr, estimates = compiled
        else:
            active = self.sums["impressions"] > 0
            n_users = int(active.sum())
            n_impr = int(self.sums["impressions"].sum())
            users = np.flatnonzero(active)
            sums = self._active_sums(users)
            if self._has_data(users, sums):
                found = self._estimates(users, sums)
                estimates = {m: _values(e) for m, e in found.items()}
                # the t the interval and p-value took (test: welch's Welch df), for the monitoring's rules
                dfs = {m: float(getattr(e, "df", math.inf)) for m, e in found.items()}
            else:
                # too little data so far (e.g. fewer than two users in an arm, or no click yet):
                # the checkpoint is undefined, recorded as NaN, and counts as "not rejected"
                estimates = {m: (math.nan,) * 5 for m in self.metric_names()}
        for i, (metric, (est, se, lo, hi, p)) in enumerate(estimates.items()):
            self.rows.append(CheckpointRow(self.name, self.aa, day, metric, i == 0, est, se, lo, hi, p, n_users,
                                           n_impr, dfs.get(metric, math.inf)))

    def _checkpoint_values(self, primary: bool = False
                           ) -> tuple[int, int, dict[str, tuple[float, ...]]] | None:
        """``(n_users, n_impressions, estimates)`` of a checkpoint by a compiled path (each metric's five values,
        NaN while undefined; the primary metric's only with ``primary``), or None: :meth:`checkpoint` then takes
        the NumPy path (:meth:`_active_sums`, :meth:`_has_data`, :meth:`_estimates`). None here."""
        return None

    def _active_sums(self, users: np.ndarray) -> dict[str, np.ndarray]:
        """The per-user sums of the active ``users`` that :meth:`_has_data` and :meth:`_estimates` read
        (every sum; ``take``: the values of ``v[users]``)."""
        return {k: v.take(users) for k, v in self.sums.items()}

    @abstractmethod
    def _has_data(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> bool:
        """Whether the estimates are defined yet for the active ``users``."""

    @abstractmethod
    def metric_names(self) -> list[str]:
        """The metrics this design reports, the primary one first."""

    @abstractmethod
    def _process(self, batch: Batch) -> None:
        """Show, click and accumulate for one batch."""

    @abstractmethod
    def _estimates(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> dict[str, Any]:
        """Estimates from the per-user sums of the active ``users``; the primary metric first."""
