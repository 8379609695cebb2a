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

The code: :mod:`clickmodels.inputs` (:class:`Impressions`, :class:`ClickSample`, :func:`frozen_array`),
:mod:`clickmodels.docparams` (:class:`DocParam`, :class:`ByGrade`, :class:`ByQueryDoc`), :mod:`clickmodels.specs`
(:class:`SpecReader`), :mod:`clickmodels.registry` (:func:`register`, :func:`model_class`), :mod:`clickmodels.depth`
(:func:`too_deep`, :func:`check_depth`) and here :class:`ClickModel` and :func:`build`; every name is importable from
this module as before. Estimation imports those lower modules, never this one, so the only arrow between the two
is this module's lazy ``ClickModel.fit`` / fitted-spec imports of :mod:`clickmodels.estimation`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from clickmodels.depth import check_depth, too_deep  # noqa: F401  (re-exported)
from clickmodels.docparams import ByGrade, ByQueryDoc, DocParam, _pair_keys  # noqa: F401  (re-exported)
from clickmodels.inputs import (  # noqa: F401  (re-exported: importable from here as before)
    BoolArray,
    ClickSample,
    FloatArray,
    Impressions,
    IntArray,
    _int_matrix,
    _restore_frozen,
    as_impressions,
    frozen_array,
    impressions,
)
from clickmodels.registry import _REGISTRY, available, model_class, register  # noqa: F401  (re-exported)
from clickmodels.specs import SpecReader, _number  # noqa: F401  (re-exported)
from onlineeval.errors import ConfigError, InputError

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


# --------------------------------------------------------------------------- specs


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
    file holds per logged (query, document) pair, are given by grade for simulation. PBM's and
    UBM's examination, identified only up to a factor (``ClickModelFit.scale_free``), is scaled
    so that its largest value is 1: ``click`` is then the click probability of a document at the
    most examined rank, whatever scale EM reached.
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
    for f in getattr(fit, "scale_free", ()):
        # EM leaves PBM's and UBM's examination on an arbitrary scale (only its product with the attractiveness is
        # identified: here 0.86 at rank 1 on one log, another value from another start); with the attractiveness
        # given by grade that scale would multiply every click probability, so the largest examination is 1 and
        # `click` is the click probability of a document examined there
        top = float(np.max(kwargs[f]))
        if top > 0:
            kwargs[f] = np.asarray(kwargs[f], dtype=np.float64) / top
    known = {f.name for f in dc_fields(cls)}
    unknown = set(kwargs) - known
    if unknown:
        raise ConfigError(("fitted",), f"the file's parameters {sorted(unknown)} do not fit model {cls.name!r}")
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise ConfigError(("fitted",), str(exc)) from None
