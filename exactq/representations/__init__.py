"""Representations: the plain mathematical objects models hand to solvers.

A model describes itself through one or more representations; a solver accepts only
representations and returns a *solution* object; the model maps the solution to its
measures. Each kind is a small frozen dataclass that validates itself and states its
shapes and conventions. Each module holds one kind and the solution type its solvers
return.

=====================  ==============================================  =====================
representation         holds                                           solution
=====================  ==============================================  =====================
:class:`CTMC`          generator, states, cut rates, rewards, labels   :class:`StationaryDistribution`
:class:`DTMC`          transition matrix, states                       :class:`StationaryDistribution`
:class:`QBD`           A0 (up), A1 (local), A2 (down), boundary        :class:`QBDSolution`
                       blocks; continuous or discrete time
:class:`Truncation`    how an infinite model was made finite           --
=====================  ==============================================  =====================

The table of every representation, with the models that produce it and the solvers
that consume it, is in ``docs/architecture.md``.
"""

from ..ctmc import CTMC, DTMC, StationaryDistribution
from ..statespace import SortedSpace, StateSpace
from ..truncation import Truncation
from .qbd import QBD, QBDSolution

__all__ = ["CTMC", "DTMC", "StationaryDistribution", "QBD", "QBDSolution", "Truncation", "StateSpace",
           "SortedSpace"]
