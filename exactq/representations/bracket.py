"""The Bracket representation: comparison systems that bound a model's measures.

When a model's measure is hard to compute exactly, it can often be bounded by the
same measure of *comparison systems* that are easier to solve and are ordered against
the model (stochastic ordering, precedence relations on the value function; van
Houtum, Zijm, Adan & Wessels 1998). A comparison parameter (a threshold ``T``)
controls how far the systems are from the model: the bounds tighten as it grows.

A :class:`Bracket` holds the comparison systems built at one value of the parameter,
each as its own representation (for the shortest queue, two QBDs). Its solver solves
each system with the solver registered for that system's type and returns a
:class:`BracketSolution`; the model reads its bounds off the solutions. The
``bracket`` method driver (:mod:`exactq.methods`) grows the parameter until the
bounds are as close as asked and intersects the bounds of every parameter it tried.

References
----------
G. J. van Houtum, W. H. M. Zijm, I. J. B. F. Adan and J. Wessels, "Bounds for
performance characteristics: a systematic approach via cost structures", Stochastic
Models 14 (1998) 205-224.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from ..errors import ModelError

__all__ = ["Bracket", "BracketSolution"]


@dataclass(frozen=True)
class Bracket:
    """Comparison systems at one value of their comparison parameter.

    Parameters
    ----------
    systems : mapping str -> representation
        The comparison systems by name (for example ``"jockeying"`` and ``"blocking"``),
        each a representation with a registered solver.
    parameter : int
        The comparison parameter (``>= 0``) the systems were built at.
    parameter_name : str
        What the parameter is called (the model's parameter, e.g. ``"threshold"``).

    Raises
    ------
    ModelError
        No systems, a system name that is not a non-empty string, or a parameter that
        is not an integer >= 0.

    Examples
    --------
    The M/M/1 queue bounded by itself, as a QBD with one phase:

    >>> from exactq.representations import QBD
    >>> b = Bracket({"self": QBD([[0.5]], [[-1.5]], [[1.0]])}, parameter=1)
    >>> list(b.systems), b.parameter, b.parameter_name
    (['self'], 1, 'threshold')
    """

    systems: Mapping[str, Any]
    parameter: int
    parameter_name: str = "threshold"

    def __post_init__(self):
        if not isinstance(self.systems, Mapping) or not self.systems:
            raise ModelError("systems must be a non-empty mapping name -> representation")
        for name in self.systems:
            if not (isinstance(name, str) and name):
                raise ModelError(f"system names must be non-empty strings; got {name!r}")
        if int(self.parameter) != self.parameter or self.parameter < 0:
            raise ModelError(f"{self.parameter_name} must be an integer >= 0; got {self.parameter!r}")
        object.__setattr__(self, "systems", MappingProxyType(dict(self.systems)))
        object.__setattr__(self, "parameter", int(self.parameter))


@dataclass
class BracketSolution:
    """The solutions of a :class:`Bracket`'s systems, by name.

    Attributes
    ----------
    solutions : dict str -> solution
        One solution per comparison system (of the type its solver returns).
    parameter : int
        The bracket's comparison parameter.
    seconds : float
        Time spent solving the systems.

    Examples
    --------
    >>> from types import SimpleNamespace as S
    >>> b = BracketSolution({"a": S(residual=1e-15, nit=3), "b": S(residual=2e-15, nit=4)}, 5)
    >>> b.residual, b.nit
    (2e-15, 7)
    """

    solutions: dict
    parameter: int
    seconds: float = 0.0

    def __getitem__(self, name: str):
        return self.solutions[name]

    @property
    def residual(self) -> float | None:
        """The largest residual of the systems' solutions (``None`` if none reports one)."""
        r = [s.residual for s in self.solutions.values() if getattr(s, "residual", None) is not None]
        return max(r) if r else None

    @property
    def nit(self) -> int | None:
        """The iterations of all systems' solvers together."""
        n = [s.nit for s in self.solutions.values() if getattr(s, "nit", None) is not None]
        return sum(n) if n else None
