"""Experiment designs (A/B test, interleaving); one module each, one registry."""

from simulations.designs.ab import ABDesign
from simulations.designs.base import DESIGNS, CheckpointRow, Design, design_class, register_design
from simulations.designs.interleaving import InterleavingDesign

__all__ = ["ABDesign", "InterleavingDesign", "Design", "CheckpointRow", "DESIGNS", "design_class", "register_design"]
