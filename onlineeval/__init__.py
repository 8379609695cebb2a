"""onlineeval: online-evaluation simulator and interleaving toolkit for rankers.

Core package: metrics, interleaving, statistics, estimators, input/output and the CLI.
The core never imports :mod:`simulations`; only :mod:`onlineeval.cli` does.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("onlineeval")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
