"""`onlineeval estimate` (review 11): an estimate whose delta-method standard error is 0 or whose weight sits in
fewer than two clusters has no interval (F4: it was printed as '0.0000 se 0.0000 [0.0000, 0.0000]'); the
Plackett-Luce pair-marginal limit names the log file, the line of the query's first logger and the key's place
(F6)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from estimate_cli_world import (  # noqa: F401  (world: the module-scoped fixture)
    invoke,
    json_out,
    world,
)
from onlineeval.estimators import DeterministicTarget, LoggedData, get_estimator

WARN = "standard error and intervals undefined"


def _log(path: Path, n: int, clicks: bool, logger: dict | None = None) -> Path:
    """``n`` impressions of query q0 over candidates a..f, three slots, logged uniformly at random (list
    propensity 1/120); the first shows the target's list a, b, c."""
    rng = np.random.default_rng(4)
    docs = list("abcdef")
    lines = []
    for i in range(n):
        shown = ["a", "b", "c"] if i == 0 else [docs[j] for j in rng.permutation(6)[:3]]
        if i > 0 and shown == ["a", "b", "c"]:
            shown = ["b", "a", "c"]
        rec = {"query": "q0", "user": f"u{i}", "shown": shown, "clicks": [shown[0]] if clicks and i % 2 else []}
        if logger is None:
            rec["propensities"] = {"list": 1 / 120, "prefix": [1 / 6, 1 / 30, 1 / 120], "item": [1 / 6] * 3}
        else:
            rec["logger"] = {**logger, "scores": {d: float(6 - j) for j, d in enumerate(docs)}}
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_zero_width_interval_is_undefined(tmp_path: Path) -> None:
    log = _log(tmp_path / "log.jsonl", 40, clicks=True)
    run = tmp_path / "T.run"
    run.write_text("q0 Q0 a 1 3 T\nq0 Q0 b 2 2 T\nq0 Q0 c 3 1 T\n", encoding="utf-8")
    out = json_out("--log", str(log), "--target", str(run), "--estimator", "ips,rips,iips", "--bootstrap", "200")
    rows = {r["estimator"]: r for r in out["results"]}
    # ips: the one matched impression (line 1) had no click: every term 0, the delta method's se 0
    ips = rows["ips"]
    assert ips["estimate"] == 0.0
    assert ips["se"] is None and ips["ci_low"] is None and ips["ci_high"] is None
    assert ips["boot_low"] is None and ips["boot_high"] is None
    assert any(WARN in w for w in ips["warnings"])
    # iips: many impressions carry item weight and rewards vary: an ordinary interval, no such warning
    assert rows["iips"]["se"] > 0 and not any(WARN in w for w in rows["iips"]["warnings"])
    table = invoke("--log", str(log), "--target", str(run), "--estimator", "ips")
    assert table.exit_code == 0 and "[0.0000, 0.0000]" not in table.stdout and WARN in table.stdout


def test_library_one_weighted_cluster_has_no_se() -> None:
    """One cluster holds all the weight: the delta method's se over the others' zeros is not a standard error."""
    shown = np.array([[0, 1], [1, 0], [1, 0], [1, 0]])
    data = LoggedData(np.zeros(4, dtype=np.int64), shown, np.array([[1, 0], [0, 1], [1, 0], [0, 0]], bool),
                      p_list=np.full(4, 0.5), user=np.array([0, 1, 2, 2]))
    res = get_estimator("ips").estimate(data, DeterministicTarget(np.array([[0, 1]]), "T"), "clicks_per_query")
    assert res.value == 2.0 * 1 / 4 and math.isnan(res.se) and math.isnan(res.ci_low)
    assert any(WARN in w for w in res.warnings())
    # two weighted clusters: an ordinary se
    data2 = LoggedData(np.zeros(4, dtype=np.int64), np.array([[0, 1], [0, 1], [1, 0], [1, 0]]),
                       np.array([[1, 0], [0, 0], [1, 0], [0, 0]], bool), p_list=np.full(4, 0.5),
                       user=np.array([0, 1, 2, 2]))
    res2 = get_estimator("ips").estimate(data2, DeterministicTarget(np.array([[0, 1]]), "T"), "clicks_per_query")
    assert res2.se > 0 and not any(WARN in w for w in res2.warnings())


def test_pair_max_states_error_names_file_line_and_key(tmp_path: Path) -> None:
    # 6 candidates, 3 slots: 1 + 6 + 15 = 22 DP states > 5
    log = _log(tmp_path / "logl.jsonl", 30, clicks=True,
               logger={"policy": "plackett_luce", "temperature": 1.0, "pair_max_states": 5})
    run = tmp_path / "T.run"
    run.write_text("q0 Q0 a 1 3 T\nq0 Q0 b 2 2 T\nq0 Q0 c 3 1 T\n", encoding="utf-8")
    # the pseudoinverse's row is undefined with the located message; the other estimators still report
    out = json_out("--log", str(log), "--target", str(run), "--estimator", "pseudoinverse,ips")
    rows = {r["estimator"]: r for r in out["results"]}
    assert rows["ips"]["error"] is None
    err = rows["pseudoinverse"]["error"]
    for needle in (f"{log}:1,", "query 'q0' has 6 candidates", "22 states", "'pair_max_states' (now 5)",
                   '"logger" object'):
        assert needle in err, (needle, err)
    assert "query 0 has" not in err


# ------------------------------------------------------------------ F3: the bias advice follows adaptive IPS's choice
def _bias_warning(row: dict, name: str) -> str:
    hits = [w for w in row["warnings"] if w.startswith(name) and "biased for" in w]
    assert len(hits) == 1, row["warnings"]
    return hits[0]


def test_bias_advice_follows_adaptive_ips_choice(world: dict) -> None:
    args = ["--log", str(world["log"]), "--target", str(world["B"]), "--metric", "clicks_per_query"]
    # adaptive IPS fixed to the independent behaviour: its estimate is iips's, warned as iips's, and iips's advice
    # does not name it
    out = json_out(*args, "--estimator", "iips,adaptive_ips", "--option", "adaptive_ips.behaviours=independent")
    rows = {r["estimator"]: r for r in out["results"]}
    assert rows["adaptive_ips"]["estimate"] == rows["iips"]["estimate"]
    own = _bias_warning(rows["adaptive_ips"], "adaptive_ips is fixed to the independent behaviour (iips's weights) "
                        "for every impression by the user's setting (behaviours=independent), not chosen on this log")
    assert "when clicks follow cascade, dcm" in own and "would not take independent" not in own
    advice = _bias_warning(rows["iips"], "iips is biased").split("run on this log: ")[1]
    assert "adaptive_ips" not in advice and "rips" in advice
    # fixed to cascade (RIPS's weights, unbiased under top-down clicks): named, and no warning of its own
    out = json_out(*args, "--estimator", "iips,adaptive_ips", "--option", "adaptive_ips.behaviours=cascade")
    rows = {r["estimator"]: r for r in out["results"]}
    assert not any("biased for" in w for w in rows["adaptive_ips"]["warnings"])
    assert "adaptive_ips, " in _bias_warning(rows["iips"], "iips is biased").split("run on this log: ")[1] + ", "
    # not run: named with the condition
    out = json_out(*args, "--estimator", "iips")
    assert "adaptive_ips (if the behaviours it chooses cover each user type)" in _bias_warning(out["results"][0],
                                                                                             "iips is biased")


def test_a_fixed_adaptive_behaviour_is_worded_as_the_users_setting(world: dict) -> None:
    """Review 13, F2: with --option adaptive_ips.behaviours=independent on a first-click metric, the warning and the
    assumptions line say the behaviour is the user's setting (no 'chose ... on this log', no 'data-driven
    choice'), and the warning adds that the data-driven choice would not take independent; without the option the
    assumptions line keeps the data-driven choice and no such warning is given."""
    args = ["--log", str(world["log"]), "--target", str(world["B"]), "--metric", "abandonment",
            "--estimator", "iips,rips,adaptive_ips"]
    out = json_out(*args, "--option", "adaptive_ips.behaviours=independent")
    rows = {r["estimator"]: r for r in out["results"]}
    own = _bias_warning(rows["adaptive_ips"], "adaptive_ips is fixed to the independent behaviour")
    assert "(behaviours=independent), not chosen on this log" in own and "adaptive_ips chose" not in own
    assert own.endswith("chooses among cascade and standard for a first-click metric and would not take independent")
    assumption = out["assumptions"]["adaptive_ips"]
    assert "data-driven choice" not in assumption and "fixed by the user: behaviours=independent" in assumption
    text = invoke(*args, "--option", "adaptive_ips.behaviours=independent")
    assert text.exit_code == 0, text.output
    assert "adaptive_ips chose" not in text.stdout and "data-driven choice: by estimated MSE" not in text.stdout
    assert "  adaptive_ips: each user type's behaviour is covered by the one the user fixed" in text.stdout
    free = json_out(*args)
    assert "data-driven choice: by estimated MSE per user type" in free["assumptions"]["adaptive_ips"]
    rows = {r["estimator"]: r for r in free["results"]}
    assert not any(w.startswith("adaptive_ips") and "biased for" in w for w in rows["adaptive_ips"]["warnings"])


DIFF_WARN = "standard error, interval and p-value undefined"


def _two_single_impression_targets(tmp_path: Path) -> tuple[Path, Path, Path]:
    """40 impressions of q0 (uniform logging of 3 of 6 candidates); target T's list a, b, c is shown once (line 1,
    clicked), baseline S's list d, e, f once (line 3, not clicked): each estimate rests on one user."""
    rng = np.random.default_rng(4)
    docs = list("abcdef")
    lines = []
    for i in range(40):
        shown = [docs[j] for j in rng.permutation(6)[:3]]
        while shown in (["a", "b", "c"], ["d", "e", "f"]):
            shown = [docs[j] for j in rng.permutation(6)[:3]]
        if i == 0:
            shown = ["a", "b", "c"]
        if i == 2:
            shown = ["d", "e", "f"]
        rec = {"query": "q0", "user": f"u{i}", "shown": shown, "clicks": [shown[0]] if i == 0 or i % 2 else [],
               "propensities": {"list": 1 / 120, "prefix": [1 / 6, 1 / 30, 1 / 120], "item": [1 / 6] * 3}}
        lines.append(json.dumps(rec))
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    t, s = tmp_path / "T.run", tmp_path / "S.run"
    t.write_text("q0 Q0 a 1 3 T\nq0 Q0 b 2 2 T\nq0 Q0 c 3 1 T\n", encoding="utf-8")
    s.write_text("q0 Q0 d 1 3 S\nq0 Q0 e 2 2 S\nq0 Q0 f 3 1 S\n", encoding="utf-8")
    return log, t, s


def test_a_difference_of_two_single_cluster_estimates_is_not_certain(tmp_path: Path) -> None:
    # SNIPS of T is 1 (its one matched impression was clicked), of S 0: the difference -1... was printed with
    # se 0.0000, interval [1.0000, 1.0000] and p 0 (influence values all 0), which a CI gate reads as significant;
    # whole-list IPS's se came from the two single values alone. Both undefined now, with a warning naming the sides.
    log, t, s = _two_single_impression_targets(tmp_path)
    out = json_out("--log", str(log), "--target", str(t), "--baseline", str(s), "--estimator", "snips,ips,iips",
                   "--bootstrap", "200")
    diffs = {d["estimator"]: d for d in out["differences"]}
    for name in ("snips", "ips"):
        d = diffs[name]
        assert d["estimate"] == (1.0 if name == "snips" else 120 / 40)
        assert d["se"] is None and d["pvalue"] is None and d["ci_low"] is None and d["boot_low"] is None, d
        assert any(w.startswith(f"{name} T - S: {DIFF_WARN}: the weights of T and S rest on fewer than two")
                   for w in d["warnings"])
    # item-level weights spread over many users: an ordinary difference
    assert diffs["iips"]["se"] > 0 and 0 < diffs["iips"]["pvalue"] <= 1
    assert not any(DIFF_WARN in w for w in diffs["iips"]["warnings"])
    table = invoke("--log", str(log), "--target", str(t), "--baseline", str(s), "--estimator", "snips")
    assert table.exit_code == 0 and DIFF_WARN in table.stdout
    row = next(ln for ln in table.stdout.splitlines() if ln.split()[:3] == ["snips", "T", "S"])
    assert row.split()[4:8] == ["-", "[-,", "-]", "-"]


def test_library_difference_with_zero_spread() -> None:
    from onlineeval.estimators.log_estimates import paired_difference

    # T's list [0, 1] matched on user 0 only (clicked), S's [1, 0] on users 1 and 2 (each clicked): T's side rests
    # on one cluster, so the difference has no standard error; when both sides spread over clusters it has one
    shown = np.array([[0, 1], [1, 0], [1, 0], [0, 1], [1, 0]])
    clicks = np.array([[1, 0], [1, 0], [0, 0], [0, 0], [1, 0]], bool)
    data = LoggedData(np.zeros(5, dtype=np.int64), shown, clicks, p_list=np.full(5, 0.5),
                      user=np.array([0, 1, 2, 3, 3]))
    t, s = DeterministicTarget(np.array([[0, 1]]), "T"), DeterministicTarget(np.array([[1, 0]]), "S")
    from onlineeval.estimators import get_reward

    reward = get_reward("clicks_per_query", 2)
    d = paired_difference(get_estimator("snips"), data, t, s, reward)
    assert d["unmeasured"] == [] and d["se"] > 0  # T on users 0 and 3, S on 1, 2 and 3
    one = LoggedData(np.zeros(5, dtype=np.int64), shown, clicks, p_list=np.full(5, 0.5),
                     user=np.array([0, 1, 2, 1, 1]))  # T's impressions: users 0 and 1; S's: 1, 2, 1
    assert paired_difference(get_estimator("snips"), one, t, s, reward)["unmeasured"] == []
    lone = LoggedData(np.zeros(5, dtype=np.int64), shown, clicks, p_list=np.full(5, 0.5),
                      user=np.array([0, 1, 2, 0, 1]))  # T's impressions both of user 0
    d = paired_difference(get_estimator("snips"), lone, t, s, reward)
    assert d["unmeasured"] == ["T"] and math.isnan(d["se"]) and math.isnan(d["pvalue"]) and math.isnan(d["ci_low"])
