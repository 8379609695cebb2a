"""The sections of a simulation config that describe the world: the collection, the rankers,
the users and the traffic (:mod:`simulations.config`), and the strict base model every
section shares (no unknown keys, no ``.inf`` or ``.nan``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
#: integers are strict: ``true`` or ``2.5`` for a count is an error, not 1 or 2
PositiveInt = Annotated[int, Strict(), Field(gt=0)]


class _Strict(BaseModel):
    # no unknown keys; no .inf / .nan where a number is expected (a random ranker, nan power)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# ----------------------------------------------------------------------------- collection
class SyntheticCollection(_Strict):
    """Synthetic queries with graded candidates and Zipf-like query frequencies."""

    type: Literal["synthetic"] = "synthetic"
    n_queries: PositiveInt = 2000
    candidates: Annotated[int, Strict(), Field(ge=2)] = 50
    label_distribution: list[Probability] = Field(
        default_factory=lambda: [0.60, 0.22, 0.11, 0.05, 0.02],
        description="P(grade g) for g = 0..G-1; most candidates non-relevant, the top grade rare.",
    )
    zipf_exponent: Annotated[float, Field(ge=0.0, le=5.0)] = 1.0

    @model_validator(mode="after")
    def _check_distribution(self) -> SyntheticCollection:
        dist = self.label_distribution
        if len(dist) < 2:
            raise ValueError("label_distribution needs at least 2 grades")
        if not math.isclose(sum(dist), 1.0, abs_tol=1e-6):
            raise ValueError(f"label_distribution must sum to 1, sums to {sum(dist):.6g}")
        return self


class TrecCollection(_Strict):
    """Real judgments and real rankings: TREC qrels plus one TREC run per ranker."""

    type: Literal["trec"]
    qrels: Path
    runs: dict[str, Path] = Field(description="ranker name (A, B) -> TREC run file")
    frequencies: Path | None = Field(
        None, description="optional TSV 'query<TAB>count'; default: Zipf over a seeded order"
    )
    zipf_exponent: Annotated[float, Field(ge=0.0, le=5.0)] = 1.0
    ties: Literal["docno_desc", "input_order", "pessimistic", "optimistic"] = Field(
        "docno_desc", description="score-tie rule of the rankings (docno_desc = trec_eval's)"
    )


Collection = Annotated[Union[SyntheticCollection, TrecCollection], Field(discriminator="type")]


class RankerSpec(_Strict):
    """A synthetic ranker: score = grade + noise * (shared and own Gaussian noise)."""

    noise: Annotated[float, Field(ge=0.0)] = 1.0


class RankersConfig(_Strict):
    depth: Annotated[int, Strict(), Field(ge=1, le=100)] = 10
    noise_correlation: Probability = Field(
        0.7, description="correlation of A's and B's score noise: how similar the rankings are"
    )
    A: RankerSpec = RankerSpec(noise=1.0)
    B: RankerSpec = RankerSpec(noise=0.85)
    others: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")], RankerSpec] = Field(
        default_factory=dict, description="more synthetic rankers by name, for multileaving designs"
    )

    @model_validator(mode="after")
    def _check_names(self) -> RankersConfig:
        clash = sorted({"A", "B"} & set(self.others))
        if clash:
            raise ValueError(f"rankers.others must not redefine {', '.join(clash)} (set rankers.A / rankers.B)")
        return self


# ----------------------------------------------------------------------------- users and traffic
class ActivityConfig(_Strict):
    """Heavy-tailed user activity: each user's query rate is lognormal(0, sigma)."""

    distribution: Literal["lognormal"] = "lognormal"
    sigma: Annotated[float, Field(ge=0.0, le=4.0)] = 1.2


class UserType(_Strict):
    """A share of the user population that behaves by its own click model."""

    name: Annotated[str, Field(min_length=1)]
    share: Probability
    click_model: dict[str, Any]


#: The click model of users without ``click_model`` or ``types`` (filled in only when
#: ``users.click_model`` is absent entirely: a ``click_model`` given without ``name`` is an error).
DEFAULT_CLICK_MODEL: dict[str, Any] = {"name": "cascade", "preset": "informational"}


class UsersConfig(_Strict):
    """The user population.

    Either one ``click_model`` for everybody, or ``types``: a mixture of user types (each
    user belongs to one type for the whole experiment, so users differ persistently and
    the user-level analysis matters).
    """

    population: PositiveInt = 20000
    activity: ActivityConfig = ActivityConfig()
    click_model: dict[str, Any] | None = Field(
        None, description="default (without 'types'): {name: cascade, preset: informational}"
    )
    types: list[UserType] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _default_model(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("types"), list) and not data["types"] \
                and data.get("click_model") is None:  # an empty mixture ran with the default click model, silently
            raise ValueError("types: an empty list; give at least one user type, or leave 'types' out (one "
                             "'click_model' for everybody; without it: cascade, preset informational)")
        if isinstance(data, dict) and not data.get("types") and data.get("click_model") is None:
            data = {**data, "click_model": dict(DEFAULT_CLICK_MODEL)}
        return data

    @model_validator(mode="after")
    def _check_types(self) -> UsersConfig:
        if not self.types:
            return self
        if self.click_model is not None:
            raise ValueError("give either 'click_model' or 'types', not both")
        total = sum(t.share for t in self.types)
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise ValueError(f"the shares of 'types' must sum to 1, sum to {total:.6g}")
        names = [t.name for t in self.types]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(f"types[{i}].name: {name!r} is already the name of types[{names.index(name)}]; "
                                 "user type names must be unique")
        return self

    def mixture(self) -> list[tuple[str, float, dict[str, Any]]]:
        """``(name, share, click-model spec)`` of every user type (one type if no mixture)."""
        if not self.types:
            return [("all", 1.0, dict(self.click_model or {}))]
        return [(t.name, t.share, dict(t.click_model)) for t in self.types]


class TrafficConfig(_Strict):
    days: Annotated[int, Strict(), Field(ge=1, le=366)] = 14
    queries_per_day: Annotated[int, Strict(), Field(gt=0, le=1_000_000_000)] = 10000
    diurnal: list[Annotated[float, Field(ge=0.0, le=1e6)]] = Field(
        default_factory=lambda: [
            0.35, 0.25, 0.2, 0.2, 0.25, 0.4, 0.6, 0.85, 1.05, 1.2, 1.3, 1.35,
            1.35, 1.3, 1.3, 1.3, 1.3, 1.3, 1.35, 1.4, 1.4, 1.25, 0.95, 0.6,
        ],
        description="relative arrival rate for each of the 24 hours (normalised to mean 1)",
    )
    weekly: list[Annotated[float, Field(ge=0.0, le=1e6)]] = Field(
        default_factory=lambda: [1.0] * 7,
        description="relative arrival rate for each day of the week (normalised to mean 1)",
    )
    batch_hours: Literal[1, 2, 3, 4, 6, 8, 12, 24] = Field(
        1, description="simulated hours per SimPy event (batch of impressions); divides a day"
    )

    @model_validator(mode="after")
    def _check_profiles(self) -> TrafficConfig:
        if len(self.diurnal) != 24:
            raise ValueError(f"diurnal needs 24 hourly weights, got {len(self.diurnal)}")
        if len(self.weekly) != 7:
            raise ValueError(f"weekly needs 7 daily weights, got {len(self.weekly)}")
        if sum(self.diurnal) <= 0 or sum(self.weekly) <= 0:
            raise ValueError("diurnal and weekly weights must not all be 0")
        return self
