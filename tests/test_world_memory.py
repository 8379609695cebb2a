"""The chunked world set-up (simulations.world) against the former dense one, kept here as reference.

The synthetic world's noise, scores and sorts, and the offline metrics, are made a chunk of
queries at a time to bound the set-up's peak memory (benchmarks/bench_world_memory.py). The
result must not depend on the chunk size: every array is compared bit for bit with the former
implementation, which drew every ranker's ``(Q, m)`` noise at once.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulations import world as W
from simulations.config import load_config
from simulations.runner import world_seed
from simulations.sampling import child_seed

REPO = Path(__file__).resolve().parents[1]


def _dense_synthetic(config, seq):
    """The former ``_synthetic``: whole ``(Q, m)`` float64 arrays per ranker (reference)."""
    coll = config.collection
    q, m = coll.n_queries, coll.candidates
    depth = min(config.rankers.depth, m)
    dist = np.asarray(coll.label_distribution, dtype=np.float64)
    labels_rng, freq_rng, shared_rng = (np.random.default_rng(child_seed(seq, k)) for k in ("labels", "freq", "shared"))
    labels = labels_rng.choice(len(dist), size=(q, m), p=dist / dist.sum()).astype(np.int8)
    rho = config.rankers.noise_correlation
    shared = shared_rng.standard_normal((q, m))
    rankings, scores = {}, {}
    specs = {"A": config.rankers.A, "B": config.rankers.B, **config.rankers.others}
    for name, spec in specs.items():
        own = np.random.default_rng(child_seed(seq, "ranker:" + name)).standard_normal((q, m))
        score = labels + spec.noise * (np.sqrt(rho) * shared + np.sqrt(1.0 - rho) * own)
        rankings[name] = np.argsort(-score, axis=1, kind="stable")[:, :depth].astype(np.int32)
        scores[name] = score.astype(np.float32)
    frequency = W.zipf_frequencies(q, coll.zipf_exponent)[freq_rng.permutation(q)]
    return labels, rankings, scores, frequency


def _dense_offline(metric_name, labels, rankings, frequency, judged=None):
    """The former offline metrics of ``_finish``: every query in one call (reference)."""
    from onlineeval.metrics import parse_metric

    metric = parse_metric(metric_name)
    judged = labels if judged is None else judged
    all_q = np.arange(labels.shape[0])
    return {name: np.asarray(metric.evaluate_labels(W.shown_labels(labels, all_q, r), judged), dtype=np.float64)
            for name, r in rankings.items()}


def _config(**overrides):
    base = {"collection.n_queries": 257, "collection.candidates": 23, "rankers.depth": 10}
    base.update(overrides)
    return load_config(REPO / "configs" / "ab.yaml", base)


def _assert_world_equals_dense(world, config, seq):
    labels, rankings, scores, frequency = _dense_synthetic(config, seq)
    assert world.labels.dtype == np.int8 and np.array_equal(world.labels, labels)
    assert sorted(world.rankings) == sorted(rankings) == sorted(world.scores)
    for name in rankings:
        assert world.rankings[name].dtype == np.int32 and np.array_equal(world.rankings[name], rankings[name])
        assert world.scores[name].dtype == np.float32
        assert world.scores[name].tobytes() == scores[name].tobytes()
    assert world.frequency.tobytes() == frequency.tobytes()
    per_query = _dense_offline(config.offline_metric, labels, rankings, frequency)
    for name, v in per_query.items():
        assert world.offline.per_query[name].tobytes() == v.tobytes()
        assert world.offline.weighted[name] == float(np.dot(frequency, v))
        assert world.offline.uniform[name] == float(np.mean(v))


@pytest.mark.parametrize("cells", [1, 23, 24, 100, 23 * 256, 23 * 257, 1 << 18])
def test_synthetic_world_does_not_depend_on_the_chunk_size(monkeypatch, cells):
    # 1 and 23 cells: one query per chunk; 24, 100: several, with a short last chunk; 23*256: one
    # full chunk and a single-query one; 23*257 and the default: the whole collection at once
    monkeypatch.setattr(W, "_CHUNK_CELLS", cells)
    config = _config()
    seq = world_seed(config.seed)
    _assert_world_equals_dense(W.build_world(config, seq), config, seq)


def test_other_rankers_ties_and_the_full_list(monkeypatch):
    # noise 0: every candidate of a grade ties, so the stable sort's candidate order decides;
    # depth = candidates: the whole sort is kept; a third ranker has its own stream
    monkeypatch.setattr(W, "_CHUNK_CELLS", 50)
    config = _config(**{"rankers.depth": 23, "rankers.A.noise": 0.0, "rankers.others": {"C": {"noise": 2.5}},
                        "offline_metric": "ERR@5"})
    seq = world_seed(config.seed)
    world = W.build_world(config, seq)
    assert world.depth == 23 and set(world.rankings) == {"A", "B", "C"}
    _assert_world_equals_dense(world, config, seq)


def _metric_names():
    from onlineeval.metrics import REGISTRY

    names = [name + "@10" if name in ("Unjudged", "Judged") else name for name in sorted(REGISTRY)]  # need a cut-off
    return [*names, "nDCG@10", "ERR@5", "P@5", "RBP(p=0.8)"]


@pytest.mark.parametrize("metric", _metric_names())
def test_offline_metrics_in_chunks_equal_one_call(monkeypatch, metric):
    # the offline metric of every query, computed a chunk of queries at a time, is bit-identical
    # to one call over all queries (ranked lists with empty slots and queries without relevant
    # documents included)
    rng = np.random.default_rng(12)
    q, m, depth = 301, 17, 8
    labels = rng.choice(4, size=(q, m), p=[0.7, 0.15, 0.1, 0.05]).astype(np.int8)
    labels[:20] = 0
    labels[20:30, 12:] = -1  # padding
    rankings = {"A": np.argsort(rng.random((q, m)), axis=1)[:, :depth].astype(np.int32)}
    rankings["A"][5:40, 6:] = -1  # empty slots
    frequency = W.zipf_frequencies(q, 1.0)
    config = _config(offline_metric=metric)
    for cells in (1, 17 * 7, 1 << 18):
        monkeypatch.setattr(W, "_CHUNK_CELLS", cells)
        world = W._finish(config, labels, rankings, frequency, tuple(map(str, range(q))), 4, {})
        ref = _dense_offline(metric, labels, rankings, frequency)
        assert world.offline.per_query["A"].tobytes() == ref["A"].tobytes()


# --- TREC collections -------------------------------------------------------------------------


def _former_trec(config):
    """The former ``_trec`` (reference): every run read first and ranked twice, at the depth and
    in full; returns labels, rankings, scores, judged grades and notes."""
    from onlineeval.io import ranked_doc_lists, read_qrels, read_run

    coll = config.collection
    qrels = read_qrels(coll.qrels)
    runs = {name: read_run(coll.runs[name]) for name in config.ranker_names()}
    judged_queries = list(dict.fromkeys(qrels["query"].astype(str)))
    qindex = {qid: i for i, qid in enumerate(judged_queries)}
    depth = config.rankers.depth
    docs = [{} for _ in judged_queries]
    grades = [[] for _ in judged_queries]
    for qid, doc, grade in qrels[["query", "doc", "grade"]].itertuples(index=False):
        i = qindex[str(qid)]
        docs[i].setdefault(str(doc), len(docs[i]))
        grades[i].append(max(int(grade), 0))
    n_judged = [len(g) for g in grades]
    ranked_docs = {}
    notes = {"collection": "trec", "qrels": str(coll.qrels), "ties": coll.ties}
    for name, run in runs.items():
        per_query = {str(k): [str(d) for d in v] for k, v in ranked_doc_lists(run, coll.ties, qrels, depth).items()}
        in_run = set(per_query)
        notes[f"queries_only_in_run_{name}"] = len(in_run - set(qindex))
        notes[f"queries_missing_from_run_{name}"] = len(set(qindex) - in_run)
        ranked_docs[name] = [list(per_query.get(qid, [])) for qid in judged_queries]
        notes[f"queries_short_in_run_{name}"] = sum(  # (a note added later: the same count, written out here)
            1 for qid in judged_queries if qid in in_run and len(per_query[qid]) < depth)
        unjudged = shown = 0
        for i, lst in enumerate(ranked_docs[name]):
            for doc in lst:
                shown += 1
                if doc not in docs[i]:
                    docs[i][doc] = len(docs[i])
                    unjudged += 1
        notes[f"unjudged_shown_{name}"] = unjudged
        notes[f"shown_{name}"] = shown
    q, m = len(judged_queries), max(len(d) for d in docs)
    labels = np.full((q, m), -1, dtype=np.int8)
    for i in range(q):
        labels[i, : n_judged[i]] = grades[i]
        labels[i, n_judged[i] : len(docs[i])] = 0
    rankings = {}
    for name, lists in ranked_docs.items():
        mat = np.full((q, depth), -1, dtype=np.int32)
        for i, lst in enumerate(lists):
            mat[i, : len(lst)] = [docs[i][d] for d in lst]
        rankings[name] = mat
    scores = {}
    for name, run in runs.items():
        full = {str(k): v for k, v in ranked_doc_lists(run, coll.ties, qrels, None).items()}
        sc = np.full((q, m), -np.inf, dtype=np.float32)
        for i, qid in enumerate(judged_queries):
            for rank, doc in enumerate(full.get(qid, ())):
                j = docs[i].get(str(doc))
                if j is not None:
                    sc[i, j] = -float(rank)
        scores[name] = sc
    judged = np.where(np.arange(m)[None, :] < np.asarray(n_judged)[:, None], labels, -1)
    return labels, rankings, scores, judged, notes, tuple(judged_queries)


def _write_trec(tmp_path, seed=3):
    """Qrels and two runs: score ties (rounded scores), unjudged retrieved documents, negative
    grades, queries judged but not retrieved and retrieved but not judged, and grade scales that
    differ between queries (ERR's top grade is the collection's)."""
    rng = np.random.default_rng(seed)
    with open(tmp_path / "qrels", "w") as fh:
        for q in range(40):
            top = 1 if q < 20 else 3
            for d in rng.choice(60, size=int(rng.integers(1, 25)), replace=False):
                fh.write(f"q{q} 0 d{d} {int(rng.integers(-1, top + 1))}\n")
    for name, missing in (("A", 5), ("B", 7)):
        with open(tmp_path / f"run{name}", "w") as fh:
            for q in [*range(40), 41, 42]:
                if q % missing == 0:
                    continue
                n = int(rng.integers(1, 40))
                for r, d in enumerate(rng.choice(80, size=n, replace=False)):
                    fh.write(f"q{q} Q0 d{d} {r + 1} {round(float(rng.standard_normal()), 1)} {name}\n")


@pytest.mark.parametrize("ties", ["docno_desc", "input_order", "pessimistic", "optimistic"])
@pytest.mark.parametrize("metric", ["ERR@10", "nDCG@5"])
def test_trec_world_equals_the_former_set_up(tmp_path, monkeypatch, ties, metric):
    _write_trec(tmp_path)
    config = load_config(REPO / "configs" / "ab.yaml", {
        "collection": {"type": "trec", "qrels": str(tmp_path / "qrels"), "ties": ties,
                       "runs": {"A": str(tmp_path / "runA"), "B": str(tmp_path / "runB")}},
        "offline_metric": metric, "rankers": {"depth": 10}})
    labels, rankings, scores, judged, notes, query_ids = _former_trec(config)
    assert len(np.unique(judged.max(axis=1))) > 2  # grade scales differ between queries
    for cells in (1, 90, 1 << 18):
        monkeypatch.setattr(W, "_CHUNK_CELLS", cells)
        world = W.build_world(config, world_seed(config.seed))
        assert world.query_ids == query_ids and world.notes == notes
        assert world.labels.dtype == np.int8 and np.array_equal(world.labels, labels)
        assert sorted(world.rankings) == sorted(world.scores) == ["A", "B"]
        for name in rankings:
            assert np.array_equal(world.rankings[name], rankings[name])
            assert world.scores[name].dtype == np.float32
            assert world.scores[name].tobytes() == scores[name].tobytes()
        ref = _dense_offline(metric, labels, rankings, world.frequency, judged)
        for name in ref:
            assert world.offline.per_query[name].tobytes() == ref[name].tobytes()
