"""Experiment designs (A/B test, interleaving, counterfactual); one module each, one registry."""

from simulations.designs.ab import ABDesign
from simulations.designs.base import DESIGNS, CheckpointRow, Design, design_class, register_design
from simulations.designs.counterfactual import CounterfactualDesign
from simulations.designs.interleaving import InterleavingDesign

__all__ = [
    "DESIGNS",
    "ABDesign",
    "CheckpointRow",
    "CounterfactualDesign",
    "Design",
    "InterleavingDesign",
    "design_class",
    "register_design",
]
