"""The ``designs`` entries of a simulation config (:mod:`simulations.config`): one design of
each type (A/B, interleaving, counterfactual), a counterfactual design's logging policy and
estimators, and a design's ``analysis`` block (sequential test, looks, CUPED, SRM)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator, model_serializer, model_validator

from onlineeval.errors import MIN_ALPHA
from simulations.config.sections import Probability, _Strict
from simulations.yaml_safe import excerpt


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
_COUNTERFACTUAL_KEYS = ("logger", "targets", "estimators", "bootstrap", "refit_days", "export_log", "export_form")


#: keys of a design entry its type does not use (left out of the effective config)
_UNUSED_KEYS = {
    "ab": ("method", "options", "rankers", *_COUNTERFACTUAL_KEYS),
    "interleaving": ("share_b", "metric", *_COUNTERFACTUAL_KEYS),  # ('test': kept when it is delta_t)
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

    alpha: Annotated[float, Field(ge=MIN_ALPHA, lt=1.0)] = 0.001  # (as analysis.alpha)
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
    metric: Literal["clicks_per_query", "abandonment", "reciprocal_rank", "utility"] = Field(
        "reciprocal_rank", description="A/B: the primary metric for power and sample size; counterfactual: the "
        "online metric estimated; 'utility' (both): the offline metric's metric-user utility of the clicks (the "
        "clicks weighted by its static C/W/L weights)"
    )
    test: Literal["delta", "welch", "delta_t"] | None = Field(
        None,
        description="A/B: 'delta' (default) = ratio of per-user sums with the delta method (query-weighted); "
        "'welch' = per-user means compared with Welch's t-test (user-weighted); 'delta_t' = the delta method's "
        "ratio of sums with the bias-reduced (CR2) variance and Student's t with Bell and McCaffrey's degrees of "
        "freedom (for few users, where the delta method's z interval covers less than its level); interleaving: "
        "'delta' (default) or 'delta_t', the same two for its per-user credits over comparisons",
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
    export_log: Annotated[int, Strict(), Field(ge=0, le=1000)] = Field(
        0,
        description="counterfactual: write the simulated logs of the first N replicates (0..N-1, at most the run's "
        "replicates; default 0 = none) in the format `onlineeval estimate` reads, as "
        "<output>/logs/<design>/replicate_<r>.jsonl.gz, with the targets' rankings as TREC runs "
        "<output>/logs/<design>/<ranker>.run (simulations/export_log.py); part of the config's fingerprint",
    )
    export_form: Literal["logger", "propensities"] = Field(
        "logger",
        description="counterfactual: what each exported log line carries about its logging: 'logger' (default: the "
        "policy's spec and its rankers' scores of the query's candidates, so `estimate` computes the propensities, "
        "checks the targets' support and can run the pseudoinverse; about 18x the bytes of configs/"
        "counterfactual.yaml's log) or 'propensities' (list, prefix and item propensities of what was shown)",
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
        if self.type == "interleaving" and self.test in (None, "delta"):
            data.pop("test", None)  # (the default: interleaving designs keep their former effective config)
        if self.analysis.is_default():
            data.pop("analysis", None)  # designs without one keep their former effective config
        if not self.export_log:
            data.pop("export_log", None)  # likewise: designs that export no log keep their fingerprint
        if not self.export_log or self.export_form == "logger":
            data.pop("export_form", None)  # (the default, or nothing exported)
        return data

    @model_validator(mode="after")
    def _check_kind(self) -> DesignConfig:
        if self.type == "counterfactual":
            return self._check_counterfactual()
        if self.metric == "utility" and self.type == "interleaving":
            raise ValueError("metric 'utility' (the offline metric's metric-user utility) applies to A/B and "
                             "counterfactual designs; interleaving designs compare clicks credited to each ranker")
        if self.type == "interleaving" and not self.method:
            raise ValueError("an interleaving design needs 'method' (e.g. team_draft, balanced)")
        if self.type == "ab" and self.method is not None:
            raise ValueError("'method' applies to interleaving designs only")
        if self.type == "interleaving" and self.test == "welch":
            raise ValueError("test 'welch' (per-user means) applies to A/B designs; an interleaving design takes "
                             "'delta' (the default: the delta method's z) or 'delta_t' (the bias-reduced SE and "
                             "Student's t, for few users)")
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
