"""The whole simulation run, :class:`Config` (:mod:`simulations.config`): its sections, the
run-wide ``analysis`` (with the assumption sweep) and the checks between sections that
pydantic runs (unique design names, known rankers, a list no deeper than the candidates)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, Strict, field_validator, model_serializer, model_validator

from onlineeval.errors import MIN_ALPHA
from simulations.config.designs import DesignConfig
from simulations.config.sections import (
    Collection,
    RankersConfig,
    SyntheticCollection,
    TrafficConfig,
    TrecCollection,
    UsersConfig,
    _Strict,
)


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


#: impressions of the counterfactual designs' bias check by default (analysis.bias_check)
BIAS_CHECK_DEFAULT = 1_000_000


class AnalysisConfig(_Strict):
    # at least onlineeval.errors.MIN_ALPHA (1e-12): the analysis' normal quantiles of 1 - alpha / 2 are infinite
    # below about 1e-16 (1e-300 ended the run's analysis in a StatisticsError traceback)
    alpha: Annotated[float, Field(ge=MIN_ALPHA, lt=1.0)] = 0.05
    power: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.8
    aa: bool = Field(True, description="also run each design as A/A (B replaced by A)")
    null: bool = Field(
        True,
        description="also run each interleaving design with a null user (clicks that ignore relevance) for its "
        "null rejection rate; false: the rate is analytic from the null Delta (the truth's Monte Carlo)",
    )
    truth_impressions: Annotated[int, Strict(), Field(ge=1000, le=1_000_000_000)] = Field(
        1_000_000, description="Monte Carlo impressions for the true interleaving preference (of the designs "
        "without an exact one: two-ranker team-draft and balanced designs with prefix credit under grade-chain "
        "click models are exact) and for each design's null-user Delta"
    )
    assumption_sweep: AssumptionSweep | None = Field(
        None, description="counterfactual designs: vary one click-model parameter, show each estimator's bias"
    )
    bias_check: Annotated[int, Strict(), Field(ge=0, le=50_000_000)] = Field(
        BIAS_CHECK_DEFAULT,
        description="counterfactual designs: impressions of one direct log (no SimPy) on which each estimator's "
        "V(B) - V(A) is tested against the exact truth, beside the replicates' test (0 = no check; else at least "
        "10,000)",
    )

    @field_validator("bias_check")
    @classmethod
    def _bias_check_size(cls, value: int) -> int:
        if 0 < value < 10_000:
            raise ValueError(f"{value} impressions are too few for the bias check (its z is read against the "
                             "normal); give 0 (no check) or at least 10000")
        return value

    @model_serializer(mode="wrap")
    def _drop_unused(self, handler: Any) -> Any:
        data = handler(self)
        if self.assumption_sweep is None:
            data.pop("assumption_sweep", None)  # configs without a sweep keep their former form
        if self.bias_check == BIAS_CHECK_DEFAULT:
            data.pop("bias_check", None)  # likewise: the default check keeps the configs' former form
        return data


#: why an output folder given as empty text is refused (``Path("")`` is the current folder: surely a slip); for a
#: config's ``output``, ``simulate`` / ``sweep --output`` and the API's ``output`` (:func:`check_output`)
EMPTY_OUTPUT = ("an empty path would write the results into the current folder; give a folder such as results/run1 "
                "(or '.' for the current folder)")


def is_empty_output(value: Any) -> bool:
    return isinstance(value, str) and not value.strip()


def check_output(value: Any, key: str) -> None:
    """A :class:`~onlineeval.errors.ConfigError` naming ``key`` for an output folder given as empty text."""
    from onlineeval.errors import ConfigError

    if is_empty_output(value):
        raise ConfigError((key,), EMPTY_OUTPUT)


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

    @field_validator("output", mode="before")
    @classmethod
    def _output_not_empty(cls, value: Any) -> Any:
        if is_empty_output(value):
            raise ValueError(EMPTY_OUTPUT)
        return value

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
