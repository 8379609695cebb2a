"""Simulated traffic: a returning user population issuing queries over simulated days.

SimPy drives time: one event per simulated hour produces a *batch* of impressions
(user, user type, query) as numpy arrays, which every experiment design processes
at once; a monitor process takes a checkpoint at the end of each day. No event is
scheduled per query or per click.

Arrivals per hour are Poisson with rate ``queries_per_day / 24`` times the hour's
diurnal weight and the day's weekly weight (each normalised to mean 1). The user of an
arrival is drawn in proportion to that user's activity (lognormal, so a few users issue
many queries and return day after day); the query is drawn by query frequency.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import simpy

from simulations.config import TrafficConfig, UsersConfig
from simulations.sampling import draw_from_cdf

__all__ = ["Batch", "TrafficModel", "BatchConsumer", "CdfDraw", "run_traffic"]


@dataclass(frozen=True)
class Batch:
    """The impressions of one simulated hour (one row per impression)."""

    user: np.ndarray  # (n,) int64 user id in [0, population)
    query: np.ndarray  # (n,) int64 query index
    user_type: np.ndarray  # (n,) int8 index of the user's type (click model)
    hour: int  # hours since the start at which the batch begins

    def __len__(self) -> int:
        return int(self.user.shape[0])


class BatchConsumer(Protocol):
    def process(self, batch: Batch) -> None: ...


class TrafficModel:
    """Draws hourly batches for one replicate.

    Parameters
    ----------
    traffic, users:
        The validated config sections.
    query_frequency:
        ``(Q,)`` probabilities of each query.
    rng:
        The replicate's traffic stream; the user population's activities and types are
        drawn from it first, then the arrivals hour by hour.
    """

    def __init__(
        self,
        traffic: TrafficConfig,
        users: UsersConfig,
        query_frequency: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        self.rng = rng
        self.population = users.population
        activity = rng.lognormal(0.0, users.activity.sigma, size=users.population)
        self.user_cdf = np.cumsum(activity / activity.sum())
        shares = np.array([share for _, share, _ in users.mixture()])
        if shares.size == 1:
            self.user_type = np.zeros(users.population, dtype=np.int8)
        else:
            self.user_type = draw_from_cdf(np.cumsum(shares), rng.random(users.population)).astype(np.int8)
        self.query_cdf = np.cumsum(np.asarray(query_frequency, dtype=np.float64))
        diurnal = np.asarray(traffic.diurnal, dtype=np.float64)
        weekly = np.asarray(traffic.weekly, dtype=np.float64)
        self.hourly_rate = (
            traffic.queries_per_day / 24.0 * (diurnal / diurnal.mean())[None, :] * (weekly / weekly.mean())[:, None]
        )  # (7, 24)
        self.days = traffic.days
        self.batch_hours = traffic.batch_hours
        self._draws: dict[str, CdfDraw] = {}  # the CDFs' bucket tables (_draw), shared with shallow copies

    def expected_queries(self, hours: int) -> float:
        """Expected number of queries in the first ``hours`` hours."""
        rates = np.tile(self.hourly_rate.ravel(), hours // (7 * 24) + 1)[:hours]
        return float(rates.sum())

    def _draw(self, name: str) -> CdfDraw:
        """The :class:`CdfDraw` of the CDF attribute ``name``, built on first use (shared by shallow copies, such
        as the CUPED pre-period's)."""
        cdf = getattr(self, name)
        draw = self._draws.get(name)
        if draw is None or draw.source is not cdf:
            draw = self._draws[name] = CdfDraw(cdf)
        return draw

    def batch(self, hour: int, hours: int = 1) -> Batch:
        """The impressions of ``[hour, hour + hours)``: Poisson counts hour by hour."""
        rng = self.rng
        span = np.arange(hour, hour + hours)
        counts = rng.poisson(self.hourly_rate[(span // 24) % 7, span % 24])
        n = int(counts.sum())
        # the arrivals' times within their hours: no design reads them, but the draw is kept so that the users and
        # queries (drawn next from the same stream) are those of every earlier version
        rng.random(n)
        # inverse-transform sampling on the CDFs (draw_from_cdf's indices, by bucket tables)
        user = self._draw("user_cdf")(rng.random(n))
        query = self._draw("query_cdf")(rng.random(n))
        user = user.astype(np.int64)
        return Batch(user, query.astype(np.int64), self.user_type[user], hour)


class CdfDraw:
    """:func:`simulations.sampling.draw_from_cdf` for uniforms ``u >= 0`` (``rng.random``): the same indices
    (the number of CDF entries ``<= u``, clipped to the last category), from bucket tables instead of a binary
    search per uniform.

    The unit interval is cut into ``M`` (a power of two, about 4 buckets per category, 2**10 to 2**18) buckets
    ``[j/M, (j+1)/M)``; for each, ``lo[j]`` = the entries ``<= j/M`` and ``width[j]`` = the entries strictly
    inside. A uniform's bucket is ``floor(u * M)`` (``u * M`` is exact), so its index is ``lo[j]`` plus one if
    the bucket holds one entry and it is ``<= u``; uniforms in buckets with two or more entries (dense parts of
    the CDF, little probability mass) are searched. Two table lookups per uniform: in NumPy passes (before the
    compiled loop) 2045 fresh uniforms drawn and mapped on the 3000 queries' CDF in 35 us against 144 us with
    binary searches (whose branches a predictor cannot learn on fresh uniforms) and 101 us with the uniforms sorted
    first; on the 20000 users' CDF 38 against 291 us; compiled (:func:`simulations.kernels.cdf_draw`, what
    :meth:`__call__` runs) 45 us for 1,500 uniforms with the tables out of cache against 105 us for the NumPy
    passes. The tables cost ``9 M`` bytes and one compiled pass over the CDF and the buckets
    (:func:`simulations.kernels.cdf_tables`; users of ``configs/ab.yaml``, whose activities are redrawn every
    replicate: 1.2 MB, 0.12 ms, 3 ms by NumPy passes).
    """

    def __init__(self, cdf: np.ndarray) -> None:
        self.source = cdf
        self.cdf = np.asarray(cdf, dtype=np.float64)
        n = self.cdf.size
        self.scale = float(2 ** max(10, min(18, math.ceil(math.log2(4 * max(n, 1))))))
        m = int(self.scale)
        # lo[j] = #{x <= j} = #{ceil(x) <= j}; width[j] = #{j < x < j + 1} = #{floor(x) == j, x not whole}, at most 2
        # (two or more), with x = cdf * scale (exact: a power of two); compiled (kernels.cdf_tables: 0.3 ms instead
        # of 3 ms on 20,000 users' CDF, rebuilt every replicate with the users' activities; tables tested)
        from simulations import kernels

        self.lo = np.zeros(m + 1, dtype=np.int64)
        self.width = np.zeros(m + 1, dtype=np.int8)
        kernels.cdf_tables(self.cdf, self.scale, m, self.lo, self.width)
        self.top = m

    def __call__(self, u: np.ndarray) -> np.ndarray:
        """The indices (intp) of uniforms ``u`` (1-d float64, ``>= 0``), by the compiled loop
        :func:`simulations.kernels.cdf_draw` (``draw_from_cdf``'s indices, tested)."""
        from simulations import kernels

        out = np.empty(u.shape[0], dtype=np.intp)
        kernels.cdf_draw(u, self.scale, self.top, self.lo, self.width, self.cdf, out)
        return out


def run_traffic(
    model: TrafficModel,
    consumers: Sequence[BatchConsumer],
    on_day_end: Callable[[int], None],
) -> simpy.Environment:
    """Run the SimPy simulation: a traffic process and a daily monitor.

    Time unit: one hour. At hour ``h`` the traffic process draws the batch of
    ``[h, h + b)`` (``b = batch_hours``, a divisor of 24) and hands it to every consumer
    (all designs see the same batch), then waits ``b`` hours. The monitor wakes at
    ``24 d`` (scheduled before the traffic event of that instant, so it sees exactly the
    first ``24 d`` hours) and calls ``on_day_end(d)``.
    """
    env = simpy.Environment()
    hours = model.days * 24
    step = model.batch_hours

    def traffic(env: simpy.Environment):
        for hour in range(0, hours, step):
            batch = model.batch(hour, step)
            for consumer in consumers:
                consumer.process(batch)
            yield env.timeout(step)

    def monitor(env: simpy.Environment):
        for day in range(1, model.days + 1):
            yield env.timeout(24)
            on_day_end(day)

    env.process(monitor(env))
    env.process(traffic(env))
    env.run(until=hours + step)
    return env
