"""The QuarterPlaneWalk representation (a random walk on the quarter plane) and its solutions.

A continuous-time walk on the states ``(x, y)``, ``x, y >= 0`` integers: the contents
of two queues (jobs, or remaining service phases). The plane is cut into six parts, on
each of which the walk is *homogeneous* (the same jumps at the same rates from every
state of the part):

==============  ===================  =========================================
part            states               typical jumps of a two-queue system
==============  ===================  =========================================
``upper``       ``1 <= x < y``       arrivals join queue x; both queues serve
``lower``       ``1 <= y < x``       arrivals join queue y; both queues serve
``diagonal``    ``x = y >= 1``       arrivals split by the tie rule
``upper_edge``  ``x = 0 < y``        queue x idle
``lower_edge``  ``y = 0 < x``        queue y idle
``origin``      ``x = y = 0``        both idle
==============  ===================  =========================================

Each part holds a mapping ``jump (dx, dy) -> rate``. A jump must keep every state of
its part in the quarter plane (from ``upper`` ``dx >= -1`` and ``dy >= -2``, from
``diagonal`` ``dx, dy >= -1``, from ``upper_edge`` ``dx >= 0`` and ``dy >= -1``, from
the origin ``dx, dy >= 0``, and the mirror images). Rates are in any time unit the
model chooses (the stationary law does not depend on it; a model with rates near the
float limit expresses them relative to its largest rate).

Why these six parts
-------------------
The compensation approach (Adan, Wessels & Zijm 1990, 1993; Adan & Wessels 1996)
works part by part: a product form ``alpha^x beta^y`` (in the coordinates of one side
of the diagonal) solves the balance equations of a homogeneous part when
``(alpha, beta)`` lies on the *kernel* of that part's jumps, and each compensation step
repairs the equations of the boundary the previous term violated. The classical
decomposition of a two-dimensional walk (Fayolle, Iasnogorodski & Malyshev, *Random
Walks in the Quarter Plane*, 1999) has four parts: the interior, the two axes and the
origin. Shortest-queue-type walks are homogeneous on each *side of the diagonal* but
not across it (an arrival joins the smaller coordinate), so the diagonal is a boundary
too and the interior splits into ``upper``, ``diagonal`` and ``lower``; the axes split
likewise. Holding the rates of every part, rather than a kind name, lets a solver
recognise from the rates the structure it can handle (:meth:`QuarterPlaneWalk.join_shorter_rates`)
and refuse every other walk with the reason.

Solutions
---------
A solver returns a :class:`WalkSolution`: the stationary law (as a series of product
forms), with the probability of any state, the marginal law of each coordinate, the
sums of the law and of the coordinates over each part (:class:`PartSums`), the
series' tail and term count, and an error estimate for a quantity computed from it.
It names no measure: the model maps those quantities to its measures.

References
----------
I. J. B. F. Adan, J. Wessels and W. H. M. Zijm, "Analysis of the symmetric shortest
queue problem", Stochastic Models 6 (1990) 691-713; "Analysis of the asymmetric
shortest queue problem", Queueing Systems 8 (1991) 1-58; "A compensation approach for
two-dimensional Markov processes", Adv. Appl. Probab. 25 (1993) 783-817.
I. J. B. F. Adan and J. Wessels, "Shortest expected delay routing for Erlang servers",
Queueing Systems 23 (1996) 77-105.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Mapping

import numpy as np

from ..errors import ModelError

__all__ = ["QuarterPlaneWalk", "JoinShorter", "WalkSolution", "SymmetricWalkSolution", "PartSums", "PARTS"]

#: the homogeneous parts of the quarter plane, in a fixed order
PARTS = ("upper", "lower", "diagonal", "upper_edge", "lower_edge", "origin")
#: the smallest coordinates of the states of each part (for the validity of jumps)
_CORNER = {"upper": (1, 2), "lower": (2, 1), "diagonal": (1, 1), "upper_edge": (0, 1), "lower_edge": (1, 0),
           "origin": (0, 0)}
_MIRROR = {"upper": "lower", "lower": "upper", "diagonal": "diagonal", "upper_edge": "lower_edge",
           "lower_edge": "upper_edge", "origin": "origin"}


def _jumps(part: str, given) -> Mapping:
    """Validate one part's ``{(dx, dy): rate}``: integer jumps that stay in the quarter plane, rates >= 0."""
    if not isinstance(given, Mapping):
        raise ModelError(f"{part} must be a mapping (dx, dy) -> rate; got {type(given).__name__}")
    out = {}
    x0, y0 = _CORNER[part]
    for key, rate in given.items():
        try:
            dx, dy = key
        except (TypeError, ValueError):
            raise ModelError(f"{part}: a jump must be a pair (dx, dy); got {key!r}") from None
        if int(dx) != dx or int(dy) != dy:
            raise ModelError(f"{part}: jumps must be integers; got {key!r}")
        dx, dy = int(dx), int(dy)
        rate = float(rate)
        if not (math.isfinite(rate) and rate >= 0):
            raise ModelError(f"{part}: the rate of jump {(dx, dy)} must be finite and >= 0; got {rate!r}")
        if x0 + dx < 0 or y0 + dy < 0:
            raise ModelError(f"{part}: jump {(dx, dy)} leaves the quarter plane from state {(x0, y0)}")
        if rate > 0:
            out[(dx, dy)] = out.get((dx, dy), 0.0) + rate
    return MappingProxyType(out)


@dataclass(frozen=True)
class JoinShorter:
    """The rates of a walk in which arrivals join the smaller coordinate.

    Arrivals at rate ``arrival_rate`` add ``jump`` to the smaller coordinate (on the
    diagonal and at the origin to ``x`` with probability ``tie_probability``, else to
    ``y``); each positive coordinate decreases by one at its own rate
    (``service_rates``). Two-server join-the-shortest-queue (``jump = 1``) and
    shortest-expected-delay routing to two identical Erlang-``r`` servers (remaining
    phases, ``jump = r``, ``service_rates`` the phase rates) are walks of this form.

    Examples
    --------
    >>> JoinShorter(1.0, (1.0, 1.0)).load   # lambda / (mu1 + mu2) per unit of work
    0.5
    """

    arrival_rate: float
    service_rates: tuple
    tie_probability: float = 0.5
    jump: int = 1

    @property
    def load(self) -> float:
        """``arrival_rate * jump / (service_rates[0] + service_rates[1])``, without overflow."""
        m = max(self.service_rates)
        return self.arrival_rate / m * self.jump / (self.service_rates[0] / m + self.service_rates[1] / m)


@dataclass(frozen=True)
class QuarterPlaneWalk:
    """A random walk on the quarter plane, homogeneous on six parts (module docstring).

    Parameters
    ----------
    upper, lower, diagonal, upper_edge, lower_edge, origin : mapping
        ``{(dx, dy): rate}`` for the states of each part (see :data:`PARTS`). Zero
        rates are dropped; the mappings are stored read-only.

    Raises
    ------
    ModelError
        A jump that is not a pair of integers, a negative or non-finite rate, or a jump
        that leaves the quarter plane from some state of its part.

    Examples
    --------
    The symmetric two-server shortest-queue walk at lambda = 1, mu = 1: every state of
    the interior is left at rate ``lambda + 2 mu = 3``.

    >>> w = QuarterPlaneWalk.join_shorter(1.0, (1.0, 1.0))
    >>> w.out_rate("upper"), w.out_rate("origin"), w.is_symmetric
    (3.0, 1.0, True)
    >>> dict(w.diagonal) == {(1, 0): 0.5, (0, 1): 0.5, (-1, 0): 1.0, (0, -1): 1.0}
    True
    """

    upper: Mapping
    lower: Mapping
    diagonal: Mapping
    upper_edge: Mapping
    lower_edge: Mapping
    origin: Mapping

    def __post_init__(self):
        for part in PARTS:
            object.__setattr__(self, part, _jumps(part, getattr(self, part)))

    # -- construction ------------------------------------------------------------------
    @classmethod
    def join_shorter(cls, arrival_rate: float, service_rates, tie_probability: float = 0.5,
                     jump: int = 1) -> "QuarterPlaneWalk":
        """The walk of :class:`JoinShorter` with these rates.

        Raises
        ------
        ModelError
            Rates that are not finite and > 0, ``tie_probability`` outside [0, 1] or
            ``jump < 1``.

        Examples
        --------
        >>> w = QuarterPlaneWalk.join_shorter(2.0, (1.0, 3.0), tie_probability=1.0, jump=2)
        >>> dict(w.upper) == {(2, 0): 2.0, (-1, 0): 1.0, (0, -1): 3.0}
        True
        >>> dict(w.origin)
        {(2, 0): 2.0}
        """
        lam = float(arrival_rate)
        mu1, mu2 = (float(m) for m in service_rates)
        q = float(tie_probability)
        r = int(jump)
        for name, v in (("arrival_rate", lam), ("service rate 1", mu1), ("service rate 2", mu2)):
            if not (math.isfinite(v) and v > 0):
                raise ModelError(f"{name} of the walk must be finite and > 0; got {v!r}")
        if not 0 <= q <= 1:
            raise ModelError(f"tie_probability must be in [0, 1]; got {q!r}")
        if r != jump or r < 1:
            raise ModelError(f"jump must be an integer >= 1; got {jump!r}")
        return cls(**_join_shorter_parts(lam, mu1, mu2, q, r))

    # -- declared structure -------------------------------------------------------------
    @property
    def parts(self) -> dict:
        """``{part: {(dx, dy): rate}}`` in the order of :data:`PARTS`."""
        return {p: getattr(self, p) for p in PARTS}

    def out_rate(self, part: str) -> float:
        """Total rate out of a state of ``part``."""
        if part not in PARTS:
            raise ModelError(f"part must be one of {', '.join(PARTS)}; got {part!r}")
        return float(sum(getattr(self, part).values()))

    def mirror(self) -> "QuarterPlaneWalk":
        """The walk with the coordinates exchanged, ``(x, y) -> (y, x)``."""
        return QuarterPlaneWalk(**{_MIRROR[p]: {(dy, dx): v for (dx, dy), v in getattr(self, p).items()}
                                   for p in PARTS})

    def same_rates(self, other: "QuarterPlaneWalk", rtol: float = 1e-12) -> bool:
        """Whether ``other`` has the same jumps, with rates equal to ``rtol`` (relative)."""
        return _same_parts(self.parts, other.parts, rtol)

    @property
    def is_symmetric(self) -> bool:
        """Whether exchanging the coordinates leaves the walk unchanged (exact rates)."""
        return self.same_rates(self.mirror(), rtol=0.0)

    def join_shorter_refusal(self, *, jumps: str, symmetric: bool) -> str | None:
        """Why the walk is not a join-the-shorter walk of the asked kind (``None`` when it is).

        ``jumps``: ``"unit"`` (arrivals add 1) or ``"multiple"`` (they add r >= 2);
        ``symmetric``: equal rates of the two coordinates and ties 1/2. The reasons are
        what the walk solvers' ``applies`` report.

        Examples
        --------
        >>> w = QuarterPlaneWalk.join_shorter(1.5, (1.0, 2.0))
        >>> w.join_shorter_refusal(jumps="unit", symmetric=False) is None
        True
        >>> w.join_shorter_refusal(jumps="unit", symmetric=True)
        'the coordinates decrease at different rates 1 and 2'
        """
        s = self.join_shorter_rates()
        if s is None:
            return ("the walk is not of the join-the-shorter form (arrivals add a jump to the smaller coordinate, "
                    "each positive coordinate decreases by one at its own rate)")
        if jumps == "unit" and s.jump != 1:
            return f"arrivals add {s.jump} to a coordinate, not 1"
        if jumps == "multiple" and s.jump < 2:
            return "arrivals add 1 to a coordinate; this series needs jumps r >= 2"
        if symmetric and s.service_rates[0] != s.service_rates[1]:
            return f"the coordinates decrease at different rates {s.service_rates[0]:g} and {s.service_rates[1]:g}"
        if symmetric and s.tie_probability != 0.5:
            return f"ties go to x with probability {s.tie_probability:g}, not 1/2"
        return None

    def join_shorter_rates(self) -> JoinShorter | None:
        """The :class:`JoinShorter` rates if the walk has that form (rates to 1e-12), else ``None``.

        (Computed once per walk: every solver's ``applies`` asks for it.)

        Examples
        --------
        >>> QuarterPlaneWalk.join_shorter(1.5, (1.0, 2.0), 0.25).join_shorter_rates()
        JoinShorter(arrival_rate=1.5, service_rates=(1.0, 2.0), tie_probability=0.25, jump=1)
        >>> w = QuarterPlaneWalk.join_shorter(1.5, (1.0, 2.0))
        >>> QuarterPlaneWalk(**{**w.parts, "origin": {(1, 0): 1.5}}).join_shorter_rates() is None
        True
        """
        return self._join_shorter

    @cached_property
    def _join_shorter(self) -> JoinShorter | None:
        ups = [k for k in self.upper if k[0] > 0]
        if len(ups) != 1 or ups[0][1] != 0:
            return None
        r = ups[0][0]
        lam = self.upper[(r, 0)]
        mu1, mu2 = self.upper.get((-1, 0), 0.0), self.upper.get((0, -1), 0.0)
        if not (mu1 > 0 and mu2 > 0):
            return None
        q = min(max(self.diagonal.get((r, 0), 0.0) / lam, 0.0), 1.0)
        candidate = _join_shorter_parts(lam, mu1, mu2, q, r)
        return JoinShorter(lam, (mu1, mu2), q, r) if _same_parts(self.parts, candidate, 1e-12) else None


def _join_shorter_parts(lam: float, mu1: float, mu2: float, q: float, r: int) -> dict:
    """The parts of the join-the-shorter walk, zero rates dropped (unvalidated)."""
    down = {(-1, 0): mu1, (0, -1): mu2}
    tie = {k: v for k, v in (((r, 0), lam * q), ((0, r), lam * (1 - q))) if v > 0}
    return {"upper": {(r, 0): lam, **down}, "lower": {(0, r): lam, **down}, "diagonal": {**tie, **down},
            "upper_edge": {(r, 0): lam, (0, -1): mu2}, "lower_edge": {(0, r): lam, (-1, 0): mu1}, "origin": tie}


def _same_parts(a: dict, b: dict, rtol: float) -> bool:
    for p in PARTS:
        x, y = a[p], b[p]
        if x.keys() != y.keys() or any(not math.isclose(x[k], y[k], rel_tol=rtol, abs_tol=0.0) for k in x):
            return False
    return True


# ----------------------------------------------------------------------------------------
# solutions
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartSums:
    """Sums of a stationary law over a set of states: ``P(S)``, ``E[X 1_S]``, ``E[Y 1_S]``.

    Examples
    --------
    >>> PartSums(0.25, 0.5, 1.0) + PartSums(0.5, 0.0, 1.0)
    PartSums(mass=0.75, x=0.5, y=2.0)
    """

    mass: float
    x: float
    y: float

    def __add__(self, other: "PartSums") -> "PartSums":
        return PartSums(self.mass + other.mass, self.x + other.x, self.y + other.y)

    def scaled(self, c: float) -> "PartSums":
        """All three sums times ``c``."""
        return PartSums(self.mass * c, self.x * c, self.y * c)


#: quantities an error estimate can be asked for (:meth:`WalkSolution.error`)
ERROR_KINDS = ("probability", "mean", "time")


@dataclass(frozen=True)
class WalkSolution(abc.ABC):
    """The stationary law of a :class:`QuarterPlaneWalk`, as every walk solver returns it.

    A solver's solution gives, for the walk's coordinates ``(x, y)``:

    * :meth:`probability` of any states,
    * :meth:`part_sums`: the mass and the sums of ``x`` and ``y`` over each part of
      :data:`PARTS` (normalised: the masses add up to one); :meth:`sums` over a union
      of parts, :meth:`mean_min` the mean of the smaller coordinate,
    * :meth:`marginals`: the law of each coordinate up to where the rest is below a
      tolerance,
    * :meth:`error`: the absolute error estimate of a quantity computed from it (the
      series' tail propagated to that quantity, plus rounding amplified by the
      cancellation of the series), and the diagnostics ``tail``, ``n_terms``
      (``nit``), ``residual`` and ``info``.

    Attributes
    ----------
    tol : float
        The accuracy the solver was asked for (the default of :meth:`marginals`).

    Examples
    --------
    The symmetric shortest-queue walk at load 1/2 (MODELS.md: E[X + Y] = 1.42632075):

    >>> from exactq.catalogue import solve_representation
    >>> sol = solve_representation(QuarterPlaneWalk.join_shorter(1.0, (1.0, 1.0)))
    >>> s = sol.sums()
    >>> round(s.mass, 12), round(s.x + s.y, 8)
    (1.0, 1.42632075)
    """

    tol: float = field(default=1e-9, kw_only=True)

    @abc.abstractmethod
    def probability(self, x, y) -> np.ndarray:
        """``P(X = x, Y = y)``, vectorised over integer arrays ``x`` and ``y``."""

    @abc.abstractmethod
    def _part_table(self) -> dict:
        """``{part: PartSums}`` over the parts of :data:`PARTS`, before the final normalisation."""

    @cached_property
    def _normalised(self) -> dict:
        table = self._part_table()
        k = 1.0 / sum(v.mass for v in table.values())
        return {part: table[part].scaled(k) for part in PARTS}

    def part_sums(self) -> dict:
        """``{part: PartSums}`` over the parts of :data:`PARTS`, normalised to total mass one.

        Examples
        --------
        >>> from exactq.catalogue import solve_representation
        >>> t = solve_representation(QuarterPlaneWalk.join_shorter(2.4, (1.0, 2.0))).part_sums()
        >>> round(sum(v.mass for v in t.values()), 12), t["origin"].x, t["upper_edge"].x
        (1.0, 0.0, 0.0)
        """
        return dict(self._normalised)

    @abc.abstractmethod
    def error(self, value, *, kind: str = "probability", rate: float = 1.0) -> float:
        """Absolute error estimate of ``value`` computed from this solution.

        ``kind`` says what ``value`` is: a ``"probability"`` (a sum of the law), a
        ``"mean"`` (a first moment of the coordinates), or a ``"time"`` (such a mean
        divided by rates no smaller than ``rate``, as waiting times are).
        """

    @property
    @abc.abstractmethod
    def diagonal_decay(self) -> float:
        """The geometric decay of ``p(m, m)`` in ``m`` (where :meth:`marginals` starts)."""

    # -- derived quantities --------------------------------------------------------------
    def sums(self, parts=PARTS) -> PartSums:
        """The :class:`PartSums` of a union of parts (default: the whole quarter plane).

        Examples
        --------
        The empty probability of the symmetric shortest queue at rho = 0.9 (MODELS.md
        gives E[L]; P(0, 0) = 0.0422457623 agrees with the truncated chain):

        >>> from exactq.catalogue import solve_representation
        >>> sol = solve_representation(QuarterPlaneWalk.join_shorter(1.8, (1.0, 1.0)))
        >>> round(sol.sums(("origin",)).mass, 10), round(sol.sums().mass, 12)
        (0.0422457623, 1.0)
        """
        table = self.part_sums()
        unknown = [p for p in parts if p not in table]
        if unknown:
            raise ModelError(f"parts must be among {', '.join(PARTS)}; got {unknown}")
        out = PartSums(0.0, 0.0, 0.0)
        for p in parts:
            out = out + table[p]
        return out

    def mean_min(self) -> float:
        """``E[min(X, Y)]``.

        Examples
        --------
        By PASTA the mean wait of the symmetric shortest queue is ``E[min] / mu``
        (MODELS.md: 4.47491282 at rho = 0.9):

        >>> from exactq.catalogue import solve_representation
        >>> round(solve_representation(QuarterPlaneWalk.join_shorter(1.8, (1.0, 1.0))).mean_min(), 8)
        4.47491282
        """
        t = self.part_sums()
        return t["upper"].x + t["lower"].y + t["diagonal"].x

    def marginals(self, tol: float | None = None, max_level: int = 20000) -> tuple:
        """``P(X = k)`` and ``P(Y = k)``, ``k = 0..k_max``, and the mass left out.

        The law is evaluated on the band ``|x - y| <= D`` of ``0 <= x, y <= k_max``
        (the difference decays geometrically and the diagonal like
        :attr:`diagonal_decay`); ``k_max`` and ``D`` grow (x1.5) until the mass left
        out, ``1 - sum``, is below ``tol`` (default ``max(self.tol, 1e-14)``). Returns
        ``(px, py, missing)``; ``missing`` bounds the absolute error of every entry
        (the law is nonnegative).

        Examples
        --------
        Each server is busy with probability rho, so ``P(X = 0) = 1 - rho``:

        >>> from exactq.catalogue import solve_representation
        >>> px, py, missing = solve_representation(QuarterPlaneWalk.join_shorter(1.2, (1.0, 1.0))).marginals(1e-13)
        >>> bool(abs(px[0] - 0.4) < 1e-12 and abs(py.sum() - 1) < 1e-12 and missing < 1e-12)
        True
        """
        tol = max(self.tol, 1e-14) if tol is None else float(tol)
        a0 = self.diagonal_decay
        k = int(math.ceil(math.log(tol * (1 - a0)) / math.log(a0))) + 5 if a0 > 0 else 5
        D = 20
        while True:
            i = np.arange(k + 1)
            d = np.arange(-D, D + 1)
            ii, jj = i[:, None] + np.zeros_like(d)[None, :], i[:, None] + d[None, :]
            ok = (jj >= 0) & (jj <= k)
            p = np.zeros(ii.shape)
            p[ok] = self.probability(ii[ok], jj[ok])
            px = p.sum(axis=1)
            py = np.bincount(jj[ok], weights=p[ok], minlength=k + 1)
            missing = 1.0 - float(px.sum())
            if missing <= tol or k >= max_level:
                return px, py, max(missing, 0.0)
            k, D = int(1.5 * k) + 1, int(1.5 * D) + 1

    @property
    def nit(self) -> int:
        """The number of product-form terms (the series' size)."""
        return int(getattr(self, "n_terms"))

    @staticmethod
    def _checked_kind(kind: str) -> str:
        if kind not in ERROR_KINDS:
            raise ModelError(f"kind must be one of {', '.join(ERROR_KINDS)}; got {kind!r}")
        return kind


@dataclass(frozen=True)
class SymmetricWalkSolution(WalkSolution):
    """A solution whose law is symmetric in ``x`` and ``y``: given as the law of ``(min, |x - y|)``.

    Subclasses give :meth:`min_difference_probability` and the sums of the unordered
    law (:meth:`_mirrored`); this class gives the law of the pair and the six parts.

    Examples
    --------
    >>> from exactq.catalogue import solve_representation
    >>> s = solve_representation(QuarterPlaneWalk.join_shorter(1.0, (1.0, 1.0)))
    >>> bool(s.probability(2, 4) == s.probability(4, 2) == s.min_difference_probability(2, 2) / 2)
    True
    """

    @abc.abstractmethod
    def min_difference_probability(self, m, n) -> np.ndarray:
        """``P(min(X, Y) = m, |X - Y| = n)``, vectorised over integer arrays ``m``, ``n``."""

    def probability(self, x, y) -> np.ndarray:
        """``P(X = x, Y = y)``: half of ``P(m, n)`` off the diagonal (the law is symmetric)."""
        x, y = np.asarray(x), np.asarray(y)
        m, n = np.minimum(x, y), np.abs(x - y)
        p = self.min_difference_probability(m, n)
        return np.where(n > 0, p / 2, p)

    @staticmethod
    def _mirrored(half, edge, diagonal, origin: float) -> dict:
        """The six parts from the sums of the unordered law.

        ``half = (mass, sum of m, sum of n)`` over ``m >= 1, n >= 1``; ``edge = (mass,
        sum of n)`` over ``m = 0, n >= 1``; ``diagonal = (mass, sum of m)`` over
        ``n = 0, m >= 1``; ``origin`` the mass of ``(0, 0)``. Off the diagonal each
        unordered state is two states of the pair, one on each side.
        """
        (hm, hx, hn), (em, en), (dm, dx) = half, edge, diagonal
        upper = PartSums(hm / 2, hx / 2, (hx + hn) / 2)
        side = PartSums(em / 2, 0.0, en / 2)
        return {"upper": upper, "lower": PartSums(upper.mass, upper.y, upper.x), "diagonal": PartSums(dm, dx, dx),
                "upper_edge": side, "lower_edge": PartSums(side.mass, side.y, side.x),
                "origin": PartSums(origin, 0.0, 0.0)}
