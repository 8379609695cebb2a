"""The interleaving designs' ground truth by Monte Carlo: each pair's expected Delta over the query distribution
(:func:`interleaving_truth`), and under a null user whose clicks do not depend on relevance
(:func:`null_interleaving_truth`, the null check's bias), with a pair's impressions on queries where its two rankers
show the same list counted at their exact 0 (:func:`identical_lists`). :func:`simulations.runner.compute_truth`
runs them (in worker processes with ``workers > 1``); moved here from :mod:`simulations.runner` unchanged.

A two-ranker team-draft or balanced design with prefix credit whose users' click models have grade tables (the
designs' compiled batch step applies, :meth:`simulations.designs.interleaving.InterleavingDesign._kernel_inputs`)
draws its impressions from the design's table and kernel (:func:`_table_step`: the same generator calls in the same
order, so the same impressions, outcomes and truth to the bit, tested; several times faster); any other design, the
interleaver's own draw and the models' sampler."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from simulations.config import Config, DesignConfig
from simulations.designs.interleaving import NULL_PREFIX
from simulations.users import UserModels
from simulations.world import World, shown_labels

if TYPE_CHECKING:
    from simulations.runner import Truth

__all__ = ["TRUTH_CHUNK", "TRUTH_TAG", "identical_lists", "interleaving_truth", "null_interleaving_truth"]

#: the Monte Carlo truths' stream tag ("truth"): a run's stream is (seed, TRUTH_TAG, crc32(design name)[, null])
TRUTH_TAG = 0x7472757468
#: impressions drawn at a time (and between progress ticks)
TRUTH_CHUNK = 200_000


def null_interleaving_truth(config: Config, design: DesignConfig, world: World, users: UserModels) -> list[Truth]:
    """Expected Delta of an interleaving design's pairs under a null user (metric ``null:<pair>``).

    The null user clicks like the config's users on ranker A's list for *another* query,
    drawn independently by frequency: each impression's clicks are those of the click
    model on the grades of that independent list, so they follow the users' position and
    click rates but do not depend on which documents are shown. Every true effect is then
    exactly 0 and the expected Delta of an unbiased method is 0; a Monte Carlo value
    beyond its standard error (``analysis.truth_impressions`` impressions, delta method
    for a ratio of means) is the method's bias on these rankers (Hofmann, Whiteson and
    de Rijke 2011 show balanced interleaving's).
    """
    return interleaving_truth(config, design, world, users, null=True)


def identical_lists(lists: list[np.ndarray]) -> np.ndarray:
    """``(n_queries,)`` bool: the queries on which every one of ``lists`` (each ``(n_queries, depth)``) is the same
    list; :func:`interleaving_truth` asks it of each pair of the design's rankers.

    There the pair's expected outcome is exactly 0, under any click model and the null user alike, for every method
    that treats its rankers alike (renaming the two renames their teams and nothing else: the interleaved list's law
    is the same and the clicks depend on the list only, so the outcome's mean equals its own negative); every
    registered method does (:func:`onlineeval.interleaving.checks.check_aa_no_preference` for two rankers,
    :func:`~onlineeval.interleaving.checks.check_multileave_identical_pair` for two identical ones of three; balanced,
    probabilistic and optimized interleaving credit such an impression a tie outright). Team-draft's outcome there
    is a fair coin's noise: :func:`interleaving_truth` counts such impressions at their exact 0 instead, which keeps
    the estimate unbiased and takes that noise out of the truth's Monte Carlo error (where every query's lists agree,
    B is A, the truth is exactly 0 with SE 0, not a few SEs of noise the sizes would be computed from). The
    impressions still count in the denominator (impressions with a click), as in the design's Delta."""
    same = np.ones(lists[0].shape[0], dtype=bool)
    for other in lists[1:]:
        same &= (np.asarray(other) == np.asarray(lists[0])).all(axis=1)
    return same


def interleaving_truth(
    config: Config, design: DesignConfig, world: World, users: UserModels, null: bool,
    tick: Callable[[int], None] | None = None,
) -> list[Truth]:
    """The Monte Carlo truth of ``design``'s pairs (``null``: under the null user, :func:`null_interleaving_truth`)
    over ``analysis.truth_impressions`` impressions, from the stream ``(seed, TRUTH_TAG, crc32(design's name)[,
    crc32("null")])``; ``tick(m)`` after every chunk of ``m`` impressions. Delta per pair = the halved outcomes' sum
    over the impressions with a click, its SE by the delta method for a ratio of means of iid impressions."""
    from simulations.designs.interleaving import pair_metrics, pair_outcomes, shared_interleaver
    from simulations.runner import Truth  # (runner imports this module)

    n = config.analysis.truth_impressions
    il = shared_interleaver(design.method or "", design.options)
    lists = [world.rankings[r] for r in design.rankers]
    pairs = pair_metrics(design.rankers)
    key: tuple[int, ...] = (config.seed, TRUTH_TAG, zlib.crc32(design.name.encode()))
    if null:
        key += (zlib.crc32(b"null"),)
    rng = np.random.default_rng(np.random.SeedSequence(key))
    num = np.empty((n, len(pairs)))
    den = np.empty(n)
    from simulations.traffic import CdfDraw

    # draw_from_cdf's indices from bucket tables (the traffic's and the designs' query draw)
    draw = CdfDraw(np.cumsum(world.frequency))
    null_labels = world.ranked_labels("A") if null else None
    # per pair: the queries on which its two rankers show the same list (all of them, with two rankers)
    same = np.stack([identical_lists([lists[i], lists[j]]) for _, i, j in pairs], axis=1)
    step = _table_step(il, lists, world, users, null_labels)
    for lo in range(0, n, TRUTH_CHUNK):
        m = min(TRUTH_CHUNK, n - lo)
        q = draw(rng.random(m))
        if step is None or not step(q, draw, rng, num[lo : lo + m], den[lo : lo + m]):
            shown = il.interleave([r[q] for r in lists], rng, length=world.depth)
            if null_labels is not None:
                ranking = np.asarray(shown.ranking)  # slots the interleaved list leaves empty stay empty
                labels = np.where(ranking >= 0, null_labels[draw(rng.random(m))], -1).astype(np.int8)
            else:
                labels = shown_labels(world.labels, q, np.asarray(shown.ranking))
            clicks = users.sample(labels, users.draw_types(m, rng), rng)
            num[lo : lo + m] = pair_outcomes(il, shown, clicks, len(lists)) / 2.0
            den[lo : lo + m] = clicks.any(axis=1)
        num[lo : lo + m][same[q]] = 0.0  # the pair's two lists the same: its expected outcome is exactly 0
        if tick is not None:
            tick(m)
    out = []
    for p, (metric, _, _) in enumerate(pairs):
        value = num[:, p].sum() / den.sum()
        # delta method for a ratio of means of iid impressions
        se = float(np.sqrt(np.mean((num[:, p] - value * den) ** 2) / n) / den.mean())
        if null:
            method = f"monte_carlo(n={n}), null user: clicks on ranker A's list for an independent query"
            out.append(Truth(design.name, NULL_PREFIX + metric, float(value), se, method, None))
        else:
            out.append(Truth(design.name, metric, float(value), se, f"monte_carlo(n={n})", None))
    return out


def _table_step(il: object, lists: list[np.ndarray], world: World, users: UserModels,
                null_labels: np.ndarray | None) -> Callable[..., bool] | None:
    """The design's table and compiled batch step as the truth's draw (a two-ranker team-draft or balanced
    interleaver with prefix credit, lists of up to MASK_SLOTS slots, users whose click models have grade tables:
    where :class:`~simulations.designs.interleaving.InterleavingDesign` takes them), or ``None``.

    The returned ``step(q, draw, rng, num, den)`` draws the impressions of queries ``q`` as the truth's loop does,
    in its order (the interleaver's coins, under the null user the other queries by ``draw``, the user types, the
    clicks' uniforms; the table draws the interleaver's coins, tested), and writes each impression's halved outcome
    into ``num`` (its one column: the design's one pair) and 1.0 where it has a click into ``den``; it returns
    ``False``, having drawn nothing, where some type is one the kernels cannot sample (the loop then takes the
    interleaver's path)."""
    from simulations.designs.interleaving import draw_table, table_kernel_inputs, table_step

    table = draw_table(il, lists, world.labels, world.depth)
    if table is None or not getattr(il, "prefix_credit", False):
        return None
    fused = table_kernel_inputs(table, users, null_labels)
    if fused is None:
        return None

    def step(q: np.ndarray, draw: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator, num: np.ndarray,
             den: np.ndarray) -> bool:
        m = q.shape[0]
        state = rng.bit_generator.state
        coins = table.draw_coin_rows(m, rng)
        other = None if null_labels is None else draw(rng.random(m))
        half, compared = np.zeros(m), np.zeros(m)
        if not table_step(table, fused, coins, q, other, users.draw_types(m, rng), rng, np.arange(m), half,
                          compared):
            rng.bit_generator.state = state  # nothing kept: the interleaver's path draws the same from here
            return False
        num[:, 0] = half
        den[:] = compared
        return True

    return step
