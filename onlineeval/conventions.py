"""Evaluation conventions as named, recorded objects.

The same run scores differently under different tools only because of choices that are
rarely reported: the gain of a grade, what to do with a query that has no relevant
document, what to do with a judged query the run does not answer, how score ties are
broken, which grade counts as relevant, and how deep the run is read. onlineeval makes
each of these an explicit field of :class:`Conventions`, reports it next to every number,
and ships presets that reproduce ``trec_eval``, LightGBM and XGBoost.

Tie rules (``Conventions.ties``)
--------------------------------
``"docno_desc"``
    Score descending, ties broken by document id descending (byte order). This is
    trec_eval's ``comp_sim_docno`` rule.
``"input_order"``
    Score descending, ties kept in input (file / data frame) order: a stable sort, as in
    LightGBM and XGBoost.
``"pessimistic"``
    Within a tie, the least relevant documents first (a lower bound).
``"optimistic"``
    Within a tie, the most relevant documents first (an upper bound).
``"expected"``
    The exact expectation of the metric over all orders of the tied documents (each
    order equally likely). Exact for metrics that are a weighted sum over ranks of a
    per-document value (P, Recall, DCG, nDCG, RBP, unjudged@k, ...), see
    :attr:`onlineeval.metrics.Metric.tie_expectation`; RR, AP and Success use the
    closed forms of McSherry and Najork (ECIR 2008); bpref, infAP, ERR and interpolated
    precision refuse it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from onlineeval.errors import ConfigError, must_be_one_of

__all__ = [
    "Gain",
    "EXPONENTIAL",
    "LINEAR",
    "Conventions",
    "PRESETS",
    "preset",
    "TieRule",
    "EmptyRule",
    "MissingRule",
    "TIE_RULES",
    "EMPTY_RULES",
    "MISSING_RULES",
]

TieRule = Literal["docno_desc", "input_order", "pessimistic", "optimistic", "expected"]
EmptyRule = Literal["exclude", "one", "zero"]
MissingRule = Literal["error", "zero", "drop"]

TIE_RULES: tuple[str, ...] = ("docno_desc", "input_order", "pessimistic", "optimistic", "expected")
EMPTY_RULES: tuple[str, ...] = ("exclude", "one", "zero")
MISSING_RULES: tuple[str, ...] = ("error", "zero", "drop")


@dataclass(frozen=True)
class Gain:
    """Map from a relevance grade to a gain.

    .. math::

        g_{\\mathrm{exp}}(r) = 2^{r} - 1, \\qquad g_{\\mathrm{lin}}(r) = r,

    or a custom table ``{grade: gain}``; grades missing from the table keep their linear
    gain (as trec_eval's ``ndcg.1=3,2=9`` parameters do). Negative grades and missing
    documents have gain 0. Burges et al. (2005) introduced the exponential gain;
    Järvelin and Kekäläinen (2002) used the grade itself.

    Parameters
    ----------
    kind:
        ``"exponential"``, ``"linear"`` or ``"table"``.
    table:
        ``((grade, gain), ...)`` sorted by grade; only with ``kind="table"``.
    """

    kind: Literal["exponential", "linear", "table"] = "exponential"
    table: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("exponential", "linear", "table"):
            raise ConfigError(("gain",), f"must be exponential, linear or a table, got {self.kind!r}")
        if self.kind != "table" and self.table:
            raise ConfigError(("gain",), "a gain table needs kind='table'")
        if self.kind == "table":
            grades = [g for g, _ in self.table]
            if len(set(grades)) != len(grades) or any(g < 0 for g in grades):
                raise ConfigError(("gain",), "table grades must be distinct and >= 0")
            bad = [f"{g}={v:g}" for g, v in self.table if not math.isfinite(v)]
            if bad:  # a NaN or infinite gain makes every DCG it enters NaN or infinite
                raise ConfigError(("gain",), f"table gains must be finite numbers, got {', '.join(bad)}")

    @classmethod
    def from_table(cls, table: Mapping[int, float]) -> Gain:
        """A custom gain table such as ``{1: 3.0, 2: 9.0}``."""
        return cls("table", tuple(sorted((int(g), float(v)) for g, v in table.items())))

    @classmethod
    def parse(cls, text: str) -> Gain:
        """Parse ``"exponential"``, ``"linear"`` or ``"1=3,2=9,4=4.5"`` (a table)."""
        text = text.strip()
        if text in ("exponential", "exp"):
            return EXPONENTIAL
        if text in ("linear", "lin"):
            return LINEAR
        from onlineeval.io.text import plain_float, plain_int

        table: dict[int, float] = {}
        for part in text.split(","):
            grade, sep, value = part.partition("=")
            # plain decimal spellings only: int() and float() take 1_0 (10) and digits of other scripts
            whole, number = plain_int(grade.strip()), plain_float(value)
            if not sep or whole is None or number is None:
                raise ConfigError(("gain",), f"expected exponential, linear or 'grade=gain,...', got {text!r}")
            table[whole] = number
        return cls.from_table(table)

    def __call__(self, grades: np.ndarray) -> np.ndarray:
        """Gains of an integer grade array; negative grades (codes) give 0."""
        g = np.asarray(grades)
        pos = np.maximum(g, 0).astype(np.float64)
        if self.kind == "exponential":
            top = int(np.max(g, initial=0))
            if top >= _EXP_GRADE_LIMIT:
                raise ConfigError(("gain",), f"exponential gains 2^g - 1 of grades of {_EXP_GRADE_LIMIT} and more "
                                  f"overflow a float64 (or DCG's sums of them) and the qrels hold grade {top}: set the "
                                  "gain to linear or a table ('grade=gain,...')")
            out = np.exp2(pos) - 1.0
        elif self.kind == "linear":
            out = pos
        else:  # a grade the table does not name gains the grade itself; no dense table up to the top grade
            out = pos.copy()
            for grade, value in self.table:
                out[pos == grade] = value
        return np.where(g > 0, out, 0.0) if self.kind != "table" else np.where(g >= 0, out, 0.0)

    def __str__(self) -> str:
        if self.kind != "table":
            return self.kind
        return ",".join(f"{g}={v:g}" for g, v in self.table)


#: exponential gains 2^g - 1 are refused from this grade on: 2^1024 is infinite in float64, and DCG's sums of gains
#: of grade 1000 stay finite below 2^24 documents (the discounts' sum) = 2^1000 x 2^24 << 2^1024
_EXP_GRADE_LIMIT = 1000

EXPONENTIAL = Gain("exponential")
LINEAR = Gain("linear")


@dataclass(frozen=True)
class Conventions:
    """Every choice that changes a metric value without changing the run.

    Parameters
    ----------
    gain:
        Gain of a grade for gain-based metrics (DCG, nDCG). Default exponential.
    empty:
        Queries with no relevant judged document: ``"exclude"`` from the mean (default),
        ``"one"`` (LightGBM, XGBoost) or ``"zero"`` (trec_eval).
    missing:
        Judged (qrels) queries that the run does not answer: ``"error"`` (default, and
        trec_eval 10.0), ``"zero"`` (trec_eval ``-c``) or ``"drop"``.
    ties:
        Score-tie rule, see the module docstring. Default ``"docno_desc"``.
    rel_min:
        Smallest grade counted as relevant by binary metrics (trec_eval ``-l``), at least 0
        (0 counts judged non-relevant documents too; unjudged ones never). Default 1.
    depth:
        Read at most this many documents of each ranked list (trec_eval ``-M``);
        ``None`` reads all.
    name:
        Preset name, or ``"custom"``.
    reference:
        Which tool (and version) the preset reproduces, set by the preset's definition (the ``trec_eval``
        preset's :data:`TREC_EVAL_REFERENCE`) and kept by :meth:`with_`; ``None`` for the others.
    """

    gain: Gain = EXPONENTIAL
    empty: EmptyRule = "exclude"
    missing: MissingRule = "error"
    ties: TieRule = "docno_desc"
    rel_min: int = 1
    depth: int | None = None
    name: str = field(default="custom", compare=False)
    reference: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.gain, Gain):
            raise ConfigError(("gain",), f"must be a Gain, got {self.gain!r}")
        for key, allowed in (("empty", EMPTY_RULES), ("missing", MISSING_RULES), ("ties", TIE_RULES)):
            value = getattr(self, key)
            if value not in allowed:
                raise ConfigError((key,), must_be_one_of(allowed, value))
        if isinstance(self.rel_min, bool) or not isinstance(self.rel_min, (int, np.integer)):
            raise ConfigError(("rel_min",), f"must be an integer grade, got {self.rel_min!r}")
        if self.rel_min < 0:
            # codes below 0 mark unretrieved, unjudged and empty slots: they must never be relevant
            raise ConfigError(("rel_min",), f"must be an integer grade >= 0, got {self.rel_min!r}")
        if self.depth is not None and (isinstance(self.depth, bool) or int(self.depth) < 1):
            raise ConfigError(("depth",), f"must be a positive integer or None, got {self.depth!r}")

    def with_(self, **changes: object) -> Conventions:
        """A copy with some fields changed; the name becomes ``"<preset>+changes"``."""
        changes = {k: v for k, v in changes.items() if v is not None}
        if not changes:
            return self
        new = replace(self, **changes)  # type: ignore[arg-type]
        if new == self:
            return new
        suffix = ",".join(f"{k}={changes[k]}" for k in sorted(changes))
        return replace(new, name=f"{self.name}+{suffix}")

    def describe(self) -> dict[str, object]:
        """A plain record of every convention (for JSON output and reports); a preset that reproduces a tool
        (``trec_eval`` and its variants) adds ``reference``: which one (:data:`TREC_EVAL_REFERENCE`)."""
        out: dict[str, object] = {
            "name": self.name,
            "gain": str(self.gain),
            "empty": self.empty,
            "missing": self.missing,
            "ties": self.ties,
            "rel_min": int(self.rel_min),
            "depth": self.depth,
        }
        if self.reference is not None:
            out["reference"] = self.reference
        return out


#: which trec_eval the ``trec_eval`` preset reproduces (review 2, F.1: on a heavily tied run 11pt_avg was 0.8102
#: here and in trec_eval 10.0, 0.8024 in pytrec_eval; per query up to 0.141 apart where R is small)
TREC_EVAL_REFERENCE = (
    "trec_eval 10.0; pytrec_eval and ir_measures embed trec_eval 9.x, whose iprec_at_recall and 11pt_avg "
    "count (long)(rho R + 0.9) relevant documents where 10.0 counts rho R rounded to nearest"
)


PRESETS: dict[str, Conventions] = {
    # trec_eval 10.0: linear gain; no-relevant queries count 0; a qrels query absent from
    # the run is an error (use missing="zero" for -c); ties by docno descending.
    "trec_eval": Conventions(
        gain=LINEAR, empty="zero", missing="error", ties="docno_desc", rel_min=1, name="trec_eval",
        reference=TREC_EVAL_REFERENCE,
    ),
    # LightGBM ndcg@k: label_gain 2^i - 1, stable sort by score, NDCG 1 when the ideal DCG is 0.
    "lightgbm": Conventions(
        gain=EXPONENTIAL, empty="one", missing="drop", ties="input_order", rel_min=1, name="lightgbm"
    ),
    # XGBoost ndcg@k (default "ndcg@k", not "ndcg@k-"): exponential gain, input order, 1 when empty.
    "xgboost": Conventions(
        gain=EXPONENTIAL, empty="one", missing="drop", ties="input_order", rel_min=1, name="xgboost"
    ),
    "default": Conventions(name="default"),
}


def preset(name: str) -> Conventions:
    """The named preset (``trec_eval``, ``lightgbm``, ``xgboost`` or ``default``)."""
    try:
        return PRESETS[name]
    except (KeyError, TypeError):  # (TypeError: an unhashable value from the Python API)
        raise ConfigError(("preset",), f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
