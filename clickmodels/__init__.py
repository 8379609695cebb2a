"""clickmodels: user models and click models for simulated online evaluation.

Build a model from a spec, sample clicks for a batch of labelled result lists, and get
exact examination / click probabilities and log-likelihoods::

    import clickmodels
    model = clickmodels.build({"name": "cascade", "preset": "navigational"})
    out = model.sample(labels, rng)          # ClickSample(clicks, propensity, examined)
    model.click_probabilities(labels)        # (n, k) exact marginal P(click)

Registered models (``clickmodels.available()``): ``cascade`` (presets, stop modes), ``cm``,
``dcm``, ``ccm``, ``dbn``, ``sdbn``, ``pbm`` (the ``ai2018`` preset with ``eta`` and
``noise``), ``ubm``, the baselines ``random``, ``gctr``, ``rctr``, ``dctr``, the RBP user
``rbp`` and ``metric`` (the user of any offline metric with a C/W/L profile).
:func:`implied_cwl` and :func:`closest_metrics` go the other way, from a (fitted) click
model to the C/W/L weights and the offline metrics its users behave like;
:func:`clickmodels.checks.check_click_model` is the conformance suite.

See :mod:`clickmodels.base` for the API contract and :mod:`clickmodels.kernels` for the
numpy kernels the models (and estimation) share.
"""

from __future__ import annotations

from clickmodels.base import (
    ByGrade,
    ByQueryDoc,
    ClickModel,
    ClickSample,
    DocParam,
    Impressions,
    as_impressions,
    available,
    build,
    impressions,
    model_class,
    register,
)

__all__ = [
    "ByGrade",
    "ByQueryDoc",
    "ClickModel",
    "ClickSample",
    "DocParam",
    "Impressions",
    "as_impressions",
    "available",
    "build",
    "impressions",
    "model_class",
    "register",
]

# Register the model families (each module registers its classes on import).
from clickmodels import baselines, cascade, ccm, cwl, dbn, dcm, pbm, ubm  # noqa: E402,F401
from clickmodels.baselines import DocumentCTR, GlobalCTR, RandomClicks, RankCTR  # noqa: E402
from clickmodels.cascade import CM, Cascade  # noqa: E402
from clickmodels.ccm import CCM  # noqa: E402
from clickmodels.cwl import MetricUser, RBPUser, closest_metrics, implied_cwl  # noqa: E402
from clickmodels.dbn import DBN, SDBN  # noqa: E402
from clickmodels.dcm import DCM  # noqa: E402
from clickmodels.pbm import PBM  # noqa: E402
from clickmodels.ubm import UBM  # noqa: E402

__all__ += [
    "CCM", "CM", "Cascade", "DBN", "DCM", "DocumentCTR", "GlobalCTR", "MetricUser", "PBM", "RBPUser",
    "closest_metrics", "implied_cwl",
    "RandomClicks", "RankCTR", "SDBN", "UBM",
]
