"""``onlineeval evaluate``: offline metrics of one or more runs, conventions, paired tests.

Example::

    onlineeval evaluate --qrels qrels.txt --run A.txt --run B.txt --baseline A \\
        --metrics "nDCG@10,ERR@10,RBP(p=0.8),AP" --preset trec_eval --format json

LETOR input (LightGBM / XGBoost style): ``--letor test.txt --query-file test.query
--scores model_a.pred --scores model_b.pred``; ``--score-feature N`` makes feature column
``N`` of the LETOR file a system of its own (e.g. BM25 as a baseline). The preset is then
``lightgbm`` unless ``--preset`` says otherwise (ties in input order: LETOR rows' document ids
are synthetic), as in :func:`onlineeval.evaluate_letor`.

Every output states the conventions and how many queries were counted, excluded
(no relevant document), filled (judged but absent from the run) or ignored (no qrels).
``--format csv`` is one long table (system, query or ``all`` or ``segment:<attr>=<value>``,
metric, value, n, residual, err_gmax, queries_*, convention_*); the paired comparisons
go to ``--comparisons FILE``. Metric names of trec_eval and ir_measures are translated
(:mod:`onlineeval.metrics.names`) and each translation is reported.

trec_eval names (``map``, ``ndcg_cut_10``, ``P_10``, ``recip_rank``, ``rbp`` ...) promise trec_eval's number,
which they give under trec_eval's conventions only (linear gain, ``empty=zero``, ties by docno descending).
Without ``--preset``, a metric list of trec_eval names only is evaluated under the ``trec_eval`` preset (the
``names:`` line says so); a list mixing trec_eval names with other names is refused (give ``--preset``). Under
any other conventions (``--preset default``, ``--gain exponential`` ...) the ``names:`` line says which
conventions differ and that the numbers are NOT trec_eval's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, Optional, cast

# typer imported on first use (cli._common's lazy binding): the direct path writes its output without typer
from onlineeval.cli._common import guarded, typer
from onlineeval.errors import MAX_RESAMPLES

if TYPE_CHECKING:  # pragma: no cover
    from onlineeval.conventions import Conventions
    from onlineeval.metrics.base import Metric
    from onlineeval.metrics.evaluate import RunEvaluation
    from onlineeval.stats import PairedResult

FORMATS = ("table", "json", "csv")


def _resolve_baseline(baseline: str, names: list[str], paths: list[Path]) -> str:
    """The system named ``baseline``: its short name, or the path or stem it was given by."""
    from onlineeval.errors import ConfigError

    if baseline in names:
        return baseline
    by_path = {str(p): n for p, n in zip(paths, names)} | {str(p.resolve()): n for p, n in zip(paths, names)}
    if baseline in by_path:
        return by_path[baseline]
    stems = [n for p, n in zip(paths, names) if p.stem == baseline or p.name == baseline]
    if len(stems) == 1:
        return stems[0]
    raise ConfigError(("baseline",), f"{baseline!r} is not one of the systems ({', '.join(names)})")


@guarded
def evaluate_cmd(
    qrels: Annotated[
        Optional[Path], typer.Option("--qrels", "-q", help="TREC qrels file (query iter doc grade).")
    ] = None,
    run: Annotated[
        Optional[list[Path]], typer.Option("--run", "-r", help="TREC run file; repeat for several systems.")
    ] = None,
    letor: Annotated[
        Optional[Path],
        typer.Option("--letor", help="LETOR/SVMlight file (label qid:Q ...) instead of --qrels; systems via --scores."),
    ] = None,
    scores: Annotated[
        Optional[list[Path]],
        typer.Option("--scores", help="Score file for --letor (one number per line); repeat for several systems."),
    ] = None,
    score_feature: Annotated[
        Optional[list[int]],
        typer.Option(
            "--score-feature", min=1,
            help="Use this feature column of the --letor file as a system's score (named feature<N>); repeatable.",
        ),
    ] = None,
    query_file: Annotated[
        Optional[Path], typer.Option("--query-file",
                                     help="Group sizes for a LETOR file without qid: (LightGBM .query).")
    ] = None,
    metrics: Annotated[
        str, typer.Option("--metrics", "-m", help='Comma-separated metrics, e.g. "nDCG@10,ERR@10,RBP(p=0.8),AP".')
    ] = "nDCG@10,AP,RR,P@10",
    baseline: Annotated[
        Optional[str], typer.Option("--baseline", "-b", help="System the others are compared with (file stem, or "
                                    "feature<N>); default the first system.")
    ] = None,
    preset_name: Annotated[
        Optional[str],
        typer.Option(
            "--preset",
            help="Conventions preset: default, trec_eval, lightgbm or xgboost (default: default; trec_eval when "
            "every metric is a trec_eval name such as map or ndcg_cut_10, which then give trec_eval's numbers; "
            "with --letor: lightgbm).",
        ),
    ] = None,
    gain: Annotated[Optional[str], typer.Option("--gain", help="exponential, linear or a table '1=1,2=3'.")] = None,
    ties: Annotated[
        Optional[str],
        typer.Option("--ties", help="docno_desc, input_order, pessimistic, optimistic or expected."),
    ] = None,
    empty: Annotated[
        Optional[str], typer.Option("--empty", help="Queries without relevant documents: exclude, one or zero.")
    ] = None,
    missing: Annotated[
        Optional[str], typer.Option("--missing", help="Qrels queries absent from a run: error, zero or drop.")
    ] = None,
    rel_min: Annotated[Optional[int], typer.Option("--rel-min",
                                                   help="Smallest relevant grade for binary metrics.")] = None,
    depth: Annotated[Optional[int], typer.Option("--depth", min=1,
                                                 help="Read at most this many documents per query.")] = None,
    per_query: Annotated[
        Optional[Path], typer.Option("--per-query", help="Write per-query values (query,system,metric,value,"
                                     "convention_*) to this CSV.")
    ] = None,
    with_per_query: Annotated[
        bool, typer.Option("--with-per-query", help="Include per-query values in the JSON output and the csv table.")
    ] = False,
    segments: Annotated[
        Optional[Path], typer.Option("--segments", help="Per-query attribute TSV (header: query<TAB>attr...).")
    ] = None,
    output_format: Annotated[
        str,
        typer.Option(
            "--format", "-f",
            help="table, json or csv (one long table: system, query or 'all', metric, value, n, residual, "
            "convention_*).",
        ),
    ] = "table",
    comparisons_file: Annotated[
        Optional[Path],
        typer.Option(
            "--comparisons",
            help="Write the paired comparisons (one row per segment x metric x system) to this CSV; any --format.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the randomisation test and bootstrap.")] = 0,
    permutations: Annotated[int, typer.Option("--permutations", min=1, max=MAX_RESAMPLES,
                                              help="Randomisation-test permutations.")] = 10_000,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=100, max=MAX_RESAMPLES,
                                           help="Bootstrap replicates.")] = 10_000,
    alpha: Annotated[float, typer.Option("--alpha", min=0.0, max=1.0, help="Significance level.")] = 0.05,
) -> None:
    """Offline metrics of runs under explicit conventions, with paired significance tests."""
    from onlineeval.errors import ConfigError, must_be_one_of, significance_level

    if output_format not in FORMATS:  # before the imports: a typo costs no start-up
        raise ConfigError(("format",), must_be_one_of(FORMATS, output_format))
    significance_level(alpha, "--alpha")  # (0 and 1 are in the option's range for typer; the tests need (0, 1))
    from onlineeval.conventions import Gain, preset
    from onlineeval.metrics import parse_metrics

    if (qrels is None) == (letor is None):
        raise ConfigError(("qrels",), "give either --qrels with --run, or --letor with --scores")
    if (qrels is not None and scores) or (letor is not None and run):
        raise ConfigError(("run",), "--run goes with --qrels, --scores with --letor")
    if qrels is not None and score_feature:
        raise ConfigError(("score-feature",), "--score-feature goes with --letor")
    features = list(score_feature or [])
    paths = list(run or []) if qrels is not None else list(scores or [])
    if not paths and not features:
        raise ConfigError(("run",) if qrels is not None else ("scores",), "give at least one system")
    from onlineeval.metrics.names import common_rel_min, resolve_metric_list

    metric_names, translations = resolve_metric_list(metrics, trec_eval_preset=preset_name == "trec_eval")
    preset_name, chosen = _preset_for_names(preset_name, letor is not None, metric_names, translations)
    if chosen:
        metric_names, translations = resolve_metric_list(metrics, trec_eval_preset=True)
    base_conv = preset(preset_name)
    asked_rel = common_rel_min(
        translations, len(metric_names), rel_min if rel_min is not None else base_conv.rel_min, rel_min is not None
    )
    conv = base_conv.with_(
        gain=Gain.parse(gain) if gain is not None else None,
        ties=ties,
        empty=empty,
        missing=missing,
        rel_min=rel_min if rel_min is not None or asked_rel == base_conv.rel_min else asked_rel,
        depth=depth,
    )
    ms = parse_metrics(metric_names)
    names_note = "names: " + "; ".join(t.describe() for t in translations) if translations else ""
    trec_note = _trec_eval_names_note(translations, conv, chosen)
    if trec_note:
        names_note += "\n" + trec_note
    for option, target in (("per-query", per_query), ("comparisons", comparisons_file)):
        if target is not None and not target.parent.is_dir():
            raise ConfigError((option,), f"the folder {target.parent} does not exist")
    from onlineeval.io.trec import system_names

    names = system_names(paths) + [f"feature{f}" for f in features]
    if len(set(names)) != len(names):
        raise ConfigError(("score-feature",), f"two systems share a name: {', '.join(names)}")
    baseline = names[0] if baseline is None else _resolve_baseline(baseline, names, paths)
    from onlineeval.io.digest import InputDigests, evaluate_settings, fingerprint

    files: dict[str, Path] = {"qrels": qrels} if qrels is not None else {"letor": cast(Path, letor)}
    files |= {f"system:{n}": p for n, p in zip(names, paths)}
    files |= {key: extra for key, extra in (("query_file", query_file), ("segments", segments)) if extra is not None}
    digests = InputDigests(files)  # hashed while the files are read and evaluated
    done = _evaluate_coded(qrels, paths, names, ms, conv) if qrels is not None else None
    if done is None:
        done = _evaluate_frames(qrels, letor, paths, features, query_file, names, ms, conv)
    evals, residual_values, err_gmax = done
    residuals = {key: float(v.mean()) if len(v) else math.nan for key, v in residual_values.items()}
    entries = digests.entries()
    source = "qrels" if qrels is not None else "letor"
    inputs: dict[str, Any] = {source: entries[source], "runs" if qrels is not None else "scores": {
        n: entries[f"system:{n}"] for n, _ in zip(names, paths)}}
    inputs |= {key: entries[key] for key in ("query_file", "segments") if key in entries}
    settings = evaluate_settings(ms, conv.describe(), features, baseline, seed, permutations, bootstrap, alpha)
    _report(
        evals, conv, residual_values, residuals, err_gmax, translations, names_note, baseline,
        _Options(per_query, with_per_query, segments, output_format, comparisons_file, seed, permutations, bootstrap,
                 alpha, inputs, fingerprint(inputs, settings)),
    )


def _preset_for_names(
    preset_name: str | None, is_letor: bool, metric_names: list[str], translations: list[Any]
) -> tuple[str, bool]:
    """The conventions preset, and whether it was chosen for trec_eval names.

    Without ``--preset``: a list of trec_eval names only (``map,ndcg_cut_10``) is evaluated under the
    ``trec_eval`` preset, so each name gives trec_eval's number; a list mixing trec_eval names with others
    (``map,nDCG@10``) is refused, as one evaluation has one set of conventions; any other list gets the
    ``default`` preset (``lightgbm`` with ``--letor``: LETOR files come from learners that evaluate ties in
    input order)."""
    from onlineeval.errors import ConfigError
    from onlineeval.metrics.names import shared_name, trec_eval_named

    if preset_name is not None:
        return preset_name, False
    if is_letor:
        return "lightgbm", False
    trec = trec_eval_named(translations)
    if not trec:
        return "default", False
    if sum(len(t.metrics) for t in trec) == len(metric_names):
        return "trec_eval", True
    # bpref / infAP are our names too: with other names of ours they take the default preset (the names line
    # then says their numbers are not trec_eval's); only names that are trec_eval's alone make a refused mix
    trec = [t for t in trec if not shared_name(t)]
    if not trec:
        return "default", False
    given = ", ".join(t.given for t in trec)
    raise ConfigError(
        ("metrics",),
        f"{given} {'is a trec_eval name' if len(trec) == 1 else 'are trec_eval names'} and the other metrics "
        "are not: without --preset, trec_eval names are evaluated under the trec_eval preset (trec_eval's "
        "numbers: linear gain, empty=zero) and other names under the default preset (exponential gain, "
        "empty=exclude), and one evaluation has one set of conventions; give --preset trec_eval (every metric "
        "under trec_eval's conventions) or --preset default (the trec_eval names then do not give trec_eval's "
        "numbers), or evaluate them separately",
    )


#: the conventions that change a trec_eval measure's value (missing, rel_min and depth are trec_eval options:
#: -c, -l, -M)
_TREC_EVAL_DEFINING = ("gain", "empty", "ties")


def _trec_eval_names_note(translations: list[Any], conv: Conventions, chosen: bool) -> str:
    """The line under ``names:`` saying whether the trec_eval names give trec_eval's numbers: the preset
    chosen for them, or which conventions differ from trec_eval's (then they do not)."""
    from onlineeval.conventions import preset
    from onlineeval.metrics.names import trec_eval_named

    trec = trec_eval_named(translations)
    if not trec:
        return ""
    ref = preset("trec_eval").describe()
    mine = conv.describe()
    differ = [f"{k} {mine[k]} (trec_eval: {ref[k]})" for k in _TREC_EVAL_DEFINING if mine[k] != ref[k]]
    if not differ:
        why = "chosen because every metric is a trec_eval name" if chosen else "as trec_eval"
        # the conventions that are trec_eval options: name the flags a plain trec_eval run needs
        flags = []
        if conv.missing == "zero":
            flags.append("-c")
        if int(conv.rel_min) != int(ref["rel_min"]):
            flags.append(f"-l{int(conv.rel_min)}")
        if conv.depth is not None:
            flags.append(f"-M{int(conv.depth)}")
        whose = f"trec_eval {' '.join(flags)}'s" if flags else "trec_eval's"
        text = f"trec_eval names under conventions {conv.name} ({why}): they give {whose} numbers"
        if conv.missing == "drop":
            text += (" on the queries the run answers; missing=drop has no trec_eval 10.0 option (10.0 exits with an "
                     "error when a qrels query is missing from the run; 9.x and pytrec_eval leave it out, as here)")
        return text
    return (
        f"trec_eval names under conventions {conv.name}: {', '.join(differ)}; NOT trec_eval's numbers "
        "(--preset trec_eval reproduces trec_eval)"
    )


def _relevance_free_note(evals: list[RunEvaluation]) -> str:
    """The note on the metrics that do not depend on relevance (Judged@k, Unjudged@k, NumRet, RBPResidual:
    ``Metric.relevance_free``) when ``empty=exclude`` left queries without a relevant document out of the other
    means: their means count those queries (as ir_measures' do), so they are over more queries."""
    from onlineeval.metrics.evaluate_output import per_metric_lines

    return "\n".join(per_metric_lines(evals))


def _evaluate_coded(
    qrels: Path, paths: list[Path], names: list[str], ms: list[Metric], conv: Conventions
) -> tuple[list[RunEvaluation], dict[tuple[str, str], Any], dict[str, int]] | None:
    """The runs evaluated on the byte-level reader's integer codes (no pandas), or ``None``
    when a file is outside that reader's format (or holds a repeated pair): then
    :func:`_evaluate_frames` reads them all and reports any problem with its line."""
    from onlineeval.io.trec_bytes import scan_qrels, scan_run
    from onlineeval.metrics import ERR, RBP, RBPResidual
    from onlineeval.metrics.batch import evaluate_coded

    q = scan_qrels(qrels)
    if q is None:
        return None
    runs = []
    for path in paths:  # in order, stopping at the first file the byte reader leaves: the
        r = scan_run(path)  # pandas path then reports the first problem, as it always did
        if r is None:
            return None
        runs.append(r)
    evals = []
    for name, r in zip(names, runs):
        ev = evaluate_coded(q, r, ms, conv, run_id=name)
        if ev is None:
            return None
        evals.append(ev)
    residual_values: dict[tuple[str, str], Any] = {}
    rbps = [m for m in ms if isinstance(m, RBP)]
    if rbps:  # RBP as an interval [RBP, RBP + residual], as metrics.tables.rbp_residuals
        import pandas as pd

        resid = {m: RBPResidual(k=m.k, p=m.p) for m in rbps}  # RBP(p=0.9) and its graded form share one
        for name, r in zip(names, runs):
            ev = cast("RunEvaluation", evaluate_coded(q, r, list(dict.fromkeys(resid.values())), conv, run_id=name))
            queries = ev.queries[ev.counted].astype(str)  # RBP's queries (RBPResidual alone counts every query)
            for m, res in resid.items():
                residual_values[(name, str(m))] = pd.Series(ev.values[res][ev.counted], index=queries, dtype="float64")
    top = max(1, int(q.grade.max()))  # ERR's scale top, as metrics.tables.err_scales
    err_gmax = {str(m): top for m in ms if isinstance(m, ERR) and m.gmax is None}
    return evals, residual_values, err_gmax


def _evaluate_frames(
    qrels: Path | None,
    letor: Path | None,
    paths: list[Path],
    features: list[int],
    query_file: Path | None,
    names: list[str],
    ms: list[Metric],
    conv: Conventions,
) -> tuple[list[RunEvaluation], dict[tuple[str, str], Any], dict[str, int]]:
    """The systems evaluated from pandas frames (any TREC file the readers accept; LETOR)."""
    import pandas as pd

    from onlineeval.io import read_qrels, read_ranking
    from onlineeval.metrics.evaluate import evaluate_run
    from onlineeval.metrics.tables import err_scales, rbp_residuals

    runs: list[pd.DataFrame] = []
    if qrels is not None:
        q = read_qrels(qrels, check_unique=False)  # evaluate_run checks repeated pairs
        runs = [read_ranking(path, check_unique=False) for path in paths]  # TREC runs or query doc score files
    else:
        from onlineeval.io.letor import read_letor_features, read_scores

        # parsed once, for all score files and score features
        q, by_feature = read_letor_features(cast(Path, letor), features, query_file=query_file)
        for path in paths:
            frame = pd.DataFrame(
                {"query": q["query"].to_numpy(), "doc": q["doc"].to_numpy(), "score": read_scores(path, len(q))}
            )
            frame.attrs["path"] = str(path)
            runs.append(frame)
        runs += [by_feature[f] for f in features]
    evals = [evaluate_run(q, r, ms, conv, run_id=name) for name, r in zip(names, runs)]
    return evals, rbp_residuals(q, runs, names, ms, conv), err_scales(q, ms)


class _Options(NamedTuple):
    per_query: Path | None
    with_per_query: bool
    segments: Path | None
    output_format: str
    comparisons_file: Path | None
    seed: int
    permutations: int
    bootstrap: int
    alpha: float
    inputs: dict[str, Any]  # each input file's path, size and SHA-256 (onlineeval.io.digest.input_entry)
    fingerprint: str  # of the inputs' SHA-256, the options and the version


def _report(
    evals: list[RunEvaluation],
    conv: Conventions,
    residual_values: dict[tuple[str, str], Any],
    residuals: dict[tuple[str, str], float],
    err_gmax: dict[str, int],
    translations: list[Any],
    names_note: str,
    baseline: str,
    o: _Options,
) -> None:
    """Paired comparisons (several systems), segments, and the output in the asked format."""
    from onlineeval.metrics import evaluate_output as out

    output_format = o.output_format
    free_note = _relevance_free_note(evals)  # the table has it under its queries lines
    long = None
    if o.per_query is not None or len(evals) > 1 or o.segments is not None:
        from onlineeval.metrics.tables import long_frame

        long = long_frame(evals)
    digests = out.system_digests(o.inputs)
    if o.per_query is not None:
        per_query = long.assign(**{f"convention_{k}": v for k, v in conv.describe().items()})
        out.with_digests(per_query, digests, o.fingerprint).to_csv(o.per_query, index=False)
    comparisons: list[PairedResult] = []
    common_queries: int | None = None
    paired: dict[str, int] = {}
    unpaired: list[dict[str, Any]] = []  # metrics (per segment) without a paired query: n 0 and a reason
    seg_frame = None
    if o.segments is not None:
        from onlineeval.stats import read_segments

        seg_frame = read_segments(o.segments)
    # the csv stream is one table: comparisons are computed only where they are written
    want_comparisons = output_format != "csv" or o.comparisons_file is not None
    if len(evals) > 1:
        from onlineeval.metrics.tables import common_queries as common
        from onlineeval.metrics.tables import paired_counts

        # each metric paired on its own queries (Judged@k counts the queries without a relevant document)
        long_c, common_queries = common(long, len(evals))
        paired = paired_counts(long_c)
        if paired:  # every metric named, 0 for one without a paired query (not only the ones with some)
            paired = {str(m): paired.get(str(m), 0) for m in evals[0].metrics}
            common_queries = min(paired.values())
        if paired and want_comparisons:
            # (no query counted for every system: nothing to pair)
            from onlineeval.stats import compare_segments, compare_systems

            options = {"n_permutations": o.permutations, "n_bootstrap": o.bootstrap, "alpha": o.alpha}
            try:
                comparisons = compare_systems(long_c, baseline, seed=o.seed, **options)
                if seg_frame is not None:
                    comparisons = comparisons + compare_segments(long_c, seg_frame, baseline, seed=o.seed, **options)
            except MemoryError:
                from onlineeval.errors import ConfigError

                raise ConfigError(
                    ("permutations",),
                    f"not enough memory for the paired tests ({o.permutations} permutations, {o.bootstrap} bootstrap "
                    f"replicates, {max(paired.values())} paired queries); lower --permutations or --bootstrap",
                ) from None
            unpaired = out.unpaired_rows(evals, conv, long, long_c, baseline, comparisons, seg_frame)
    coverage = None
    seg_means = None
    if o.segments is not None and seg_frame is not None:
        coverage = out.segment_coverage(o.segments, seg_frame, long)
        seg_means = out.segment_means(long, seg_frame)

    tests = out.test_settings(o.seed, o.permutations, o.bootstrap, o.alpha, 1.0 - o.alpha)  # (compare_systems' level)
    if o.comparisons_file is not None:
        frame = out.comparisons_frame(comparisons, conv, tests, unpaired)
        out.with_digests(frame, digests, o.fingerprint, ("system", "baseline")).to_csv(o.comparisons_file, index=False)
    if output_format == "json":
        doc = out.json_doc(evals, conv, comparisons, common_queries, seg_means, o.with_per_query, tests, paired,
                          unpaired)
        if err_gmax:
            from onlineeval.metrics.names import err_gmax_note

            doc["err_gmax"] = err_gmax
            doc["err_gmax_notes"] = [err_gmax_note(m, g) for m, g in err_gmax.items()]
        if translations:
            doc["names"] = [
                {"given": t.given, "metrics": list(t.metrics), "source": t.source, "rel_min": t.rel_min}
                | ({"note": t.note} if t.note else {})
                for t in translations
            ]
        trec_line = [line for line in names_note.split("\n") if line.startswith("trec_eval names")]
        if trec_line:
            doc["trec_eval_names"] = trec_line[0]
        if free_note:
            doc["relevance_free_note"] = free_note
        if coverage is not None:
            doc["segments"] = coverage
        doc["inputs"], doc["fingerprint"] = o.inputs, o.fingerprint
        for entry in doc["systems"]:
            for metric, rec in entry["metrics"].items():
                if (entry["name"], metric) in residuals and rec["mean"] is not None:
                    res = residuals[(entry["name"], metric)]
                    rec["residual"] = out.clean(res)
                    rec["interval"] = [rec["mean"], out.clean(rec["mean"] + res)]
        _echo(json.dumps(doc, indent=2))
    elif output_format == "csv":
        tidy = out.with_digests(out.tidy(evals, conv, seg_means, residual_values, err_gmax, o.with_per_query),
                                digests, o.fingerprint)
        _echo(tidy.to_csv(index=False), nl=False)
        if names_note:
            _echo("note: " + names_note.replace("\n", "\nnote: "), err=True)
        if free_note:
            _echo("note: " + free_note.replace("\n", "\nnote: "), err=True)
        differ = out.query_sets(evals)
        if differ is not None:
            _echo(f"note: {differ['note']}", err=True)
        if common_queries == 0 and not paired:
            _echo(f"note: {out.NO_PAIRS}", err=True)
        elif len(evals) > 1 and o.comparisons_file is None:
            _echo("note: paired comparisons are not in the csv table; write them with --comparisons FILE", err=True)
            for m in (m for m, n in paired.items() if n == 0):  # (not computed here: say which metric has none)
                _echo(f"note: {m}: no query is paired across the systems (n = 0); --comparisons FILE says why",
                      err=True)
        if err_gmax:
            from onlineeval.metrics.names import err_gmax_note

            for m, g in err_gmax.items():
                _echo(f"note: {err_gmax_note(m, g)}", err=True)
        for note in out.comparison_notes(comparisons) + out.unpaired_notes(unpaired):
            _echo(note if note.startswith("warning:") else f"note: {note}", err=True)
        if coverage is not None and (coverage["not_evaluated"] or coverage["evaluated_without_attributes"]):
            _echo("note: " + out.coverage_text(coverage), err=True)
    else:
        text = out.table(evals, conv, comparisons, common_queries, seg_means, baseline, paired, unpaired, seed=o.seed)
        if names_note:
            first, sep, rest = text.partition("\n")
            text = first + "\n" + names_note + sep + rest
        if err_gmax:
            first, sep, rest = text.partition("\n")
            from onlineeval.metrics.names import err_gmax_note

            notes = "\n".join(err_gmax_note(m, g) for m, g in err_gmax.items())
            text = first + "\n" + notes + sep + rest
        if coverage is not None:
            text += "\n\n" + out.coverage_text(coverage)
        if residuals:
            lines = ["", "RBP as an interval [RBP, RBP + residual] (unjudged and unseen documents):"]
            for ev in evals:
                for m in ev.metrics:
                    if (ev.run_id, str(m)) in residuals:
                        low = ev.mean(m)
                        high = low + residuals[(ev.run_id, str(m))]
                        lines.append(f"  {ev.run_id} {m}: [{out.fmt(low)}, {out.fmt(high)}]")
            text += "\n" + "\n".join(lines)
        first, sep, rest = text.partition("\n")  # under the conventions line: what the numbers come from
        _echo(first + "\n" + _inputs_text(o) + sep + rest)


def _inputs_text(o: _Options) -> str:
    """The input files' SHA-256 (first 12 hex digits) and the fingerprint, two lines."""
    singular = {"runs": "run", "scores": "scores"}
    files = [(f"{singular.get(key, key)} {name}" if name else key, e) for key, v in o.inputs.items()
             for name, e in (v.items() if "sha256" not in v else [("", v)])]
    from onlineeval.io.digest import inputs_line

    return (inputs_line(files)
            + f"\nfingerprint: {o.fingerprint} (of the inputs' SHA-256, the metrics, conventions and test options, and "
              "the version)")


def _echo(message: str, err: bool = False, nl: bool = True) -> None:
    """``typer.echo`` without importing typer for plain text: ASCII without an escape
    byte is written and flushed as click writes it (``message`` and a newline); any other
    text goes through ``typer.echo`` itself (its ANSI stripping, its stream encodings)."""
    import sys

    if not message.isascii() or "\x1b" in message:
        import typer as real

        real.echo(message, err=err, nl=nl)
        return
    stream = sys.stderr if err else sys.stdout
    text = message + "\n" if nl else message
    if stream is not None and text:
        stream.write(text)
        stream.flush()


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to the main app."""
    app.command("evaluate")(evaluate_cmd)


# the direct path (re-exported: onlineeval.cli.main and the tests import it from here)
from onlineeval.cli.evaluate_direct import _DIRECT_OPTIONS, direct_params, run_direct

__all__ = ["FORMATS", "_DIRECT_OPTIONS", "direct_params", "evaluate_cmd", "register", "run_direct"]
