"""The click-model API: impressions in, clicks and exact probabilities out.

This module is the contract every click model (and the estimation code that fits them)
works against. It has three layers.

1. **Impressions** (:class:`Impressions`): a batch of result lists, one row per
   impression, ``k`` slots per row. A slot is *empty* (never examined, never clicked)
   where ``labels == -1`` or ``docs == -1``. Label-driven models (the simulator) need
   ``labels`` (graded relevance ``0..G-1``); models fitted on logs need ``query`` (n,)
   and ``docs`` (n, k). Public methods accept either an :class:`Impressions` or a bare
   label matrix (``np.ndarray`` of shape (n, k)).

2. **Parameterisations** (:class:`DocParam`): how a per-document parameter (attractiveness
   ``alpha``, satisfaction ``sigma``) is looked up for every slot of a batch:

   - :class:`ByGrade` -- a table ``values[g]`` indexed by the relevance grade (simulator
     presets and hand-written specs);
   - :class:`ByQueryDoc` -- a table over observed ``(query, doc)`` pairs with a default for
     unseen pairs (what estimation on click logs produces).

   ``param.lookup(impressions)`` returns a float array (n, k) with ``0.0`` in empty slots.
   Structural parameters (examination by rank ``gamma`` (k,), UBM's ``gamma`` (k, k),
   DBN's perseverance, DCM's ``lambda`` by rank, CCM's ``tau``) are plain floats or
   read-only arrays on the model.

3. **Kernels** (:mod:`clickmodels.kernels`): pure numpy functions over per-slot parameter
   arrays (n, k) that sample clicks, compute exact examination / click probabilities, and
   the log-likelihood of observed clicks. Two kernel families cover all models:

   - the *Markov cascade* chain (CM, cascade presets, DCM, CCM, DBN, SDBN, RBP and every
     C/W/L user): the user examines rank 1, clicks an examined slot with probability
     ``attract``, then continues to the next rank with probability ``cont_click`` after a
     click or ``cont_skip`` after no click;
   - *position-dependent independent clicks* (PBM, CTR baselines) and UBM (examination
     depends on rank and the rank of the previous click).

Models
------
A model is an immutable (frozen) dataclass whose fields are its parameters. The base class
:class:`ClickModel` validates the input once in the public methods and then calls one small
private hook per model (``_sample``, ``_click_probabilities``, ``_examination_probabilities``,
``_conditional_click_probabilities``). Adding a model is one file: subclass, implement the
hooks (cascade-family models only map a batch to chain arrays, ``_chain``), decorate with
:func:`register`, implement ``from_spec`` for configs and set ``example_spec`` (the
conformance suite :func:`clickmodels.checks.check_click_model` runs on it).

Specs
-----
``build({"name": ..., ...})`` reads a model's parameters by grade (see each class), a
``"preset"`` where the family has one (``clickmodels/presets/*.json``), or
``{"name": "pbm", "fitted": "params.json", "click": [...]}``: structural parameters fitted
on click logs (``onlineeval clicks fit``) with the per-document ones given by grade (for
label-driven simulation), or ``{"name": "ubm", "params_file": "params.json"}``: the whole
fitted model, per-(query, document) tables included
(:func:`clickmodels.estimation.build_fitted`; batches then need ``query`` and ``docs``).

Fitting contract (estimation lives in :mod:`clickmodels.estimation`)
-------------------------------------------------------------------
``model.fit(log, **options)`` returns a *new* model of the same class whose per-document
parameters are :class:`ByQueryDoc` tables (and whose structural parameters are fitted
arrays); ``model`` itself is untouched. It delegates to
``clickmodels.estimation.fit(model, log, **options)``. Estimation code constructs the
fitted model with the model class's own constructor, e.g.
``PBM(examination=gamma, attractiveness=ByQueryDoc(query, doc, alpha, default=a0))``;
each model class documents its fields. Log-likelihoods, click probabilities and
conditional click probabilities of a fitted model are then computed by the same kernels
on ``Impressions(query=..., docs=...)`` batches.

Conventions
-----------
- Ranks are 0-based in arrays (rank 1 of the papers is column 0).
- Probabilities are float64; clicks are bool; nothing mutates the caller's arrays.
- Bad labels (grade above the model's range, below -1, clicks in empty slots) raise
  :class:`onlineeval.errors.InputError`; bad specs raise
  :class:`onlineeval.errors.ConfigError` with a key path relative to the spec.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import ConfigError, InputError, must_be_one_of

__all__ = [
    "Impressions",
    "ClickSample",
    "DocParam",
    "ByGrade",
    "ByQueryDoc",
    "ClickModel",
    "SpecReader",
    "register",
    "build",
    "available",
    "model_class",
    "as_impressions",
    "impressions",
    "frozen_array",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]


def _restore_frozen(obj: object, state: dict[str, Any]) -> None:
    """Unpickle into a frozen dataclass, keeping its arrays read-only."""
    for key, value in state.items():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
        object.__setattr__(obj, key, value)


def frozen_array(values: ArrayLike, dtype: Any = np.float64) -> NDArray[Any]:
    """A read-only copy of ``values`` (so a model's parameters cannot change by use)."""
    out = np.array(values, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


# --------------------------------------------------------------------------- impressions


@dataclass(frozen=True, eq=False)
class Impressions:
    """A batch of result lists, one row per impression.

    Parameters
    ----------
    labels:
        (n, k) int graded relevance, ``-1`` for an empty slot; ``None`` for log data.
    query:
        (n,) int query ids; needed by models with :class:`ByQueryDoc` parameters.
    docs:
        (n, k) int document ids, ``-1`` for an empty slot.
    """

    labels: NDArray[np.int64] | None = None
    query: NDArray[np.int64] | None = None
    docs: NDArray[np.int64] | None = None

    def __post_init__(self) -> None:
        if self.labels is None and self.docs is None:
            raise InputError("impressions need labels (n, k) or docs (n, k)")
        for name in ("labels", "docs"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _int_matrix(value, name))
        if self.query is not None:
            q = np.asarray(self.query)
            if q.ndim != 1 or (q.size and not np.issubdtype(q.dtype, np.integer)):
                raise InputError(f"query must be a 1-d integer array, got shape {q.shape} dtype {q.dtype}")
            object.__setattr__(self, "query", q)
        shapes = [a.shape for a in (self.labels, self.docs) if a is not None]
        if len(shapes) == 2 and shapes[0] != shapes[1]:
            raise InputError(f"labels {shapes[0]} and docs {shapes[1]} must have the same shape")
        if len(shapes[0]) != 2:
            raise InputError(f"labels/docs must be a 2-d array (n, k), got shape {shapes[0]}")
        if self.query is not None and self.query.shape != (shapes[0][0],):
            raise InputError(f"query must have shape ({shapes[0][0]},), got {self.query.shape}")

    @property
    def shape(self) -> tuple[int, int]:
        """(n, k): impressions and slots per impression."""
        arr = self.labels if self.labels is not None else self.docs
        assert arr is not None  # guaranteed by __post_init__ (not input validation)
        return (int(arr.shape[0]), int(arr.shape[1]))

    @property
    def valid(self) -> BoolArray:
        """(n, k) bool: ``True`` where the slot holds a document."""
        if self.labels is not None:
            out = self.labels >= 0
            if self.docs is not None:
                out &= self.docs >= 0
            return out
        assert self.docs is not None
        return self.docs >= 0


def _int_matrix(values: ArrayLike, name: str) -> NDArray[np.int64]:
    arr = np.asarray(values)
    if arr.ndim != 2:
        raise InputError(f"{name} must be a 2-d array (n, k), got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(np.equal(np.mod(arr, 1), 0)):
            raise InputError(f"{name} must hold integers (-1 for an empty slot), got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
    if arr.size and arr.min() < -1:
        raise InputError(f"{name} must be >= -1 (-1 marks an empty slot), found {int(arr.min())}")
    return arr


def as_impressions(batch: Impressions | ArrayLike) -> Impressions:
    """Coerce a bare label matrix to :class:`Impressions` (values are checked there)."""
    if isinstance(batch, Impressions):
        return batch
    return Impressions(labels=np.asarray(batch))


def impressions(
    labels: ArrayLike | None = None, query: ArrayLike | None = None, docs: ArrayLike | None = None
) -> Impressions:
    """Build checked :class:`Impressions` from array-likes (labels, query ids, doc ids)."""
    return Impressions(
        labels=None if labels is None else np.asarray(labels),
        query=None if query is None else np.asarray(query),
        docs=None if docs is None else np.asarray(docs),
    )


class ClickSample(NamedTuple):
    """Sampled clicks of a batch, with what counterfactual estimators need.

    Attributes
    ----------
    clicks:
        (n, k) bool sampled clicks.
    propensity:
        (n, k) float exact marginal examination probability of each slot given the
        impression (0 in empty slots); independent of the random draw.
    examined:
        (n, k) bool realised examination in this draw (the user's path).

    The arrays may be transposed views of rank-major work arrays (Fortran order); use
    ``np.ascontiguousarray`` where C order matters.
    """

    clicks: BoolArray
    propensity: FloatArray
    examined: BoolArray


# --------------------------------------------------------------------------- parameters


class DocParam(ABC):
    """A per-document parameter (attractiveness, satisfaction) looked up per slot."""

    @abstractmethod
    def lookup(self, imp: Impressions) -> FloatArray:
        """(n, k) float values for every slot, 0.0 in empty slots."""

    @abstractmethod
    def check(self, imp: Impressions, name: str) -> None:
        """Raise :class:`InputError` when ``imp`` cannot be parameterised (e.g. label too high)."""

    @property
    @abstractmethod
    def n_grades(self) -> int | None:
        """Number of grades for a :class:`ByGrade` table, else ``None``."""


@dataclass(frozen=True)
class ByGrade(DocParam):
    """A parameter given by relevance grade: slot value ``values[label]``.

    Parameters
    ----------
    values:
        ``values[g]`` for grades ``g = 0 .. G-1``; each in [0, 1].
    """

    values: tuple[float, ...]

    def __post_init__(self) -> None:
        vals = tuple(float(v) for v in self.values)
        object.__setattr__(self, "values", vals)
        for g, v in enumerate(vals):
            if not (0.0 <= v <= 1.0) or math.isnan(v):
                raise ValueError(f"ByGrade values[{g}] must be in [0, 1], got {v}")

    @property
    def n_grades(self) -> int:
        return len(self.values)

    def table(self, empty: float = 0.0) -> FloatArray:
        """``values`` with ``empty`` appended, so ``table[labels]`` maps label -1 to ``empty``."""
        return np.array((*self.values, empty), dtype=np.float64)

    def check(self, imp: Impressions, name: str) -> None:
        if imp.labels is None:
            raise InputError(f"{name} is given by relevance grade, so impressions need labels")
        if imp.labels.size:
            top = int(imp.labels.max())
            if top >= len(self.values):
                raise InputError(
                    f"label {top} is above this model's grades 0..{len(self.values) - 1} "
                    f"({name} has {len(self.values)} grades); use a preset or table with more grades"
                )

    def lookup(self, imp: Impressions) -> FloatArray:
        assert imp.labels is not None
        out = self.table(0.0)[imp.labels]
        if imp.docs is not None:
            out[imp.docs < 0] = 0.0
        return out


def _pair_keys(query: NDArray[Any], doc: NDArray[Any]) -> NDArray[np.int64]:
    return (np.asarray(query, dtype=np.int64) << 32) | np.asarray(doc, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class ByQueryDoc(DocParam):
    """A parameter per (query, document) pair, as fitted on click logs.

    Parameters
    ----------
    query, doc:
        (m,) int ids of the pairs (0 <= id < 2**31); need not be sorted.
    values:
        (m,) float values in [0, 1].
    default:
        Value for pairs not in the table (e.g. the prior or the global mean).
    """

    query: NDArray[np.int64]
    doc: NDArray[np.int64]
    values: FloatArray
    default: float = 0.5
    _keys: NDArray[np.int64] = field(init=False, repr=False)
    _sorted: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        q = np.asarray(self.query, dtype=np.int64)
        d = np.asarray(self.doc, dtype=np.int64)
        v = np.asarray(self.values, dtype=np.float64)
        if not (q.shape == d.shape == v.shape) or q.ndim != 1:
            raise ValueError("ByQueryDoc query, doc and values must be 1-d arrays of one length")
        if q.size and (q.min() < 0 or d.min() < 0 or q.max() >= 2**31 or d.max() >= 2**31):
            raise ValueError("ByQueryDoc ids must be in [0, 2**31)")
        if v.size and (np.any(~np.isfinite(v)) or v.min() < 0 or v.max() > 1):
            raise ValueError("ByQueryDoc values must be in [0, 1]")
        if not (0.0 <= float(self.default) <= 1.0):
            raise ValueError(f"ByQueryDoc default must be in [0, 1], got {self.default}")
        keys = _pair_keys(q, d)
        order = np.argsort(keys, kind="stable")
        if keys.size > 1 and np.any(np.diff(keys[order]) == 0):
            raise ValueError("ByQueryDoc has a (query, doc) pair twice")
        object.__setattr__(self, "query", frozen_array(q, np.int64))
        object.__setattr__(self, "doc", frozen_array(d, np.int64))
        object.__setattr__(self, "values", frozen_array(v))
        object.__setattr__(self, "default", float(self.default))
        object.__setattr__(self, "_keys", frozen_array(keys[order], np.int64))
        object.__setattr__(self, "_sorted", frozen_array(v[order]))

    @property
    def n_grades(self) -> None:
        return None

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore_frozen(self, state)

    def check(self, imp: Impressions, name: str) -> None:
        if imp.query is None or imp.docs is None:
            raise self._needs_ids(name)

    @staticmethod
    def _needs_ids(name: str) -> InputError:
        return InputError(
            f"{name} is fitted per (query, document), so impressions need query and docs; "
            "for grade labels (as in a simulate config) build the model with "
            "{'name': ..., 'fitted': 'params.json', 'click': [P(click) by grade]}, which keeps "
            "the fitted structural parameters (examination, continuation, ...)"
        )

    def lookup(self, imp: Impressions) -> FloatArray:
        docs, query = imp.docs, imp.query
        if docs is None or query is None:
            raise self._needs_ids("a (query, document) parameter")
        keys = _pair_keys(np.broadcast_to(query[:, None], docs.shape), np.maximum(docs, 0))
        pos = np.searchsorted(self._keys, keys)
        pos_c = np.minimum(pos, max(self._keys.size - 1, 0))
        if self._keys.size:
            found = self._keys[pos_c] == keys
            out = np.where(found, self._sorted[pos_c], self.default)
        else:
            out = np.full(docs.shape, self.default)
        out[~imp.valid] = 0.0
        return out


# --------------------------------------------------------------------------- spec reading


class SpecReader:
    """Reads a model spec (a mapping), raising :class:`ConfigError` with relative key paths.

    Parameters
    ----------
    spec:
        The mapping, e.g. ``{"name": "cascade", "click": [...], "stop": [...]}``.
    allowed:
        Keys this model accepts (besides ``name``); anything else is an error.
    """

    def __init__(self, spec: Mapping[str, Any], allowed: Sequence[str]) -> None:
        self.spec = spec
        self.allowed = ("name", *allowed)
        for key in spec:
            if key not in self.allowed:
                raise ConfigError(
                    (str(key),),
                    f"unknown key for click model {spec.get('name')!r}; allowed: {', '.join(self.allowed)}",
                )

    def has(self, key: str) -> bool:
        return key in self.spec and self.spec[key] is not None

    def raw(self, key: str, default: Any = None) -> Any:
        return self.spec.get(key, default)

    def number(
        self, key: str, default: float | None = None, lo: float = 0.0, hi: float = 1.0, what: str = "a probability"
    ) -> float:
        if key not in self.spec:
            if default is None:
                raise ConfigError((key,), f"is required ({what} in [{lo}, {hi}])")
            return default
        return _number(self.spec[key], (key,), lo, hi, what)

    def vector(
        self, key: str, length: int | None = None, lo: float = 0.0, hi: float = 1.0, required: bool = True
    ) -> tuple[float, ...] | None:
        if key not in self.spec:
            if required:
                raise ConfigError((key,), "is required (a list of probabilities in [0, 1])")
            return None
        value = self.spec[key]
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
            raise ConfigError((key,), f"must be a list of numbers in [{lo}, {hi}], got {value!r}")
        items = list(value)
        if not items:
            raise ConfigError((key,), "must not be empty")
        if length is not None and len(items) != length:
            raise ConfigError((key,), f"must have {length} entries (one per grade), got {len(items)}")
        return tuple(_number(v, (key, i), lo, hi, "a probability") for i, v in enumerate(items))

    def choice(self, key: str, options: Sequence[str], default: str) -> str:
        value = self.spec.get(key, default)
        if value not in options:
            raise ConfigError((key,), must_be_one_of(options, value))
        return str(value)

    def integer(self, key: str, default: int, lo: int = 1) -> int:
        value = self.spec.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
            raise ConfigError((key,), f"must be an integer >= {lo}, got {value!r}")
        return int(value)


def _number(value: Any, path: tuple[str | int, ...], lo: float, hi: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(path, f"must be {what} in [{lo}, {hi}], got {value!r}")
    v = float(value)
    if math.isnan(v) or not (lo <= v <= hi):
        raise ConfigError(path, f"must be {what} in [{lo}, {hi}], got {value!r}")
    return v


# --------------------------------------------------------------------------- models


M = TypeVar("M", bound="ClickModel")


@dataclass(frozen=True, eq=False)
class ClickModel(ABC):
    """Base class of all click models (frozen dataclass: fields are the parameters).

    Public methods validate the batch once and call one private hook. Subclasses
    implement ``_check`` (which parameters need which inputs), ``_sample``,
    ``_examination_probabilities``, ``_click_probabilities`` and
    ``_conditional_click_probabilities``; and ``from_spec`` for configs.
    """

    name: ClassVar[str] = ""
    #: A spec that builds a representative instance (used by the conformance suite,
    #: benchmarks and docs); every registered model must set one.
    example_spec: ClassVar[Mapping[str, Any] | None] = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore_frozen(self, state)

    # ---- public API ---------------------------------------------------------------

    def sample(self, batch: Impressions | ArrayLike, rng: np.random.Generator) -> ClickSample:
        """Sample clicks for every impression of ``batch`` (vectorized).

        Parameters
        ----------
        batch:
            :class:`Impressions` or a label matrix (n, k), ``-1`` = empty slot.
        rng:
            The random generator; the same generator state gives the same clicks.
        """
        imp = self._prepare(batch)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        return self._sample(imp, rng)

    def click_probabilities(self, batch: Impressions | ArrayLike) -> FloatArray:
        """(n, k) exact marginal probability of a click at each slot."""
        return self._click_probabilities(self._prepare(batch))

    def examination_probabilities(self, batch: Impressions | ArrayLike) -> FloatArray:
        """(n, k) exact marginal probability that each slot is examined (the propensity)."""
        return self._examination_probabilities(self._prepare(batch))

    def propensities(self, batch: Impressions | ArrayLike) -> FloatArray:
        """Alias of :meth:`examination_probabilities`: what counterfactual estimators use."""
        return self.examination_probabilities(batch)

    def conditional_click_probabilities(
        self, batch: Impressions | ArrayLike, clicks: ArrayLike
    ) -> FloatArray:
        """(n, k) :math:`P(C_r = 1 \\mid C_1, \\dots, C_{r-1})` given the observed clicks above."""
        imp = self._prepare(batch)
        return self._conditional_click_probabilities(imp, self._check_clicks(imp, clicks))

    def log_likelihood(self, batch: Impressions | ArrayLike, clicks: ArrayLike) -> FloatArray:
        """(n,) natural-log likelihood of the observed clicks of each impression.

        .. math:: \\log P(C) = \\sum_r \\log P(C_r \\mid C_{<r})

        ``-inf`` where the model gives the observed pattern probability 0.
        """
        imp = self._prepare(batch)
        c = self._check_clicks(imp, clicks)
        p = self._conditional_click_probabilities(imp, c)
        q = np.where(c, p, 1.0 - p)
        with np.errstate(divide="ignore"):
            return np.log(q).sum(axis=1)

    def fit(self: M, log: Any, **options: Any) -> M:
        """A new model of this class fitted to ``log`` (MLE / EM); ``self`` is untouched.

        Delegates to :func:`clickmodels.estimation.fit` (see the module docstring).
        """
        from clickmodels import estimation  # lazy: estimation imports the models

        return estimation.fit(self, log, **options)  # type: ignore[no-any-return]

    @classmethod
    def example(cls: type[M]) -> M:
        """A representative instance built from :attr:`example_spec`."""
        if cls.example_spec is None:
            raise TypeError(f"{cls.__name__} has no example_spec")
        return cls.from_spec(cls.example_spec)

    @classmethod
    @abstractmethod
    def from_spec(cls: type[M], spec: Mapping[str, Any]) -> M:
        """Build the model from a config mapping (key paths in errors are relative)."""

    # ---- hooks ----------------------------------------------------------------------

    def doc_params(self) -> dict[str, DocParam]:
        """The per-document parameters of this model, by field name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), DocParam)}

    def _check(self, imp: Impressions) -> None:
        """Raise :class:`InputError` if the batch does not fit the parameters."""
        for fname, param in self.doc_params().items():
            param.check(imp, f"{self.name}.{fname}")

    @abstractmethod
    def _sample(self, imp: Impressions, rng: np.random.Generator) -> ClickSample: ...

    @abstractmethod
    def _examination_probabilities(self, imp: Impressions) -> FloatArray: ...

    @abstractmethod
    def _click_probabilities(self, imp: Impressions) -> FloatArray: ...

    @abstractmethod
    def _conditional_click_probabilities(self, imp: Impressions, clicks: BoolArray) -> FloatArray: ...

    # ---- helpers --------------------------------------------------------------------

    def _prepare(self, batch: Impressions | ArrayLike) -> Impressions:
        imp = as_impressions(batch)
        self._check(imp)
        return imp

    @staticmethod
    def _check_clicks(imp: Impressions, clicks: ArrayLike) -> BoolArray:
        c = np.asarray(clicks)
        if c.shape != imp.shape:
            raise InputError(f"clicks must have the batch's shape {imp.shape}, got {c.shape}")
        if c.dtype != np.bool_:
            if not np.all((c == 0) | (c == 1)):
                raise InputError("clicks must be 0/1 or bool")
            c = c.astype(bool)
        if np.any(c & ~imp.valid):
            raise InputError("clicks found in empty slots (label/doc -1)")
        return c

    @property
    def n_grades(self) -> int | None:
        """Grades the model's by-grade tables cover (``None`` if it has no such table)."""
        grades = [p.n_grades for p in self.doc_params().values() if p.n_grades is not None]
        return min(grades) if grades else None


# --------------------------------------------------------------------------- registry

_REGISTRY: dict[str, type[ClickModel]] = {}


def register(name: str) -> Callable[[type[M]], type[M]]:
    """Class decorator: make a model buildable by ``build({"name": name, ...})``."""

    def deco(cls: type[M]) -> type[M]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"click model {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def available() -> list[str]:
    """Names of all registered click models, sorted."""
    return sorted(_REGISTRY)


def model_class(name: str) -> type[ClickModel]:
    """The registered class for ``name`` (``ConfigError`` listing the names if unknown)."""
    if name not in _REGISTRY:
        raise ConfigError(("name",), f"unknown click model {name!r}; available: {', '.join(available())}")
    return _REGISTRY[name]


def build(spec: Mapping[str, Any]) -> ClickModel:
    """Build a click model from a spec such as ``{"name": "cascade", "preset": "navigational"}``.

    Raises
    ------
    onlineeval.errors.ConfigError
        With a key path relative to ``spec`` (e.g. ``("stop", 2)``) and what is allowed.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError((), f"a click model spec must be a mapping with a 'name', got {spec!r}")
    if "name" not in spec:
        raise ConfigError(("name",), f"is required; available: {', '.join(available())}")
    name = spec["name"]
    if not isinstance(name, str):
        raise ConfigError(("name",), f"must be a string; available: {', '.join(available())}")
    if "params_file" in spec:  # a model fitted on logs, per-(query, doc) parameters and all
        from clickmodels.estimation import build_fitted

        return build_fitted(spec)  # type: ignore[no-any-return]
    cls = model_class(name)
    if "fitted" in spec:
        return _build_fitted(cls, spec)
    return cls.from_spec(spec)


#: Spec keys that give a fitted model's per-document parameters by grade.
_GRADE_KEYS = {"attractiveness": "click", "satisfaction": "satisfaction"}


def _build_fitted(cls: type[ClickModel], spec: Mapping[str, Any]) -> ClickModel:
    """A model whose structural parameters come from a fitted-parameters file.

    ``{"name": "pbm", "fitted": "params.json", "click": [...]}``: the position bias
    (examination, continuation, perseverance, ...) is the one fitted on click logs
    (``onlineeval clicks fit --out params.json``); the per-document parameters, which the
    file holds per logged (query, document) pair, are given by grade for simulation.
    """
    from dataclasses import fields as dc_fields

    from clickmodels.estimation import load_fit

    path = spec["fitted"]
    if not isinstance(path, str):
        raise ConfigError(("fitted",), f"must be the path of a fitted-parameters JSON file, got {path!r}")
    try:
        fit = load_fit(path)
    except FileNotFoundError:
        raise ConfigError(("fitted",), f"file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(("fitted",), f"{path}: {exc.strerror or exc}") from None
    except InputError as exc:
        raise ConfigError(("fitted",), str(exc)) from None
    if fit.name != cls.name:
        raise ConfigError(("name",), f"the file {path} holds a fitted {fit.name!r} model, not {cls.name!r}")
    pair_fields = tuple(getattr(fit, "pair_fields", ()))
    allowed = ("fitted", *(_GRADE_KEYS.get(f, f) for f in pair_fields))
    reader = SpecReader(spec, allowed)
    kwargs: dict[str, Any] = {}
    for f in pair_fields:
        key = _GRADE_KEYS.get(f, f)
        values = reader.vector(key, required=False)
        if values is None:
            raise ConfigError(
                (key,),
                f"is required with 'fitted': the file's {f} is per logged (query, document); "
                "give it by grade for simulation (a list of probabilities)",
            )
        kwargs[f] = ByGrade(values)
    for f in (*getattr(fit, "array_fields", ()), *getattr(fit, "float_fields", ())):
        kwargs[f] = getattr(fit, f)
    known = {f.name for f in dc_fields(cls)}
    unknown = set(kwargs) - known
    if unknown:
        raise ConfigError(("fitted",), f"the file's parameters {sorted(unknown)} do not fit model {cls.name!r}")
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise ConfigError(("fitted",), str(exc)) from None


def too_deep(what: str, ranks: int, slots: int, fitted: bool = False) -> str:
    """Why per-rank parameters ``what`` for ``ranks`` ranks cannot serve lists of ``slots``, and how to pass the
    depth: the one wording of the models (``fitted=False``: they are shown lists, so showing fewer documents
    also helps) and of the fits scoring a log (``fitted=True``)."""
    fix = f"fit it on logs with lists of at least {slots}" + ("" if fitted else f", or show at most {ranks} documents")
    head = (f"{what} was fitted for {ranks} ranks but the log has lists of {slots}" if fitted
            else f"the lists have {slots} slots but {what} covers only {ranks} ranks")
    return f"{head} (a fitted model covers the longest lists of its training log: {fix})"


def check_depth(imp: Impressions, ranks: int, what: str) -> None:
    """Raise :class:`InputError` (:func:`too_deep`) when the lists of ``imp`` are deeper than the ``ranks`` ranks
    of a model's per-rank parameters ``what``."""
    if imp.shape[1] > ranks:
        raise InputError(too_deep(what, ranks, imp.shape[1]))
