"""The simulated world: queries with graded candidates, their frequencies, and rankers.

The world is built once per run from the root seed and shared by every replicate and
design; replicates differ in traffic and clicks only. Documents are identified by their
per-query candidate index, so a ranking is a ``(n_queries, depth)`` int32 matrix of
candidate indices (``-1`` = empty slot) and ``labels[q, ranking[q, r]]`` is the grade
shown at rank ``r``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simulations.config import Config, SyntheticCollection, TrecCollection
from simulations.sampling import child_seed

__all__ = ["SEGMENT_NAMES", "OfflineSummary", "World", "build_world", "segment_queries", "world_sampling"]

SEGMENT_NAMES = ("head", "torso", "tail")
#: grades are stored as int8 (a larger grade would wrap around silently)
_MAX_GRADE = 127
#: cumulative traffic share at which the head ends and the torso ends
SEGMENT_BOUNDS = (0.5, 0.8)


@dataclass(frozen=True)
class OfflineSummary:
    """Offline metric of each ranker, per query and averaged two ways."""

    metric: str
    per_query: dict[str, np.ndarray]
    uniform: dict[str, float]
    weighted: dict[str, float]
    by_segment: dict[str, dict[str, float]]
    conventions: dict[str, str]

    def delta(self, weighting: str = "weighted") -> float:
        means = self.weighted if weighting == "weighted" else self.uniform
        return means["B"] - means["A"]


@dataclass(frozen=True)
class World:
    """Everything fixed across replicates."""

    labels: np.ndarray  # (Q, m) int8, -1 = padding
    rankings: dict[str, np.ndarray]  # ranker -> (Q, depth) int32 candidate index, -1 empty
    frequency: np.ndarray  # (Q,) float64, sums to 1
    segment: np.ndarray  # (Q,) int8 index into SEGMENT_NAMES
    query_ids: tuple[str, ...]
    n_grades: int
    offline: OfflineSummary
    notes: dict[str, object] = field(default_factory=dict)
    #: ranker -> (Q, m) float32 score of every candidate (``-inf``: the ranker never shows it),
    #: so a logging policy can randomise over a ranker's full candidate list; the ranking is
    #: the candidates by descending score. Synthetic: grade + noise; trec: minus the rank in
    #: the full run (candidates the run does not retrieve: ``-inf``).
    scores: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_queries(self) -> int:
        return int(self.labels.shape[0])

    @property
    def depth(self) -> int:
        return int(next(iter(self.rankings.values())).shape[1])

    def ranked_labels(self, ranker: str) -> np.ndarray:
        """``(Q, depth)`` grades in rank order of ``ranker`` (``-1`` = empty slot)."""
        return shown_labels(self.labels, np.arange(self.n_queries), self.rankings[ranker])


def shown_labels(labels: np.ndarray, query: np.ndarray, ranking: np.ndarray) -> np.ndarray:
    """Grades of the shown documents: ``labels[query[i], ranking[i, r]]``, ``-1`` where empty.

    The world's int8 grades of lists without empty slots are read by one flat ``take`` (about a
    third of the general path's time; the same values, tested); an out-of-range document falls
    through to the general path and its ``IndexError``."""
    if (ranking.ndim == 2 and ranking.size and labels.dtype == np.int8 and labels.ndim == 2
            and labels.flags.c_contiguous and int(ranking.min()) >= 0 and int(ranking.max()) < labels.shape[1]):
        rows = query.astype(np.intp, copy=False) * labels.shape[1]
        return labels.reshape(-1).take(rows[:, None] + ranking)
    out = labels[query[:, None], np.maximum(ranking, 0)]
    return np.where(ranking >= 0, out, -1).astype(np.int8)


def zipf_frequencies(n: int, exponent: float) -> np.ndarray:
    """P(query of popularity rank i) proportional to ``1 / i**exponent``, i = 1..n."""
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent
    return weights / weights.sum()


def segment_queries(frequency: np.ndarray) -> np.ndarray:
    """Head / torso / tail by cumulative traffic: the most frequent queries that make up
    the first 50% of traffic are the head, the next 30% the torso, the rest the tail."""
    order = np.argsort(-frequency, kind="stable")
    cum = np.cumsum(frequency[order]) - frequency[order]  # traffic share before this query
    seg_sorted = np.searchsorted(np.asarray(SEGMENT_BOUNDS), cum, side="right").astype(np.int8)
    segment = np.empty_like(seg_sorted)
    segment[order] = seg_sorted
    return segment


def world_sampling(frequency: np.ndarray, delta: np.ndarray) -> tuple[float, float]:
    """``(n_eff, se)`` of a frequency-weighted mean of per-query values (review 4, F1).

    ``n_eff = 1 / sum_q f_q^2`` (``f`` normalised to sum 1): the number of equally weighted queries
    with the same variance; ``se``: the standard error of the weighted mean ``dbar_f = sum_q f_q d_q`` over
    independently drawn worlds (queries' values drawn independently of their frequencies), estimated from the one
    drawn world. The plug-in ``sum_q f_q^2 (d_q - dbar_f)^2`` has expectation ``var(d) (S2 - 2 S3 + S2^2)``
    (``Sk = sum f^k``: ``d_q - dbar_f`` has variance ``var(d) (1 - 2 f_q + S2)``) where the weighted mean's variance
    is ``var(d) S2``, so it is scaled by ``S2 / (S2 - 2 S3 + S2^2)`` (an unbiased variance; with equal weights the
    usual ``n - 1`` correction; Zipf(1) over 3,000 queries: the plug-in SE is about 8% low). NaN when the weights
    leave no spread to estimate (one query carries them all)."""
    f = np.asarray(frequency, dtype=np.float64)
    d = np.asarray(delta, dtype=np.float64)
    if f.shape != d.shape or f.size == 0 or not np.all(f >= 0) or f.sum() <= 0:
        raise ValueError("world_sampling needs non-negative frequencies (not all 0) and one value per query")
    f = f / f.sum()
    dbar = float(np.dot(f, d))
    s2 = float(np.dot(f, f))
    s3 = float(np.dot(f * f, f))
    plug_in = float(np.dot(f * f, (d - dbar) ** 2))
    scale = s2 - 2.0 * s3 + s2 * s2
    se = float(np.sqrt(plug_in * s2 / scale)) if scale > 1e-12 * s2 else math.nan
    return 1.0 / s2, se


#: cells (queries x candidates) of one chunk of the synthetic world's noise and scores
_CHUNK_CELLS = 1 << 18


def _synthetic(config: Config, coll: SyntheticCollection, seq: np.random.SeedSequence) -> World:
    """Labels, frequencies and each ranker's noise come from their own child streams, so
    adding a ranker changes nothing else.

    Memory: the ``(Q, m)`` grades (int8) and every ranker's scores (float32) are kept; the
    float64 noise, the float64 scores and their sort are made a chunk of queries at a time
    (:data:`_CHUNK_CELLS` cells). Every stream is consumed in row order, so the result does
    not depend on the chunk size (a generator's draws of ``(a, m)`` then ``(b, m)`` are its
    draw of ``(a + b, m)``). Measured (benchmarks/bench_world_memory.py, ``configs/ab.yaml`` at
    200k queries x 100 candidates, rankers A and B): tracemalloc peak of the set-up 220 MB, of
    which the world keeps 204 MB (153 MB the float32 scores), against 1,325 MB when every
    ``(Q, m)`` array was made at once.
    """
    q, m = coll.n_queries, coll.candidates
    depth = min(config.rankers.depth, m)
    dist = np.asarray(coll.label_distribution, dtype=np.float64)
    labels_rng, freq_rng, shared_rng = (np.random.default_rng(child_seed(seq, k)) for k in ("labels", "freq", "shared"))
    rho = config.rankers.noise_correlation
    specs = {"A": config.rankers.A, "B": config.rankers.B, **config.rankers.others}
    own_rngs = {name: np.random.default_rng(child_seed(seq, "ranker:" + name)) for name in specs}
    labels = np.empty((q, m), dtype=np.int8)
    rankings = {name: np.empty((q, depth), dtype=np.int32) for name in specs}
    scores = {name: np.empty((q, m), dtype=np.float32) for name in specs}
    rows = max(1, _CHUNK_CELLS // max(m, 1))
    for lo in range(0, q, rows):
        hi = min(lo + rows, q)
        lab = labels_rng.choice(len(dist), size=(hi - lo, m), p=dist / dist.sum()).astype(np.int8)
        labels[lo:hi] = lab
        shared = shared_rng.standard_normal((hi - lo, m))
        for name, spec in specs.items():
            own = own_rngs[name].standard_normal((hi - lo, m))
            score = lab + spec.noise * (np.sqrt(rho) * shared + np.sqrt(1.0 - rho) * own)
            # ties (only possible with noise 0) keep candidate order: stable sort
            rankings[name][lo:hi] = np.argsort(-score, axis=1, kind="stable")[:, :depth]
            scores[name][lo:hi] = score
    # popularity is independent of the query's content: a seeded permutation
    frequency = zipf_frequencies(q, coll.zipf_exponent)[freq_rng.permutation(q)]
    query_ids = tuple(f"q{i}" for i in range(q))
    notes = {"collection": "synthetic", "candidates_per_query": m}
    return _finish(config, labels, rankings, frequency, query_ids, len(dist), notes, scores=scores)


def _trec(config: Config, coll: TrecCollection, rng: np.random.Generator) -> World:
    from onlineeval.io import ranked_doc_lists, read_qrels, read_ranking

    qrels = read_qrels(coll.qrels)
    too_high = qrels["grade"].to_numpy() > _MAX_GRADE
    if too_high.any():
        from onlineeval.errors import InputError

        row = qrels.iloc[int(too_high.argmax())]
        raise InputError(
            f"grade {row['grade']} (query {row['query']}, document {row['doc']}) is above {_MAX_GRADE}, the "
            "largest grade the simulator's click models take; map the grades to 0..G-1", str(coll.qrels)
        )
    # each run is ranked once, over all its documents: the shown list is the first ``depth`` of
    # that ranking (a cut-off only truncates it); the run's table is dropped once ranked
    full_lists: dict[str, dict[str, list[str]]] = {}
    for name in config.ranker_names():
        run = read_ranking(coll.runs[name])  # a TREC run or a query doc score file
        full_lists[name] = {str(k): v for k, v in ranked_doc_lists(run, coll.ties, qrels, None).items()}
        del run
    judged_queries = list(dict.fromkeys(qrels["query"].astype(str)))
    qindex = {qid: i for i, qid in enumerate(judged_queries)}
    depth = config.rankers.depth

    # local document ids per query: judged documents first, then unjudged retrieved ones
    docs: list[dict[str, int]] = [{} for _ in judged_queries]
    grades: list[list[int]] = [[] for _ in judged_queries]
    for qid, doc, grade in qrels[["query", "doc", "grade"]].itertuples(index=False):
        i = qindex[str(qid)]
        docs[i].setdefault(str(doc), len(docs[i]))
        grades[i].append(max(int(grade), 0))  # negative grades count as non-relevant
    n_judged = [len(g) for g in grades]

    ranked_docs: dict[str, list[list[str]]] = {}
    notes: dict[str, object] = {"collection": "trec", "qrels": str(coll.qrels), "ties": coll.ties}
    for name, full in full_lists.items():
        in_run = set(full)
        notes[f"queries_only_in_run_{name}"] = len(in_run - set(qindex))
        notes[f"queries_missing_from_run_{name}"] = len(set(qindex) - in_run)
        ranked_docs[name] = [[str(d) for d in full.get(qid, ())[:depth]] for qid in judged_queries]
        # ranked, but to fewer documents than the page holds: its list there is a shorter page (empty slots)
        notes[f"queries_short_in_run_{name}"] = sum(
            1 for qid, lst in zip(judged_queries, ranked_docs[name]) if qid in in_run and len(lst) < depth)
        unjudged = 0
        shown = 0
        for i, lst in enumerate(ranked_docs[name]):
            for doc in lst:
                shown += 1
                if doc not in docs[i]:
                    docs[i][doc] = len(docs[i])
                    unjudged += 1
        notes[f"unjudged_shown_{name}"] = unjudged
        notes[f"shown_{name}"] = shown
        if shown == 0:
            from onlineeval.errors import InputError

            raise InputError(f"run {name} shows no document for any query judged in {coll.qrels}", coll.runs[name])

    q = len(judged_queries)
    m = max(len(d) for d in docs)
    labels = np.full((q, m), -1, dtype=np.int8)
    for i in range(q):
        labels[i, : n_judged[i]] = grades[i]
        labels[i, n_judged[i] : len(docs[i])] = 0  # unjudged shown documents count as non-relevant
    rankings = {}
    for name, lists in ranked_docs.items():
        mat = np.full((q, depth), -1, dtype=np.int32)
        for i, lst in enumerate(lists):
            mat[i, : len(lst)] = [docs[i][d] for d in lst]
        rankings[name] = mat
    # scores for logging policies: minus the rank in the full run, over the candidates
    # (judged, or shown by some ranker); candidates the run does not retrieve get -inf
    scores: dict[str, np.ndarray] = {}
    for name, full in full_lists.items():
        sc = np.full((q, m), -np.inf, dtype=np.float32)
        for i, qid in enumerate(judged_queries):
            local = docs[i]
            for rank, doc in enumerate(full.get(qid, ())):
                j = local.get(str(doc))
                if j is not None:
                    sc[i, j] = -float(rank)
        scores[name] = sc
    if coll.frequencies is not None:
        frequency, ignored = _read_frequencies(coll.frequencies, qindex)
        # how the file met the judged queries (a file keyed otherwise, "q1" against "1", matched only a few of them
        # silently, and those took all the traffic): in the summary's world and the report's run lines
        notes["frequencies_queries_counted"] = int((frequency > 0).sum())
        notes["frequencies_queries_without_count"] = int((frequency == 0).sum())
        notes["frequencies_lines_not_judged"] = ignored
    else:
        frequency = zipf_frequencies(q, coll.zipf_exponent)[rng.permutation(q)]
    n_grades = int(labels.max()) + 1
    # the judged-document grades only (unjudged documents are not part of the ideal ranking)
    judged = np.where(np.arange(m)[None, :] < np.asarray(n_judged)[:, None], labels, -1)
    return _finish(config, labels, rankings, frequency, tuple(judged_queries), max(n_grades, 2), notes, judged,
                   scores=scores)


def _read_frequencies(path: Path, qindex: dict[str, int]) -> tuple[np.ndarray, int]:
    """The query frequencies of a ``query count`` file over the judged queries ``qindex`` (summing to 1; 0 for a
    judged query the file does not count) and the number of its lines whose query is not judged (left out)."""
    from onlineeval.errors import InputError
    from onlineeval.io.text import plain_float, text_lines

    counts = np.zeros(len(qindex), dtype=np.float64)
    ignored = 0
    # text_lines, as the other readers: a compressed or non-UTF-8 file, or a NUL byte, is refused naming the line
    # (open() raised a bare UnicodeDecodeError)
    for lineno, line in text_lines(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise InputError(f"expected 'query count', got {len(parts)} columns", path, lineno)
        count = plain_float(parts[1])
        if count is None:
            raise InputError(f"count {parts[1]!r} is not a number", path, lineno)
        if not np.isfinite(count) or count < 0:
            raise InputError(f"count must be a non-negative number, got {parts[1]!r}", path, lineno)
        if parts[0] in qindex:
            counts[qindex[parts[0]]] += count
        else:
            ignored += 1
    if counts.sum() <= 0:
        raise InputError("no judged query has a positive count", path)
    return counts / counts.sum(), ignored


def _offline_per_query(metric, labels: np.ndarray, rankings: dict[str, np.ndarray],
                       judged: np.ndarray) -> dict[str, np.ndarray]:
    """``metric`` of every query under each ranker, a chunk of queries at a time.

    The metric widens the ``(Q, m)`` judged grades to int64 and sorts them (several ``(Q, m)``
    int64 arrays at once: 8 bytes a cell each, against 1 for the int8 grades), so one call over
    the whole collection needs several times the memory of the world itself; chunks of
    :data:`_CHUNK_CELLS` judged cells bound that. The values are those of one call over all
    queries (:meth:`onlineeval.metrics.Metric.evaluate_labels`): the one convention that looks
    at the whole batch, the top grade of ERR's gain scale, is taken from all queries (judged
    and shown grades) and passed to every chunk (tests/test_world_memory.py compares every
    registered metric with one call).
    """
    from onlineeval.metrics.base import EvalContext, LabelBatch

    q = judged.shape[0]
    rows = max(1, _CHUNK_CELLS // max(judged.shape[1], 1))
    all_q = np.arange(q)
    shown = {name: shown_labels(labels, all_q, r) for name, r in rankings.items()}  # (Q, depth) int8
    top_judged = int(judged.max(initial=0))
    ctx = {name: EvalContext(gmax=max(1, top_judged, int(s.max(initial=0)))) for name, s in shown.items()}
    out = {name: np.empty(q, dtype=np.float64) for name in rankings}
    for lo in range(0, max(q, 1), rows):
        hi = min(lo + rows, q)
        for name, s in shown.items():
            out[name][lo:hi] = metric.compute(LabelBatch.from_labels(s[lo:hi], judged[lo:hi]), ctx[name])
    return out


def _finish(
    config: Config,
    labels: np.ndarray,
    rankings: dict[str, np.ndarray],
    frequency: np.ndarray,
    query_ids: tuple[str, ...],
    n_grades: int,
    notes: dict[str, object],
    judged: np.ndarray | None = None,
    scores: dict[str, np.ndarray] | None = None,
) -> World:
    from onlineeval.metrics import parse_metric

    metric = parse_metric(config.offline_metric)
    segment = segment_queries(frequency)
    judged = labels if judged is None else judged
    per_query = _offline_per_query(metric, labels, rankings, judged)
    uniform = {k: float(np.mean(v)) for k, v in per_query.items()}
    weighted = {k: float(np.dot(frequency, v)) for k, v in per_query.items()}
    by_segment: dict[str, dict[str, float]] = {}
    for s, seg_name in enumerate(SEGMENT_NAMES):
        mask = segment == s
        if not mask.any():
            continue
        w = frequency[mask] / frequency[mask].sum()
        by_segment[seg_name] = {
            "queries": float(mask.sum()),
            "traffic_share": float(frequency[mask].sum()),
            **{k: float(np.dot(w, v[mask])) for k, v in per_query.items()},
        }
    conventions = {
        "metric": str(metric),
        "gain": "metric default: exponential 2^g - 1 for DCG-family metrics; a grade >= 1 is relevant",
        "ties": "none: a ranking is a fixed list (trec collections: the collection's tie rule)",
        "weighting": "uniform over queries and weighted by query frequency",
        "unjudged": "unjudged shown documents count as non-relevant (grade 0)",
        "negative_grades": "count as grade 0",
        "empty_queries": "a query without relevant documents scores 0 and is counted",
        "cutoff": f"the metric's own (depth of the shown lists: {next(iter(rankings.values())).shape[1]})",
    }
    offline = OfflineSummary(str(metric), per_query, uniform, weighted, by_segment, conventions)
    return World(labels, rankings, frequency, segment, query_ids, n_grades, offline, notes, dict(scores or {}))


def build_world(config: Config, seed_sequence: np.random.SeedSequence) -> World:
    """Build the collection, the rankers and their offline metrics for ``config``."""
    coll = config.collection
    if isinstance(coll, SyntheticCollection):
        return _synthetic(config, coll, seed_sequence)
    return _trec(config, coll, np.random.default_rng(seed_sequence))
