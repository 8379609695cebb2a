"""The lightgbm preset reproduces LightGBM's own NDCG@1/3/5 (LightGBM used only here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onlineeval.conventions import preset
from onlineeval.io import read_letor
from onlineeval.metrics.evaluate import evaluate_run

import lightgbm as lgb


@pytest.fixture(scope="module")
def booster_and_log(shared_data: Path):
    d = shared_data / "lambdarank"
    train = lgb.Dataset(str(d / "rank.train"), params={"verbosity": -1})
    train.set_group(np.loadtxt(d / "rank.train.query", dtype=int))
    valid = lgb.Dataset(str(d / "rank.test"), reference=train, params={"verbosity": -1})
    valid.set_group(np.loadtxt(d / "rank.test.query", dtype=int))
    log: dict = {}
    params = {
        "objective": "lambdarank",
        "metric": "ndcg",
        "ndcg_eval_at": [1, 3, 5],
        "num_leaves": 7,
        "learning_rate": 0.1,
        "min_data_in_leaf": 50,
        "verbosity": -1,
        "num_threads": 1,
        "seed": 1,
        "deterministic": True,
    }
    booster = lgb.train(
        params, train, num_boost_round=8, valid_sets=[train, valid], valid_names=["train", "test"],
        callbacks=[lgb.record_evaluation(log)],
    )
    return booster, log


@pytest.mark.parametrize("split", ["train", "test"])
def test_ndcg_matches_lightgbm(shared_data: Path, booster_and_log, split: str) -> None:
    booster, log = booster_and_log
    d = shared_data / "lambdarank"
    data_path = d / f"rank.{split}"
    pred = booster.predict(str(data_path))  # LightGBM reads the LibSVM file itself, in file order
    data = read_letor(data_path, scores=pred, query_file=d / f"rank.{split}.query")
    conv = preset("lightgbm")
    ev = evaluate_run(data.qrels, data.run, ["nDCG@1", "nDCG@3", "nDCG@5"], conv)
    for k in (1, 3, 5):
        ours = ev.mean(f"nDCG@{k}")
        theirs = log[split][f"ndcg@{k}"][-1]
        assert ours == pytest.approx(theirs, abs=1e-12), (split, k)
    if split == "train":
        # three training queries have only label 0: LightGBM scores them 1, so do we
        assert ev.counts.scored_empty == 3 and ev.counts.excluded_empty == 0
        excl = evaluate_run(data.qrels, data.run, ["nDCG@5"], conv.with_(empty="exclude"))
        assert excl.counts.counted == ev.counts.counted - 3
