"""SimPy simulations of online experiments: traffic, users, designs, replicates, analysis.

Entry point: :func:`simulations.job.simulate` (``onlineeval simulate --config``).
Layering: ``simulations`` uses ``clickmodels`` and the ``onlineeval`` core; the core
never imports ``simulations`` (only :mod:`onlineeval.cli` does).
"""

__all__ = ["simulate", "load_config"]


def __getattr__(name: str):  # lazy: importing the package stays cheap
    if name == "simulate":
        from simulations.job import simulate

        return simulate
    if name == "load_config":
        from simulations.config import load_config

        return load_config
    raise AttributeError(name)
