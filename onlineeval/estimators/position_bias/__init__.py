r"""Position bias (examination probabilities) estimated from click logs, and an OPE
interval that carries their estimation error.

Under the position-based model (PBM) a document ``d`` shown for query ``q`` at slot
``j`` (0-based) is clicked with probability

.. math::

    P(C = 1 \mid q, d, j) = \theta_j\, \alpha_{qd},

so only the *relative* examination probabilities :math:`\theta_j / \theta_0` are
identified from clicks (scaling every :math:`\theta` by ``c`` and every
:math:`\alpha` by ``1/c`` gives the same clicks). Every estimator here returns them
normalised to :math:`\theta_0 = 1`; that is all PBM-IPS needs (its weights are ratios of
examination probabilities). Four ways to get them:

``swap``
    Swap interventions (Joachims, Swaminathan and Schnabel, WSDM 2017, Sec. 6): a query's
    list is shown as is (A) and with slots 0 and ``j`` swapped (B). With :math:`\bar c`
    the click-through rate of a list at a slot,

    .. math::

        \frac{\theta_j}{\theta_0} = \frac{\sum_{\text{pairs}} \bar c^A_j + \bar c^B_j}
                                           {\sum_{\text{pairs}} \bar c^A_0 + \bar c^B_0},

    because in each pair the two documents visit both slots once:
    :math:`E[\bar c^A_j + \bar c^B_j] = \theta_j(\alpha_1 + \alpha_j)` and
    :math:`E[\bar c^A_0 + \bar c^B_0] = \theta_0(\alpha_1 + \alpha_j)`.
``randtop``
    RandTop-n (Joachims et al. 2017): the top ``n`` of every list is a uniform random
    shuffle of a fixed set, so every document is equally likely at every slot and the
    click-through rate per slot is proportional to :math:`\theta_j`:
    :math:`\hat\theta_j / \hat\theta_0 = \sum_i c_{ij} / \sum_i c_{i0}`.
``harvest``
    Harvested interventions (Agarwal, Zaitsev, Wang, Li, Najork and Joachims, WSDM 2019,
    "Estimating position bias without intrusive interventions"): (query, document) pairs
    that different rankers (or loggers) showed at different slots form the
    *interventional sets*; the examination probabilities and one relevance per
    interventional pair maximise the PBM likelihood of their clicks (AllPairs: every pair
    of slots at once, so slots never shown together with slot 0 are linked through
    others). Counts are pooled over rankers (the maximum likelihood when each pair has
    one relevance); Agarwal et al. additionally reweight so each ranker's traffic counts
    equally, which only matters when relevance differs between rankers' traffic.
``em``
    Regression EM (Wang, Golbandi, Bendersky, Metzler and Najork, WSDM 2018) on a regular
    log: EM on the PBM with the relevance a logistic regression on the log's
    (query, document) features (``data.features``), or, without features, one free
    relevance per (query, document) (the likelihood of
    :func:`clickmodels.estimation.fit_pbm`); see :func:`estimate_em`.

Every EM runs on the log's sufficient statistics (impressions and clicks per distinct
(query, document, slot)), so an iteration costs O(distinct cells), not O(impressions).

Every estimate carries its *linearisation* (:mod:`.influence`): PBM-IPS with estimated
examination adds it to its per-impression terms, so its default CLT interval includes
the estimation error of :math:`\hat\theta` (an M-estimation sandwich, clustered by
user). :func:`pipeline_bootstrap` resamples clusters, re-estimates the examination
probabilities *and* the PBM-IPS value on each resample and returns the percentile
interval, the resampling alternative.
"""

from onlineeval.estimators.position_bias._core import (
    Linearisation,
    PositionBiasEstimate,
    _groups,
)
from onlineeval.estimators.position_bias.em import (
    RELEVANCE_MODELS,
    estimate_em,
    estimate_harvest,
    pair_features,
)
from onlineeval.estimators.position_bias.interventions import (
    estimate_randtop,
    estimate_swap,
)
from onlineeval.estimators.position_bias.pipeline import (
    METHODS,
    SWAP_SHARE,
    PipelineInterval,
    estimate_examination,
    pipeline_bootstrap,
)

__all__ = [
    "METHODS",
    "RELEVANCE_MODELS",
    "SWAP_SHARE",
    "Linearisation",
    "PipelineInterval",
    "PositionBiasEstimate",
    "estimate_em",
    "estimate_examination",
    "estimate_harvest",
    "estimate_randtop",
    "estimate_swap",
    "pair_features",
    "pipeline_bootstrap",
]

_ = _groups  # re-exported for onlineeval.estimators.pbm_ips
