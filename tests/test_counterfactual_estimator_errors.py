"""An estimator that cannot use a replicate's log stops `simulate` with the config key of the design's estimator and
the error it met. Before, a ConfigError raised inside the simulation (the pseudoinverse under a Plackett-Luce logger
beyond its ``pair_max_states``) reached the user as ``TypeError: ConfigError.__init__() missing 1 required
positional argument``: SimPy re-raises a process's exception as ``type(exc)(*exc.args)``, and ConfigError's args
were its rendered text alone. An InputError there (PBM-IPS whose examination the log does not identify) named
neither the design nor the estimator. Both now name the design's estimator by its key (the design's index, as every
config error)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_config_error_is_rebuilt_from_its_args_as_simpy_and_pickle_rebuild_it() -> None:
    exc = ConfigError(("designs", 2, "logger", "pair_max_states"), "must be at least 1", "cf.yaml")
    for again in (type(exc)(*exc.args), pickle.loads(pickle.dumps(exc))):
        assert isinstance(again, ConfigError)
        assert str(again) == str(exc) == "cf.yaml: designs[2].logger.pair_max_states: must be at least 1"
        assert (again.key_path, again.message, again.source) == (exc.key_path, exc.message, exc.source)


def _run(tmp: Path, logger: dict[str, Any], estimators: list[Any], queries_per_day: int) -> Any:
    mapping = yaml.safe_load((REPO / "configs" / "counterfactual.yaml").read_text(encoding="utf-8"))
    mapping.update(replicates=1, workers=1, output=str(tmp / "out"))
    mapping["traffic"].update(days=1, queries_per_day=queries_per_day)
    cf = next(d for d in mapping["designs"] if d["type"] == "counterfactual")
    cf.pop("bootstrap", None)
    cf.update(logger=logger, estimators=estimators)
    mapping["designs"] = [{"name": "ab", "type": "ab", "metric": "clicks_per_query"}, cf]  # cf is designs[1]
    mapping["analysis"].update(assumption_sweep=None, bias_check=0, aa=False, truth_impressions=20000)
    (tmp / "cf.yaml").write_text(yaml.safe_dump(mapping), encoding="utf-8")
    return CliRunner().invoke(app, ["simulate", "--config", str(tmp / "cf.yaml"), "--quiet"])


def test_a_logger_error_met_by_an_estimator_names_the_estimator_and_the_loggers_key(tmp_path: Path) -> None:
    res = _run(tmp_path, {"policy": "plackett_luce", "ranker": "A", "temperature": 1.0, "pair_max_states": 100},
               ["ips", "pseudoinverse"], 200)
    assert res.exit_code == 2, res.output
    assert not isinstance(res.exception, TypeError) and "Traceback" not in res.output
    assert "designs[1].estimators[1]: pseudoinverse cannot estimate from a batch of a replicate's log" \
        in res.output
    assert "pair_max_states: Plackett-Luce pair marginals are exact only up to 100 DP states" in res.output


def test_an_estimator_that_cannot_use_the_whole_log_names_itself(tmp_path: Path) -> None:
    # 3 queries of one day under an epsilon-greedy logger: no document is seen at two slots, so PBM-IPS cannot
    # estimate the examination probabilities (it fits on the whole log on the last day)
    res = _run(tmp_path, {"policy": "epsilon_greedy", "ranker": "A", "epsilon": 0.2, "n": 20},
               ["ips", "pbm_ips"], 3)
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "designs[1].estimators[1]: pbm_ips cannot estimate from a replicate's whole log (days 1-1" \
        in text
    assert "identify the examination probabilities of this log" in text


@pytest.mark.parametrize("compiled", [True, False])
def test_an_early_refit_on_a_log_it_cannot_use_is_undefined_that_day(tmp_path: Path, monkeypatch: Any,
                                                                     compiled: bool) -> None:
    # 60 queries a day, refit every day: a day-1 log of about 50 impressions often holds no intervention that
    # identifies PBM-IPS's examination probabilities. That day's estimate is undefined in those replicates (as the
    # days between refits are) and the run goes on; later, larger logs serve. Before, the first such day stopped the
    # run. On the last day such a log still stops it (the test above).
    import pandas as pd

    from simulations import stat_kernels

    monkeypatch.setattr(stat_kernels, "COMPILED", compiled)  # the compiled checkpoint, or the design's NumPy one
    mapping = yaml.safe_load((REPO / "configs" / "counterfactual.yaml").read_text(encoding="utf-8"))
    mapping.update(replicates=12, workers=1, output=str(tmp_path / "out"))
    mapping["traffic"].update(days=4, queries_per_day=60)
    cf = next(d for d in mapping["designs"] if d["type"] == "counterfactual")
    cf.pop("bootstrap", None)
    cf.update(estimators=["ips", "pbm_ips"], refit_days=1)
    mapping["designs"] = [cf]
    mapping["analysis"].update(assumption_sweep=None, bias_check=0, aa=False, truth_impressions=20000)
    (tmp_path / "cf.yaml").write_text(yaml.safe_dump(mapping), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", "--config", str(tmp_path / "cf.yaml"), "--quiet"])
    assert res.exit_code == 0, res.output
    rows = pd.read_csv(tmp_path / "out" / "replicates.csv")
    pbm = rows[(rows["metric"] == "pbm_ips") & ~rows["aa"]]
    defined = pbm.groupby("day")["estimate"].apply(lambda s: int(s.notna().sum()))
    assert defined.loc[1] < 12, defined  # some day-1 logs did not identify the examination
    assert defined.loc[4] == 12, defined  # the last day's whole logs all did
    ips = rows[(rows["metric"] == "ips") & ~rows["aa"]]
    assert ips["estimate"].notna().all()  # the other estimators are untouched
    assert "a refit on a log the estimator cannot use undefined" in " ".join(res.output.split())
