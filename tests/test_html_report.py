"""The self-contained HTML reports (``report.html``) of a simulate run and of a sweep.

Without a browser: the page parses with :mod:`html.parser` with balanced tags, names no
external resource (every image a ``data:`` URI whose bytes are the results folder's PNG),
escapes what it reads, keeps the biased marks, and its answer table holds the numbers of
``summary.json`` (the independent reference: the run's own summary, formatted here again).

The same pages in a real browser (headless chromium: load errors, the first screen, the layout at 1400 and
800 CSS px): ``tests/test_html_layout.py``. The results folders are the ``sim`` and ``sweep`` fixtures
(``tests/conftest.py``, built once per run by ``tests/html_report_folders.py``).
"""

from __future__ import annotations

import base64
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from html_report_folders import SIM

from onlineeval.errors import InputError
from simulations.html_report import (
    REPORT_NAME,
    simulate_report,
    sweep_report,
    write_simulate_report,
    write_sweep_report,
)
from simulations.report import truth_world_cell


def caution_mark(e: dict[str, Any]) -> bool:
    """'~' on an entry, recomputed here from summary.json (review 12, F2, family-wise since 2efa60f): an unflagged
    null check whose null Delta's two-sided p-value (scipy, from its z) or null replicates' mean test's p-value is
    below 0.05 / (tests per pair x the run's null-checked pairs), two tests per pair when the mean test ran."""
    from scipy.stats import norm

    n = e.get("null") or {}
    if not n or n.get("biased") or n.get("biased_null_replicates"):
        return False
    mean_test = n.get("null_mean_test")
    level = 0.05 / ((2 if isinstance(mean_test, dict) else 1) * int(n.get("family_pairs") or 1))
    z, p_mean = n.get("z"), (mean_test or {}).get("pvalue")
    return (z is not None and 2 * norm.sf(z) < level) or (p_mean is not None and p_mean < level)


def test_report_is_written_by_default(sim: Path, sweep: Path) -> None:
    """simulate and sweep write report.html with their other results; writing it again from
    the folder gives the same page."""
    for folder, again in ((sim, simulate_report), (sweep, sweep_report)):
        assert (folder / REPORT_NAME).read_text(encoding="utf-8") == again(folder)
    for p in (sweep / "points").iterdir():
        assert (p / REPORT_NAME).read_text(encoding="utf-8") == simulate_report(p)


# ------------------------------------------------------------------ parsing helpers
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Page(HTMLParser):
    """Tags, attributes, ids, balance errors, section texts and table cells of a page."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.sections: list[str] = []
        self.section_text: dict[str, list[str]] = {}
        self.tables: dict[str, list[list[str]]] = {}
        self._section: str | None = None
        self._table: list[str] = []  # ids of open tables ("" for none)
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self.pre: list[str] = []
        self._in_pre = False
        self.feed(text)
        self.close()
        if self.stack:
            self.errors.append(f"unclosed at the end: {self.stack}")

    def handle_starttag(self, t: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((t, a))
        if t == "section":
            self._section = a.get("id") or ""
            self.sections.append(self._section)
            self.section_text[self._section] = []
        if t == "table":
            self._table.append(a.get("id") or "")
            self.tables.setdefault(a.get("id") or "", [])
        if t == "tr":
            self._row = []
        if t in ("td", "th"):
            self._cell = []
        if t == "pre":
            self._in_pre = True
            self.pre.append("")
        if t not in VOID:
            self.stack.append(t)

    def handle_startendtag(self, t: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((t, dict(attrs)))

    def handle_endtag(self, t: str) -> None:
        if t in VOID:
            return
        if not self.stack or self.stack[-1] != t:
            self.errors.append(f"</{t}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()
        if t in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        if t == "tr" and self._row is not None and self._table:
            self.tables[self._table[-1]].append(self._row)
            self._row = None
        if t == "table":
            self._table.pop()
        if t == "pre":
            self._in_pre = False
        if t == "section":
            self._section = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._section is not None:
            self.section_text[self._section].append(data)
        if self._in_pre:
            self.pre[-1] += data

    def text(self, section: str) -> str:
        return " ".join(" ".join(self.section_text.get(section, [])).split())


def parse(path: Path) -> Page:
    return Page(path.read_text(encoding="utf-8"))


def assert_self_contained(page: Page, folder: Path) -> int:
    """No external resource: images are data: PNGs equal to a PNG of ``folder`` (or, for a
    sweep, one of its points), links are in-page or relative to an existing file; no script,
    link, iframe, object, event handler or CSS url(). Returns the number of images."""
    raw = (folder / REPORT_NAME).read_text(encoding="utf-8")
    assert "url(" not in raw and "@import" not in raw
    pngs = {p.read_bytes() for p in folder.rglob("*.png")}
    images = 0
    for t, a in page.tags:
        assert t not in ("script", "link", "iframe", "object", "embed", "base"), f"<{t}> in a self-contained page"
        for k, v in a.items():
            v = v or ""
            assert not v.lower().startswith(("http:", "https:", "//", "ftp:")), f"external {k}={v[:80]}"
            assert not k.startswith("on"), f"event handler attribute {k}"
        if t == "img":
            src = a.get("src") or ""
            assert src.startswith("data:image/png;base64,"), src[:60]
            data = base64.b64decode(src.split(",", 1)[1], validate=True)
            assert data in pngs, "an embedded image is not one of the folder's plots"
            images += 1
        if t == "a":
            href = a.get("href") or ""
            assert href.startswith("#") or not (":" in href.split("/")[0]), href
            if not href.startswith("#"):
                assert (folder / href).is_file(), f"relative link {href} to a missing file"
            else:
                assert href[1:] in page.sections, f"link to a missing section {href}"
    return images


# ------------------------------------------------------------------ structure, no browser
def test_simulate_report_structure_and_self_contained(sim: Path) -> None:
    assert (sim / REPORT_NAME).read_text(encoding="utf-8").startswith("<!DOCTYPE html>\n<html lang=\"en\">")
    page = parse(sim / REPORT_NAME)
    assert page.errors == []
    assert page.sections[:4] == ["answer", "power", "shrinkage", "calibration"]
    assert page.sections[-2:] == ["conventions", "config"]
    ids = [a["id"] for _, a in page.tags if a.get("id")]
    assert len(ids) == len(set(ids))
    assert [t for t, _ in page.tags].count("title") == 1
    written = {p.name for p in sim.glob("*.png")}
    assert {"power_vs_days.png", "offline_vs_online.png"} <= written
    assert assert_self_contained(page, sim) == len(written)


def _answer_expected(summary: dict[str, Any]) -> list[tuple[str, str, str, str, str, bool]]:
    """(design, metric, true effect, impressions, users, biased) from summary.json, formatted here."""
    out = []
    population = summary["config"]["users"]["population"]
    for design, metrics in summary["designs"].items():
        for metric, e in metrics.items():
            biased = bool((e.get("null") or {}).get("biased")) or bool(e.get("biased_estimate"))
            impr = e["analytic_required_impressions"]
            users = e["analytic_required_users"]
            unstable = "?" if e["analytic_required_impressions_unstable"] else ""
            if caution_mark(e):
                unstable += "~"
            if biased:  # no sample size for a biased design, whatever summary.json kept
                impr_s, users_s = "biased", "-"
            else:
                impr_s = ("not reachable" if impr is None else f"{impr:,.0f}") + unstable
                users_s = ("not reachable" if users is None else "whole population" if users >= 0.99 * population
                           else f"{users:,.0f}")
            out.append((design, metric, f"{e['true_effect']:+.3g}", impr_s, users_s, biased))
    return out


def test_simulate_answer_table_holds_summary_numbers(sim: Path) -> None:
    summary = json.loads((sim / "summary.json").read_text())
    page = parse(sim / REPORT_NAME)
    header, *rows = page.tables["answer-table"]
    assert header[:3] == ["design", "metric", "true effect"]
    assert "days to 80% power" in header and "impressions needed" in header and "users needed" in header
    expected = _answer_expected(summary)
    assert len(rows) == len(expected)
    col = {h: k for k, h in enumerate(header)}
    for row, (design, metric, effect, impr, users, biased) in zip(rows, expected, strict=True):
        shown, _, world = row[2].partition("+- ")  # review 4, F1: an exact truth's SE over worlds
        shown, _, mc = shown.partition("MC 4 SE ")  # review 4, F3: a Monte Carlo truth's 4 SE share, when large
        precision = summary["designs"][design][metric].get("truth_precision") or {}
        assert (mc != "") == (precision.get("adequate") is False)
        assert row[0].split()[0] == design and row[1] == metric and shown.strip() == effect
        e = summary["designs"][design][metric]
        world_se = e.get("true_effect_world_se")
        assert ("+- " + world if world else None) == truth_world_cell(e["true_effect"], world_se)
        assert (world_se is None) == (e.get("true_effect_se") != 0.0)  # every exact truth has one (A/B, team-draft)
        assert (e.get("true_effect_se") == 0.0) == str(e.get("truth_method")).startswith("exact")
        assert row[col["impressions needed"]].split(" biased")[0] == impr
        assert row[col["users needed"]].split(" biased")[0] == users
        assert ("biased" in row[0]) == biased
    assert page.sections[0] == "answer"  # the answer comes first
    conv = summary["conventions"]
    answer = page.text("answer")
    for key in ("power", "sample_size", "truth"):  # the numbers keep their conventions text
        assert " ".join(conv[key].split()) in answer


def _copy_with(folder: Path, tmp: Path, edit: Any) -> Path:
    dst = tmp / folder.name
    shutil.copytree(folder, dst)
    summary = json.loads((dst / "summary.json").read_text())
    edit(summary, dst)
    (dst / "summary.json").write_text(json.dumps(summary))
    return dst


def test_biased_designs_keep_their_mark(sim: Path, tmp_path: Path) -> None:
    """A design the null check finds biased is marked in the answer, the power table and the
    monitoring table, and its sample size is never bare; an unbiased one is not marked."""
    def mark(summary: dict[str, Any], _dst: Path) -> None:
        summary["designs"]["balanced"]["delta_ab"]["null"]["biased"] = True
        summary["designs"]["team_draft"]["delta_ab"]["null"]["biased"] = False

    page = parse(write_simulate_report(_copy_with(sim, tmp_path, mark)))
    header, *rows = page.tables["answer-table"]
    col = {h: k for k, h in enumerate(header)}
    by_design = {r[0].split()[0]: r for r in rows if r[1] == "delta_ab"}
    for cell in ("design", "impressions needed", "null Delta"):
        assert by_design["balanced"][col[cell]].endswith("biased"), cell
        assert "biased" not in by_design["team_draft"][col[cell]], cell
    for cell in ("analytic power", "days to 80% power", "users needed"):  # no number computed as if unbiased
        assert by_design["balanced"][col[cell]] == "-", cell
        assert by_design["team_draft"][col[cell]] != "-", cell
    assert "BIASED" in page.text("calibration")
    assert "balanced: delta_ab biased" in page.text("power")


def test_text_is_escaped(sim: Path, tmp_path: Path) -> None:
    """Names and config text from the folder cannot inject markup."""
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'

    def inject(summary: dict[str, Any], dst: Path) -> None:
        summary["designs"][evil] = summary["designs"].pop("team_draft")
        summary["conventions"]["power"] = evil
        (dst / "config.effective.yaml").write_text(f"note: '{evil}'\n")

    out = write_simulate_report(_copy_with(sim, tmp_path, inject))
    text = out.read_text()
    assert "<script" not in text and "<img src=x" not in text and "onerror=alert(1)>" not in text
    page = parse(out)
    assert page.errors == []
    assert evil in page.text("answer")  # shown as text
    assert evil in page.pre[-1]
    assert_self_contained(page, out.parent)


def test_effective_config_and_conventions(sim: Path) -> None:
    page = parse(sim / REPORT_NAME)
    assert page.pre[-1] == (sim / "config.effective.yaml").read_text()
    assert yaml.safe_load(page.pre[-1])["seed"] == SIM["seed"]
    summary = json.loads((sim / "summary.json").read_text())
    text = page.text("conventions")
    for key, value in summary["conventions"].items():
        assert key in text
        if isinstance(value, str):
            assert " ".join(value.split()) in text


def test_sequential_and_multiple_blocks_as_the_terminal_prints_them(sim: Path) -> None:
    from simulations.multiple import multiple_lines
    from simulations.sequential import sequential_lines

    summary = json.loads((sim / "summary.json").read_text())
    page = parse(sim / REPORT_NAME)
    for lines in (sequential_lines(summary, SIM["traffic"]["batch_hours"]), multiple_lines(summary)):
        assert lines  # the config asks for O'Brien-Fleming on team_draft and Holm on ab's metrics
        assert "\n".join(ln for ln in lines if ln.strip()) in page.pre
    assert "obrien_fleming" in page.text("calibration") and "holm over 3 tests" in page.text("calibration")


def test_decomposition_srm_and_cuped_blocks_as_the_terminal_prints_them(sim: Path, tmp_path: Path) -> None:
    from simulations.cuped import cuped_lines
    from simulations.decomposition import decomposition_lines
    from simulations.srm import srm_lines

    summary = json.loads((sim / "summary.json").read_text())
    page = parse(sim / REPORT_NAME)
    for key, lines in (("decomposition", decomposition_lines), ("srm", srm_lines), ("cuped", cuped_lines)):
        body = [ln for ln in lines(summary) if ln.strip()]
        assert len(body) > 2, key  # the config has an A/B design with a pre-period and SRM checks
        assert "\n".join(body[1:]) in page.pre, key
    assert "Why the online effect shrinks" in page.text("shrinkage")
    assert "Sample ratio mismatch" in page.text("checks") and "CUPED" in page.text("checks")
    assert "other" not in page.sections  # none of them is left to the raw tree

    def drop(summary: dict[str, Any], _dst: Path) -> None:
        for key in ("srm", "cuped"):
            summary.pop(key)

    page = parse(write_simulate_report(_copy_with(sim, tmp_path, drop)))
    assert "checks" not in page.sections  # no section without the blocks


def test_counterfactual_estimators_keep_their_biased_mark(sim: Path, tmp_path: Path) -> None:
    """A counterfactual block: one row per estimator with its bias and its interval coverage (flagged outside
    the binomial band of a valid interval's), the biased estimate marked (as the main table marks it), and its
    plots embedded."""
    def add(summary: dict[str, Any], dst: Path) -> None:
        summary["designs"]["cf"] = {
            "snips": {**summary["designs"]["ab"]["reciprocal_rank"], "biased_estimate": False},
            "clipped_ips(cap=5)": {**summary["designs"]["ab"]["reciprocal_rank"], "primary": False,
                                   "biased_estimate": True}}
        summary["counterfactual"] = {"cf": {
            "metric": "clicks_per_query", "targets": ["A", "B"], "true_effect": 0.0184,
            "estimators": {"snips": {"bias": -3.26e-3, "bias_se": 1.4e-2, "rmse": 3.12e-2, "undefined_share": 0.0,
                                     "assumption": "none on clicks", "coverage": 0.945,
                                     "coverage_band": [0.915, 0.98], "coverage_within_band": True},
                           "clipped_ips(cap=5)": {"bias": -0.211, "bias_se": 1.0e-2, "rmse": 0.212,
                                                  "undefined_share": 0.0, "assumption": "biased by clipping <w>",
                                                  "coverage": 0.0, "coverage_band": [0.915, 0.98],
                                                  "coverage_within_band": False}}}}
        shutil.copy(dst / "power_vs_days.png", dst / "counterfactual_rmse.png")

    page = parse(write_simulate_report(_copy_with(sim, tmp_path, add)))
    assert "counterfactual" in page.sections and page.errors == []
    rows = [r for t, rs in page.tables.items() if t == "" for r in rs if r and r[0].startswith(("snips", "clipped"))]
    # bias to 3 significant figures, its SE and the RMSE to 2, coverage and its band to 3 decimals
    assert rows == [["snips", "-0.00326", "0.014", "0.031", "0.945", "0%", "-", "-", "none on clicks"],
                    ["clipped_ips(cap=5) biased", "-0.211", "0.010", "0.21", "0.000 outside 0.915-0.980", "0%", "-",
                     "-", "biased by clipping <w>"]]
    _, *answer = page.tables["answer-table"]
    # the metric cell names the estimated metric under the estimator
    assert all(r[1].endswith("of clicks_per_query") for r in answer if r[0].startswith("cf"))
    marked = {r[1].removesuffix("of clicks_per_query"): r[0].endswith("biased") for r in answer
              if r[0].startswith("cf")}
    assert marked == {"snips": False, "clipped_ips(cap=5)": True}
    assert "RMSE of each estimator" in page.text("counterfactual")


def test_counterfactual_section_shows_support_cost_of_logging_sweep_and_measures(sim: Path, tmp_path: Path) -> None:
    """Review 3, F-F / F-A / F-E / M5 / M6: the counterfactual block shows what the terminal shows, the support
    violations per target (flagged where a target leaves the logger's support), the cost of logging and the
    assumption sweep's numbers (labelled as one log's error); an estimate outside the logger's support is marked
    'no support' in the answer table; an estimate sized from its replicates' SD says so; the monitoring table's
    identically-0 A/A reads '-' with the reason."""
    base = {"bias": -3.26e-3, "bias_se": 1.4e-2, "rmse": 3.12e-2, "undefined_share": 0.0, "assumption": "none",
            "coverage": 0.945, "coverage_band": [0.915, 0.98], "coverage_within_band": True}

    def add(summary: dict[str, Any], dst: Path) -> None:
        rr = summary["designs"]["ab"]["reciprocal_rank"]
        summary["designs"]["cf"] = {
            "snips": {**rr, "no_support": {"B": {"violations_mean": 20104.0, "share": 0.72}}},
            "adaptive_ips": {**rr, "primary": False, "se_measure": "replicates' SD of the estimates (why)",
                             "power_measure": "last day's bootstrap test (400 resamples)"}}
        summary["counterfactual"] = {"cf": {
            "metric": "clicks_per_query", "targets": ["A", "B"], "true_effect": 0.0184,
            "whole_log_refit": "estimators fitting a model on the whole log are computed on the last day only",
            "estimators": {
                "snips": {**base, "support_violations": {
                    "A": {"violations_mean": 0.0, "impressions_mean": 27971.0, "share": 0.0},
                    "B": {"violations_mean": 20104.0, "impressions_mean": 27971.0, "share": 0.7187}}},
                "adaptive_ips": {**base, "support_violations": {
                    "A": {"violations_mean": 0.0, "impressions_mean": 27971.0, "share": 0.0}},
                    "se_measure": "replicates' SD of the estimates (why)",
                    "power_measure": "last day's bootstrap test (400 resamples)"}},
            "logging_cost": {
                "clicks_per_query": {"logger_observed": 0.9723, "ranker_A_exact": 1.0539, "relative": -0.0774,
                                     "improvement_sign": 1, "cost_se": 0.00042},
                "abandonment": {"logger_observed": 0.2614, "ranker_A_exact": 0.2086, "relative": 0.253,
                                "improvement_sign": -1}}}}
        summary["assumption_sweep"] = {
            "design": "cf", "metric": "clicks_per_query", "parameter": "users.types[1].share", "values": [0, 0.5, 1],
            "impressions": 300000, "truth": [0.0232948, 0.0228378, 0.0223807],
            "estimators": {"snips": {"bias": [0.0052, 0.0040, -0.0033], "se": [0.0032, 0.0031, 0.0030]}},
            "error_label": "estimate - exact truth of one 300,000-impression log per value, +- that log's SE"}
        summary["monitoring"]["cf"] = {"metric": "snips", "days": 3, "rules": {
            rule: {"power": 0.5, "mean_decision_day": 2.0, "aa_false_positive_rate": 0.0, "aa_degenerate": True}
            for rule in ("fixed", "peeking", "msprt", "obrien_fleming")}}
        shutil.copy(dst / "power_vs_days.png", dst / "counterfactual_rmse.png")
        shutil.copy(dst / "power_vs_days.png", dst / "assumption_sweep.png")

    edited = _copy_with(sim, tmp_path, add)
    page = parse(write_simulate_report(edited))
    assert page.errors == []
    rows = {r[0]: r for t, rs in page.tables.items() if t == "" for r in rs
            if r and r[0].startswith(("snips", "adaptive"))}
    assert rows["snips no support"][6] == ("A 0 (0%), B 20,104 (72%) cannot evaluate B where its logging "
                                           "probability is 0")
    assert rows["adaptive_ips"][6] == "A 0 (0%)"
    text = page.text("counterfactual")
    # the relative cost's SE where the summary has one (0.00042 / 1.0539 = 0.04%; a summary without cost_se: none)
    assert ("Cost of logging: the logger's own metrics observed on the traffic it served (mean over replicates) vs "
            "ranker A's exact values (+-: the mean's SE over the replicates): clicks_per_query 0.972 vs 1.05 (-7.7% "
            "+- 0.04%); abandonment 0.261 vs 0.209 (+25.3%, lower is better)") in text
    assert "adaptive_ips: sizes and analytic power from the replicates' SD of the estimates (why); power: last " \
        "day's bootstrap test (400 resamples)." in text
    sweep_rows = [r for t, rs in page.tables.items() for r in rs if r and r[0] in ("truth (exact)", "snips")
                  and len(r) == 4]
    assert sweep_rows == [["truth (exact)", "+0.0233", "+0.0228", "+0.0224"],
                          ["snips", "+0.00520 +- 0.0032", "+0.00400 +- 0.0031", "-0.00330 +- 0.0030"]]
    assert "one 300,000-impression log per value" in text
    # review 12, F3: the terminal's 'Estimation error on the last day' block, every design's row, on the page:
    # the same title and, row by row, the same words as the terminal's fixed-width lines
    from types import SimpleNamespace

    from simulations.report_designs import _counterfactual_lines

    class Present(dict):  # type: ignore[type-arg]  # the fabricated cf entry lacks the logger the block reads
        def __bool__(self) -> bool:
            return True

    summary = json.loads((edited / "summary.json").read_text())
    term = _counterfactual_lines(SimpleNamespace(  # type: ignore[arg-type]
        summary={"designs": summary["designs"], "counterfactual": Present()},
        config=SimpleNamespace(users=SimpleNamespace(population=SIM["users"]["population"]))))
    assert term[1].startswith("Estimation error on the last day") and term[1].rstrip(":") in text
    term_rows = [ln.split() for ln in term[3:]]
    head, *rows = page.tables["estimation-error"]
    assert head == ["design", "metric", "true effect", "bias", "+-", "SD", "RMSE", "coverage", "power@end",
                    "impr. needed"]
    assert [" ".join(r).split() for r in rows] == term_rows
    assert len(rows) == sum(len(m) for m in summary["designs"].values()) >= 4
    assert {r[0] for r in rows} >= {"ab", "team_draft", "cf"}
    # review 12, F7: the header names the swept user type, as the plot's x label does
    headers = [r for rs in page.tables.values() for r in rs if r[-3:] == ["0", "0.5", "1"]]
    assert [h[0] for h in headers] == [
        "share of the 'informational' users (cascade informational clicks): users.types[1].share"], headers
    _, *answer = page.tables["answer-table"]
    cf = {r[1].removesuffix("of clicks_per_query"): r for r in answer if r[0].startswith("cf")}
    header = page.tables["answer-table"][0]
    assert cf["snips"][0] == "cf biased" and cf["snips"][header.index("impressions needed")] == "no support"
    assert cf["adaptive_ips"][header.index("power at end")].endswith("b")
    # review 12, F3: its analytic power is marked too (the terminal's '^' on both), the legend names the mark
    analytic = header.index("analytic power")
    assert cf["adaptive_ips"][analytic] == answer[0][analytic] + "sd" != "-sd", (cf, answer[0])
    assert not cf["snips"][analytic].endswith("sd")
    legend = page.text("answer")
    assert "cf / adaptive_ips: analytic power sd , days and sizes from the replicates' SD" in legend, legend
    cf_mon = [r for rs in page.tables.values() for r in rs if len(r) == 6 and r[0] == "cf"
              and r[1].startswith("snips") and "/" in r[2]]
    assert len(cf_mon) == 1 and all(c.startswith("- / 0.500 / ") for c in cf_mon[0][2:]), cf_mon
    assert "says nothing about peeking" in page.text("calibration")


def test_unknown_results_are_shown_not_dropped(sim: Path, tmp_path: Path) -> None:
    def add(summary: dict[str, Any], _dst: Path) -> None:
        summary["future_block"] = {"depth": {"factor": 0.75}, "note": "A & B"}

    page = parse(write_simulate_report(_copy_with(sim, tmp_path, add)))
    assert "other" in page.sections
    assert "future_block" in page.text("other") and "0.75" in page.text("other") and "A & B" in page.text("other")


def test_missing_summary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="summary.json"):
        simulate_report(tmp_path)
    (tmp_path / "summary.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="JSON object"):
        simulate_report(tmp_path)
    (tmp_path / "summary.json").write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        simulate_report(tmp_path)


def test_sweep_report_structure(sweep: Path) -> None:
    summary = json.loads((sweep / "summary.json").read_text())
    page = parse(sweep / REPORT_NAME)
    assert page.errors == []
    assert page.sections == ["answer", "power", "shrinkage", "calibration", "conventions", "config"]
    assert assert_self_contained(page, sweep) == len(list(sweep.glob("*.png")))
    header, *rows = page.tables["answer-table"]
    assert header[:2] == ["point", "rankers.B.noise"]
    assert len(rows) == len(summary["rows"])
    col = {h: k for k, h in enumerate(header)}
    for row, r in zip(rows, summary["rows"], strict=True):
        assert row[0] == str(r["point"]) and row[col["design"]].split()[0] == r["design"]
        assert row[col["true effect"]].split(" +- ")[0] == f"{r['true_effect']:+.3g}"
        needed = r["analytic_required_impressions"]
        assert row[col["impressions needed"]].split(" biased")[0] == (
            "not reachable" if needed is None else f"{needed:,.0f}"
        ) + ("?" if r["analytic_required_impressions_unstable"] else "")  # '?' as the point report and the terminal
    links = [a["href"] for t, a in page.tags if t == "a" and not (a.get("href") or "#").startswith("#")]
    assert sorted(set(links)) == [f"points/point-00{i}/report.html" for i in range(3)]
    study = summary["shrinkage"]
    _check_study(page, study)
    for name in study["plots"].values():
        assert f"shrinkage study: {name}" in [a.get("alt") for t, a in page.tags if t == "img"]


def _check_study(page: Page, study: dict[str, Any]) -> None:
    """The headline table has one row per group and primary relation with its slope and CI;
    every relation's sentence is in the answer; every relation is in the shrinkage section."""
    header, *rows = page.tables["shrinkage-headline"]
    col = {h: k for k, h in enumerate(header)}
    slope_col = next(k for h, k in col.items() if h.startswith("slope"))
    primary = [(g, r) for g in study["groups"] for r in g["relations"] if r["primary"]]
    assert len(rows) == len(primary)
    for row, (g, r) in zip(rows, primary, strict=True):
        assert row[:3] == [g["label"], r["design"], r["metric"]]
        fit = r["through_origin"]
        lo, hi = fit["slope_ci"]
        assert row[slope_col] == f"{fit['slope']:.3g} [{lo:+.3g}, {hi:+.3g}]"
        assert r["sentence"] in page.text("answer")
    header, *rows = page.tables["shrinkage-relations"]
    every = [(g, r) for g in study["groups"] for r in g["relations"]]
    assert [row[:3] for row in rows] == [[g["label"], r["design"], r["metric"]] for g, r in every]


def test_sweep_without_a_shrinkage_study_says_so(sweep: Path, tmp_path: Path) -> None:
    """A sweep folder written before the study existed (no "shrinkage" key) still renders;
    unknown keys inside the study are kept in its full listing, escaped."""
    def drop(summary: dict[str, Any], _dst: Path) -> None:
        del summary["shrinkage"]

    page = parse(write_sweep_report(_copy_with(sweep, tmp_path, drop)))
    assert page.errors == [] and "no shrinkage study" in page.text("shrinkage")
    assert "shrinkage-headline" not in page.tables

    def extra(summary: dict[str, Any], _dst: Path) -> None:
        summary["shrinkage"]["new_result"] = {"x<y>": 0.125}

    page = parse(write_sweep_report(_copy_with(sweep, tmp_path / "b", extra)))
    assert "new_result x<y> 0.125" in page.text("shrinkage")


def test_unstable_sizes_show_their_ranges(sim: Path, tmp_path: Path) -> None:
    """Review 12, F3: a '?' size's 90% range (the terminal's line) is on the page, in the answer
    section; a stable size adds no such line."""
    def edit(summary: dict[str, Any], _: Path) -> None:
        e = summary["designs"]["ab"]["reciprocal_rank"]
        e.update(analytic_required_impressions_unstable=True, analytic_required_impressions_range=[684373, 817272],
                 analytic_required_impressions_rel_se=0.05, analytic_required_impressions_extrapolated=False)

    text = parse(write_simulate_report(_copy_with(sim, tmp_path, edit))).text("answer")
    assert "'?' unstable impressions needed (90% range" in text
    assert "ab/reciprocal_rank: 684,373 to 817,272 (relative SE 5%" in text

    def stable(summary: dict[str, Any], _: Path) -> None:
        for metrics in summary["designs"].values():
            for e in metrics.values():
                e["analytic_required_impressions_unstable"] = False

    assert "unstable impressions needed (90%" not in parse(write_simulate_report(
        _copy_with(sim, tmp_path / "s", stable))).text("answer")


def test_sweep_points_say_which_point_they_are(sweep: Path, tmp_path: Path) -> None:
    """Review 12, F7: each point's report.html names its sweep point and axis values and links back to the
    sweep page; the sweep page's power-by-day table gives each row's axis values; a point folder copied out of
    its sweep says nothing of a sweep; the effect.png caption says one panel per design on its own y axis."""
    points = json.loads((sweep / "summary.json").read_text())["points"]
    assert [p["overrides"]["rankers.B.noise"] for p in points] == [0.6, 0.75, 0.9]
    for p in points:
        raw = (sweep / p["folder"] / REPORT_NAME).read_text(encoding="utf-8")
        want = f"sweep point {p['point']} of 3: rankers.B.noise = {p['overrides']['rankers.B.noise']}"
        assert want in raw and 'href="../../report.html"' in raw, (p, raw[:2000])
        assert (sweep / p["folder"] / "../../report.html").resolve() == (sweep / REPORT_NAME).resolve()
    alone = tmp_path / "point-000"
    shutil.copytree(sweep / points[0]["folder"], alone)
    assert "sweep point" not in (write_simulate_report(alone)).read_text(encoding="utf-8")
    page = parse(sweep / REPORT_NAME)
    header = next(r for rs in page.tables.values() for r in rs if r[:2] == ["point", "rankers.B.noise"]
                  and r[2:4] == ["design", "day 1"])
    power_rows = [r for rs in page.tables.values() for r in rs if len(r) == len(header) and r[2] in ("ab", "td")
                  and r[0] in ("0", "1", "2")]
    noise = {str(p["point"]): f"{p['overrides']['rankers.B.noise']:g}" for p in points}
    assert len(power_rows) == 6 and all(r[1] == noise[r[0]] for r in power_rows), power_rows
    text = page.text("power")
    assert "One panel per design, each on its own y axis" in text, text[:500]


def test_the_run_section_names_the_analysis_version(sim: Path) -> None:
    """summary.json's analysis_version (review 15, F3: the hash of the code that analysed the run) is shown next to
    the stream version, not left to 'Other results'."""
    summary = json.loads((sim / "summary.json").read_text())
    page = parse(sim / REPORT_NAME)
    assert summary["analysis_version"] and f"analysis version {summary['analysis_version']}" in page.text("config")
    assert "other" not in page.sections


def test_sweep_page_explains_the_null_caution_mark_when_a_point_carries_it(sweep: Path, tmp_path: Path) -> None:
    """The sweep's answer table shows a point's '~' (its own report's cells); the legend then says what it means,
    and only then."""
    from simulations.report_null import NULL_CAUTION_LEGEND

    plain = parse(write_sweep_report(_copy_with(sweep, tmp_path / "a", lambda s, d: None)))
    assert NULL_CAUTION_LEGEND not in plain.text("answer")

    def mark(summary: dict[str, Any], dst: Path) -> None:
        row = next(r for r in summary["rows"] if r.get("design") and r.get("metric"))
        folder = dst / next(p["folder"] for p in summary["points"] if p["point"] == row["point"])
        point = json.loads((folder / "summary.json").read_text())
        e = point["designs"][row["design"]][row["metric"]]
        e["null"] = {"z": 6.0, "biased": False, "family_pairs": 1}  # p ~ 2e-9: marked, not flagged
        (folder / "summary.json").write_text(json.dumps(point))

    page = parse(write_sweep_report(_copy_with(sweep, tmp_path / "b", mark)))
    assert NULL_CAUTION_LEGEND in page.text("answer")
    assert any("~" in cell for row in page.tables["answer-table"][1:] for cell in row)
