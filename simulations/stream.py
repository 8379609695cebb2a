"""The constants a run's files and its report share: the finished replicates' file name and the stream version.

They live here, below :mod:`simulations.job` (which re-exports them) and :mod:`simulations.report` (which
writes them into ``summary.json`` and the list of written files), so that neither imports the other's
constants and the two modules form no import circle.
"""

from __future__ import annotations

__all__ = ["FINISHED", "STREAM_VERSION"]

#: the partial file of a finished run, kept (renamed) so that a run of the same fingerprint with another number of
#: replicates reuses its records (replicate ``r`` is seeded by the ``r``-th spawned seed whatever their number)
FINISHED = "replicates.finished.jsonl.gz"

#: The version of the numbers a seed gives: the random streams of the world, the traffic and every design (the
#: lists shown, the clicks, the arms, the interleavings, the loggers' draws). **Bump it whenever a change makes a
#: seed give different numbers** (another sampler for the same distribution, another order of draws, another use
#: of the uniforms), even when every distribution is unchanged. It is part of :func:`config_fingerprint`, so a run
#: resumed after an upgrade recomputes the replicates of the earlier version instead of mixing them with its own
#: (replicate ``r`` is then what a fresh run gives), and so does a sweep's point. ``tests/test_stream_version.py``
#: holds a digest of each design's draws and every number one replicate reports (each checkpoint's estimates, SEs,
#: intervals, p-values, counts: ``tests/data/stream_version_numbers.json``, compared to 1e-9), and fails, asking for
#: this bump, when one changes; after the bump, ``python tests/test_stream_version.py --write-numbers`` regenerates
#: the numbers (and without ``--write-numbers`` prints the digests). Partial files record it in their header
#: (``stream_version``; absent in files of the versions before it was introduced).
#: 4 (2026-12-02): the model-based estimators' numbers for a seed changed (EM capped at 1000 iterations instead of
#: 200, the doubly robust estimators cross-fitted by default, the direct method's bootstrap refitting its model),
#: though no random stream did: a run resumed across it must not mix their replicates.
#: 5 (2026-12-02): estimates of a seed changed again with no random stream: list-level IPS and clipped IPS weight
#: the whole reward c0 + sum r (Horvitz-Thompson; abandonment's numbers), adaptive IPS and a DM fitted on the log
#: take the last day's SE and p-value from the bootstrap, PBM-IPS with empirical propensities linearises its terms.
#: Since finished runs keep their records (replicates.finished.jsonl.gz), a bump also stops their reuse.
#: 6 (2026-12-02): probabilistic interleaving's and multileaving's expected outcomes subtract P(D = d) - P(D = -d)
#: pair by pair (the wins and losses were summed separately): A/A multileaving rows are exact ties (p-value 1, was
#: rounding noise with p down to 5e-5) and other rows move in their last bits.
#: 7 (2026-12-02): adaptive IPS's data-driven choice takes only the behaviours under which a first-click reward can
#: be unbiased (cascade, standard; review 11 F1): its abandonment and reciprocal-rank numbers change, no random stream.
#: 8 (2026-12-03): click models fitted by EM (the direct method's and doubly robust estimators' models) run
#: SQUAREM-accelerated EM (:func:`clickmodels.estimation._em.run_em`): fits stop nearer the maximum, so their
#: estimates move; and a Plackett-Luce logger draws its lists slot by slot, k uniforms an impression, instead of one
#: Gumbel key per candidate (the same distribution, other lists for a seed).
#: 9 (2026-12-04): a Plackett-Luce logger's item marginals above dp_max_states are the exponential race's quadrature
#: (exact to ~1e-13) instead of a Monte Carlo estimate (now item_method: monte_carlo): the item-level estimators'
#: numbers of such loggers change for a seed, no random stream.
#: 10 (2026-12-04): a PBM or UBM fitted on logs and used by grade (``{name: pbm, fitted: file, click: [...]}``) has
#: its examination scaled so that its largest value is 1 (EM's arbitrary scale multiplied every click probability):
#: such users click otherwise for a seed, no random stream.
#: 11 (2026-12-05): a counterfactual row whose paired difference is not 0 but whose SE is 0 (no spread measured)
#: has its SE, interval and p-value undefined instead of a zero-width interval and p 0: such records change (none
#: in the bundled configs), no random stream.
#: 12 (2026-12-06): the direct method's CLT interval is linearised in the fitted relevances for first-click rewards
#: with a PBM fitted on the log and for every reward with a cascade model (it held the fitted model fixed): its SE,
#: interval and p-value change (a counterfactual design's dm without the bootstrap), no random stream.
#: 13 (2026-12-06): EM's dots (SQUAREM's step length, the log-likelihood) are summed in NumPy's order, not by BLAS,
#: whose kernel differs by CPU and steered SQUAREM's choices and the stopping iteration: a model fitted by EM (dm,
#: dr, dr_list, cascade_dr, PBM-IPS's estimated examination) stops at another point (the
#: stream test's dm moved 0.2% on one machine, 5e-5 on another), the same on every CPU now; no random stream.
#: 14 (2026-12-06): the direct method's CLT interval with a PBM fitted on the log carries the fitted examination's
#: error too (it held the examination fixed): its SE, interval and p-value change, no random stream.
#: 15 (2026-12-06): the counterfactual design's intervals and p-values take Student's t with Bell and McCaffrey's
#: degrees of freedom of each difference (``onlineeval estimate``'s), not z: every interval and p-value of its
#: differences changes (most by under 0.1% with thousands of users), no estimate and no random stream; the
#: replicates' rows gain a ``df`` field (those degrees of freedom; ``inf`` for z).
#: 16 (2026-12-06): an A/B design with ``test: welch`` records its Welch t's degrees of freedom on its daily rows
#: (``inf`` before, as for z; its per-batch looks had them), which the daily monitoring's fixed-horizon and peeking
#: rules read: no estimate, interval or p-value changes, those rules' rejections of such a design do; and a
#: counterfactual estimator whose last-day SE and p-value are its bootstrap's (``clt_holds_fixed``) records ``inf``
#: there (no t), not the delta method's df.
#: 17 (2026-12-07): A/B and interleaving designs with ``test: delta_t`` compute their df under the estimated
#: intra-user correlation of the per-impression values (:func:`onlineeval.stats.intra_user_correlation`), not under
#: independent impressions: their intervals and p-values change (estimates and SEs do not: the batch steps add up
#: the values' squares besides, the compiled and the NumPy one alike), no random stream.
#: 18 (2026-12-07): an A/B design with ``test: welch`` and CUPED gives its adjusted rows (``cuped:<metric>``) a
#: Welch-type t (:mod:`onlineeval.stats.cuped_welch`: leverage-corrected arm variances, the slope's own error,
#: Satterthwaite df) instead of z on the large-sample variance: their SEs, intervals, p-values and df change, no
#: estimate and no random stream.
STREAM_VERSION = 18
# history: 1 the first recorded; 2 RandTop-n (and epsilon-greedy's randomised rows) shuffle by Fisher-Yates steps,
# one uniform per slot, instead of the smallest of one uniform key per candidate; 3 the counterfactual design's
# last-day bootstrap (bootstrap > 0): one resample of the users per checkpoint for all its estimators (integer draws
# of a generator seeded by one draw of the design's) instead of multinomial counts per estimator, and adaptive IPS's
# data-driven choice run again in every resample (its intervals before held the choice fixed)
