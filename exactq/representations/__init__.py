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
:class:`Population`    occupancy drift via the dispatch tail, its      :class:`FixedPoint`,
                       Jacobian, the tail closure, the 1/N term        :class:`RefinedFixedPoint`
:class:`PDMP`          window increase a(w), loss rate lambda(w),      :class:`PDMPSolution`
                       decrease nu w or d(w), bounds w_min, w_max
:class:`Truncation`    how an infinite model was made finite           --
=====================  ==============================================  =====================

Routing (:mod:`.routing`): :class:`RoutingProblem` (PS servers, holding costs, job
classes, K dispatchers) -> :class:`RoutingSolution`; :class:`NetworkRoutingProblem`
(a networkx graph of links with latency functions, demands) ->
:class:`NetworkRoutingSolution`; :class:`LinearProgram` (min c x, A x = b, box
bounds) -> :class:`LinearProgramSolution`; :class:`RootProblem` (F(x) = 0 on a
bracket or from a start) -> :class:`RootSolution`.

The table of every representation, with the models that produce it and the solvers
that consume it, is in ``docs/architecture.md``.
"""

from ..ctmc import CTMC, DTMC, StationaryDistribution
from ..statespace import SortedSpace, StateSpace
from ..truncation import Truncation
from .population import FixedPoint, Population, RefinedFixedPoint
from .qbd import QBD, QBDSolution
from .routing import (LinearProgram, LinearProgramSolution, NetworkRoutingProblem, NetworkRoutingSolution,
                      RootProblem, RootSolution, RoutingProblem, RoutingSolution)

__all__ = ["CTMC", "DTMC", "StationaryDistribution", "QBD", "QBDSolution", "Truncation", "StateSpace",
           "SortedSpace", "Population", "FixedPoint", "RefinedFixedPoint"]
__all__ += ["RoutingProblem", "RoutingSolution", "NetworkRoutingProblem", "NetworkRoutingSolution", "LinearProgram",
            "LinearProgramSolution", "RootProblem", "RootSolution"]

# Walks (:mod:`.walk`): :class:`QuarterPlaneWalk` (jump rates on the six homogeneous parts
# of the quarter plane) -> a :class:`WalkSolution` (a series of product forms). Brackets
# (:mod:`.bracket`): :class:`Bracket` (comparison systems at a threshold) -> :class:`BracketSolution`.
from .bracket import Bracket, BracketSolution  # noqa: E402
from .walk import JoinShorter, PartSums, QuarterPlaneWalk, WalkSolution  # noqa: E402

__all__ += ["QuarterPlaneWalk", "JoinShorter", "WalkSolution", "PartSums", "Bracket", "BracketSolution"]

# Window processes (:mod:`.pdmp`): :class:`PDMP` (increase a(w), loss rate lambda(w), decrease
# nu w or d(w), window bounds; power laws declared as :class:`PowerLaw`) -> :class:`PDMPSolution`
# (the stability verdict, moments, density, CDF); :class:`CDFPair` -> :class:`StochasticOrdering`.
from .pdmp import PDMP, CDFPair, PDMPSolution, PowerLaw, StabilityVerdict, StochasticOrdering  # noqa: E402

__all__ += ["PDMP", "PowerLaw", "PDMPSolution", "StabilityVerdict", "CDFPair", "StochasticOrdering"]

# Decision processes (:mod:`.mdp`): :class:`MDP` (one sparse row per state and choice, rows grouped by
# state; continuous time by uniformisation) with the objectives :class:`Reachability`,
# :class:`TotalReward` and :class:`LongRunAverage` -> :class:`MDPSolution` (lower and upper per state,
# the optimal :class:`Scheduler`).
from .mdp import MDP, LongRunAverage, MDPSolution, Reachability, Scheduler, TotalReward  # noqa: E402

__all__ += ["MDP", "Scheduler", "Reachability", "TotalReward", "LongRunAverage", "MDPSolution"]
