"""The validated configuration of a simulation run (``onlineeval simulate --config``).

A YAML file is parsed, then validated into :class:`Config` before anything runs. Every
problem (an unknown key, a wrong type, a probability outside [0, 1], a missing file, an
impossible combination) becomes one :class:`~onlineeval.errors.ConfigError` naming the
key path, e.g. ``users.click_model.stop[2]: must be in [0, 1], got 1.5``.

The effective configuration (defaults filled in) is written next to the results by
:func:`Config.effective`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from onlineeval.errors import ConfigError
from simulations.yaml_safe import excerpt

__all__ = [
    "Config",
    "SyntheticCollection",
    "TrecCollection",
    "RankerSpec",
    "UsersConfig",
    "TrafficConfig",
    "DesignConfig",
    "DesignAnalysis",
    "CupedOptions",
    "SrmOptions",
    "SrmInject",
    "AnalysisConfig",
    "load_config",
    "config_from_mapping",
]

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


# ----------------------------------------------------------------------------- designs
AB_METRICS = ("clicks_per_query", "abandonment", "reciprocal_rank")


class LoggerConfig(BaseModel):
    """Counterfactual designs: the logging policy that serves the traffic.

    ``policy`` names a policy of :mod:`simulations.policies` that randomises over the full
    candidate list of ``ranker`` (its scores); the other keys are the policy's options
    (``temperature``, ``epsilon``, ``n``, ...), checked by the policy registry.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    policy: Annotated[str, Field(min_length=1)]
    ranker: str = "A"

    def options(self) -> dict[str, Any]:
        """The policy's own options (every key but ``policy`` and ``ranker``)."""
        return dict(self.model_extra or {})

    def spec(self) -> dict[str, Any]:
        """The spec handed to :func:`simulations.policies.build_policy` with the run's score
        tables by ranker name: the policy (a mixture: each component) uses ``ranker``'s
        scores unless it names others with ``scores``."""
        spec: dict[str, Any] = {"policy": self.policy, **self.options()}
        if self.policy == "mixture" and isinstance(spec.get("components"), list):
            spec["components"] = [
                {"scores": self.ranker, **c} if isinstance(c, dict) else c for c in spec["components"]
            ]
        elif self.policy != "mixture":
            spec.setdefault("scores", self.ranker)
        return spec


class EstimatorSpec(_Strict):
    """One estimator of a counterfactual design: a registry name and its options."""

    name: Annotated[str, Field(min_length=1)]
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_short_form(cls, data: Any) -> Any:
        # "ips" or {name: clipped_ips, cap: 100}
        if isinstance(data, str):
            return {"name": data}
        if isinstance(data, dict) and "options" not in data:
            return {"name": data.get("name"), "options": {k: v for k, v in data.items() if k != "name"}}
        return data

    @property
    def label(self) -> str:
        """The row name: the registry name, with its options when they are given
        (``clipped_ips(cap=100)``)."""
        if not self.options:
            return self.name
        return f"{self.name}(" + ",".join(f"{k}={v}" for k, v in sorted(self.options.items())) + ")"


#: keys of a design entry that only counterfactual designs use
_COUNTERFACTUAL_KEYS = ("logger", "targets", "estimators", "bootstrap", "refit_days")


#: keys of a design entry its type does not use (left out of the effective config)
_UNUSED_KEYS = {
    "ab": ("method", "options", "rankers", *_COUNTERFACTUAL_KEYS),
    "interleaving": ("share_b", "metric", "test", *_COUNTERFACTUAL_KEYS),
    "counterfactual": ("method", "options", "share_b", "test", "rankers"),
}


# ----------------------------------------------------------------------------- per-design analysis
class CupedOptions(_Strict):
    """``analysis.cuped`` of an A/B design: a pre-period of ``pre_days`` days before the
    experiment (the same users, every user served ranker A) whose per-user metric is the
    CUPED covariate (:mod:`simulations.cuped`)."""

    pre_days: Annotated[int, Strict(), Field(ge=1, le=366)]


class SrmInject(_Strict):
    """A deliberately broken split: a fraction ``share`` of the users of type ``user_type``
    that the hash assigns to the other arm are moved to ``arm`` (:mod:`simulations.srm`)."""

    user_type: str
    arm: Literal["A", "B"] = "B"
    share: Annotated[float, Field(gt=0.0, le=1.0)]


class SrmOptions(_Strict):
    """``analysis.srm`` of an A/B design: the flagging threshold of the sample-ratio-mismatch
    checks (default 0.001) and an optional injected broken split."""

    alpha: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.001
    inject: SrmInject | None = None


class DesignAnalysis(_Strict):
    """How one design's experiment is analysed: the sequential test its decision uses, how
    often it is looked at, and the correction across its several tests.

    ``sequential``: ``none`` (fixed horizon: one test on the last day), ``msprt`` (mixture
    SPRT, always-valid p-values), ``confidence_sequence`` (its dual, the same decisions),
    ``obrien_fleming`` or ``pocock`` (Lan-DeMets alpha spending of that family).
    ``tau``: the mSPRT / confidence sequence's mixing distribution N(0, tau^2) of the effect, on
    the scale of the design's primary metric (default: planned from the mean standard error at
    the horizon, :func:`onlineeval.stats.sequential.mixture_tau`). ``looks``: the look
    schedule, a number K of looks equally spaced in time or a list of days (default: every
    monitoring look). ``monitoring``: ``daily`` (a look at the end of each day) or ``batch``
    (after every batch of ``traffic.batch_hours`` hours; A/B and interleaving designs).
    ``multiple``: ``holm`` or ``bh`` across an A/B design's metrics or a multileaving design's
    pairs, at the fixed horizon (default ``none``). ``cuped`` (type ab): ``{pre_days: N}``, a
    pre-period whose per-user metric is the CUPED covariate (default none). ``srm`` (type ab):
    ``{alpha: 0.001, inject: {user_type, arm: B, share}}``, the SRM checks' threshold and an
    optional injected broken split.
    """

    sequential: Literal["none", "msprt", "confidence_sequence", "obrien_fleming", "pocock"] = "none"
    tau: Annotated[float, Field(gt=0.0)] | None = Field(
        None, description="msprt / confidence_sequence: mixing sd (N(0, tau^2)); default: planned from the horizon SE"
    )
    looks: int | list[int] | None = Field(
        None, description="look schedule: K equally spaced looks or a list of days; default: every monitoring look"
    )
    monitoring: Literal["daily", "batch"] = "daily"
    multiple: Literal["none", "holm", "bh"] = "none"
    cuped: CupedOptions | None = Field(
        None, description="ab: a pre-period {pre_days: N} whose per-user metric is the CUPED covariate"
    )
    srm: SrmOptions = Field(
        default_factory=SrmOptions, description="ab: SRM flagging threshold and an optional injected broken split"
    )

    @field_validator("looks", mode="before")
    @classmethod
    def _looks_form(cls, value: Any) -> Any:
        def whole(x: Any) -> bool:
            return isinstance(x, int) and not isinstance(x, bool) and x >= 1

        if value is None or whole(value) or (isinstance(value, list) and all(whole(x) for x in value)):
            return value
        raise ValueError(f"must be a positive integer (the number of equally spaced looks) or a list of positive "
                         f"integers (the days of the looks), got {excerpt(value)}")

    @model_validator(mode="after")
    def _check_parameters(self) -> DesignAnalysis:
        if self.tau is not None and self.sequential not in ("msprt", "confidence_sequence"):
            raise ValueError(f"tau: only for sequential msprt or confidence_sequence (sequential is {self.sequential})")
        if self.looks is not None and self.sequential == "none":
            raise ValueError("looks: a look schedule needs a sequential test (msprt, confidence_sequence, "
                             "obrien_fleming, pocock); sequential none tests once, on the last day")
        if isinstance(self.looks, list):
            if not self.looks:
                raise ValueError("looks: an empty list of days")
            if any(b <= a for a, b in zip(self.looks, self.looks[1:])):
                raise ValueError(f"looks: the days must be strictly increasing, got {self.looks}")
        return self

    def is_default(self) -> bool:
        return self == DesignAnalysis()


class DesignConfig(_Strict):
    """One experiment design; every design of a run sees the same traffic."""

    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    type: Literal["ab", "interleaving", "counterfactual"]
    method: str | None = Field(None, description="interleaving method (registry name)")
    options: dict[str, Any] = Field(default_factory=dict, description="interleaver options")
    share_b: Probability = Field(0.5, description="A/B: share of users in arm B")
    metric: Literal["clicks_per_query", "abandonment", "reciprocal_rank"] = Field(
        "reciprocal_rank", description="A/B: the primary metric for power and sample size"
    )
    test: Literal["delta", "welch"] | None = Field(
        None,
        description="A/B: 'delta' (default) = ratio of per-user sums with the delta method (query-weighted); "
        "'welch' = per-user means compared with Welch's t-test (user-weighted)",
    )
    rankers: list[str] = Field(
        default_factory=lambda: ["A", "B"],
        description="interleaving: the rankers to interleave (more than two = multileaving), baseline first",
    )
    logger: LoggerConfig | None = Field(None, description="counterfactual: the logging policy")
    targets: list[str] = Field(
        default_factory=lambda: ["A", "B"],
        description="counterfactual: the two rankers whose online values are estimated, baseline first",
    )
    estimators: list[EstimatorSpec] = Field(
        default_factory=lambda: [EstimatorSpec(name="ips"), EstimatorSpec(name="snips")],
        description="counterfactual: off-policy estimators (registry names, or {name: ..., <options>}); "
        "the first is the primary metric",
        min_length=1,
    )
    bootstrap: Annotated[int, Strict(), Field(ge=0, le=100_000)] = Field(
        0, description="counterfactual: cluster-bootstrap resamples for the last day's interval (0 = delta method, "
        "otherwise at least 100)"
    )
    refit_days: Annotated[int, Strict(), Field(ge=0, le=366)] = Field(
        0,
        description="counterfactual: estimators that fit a model on the whole log are recomputed every "
        "refit_days days and on the last day (0 = on the last day only)",
    )
    analysis: DesignAnalysis = Field(
        default_factory=DesignAnalysis,
        description="sequential test, monitoring (daily or per batch) and multiple-comparison correction",
    )

    @model_validator(mode="before")
    @classmethod
    def _counterfactual_keys_only_there(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("type") in ("ab", "interleaving"):
            used = [k for k in _COUNTERFACTUAL_KEYS if k in data]
            if used:
                raise ValueError(f"{', '.join(used)}: only for designs of type counterfactual")
        return data

    @model_validator(mode="before")
    @classmethod
    def _ab_test_default(cls, data: Any) -> Any:
        # an A/B design's test is 'delta' unless given (the effective config says which)
        if isinstance(data, dict) and data.get("type") == "ab" and data.get("test") is None:
            data = {**data, "test": "delta"}
        return data

    @model_serializer(mode="wrap")
    def _drop_unused(self, handler: Any) -> Any:
        # the effective config of a design holds the keys its type uses, nothing else
        data = handler(self)
        for key in _UNUSED_KEYS.get(self.type, ()):
            data.pop(key, None)
        if self.analysis.is_default():
            data.pop("analysis", None)  # designs without one keep their former effective config
        return data

    @model_validator(mode="after")
    def _check_kind(self) -> DesignConfig:
        if self.type == "counterfactual":
            return self._check_counterfactual()
        if self.type == "interleaving" and not self.method:
            raise ValueError("an interleaving design needs 'method' (e.g. team_draft, balanced)")
        if self.type == "ab" and self.method is not None:
            raise ValueError("'method' applies to interleaving designs only")
        if self.type == "interleaving" and self.test is not None:
            raise ValueError("'test' applies to A/B designs only (interleaving uses the delta method)")
        if self.type == "ab" and not 0.0 < self.share_b < 1.0:
            raise ValueError("share_b must be strictly between 0 and 1 for an A/B test")
        if self.type == "ab" and self.rankers != ["A", "B"]:
            raise ValueError("an A/B design compares rankers A and B; 'rankers' applies to interleaving designs")
        if len(self.rankers) < 2 or len(set(self.rankers)) != len(self.rankers):
            raise ValueError("'rankers' needs at least two distinct ranker names")
        return self

    def _check_counterfactual(self) -> DesignConfig:
        if self.logger is None:
            raise ValueError("a counterfactual design needs 'logger' (e.g. {policy: plackett_luce, ranker: A})")
        if self.method is not None or self.test is not None:
            raise ValueError("'method' and 'test' do not apply to counterfactual designs")
        if len(self.targets) != 2 or self.targets[0] == self.targets[1]:
            raise ValueError(f"'targets' needs two distinct rankers (baseline first), got {self.targets}")
        if not self.estimators:
            raise ValueError("'estimators' needs at least one estimator")
        labels = [e.label for e in self.estimators]
        if len(set(labels)) != len(labels):
            raise ValueError(f"'estimators' lists the same estimator twice: {labels}")
        return self


class AssumptionSweep(_Strict):
    """Vary one click-model parameter and show each counterfactual estimator's bias.

    ``parameter`` is a path into the config's ``users`` section, e.g.
    ``users.types[1].share`` (the other types' shares are rescaled to keep the sum 1) or
    ``users.types[0].click_model.eta``; each value gets one direct log of
    ``impressions`` impressions (no SimPy) and the exact truth.
    """

    parameter: Annotated[str, Field(pattern=r"^users(\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])+$")]
    values: list[float] = Field(min_length=1)
    impressions: Annotated[int, Strict(), Field(ge=1000, le=50_000_000)] = 200_000
    design: str | None = Field(None, description="the counterfactual design to sweep (default: the first)")


class AnalysisConfig(_Strict):
    alpha: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.05
    power: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.8
    aa: bool = Field(True, description="also run each design as A/A (B replaced by A)")
    null: bool = Field(
        True,
        description="also run each interleaving design with a null user (clicks that ignore relevance) for its "
        "null rejection rate; false: the rate is analytic from the null Delta (the truth's Monte Carlo)",
    )
    truth_impressions: Annotated[int, Strict(), Field(ge=1000, le=1_000_000_000)] = Field(
        1_000_000, description="Monte Carlo impressions for the true interleaving preference"
    )
    assumption_sweep: AssumptionSweep | None = Field(
        None, description="counterfactual designs: vary one click-model parameter, show each estimator's bias"
    )

    @model_serializer(mode="wrap")
    def _drop_unused(self, handler: Any) -> Any:
        data = handler(self)
        if self.assumption_sweep is None:
            data.pop("assumption_sweep", None)  # configs without a sweep keep their former form
        return data


class Config(_Strict):
    """A whole simulation run."""

    seed: Annotated[int, Strict(), Field(ge=0)] = 0
    replicates: Annotated[int, Strict(), Field(ge=1, le=100_000)] = 100
    workers: Annotated[int, Strict(), Field(ge=0)] = Field(0, description="processes; 0 = all cores")
    output: Path = Path("results")
    collection: Collection = SyntheticCollection()
    rankers: RankersConfig = RankersConfig()
    offline_metric: str = "nDCG@10"
    users: UsersConfig = UsersConfig()
    traffic: TrafficConfig = TrafficConfig()
    designs: list[DesignConfig] = Field(
        default_factory=lambda: [
            DesignConfig(name="ab", type="ab"),
            DesignConfig(name="team_draft", type="interleaving", method="team_draft"),
            DesignConfig(name="balanced", type="interleaving", method="balanced"),
        ],
        min_length=1,
    )
    analysis: AnalysisConfig = AnalysisConfig()

    @model_validator(mode="before")
    @classmethod
    def _default_collection_type(cls, data: Any) -> Any:
        coll = data.get("collection") if isinstance(data, dict) else None
        if isinstance(coll, dict) and "type" not in coll:
            data = {**data, "collection": {"type": "synthetic", **coll}}
        return data

    @model_validator(mode="after")
    def _check_designs(self) -> Config:
        names = [d.name for d in self.designs]
        for i, name in enumerate(names):
            if name in names[:i]:
                # the message carries the key path (a model-level check has no location of its own)
                raise ValueError(
                    f"designs[{i}].name: {name!r} is already the name of designs[{names.index(name)}]; "
                    "design names must be unique"
                )
        if isinstance(self.collection, TrecCollection):
            missing = [r for r in ("A", "B") if r not in self.collection.runs]
            if missing:
                raise ValueError(f"collection.runs needs a run for rankers A and B; missing {missing}")
        if isinstance(self.collection, SyntheticCollection) and self.rankers.depth > self.collection.candidates:
            raise ValueError(
                f"rankers.depth ({self.rankers.depth}) exceeds collection.candidates "
                f"({self.collection.candidates}): a list cannot show more documents than there are"
            )
        sweep = self.analysis.assumption_sweep
        if sweep is not None:
            cf = [d.name for d in self.designs if d.type == "counterfactual"]
            if not cf:
                raise ValueError("analysis.assumption_sweep needs a design of type counterfactual")
            if sweep.design is not None and sweep.design not in cf:
                raise ValueError(f"analysis.assumption_sweep.design: {sweep.design!r} is not a counterfactual "
                                 f"design; allowed: {', '.join(cf)}")
        known = self.ranker_names()
        for i, design in enumerate(self.designs):
            if design.type == "counterfactual":
                logger_ranker = [design.logger.ranker] if design.logger is not None else []
                for key, names in (("targets", design.targets), ("logger.ranker", logger_ranker)):
                    unknown = [r for r in names if r not in known]
                    if unknown:
                        raise ValueError(
                            f"designs[{i}].{key}: unknown ranker(s) {', '.join(unknown)}; defined: {', '.join(known)}"
                        )
            unknown = [r for r in design.rankers if r not in known]
            if unknown:
                raise ValueError(
                    f"designs[{i}].rankers: unknown ranker(s) {', '.join(unknown)}; defined: {', '.join(known)}"
                )
        return self

    def ranker_names(self) -> list[str]:
        """Every ranker of the run: A, B, then the others (synthetic) or the other runs (trec)."""
        if isinstance(self.collection, TrecCollection):
            return ["A", "B", *[r for r in self.collection.runs if r not in ("A", "B")]]
        return ["A", "B", *self.rankers.others]

    def effective(self) -> dict[str, Any]:
        """The configuration with every default filled in (JSON-serialisable)."""
        return self.model_dump(mode="json")


# ----------------------------------------------------------------------------- loading
def _allowed_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str] | None:
    """The field names allowed at ``loc`` (the parent of an unknown key), if resolvable."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if fields is None:
            # a discriminated union tag (e.g. 'synthetic') appears in pydantic's loc
            return None
        if part not in fields:
            for candidate in (SyntheticCollection, TrecCollection):
                if part == candidate.model_fields["type"].default or (
                    part == "trec" and candidate is TrecCollection
                ):
                    current = candidate
                    break
            else:
                return None
            continue
        annotation = fields[part].annotation
        current = _model_in(annotation)
        if current is None:
            return None
    fields = getattr(current, "model_fields", None)
    return sorted(fields) if fields else None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _strip_tags(loc: Sequence[str | int]) -> tuple[str | int, ...]:
    """Drop pydantic's union-member tags (``synthetic``, ``trec``) from an error location."""
    return tuple(p for p in loc if p not in ("synthetic", "trec") or p == loc[0])


def _first_error(exc: ValidationError, source: str | None) -> ConfigError:
    """The first of pydantic's errors as the tool's one-line message: the key path, then what the key must
    be, in lower case and the tool's words (its allowed values or keys, never a pydantic class name), then
    the value given (``traffic.days: must be at least 1, got 0``)."""
    import re

    from onlineeval.errors import must_be

    errors = exc.errors()
    err = errors[0]
    loc = tuple(err["loc"])
    path = _strip_tags(loc)
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = f", got {excerpt(err.get('input'))}"
    plain = must_be(kind, ctx, got)
    if kind == "extra_forbidden":
        allowed = _allowed_keys(Config, loc[:-1])
        hint = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
        message = f"unknown key{hint}"
    elif kind == "missing":
        message = "required key is missing"
    elif plain is not None:  # a bound or a type
        message = plain
    elif kind in ("literal_error", "enum") and "expected" in ctx:
        expected = str(ctx["expected"])
        one_of = "one of " if " or " in expected else ""
        message = f"must be {one_of}{expected}{got}"
    elif kind in ("dict_type", "model_type", "model_attributes_type"):
        # model_attributes_type: a union of mappings told apart by their 'type' (the collection), no one key list
        allowed = _allowed_keys(Config, loc) if kind != "model_attributes_type" else None
        keys = f" (keys: {', '.join(allowed)})" if allowed else ""
        message = f"must be a mapping of keys{keys}{got}"
    elif kind == "union_tag_invalid":
        tag = str(ctx.get("discriminator", "type")).strip("'\"")
        path = (*path, tag)
        message = f"must be one of {ctx.get('expected_tags', '')}, got {excerpt(ctx.get('tag'))}"
    elif kind == "union_tag_not_found":
        tag = str(ctx.get("discriminator", "type")).strip("'\"")
        path = (*path, tag)
        message = "required key is missing"
    elif kind == "value_error":
        message = str(err["msg"]).removeprefix("Value error, ")[:300]
    else:  # pydantic's sentence in the tool's words: "input should be" -> "must be", no class names
        text = re.sub(r"^Input should be\b", "must be", str(err["msg"]).strip().rstrip("."))
        text = re.sub(r" (?:or )?(?:an )?instance of \w+", "", text)
        text = re.sub(r" for <class '[\w.]+'>", "", text)
        message = f"{text[:1].lower()}{text[1:]}{got}"
    more = len(errors) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return ConfigError(path, message, source)


#: keys of a click-model spec that name files
_MODEL_FILE_KEYS = ("fitted", "params_file")


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Make file paths in the config (collection files, fitted click-model parameters)
    relative to the config file's folder."""

    def fix(value: Any) -> Any:
        if isinstance(value, str) and not Path(value).is_absolute():
            return str(base / value)
        return value

    users = data.get("users")
    if isinstance(users, dict):
        specs = [users.get("click_model")] + [
            t.get("click_model") for t in users.get("types") or [] if isinstance(t, dict)
        ]
        for spec in specs:
            if isinstance(spec, dict):
                for key in _MODEL_FILE_KEYS:
                    if key in spec:
                        spec[key] = fix(spec[key])
    coll = data.get("collection")
    if not isinstance(coll, dict) or coll.get("type") != "trec":
        return
    for key in ("qrels", "frequencies"):
        if key in coll:
            coll[key] = fix(coll[key])
    if isinstance(coll.get("runs"), dict):
        coll["runs"] = {k: fix(v) for k, v in coll["runs"].items()}


def config_from_mapping(data: Mapping[str, Any], source: str | None = None) -> Config:
    """Validate a mapping into a :class:`Config`, including component specs and files.

    Raises
    ------
    ConfigError
        naming the key path of the first problem and what is allowed.
    """
    if not isinstance(data, Mapping):
        raise ConfigError((), f"the config must be a mapping of keys, got {type(data).__name__}", source)
    try:
        config = Config.model_validate(dict(data))
    except ValidationError as exc:
        raise _first_error(exc, source) from None
    _check_components(config, source)
    return config


def _check_components(config: Config, source: str | None) -> None:
    """Validate the parts whose schema lives in their own registries, and input files."""
    import clickmodels
    from onlineeval.interleaving import available_interleavers, get_interleaver
    from onlineeval.metrics import parse_metric

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
    _check_population(config, source)
    for i, design in enumerate(config.designs):
        _check_design_analysis(config, i, source)
        if design.type == "counterfactual":
            _check_counterfactual(config, i, source)
            continue
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
                raise ConfigError(key, f"file not found: {path}", source)

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
    from simulations.resources import check_memory

    check_memory(config, source)  # before anything is allocated: refuse what cannot fit


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


def _check_counterfactual(config: Config, i: int, source: str | None) -> None:
    """Estimators registered, their options valid, each able to estimate the design's
    metric; the logging policy known with valid options."""
    import numpy as np

    from onlineeval.estimators import available_estimators, estimator_class, get_estimator, get_reward
    from simulations.policies import build_policy

    design = config.designs[i]
    if 0 < design.bootstrap < MIN_BOOTSTRAP:
        raise ConfigError(("designs", i, "bootstrap"), f"{design.bootstrap} resamples are too few for a percentile "
                          f"interval; allowed: 0 (the delta-method interval) or {MIN_BOOTSTRAP} to 100000 (as "
                          "onlineeval estimate --bootstrap)", source)
    reward = get_reward(design.metric, config.rankers.depth)
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


def sweep_path(parameter: str) -> tuple[str | int, ...]:
    """``"users.types[1].share"`` -> ``("users", "types", 1, "share")``."""
    import re

    return tuple(int(tok[1:-1]) if tok.startswith("[") else tok.lstrip(".")
                 for tok in re.findall(r"\.?[A-Za-z_][A-Za-z0-9_]*|\[\d+\]", parameter))


def swept_mapping(data: Mapping[str, Any], path: Sequence[str | int], value: float) -> dict[str, Any]:
    """A deep copy of the config mapping ``data`` with ``path`` set to ``value``.

    Setting a user type's ``share`` rescales the other types' shares proportionally so
    they still sum to 1 (equal parts when they were all 0); the copy has no
    ``analysis.assumption_sweep``. Raises ``KeyError`` naming the
    first part of ``path`` that does not exist, ``TypeError`` when it is not a number.
    """
    import copy

    out = copy.deepcopy(dict(data))
    if isinstance(out.get("analysis"), dict):
        out["analysis"].pop("assumption_sweep", None)  # a point of the sweep is not a sweep
    node: Any = out
    for depth, part in enumerate(path[:-1]):
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            raise KeyError(format_path(path[: depth + 1])) from None
    last = path[-1]
    try:
        old = node[last]
    except (KeyError, IndexError, TypeError):
        raise KeyError(format_path(path)) from None
    if isinstance(old, bool) or not isinstance(old, (int, float)):
        raise TypeError(f"{format_path(path)} is {old!r}, not a number")
    # an integer setting swept over whole numbers stays an integer (config integers are strict)
    node[last] = int(value) if isinstance(old, int) and float(value).is_integer() else value
    if tuple(path[:2]) == ("users", "types") and len(path) == 4 and last == "share":
        types = out["users"]["types"]
        others = [i for i in range(len(types)) if i != path[2]]
        rest = sum(float(types[i]["share"]) for i in others)
        for i in others:
            types[i]["share"] = ((1.0 - value) * float(types[i]["share"]) / rest if rest > 0
                                 else (1.0 - value) / len(others))
    return out


def format_path(path: Sequence[str | int]) -> str:
    from onlineeval.errors import format_key_path

    return format_key_path(tuple(path))


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Config:
    """Read, parse and validate a YAML config file.

    Parameters
    ----------
    path:
        The YAML file. Relative collection paths are taken relative to its folder.
    overrides:
        Dotted keys to set after reading, e.g. ``{"replicates": 50, "traffic.days": 7}``.
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise ConfigError((), "config file not found", source)
    from simulations.yaml_safe import load_yaml

    data = load_yaml(path)  # bounded size, depth and aliases; no duplicate keys; UTF-8 with file:line
    if data is None:
        raise ConfigError((), "the config file is empty", source)
    if not isinstance(data, dict):
        raise ConfigError((), f"the config must be a mapping of keys, got {type(data).__name__}", source)
    for dotted, value in (overrides or {}).items():
        set_key_path(data, dotted, value, source)
    _resolve_paths(data, path.resolve().parent)
    return config_from_mapping(data, source)


def has_key_path(data: Any, path: Sequence[str | int]) -> bool:
    """Whether the nested mapping ``data`` (as read from YAML) has the key path ``path``."""
    node = data
    for part in path:
        if isinstance(part, str) and isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(part, int) and isinstance(node, list) and -len(node) <= part < len(node):
            node = node[part]
        else:
            return False
    return True


def set_path(data: dict[str, Any], path: Sequence[str | int], value: Any) -> None:
    """Set ``path`` in the nested mapping ``data``; missing mapping keys are created, list
    indices must exist. Raises ``KeyError`` naming the first part that cannot be reached."""
    node: Any = data
    for depth, part in enumerate(path[:-1]):
        if isinstance(part, int):
            if not isinstance(node, list) or not -len(node) <= part < len(node):
                raise KeyError(format_path(path[: depth + 1]))
            node = node[part]
        else:
            if not isinstance(node, dict):
                raise KeyError(format_path(path[: depth + 1]))
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or not -len(node) <= last < len(node):
            raise KeyError(format_path(path))
    elif not isinstance(node, dict):
        raise KeyError(format_path(path))
    node[last] = value


def set_key_path(data: dict[str, Any], key: str, value: Any, source: str | None = None) -> None:
    """Set the key path ``key`` of a config mapping: dotted names with list indices in brackets
    (``traffic.days``, ``designs[0].analysis.sequential``). Missing mapping keys are created;
    a list index must exist. Raises :class:`ConfigError` naming the key path."""
    path = sweep_path(key) if isinstance(key, str) else ()
    if not path or format_path(path) != key.strip():
        raise ConfigError((), f"{key!r} is not a key path (dotted names, list indices in brackets: "
                          "designs[0].analysis.sequential)", source)
    try:
        set_path(data, path, value)
    except KeyError as exc:
        raise ConfigError(path, f"cannot set {key}: {exc.args[0]} does not exist in the config (a list index "
                          "must exist)", source) from None
