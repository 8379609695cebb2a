"""The xgboost preset reproduces XGBoost's own ndcg@1/3/5 (XGBoost used only here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onlineeval.conventions import preset
from onlineeval.io import read_letor
from onlineeval.metrics.evaluate import evaluate_run

import xgboost as xgb


@pytest.mark.parametrize("split", ["train", "test"])
def test_ndcg_matches_xgboost(shared_data: Path, split: str) -> None:
    d = shared_data / "lambdarank"
    mats = {}
    for name in ("train", "test"):
        m = xgb.DMatrix(f"{d / f'rank.{name}'}?format=libsvm")
        m.set_group(np.loadtxt(d / f"rank.{name}.query", dtype=int))
        mats[name] = m
    log: dict = {}
    params = {
        "objective": "rank:ndcg",
        "eval_metric": ["ndcg@1", "ndcg@3", "ndcg@5"],
        "max_depth": 3,
        "eta": 0.3,
        "nthread": 1,
        "seed": 1,
    }
    booster = xgb.train(params, mats["train"], num_boost_round=6,
                        evals=[(mats["train"], "train"), (mats["test"], "test")],
                        evals_result=log, verbose_eval=False)
    pred = booster.predict(mats[split], output_margin=True).astype(np.float64)
    data = read_letor(d / f"rank.{split}", scores=pred, query_file=d / f"rank.{split}.query")
    ev = evaluate_run(data.qrels, data.run, ["nDCG@1", "nDCG@3", "nDCG@5"], preset("xgboost"))
    if split == "train":  # three all-zero queries count 1, as in XGBoost's default ndcg@k
        assert ev.counts.scored_empty == 3
    for k in (1, 3, 5):
        assert ev.mean(f"nDCG@{k}") == pytest.approx(log[split][f"ndcg@{k}"][-1], abs=1e-9), (split, k)
