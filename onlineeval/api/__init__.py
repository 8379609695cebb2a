r"""The Python API: every job of the command line as one call on DataFrames, dicts or files.

``import onlineeval.api`` is cheap (numpy, pandas, scipy.stats, matplotlib and SimPy are
imported by the calls that use them); ``onlineeval.evaluate`` etc. resolve here lazily.

* :func:`evaluate`: offline metrics of runs on qrels (pandas DataFrames with ir_measures'
  columns ``query_id, doc_id, relevance`` / ``score``, pytrec_eval's dicts of dicts
  ``{qid: {docid: value}}``, or TREC files) under named conventions, with the paired
  comparisons against a baseline; the same names, presets, conventions and numbers as
  ``onlineeval evaluate``.
* :func:`simulate`: the online simulation of ``onlineeval simulate`` from a config path, a
  dict or a validated :class:`simulations.config.Config`, in memory unless ``output`` is
  given; tables as DataFrames, plots as matplotlib figures.
* :func:`fit_clicks`, :func:`evaluate_clicks`, :func:`sample_clicks`: click models on a
  DataFrame of sessions (``session, query, docs, clicks``) or a click-log file.
* :func:`validate`, :func:`assert_valid_interleaver`: the interleaving validation battery
  of ``onlineeval validate`` as a report object, and a pytest helper; :func:`validate_propensities`: a
  counterfactual log's recorded propensities against its logging policy (``--propensity-log``).
* :func:`estimate`: off-policy estimates of ``onlineeval estimate`` on a logged DataFrame
  (``query, shown, clicks`` and propensity columns) or a JSON-lines log.

Each topic is a submodule (:mod:`~onlineeval.api._evaluate`, :mod:`~onlineeval.api._simulate` (simulations
and sweeps), :mod:`~onlineeval.api._clicks`, :mod:`~onlineeval.api._validate`, :mod:`~onlineeval.api._estimate`;
the input readers they share in :mod:`~onlineeval.api._inputs`); import the names from here
(``from onlineeval.api import evaluate``) or from :mod:`onlineeval`.

Bad input raises the typed errors the CLI reports: :class:`~onlineeval.errors.ConfigError`
(with the key path of the option, e.g. ``ties``) and :class:`~onlineeval.errors.InputError`
(with the file and line, or the DataFrame row).

Example
-------
>>> import onlineeval
>>> qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
>>> runs = {"A": {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 0.5}},
...         "B": {"q1": {"d2": 2.0, "d1": 1.0}, "q2": {"d3": 0.5}}}
>>> res = onlineeval.evaluate(qrels, runs, "P@1,RR", permutations=200, bootstrap=200)
>>> res.mean("A", "RR"), res.mean("B", "RR")
(1.0, 0.75)
>>> res.aggregate[["system", "metric", "value", "n"]].to_string(index=False)
'system metric  value  n\n     A    P@1   1.00  2\n     A     RR   1.00  2\n     B    P@1   0.50  2\n     B     RR   0.75  2'
"""

from __future__ import annotations

from onlineeval.api._clicks import evaluate_clicks, fit_clicks, sample_clicks
from onlineeval.api._estimate import Estimates, estimate
from onlineeval.api._evaluate import Evaluation, evaluate, evaluate_letor
from onlineeval.api._simulate import Simulation, Sweep, simulate, sweep
from onlineeval.api._validate import assert_valid_interleaver, validate, validate_propensities
from onlineeval.errors import ConfigError, InputError

# the submodules' helpers and type aliases, still importable from here as when the API was one module
from onlineeval.api._clicks import SessionsLike, _click_log, _id_list  # noqa: F401
from onlineeval.api._estimate import (  # noqa: F401
    _logged,
    _plain,
    _target_lists,
)
from onlineeval.api._evaluate import _conventions, _segments  # noqa: F401
from onlineeval.api._inputs import (  # noqa: F401
    IR_MEASURES_COLUMNS,
    PathLike,
    TableLike,
    _frame,
    _is_path,
    _is_single_table,
    _named_runs,
)

__all__ = [
    "ConfigError",
    "Estimates",
    "Evaluation",
    "InputError",
    "Simulation",
    "Sweep",
    "assert_valid_interleaver",
    "estimate",
    "evaluate",
    "evaluate_clicks",
    "evaluate_letor",
    "fit_clicks",
    "sample_clicks",
    "simulate",
    "sweep",
    "validate",
    "validate_propensities",
]


def _doctests() -> dict[str, object]:
    """The API's functions and classes, and their methods with examples, for ``doctest.testmod(onlineeval.api)``
    (tests/test_api_doctests.py): testmod finds only what a module defines itself, these live in submodules."""
    found: dict[str, object] = {}
    for name in __all__:
        obj = globals()[name]
        if not getattr(obj, "__module__", "").startswith(__name__ + "."):
            continue  # ConfigError, InputError: onlineeval.errors'
        found[name] = obj
        for attr, member in vars(obj).items() if isinstance(obj, type) else ():
            fn = member.fget if isinstance(member, property) else member
            if callable(fn) and ">>>" in (fn.__doc__ or ""):
                found[f"{name}.{attr}"] = fn
    return found


__test__ = _doctests()
