"""onlineeval: online-evaluation simulator and interleaving toolkit for rankers.

Core package: metrics, interleaving, statistics, estimators, input/output and the CLI.
The core never imports :mod:`simulations`; only :mod:`onlineeval.cli` does.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("onlineeval")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

#: the Python API (:mod:`onlineeval.api`), resolved lazily (PEP 562) so ``import onlineeval`` stays cheap
_API = (
    "evaluate",
    "evaluate_letor",
    "simulate",
    "sweep",
    "fit_clicks",
    "evaluate_clicks",
    "sample_clicks",
    "validate",
    "validate_propensities",
    "assert_valid_interleaver",
    "estimate",
    "Evaluation",
    "Simulation",
    "Sweep",
    "Estimates",
)

__all__ = ["__version__", *_API]  # the version, then the API as listed in _API


def __getattr__(name: str) -> object:
    if name in _API:
        from onlineeval import api

        return getattr(api, name)
    raise AttributeError(f"module 'onlineeval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
