"""The metric value object, its registry, the label batch and the C/W/L profile.

A metric is a frozen, hashable dataclass: its name, its parameters (declared once as
dataclass fields) and an optional cut-off ``k``. :func:`parse_metric` turns a name such
as ``"nDCG@10"`` or ``"RBP(p=0.8)"`` into one, using :mod:`ast` (never ``eval``).
The public :meth:`Metric.compute` validates once and calls the small private hook
``_compute`` that every implementation overrides.

Label codes
-----------
Metric kernels see one integer code per ranked slot:

=========  ======================================================================
``>= 0``   judged grade
``-1``     :data:`NONPOOL`: retrieved, not in the qrels (trec_eval ``RELVALUE_NONPOOL``)
``-2``     :data:`UNJUDGED`: in the qrels with a negative grade, i.e. pooled but not
           judged (trec_eval's ``-2`` convention used by infAP)
``-3``     :data:`EMPTY`: no document in this slot
=========  ======================================================================

All negative codes have gain 0 and are non-relevant.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from onlineeval.conventions import EXPONENTIAL, Gain
from onlineeval.errors import ConfigError, InputError

__all__ = [
    "NONPOOL",
    "UNJUDGED",
    "EMPTY",
    "CWL",
    "EvalContext",
    "LabelBatch",
    "Metric",
    "REGISTRY",
    "register",
    "parse_metric",
    "parse_metrics",
]

NONPOOL = -1
UNJUDGED = -2
EMPTY = -3


class CWL(NamedTuple):
    """A C/W/L user-model profile over the ranks of a batch (Moffat et al. 2017).

    Each field is a ``(q, d)`` float array over ranks ``i = 1..d``:

    .. math::

        W(i) = \\frac{\\prod_{j<i} C(j)}{\\sum_{t \\ge 1} \\prod_{j<t} C(j)}, \\qquad
        L(i) = \\bigl(1 - C(i)\\bigr) \\prod_{j<i} C(j).

    ``W`` is normalised over *all* ranks (``t`` to infinity, slots past ``d`` having gain
    0), so over a window it sums to at most 1; ``L`` likewise. The expected rate of gain
    is :math:`\\sum_i W(i)\\, r_i`, see :meth:`Metric.cwl_gains` and
    :meth:`Metric.cwl_scale` for how it relates to the metric value.

    References
    ----------
    A. Moffat, P. Bailey, F. Scholer, P. Thomas. "Incorporating user expectations and
    behavior into the measurement of search effectiveness". ACM TOIS 35(3), 2017.
    L. Azzopardi, P. Thomas, A. Moffat. "cwl_eval: An evaluation tool for information
    retrieval". SIGIR 2019.
    """

    continuation: np.ndarray
    weight: np.ndarray
    last: np.ndarray


class EvalContext(NamedTuple):
    """The conventions a metric kernel needs: relevance threshold, default gain and the
    top grade of the judgement scale (``None``: metrics that need it take the largest
    grade of the batch)."""

    rel_min: int = 1
    gain: Gain = EXPONENTIAL
    gmax: int | None = None


@dataclass(frozen=True, eq=False)
class LabelBatch:
    """Per-query labels in padded arrays, the input of every metric kernel.

    Parameters
    ----------
    codes:
        ``(q, d)`` int64 label code of each ranked slot (see the module docstring).
    judged:
        ``(q, m)`` int64 grades (``>= 0``) of every judged document of each query, sorted
        descending, ``-1`` padding.
    groups:
        ``(q, d)`` int64 id of the score-tie group of each slot (equal within a group of
        tied scores, distinct across groups), or ``None`` when ties are already broken.
    """

    codes: np.ndarray
    judged: np.ndarray
    groups: np.ndarray | None = None

    @classmethod
    def from_labels(cls, ranked: np.ndarray, judged: np.ndarray) -> LabelBatch:
        """Build from the simulator's grade arrays (``-1`` = empty slot / padding)."""
        r = _int_matrix(ranked, "ranked")
        j = _int_matrix(judged, "judged")
        if r.shape[0] != j.shape[0]:
            raise InputError(
                f"ranked has {r.shape[0]} queries but judged has {j.shape[0]}; they must match"
            )
        codes = np.where(r >= 0, r, EMPTY)
        js = np.where(j >= 0, j, -1)
        js = -np.sort(-js, axis=1)
        return cls(codes, js)

    @property
    def n_queries(self) -> int:
        return int(self.codes.shape[0])

    def rel(self, rel_min: int) -> np.ndarray:
        """``(q, d)`` bool: the slot holds a relevant document."""
        return self.codes >= rel_min

    def num_rel(self, rel_min: int) -> np.ndarray:
        """``(q,)`` number of judged documents with grade >= ``rel_min`` (R)."""
        return (self.judged >= rel_min).sum(axis=1)

    def num_ret(self) -> np.ndarray:
        """``(q,)`` number of non-empty slots."""
        return (self.codes != EMPTY).sum(axis=1)


def plain(value: object) -> object:
    """A parameter as Python shows it in a message: a numpy scalar as its Python value (``-1``, ``nan``), never
    numpy 2's repr (``np.int64(-1)``)."""
    return value.item() if isinstance(value, np.generic) else value


def _int_matrix(a: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 2:
        raise InputError(f"{name} must be a 2-d (queries x ranks) array, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise InputError(f"{name} must hold integer grades (-1 for none)")
    elif arr.dtype.kind not in "iub":
        raise InputError(f"{name} must hold integer grades, got dtype {arr.dtype}")
    return arr.astype(np.int64)


# ---------------------------------------------------------------------------------------
# Metric base and registry


REGISTRY: dict[str, type[Metric]] = {}
_LOOKUP: dict[str, type[Metric]] = {}


def register(cls: type[Metric]) -> type[Metric]:
    """Class decorator: add a metric to the registry under its name and aliases."""
    REGISTRY[cls.name] = cls
    for alias in (cls.name, *cls.aliases):
        key = alias.lower()
        if key in _LOOKUP and _LOOKUP[key] is not cls:
            raise RuntimeError(f"metric name {alias!r} registered twice")
        _LOOKUP[key] = cls
    return cls


@dataclass(frozen=True)
class Metric:
    """Base of every metric: a declared, hashable value object.

    Subclasses set the class attributes, declare their parameters as dataclass fields
    with defaults, and implement ``_compute`` (and ``_cwl`` for C/W/L metrics).

    Attributes
    ----------
    name, aliases:
        Registry names (matched case-insensitively).
    cutoff:
        ``"optional"``, ``"required"`` or ``"none"``: whether ``@k`` applies.
    empty_sensitive:
        ``True`` (default) when a query without relevant documents follows the ``empty``
        convention (1 or 0); ``False`` for counts and judgement-coverage metrics.
    relevance_free:
        ``True`` when the per-query value uses no relevance grade, only which documents are retrieved and
        which are judged (Judged, Unjudged, NumRet, RBPResidual): the value is defined on a query without
        relevant documents, so ``empty="exclude"`` does not leave such a query out of this metric's mean
        (ir_measures' and trec_eval's means count it). Every other metric's mean follows the ``empty`` rule.
    shown_params:
        Parameters always written in the canonical name (``RBP(p=0.8)``), others only
        when they differ from the default.
    tie_expectation:
        ``True`` when the exact expectation over orders of tied documents has a closed
        form here: weighted sums over ranks (:class:`AdditiveMetric`), RR, AP, Success.
        The ``_compute`` hook then handles ``batch.groups``.
    summed:
        ``True`` for counts (NumQ, NumRet, NumRel, NumRelRet, NumNonRelJudgedRet) whose summary
        over queries is their sum, as trec_eval's ``all`` line and ir_measures' aggregate report them; reports
        give the sum next to the mean (:meth:`RunEvaluation.total
        <onlineeval.metrics.evaluate.RunEvaluation.total>`).
    """

    k: int | None = None

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    cutoff: ClassVar[str] = "optional"
    tie_expectation: ClassVar[bool] = False
    shown_params: ClassVar[tuple[str, ...]] = ()
    empty_sensitive: ClassVar[bool] = True
    relevance_free: ClassVar[bool] = False
    summed: ClassVar[bool] = False

    def __post_init__(self) -> None:
        label = type(self).name
        if self.k is not None:
            if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 1:
                raise ConfigError(("metrics", label), f"cut-off k must be a positive integer, got {plain(self.k)!r}")
            if self.cutoff == "none":
                raise ConfigError(("metrics", label), f"{label} takes no @k cut-off")
        elif self.cutoff == "required":
            raise ConfigError(("metrics", label), f"{label} needs a cut-off, e.g. {label}@10")
        self._validate()

    # -- hooks ---------------------------------------------------------------------
    def _validate(self) -> None:
        """Check parameter values (raise ConfigError). Default: nothing to check."""

    def _compute(self, batch: LabelBatch, ctx: EvalContext) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} does not implement _compute")  # pragma: no cover

    def _cwl(self, codes: np.ndarray, ctx: EvalContext) -> CWL:
        raise TypeError(
            f"{self} has no static C/W/L user model (its weights depend on documents the "
            "user has not seen yet, e.g. the total number of relevant documents)"
        )

    # -- public ---------------------------------------------------------------------
    def compute(self, batch: LabelBatch, ctx: EvalContext = EvalContext()) -> np.ndarray:
        """Per-query values ``(q,)`` of this metric on a :class:`LabelBatch`.

        Queries with no relevant judged document get the metric's *empty* value 0 (as in
        trec_eval); the evaluation layer then applies the ``empty`` convention.
        """
        if batch.groups is not None and not self.tie_expectation:
            raise ConfigError(
                ("ties",),
                f"the exact expectation over tie orders is not available for {self}; "
                "use docno_desc, input_order, pessimistic or optimistic",
            )
        return np.asarray(self._compute(batch, ctx), dtype=np.float64)

    def evaluate_labels(self, ranked: np.ndarray, judged: np.ndarray) -> np.ndarray:
        """Per-query values from grade arrays (the simulator's entry point).

        Parameters
        ----------
        ranked:
            ``(q, d)`` integer grades of the shown documents in rank order, ``-1`` for an
            empty slot (unjudged shown documents should also be ``-1``: gain 0).
        judged:
            ``(q, m)`` integer grades of all judged documents of each query in any order,
            ``-1`` padding.

        Returns
        -------
        numpy.ndarray
            ``(q,)`` float64. Default conventions: exponential gain, a grade >= 1 is
            relevant, and a query with no relevant document scores 0.
        """
        return self.compute(LabelBatch.from_labels(ranked, judged), EvalContext())

    def cwl(self, ranked: np.ndarray) -> CWL:
        """The C/W/L profile of this metric's user model for ``(q, d)`` ranked grades.

        Raises
        ------
        TypeError
            When the metric has no static C/W/L model (AP, R-Precision, bpref, ...) or needs
            a cascade form (ERR: use :meth:`onlineeval.metrics.ERR.cascade`).
        """
        r = _int_matrix(ranked, "ranked")
        return self._cwl(np.where(r >= 0, r, EMPTY), EvalContext())

    def cwl_gains(self, ranked: np.ndarray) -> np.ndarray:
        """Per-rank gains ``r_i`` in ``[0, 1]`` (or the metric's gain) used with :meth:`cwl`."""
        r = _int_matrix(ranked, "ranked")
        return self._cwl_gains(np.where(r >= 0, r, EMPTY), EvalContext())

    def _cwl_gains(self, codes: np.ndarray, ctx: EvalContext) -> np.ndarray:
        return (codes >= ctx.rel_min).astype(np.float64)

    @property
    def params(self) -> dict[str, Any]:
        """The declared parameters (without ``k``) and their values."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "k"}

    def __str__(self) -> str:
        shown = [
            f"{f.name}={_fmt(getattr(self, f.name))}"
            for f in dataclasses.fields(self)
            if f.name != "k" and (getattr(self, f.name) != f.default or f.name in self.shown_params)
        ]
        text = type(self).name + (f"({','.join(shown)})" if shown else "")
        return text + (f"@{self.k}" if self.k is not None else "")


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# ---------------------------------------------------------------------------------------
# Parsing

_NAME_RE = re.compile(r"^\s*(?P<name>[A-Za-z0-9_][A-Za-z0-9_\-]*)\s*(?P<args>\(.*\))?\s*(?:@\s*(?P<k>[^\s]+))?\s*$")


#: largest cut-off ``@k`` a metric name may ask for (trec_eval's deepest default is 1000)
MAX_CUTOFF = 10_000


def parse_metric(name: str, translate_names: bool = True) -> Metric:
    """Parse a metric name such as ``"nDCG@10"``, ``"RBP(p=0.8)"`` or ``"AP(denominator='min_r_k')@5"``.

    Parameters are keyword literals (numbers, strings, booleans); they are read with
    :func:`ast.literal_eval`, never evaluated as code. With ``translate_names`` a name
    that is not ours but a trec_eval or ir_measures measure name (``P_10``,
    ``ndcg_cut_10``, ``R@100``, ``IPrec@0.5``) is translated, see
    :mod:`onlineeval.metrics.names`.

    Raises
    ------
    onlineeval.errors.ConfigError
        Unknown metric, unknown parameter, a non-literal value or a bad cut-off; a
        foreign name that stands for several metrics (``P.5,10``: use
        :func:`parse_metrics`) or carries a relevance threshold (``P(rel=2)@10``: the
        threshold is the ``rel_min`` convention).
    """
    try:
        return _parse_own(name)
    except ConfigError as exc:
        if not translate_names or not isinstance(name, str):
            raise
        from onlineeval.metrics.names import translate_instead

        found = translate_instead(name, exc)
    if found.rel_min is not None:
        raise ConfigError(
            ("metrics", name),
            f"carries the relevance threshold {found.rel_min}, which is the rel_min convention of a whole "
            f"evaluation here: write {found.metrics[0]} and set rel_min={found.rel_min} (--rel-min {found.rel_min})",
        )
    if len(found.metrics) != 1:
        raise ConfigError(("metrics", name), f"stands for {len(found.metrics)} metrics; use parse_metrics")
    return _parse_own(found.metrics[0])


def _parse_own(name: str) -> Metric:
    """:func:`parse_metric` for our own names only."""
    if isinstance(name, Metric):
        return name
    if not isinstance(name, str):
        raise ConfigError(("metrics",), f"a metric name must be a string, got {name!r}")
    m = _NAME_RE.match(name)
    if m is None:
        raise ConfigError(("metrics", name), "not a metric name; expected e.g. nDCG@10 or RBP(p=0.8)")
    cls = _LOOKUP.get(m.group("name").lower())
    if cls is None:
        known = ", ".join(sorted(REGISTRY))
        raise ConfigError(
            ("metrics", name),
            f"unknown metric {m.group('name')!r}{_did_you_mean(m.group('name'))}; known: {known} (trec_eval and "
            "ir_measures names such as P_10 "
            "or R@100 are translated; `onlineeval metrics` lists every name)",
        )
    kwargs: dict[str, Any] = {}
    if m.group("args"):
        kwargs = _parse_args(name, m.group("args"))
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "k"}
    for key in kwargs:
        if key not in fields:
            allowed = ", ".join(fields) or "none"
            raise ConfigError(("metrics", name), f"unknown parameter {key!r} for {cls.name}; allowed: {allowed}")
    if m.group("k") is not None:
        from onlineeval.io.text import plain_int

        k = plain_int(m.group("k"))  # int() takes 1_0 (10) and digits of other scripts
        if k is None:
            raise ConfigError(("metrics", name), f"cut-off must be an integer, got {m.group('k')!r}")
        if k > MAX_CUTOFF:
            # the kernels work on (queries, k) arrays: an absurd cut-off would exhaust memory
            raise ConfigError(("metrics", name), f"cut-off must be at most {MAX_CUTOFF:,}, got {m.group('k')}")
        kwargs["k"] = k
    for key, value in list(kwargs.items()):
        if key == "k":
            continue
        default = fields[key].default
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            try:
                kwargs[key] = float(value)
            except OverflowError:
                raise ConfigError(("metrics", name, key), f"must be a number in float64's range, got {value}") from None
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(("metrics", name), str(exc)) from None


def _did_you_mean(head: str) -> str:
    """`` (did you mean nDCG?)`` for a misspelt metric name (``nDGC``, ``ndcg_cutt_10``), else ``""``."""
    import difflib

    from onlineeval.metrics.names import spellings

    shown = {text.lower(): text for text in (*(a for cls in REGISTRY.values() for a in cls.aliases), *spellings(),
                                             *REGISTRY)}  # canonical names last: they win over an alias's case
    close: list[str] = []
    for key in dict.fromkeys((head.lower(), re.sub(r"_[\d.]+$", "", head.lower()))):  # ndcg_cutt_10: ndcg_cutt
        close += [shown[c] for c in difflib.get_close_matches(key, shown, n=3, cutoff=0.75) if shown[c] not in close]
    close = close[:3]
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _parse_args(text: str, args: str) -> dict[str, Any]:
    from onlineeval.io.text import plain_float

    try:
        tree = ast.parse(f"_f{args}", mode="eval")
    except SyntaxError:
        raise ConfigError(("metrics", text), "parameters must look like (name=value, ...)") from None
    call = tree.body
    if not isinstance(call, ast.Call) or call.args:
        raise ConfigError(("metrics", text), "parameters must be given by name, e.g. RBP(p=0.8)")
    out: dict[str, Any] = {}
    source = f"_f{args}"
    for node in ast.walk(call):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex)) \
                and not isinstance(node.value, bool):
            written = ast.get_source_segment(source, node) or ""
            if plain_float(written) is None:  # 1_0, 0x10, 1j: Python's literals, not a number as written
                raise ConfigError(("metrics", text), f"parameter value {written} is not a plain decimal number")
    for kw in call.keywords:
        if kw.arg is None:
            raise ConfigError(("metrics", text), "** is not allowed in a metric name")
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            raise ConfigError(
                ("metrics", text), f"parameter {kw.arg} must be a literal (number, string, bool)"
            ) from None
    return out


def parse_metrics(names: str | Iterable[str | Metric]) -> list[Metric]:
    """Parse a comma-separated list (commas inside parentheses are kept) or an iterable.

    Raises
    ------
    ConfigError
        For an empty item (``"P@5,,AP"``), an unparseable name, or a metric given twice
        under any spelling (``"AP,MAP"``): each metric is one column of the results.
    """
    if isinstance(names, str):
        from onlineeval.metrics.names import split_metric_list

        items: list[str | Metric] = [p.strip() for p in split_metric_list(names)]
        if len(items) > 1:
            for i, item in enumerate(items, start=1):
                if not item:
                    raise ConfigError(("metrics",), f"empty item {i} in {names!r}; separate metric names by one comma")
        items = [p for p in items if p]
    else:
        items = list(names)
    if not items:
        raise ConfigError(("metrics",), "no metric given")
    out: list[Metric] = []
    for x in items:
        for m in _parse_family(x) if isinstance(x, str) else [x]:
            if m in out:
                raise ConfigError(("metrics",), f"{str(x)!r} is {m} again; give each metric once")
            out.append(m)
    return out


def _parse_family(name: str) -> list[Metric]:
    """One name, or a trec_eval family such as ``P.5,10`` that stands for several metrics."""
    try:
        return [_parse_own(name)]
    except ConfigError as exc:
        from onlineeval.metrics.names import translate_instead

        found = translate_instead(name, exc)
        if found.rel_min is not None or len(found.metrics) == 1:
            return [parse_metric(name)]  # its own message for a threshold; the metric otherwise
        return [_parse_own(n) for n in found.metrics]


def is_own_name(name: str) -> bool:
    """``True`` when the name (before any parameters or cut-off) is one of our metric names."""
    m = _NAME_RE.match(name)
    return m is not None and m.group("name").lower() in _LOOKUP
