"""Numerical methods of exactq, installed as ``exactq.solvers``; importing registers them."""

from . import closed_form, ctmc_method  # noqa: F401
