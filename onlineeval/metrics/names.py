"""Measure names of trec_eval and ir_measures translated to onlineeval metrics.

Users bring the names of the tools they know. This module maps them to the metric they
denote here, so that ``--metrics P_10,ndcg_cut_10,map`` and ``--metrics "P@10,nDCG@10,AP"``
evaluate the same thing, and says which translation happened (:class:`Translation`).

trec_eval (``trec_eval -m``, pytrec_eval)
    Printed names ``P_10``, ``ndcg_cut_10``, ``map_cut_100``, ``recall_100``,
    ``success_10``, ``unj_10``, ``iprec_at_recall_0.50``, ``Rprec_mult_0.20``, ``set_P`` and
    measure families with parameters ``P.5,10`` (two metrics), ``ndcg_cut.10,20``,
    ``iprec_at_recall.0.1,0.5``, ``11pt_avg.0.25,0.5`` (one metric over those levels),
    ``ndcg.1=3,2=9`` (nDCG with that gain table). ``map``, ``recip_rank``, ``Rprec``,
    ``bpref``, ``infAP``, ``11pt_avg``, ``ndcg`` and ``num_*`` are aliases of our metrics.
    Under the ``trec_eval`` conventions preset each translated metric equals the trec_eval
    measure (checked against pytrec_eval in ``tests/test_metric_names.py``); ``onlineeval evaluate`` without
    ``--preset`` uses that preset when every metric is a trec_eval name (:func:`trec_eval_named`), refuses a mix
    of trec_eval names and others, and otherwise says that the numbers are not trec_eval's. ``rbp`` and
    ``rbp_resid`` are also aliases of our RBP and its residual, whose default persistence is
    p = 0.8 (as ir_measures'); trec_eval's have p = 0.9 (``m_rbp.c``), graded gains and a
    residual of 0 when nothing retrieved is unjudged. Under the ``trec_eval`` preset
    (:func:`resolve_metric_list` with ``trec_eval_preset``) the two names are trec_eval's
    measures; elsewhere they stay our aliases and the translation says which p it took.
ir_measures
    ``nDCG@10``, ``P@10``, ``AP@100``, ``RR``, ``ERR@10``, ``RBP(p=0.8)``, ``Success@10``
    are our own spellings. ir_measures' ERR is gdeval.pl's, whose scale top is fixed at gmax = 4; ours takes the
    top grade of the qrels (gmax = 3 on 0-3 graded qrels, where ours is about twice theirs): ``ERR(gmax=4)@10``
    is their ERR@10, and the output's gmax line says so (:func:`err_gmax_note`). ``R@100`` is Recall@100,
    ``IPrec@0.5`` is interpolated
    precision at recall 0.5 (the ``@`` is a recall level there), ``Rprec``, ``Bpref``,
    ``NumQ``, ``NumRet``, ``NumRel``, ``NumRelRet``, ``SetP`` and ``SetR`` their trec_eval forms.
    ``rel=r`` (``P(rel=2)@10``) is the relevance threshold, which onlineeval holds in one
    convention for the whole evaluation (``rel_min``): :attr:`Translation.rel_min`
    carries it and the caller applies it (``onlineeval evaluate`` does when every metric
    agrees, and refuses a mix). ``Judged@k`` is our :class:`~onlineeval.metrics.Judged` (the share of the
    retrieved top ``k`` found in the qrels, any grade; no relevance threshold), ir_measures' definition.
Not implemented
    The other measures of trec_eval 10.0 (``utility``, ``set_F``, ``Rndcg``, ``relative_P_5``, ``prefs_*`` ...)
    and its measure groups (``all_trec``) are refused as such, with the list of trec_eval names translated here;
    a misspelt name is an unknown metric with the closest names (``nDGC``: did you mean nDCG?).

References
----------
C. Buckley et al. trec_eval, https://github.com/usnistgov/trec_eval (measure names).
S. MacAvaney, C. Macdonald, I. Ounis. "Streamlining Evaluation with ir-measures". ECIR 2022.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from onlineeval.errors import ConfigError

__all__ = ["Translation", "common_rel_min", "external_names", "resolve_metric_list", "split_metric_list",
           "shared_name", "trec_eval_named", "translate"]


@dataclass(frozen=True)
class Translation:
    """One measure name as written and the onlineeval metric names it stands for.

    Attributes
    ----------
    given:
        The name as the user wrote it (``P_10``, ``P.5,10``, ``P(rel=2)@10``).
    metrics:
        Our canonical names (``("P@10",)``; a trec_eval family can give several).
    source:
        ``"trec_eval"``, ``"ir_measures"`` or ``"alias"``.
    rel_min:
        The relevance threshold the name carries (ir_measures ``rel=``, ``Judged``),
        ``None`` when it carries none.
    note:
        What the reader should know about the translation (``rbp`` outside the
        ``trec_eval`` preset: trec_eval's own ``rbp`` has another p), ``None`` otherwise.
    """

    given: str
    metrics: tuple[str, ...]
    source: str
    rel_min: int | None = None
    note: str | None = None

    def describe(self) -> str:
        """``P_10 -> P@10 (trec_eval name)``; with ``rel_min = 2`` when the name carries it."""
        kind = "alias" if self.source == "alias" else f"{self.source} name"
        extra = f"; relevance threshold rel_min = {self.rel_min}" if self.rel_min is not None else ""
        extra += f"; {self.note}" if self.note else ""
        return f"{self.given} -> {', '.join(self.metrics)} ({kind}{extra})"


# ------------------------------------------------------------------------- trec_eval

#: trec_eval measures without parameters (printed names)
_TREC_FIXED: dict[str, str] = {
    "map": "AP",
    "Rprec": "RPrec",
    "bpref": "bpref",
    "recip_rank": "RR",
    "infAP": "infAP",
    "11pt_avg": "IPrecAvg",
    "ndcg": "nDCG",
    "num_q": "NumQ",
    "num_ret": "NumRet",
    "num_rel": "NumRel",
    "num_rel_ret": "NumRelRet",
    "num_nonrel_judged_ret": "NumNonRelJudgedRet",
    "set_P": "P",
    "set_recall": "Recall",
}

#: trec_eval families with one numeric parameter per metric: name -> (template, integer parameter)
_TREC_FAMILIES: dict[str, tuple[str, bool]] = {
    "P": ("P@{}", True),
    "recall": ("Recall@{}", True),
    "success": ("Success@{}", True),
    "unj": ("Unjudged@{}", True),
    "ndcg_cut": ("nDCG@{}", True),
    "map_cut": ("AP@{}", True),
    "iprec_at_recall": ("IPrec(recall={})", False),
    "Rprec_mult": ("RPrecMult(mult={})", False),
}

#: trec_eval measures that exist but have no counterpart here, with the reason
_TREC_REFUSED: dict[str, str] = {
    "gm_map": "gm_map is the geometric mean of AP over queries; onlineeval reports arithmetic means "
    "(per-query values: AP, e.g. in --per-query)",
    "gm_bpref": "gm_bpref is a geometric mean over queries; onlineeval reports arithmetic means (per-query: bpref)",
}

#: trec_eval measures whose printed name is also an alias of our metric with other defaults: the
#: trec_eval measure (under the trec_eval preset). trec_eval 10.0's m_rbp.c: p = 0.9, gain
#: rel / max rel of the query; rbp_resid is 0 when no retrieved document is unjudged.
_TREC_OWN_DEFAULTS: dict[str, str] = {
    "rbp": "RBP(p=0.9,graded=True)",
    "rbp_resid": "RBPResidual(p=0.9,form='trec_eval')",
}

#: the other measures of trec_eval 10.0 (its measures.c): onlineeval does not implement them
_TREC_MISSING = ("runid", "relstring", "utility", "binG", "G", "ideal_dcg", "ndcg_rel", "Rndcg", "relative_P",
                 "set_relative_P", "set_map", "set_F", "prefs_num_prefs_poss", "prefs_num_prefs_ful",
                 "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel",
                 "prefs_simp_ret", "prefs_pair_ret", "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp",
                 "prefs_pair_imp", "prefs_avgjg_imp", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg", "yaap")
#: trec_eval's names for groups of measures (``-m all_trec``)
_TREC_GROUPS = ("official", "set", "all_trec", "all_prefs", "prefs", "qrels_jg")

# trec_eval spellings that are also aliases of our metrics (reported as trec_eval names)
_TREC_ALIASES = frozenset({"map", "Rprec", "recip_rank", "11pt_avg", "ndcg", "num_q", "num_ret", "num_rel",
                           "num_rel_ret", "num_nonrel_judged_ret", "map_cut", "ndcg_cut", "iprec_at_recall",
                           "Rprec_mult"})

_NUMBER = r"-?(?:\d+\.?\d*|\.\d+)"
_PRINTED = re.compile(rf"^(?P<family>[A-Za-z][A-Za-z_]*?)_(?P<param>{_NUMBER})$")
_DOTTED = re.compile(r"^(?P<family>[A-Za-z0-9][A-Za-z0-9_]*)\.(?P<params>.+)$")
_LIST_CONTINUATION = re.compile(rf"^\s*{_NUMBER}(?:\s*=\s*{_NUMBER})?\s*$")


def _number(text: str, integer: bool, given: str) -> str:
    from onlineeval.io.text import plain_float

    value = plain_float(text)  # float() takes 1_0 (10) and digits of other scripts
    if value is None or not math.isfinite(value):
        raise ConfigError(("metrics", given), f"parameter {text!r} is not a number")
    if integer:
        if value != int(value) or value < 1:
            raise ConfigError(("metrics", given), f"cut-off {text!r} must be a positive integer")
        return str(int(value))
    return f"{value:g}"


def trec_eval_names() -> str:
    """The trec_eval measure names onlineeval translates, for messages (``map, ..., P_<k>, ...``)."""
    families = [f"{family}_<{'k' if integer else 'x'}>" for family, (_, integer) in _TREC_FAMILIES.items()]
    return ", ".join([*_TREC_FIXED, *_TREC_OWN_DEFAULTS, *families])


def spellings() -> tuple[str, ...]:
    """The trec_eval and ir_measures names translated here (measure and family names, without parameters), for
    the 'did you mean' of an unknown metric."""
    return (*_TREC_FIXED, *_TREC_OWN_DEFAULTS, *_TREC_FAMILIES, *_IRM)


def _trec_missing(name: str) -> None:
    """Raise for a trec_eval measure or measure group onlineeval does not implement (any case; with a printed
    parameter ``relative_P_5`` or a parameter list ``set_F.0.5``)."""
    heads = {name}
    for pattern in (_PRINTED, _DOTTED):
        m = pattern.match(name)
        if m is not None:
            heads.add(m.group("family"))
    lowered = {h.lower() for h in heads}
    for missing in (*_TREC_MISSING, *_TREC_GROUPS):
        if missing.lower() in lowered:
            what = ("trec_eval's name for a group of measures (-m {}); name the measures one by one"
                    if missing in _TREC_GROUPS else "a trec_eval measure that onlineeval does not implement")
            raise ConfigError(("metrics", name),
                              f"{missing} is {what.format(missing)}; the trec_eval measures onlineeval translates: "
                              f"{trec_eval_names()} (`onlineeval metrics` lists every name)")


def _trec_eval(name: str) -> Translation | None:
    if name in _TREC_REFUSED:
        raise ConfigError(("metrics", name), _TREC_REFUSED[name])
    _trec_missing(name)
    if name in _TREC_FIXED:
        return Translation(name, (_TREC_FIXED[name],), "trec_eval")
    m = _PRINTED.match(name)
    if m and m.group("family") in _TREC_FAMILIES:
        template, integer = _TREC_FAMILIES[m.group("family")]
        return Translation(name, (template.format(_number(m.group("param"), integer, name)),), "trec_eval")
    m = _DOTTED.match(name)
    if m is None:
        return None
    family, params = m.group("family"), m.group("params")
    values = [p.strip() for p in params.split(",")]
    if family in _TREC_FAMILIES:
        template, integer = _TREC_FAMILIES[family]
        return Translation(name, tuple(template.format(_number(v, integer, name)) for v in values), "trec_eval")
    if family == "11pt_avg":
        levels = tuple(float(_number(v, False, name)) for v in values)
        return Translation(name, (f"IPrecAvg(levels={levels!r})",), "trec_eval")
    if family == "ndcg":
        for v in values:
            if not re.match(rf"^\d+={_NUMBER}$", v):
                raise ConfigError(("metrics", name), "ndcg parameters are a gain table such as ndcg.1=3,2=9")
        return Translation(name, (f"nDCG(gain={','.join(values)!r})",), "trec_eval")
    if family in _TREC_FIXED or family in _TREC_REFUSED:
        raise ConfigError(("metrics", name), f"trec_eval's {family} takes no parameters here")
    return None


# ---------------------------------------------------------------------------- ir_measures

#: ir_measures measure -> (our metric, parameters kept as ours)
_IRM: dict[str, tuple[str, tuple[str, ...]]] = {
    "nDCG": ("nDCG", ()),
    "P": ("P", ()),
    "AP": ("AP", ()),
    "R": ("Recall", ()),
    "RR": ("RR", ()),
    "ERR": ("ERR", ()),
    "RBP": ("RBP", ("p",)),
    "Success": ("Success", ()),
    "Rprec": ("RPrec", ()),
    "Bpref": ("bpref", ()),
    "infAP": ("infAP", ()),
    "NumQ": ("NumQ", ()),
    "NumRet": ("NumRet", ()),
    "NumRel": ("NumRel", ()),
    "NumRelRet": ("NumRelRet", ()),
    "SetP": ("P", ()),
    "SetR": ("Recall", ()),
    "IPrec": ("IPrec", ()),
    "Judged": ("Judged", ()),
    "INSQ": ("INSQ", ("T",)),
    "INST": ("INST", ("T",)),
}

_IRM_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*)\s*(?P<args>\(.*\))?\s*(?:@\s*(?P<at>[^\s]+))?$")


#: ir_measures' ERR is gdeval.pl's, whose scale top is fixed (``$MAX_JUDGMENT = 4``); ours is the qrels' top grade
ERR_IR_MEASURES = ("ERR (ir_measures and gdeval fix gmax = 4, here gmax is the qrels' top grade: ERR(gmax=4)@<k> "
                   "gives their value)")


def err_gmax_note(metric: str, gmax: int) -> str:
    """The output's line on an ERR metric's scale top ``gmax`` taken from the qrels, and how it stands to
    ir_measures' / gdeval's fixed gmax = 4 (on 0-3 graded qrels their ERR is about half ours)."""
    if gmax == 4:
        return f"{metric}: gmax = 4 (top grade of the qrels; the same as ir_measures' and gdeval's fixed gmax = 4)"
    theirs = metric.replace("ERR", "ERR(gmax=4)", 1) if metric.startswith("ERR") and "(" not in metric else metric
    return (f"{metric}: gmax = {gmax} (top grade of the qrels; ir_measures and gdeval fix gmax = 4, "
            f"so their ERR differs: {theirs} gives theirs)")


def _ir_measures(name: str) -> Translation | None:
    m = _IRM_RE.match(name)
    if m is None or m.group("name") not in _IRM:
        return None
    measure = m.group("name")
    ours, kept = _IRM[measure]
    args: dict[str, object] = {}
    if m.group("args"):
        from onlineeval.metrics.base import _parse_args

        args = _parse_args(name, m.group("args"))
    rel = args.pop("rel", None)
    if rel is not None and (isinstance(rel, bool) or not isinstance(rel, int)):
        raise ConfigError(("metrics", name), f"rel must be an integer grade, got {rel!r}")
    if measure == "Judged" and rel is not None:
        raise ConfigError(("metrics", name), "Judged takes no rel parameter (any judged grade counts)")
    unknown = [k for k in args if k not in kept]
    if unknown:
        allowed = ", ".join(("rel", *kept))
        raise ConfigError(
            ("metrics", name),
            f"the ir_measures parameter {unknown[0]!r} of {measure} has no counterpart here; allowed: {allowed}",
        )
    params = ",".join(f"{k}={v!r}" for k, v in args.items())
    at = m.group("at")
    if measure == "IPrec":
        if at is None:
            raise ConfigError(("metrics", name), "IPrec needs a recall level, e.g. IPrec@0.5")
        params = ",".join(p for p in (params, f"recall={_number(at, False, name)}") if p)
        suffix = ""
    else:
        suffix = f"@{at}" if at is not None else ""
    text = ours + (f"({params})" if params else "") + suffix
    return Translation(name, (text,), "ir_measures", int(rel) if rel is not None else None)


# -------------------------------------------------------------------------------- public


def translate(name: str) -> Translation | None:
    """The translation of a trec_eval or ir_measures measure name, ``None`` if it is neither.

    Call it for names our own parser does not accept (our names win: ``nDCG@10`` is
    ours, and ir_measures' ``nDCG@10`` is the same metric).

    Raises
    ------
    ConfigError
        For a known foreign measure with bad parameters or without a counterpart here
        (``gm_map``; a trec_eval measure onlineeval does not implement, such as ``utility``).
    """
    text = name.strip()
    return _trec_eval(text) or _ir_measures(text)


def translate_instead(name: str, own_error: ConfigError) -> Translation:
    """The translation of a name our parser refused with ``own_error``, else ``own_error``.

    A name whose head is one of our metrics (``RBP(q=0.5)``) keeps our parser's message
    when no translation applies either."""
    try:
        found = translate(name)
    except ConfigError:
        from onlineeval.metrics.base import is_own_name

        if is_own_name(name) and not re.search(r"[(,]\s*rel\s*=", name):
            raise own_error from None  # our metric with a bad parameter, not an ir_measures threshold
        raise
    if found is None:
        raise own_error
    return found


def split_metric_list(text: str) -> list[str]:
    """Split a comma-separated metric list; commas inside parentheses and in trec_eval
    parameter lists (``P.5,10``, ``ndcg.1=3,2=9``) stay with their metric."""
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    out: list[str] = []
    for part in parts:
        if out and _LIST_CONTINUATION.match(part) and _DOTTED.match(out[-1].strip()):
            out[-1] = out[-1] + "," + part.strip()
        else:
            out.append(part)
    return out


def resolve_metric_list(text: str, trec_eval_preset: bool = False) -> tuple[list[str], list[Translation]]:
    """Our metric names for a comma-separated list of names in any spelling, and the
    translations made (aliases included, e.g. ``recip_rank -> RR``).

    ``trec_eval_preset`` (the evaluation uses the ``trec_eval`` preset) makes ``rbp`` and
    ``rbp_resid`` trec_eval's measures (p = 0.9); otherwise they are our aliases (p = 0.8)
    and their translation notes trec_eval's p.

    Raises
    ------
    ConfigError
        As :func:`onlineeval.metrics.parse_metric` for a name no tool knows.
    """
    from onlineeval.metrics.base import parse_metric

    names: list[str] = []
    done: list[Translation] = []
    for item in split_metric_list(text):
        given = item.strip()
        if not given:
            names.append(item)  # parse_metrics reports the empty item with its position
            continue
        if given in _TREC_OWN_DEFAULTS and trec_eval_preset:
            names.append(str(parse_metric(_TREC_OWN_DEFAULTS[given])))
            done.append(Translation(given, (names[-1],), "trec_eval"))
            continue
        try:
            metric = parse_metric(given, translate_names=False)
        except ConfigError as exc:
            found = translate_instead(given, exc)
            # the labels the results carry (str of the metric: IPrec(recall=0), not a template's spelling)
            found = replace(found, metrics=tuple(str(parse_metric(m, translate_names=False)) for m in found.metrics))
            names.extend(found.metrics)
            done.append(found)
            continue
        names.append(str(metric))
        if str(metric) == given and _TREC_FIXED.get(given) == given:
            # bpref, infAP: trec_eval's names spelled as ours; they promise trec_eval's number too
            done.append(Translation(given, (str(metric),), "trec_eval", note="also onlineeval's name"))
        elif given in _TREC_OWN_DEFAULTS:
            note = f"trec_eval's {given} is {_TREC_OWN_DEFAULTS[given]}, used under the trec_eval preset"
            done.append(Translation(given, (str(metric),), "alias", note=note))
        elif str(metric) != given:
            done.append(Translation(given, (str(metric),), "trec_eval" if given in _TREC_ALIASES else "alias"))
    return names, done


def trec_eval_named(translations: list[Translation]) -> list[Translation]:
    """The translations of names that are trec_eval's (``map``, ``ndcg_cut_10``, ``P.5,10``, ``rbp``): names that
    promise trec_eval's number, which they give under the ``trec_eval`` conventions preset only (the default
    preset's exponential gain and ``empty=exclude`` give another number). ``onlineeval evaluate`` uses the
    ``trec_eval`` preset when every metric is so named and no ``--preset`` is given."""
    return [t for t in translations if t.source == "trec_eval" or t.given in _TREC_OWN_DEFAULTS]


def shared_name(translation: Translation) -> bool:
    """Whether a trec_eval name is also our own spelling of the metric (``bpref``, ``infAP``): in a list with
    other names of ours it does not force the ``trec_eval`` preset (the output then says its number is not
    trec_eval's); alone or with trec_eval names only it chooses that preset, as ``map`` does."""
    return translation.source == "trec_eval" and translation.metrics == (translation.given,) \
        and _TREC_FIXED.get(translation.given) == translation.given


def common_rel_min(translations: list[Translation], n_metrics: int, rel_min: int, fixed: bool = False) -> int:
    """The relevance threshold of an evaluation whose names may carry ``rel=``.

    Parameters
    ----------
    translations:
        From :func:`resolve_metric_list`.
    n_metrics:
        How many metrics the list has in all.
    rel_min:
        The threshold of the conventions (preset or ``--rel-min``).
    fixed:
        ``True`` when the user set ``rel_min`` explicitly (``--rel-min``): a name asking
        for another threshold is then an error.

    Returns
    -------
    int
        ``rel_min`` when no name asks for another one; the asked threshold when every
        metric asks for the same one.

    Raises
    ------
    ConfigError
        When names ask for different thresholds, or some metrics ask for one and others
        do not: one evaluation has one threshold, so that would silently change the others.
    """
    asked = [t for t in translations if t.rel_min is not None and t.rel_min != rel_min]
    if not asked:
        return rel_min
    levels = {t.rel_min for t in translations if t.rel_min is not None}
    carrying = sum(len(t.metrics) for t in translations if t.rel_min is not None)
    first = asked[0]
    if fixed:
        raise ConfigError(
            ("metrics", first.given), f"asks for the relevance threshold {first.rel_min}, but --rel-min is {rel_min}"
        )
    if len(levels) == 1 and carrying == n_metrics:
        return int(first.rel_min)  # type: ignore[arg-type]
    raise ConfigError(
        ("metrics", first.given),
        f"asks for the relevance threshold {first.rel_min}, but the evaluation's threshold (rel_min) is {rel_min} "
        "and applies to every metric; give every metric the same rel= (or --rel-min), or evaluate it separately",
    )


def external_names(metric_name: str) -> dict[str, list[str]]:
    """The trec_eval and ir_measures spellings that translate to the registered metric
    ``metric_name`` (as listed by ``onlineeval metrics``)."""
    trec = [k for k, v in _TREC_FIXED.items() if v.split("(")[0].split("@")[0] == metric_name]
    for family, (template, integer) in _TREC_FAMILIES.items():
        if template.split("(")[0].split("@")[0] == metric_name:
            arg = "k" if integer else "x"
            trec += [f"{family}_<{arg}>", f"{family}.<{arg}>[,<{arg}>...]"]
    trec += [f"{k} ({v} under the trec_eval preset)" for k, v in _TREC_OWN_DEFAULTS.items()
             if v.split("(")[0] == metric_name]
    if metric_name == "IPrecAvg":
        trec.append("11pt_avg.<level>[,<level>...]")
    if metric_name == "nDCG":
        trec.append("ndcg.<grade>=<gain>[,...]")
    special = {"IPrec": "IPrec@<recall>", "Judged": "Judged@<k>", "ERR": ERR_IR_MEASURES}
    irm = [special.get(measure, measure) for measure, (ours, _) in _IRM.items() if ours == metric_name]
    return {"trec_eval": trec, "ir_measures": irm}
