r"""The logger path of logged impressions (:mod:`onlineeval.io.logged`): the logging policies in the log's id space.

A log whose lines carry a ``logger`` (a policy spec and the scores of the query's candidates)
gets its propensities from :mod:`simulations.policies` policies, built here by the caller's
``build_policy`` (this core package does not import the simulator). :class:`LogPolicy` groups
the queries sharing a spec and a list length under one policy and answers in the log's
(query index, per-query document index) space; :mod:`onlineeval.io.logged` re-exports it. Each line's ``logger``
is checked here too (:func:`_logger_spec`: its policy, its scores, a mixture's components' own scores), for both
readers (:mod:`onlineeval.io.logged`, :mod:`onlineeval.io.logged_fast`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators.base import Propensities

__all__ = ["LogPolicy"]


class LogPolicy:
    r"""The logging policies of a log in its (query index, per-query document index) space.

    Queries sharing a policy spec and a list length ``k`` share one
    :mod:`simulations.policies` policy over a ``(queries, m + 1)`` score matrix: column
    ``c < m`` is the query's ``c``-th scored candidate (its document index), ``-inf`` pads,
    and the last column (always ``-inf``) stands for every larger document index (documents
    a target ranks that are not candidates), so the policy gives them probability 0. Slots
    past a group's ``k`` carry item propensity 1 and leave the prefix unchanged when empty;
    a document there has probability 0. Implements
    :class:`onlineeval.estimators.PropensityModel`, ``shown_probability``,
    ``item_position_marginals`` and ``pair_marginals``.
    """

    def __init__(self, policies: list[Any], ks: list[int], cols: list[int], group: NDArray[np.int64],
                 local: NDArray[np.int64], path: str | None = None, first_lines: Sequence[int] | None = None,
                 query_ids: Sequence[str] | None = None,
                 own_components: Sequence[tuple[int, ...]] | None = None) -> None:
        self._path = path  # the log file, and per query index the line of its first logger and its id (messages)
        self._first_lines = None if first_lines is None else [int(v) for v in first_lines]
        self._query_ids = None if query_ids is None else list(query_ids)
        self._policies = policies  # per group
        self._ks = ks  # per group: the policy's k
        self._cols = cols  # per group: columns of its score matrix (the last one = non-candidate)
        self._group = group  # per query index
        self._local = local  # per query index: its row in its group's score matrix
        # per group: the (1-based) mixture components carrying their own logged scores (descriptions)
        self._own_components = [tuple(o) for o in own_components] if own_components else [()] * len(policies)

    @property
    def policies(self) -> tuple[Any, ...]:
        """The :mod:`simulations.policies` policy of each group of queries."""
        return tuple(self._policies)

    def describe(self) -> list[str]:
        """One line per distinct policy (the policies' own descriptions; a mixture whose components carry their own
        scores says which: each randomises around its own ranker, not the logger's)."""
        def note(o: tuple[int, ...]) -> str:
            if not o:
                return ""
            which = f"component {o[0]} with its" if len(o) == 1 else f"components {', '.join(map(str, o))} with their"
            return f" ({which} own logged scores, the others with the logger's)"

        return sorted({str(p.describe()) + note(o) for p, o in zip(self._policies, self._own_components, strict=True)})

    def item_methods(self) -> list[str]:
        """How each distinct policy computes its item-position propensities (its conventions' ``item``; a
        mixture's components' too)."""
        out: set[str] = set()
        for p in self._policies:
            conv = p.conventions()
            for c in [conv, *conv.get("components", [])]:
                if c.get("item"):
                    out.add(f"{c.get('policy', p.name)}: {c['item']}")
        return sorted(out)

    def monte_carlo_queries(self) -> int:
        """Log queries whose item propensities are Monte Carlo estimates (Plackett-Luce
        above its exact budget), not exact values."""
        count = 0
        for g, p in enumerate(self._policies):
            rows = self._local[self._group == g]
            count += int(np.count_nonzero(~np.asarray(p.marginals_exact(rows), dtype=bool)))
        return count

    def marginals_exact(self, query: Any) -> NDArray[np.bool_]:
        """Per log query index in ``query``: whether its item propensities are exact (not a Monte Carlo estimate)."""
        q = np.asarray(query, dtype=np.int64).reshape(-1)
        out = np.ones(q.size, dtype=bool)
        groups = self._group[q]
        for g in np.unique(groups):  # a loop over distinct policies
            rows = np.flatnonzero(groups == g)
            out[rows] = np.asarray(self._policies[g].marginals_exact(self._local[q[rows]]), dtype=bool)
        return out

    def _columns(self, g: int, r: NDArray[np.int64]) -> tuple[NDArray[np.int64], int]:
        """Group ``g``'s columns of documents ``r``, ``(rows, k_g)`` (``-1`` empty); slots past
        ``k_g`` are dropped (the caller handles them)."""
        kg, last = self._ks[g], self._cols[g] - 1
        c = np.where(r >= last, last, r)
        head = np.full((r.shape[0], kg), -1, dtype=np.int64)
        w = min(kg, r.shape[1])
        head[:, :w] = c[:, :w]
        return head, w

    def propensities(self, query: Any, rankings: Any) -> Propensities:
        q = np.asarray(query, dtype=np.int64).reshape(-1)
        r = np.asarray(rankings, dtype=np.int64)
        n, width = r.shape
        plist, pre, item = np.ones(n), np.ones((n, width)), np.ones((n, width))
        groups = self._group[q]
        for g in np.unique(groups):  # a loop over distinct policies
            rows = np.flatnonzero(groups == g)
            head, w = self._columns(int(g), r[rows])
            p = self._policies[g].propensities(self._local[q[rows]], head)
            tail = r[rows, self._ks[g]:]
            tail_ok = np.cumprod(tail < 0, axis=1).astype(bool)
            pre_g = np.concatenate([p.prefix[:, :w], p.prefix[:, -1:] * tail_ok], axis=1)
            item_g = np.concatenate([p.item[:, :w], (tail < 0).astype(np.float64)], axis=1)
            pre[rows], item[rows], plist[rows] = pre_g, item_g, pre_g[:, -1]
        return Propensities(plist, pre, item)

    def shown_probability(self, query: Any, docs: Any) -> NDArray[np.float64]:
        """``(n, w)`` probability that each document is shown anywhere in its query's top ``k``."""
        q = np.asarray(query, dtype=np.int64).reshape(-1)
        d = np.asarray(docs, dtype=np.int64)
        n, width = d.shape
        out = np.ones((n, width))
        groups = self._group[q]
        for g in np.unique(groups):
            rows = np.flatnonzero(groups == g)
            kg, last = self._ks[g], self._cols[g] - 1
            c = np.where(d[rows] >= last, last, d[rows])
            chunks = -(-width // kg)
            padded = np.full((rows.size, chunks * kg), -1, dtype=np.int64)
            padded[:, :width] = c
            qq = np.repeat(self._local[q[rows]], chunks)
            p = self._policies[g].shown_probability(qq, padded.reshape(rows.size * chunks, kg))
            out[rows] = p.reshape(rows.size, chunks * kg)[:, :width]
        return out

    def item_position_marginals(self, query: Any) -> NDArray[np.float64]:
        """``(n, m, k)`` P(slot ``j`` shows document ``d``), zero-padded to the widest group."""
        q = np.asarray(query, dtype=np.int64).reshape(-1)
        groups = self._group[q]
        out = np.zeros((q.size, max(self._cols), max(self._ks)))
        for g in np.unique(groups):
            rows = np.flatnonzero(groups == g)
            mg = np.asarray(self._policies[g].item_position_marginals(self._local[q[rows]]))
            out[rows, : mg.shape[1], : mg.shape[2]] = mg
        return out

    def pair_marginals(self, query_one: int) -> NDArray[np.float64]:
        """``(k, m, k, m)`` P(slot ``j`` shows ``a`` and slot ``l`` shows ``b``) of one query."""
        g = int(self._group[int(query_one)])
        try:
            return np.asarray(self._policies[g].pair_marginals(int(self._local[int(query_one)])))
        except ConfigError as exc:
            if tuple(exc.key_path) != ("pair_max_states",):
                raise
            q = int(query_one)
            qid = repr(self._query_ids[q]) if self._query_ids is not None else str(q)
            line = self._first_lines[q] if self._first_lines is not None else None
            limit = getattr(self._policies[g], "pair_max_states", None)
            what = re.sub(r"query \d+ has", f"query {qid} has", exc.message.split(" (raise ")[0])
            # located in the text: the estimate command turns it into the estimator's undefined row (the others
            # still report), whose message is this text alone
            at = f"{self._path}:{line}" if self._path is not None and line is not None else "the log"
            raise InputError(
                f"logger: the pseudoinverse needs the logging policy's pair marginals of query {qid} (its logger at "
                f"{at}, the query's first impression): {what}. Raise 'pair_max_states' (now {limit}), a key of each "
                "line's \"logger\" object beside \"policy\" ({\"policy\": \"plackett_luce\", ..., "
                "\"pair_max_states\": N}, N at least those states; the exact dynamic programme's time and memory grow "
                "with N for each such query), or drop the pseudoinverse", self._path, line) from None


#: the JSON number types (bool excluded: ``type(True) is bool``)
_NUMBER_TYPES = frozenset((int, float))


def _is_number(x: Any) -> bool:
    return (type(x) is float or type(x) is int) and math.isfinite(x)


def _finite_scores(scores: dict[str, Any], at: str, path: str, line: int) -> None:
    """Every value of ``scores`` a finite JSON number, else an error naming ``at[doc]``, the value and the line."""
    values = scores.values()
    if not (set(map(type, values)) <= _NUMBER_TYPES and all(map(math.isfinite, values))):
        d, v = next((d, v) for d, v in scores.items() if not _is_number(v))
        raise InputError(f"{at}[{d!r}] must be a finite number, got {v!r}", path, line)


def _logger_spec(spec: Any, shown: list[str], path: str, line: int,
                 allowed: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, float]]:
    """A line's ``logger`` checked (naming the line): ``(options, scores)``, the spec without its ``scores`` and the
    candidates' scores (every shown document among them; a mixture's components' own scores checked too)."""
    if not isinstance(spec, dict):
        raise InputError(f"'logger' must be an object with policy, its options and scores, got {spec!r}", path, line)
    if "policy" not in spec or "scores" not in spec:
        raise InputError("'logger' needs 'policy' and 'scores' (the logging policy's score of each candidate)",
                         path, line)
    if spec["policy"] not in allowed:
        raise InputError(f"unknown logging policy {spec['policy']!r}; allowed: {', '.join(allowed) or 'none'}",
                         path, line)
    scores = spec["scores"]
    if not isinstance(scores, dict) or not scores:
        raise InputError("'logger.scores' must be a non-empty object {doc id: score}", path, line)
    _finite_scores(scores, "logger.scores", path, line)
    if not scores.keys() >= set(shown):
        missing = next(d for d in shown if d not in scores)
        raise InputError(f"shown document {missing!r} is not among the logger's scored candidates", path, line)
    _own_scores(spec, scores, "logger", path, line)
    options = {key: value for key, value in spec.items() if key != "scores"}
    return options, scores


def _own_scores(spec: dict[str, Any], scores: dict[str, Any], where: str, path: str, line: int) -> None:
    """Checks a mixture's components' own ``scores`` (intervention harvesting: each component randomises around
    its own ranker): each an object scoring exactly the documents of ``scores`` (the logger's candidates) with
    finite numbers; a component without one uses the logger's. Nested mixtures are checked likewise."""
    components = spec.get("components")
    if spec.get("policy") != "mixture" or not isinstance(components, list):
        return
    for i, comp in enumerate(components):
        if not isinstance(comp, dict) or "scores" not in comp:
            continue  # (a malformed component is the policy's error, naming its key)
        own, at = comp["scores"], f"{where}.components[{i}].scores"
        if not isinstance(own, dict) or not own:
            raise InputError(f"{at} must be an object {{doc id: score}} of the logger's candidates (its own "
                             f"ranker's scores; without it the component uses logger.scores), got {own!r:.60}",
                             path, line)
        _finite_scores(own, at, path, line)
        if own.keys() != scores.keys():
            missing = next((d for d in scores if d not in own), None)
            what = (f"misses {missing!r}" if missing is not None
                    else f"scores {next(d for d in own if d not in scores)!r}, which logger.scores does not")
            raise InputError(f"{at} must score the logger's candidates, those of logger.scores: it {what}", path,
                             line)
        _own_scores(comp, own, at.removesuffix(".scores"), path, line)


def _named_scores(options: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, float]]]:
    """``options`` (a logger without its ``scores``) with its mixture components' own ``scores`` objects taken
    out, and those objects in the order met: each becomes the name ``"@i"`` (i = 1, 2, ...) of a score matrix, and,
    where any component has its own, every other non-mixture component names the logger's, ``"@0"``. Queries
    whose loggers differ only in scores then share one policy over their score matrices."""
    found: list[dict[str, float]] = []

    def walk(spec: dict[str, Any]) -> dict[str, Any]:
        components = spec.get("components")
        if spec.get("policy") != "mixture" or not isinstance(components, list):
            return spec
        out = []
        for comp in components:
            if isinstance(comp, dict):
                comp = dict(comp)
                if isinstance(comp.get("scores"), dict):
                    found.append(comp["scores"])
                    comp["scores"] = f"@{len(found)}"
                comp = walk(comp)
            out.append(comp)
        return {**spec, "components": out}

    named = walk(options)
    if not found:
        return options, found

    def fill(spec: dict[str, Any]) -> None:
        for comp in spec.get("components") or ():
            if isinstance(comp, dict):
                if comp.get("policy") == "mixture":
                    fill(comp)
                else:
                    comp.setdefault("scores", "@0")

    fill(named)
    return named, found


def _logger_policy(
    logger_rows: Sequence[tuple[dict[str, Any], dict[str, float]]],
    query_ids: Sequence[str],
    qcodes: NDArray[np.int64],
    query_k: NDArray[np.int64],
    lines: NDArray[np.int64],
    path: str,
    build_policy: Any,
) -> tuple[LogPolicy, str, list[list[str]]]:
    """The :class:`LogPolicy` of the logger lines and each query's candidates (column order).

    ``logger_rows``: each impression's ``(options, scores)``; ``query_ids``: its query id (for messages)."""
    nq = int(query_k.size)
    per_query: dict[int, tuple[int, str]] = {}  # query -> (first row, its logger as canonical JSON)
    for i, row in enumerate(logger_rows):
        q = int(qcodes[i])
        if q in per_query and logger_rows[per_query[q][0]] is row:  # the reader's shared object: the same logger
            continue
        options, scores = row
        key = json.dumps([options, scores], sort_keys=True)
        if q not in per_query:
            per_query[q] = (i, key)
        elif per_query[q][1] != key:
            raise InputError(
                f"the logger (spec or scores) differs from line {int(lines[per_query[q][0]])} for the same query "
                f"{query_ids[i]!r}; the logger path needs one logging policy per query (give per-impression "
                "'propensities' instead)", path, int(lines[i]))
    groups: dict[tuple[str, int], list[int]] = {}
    own: list[list[dict[str, float]]] = []  # per query: its mixture components' own scores, in spec order
    for q in range(nq):  # a loop over distinct queries
        options, found = _named_scores(logger_rows[per_query[q][0]][0])
        own.append(found)
        groups.setdefault((json.dumps(options, sort_keys=True), int(query_k[q])), []).append(q)
    policies, ks, cols, own_components = [], [], [], []
    group = np.zeros(nq, dtype=np.int64)
    local = np.zeros(nq, dtype=np.int64)
    names = set()
    for g, ((spec_text, k), members) in enumerate(groups.items()):
        m = max(len(logger_rows[per_query[q][0]][1]) for q in members) + 1
        mats = [np.full((len(members), m), -np.inf) for _ in range(1 + len(own[members[0]]))]
        for row, q in enumerate(members):
            scores = logger_rows[per_query[q][0]][1]
            mats[0][row, : len(scores)] = list(scores.values())
            for mat, theirs in zip(mats[1:], own[q], strict=True):  # the candidates in logger.scores' order
                mat[row, : len(scores)] = [theirs[d] for d in scores]
            group[q], local[q] = g, row
        spec = json.loads(spec_text)
        names.add(str(spec["policy"]))
        own_components.append(tuple(i + 1 for i, c in enumerate(spec.get("components") or ())
                                    if isinstance(c, dict) and str(c.get("scores", "@0")) != "@0"))
        try:
            policies.append(build_policy(spec, mats[0] if len(mats) == 1 else
                                         {f"@{i}": mat for i, mat in enumerate(mats)}, k))
        except (ConfigError, InputError, ValueError, TypeError) as exc:
            raise InputError(f"logger: {exc}", path, int(lines[per_query[members[0]][0]])) from None
        ks.append(k)
        cols.append(m)
    docs = [list(logger_rows[per_query[q][0]][1]) for q in range(nq)]
    first_lines = [int(lines[per_query[q][0]]) for q in range(nq)]
    ids = [str(query_ids[per_query[q][0]]) for q in range(nq)]
    policy = LogPolicy(policies, ks, cols, group, local, path, first_lines, ids, own_components)
    return policy, "logger:" + ",".join(sorted(names)), docs
