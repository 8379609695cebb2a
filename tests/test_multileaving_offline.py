"""Review 12, F3: a multileaving run's summary stores every ranker's offline value and gain over the baseline
(summary.multileaving.offline; the other rankers' values also under summary.offline.others), and the terminal and
report.html show them next to the online values and the pairs. On a small real run every value is checked against
two independent computations from the world's labels and the rankers' shown lists: nDCG@5 written out here in NumPy
and onlineeval.metrics.evaluate_run on qrels and runs built from them. A summary written before these keys still
renders (without them)."""

from __future__ import annotations

import copy
import dataclasses
import html
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from onlineeval.conventions import Conventions
from onlineeval.metrics import evaluate_run
from simulations.report_numbers import percent_text, value_text

K = 5
RANKERS = ("A", "B", "C", "D")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from simulations import simulate
    from simulations.config import config_from_mapping

    folder = tmp_path_factory.mktemp("multileaving")
    result = simulate(config_from_mapping({
        "seed": 11, "replicates": 2, "workers": 1, "collection": {"n_queries": 150, "candidates": 12},
        "rankers": {"depth": K, "A": {"noise": 1.0}, "B": {"noise": 0.9},
                    "others": {"C": {"noise": 0.6}, "D": {"noise": 1.3}}},
        "offline_metric": f"nDCG@{K}", "users": {"population": 800},
        "traffic": {"days": 2, "queries_per_day": 600, "batch_hours": 24},
        "designs": [{"name": "tdm", "type": "interleaving", "method": "team_draft_multileave",
                     "rankers": list(RANKERS)},
                    {"name": "pm", "type": "interleaving", "method": "probabilistic_multileave",
                     "rankers": list(RANKERS)}],
        "analysis": {"aa": False, "truth_impressions": 10_000}}), output=folder)
    return result, folder


def _numpy_ndcg(labels: np.ndarray, ranking: np.ndarray) -> np.ndarray:
    """nDCG@K per query, exponential gain 2^g - 1, log2(rank + 1) discount, the ideal list from every judged grade
    of the query (labels >= 0), 0 for a query without a relevant document."""
    out = np.zeros(labels.shape[0])
    disc = 1.0 / np.log2(np.arange(2, K + 2))
    for q in range(labels.shape[0]):
        docs = ranking[q][ranking[q] >= 0][:K]
        g = labels[q, docs].astype(float)
        dcg = float(((2.0 ** np.maximum(g, 0) - 1) * disc[:g.size]).sum())
        judged = np.sort(labels[q][labels[q] >= 0].astype(float))[::-1][:K]
        ideal = float(((2.0 ** judged - 1) * disc[:judged.size]).sum())
        out[q] = dcg / ideal if ideal > 0 else 0.0
    return out


def _evaluate_run_ndcg(labels: np.ndarray, ranking: np.ndarray) -> np.ndarray:
    """nDCG@K per query by onlineeval.metrics.evaluate_run on qrels (every judged candidate) and a run (the shown
    list, scores falling with the rank); queries without a relevant document score 0 (empty='zero')."""
    qrels = pd.DataFrame([(f"q{q}", f"d{d}", int(g)) for q in range(labels.shape[0])
                          for d, g in enumerate(labels[q]) if g >= 0], columns=["query", "doc", "grade"])
    run = pd.DataFrame([(f"q{q}", f"d{d}", float(K - r)) for q in range(ranking.shape[0])
                        for r, d in enumerate(ranking[q]) if d >= 0], columns=["query", "doc", "score"])
    ev = evaluate_run(qrels, run, f"nDCG@{K}", Conventions(empty="zero"))
    (metric,) = ev.values
    by_query = dict(zip(ev.queries, ev.values[metric]))
    return np.array([by_query[f"q{q}"] for q in range(labels.shape[0])])


def test_every_rankers_offline_value_is_the_metric_on_its_lists(run: Any) -> None:
    result, _ = run
    world, s = result.world, result.summary
    off = s["multileaving"]["offline"]
    freq = np.asarray(world.frequency, dtype=float)
    assert freq.sum() == pytest.approx(1.0, abs=1e-12)
    assert off["metric"] == f"nDCG@{K}" and off["baseline"] == "A" and list(off["rankers"]) == list(RANKERS)
    assert {k: off["conventions"][k] for k in ("metric", "gain", "cutoff", "depth")} == {
        "metric": f"nDCG@{K}", "gain": "exponential", "cutoff": K, "depth": K}
    assert off["conventions"]["text"].startswith("gain 2^g - 1 (exponential") and f"cut-off {K}" in \
        off["conventions"]["text"]
    mine = {r: _numpy_ndcg(world.labels, world.rankings[r]) for r in RANKERS}
    for r in RANKERS:
        np.testing.assert_allclose(_evaluate_run_ndcg(world.labels, world.rankings[r]), mine[r], rtol=0, atol=1e-12)
    w = {r: float(freq @ mine[r]) for r in RANKERS}
    u = {r: float(mine[r].mean()) for r in RANKERS}
    assert len(set(np.round(list(w.values()), 6))) == 4  # four different rankers: a mix-up cannot pass
    for r in RANKERS:
        v = off["rankers"][r]
        assert v["weighted"] == pytest.approx(w[r], abs=1e-12) and v["uniform"] == pytest.approx(u[r], abs=1e-12)
        assert v["gain_weighted"] == pytest.approx(w[r] - w["A"], abs=1e-12)
        assert v["gain_uniform"] == pytest.approx(u[r] - u["A"], abs=1e-12)
        assert v["relative_gain_weighted"] == pytest.approx((w[r] - w["A"]) / w["A"], rel=1e-10, abs=1e-14)
    # A and B as the Offline line has them; the others also under offline.others
    assert s["offline"]["A"]["weighted"] == pytest.approx(w["A"], abs=1e-12)
    assert s["offline"]["B"]["uniform"] == pytest.approx(u["B"], abs=1e-12)
    assert set(s["offline"]["others"]) == {"C", "D"}
    for r in ("C", "D"):
        assert s["offline"]["others"][r] == pytest.approx({"weighted": w[r], "uniform": u[r]}, abs=1e-12)
    assert off["order"] == sorted(RANKERS, key=lambda r: -w[r])
    # every pair of either design: X's value minus Y's, and whether its sign is the exact online difference's
    online = {r: s["multileaving"]["online_values"][r]["reciprocal_rank"] for r in RANKERS}
    pairs = [f"delta_{x}_vs_{y}" for i, y in enumerate(RANKERS) for x in RANKERS[i + 1:]]
    assert sorted(off["pairs"]) == sorted(pairs)
    for p in pairs:
        x, y = p[len("delta_"):].split("_vs_")
        v = off["pairs"][p]
        assert v["weighted"] == pytest.approx(w[x] - w[y], abs=1e-12)
        assert v["uniform"] == pytest.approx(u[x] - u[y], abs=1e-12)
        assert v["relative_weighted"] == pytest.approx((w[x] - w[y]) / w[y], rel=1e-10, abs=1e-14)
        assert w[x] != w[y] and online[x] != online[y]  # no tie here (test_an_offline_tie_is_no_opposite_sign)
        same = math.copysign(1, w[x] - w[y]) == math.copysign(1, online[x] - online[y])
        assert v["same_sign_online"] is same and v["signs"] == ("same" if same else "opposite")


def test_the_terminal_shows_them_under_the_online_values(run: Any) -> None:
    from simulations.report import terminal_summary

    result, _ = run
    s = result.summary
    off, ml = s["multileaving"]["offline"], s["multileaving"]
    lines = terminal_summary(result).splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Multileaving: the rankers' exact online"))
    ranker_line = lines[at + 1]
    assert ranker_line.startswith(f"  offline nDCG@{K} of the same rankers (gain 2^g - 1")
    values = ", ".join(f"{r} {value_text(off['rankers'][r]['weighted'])}" for r in RANKERS)
    gains = ", ".join(f"{r} {value_text(off['rankers'][r]['gain_weighted'], True)} "
                      f"({percent_text(off['rankers'][r]['relative_gain_weighted'])})" for r in RANKERS[1:])
    assert f"frequency-weighted): {values} (from A: {gains}; uniform over queries from A: " in ranker_line
    assert ranker_line.endswith(" (the online order)" if off["order"] == ml["order"]
                                else f" (online: {' > '.join(ml['order'])})")
    assert f"-> {' > '.join(off['order'])}" in ranker_line
    assert lines[at + 2].startswith("  offline gain against online outcome by pair")
    for i, (p, v) in enumerate(off["pairs"].items()):
        row = lines[at + 3 + i].split()
        exact = ml["designs"]["tdm"]["pairs"][p]["exact_difference"]
        assert row[:3] == [p, "offline", value_text(v["weighted"], True)]
        assert row[5] == value_text(exact, True)
        assert row[6:10] == ["tdm", value_text(ml["designs"]["tdm"]["pairs"][p]["own_truth"], True),
                             "pm", value_text(ml["designs"]["pm"]["pairs"][p]["own_truth"], True)]
        assert (row[-1] == "!") == (v["signs"] == "opposite")
    assert lines[at + 3 + len(off["pairs"])].startswith("  pairwise error rate by day")


def _page_text(folder: Path) -> str:
    from simulations.html_report import simulate_report

    return html.unescape(re.sub(r"<[^>]+>", "|", simulate_report(folder)))


def test_the_page_shows_them_and_an_old_summary_still_renders(run: Any, tmp_path: Path) -> None:
    from simulations.report import terminal_summary
    from simulations.report_multileaving import multileaving_block
    from simulations.report_ratios import multileaving_lines

    result, folder = run
    s = result.summary
    off, ml = s["multileaving"]["offline"], s["multileaving"]
    page = (folder / "report.html").read_text(encoding="utf-8")
    ids = re.findall(r'<section id="([a-z-]+)"', page)
    assert ids[:2] == ["answer", "multileaving"]
    section = page[page.index('<section id="multileaving"'):]
    section = html.unescape(section[:section.index("</section>")])
    for r in RANKERS:
        v = off["rankers"][r]
        cells = [r, value_text(v["weighted"]), value_text(v["gain_weighted"], True),
                 percent_text(v["relative_gain_weighted"]), value_text(v["uniform"]),
                 value_text(v["gain_uniform"], True), value_text(ml["online_values"][r]["reciprocal_rank"])]
        assert "|".join(cells) in re.sub(r"(<[^>]+>)+", "|", section), r
    for p, v in off["pairs"].items():
        cells = [p, value_text(v["weighted"], True), percent_text(v["relative_weighted"]),
                 value_text(v["uniform"], True), value_text(ml["designs"]["pm"]["pairs"][p]["exact_difference"], True),
                 value_text(ml["designs"]["tdm"]["pairs"][p]["own_truth"], True),
                 value_text(ml["designs"]["pm"]["pairs"][p]["own_truth"], True),
                 v["signs"]]
        assert "|".join(cells) in re.sub(r"(<[^>]+>)+", "|", section), p
    assert f"cut-off {K}" in section and "gain 2^g - 1" in section
    # a summary from before multileaving.offline / offline.others: no offline lines, no section, no error
    old = copy.deepcopy(s)
    del old["multileaving"]["offline"], old["offline"]["others"]
    assert multileaving_block(old) == multileaving_lines(old) != []
    text = terminal_summary(dataclasses.replace(result, summary=old))
    assert "offline gain against online outcome" not in text and "Multileaving: the rankers' exact" in text
    for name in ("config.effective.yaml", "curves.csv"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    stored = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert stored["multileaving"]["offline"]["rankers"]["C"]["weighted"] == pytest.approx(
        off["rankers"]["C"]["weighted"], abs=1e-15)
    del stored["multileaving"]["offline"], stored["offline"]["others"]
    (tmp_path / "summary.json").write_text(json.dumps(stored), encoding="utf-8")
    old_page = _page_text(tmp_path)
    assert "Multileaving: offline gain against online outcome" not in old_page
    assert "Multileaving: the rankers' exact online" in old_page
    assert "Multileaving: offline gain against online outcome" in _page_text(folder)


def test_an_offline_tie_is_no_opposite_sign(run: Any) -> None:
    """Review 16, F6: rankers equal down to the offline cut-off (offline difference exactly 0) may differ online;
    the old np.sign comparison marked that pair '!' / 'opposite'. Now 'offline tie' (and 'online tie' the reverse),
    same_sign_online None, in the summary, the terminal line and report.html; an old summary's pair (same_sign_online
    False, offline 0) is read the same way."""
    from types import SimpleNamespace

    from simulations.analysis import multileaving_offline
    from simulations.analysis_multileaving import sign_agreement
    from simulations.html_report.multileaving import multileaving_section
    from simulations.report import terminal_summary

    world = SimpleNamespace(depth=K, offline=SimpleNamespace(
        metric=f"nDCG@{K}", weighted={"A": 0.8, "B": 0.8, "C": 0.7, "D": 0.9},
        uniform={"A": 0.7, "B": 0.7, "C": 0.6, "D": 0.8}))
    online = {"A": 0.30, "B": 0.31, "C": 0.30, "D": 0.20}
    pairs = ["delta_B_vs_A", "delta_C_vs_A", "delta_C_vs_B", "delta_D_vs_A"]
    got = multileaving_offline(world, list(online), pairs, online)["pairs"]  # type: ignore[arg-type]
    assert {p: (v["weighted"], v["signs"], v["same_sign_online"]) for p, v in got.items()} == {
        "delta_B_vs_A": (0.0, "offline tie", None), "delta_C_vs_A": (pytest.approx(-0.1), "online tie", None),
        "delta_C_vs_B": (pytest.approx(-0.1), "same", True), "delta_D_vs_A": (pytest.approx(0.1), "opposite", False)}
    assert sign_agreement(0.0, 0.0) == "same" and sign_agreement(-0.0, 0.0) == "same"
    assert sign_agreement(0.0, -0.01) == "offline tie" and sign_agreement(-2.0, 1e-300) == "opposite"
    # rendered: one pair of the real run made an offline tie, another opposite
    result, _ = run
    s = copy.deepcopy(result.summary)
    ml = s["multileaving"]
    tie, opp = list(ml["offline"]["pairs"])[:2]
    exact = {p: ml["designs"]["tdm"]["pairs"][p]["exact_difference"] for p in (tie, opp)}
    assert exact[tie] != 0 and exact[opp] != 0
    ml["offline"]["pairs"][tie].update(weighted=0.0, signs="offline tie", same_sign_online=None)
    ml["offline"]["pairs"][opp].update(weighted=-exact[opp], signs="opposite", same_sign_online=False)
    old = copy.deepcopy(s)  # as the old analysis wrote it: no 'signs', the tie 'False'
    for p, v in old["multileaving"]["offline"]["pairs"].items():
        del v["signs"]
        v["same_sign_online"] = v["same_sign_online"] is not False and p != tie
    for summary in (s, old):
        lines = terminal_summary(dataclasses.replace(result, summary=summary)).splitlines()
        row = {ln.split()[0]: ln for ln in lines if ln.startswith("    delta_")}
        assert row[tie].endswith(" offline tie") and "!" not in row[tie]
        assert row[opp].endswith(" !")
        page = re.sub(r"(<[^>]+>)+", "|", html.unescape(str(multileaving_section(summary))))
        table = page[page.index("Offline gain against online outcome"):]
        cells = {c.split("|")[0]: c.rstrip("|").split("|") for c in table.split("|delta_")[1:]}
        assert cells[tie[len("delta_"):]][-1] == "offline tie" and cells[opp[len("delta_"):]][-1] == "opposite"
        assert [c[-1] for c in cells.values()].count("offline tie") == 1
        assert "'offline tie' ('online tie'): that difference is exactly 0" in page
